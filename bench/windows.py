"""A window function view under 1k-row changes (issue 17's goal: step time growth <= 1.5x from 1M to 10M
rows, >= 50x faster than DuckDB recomputing the view):

    python -m bench.windows                 # 1M and 10M rows, 10 steps each, both workloads (minutes)
    python -m bench.windows --sizes 100000  # a quick run

The table `t(id, p, o, x)` holds N rows in N / 100 partitions; the view is a running sum per partition,
`SUM(x) OVER (PARTITION BY p ORDER BY o, id)`, on the local engine. Two workloads of 1k-row changes, in
random partitions: `random`, each step deletes 500 random rows and inserts 500 at random places of the
order (a running sum moves from each changed place to its partition's end: about half of each changed
partition); `recent`, a stream's, each step inserts 500 rows after every row so far (`o` grows) and
deletes 500 random rows of the 10,000 latest (late corrections); `total`, a running sum over the whole
table (one partition, `SUM(x) OVER (ORDER BY o, id)`) whose `o` has a lateness of 1,000, the stream's
changes with deletes within the lateness: the rows below the waterline leave the window's state for
its totals, so a step reads the live rows only; `range`, the random changes through a RANGE frame,
`SUM(x) OVER (PARTITION BY p ORDER BY o RANGE BETWEEN 50000 PRECEDING AND 50000 FOLLOWING)` (about ten
rows a frame; such a view refolds each changed partition whole). DuckDB applies the same changes to its copy of the
table and
recomputes the view (`CREATE OR REPLACE TABLE ... AS SELECT ... OVER ...`) each step. Reported: the median
step's wall and CPU time (process CPU: every thread, DuckDB's too), the growth from the smallest size to
the largest, and DuckDB's recompute over dbspark's step; the views are checked equal (row count and the
sum of the running sums) after the last step.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import polars as pl

from bench.tc import Clock
from dbspark.algebra.zset import WEIGHT
from dbspark.testing.sql_oracle import view_frame

VIEW = "SELECT id, p, o, x, SUM(x) OVER (PARTITION BY p ORDER BY o, id) AS rs FROM t"
DDL = f"CREATE TABLE t (id BIGINT, p BIGINT, o BIGINT, x BIGINT); CREATE VIEW running AS {VIEW};"
# the `total` workload: one running sum over the whole table, whose `o` is a stream's time with a lateness
LATENESS = 1000
TOTAL = "SELECT id, p, o, x, SUM(x) OVER (ORDER BY o, id) AS rs FROM t"
TOTAL_DDL = (
    "CREATE TABLE t (id BIGINT, p BIGINT, o BIGINT, x BIGINT) WITH (lateness_column = o, "
    f"lateness = {LATENESS}); CREATE VIEW running AS {TOTAL};"
)
# the `range` workload: a sliding sum over a RANGE frame
RANGE = "SELECT id, p, o, x, SUM(x) OVER (PARTITION BY p ORDER BY o RANGE BETWEEN 50000 PRECEDING AND 50000 FOLLOWING) AS rs FROM t"
RANGE_DDL = f"CREATE TABLE t (id BIGINT, p BIGINT, o BIGINT, x BIGINT); CREATE VIEW running AS {RANGE};"
CHANGE = 1000
PER_PARTITION = 100


def rows(rng: np.random.Generator, ids: np.ndarray, parts: int, o: np.ndarray | None = None) -> pl.DataFrame:
    n = len(ids)
    return pl.DataFrame(
        {
            "id": ids,
            "p": rng.integers(0, parts, n),
            "o": rng.integers(0, 1_000_000, n) if o is None else o,
            "x": rng.integers(-100, 100, n),
        }
    )


def change(
    rng: np.random.Generator, live: pl.DataFrame, next_id: int, parts: int, workload: str
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(rows deleted, rows inserted) of one step."""
    half = CHANGE // 2
    seed = int(rng.integers(1 << 31))
    ids = np.arange(next_id, next_id + half)
    if workload in ("random", "range"):
        return live.sample(half, seed=seed), rows(rng, ids, parts)
    top = int(live["o"].max() or 0)  # type: ignore[arg-type]
    new = rows(rng, ids, parts, np.arange(top + 1, top + 1 + half))
    if workload == "total":  # deletes within the lateness: o above the waterline, top - LATENESS
        latest = live.filter(pl.col("o") > top - LATENESS // 2)
        return latest.sample(min(half, latest.height), seed=seed), new
    return live.top_k(10_000, by="o").sample(half, seed=seed), new


def _summed(change: Any) -> list[int]:
    """(rows, sum of the running sums) of a view's change, each row counted by its weight."""
    df = view_frame(change)
    return [int(df[WEIGHT].sum()), int((df["rs"] * df[WEIGHT]).sum())]


def run(size: int, steps: int, seed: int, workload: str) -> dict[str, Any]:
    import dbspark

    rng = np.random.default_rng(seed)
    parts = max(size // PER_PARTITION, 1)
    table = rows(rng, np.arange(size), parts)
    view, ddl = {"total": (TOTAL, TOTAL_DDL), "range": (RANGE, RANGE_DDL)}.get(workload, (VIEW, DDL))
    p = dbspark.Pipeline(engine="local")
    p.sql(ddl)
    p.insert("t", table)
    with Clock() as load:
        summed = _summed(p.step()["running"])
    con = duckdb.connect()
    con.execute("CREATE TABLE t (id BIGINT, p BIGINT, o BIGINT, x BIGINT)")
    con.register("init", table.to_arrow())
    con.execute("INSERT INTO t SELECT * FROM init")
    con.unregister("init")
    live = table
    next_id = size
    out: dict[str, Any] = {
        "size": size,
        "workload": workload,
        "load": {"wall": load.wall, "cpu": load.cpu},
        "steps": [],
    }
    for _ in range(steps):
        gone, new = change(rng, live, next_id, parts, workload)
        next_id += CHANGE // 2
        live = pl.concat([live.join(gone.select("id"), on="id", how="anti"), new])
        p.delete("t", gone)
        p.insert("t", new)
        with Clock() as ours:
            changes = p.step()
        summed = [a + b for a, b in zip(summed, _summed(changes["running"]), strict=True)]
        con.register("ins", new.to_arrow())
        con.register("del", gone.select("id").to_arrow())
        con.execute("INSERT INTO t SELECT * FROM ins")
        con.execute("DELETE FROM t WHERE id IN (SELECT id FROM del)")
        con.unregister("ins")
        con.unregister("del")
        with Clock() as duck:
            con.execute(f"CREATE OR REPLACE TABLE r AS {view}")
        out["steps"].append(
            {
                "wall": ours.wall,
                "cpu": ours.cpu,
                "duckdb_wall": duck.wall,
                "duckdb_cpu": duck.cpu,
                "state_rows": p.state_rows(),
            }
        )
    theirs = con.execute("SELECT count(*), sum(rs) FROM r").fetchone()
    assert theirs is not None and summed == [theirs[0], int(theirs[1])], (summed, theirs)
    p.close()
    med = {k: statistics.median(s[k] for s in out["steps"]) for k in out["steps"][0]}
    out["median"] = med
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000000,10000000")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--workloads", default="random,recent,total", help="of random, recent, total, range")
    ap.add_argument("--out", default=None, help="write the results as JSON here")
    a = ap.parse_args(argv)
    works = a.workloads.split(",")
    results = [run(int(s), a.steps, a.seed, w) for w in works for s in a.sizes.split(",")]
    for r in results:
        m = r["median"]
        print(
            f"{r['workload']:>6} {r['size']:>11,} rows, state {r['steps'][-1]['state_rows']:,} rows: load {r['load']['wall']:.2f} s; step {m['wall'] * 1000:.1f} ms "
            f"(CPU {m['cpu'] * 1000:.1f} ms); DuckDB recompute {m['duckdb_wall'] * 1000:.0f} ms "
            f"(CPU {m['duckdb_cpu'] * 1000:.0f} ms): {m['duckdb_wall'] / m['wall']:.1f}x wall, "
            f"{m['duckdb_cpu'] / m['cpu']:.1f}x CPU"
        )
    for w in works:
        mine = [r for r in results if r["workload"] == w]
        if len(mine) > 1:
            a0, a1 = mine[0]["median"], mine[-1]["median"]
            print(
                f"{w} step growth {mine[0]['size']:,} -> {mine[-1]['size']:,}: "
                f"{a1['wall'] / a0['wall']:.2f}x wall, {a1['cpu'] / a0['cpu']:.2f}x CPU"
            )
    if a.out:
        Path(a.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
