"""topk: an ORDER BY ... LIMIT view under 1k-row changes with deletions, its window against the definition.

`CREATE VIEW top AS SELECT id, x FROM t ORDER BY x DESC LIMIT 10` over a bag table of n rows (full: 10^5
and 10^6; --quick: 10^4 and 10^5); each step deletes 500 random rows and inserts 500 new ones (Polars
frames pushed through the Pipeline API), timed per step. Two ways of maintaining the view, in the same
run: the window (`operators/topk.py`, `TopKWindow`: a step updates the first 2 · 10 + 64 rows of the
order, and reads the whole order only to refill a drained window) and the definition D ∘ top-k ∘ I
(every step the top-k of the whole integral; forced with `WINDOW_LIMIT = -1`), which is what every step
cost before the window.

Engines: the local engine (a pipeline without a directory: its checkpoint pickles the whole state each
step, which this workload would otherwise measure) and the spark engine (a durable pipeline on a
`local[2]` session; `BENCH_SKIP=spark` leaves it out). Anchor: DuckDB applying the change and running the
query on its table. Every step, each system's view must equal DuckDB's answer.
"""

from __future__ import annotations

import tempfile
from typing import Any

import duckdb
import numpy as np
import polars as pl

import dbspark
from bench import harness as h
from dbspark.operators import topk

SEED = 99
STEPS = 8
WARMUP = 1
HALF = 500
QUERY = "SELECT id, x FROM t ORDER BY x DESC, id LIMIT 10"
SQL = (
    "CREATE TABLE t (id BIGINT, x BIGINT);\nCREATE VIEW top AS SELECT id, x FROM t ORDER BY x DESC LIMIT 10;"
)
_SPARK: list[Any] = []


def _spark() -> Any:
    if not _SPARK:
        from pyspark.sql import SparkSession

        b = SparkSession.builder.master("local[2]").appName("dbspark-bench-topk")
        for k, v in {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"}.items():
            b = b.config(k, v)
        _SPARK.append(b.getOrCreate())
        _SPARK[0].sparkContext.setLogLevel("ERROR")
    return _SPARK[0]


def _prepare(n: int) -> tuple[pl.DataFrame, list[tuple[pl.DataFrame, pl.DataFrame]]]:
    rng = np.random.default_rng(SEED + n)
    init = pl.DataFrame({"id": np.arange(n), "x": rng.integers(0, 10**9, n)})
    cur, changes = init, []
    for i in range(WARMUP + STEPS):
        dele = cur.sample(HALF, seed=SEED + i)
        ins = pl.DataFrame(
            {"id": np.arange(n + i * HALF, n + (i + 1) * HALF), "x": rng.integers(0, 10**9, HALF)}
        )
        cur = pl.concat([cur.join(dele, on="id", how="anti"), ins])
        changes.append((ins, dele))
    return init, changes


def _dbspark(engine: str, mode: str, n: int, init: pl.DataFrame, changes: list) -> tuple[dict, list]:
    h.collect()
    limit, topk.WINDOW_LIMIT = topk.WINDOW_LIMIT, (topk.WINDOW_LIMIT if mode == "window" else -1)
    spark = _spark() if engine == "spark" else None
    p = dbspark.Pipeline(
        tempfile.mkdtemp(prefix="dbspark-bench-topk-") if spark else None, engine=engine, spark=spark
    )
    try:
        p.sql(SQL)
        with h.phase(f"{engine} {mode} n={n:,}: load"), h.Timer() as load:
            p.insert("t", init)
            p.step()
        samples, seen, jobs = [], [], []
        with h.phase(f"{engine} {mode} n={n:,}: {STEPS} steps"):
            for i, (ins, dele) in enumerate(changes):
                k = p.runtime.kernel  # type: ignore[union-attr]
                a0 = getattr(k, "actions", 0)

                def step(ins: pl.DataFrame = ins, dele: pl.DataFrame = dele) -> None:
                    p.delete("t", dele)
                    p.insert("t", ins)
                    p.step()

                t, _ = h.timed(step)
                if i >= WARMUP:
                    samples.append(t)
                    jobs.append(getattr(k, "actions", 0) - a0)
                seen.append(p.view("top").to_polars().drop("weight"))
    finally:
        p.close()
        topk.WINDOW_LIMIT = limit
    return {"load_s": load.s, "step_s": samples, "actions": jobs, "dbspark": h.stats(samples)}, seen


def run_size(n: int, engines: list[str]) -> dict:
    init, changes = _prepare(n)
    out: dict = {"size": n}
    views: dict[str, list] = {}
    for engine in engines:
        for mode in ("window", "definition"):
            out[f"{engine} {mode}"], views[f"{engine} {mode}"] = _dbspark(engine, mode, n, init, changes)
    con = duckdb.connect()
    con.register("src", init.to_arrow())
    con.execute("CREATE TABLE t AS SELECT * FROM src")
    con.unregister("src")
    duck = []
    with h.phase(f"n={n:,}: duckdb {len(changes)} steps"):
        for i, (ins, dele) in enumerate(changes):
            t, res = h.timed(lambda ins=ins, dele=dele: _apply_and_query(con, ins, dele))
            if i >= WARMUP:
                duck.append(t)
            h.verify(f"topk n={n} step {i}", {"duckdb": res, **{k: v[i] for k, v in views.items()}})
    con.close()
    out["duckdb"] = {"step_s": duck, "duckdb": h.stats(duck)}
    return out


def _apply_and_query(con: duckdb.DuckDBPyConnection, ins: pl.DataFrame, dele: pl.DataFrame) -> pl.DataFrame:
    h.duck_apply(con, "t", ins, dele)
    return con.execute(QUERY).pl()


def run(quick: bool) -> dict:
    sizes = h.sized([100_000, 1_000_000], [10_000, 100_000], quick, smoke=[2_000])
    engines = ["local"] + ([] if h.skipped("spark") else ["spark"])
    per = {str(n): run_size(n, engines) for n in sizes}
    systems = [f"{e} {m}" for e in engines for m in ("window", "definition")]
    rows = []
    for s in systems:
        row = [s]
        for n in sizes:
            row.append(h.median_range(per[str(n)][s]["dbspark"]))
        row.append(str(sorted(set(per[str(sizes[-1])][s]["actions"]))))
        rows.append(row)
    rows.append(
        ["duckdb apply + query", *[h.fmt_s(per[str(n)]["duckdb"]["duckdb"]["median"]) for n in sizes], "-"]
    )
    text = h.table(
        f"topk: ORDER BY x DESC LIMIT 10, {2 * HALF}-row changes (half deletes), median step [min..max] of {STEPS}",
        ["system", *[f"n={n:,}" for n in sizes], f"Spark actions per step (n={sizes[-1]:,})"],
        rows,
    )
    series = {
        s: (
            sizes,
            [per[str(n)][s]["dbspark"]["median"] for n in sizes],
            {"linestyle": "-" if "window" in s else ":"},
        )
        for s in systems
    }
    series["duckdb recompute"] = (
        sizes,
        [per[str(n)]["duckdb"]["duckdb"]["median"] for n in sizes],
        {"color": h.COLORS["duckdb recompute"]},
    )
    return {
        "params": {"sizes": sizes, "steps": STEPS, "warmup": WARMUP, "change_rows": 2 * HALF, "seed": SEED},
        "sizes": per,
        "table": text,
        "plot": [
            {"title": "median step time vs table size", "series": series, "xlabel": "rows", "logx": True}
        ],
        "plot_title": "topk: ORDER BY ... LIMIT 10 under 1k-row changes",
    }
