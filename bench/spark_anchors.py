"""Spark-side anchors for `join_groupby`: Spark SQL recomputing the view, and Spark Structured Streaming
maintaining it on the append-only shape it supports.

Both run in one `local[2]` SparkSession (`bench.spark_scale.start_spark`: the settings dbspark's own
spark engine uses, with a 6 GiB driver), started once per workload.

* **Spark SQL recompute** (the natural best form of "recompute on Spark"): the current R and S as
  Parquet files, `SELECT g, COUNT(*) ... GROUP BY g` run and collected, one untimed warm-up and
  `RECOMPUTE_REPEATS` timed runs. Writing the Parquet files is not timed.
* **Structured Streaming**: Spark's incremental engine supports a stream joined with a static table
  followed by a streaming aggregate (complete output mode), but no deletes and no stream-stream join
  followed by an aggregate without event-time watermarks. So its shape is append-only: R is a stream of
  Parquet files (the load is the first file, then one file per batch of inserts), S is static and cached,
  the sink is the memory sink. A batch's time runs from writing its file into the source directory until
  `processAllAvailable()` returns, which is when the micro-batch's output is in the sink.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from bench import harness as h

RECOMPUTE_REPEATS = 3


def start() -> tuple[Any | None, str]:
    """(spark, "") or (None, why it cannot run)."""
    if h.skipped("spark"):
        return None, "skipped by BENCH_SKIP"
    try:
        from bench.spark_scale import start_spark

        spark, _ = start_spark()
    except Exception as e:  # noqa: BLE001 - an anchor that cannot run is reported, not fatal
        return None, f"could not start local Spark ({type(e).__name__}: {e})"
    return spark, ""


def spark_sql_recompute(
    spark: Any, tables: dict[str, pl.DataFrame], sql: str, tmp: Path
) -> tuple[list[float], pl.DataFrame]:
    """Time `sql` over `tables` (written as Parquet, registered as temp views): warm-up + repeats."""
    for name, df in tables.items():
        path = tmp / f"{name}.parquet"
        df.write_parquet(path, row_group_size=256 * 1024)
        spark.read.parquet(str(path)).createOrReplaceTempView(name)
    out: list[Any] = []

    def once(_: int) -> None:
        out[:] = [spark.sql(sql).toArrow()]

    times = h.repeat(once, RECOMPUTE_REPEATS, warmup=1)
    return times, pl.from_arrow(out[0])  # type: ignore[return-value]


def structured_streaming(
    spark: Any,
    static: pl.DataFrame,
    load: pl.DataFrame,
    batches: Sequence[pl.DataFrame],
    key: str,
    group: str,
) -> tuple[list[float], pl.DataFrame, float]:
    """`stream.join(static, key).groupBy(group).count()` on Structured Streaming, fed `load` then each
    batch as one Parquet file. Returns (batch times, final view (group, n), load time)."""
    tmp = Path(tempfile.mkdtemp(prefix="dbspark-bench-sss-"))
    src, staging = tmp / "in", tmp / "staging"
    src.mkdir()
    staging.mkdir()
    q = None
    try:
        static.write_parquet(tmp / "static.parquet")
        s = spark.read.parquet(str(tmp / "static.parquet")).cache()
        s.count()
        seq = iter(range(len(batches) + 1))

        def put(df: pl.DataFrame) -> None:
            name = f"part-{next(seq):05d}.parquet"
            df.write_parquet(staging / name)
            os.rename(staging / name, src / name)  # atomic: the source never lists a half-written file

        schema = spark.createDataFrame(load.head(1).to_pandas()).schema
        stream = spark.readStream.schema(schema).parquet(str(src))
        view = stream.join(s, key).groupBy(group).count().withColumnRenamed("count", "n")
        t0 = time.perf_counter()
        put(load)
        q = (
            view.writeStream.outputMode("complete")
            .format("memory")
            .queryName("bench_sss_view")
            .option("checkpointLocation", str(tmp / "checkpoint"))
            .start()
        )
        q.processAllAvailable()
        load_s = time.perf_counter() - t0

        def step(i: int) -> None:
            put(batches[i])
            q.processAllAvailable()

        times = h.repeat(step, len(batches))
        result = pl.from_arrow(spark.sql(f"SELECT {group}, n FROM bench_sss_view").toArrow())
        assert isinstance(result, pl.DataFrame)
        return times, result.cast(pl.Int64), load_s
    finally:
        if q is not None:
            q.stop()
        shutil.rmtree(tmp, ignore_errors=True)
