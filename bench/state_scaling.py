"""state_scaling: does a small change cost the same against a big state as against a small one?

For each operator (a) incremental join `a.join(b, on="k")`, (b) incremental `distinct()`, (c) incremental
MIN aggregate `aggregate(by="g", m=("min", "x"))`, the state is loaded in a few big pushes (not timed),
then a stream of 1k-row changes (half inserts of new rows, half deletes of existing rows) is timed step by
step, at growing states (full: 1M, 3M and 10M rows per input; --quick: 100k, 300k and 1M). Reported: the
median step time at each size and the ratio largest/smallest (requirement: <= 1.5x). (d) the view of
`join_groupby`, `a.join(b, on="k").aggregate(by="g", n="count")`, is issue 7's `scale` workload (its spark
engine half is `spark_scale`).

Anchor: DuckDB recomputing the view from scratch on the current tables (`CREATE OR REPLACE TABLE v AS
...`, i.e. a full materialized-view refresh) after applying the same change, timed on the last
`RECOMPUTE_STEPS` steps. At the end dbspark's view must equal DuckDB's, row for row with multiplicities.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import duckdb
import numpy as np
import polars as pl

import dbspark
from bench import harness as h

SEED = 20240601
STEPS = 10  # timed steps per size
WARMUP = 1  # untimed first step after the load
CHANGE = 1000  # rows per change: CHANGE // 2 inserts + CHANGE // 2 deletes, spread over the op's inputs
LOAD_PUSHES = 4
RECOMPUTE_STEPS = 3  # the DuckDB anchor recomputes on the last steps only (it is O(state) per step)


@dataclass(frozen=True)
class Op:
    name: str
    title: str
    tables: dict[str, dict[str, str]]  # input name -> schema (without the id column)
    gen: Callable[[str, int, np.random.Generator, int], dict[str, np.ndarray]]  # (table, rows, rng, size)
    build: Callable[[dbspark.Circuit, dict[str, dbspark.Stream]], dbspark.Stream]
    view_sql: str  # the view over the DuckDB tables
    check_sql: str  # the view's rows with a `weight` column (multiplicity), from table v


def _join_gen(table: str, n: int, rng: np.random.Generator, size: int) -> dict[str, np.ndarray]:
    other = "x" if table == "a" else "y"
    return {"k": rng.integers(0, size, n), other: rng.integers(0, 1 << 40, n)}


OPS = [
    Op(
        "join",
        'a.join(b, on="k")',
        {"a": {"k": "int64", "x": "int64"}, "b": {"k": "int64", "y": "int64"}},
        _join_gen,
        lambda c, s: s["a"].join(s["b"], on="k"),
        "SELECT a.k, a.x, b.y FROM a JOIN b USING (k)",
        "SELECT k, x, y, count(*)::BIGINT AS weight FROM v GROUP BY ALL",
    ),
    Op(
        "distinct",
        "d.distinct()",
        {"d": {"k": "int64", "x": "int64"}},
        lambda t, n, rng, size: {"k": rng.integers(0, max(size // 2, 1), n), "x": rng.integers(0, 2, n)},
        lambda c, s: s["d"].distinct(),
        "SELECT DISTINCT k, x FROM d",
        "SELECT k, x, 1::BIGINT AS weight FROM v",
    ),
    Op(
        "min",
        'a.aggregate(by="g", m=("min", "x"))',
        {"a": {"g": "int64", "x": "int64"}},
        lambda t, n, rng, size: {
            "g": rng.integers(0, max(size // 100, 1), n),
            "x": rng.integers(0, 1 << 40, n),
        },
        lambda c, s: s["a"].aggregate(by="g", m=("min", "x")),
        "SELECT g, min(x) AS m FROM a GROUP BY g",
        "SELECT g, m, 1::BIGINT AS weight FROM v",
    ),
    Op(  # the view of join_groupby (issue 7's `scale` workload)
        "join_groupby",
        'a.join(b, on="k").aggregate(by="g", n="count")',
        {"a": {"k": "int64", "g": "int64"}, "b": {"k": "int64", "v": "int64"}},
        lambda t, n, rng, size: (
            {"k": rng.integers(0, size, n)}
            | ({"g": rng.integers(0, 1000, n)} if t == "a" else {"v": rng.integers(0, 1 << 40, n)})
        ),
        lambda c, s: s["a"].join(s["b"], on="k").aggregate(by="g", n="count"),
        "SELECT g, count(*)::BIGINT AS n FROM a JOIN b USING (k) GROUP BY g",
        "SELECT g, n, 1::BIGINT AS weight FROM v",
    ),
]


def _frame(cols: dict[str, np.ndarray], ids: np.ndarray) -> pl.DataFrame:
    return pl.DataFrame({"id": ids, **cols})


def _prepare(
    op: Op, size: int
) -> tuple[dict[str, pl.DataFrame], list[dict[str, tuple[pl.DataFrame, pl.DataFrame]]]]:
    """The initial tables (with a unique `id` per row) and the change of each step: per table, the rows
    inserted and the rows deleted (existing rows, never deleted twice), both with their ids."""
    rng = np.random.default_rng(SEED + size)
    init = {t: _frame(op.gen(t, size, rng, size), np.arange(size)) for t in op.tables}
    per_table = CHANGE // 2 // len(op.tables)
    order = {t: rng.permutation(size) for t in op.tables}
    changes = []
    for i in range(WARMUP + STEPS):
        step = {}
        for t in op.tables:
            ids = np.arange(size + i * per_table, size + (i + 1) * per_table)
            ins = _frame(op.gen(t, per_table, rng, size), ids)
            dele = init[t][order[t][i * per_table : (i + 1) * per_table]]
            step[t] = (ins, dele)
        changes.append(step)
    return init, changes


def _dbspark_change(ins: pl.DataFrame, dele: pl.DataFrame) -> pl.DataFrame:
    """One frame with a `weight` column, as a user passes a change."""
    return pl.concat(
        [
            ins.drop("id").with_columns(pl.lit(1, pl.Int64).alias("weight")),
            dele.drop("id").with_columns(pl.lit(-1, pl.Int64).alias("weight")),
        ]
    )


def run_size(op: Op, size: int) -> dict:
    init, changes = _prepare(op, size)
    dchanges = [{t: _dbspark_change(*ch[t]) for t in ch} for ch in changes]

    # ---- dbspark ----
    h.collect()
    c = dbspark.Circuit()
    streams = {t: c.input(t, sch) for t, sch in op.tables.items()}
    c.output("v", op.build(c, streams))
    rt = c.run()
    with h.phase(f"{op.name} n={size:,}: dbspark load"), h.Timer() as load:
        for p in range(LOAD_PUSHES):
            lo, hi = p * size // LOAD_PUSHES, (p + 1) * size // LOAD_PUSHES
            for t in op.tables:
                rt.push(t, init[t][lo:hi].drop("id"), 1)
            rt.step()

    def step(i: int, rt: dbspark.Runtime = rt) -> None:
        for t, df in dchanges[i].items():
            rt.push(t, df)
        rt.step()

    with h.phase(f"{op.name} n={size:,}: dbspark {STEPS} steps"):
        samples = h.repeat(step, STEPS, warmup=WARMUP)
    ours = rt.view("v").to_polars()
    rss = h.rss_gb()
    del rt, c, streams
    h.collect()

    # ---- DuckDB: apply each change, recompute the view from scratch on the last steps ----
    con = duckdb.connect()
    with h.phase(f"{op.name} n={size:,}: duckdb load"):
        for t, df in init.items():
            con.register("src", df.to_arrow())
            con.execute(f"CREATE TABLE {t} AS SELECT * FROM src")
            con.unregister("src")
        con.execute(f"CREATE TABLE v AS {op.view_sql}")

    def apply(i: int) -> None:
        for t, (ins, dele) in changes[i].items():
            h.duck_apply(con, t, ins, dele)

    first_timed = len(changes) - RECOMPUTE_STEPS
    for i in range(first_timed):
        apply(i)

    def recompute(j: int) -> None:
        apply(first_timed + j)
        con.execute(f"CREATE OR REPLACE TABLE v AS {op.view_sql}")

    with h.phase(f"{op.name} n={size:,}: duckdb recompute x{RECOMPUTE_STEPS}"):
        anchor = h.repeat(recompute, RECOMPUTE_STEPS)
    theirs = con.execute(op.check_sql).pl()
    con.close()

    with h.phase(f"{op.name} n={size:,}: verify ({ours.height:,} view rows)"):
        h.verify(f"state_scaling/{op.name} n={size}", {"dbspark": ours, "duckdb": theirs})
    return {
        "size": size,
        "load_s": load.s,
        "dbspark_step_s": samples,
        "dbspark": h.stats(samples),
        "duckdb_recompute_step_s": anchor,
        "duckdb_recompute": h.stats(anchor),
        "view_rows": ours.height,
        "peak_rss_gib": rss,
        "verified": True,
    }


def run(quick: bool) -> dict:
    sizes = h.sized(
        [1_000_000, 3_000_000, 10_000_000], [100_000, 300_000, 1_000_000], quick, smoke=[2_000, 20_000]
    )
    ops_out = {}
    for op in OPS:
        per = {str(n): run_size(op, n) for n in sizes}
        small, large = per[str(sizes[0])], per[str(sizes[-1])]
        ops_out[op.name] = {
            "title": op.title,
            "sizes": per,
            "ratio_large_small_median": h.ratio(large["dbspark"]["median"], small["dbspark"]["median"]),
            "ratio_large_small_mean": h.ratio(large["dbspark"]["mean"], small["dbspark"]["mean"]),
            "speedup_vs_recompute": {
                str(n): h.ratio(per[str(n)]["duckdb_recompute"]["median"], per[str(n)]["dbspark"]["median"])
                for n in sizes
            },
        }
    lbl = [f"{n / 1e6:g}M" if n >= 1e6 else f"{n / 1e3:g}k" for n in sizes]
    ends = [sizes[0], sizes[-1]]
    rows = []
    for name, o in ops_out.items():
        per = [o["sizes"][str(n)] for n in sizes]
        rows.append(
            [name]
            + [
                f"{h.fmt_s(x['dbspark']['median'])} [{h.fmt_s(x['dbspark']['min'])}..{h.fmt_s(x['dbspark']['max'])}]"
                for x in per
            ]
            + [
                h.fmt_x(o["ratio_large_small_median"]),
                "yes" if o["ratio_large_small_median"] <= 1.5 else "NO",
            ]
            + [h.fmt_s(x["duckdb_recompute"]["median"]) for x in per]
            + [h.fmt_x(o["speedup_vs_recompute"][str(sizes[-1])])]
        )
    text = h.table(
        f"state_scaling: {CHANGE}-row change, median step [min..max] of {STEPS} steps",
        ["op"]
        + [f"dbspark @{lb}" for lb in lbl]
        + [f"{lbl[-1]}/{lbl[0]}", "<=1.5x"]
        + [f"duckdb recompute @{lb}" for lb in lbl]
        + [f"speedup @{lbl[-1]}"],
        rows,
    )
    styles = {op.name: ls for op, ls in zip(OPS, ("-", "--", ":", "-."), strict=True)}
    by_size: dict[str, tuple] = {}
    for name, o in ops_out.items():
        for system, key, color in (
            ("dbspark", "dbspark", "dbspark"),
            ("duckdb", "duckdb_recompute", "duckdb recompute"),
        ):
            ys = [o["sizes"][str(n)][key]["median"] for n in sizes]
            by_size[f"{system} {name}"] = (sizes, ys, {"color": h.COLORS[color], "linestyle": styles[name]})
    panels = [
        {
            "title": "median time per step against state size",
            "series": by_size,
            "xlabel": "rows per input table",
            "ylabel": "median time per step (s)",
            "logx": True,
        }
    ]
    for o in ops_out.values():
        series = {}
        for n, lb, ls in zip(ends, (lbl[0], lbl[-1]), (":", "-"), strict=True):
            s = o["sizes"][str(n)]
            xs = list(range(WARMUP + 1, WARMUP + STEPS + 1))
            series[f"dbspark @{lb}"] = (
                xs,
                s["dbspark_step_s"],
                {"color": h.COLORS["dbspark"], "linestyle": ls},
            )
            series[f"duckdb recompute @{lb}"] = (
                xs[-RECOMPUTE_STEPS:],
                s["duckdb_recompute_step_s"],
                {"color": h.COLORS["duckdb recompute"], "linestyle": ls},
            )
        panels.append(
            {"title": o["title"], "series": series, "xlabel": "step", "ylabel": "time per step (s)"}
        )
    return {
        "params": {
            "sizes": sizes,
            "steps": STEPS,
            "warmup": WARMUP,
            "change_rows": CHANGE,
            "load_pushes": LOAD_PUSHES,
            "recompute_steps": RECOMPUTE_STEPS,
            "seed": SEED,
            "size_means": "rows in each input table",
        },
        "ops": ops_out,
        "table": text,
        "plot": panels,
        "plot_title": f"state_scaling: {CHANGE}-row changes against state of {' / '.join(lbl)} rows",
    }
