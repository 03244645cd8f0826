"""One tiny step on a user's own SparkSession with Spark's default settings (200 shuffle partitions, AQE
on, console progress): `SparkSession.builder.master("local[2]").getOrCreate()` passed to
`Pipeline(engine="spark", spark=...)`, a join + GROUP BY view in SQL, 10-row steps.

    python -m bench.user_session [--steps 5] [--conf spark.key=value ...]

`--conf` sets session SQL settings before the pipeline starts (to emulate a user's configuration).
Prints the wall and CPU time of each step (CPU: this process, Spark's JVM and its Python workers, read
from /proc) and the medians; the view is checked against DuckDB at the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import duckdb

import dbspark

SQL = """
CREATE TABLE r (k BIGINT, g BIGINT);
CREATE TABLE s (k BIGINT, v BIGINT);
CREATE VIEW v AS SELECT g, COUNT(*) AS n, SUM(v) AS total FROM r JOIN s USING (k) GROUP BY g;
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--conf", action="append", default=[])
    args = ap.parse_args(argv)
    from pyspark.sql import SparkSession

    t0 = time.perf_counter()
    spark = SparkSession.builder.master("local[2]").getOrCreate()
    print(f"session started in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    for kv in args.conf:
        k, v = kv.split("=", 1)
        spark.conf.set(k, v)
    before = {k: spark.conf.get(k, None) for k in WATCHED}
    r_rows: list[tuple[int, int]] = []
    s_rows: list[tuple[int, int]] = []
    times: list[float] = []
    cpus: list[float] = []
    with tempfile.TemporaryDirectory() as d, dbspark.Pipeline(d, engine="spark", spark=spark) as p:
        p.sql(SQL)
        for i in range(args.steps + 1):  # step 0 warms up (JVM, plan caches), not counted
            r = [(10 * i + j, j % 3) for j in range(10)]
            s = [(10 * i + j, j) for j in range(10)]
            r_rows += r
            s_rows += s
            t, c = time.perf_counter(), cpu_seconds()
            p.insert("r", r)
            p.insert("s", s)
            p.step()
            dt, dc = time.perf_counter() - t, cpu_seconds() - c
            print(f"step {i + 1}: {dt:.2f} s, CPU {dc:.2f} s", file=sys.stderr)
            if i:
                times.append(dt)
                cpus.append(dc)
        got = sorted(row for row, _ in p.view("v").to_rows())
    con = duckdb.connect()
    con.execute("CREATE TABLE r (k BIGINT, g BIGINT); CREATE TABLE s (k BIGINT, v BIGINT)")
    con.executemany("INSERT INTO r VALUES (?, ?)", r_rows)
    con.executemany("INSERT INTO s VALUES (?, ?)", s_rows)
    want = sorted(con.execute("SELECT g, COUNT(*), SUM(v) FROM r JOIN s USING (k) GROUP BY g").fetchall())
    after = {k: spark.conf.get(k, None) for k in WATCHED}
    print(
        f"tiny step (10 rows per table), median of {len(times)}: {statistics.median(times):.2f} s "
        f"[{min(times):.2f}..{max(times):.2f}], CPU {statistics.median(cpus):.2f} s "
        f"[{min(cpus):.2f}..{max(cpus):.2f}]; load {os.getloadavg()[0]:.1f}"
    )
    print(f"session settings before: {before}")
    print(f"session settings after:  {after}")
    spark.stop()
    if [tuple(x) for x in got] != want:  # all weights are 1
        print(f"RESULT MISMATCH: {got} != {want}")
        return 1
    return 0


def cpu_seconds() -> float:
    """CPU time (user + system) of this process and all its descendants (the JVM, Python workers)."""
    children: dict[int, list[int]] = {}
    stats: dict[int, list[str]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            stats[int(d)] = fields
            children.setdefault(int(fields[1]), []).append(int(d))
    tick = os.sysconf("SC_CLK_TCK")
    total, todo = 0.0, [os.getpid()]
    while todo:
        pid = todo.pop()
        if pid in stats:
            total += (int(stats[pid][11]) + int(stats[pid][12])) / tick
        todo += children.get(pid, [])
    return total


WATCHED = (
    "spark.sql.shuffle.partitions",
    "spark.sql.adaptive.enabled",
    "spark.sql.ansi.enabled",
    "spark.sql.session.timeZone",
)

if __name__ == "__main__":
    sys.exit(main())
