"""ordered_aggregates: MIN, MAX, MEDIAN and MODE of one big group under 1k-row changes with deletions.

A single group (g = 0) of n values (full: n = 10^4, 10^5, 10^6; --quick: 10^4, 10^6) is loaded (not
timed); then each step inserts 500 new values and deletes 500 existing ones, and the incremental
`aggregate(by="g", m=(func, "x"))` is timed per step. These aggregates are not invertible, so a delete
needs the group's order: the group is ranked over its sorted runs (binary searches, and one NumPy pass
over the runs' weights), so that a step should cost about the same at every size. Reported: median step time per size
and the ratio largest/smallest (requirement for 10^6/10^4: <= 2x).

Anchor: DuckDB applying the change and recomputing `SELECT g, func(x) FROM a GROUP BY g` on the current
table each step (O(n), in C); MODE as the least of the most frequent values (dbspark's rule; DuckDB's
`mode` breaks ties its own way). Every step, dbspark's view must equal DuckDB's answer.

`ORDERED_ENGINE=spark` runs dbspark's side on the spark engine (a `local[2]` session; the changes pushed
as Polars frames, so a step runs in the driver over the bucket files where the aggregate can) instead
of the local engine.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import duckdb
import numpy as np
import polars as pl

import dbspark
from bench import harness as h

SEED = 777
FUNCS = ("min", "max", "median", "mode")
STEPS = 10
WARMUP = 1
CHANGE = 1000
DUCK = {f: f"SELECT g, {f}(x) AS m FROM a GROUP BY g" for f in ("min", "max", "median")} | {
    "mode": "SELECT g, min(x) AS m FROM (SELECT g, x, count(*) AS c, max(count(*)) OVER (PARTITION BY g) AS top"
    " FROM a GROUP BY g, x) WHERE c = top GROUP BY g"
}
ENGINE = os.environ.get("ORDERED_ENGINE", "local")
_SPARK: list[Any] = []


def _engine() -> Any:
    """The engine dbspark's side runs on: "local", or a spark kernel on one shared session."""
    if ENGINE == "local":
        return "local"
    if ENGINE != "spark":
        raise ValueError(f"ORDERED_ENGINE is {ENGINE!r}: local or spark")
    from dbspark.engines.spark.kernel import SparkKernel

    if not _SPARK:
        from pyspark.sql import SparkSession

        b = SparkSession.builder.master("local[2]").appName("dbspark-bench-ordered")
        for k, v in {
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.driver.memory": "4g",
        }.items():
            b = b.config(k, v)
        _SPARK.append(b.getOrCreate())
        _SPARK[0].sparkContext.setLogLevel("ERROR")
    return SparkKernel(spark=_SPARK[0], directory=tempfile.mkdtemp(prefix="dbspark-bench-ordered-"))


def _prepare(n: int) -> tuple[pl.DataFrame, list[tuple[pl.DataFrame, pl.DataFrame]]]:
    rng = np.random.default_rng(SEED + n)
    init = pl.DataFrame({"id": np.arange(n), "g": np.zeros(n, np.int64), "x": rng.integers(0, 1 << 40, n)})
    order = rng.permutation(n)
    half = CHANGE // 2
    changes = []
    for i in range(WARMUP + STEPS):
        ins = pl.DataFrame(
            {
                "id": np.arange(n + i * half, n + (i + 1) * half),
                "g": np.zeros(half, np.int64),
                "x": rng.integers(0, 1 << 40, half),
            }
        )
        changes.append((ins, init[order[i * half : (i + 1) * half]]))
    return init, changes


def run_size(n: int) -> dict:
    init, changes = _prepare(n)
    frames = [
        pl.concat(
            [
                ins.drop("id").with_columns(pl.lit(1, pl.Int64).alias("weight")),
                dele.drop("id").with_columns(pl.lit(-1, pl.Int64).alias("weight")),
            ]
        )
        for ins, dele in changes
    ]
    out: dict = {"size": n}
    views: dict[str, list[pl.DataFrame]] = {}
    for f in FUNCS:
        h.collect()
        c = dbspark.Circuit()
        a = c.input("a", {"g": "int64", "x": "int64"})
        c.output("v", a.aggregate(by="g", m=(f, "x")))
        rt = c.run(_engine())
        with h.phase(f"{f} n={n:,}: dbspark load"), h.Timer() as load:
            rt.push("a", init.drop("id"), 1)
            rt.step()
        seen: list[pl.DataFrame] = []

        def step(i: int, rt=rt, seen=seen) -> None:
            rt.push("a", frames[i])
            rt.step()

        samples = []
        with h.phase(f"{f} n={n:,}: dbspark {STEPS} steps"):
            for i in range(WARMUP + STEPS):
                t, _ = h.timed(lambda i=i: step(i))
                if i >= WARMUP:
                    samples.append(t)
                seen.append(rt.view("v").to_polars().drop("weight"))  # outside the timing
        views[f] = seen
        out[f] = {"load_s": load.s, "step_s": samples, "dbspark": h.stats(samples)}
        del rt, c, a

    con = duckdb.connect()
    con.register("src", init.to_arrow())
    con.execute("CREATE TABLE a AS SELECT * FROM src")
    con.unregister("src")
    duck = {f: [] for f in FUNCS}
    with h.phase(f"n={n:,}: duckdb {len(changes)} steps x {len(FUNCS)} aggregates"):
        for i, (ins, dele) in enumerate(changes):
            t_apply, _ = h.timed(lambda ins=ins, dele=dele: h.duck_apply(con, "a", ins, dele))
            for f in FUNCS:
                t_q, res = h.timed(lambda f=f: con.execute(DUCK[f]).pl())
                if i >= WARMUP:
                    duck[f].append(t_apply + t_q)
                h.verify(
                    f"ordered_aggregates/{f} n={n} step {i}",
                    {"dbspark": views[f][i], "duckdb": res},
                    float_tol=1e-12,
                )
    con.close()
    for f in FUNCS:
        out[f]["duckdb_step_s"] = duck[f]
        out[f]["duckdb"] = h.stats(duck[f])
        out[f]["verified_steps"] = len(changes)
    return out


def run(quick: bool) -> dict:
    sizes = h.sized([10_000, 100_000, 1_000_000], [10_000, 1_000_000], quick, smoke=[2_000, 20_000])
    per = {str(n): run_size(n) for n in sizes}
    lo, hi = str(sizes[0]), str(sizes[-1])
    ratios = {f: h.ratio(per[hi][f]["dbspark"]["median"], per[lo][f]["dbspark"]["median"]) for f in FUNCS}
    lbl = {str(n): f"10^{len(str(n)) - 1}" for n in sizes}
    rows = []
    for f in FUNCS:
        row = [f]
        for n in sizes:
            row.append(h.median_range(per[str(n)][f]["dbspark"]))
        row += [h.fmt_x(ratios[f]), "yes" if ratios[f] <= 2.0 else "NO"]
        row += [h.fmt_s(per[str(n)][f]["duckdb"]["median"]) for n in sizes]
        rows.append(row)
    text = h.table(
        f"ordered_aggregates ({ENGINE} engine): one group, {CHANGE}-row changes (half deletes), median step [min..max] of {STEPS}",
        [
            "agg",
            *[f"dbspark n={lbl[str(n)]}" for n in sizes],
            f"{lbl[hi]}/{lbl[lo]}",
            "<=2x",
            *[f"duckdb recompute n={lbl[str(n)]}" for n in sizes],
        ],
        rows,
    )
    by_size = {}
    for f, ls in zip(FUNCS, ("-", "--", ":", "-."), strict=True):
        by_size[f"dbspark {f}"] = (
            sizes,
            [per[str(n)][f]["dbspark"]["median"] for n in sizes],
            {"color": h.COLORS["dbspark"], "linestyle": ls},
        )
        by_size[f"duckdb recompute {f}"] = (
            sizes,
            [per[str(n)][f]["duckdb"]["median"] for n in sizes],
            {"color": h.COLORS["duckdb recompute"], "linestyle": ls},
        )
    by_step = {}
    xs = list(range(WARMUP + 1, WARMUP + STEPS + 1))
    for f in FUNCS:
        for n in sizes:
            by_step[f"dbspark {f} n={lbl[str(n)]}"] = (xs, per[str(n)][f]["step_s"])
    return {
        "params": {
            "sizes": sizes,
            "funcs": FUNCS,
            "steps": STEPS,
            "warmup": WARMUP,
            "change_rows": CHANGE,
            "seed": SEED,
            "groups": 1,
            "engine": ENGINE,
        },
        "sizes": per,
        "ratio_largest_smallest_median": ratios,
        "table": text,
        "plot": [
            {
                "title": "median step time vs group size",
                "series": by_size,
                "xlabel": "rows in the group",
                "logx": True,
            },
            {"title": "dbspark: time per step", "series": by_step, "xlabel": "step"},
        ],
        "plot_title": f"ordered_aggregates: MIN / MAX / MEDIAN of one group, {CHANGE}-row changes",
    }
