"""What a durable local step costs, and how much of it is the checkpoint: a join + GROUP BY view over
N rows per table (default 10^6), then 1,000-row steps (500 inserts into each table) on a directory.

    python -m bench.checkpoint [--rows 1000000] [--steps 12]

Prints the median wall and CPU time of a step, and the median CPU time of writing its checkpoint
(`FrameFiles.dump`), over the steps after the first two. To compare two checkouts, run it in each
(`PYTHONPATH=<checkout> python -m bench.checkpoint`) one after the other, on a quiet machine.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import numpy as np
import polars as pl

import dbspark
from dbspark.circuit import checkpoint

SQL = """
CREATE TABLE r (k BIGINT, g BIGINT);
CREATE TABLE s (k BIGINT, v BIGINT);
CREATE VIEW j AS SELECT g, COUNT(*) AS n, SUM(v) AS sv FROM r JOIN s USING (k) GROUP BY g;
"""


def main(argv: list[str] | None = None) -> dict[str, float]:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--steps", type=int, default=12)
    a = ap.parse_args(argv)
    dumps: list[float] = []
    real = checkpoint.FrameFiles.dump

    def timed(self: checkpoint.FrameFiles, *args: object, **kw: object) -> None:
        t = time.process_time()
        real(self, *args, **kw)  # type: ignore[arg-type]
        dumps.append(time.process_time() - t)

    checkpoint.FrameFiles.dump = timed  # type: ignore[method-assign]
    rng, n = np.random.default_rng(1), a.rows
    walls, cpus = [], []
    with tempfile.TemporaryDirectory() as d, dbspark.Pipeline(d, engine="local") as p:
        p.sql(SQL)
        p.insert("r", pl.DataFrame({"k": np.arange(n), "g": rng.integers(0, 1000, n)}))
        p.insert("s", pl.DataFrame({"k": np.arange(n), "v": rng.integers(0, 100, n)}))
        p.step()
        for i in range(a.steps):
            ks = rng.integers(n, 2 * n, 500) + i * 10 * n
            p.insert("r", pl.DataFrame({"k": ks, "g": rng.integers(0, 1000, 500)}))
            p.insert("s", pl.DataFrame({"k": ks, "v": rng.integers(0, 100, 500)}))
            t0, c0 = time.perf_counter(), time.process_time()
            p.step()
            walls.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
    checkpoint.FrameFiles.dump = real  # type: ignore[method-assign]
    out = {
        "step_wall_ms": 1000 * statistics.median(walls[2:]),
        "step_cpu_ms": 1000 * statistics.median(cpus[2:]),
        "checkpoint_cpu_ms": 1000 * statistics.median(dumps[3:]),
    }
    print(", ".join(f"{k} {v:.1f}" for k, v in out.items()))
    return out


if __name__ == "__main__":
    main()
