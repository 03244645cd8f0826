"""semigroup_aggregates: a user aggregate without an inverse over one big group, under 1k-row changes.

A user aggregate with g and no inverse d (here a bitwise OR of the values' low 40 bits, and a product
modulo a prime) cannot undo a delete from its accumulated value. dbspark keeps such a group under a
scan tree (`columnar/scan_fold.py`, the LFTJ seed's §2.3.3 / §3.1.1): a step refolds the change's pages
and their ancestors. Beside it, the same circuit with the trees switched off (`scan_fold.TREES`): the
group's rows folded again by f and g at every step (`ordered_fold`, O(group)).

A single group (g = 0) of n values (full: n = 10^4, 10^5, 10^6; --quick: 10^4, 10^5) is loaded (not
timed); then each step inserts 500 new values and deletes 500 present ones, and the step is timed
(wall and this process's CPU). Anchor: DuckDB applying the change and computing `bit_or` of the current
table (its own C aggregate: a recompute, O(n)). Every step, the views must equal DuckDB's answer and
each other.
"""

from __future__ import annotations

import time
from typing import Any

import duckdb
import numpy as np
import polars as pl

import dbspark
from bench import harness as h
from dbspark.columnar import scan_fold

SEED = 4242
STEPS = 10
WARMUP = 1
CHANGE = 1000
P = 1_000_003
BITOR = dbspark.UserAggregate("bitor", f=lambda x: x, g=lambda a, b: a | b, dtype="int64")
PRODMOD = dbspark.UserAggregate("prodmod", f=lambda x: x % P or 1, g=lambda a, b: a * b % P, dtype="int64")
SYSTEMS = ("trees", "refold")


def _prepare(n: int, steps: int) -> tuple[pl.DataFrame, list[tuple[pl.DataFrame, pl.DataFrame]]]:
    rng = np.random.default_rng(SEED + n)
    init = pl.DataFrame({"id": np.arange(n), "g": np.zeros(n, np.int64), "x": rng.integers(0, 1 << 40, n)})
    order = rng.permutation(n)
    half = CHANGE // 2
    changes = []
    for i in range(steps):
        ids = np.arange(n + i * half, n + (i + 1) * half)
        ins = pl.DataFrame({"id": ids, "g": np.zeros(half, np.int64), "x": rng.integers(0, 1 << 40, half)})
        changes.append((ins, init[order[i * half : (i + 1) * half]]))
    return init, changes


def _dbspark(system: str, init: pl.DataFrame, frames: list[pl.DataFrame], n: int) -> dict[str, Any]:
    before = scan_fold.TREES
    scan_fold.TREES = system == "trees"
    try:
        c = dbspark.Circuit()
        a = c.input("a", {"g": "int64", "x": "int64"})
        c.output("v", a.aggregate(by="g", bo=(BITOR, "x"), pm=(PRODMOD, "x")))
        rt = c.run("local")
    finally:
        scan_fold.TREES = before
    h.collect()
    with h.phase(f"{system} n={n:,}: load"), h.Timer() as load:
        rt.push("a", init.drop("id"), 1)
        rt.step()
    wall, cpu, seen = [], [], []
    with h.phase(f"{system} n={n:,}: {len(frames)} steps"):
        for i, f in enumerate(frames):
            c0, t0 = time.process_time(), time.perf_counter()
            rt.push("a", f)
            rt.step()
            t1, c1 = time.perf_counter(), time.process_time()
            if i >= WARMUP:
                wall.append(t1 - t0)
                cpu.append(c1 - c0)
            seen.append(rt.view("v").to_polars().drop("weight"))
    return {
        "load_s": load.s,
        "step_s": wall,
        "cpu_s": cpu,
        "wall": h.stats(wall),
        "cpu": h.stats(cpu),
        "views": seen,
    }


def run_size(n: int, steps: int) -> dict[str, Any]:
    init, changes = _prepare(n, steps)
    frames = [
        pl.concat(
            [
                ins.drop("id").with_columns(pl.lit(1, pl.Int64).alias("weight")),
                dele.drop("id").with_columns(pl.lit(-1, pl.Int64).alias("weight")),
            ]
        )
        for ins, dele in changes
    ]
    out: dict[str, Any] = {"size": n}
    for system in SYSTEMS:
        out[system] = _dbspark(system, init, frames, n)
    con = duckdb.connect()
    con.register("src", init.to_arrow())
    con.execute("CREATE TABLE a AS SELECT * FROM src")
    con.unregister("src")
    duck = []
    with h.phase(f"n={n:,}: duckdb {len(changes)} steps"):
        for i, (ins, dele) in enumerate(changes):
            t_apply, _ = h.timed(lambda ins=ins, dele=dele: h.duck_apply(con, "a", ins, dele))
            t_q, res = h.timed(lambda: con.execute("SELECT g, bit_or(x) AS bo FROM a GROUP BY g").pl())
            if i >= WARMUP:
                duck.append(t_apply + t_q)
            h.verify(
                f"semigroup_aggregates n={n} step {i}",
                {s: out[s]["views"][i].select("g", "bo") for s in SYSTEMS} | {"duckdb": res},
            )
            h.verify(
                f"semigroup_aggregates n={n} step {i} (prodmod)", {s: out[s]["views"][i] for s in SYSTEMS}
            )
    con.close()
    for s in SYSTEMS:
        del out[s]["views"]
    out["duckdb"] = {"step_s": duck, "wall": h.stats(duck)}
    return out


def run(quick: bool) -> dict:
    sizes = h.sized([10_000, 100_000, 1_000_000], [10_000, 100_000], quick, smoke=[2_000, 5_000])
    steps = WARMUP + h.sized(STEPS, 5, quick, smoke=3)
    per = {str(n): run_size(n, steps) for n in sizes}
    rows = []
    for n in sizes:
        r = per[str(n)]
        t, f, d = r["trees"], r["refold"], r["duckdb"]
        rows.append(
            [
                f"{n:,}",
                h.median_range(t["wall"]),
                h.fmt_s(t["cpu"]["median"]),
                h.median_range(f["wall"]),
                h.fmt_s(f["cpu"]["median"]),
                h.fmt_x(h.ratio(f["wall"]["median"], t["wall"]["median"])),
                h.fmt_x(h.ratio(f["cpu"]["median"], t["cpu"]["median"])),
                h.fmt_s(d["wall"]["median"]),
                h.fmt_x(h.ratio(d["wall"]["median"], t["wall"]["median"])),
            ]
        )
    text = h.table(
        f"semigroup_aggregates (local engine): one group, BIT_OR and a product mod p as user aggregates without "
        f"an inverse, {CHANGE}-row changes (half deletes), median step [min..max] of {steps - WARMUP}",
        [
            "rows",
            "scan trees",
            "(CPU)",
            "refold the group",
            "(CPU)",
            "refold / trees",
            "(CPU)",
            "duckdb recompute",
            "duckdb / trees",
        ],
        rows,
    )
    series = {
        f"dbspark {s}": (sizes, [per[str(n)][s]["wall"]["median"] for n in sizes], {}) for s in SYSTEMS
    } | {"duckdb recompute": (sizes, [per[str(n)]["duckdb"]["wall"]["median"] for n in sizes], {})}
    return {
        "params": {
            "sizes": sizes,
            "steps": steps - WARMUP,
            "warmup": WARMUP,
            "change_rows": CHANGE,
            "seed": SEED,
        },
        "sizes": per,
        "table": text,
        "plot": [
            {
                "title": "median step time vs group size",
                "series": series,
                "xlabel": "rows in the group",
                "logx": True,
            }
        ],
        "plot_title": "semigroup_aggregates: user aggregates without an inverse, one group",
    }
