"""The SDP example at scale (issue 18's speed goal: an hourly-style refresh with 0.1% changed rows,
`dbspark run` against `spark-pipelines run` on the same project and sources, >= 20x, identical tables):

    python -m bench.sdp                          # 10M orders, 100k customers, 3 refreshes (tens of minutes)
    python -m bench.sdp --orders 200000 --refreshes 1   # a quick run

The project is `examples/sdp/` (its spec and transformations) over generated sources: `data/orders/` as
Parquet files of 1M rows, `data/customers/` a Delta table with its change data feed. A refresh's
change is 0.1% of the rows: a new orders file of orders / 1000 rows, and customers / 1000 customers
updated (region, active), a few deleted and inserted, in Delta commits. Each refresh is timed as whole
commands (`dbspark run spec` and `spark-pipelines run`, both starting their JVM) and as the work alone
(dbspark: the refresh inside its process, after the Spark session is up; SDP: from its log's "Starting
run" to "Run is COMPLETED"); after each, every table dbspark wrote equals SDP's (`dbspark.testing.sdp`).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "sdp"
FILE_ROWS = 1_000_000


def orders(rng: np.random.Generator, first: int, n: int, customers: int) -> pl.DataFrame:
    cents = rng.integers(1, 100_000, n)
    odd = rng.random(n) < 0.05
    cents[odd] = -rng.integers(0, 500, odd.sum())
    cust = pl.Series(rng.integers(0, customers + 10, n))
    cust = pl.select(pl.when(pl.Series(rng.random(n) < 0.02)).then(None).otherwise(cust)).to_series()
    return pl.DataFrame(
        {
            "order_id": np.arange(first, first + n, dtype=np.int64),
            "cust": cust,
            "amount": pl.Series(cents).cast(pl.Decimal(14, 2)) / 100,
            "order_date": pl.Series(rng.integers(0, 30, n)).cast(pl.Int32)
            + dt.date(2026, 11, 1).toordinal()
            - dt.date(1970, 1, 1).toordinal(),
        }
    ).with_columns(pl.col("amount").cast(pl.Decimal(12, 2)), pl.col("order_date").cast(pl.Date))


def customers(rng: np.random.Generator, ids: np.ndarray) -> pl.DataFrame:
    regions = np.array(["north", "south", "east", "west", None], dtype=object)
    return pl.DataFrame(
        {
            "id": ids.astype(np.int64),
            "name": [f"customer {i}" for i in ids],
            "region": pl.Series(list(regions[rng.integers(0, 5, len(ids))]), dtype=pl.String),
            "active": rng.random(len(ids)) < 0.85,
        }
    )


def make(root: Path, n_orders: int, n_customers: int, seed: int = 0) -> None:
    from deltalake import write_deltalake

    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    shutil.copy(EXAMPLE / "spark-pipeline.yml", root)
    shutil.copytree(EXAMPLE / "transformations", root / "transformations")
    rng = np.random.default_rng(seed)
    (root / "data" / "orders").mkdir(parents=True)
    for k, first in enumerate(range(0, n_orders, FILE_ROWS)):
        orders(rng, first, min(FILE_ROWS, n_orders - first), n_customers).write_parquet(
            root / "data" / "orders" / f"batch-0000-{k:03d}.parquet"
        )
    write_deltalake(
        str(root / "data" / "customers"),
        customers(rng, np.arange(n_customers)).to_arrow(),
        configuration={"delta.enableChangeDataFeed": "true"},
    )


def change(root: Path, k: int, n_orders: int, n_customers: int, seed: int = 0) -> None:
    """0.1% of the rows: new orders, and customers updated, deleted and inserted."""
    from deltalake import DeltaTable, write_deltalake

    rng = np.random.default_rng(seed * 1000 + k)
    orders(rng, 10**12 + k * n_orders, max(1, n_orders // 1000), n_customers).write_parquet(
        root / "data" / "orders" / f"batch-{k:04d}.parquet"
    )
    table = DeltaTable(str(root / "data" / "customers"))
    moved = rng.choice(n_customers, max(1, n_customers // 1000), replace=False)
    table.update(
        {"region": "'east'", "active": "NOT active"}, predicate=f"id IN ({', '.join(map(str, moved))})"
    )
    gone = rng.choice(n_customers, 3, replace=False)
    table.delete(f"id IN ({', '.join(map(str, gone))})")
    new = np.arange(10**9 + 10 * k, 10**9 + 10 * k + 3)
    write_deltalake(str(root / "data" / "customers"), customers(rng, new).to_arrow(), mode="append")


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(cmd: list[str], cwd: Path) -> tuple[float, float, str]:
    """(wall, CPU of the process and its children, standard output) of a whole command."""
    c0, t0 = _children_cpu(), time.perf_counter()
    got = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - t0, _children_cpu() - c0
    if got.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{got.stdout[-2000:]}\n{got.stderr[-2000:]}")
    return wall, cpu, got.stdout


def worker(spec: str, engine: str) -> None:
    """One refresh in this process; prints its timings (the Spark session started first, untimed)."""
    import pyspark.pipelines  # noqa: F401  (imports a refresh makes, untimed: the process's start)
    import pyspark.sql.connect.functions  # noqa: F401

    from bench.tc import Clock
    from dbspark.cli.sdp import refresh

    t0 = time.perf_counter()
    if engine == "spark":
        from dbspark.engines.spark.session import get_session

        get_session()
    started = time.perf_counter() - t0
    with Clock() as c:
        r = refresh(Path(spec), engine=engine)
    print(json.dumps({"start": started, "wall": c.wall, "cpu": c.cpu, "step": r.step, "read": r.read}))


def dbspark_refresh(spec: Path, engine: str) -> dict[str, Any]:
    wall, cpu, out = timed([sys.executable, "-m", "bench.sdp", "--worker", str(spec), engine], ROOT)
    inner = json.loads(out.strip().splitlines()[-1])
    return {"command_wall": wall, "command_cpu": cpu, **inner}


def sdp_refresh(spec: Path) -> dict[str, Any]:
    from dbspark.testing.sdp import run_sdp

    t0 = time.perf_counter()
    got = run_sdp(spec, timeout=3600, log=True)
    wall = time.perf_counter() - t0
    log = got.pop("__log__")
    stamps = [
        dt.datetime.fromisoformat(m)
        for m in re.findall(
            r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d): (?:Starting run|Run is COMPLETED)", log, re.M
        )
    ]
    run = (stamps[-1] - stamps[0]).total_seconds() if len(stamps) >= 2 else float("nan")
    return {"command_wall": wall, "run_wall": run, "tables": got}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--orders", type=int, default=10_000_000)
    ap.add_argument("--customers", type=int, default=100_000)
    ap.add_argument("--refreshes", type=int, default=3)
    ap.add_argument("--engine", default="spark", choices=["spark", "local"])
    ap.add_argument("--dir", type=Path, default=Path("/tmp/dbspark-bench-sdp"))
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    if a.worker:
        worker(*a.worker)
        return
    from dbspark.testing.sdp import assert_same_tables, oracle_copy, read_published

    root = a.dir / "shop"
    t0 = time.perf_counter()
    make(root, a.orders, a.customers)
    print(
        f"sources: {a.orders:,} orders, {a.customers:,} customers ({time.perf_counter() - t0:.1f} s)",
        flush=True,
    )
    spec = root / "spark-pipeline.yml"
    load = dbspark_refresh(spec, a.engine)
    print(f"load: dbspark {load['wall']:.1f} s ({load['command_wall']:.1f} s as a command)", flush=True)
    runs = []
    for k in range(1, a.refreshes + 1):
        change(root, k, a.orders, a.customers)
        ours = dbspark_refresh(spec, a.engine)
        sdp = sdp_refresh(oracle_copy(root, a.dir / "sdp"))
        assert_same_tables(read_published(root), sdp.pop("tables"), f"after refresh {k}")
        runs.append({"dbspark": ours, "sdp": sdp})
        print(
            f"refresh {k}: dbspark {ours['wall']:.2f} s (CPU {ours['cpu']:.2f} s; {ours['command_wall']:.1f} s as a "
            f"command), spark-pipelines {sdp['run_wall']:.1f} s ({sdp['command_wall']:.1f} s as a command): "
            f"{sdp['run_wall'] / ours['wall']:.1f}x, {sdp['command_wall'] / ours['command_wall']:.1f}x as commands; "
            "tables identical",
            flush=True,
        )
    med = {
        "dbspark": statistics.median(r["dbspark"]["wall"] for r in runs),
        "dbspark_command": statistics.median(r["dbspark"]["command_wall"] for r in runs),
        "sdp": statistics.median(r["sdp"]["run_wall"] for r in runs),
        "sdp_command": statistics.median(r["sdp"]["command_wall"] for r in runs),
    }
    print(
        f"median refresh: dbspark {med['dbspark']:.2f} s, spark-pipelines {med['sdp']:.1f} s: {med['sdp'] / med['dbspark']:.1f}x "
        f"(as whole commands {med['dbspark_command']:.1f} s and {med['sdp_command']:.1f} s: "
        f"{med['sdp_command'] / med['dbspark_command']:.1f}x)"
    )
    if a.out is not None:
        a.out.write_text(
            json.dumps(
                {"args": {k: str(v) for k, v in vars(a).items()}, "load": load, "runs": runs, "median": med},
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
