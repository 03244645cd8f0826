"""A window function view under 1k-row changes (issue 17's goal: step time growth <= 1.5x from 1M to 10M
rows, >= 50x faster than DuckDB recomputing the view):

    python -m bench.windows                 # 1M and 10M rows, 10 steps each (a few minutes)
    python -m bench.windows --sizes 100000  # a quick run

The table `t(id, p, o, x)` holds N rows in N / 100 partitions; the view is a running sum per partition,
`SUM(x) OVER (PARTITION BY p ORDER BY o, id)`, on the local engine. Each step deletes 500 random rows and
inserts 500 new ones in random partitions. DuckDB applies the same changes to its copy of the table and
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

VIEW = "SELECT id, p, o, x, SUM(x) OVER (PARTITION BY p ORDER BY o, id) AS rs FROM t"
DDL = f"CREATE TABLE t (id BIGINT, p BIGINT, o BIGINT, x BIGINT); CREATE VIEW running AS {VIEW};"
CHANGE = 1000
PER_PARTITION = 100


def rows(rng: np.random.Generator, ids: np.ndarray, parts: int) -> pl.DataFrame:
    n = len(ids)
    return pl.DataFrame(
        {
            "id": ids,
            "p": rng.integers(0, parts, n),
            "o": rng.integers(0, 1_000_000, n),
            "x": rng.integers(-100, 100, n),
        }
    )


def run(size: int, steps: int, seed: int) -> dict[str, Any]:
    import dbspark

    rng = np.random.default_rng(seed)
    parts = max(size // PER_PARTITION, 1)
    table = rows(rng, np.arange(size), parts)
    p = dbspark.Pipeline(engine="local")
    p.sql(DDL)
    p.insert("t", table)
    with Clock() as load:
        p.step()
    con = duckdb.connect()
    con.execute("CREATE TABLE t (id BIGINT, p BIGINT, o BIGINT, x BIGINT)")
    con.register("init", table.to_arrow())
    con.execute("INSERT INTO t SELECT * FROM init")
    con.unregister("init")
    live = table
    next_id = size
    out: dict[str, Any] = {"size": size, "load": {"wall": load.wall, "cpu": load.cpu}, "steps": []}
    for _ in range(steps):
        gone = live.sample(CHANGE // 2, seed=int(rng.integers(1 << 31)))
        new = rows(rng, np.arange(next_id, next_id + CHANGE // 2), parts)
        next_id += CHANGE // 2
        live = pl.concat([live.join(gone.select("id"), on="id", how="anti"), new])
        p.delete("t", gone)
        p.insert("t", new)
        with Clock() as ours:
            p.step()
        con.register("ins", new.to_arrow())
        con.register("del", gone.select("id").to_arrow())
        con.execute("INSERT INTO t SELECT * FROM ins")
        con.execute("DELETE FROM t WHERE id IN (SELECT id FROM del)")
        con.unregister("ins")
        con.unregister("del")
        with Clock() as duck:
            con.execute(f"CREATE OR REPLACE TABLE r AS {VIEW}")
        out["steps"].append(
            {"wall": ours.wall, "cpu": ours.cpu, "duckdb_wall": duck.wall, "duckdb_cpu": duck.cpu}
        )
    view = p.view("running").df
    mine = (view.height, int(view["rs"].sum()))
    theirs = con.execute("SELECT count(*), sum(rs) FROM r").fetchone()
    assert theirs is not None and mine == (theirs[0], int(theirs[1])), (mine, theirs)
    p.close()
    med = {k: statistics.median(s[k] for s in out["steps"]) for k in out["steps"][0]}
    out["median"] = med
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000000,10000000")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--out", default=None, help="write the results as JSON here")
    a = ap.parse_args(argv)
    results = [run(int(s), a.steps, a.seed) for s in a.sizes.split(",")]
    for r in results:
        m = r["median"]
        print(
            f"{r['size']:>11,} rows: load {r['load']['wall']:.2f} s; step {m['wall'] * 1000:.1f} ms "
            f"(CPU {m['cpu'] * 1000:.1f} ms); DuckDB recompute {m['duckdb_wall'] * 1000:.0f} ms "
            f"(CPU {m['duckdb_cpu'] * 1000:.0f} ms): {m['duckdb_wall'] / m['wall']:.1f}x wall, "
            f"{m['duckdb_cpu'] / m['cpu']:.1f}x CPU"
        )
    if len(results) > 1:
        a0, a1 = results[0]["median"], results[-1]["median"]
        print(
            f"step growth {results[0]['size']:,} -> {results[-1]['size']:,}: {a1['wall'] / a0['wall']:.2f}x wall, {a1['cpu'] / a0['cpu']:.2f}x CPU"
        )
    if a.out:
        Path(a.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
