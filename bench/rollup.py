"""rollup: a GROUP BY ROLLUP of MIN / MAX / SUM / COUNT under 1k-row changes, its coarse sets folding
their parent's groups or aggregating the rows.

The view `SELECT a, b, c, MIN(x), MAX(x), SUM(x), COUNT(*) FROM t GROUP BY ROLLUP (a, b, c)` (four
grouping sets: 100 values of a, 10 of b under each, 100 of c under each (a, b), so ~100k detail groups at
1M rows) is maintained two ways: `levels`, where (a, b) aggregates the (a, b, c) groups, (a) the (a, b)
groups and () the (a) groups (`frontends/sql/grouping_levels.py`, the LFTJ seed's §2.3.3 levels of
detail), and `separate`, where each set aggregates the rows (`grouping_levels.SHARED = False`: MIN and
MAX then keep ordered state of every row four times, the grand total's over the whole table).

n rows (full: 10^5, 10^6; --quick: 10^5; smoke: 5,000) are loaded (timed as the load); then each step
inserts 500 new rows and deletes 500 present ones, and the step is timed (wall and this process's CPU).
Anchor: DuckDB applying the change and computing the same ROLLUP (a recompute). Every step the views
must equal each other and DuckDB's answer.
"""

from __future__ import annotations

import time
from typing import Any

import duckdb
import numpy as np
import polars as pl

import dbspark
from bench import harness as h
from dbspark.frontends.sql import grouping_levels

SEED = 4243
STEPS = 10
WARMUP = 1
CHANGE = 1000
SYSTEMS = ("levels", "separate")
QUERY = (
    "SELECT a, b, c, MIN(x) AS lo, MAX(x) AS hi, SUM(x) AS s, COUNT(*) AS n FROM t GROUP BY ROLLUP (a, b, c)"
)
DDL = f"CREATE TABLE t (a INTEGER, b INTEGER, c INTEGER, x BIGINT); CREATE VIEW v AS {QUERY};"


def _rows(rng: np.random.Generator, ids: np.ndarray) -> pl.DataFrame:
    k = len(ids)
    return pl.DataFrame(
        {
            "id": ids,
            "a": rng.integers(0, 100, k, dtype=np.int32),
            "b": rng.integers(0, 10, k, dtype=np.int32),
            "c": rng.integers(0, 100, k, dtype=np.int32),
            "x": rng.integers(-(10**9), 10**9, k),
        }
    )


def _prepare(n: int, steps: int) -> tuple[pl.DataFrame, list[tuple[pl.DataFrame, pl.DataFrame]]]:
    return h.insert_delete_changes(np.random.default_rng(SEED + n), _rows, n, steps, CHANGE)


def _dbspark(system: str, init: pl.DataFrame, changes: list, n: int) -> dict[str, Any]:
    before = grouping_levels.SHARED
    grouping_levels.SHARED = system == "levels"
    try:
        p = dbspark.Pipeline(engine="local")
        p.sql(DDL)
    finally:
        grouping_levels.SHARED = before

    def step(i: int) -> pl.DataFrame:
        ins, dele = changes[i]
        p.insert("t", ins.drop("id"))
        p.delete("t", dele.drop("id"))
        p.step()
        return p.view("v").to_polars().drop("weight")

    def load() -> None:
        p.insert("t", init.drop("id"))
        p.step()

    out = h.timed_steps(f"{system} n={n:,}", load, step, len(changes), WARMUP)
    out["state_rows"] = p.state_rows()
    p.close()
    return out


def run_size(n: int, steps: int) -> dict[str, Any]:
    init, changes = _prepare(n, steps)
    out: dict[str, Any] = {"size": n}
    for system in SYSTEMS:
        out[system] = _dbspark(system, init, changes, n)
    con = duckdb.connect()
    h.duck_table(con, "t", init)
    duck, duck_cpu = [], []
    with h.phase(f"n={n:,}: duckdb {len(changes)} steps"):
        for i, (ins, dele) in enumerate(changes):
            c0 = time.process_time()
            t_apply, _ = h.timed(lambda ins=ins, dele=dele: h.duck_apply(con, "t", ins, dele))
            t_q, res = h.timed(lambda: con.execute(QUERY).pl())
            c1 = time.process_time()
            if i >= WARMUP:
                duck.append(t_apply + t_q)
                duck_cpu.append(c1 - c0)
            h.verify(f"rollup n={n} step {i}", {s: out[s]["views"][i] for s in SYSTEMS} | {"duckdb": res})
    con.close()
    for s in SYSTEMS:
        del out[s]["views"]
    out["duckdb"] = {"step_s": duck, "wall": h.stats(duck), "cpu": h.stats(duck_cpu)}
    return out


def run(quick: bool) -> dict:
    sizes = h.sized([100_000, 1_000_000], [100_000], quick, smoke=[5_000])
    steps = WARMUP + h.sized(STEPS, 5, quick, smoke=3)
    per = {str(n): run_size(n, steps) for n in sizes}
    rows = []
    for n in sizes:
        r = per[str(n)]
        lv, sp, d = r["levels"], r["separate"], r["duckdb"]
        rows.append(
            [
                f"{n:,}",
                *h.versus_cells(lv, sp, d),
                f"{lv['load_s']:.2f} / {sp['load_s']:.2f} s",
                f"{lv['state_rows']:,} / {sp['state_rows']:,}",
            ]
        )
    text = h.table(
        f"rollup (local engine): ROLLUP (a, b, c) of MIN / MAX / SUM / COUNT, {CHANGE}-row changes (half "
        f"deletes), median step [min..max] of {steps - WARMUP}",
        [
            "rows",
            *h.versus_headers("levels", "separate"),
            "load: levels / separate",
            "state rows: levels / separate",
        ],
        rows,
    )
    series = h.step_series(sizes, per, SYSTEMS)
    return {
        "params": h.step_params(sizes, steps, WARMUP, CHANGE, SEED),
        "sizes": per,
        "table": text,
        "plot": [{"title": "median step time vs rows", "series": series, "xlabel": "rows", "logx": True}],
        "plot_title": "rollup: grouping sets as levels of detail",
    }
