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


def _rows(rng: np.random.Generator, ids: np.ndarray) -> pl.DataFrame:
    return pl.DataFrame(
        {"id": ids, "g": np.zeros(len(ids), np.int64), "x": rng.integers(0, 1 << 40, len(ids))}
    )


def _prepare(n: int, steps: int) -> tuple[pl.DataFrame, list[tuple[pl.DataFrame, pl.DataFrame]]]:
    return h.insert_delete_changes(np.random.default_rng(SEED + n), _rows, n, steps, CHANGE)


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

    def step(i: int) -> pl.DataFrame:
        rt.push("a", frames[i])
        rt.step()
        return rt.view("v").to_polars().drop("weight")

    def load() -> None:
        rt.push("a", init.drop("id"), 1)
        rt.step()

    return h.timed_steps(f"{system} n={n:,}", load, step, len(frames), WARMUP)


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
    h.duck_table(con, "a", init)
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
                *h.versus_cells(t, f, d),
            ]
        )
    text = h.table(
        f"semigroup_aggregates (local engine): one group, BIT_OR and a product mod p as user aggregates without "
        f"an inverse, {CHANGE}-row changes (half deletes), median step [min..max] of {steps - WARMUP}",
        [
            "rows",
            *h.versus_headers("scan trees", "refold the group"),
        ],
        rows,
    )
    series = h.step_series(sizes, per, SYSTEMS)
    return {
        "params": h.step_params(sizes, steps, WARMUP, CHANGE, SEED),
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
