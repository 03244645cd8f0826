"""Adaptive placement: a step's changes that are small run in the driver, large ones on the cluster.

A Spark step costs at least its jobs (0.1-0.6 s each on a local session, more on a cluster), whatever
the size of its change; the same operators run in the driver over the same bucket files in tens of
milliseconds (`docs/engine-state.md`). So at the start of a step the DataFrames pushed for it are
read into the driver together, in ONE Spark job, each cut at `spark.dbspark.driver_rows` + 1 rows
(default 100,000): a DataFrame that fits is the step's change held in the driver from then on (its
seeks, joins, checks and trace writes run there, no Spark job); one that does not stays on Spark and
its step runs on the cluster (it paid one job for the first rows it did not keep). Rows pushed from
Python are always in the driver.

`spark.dbspark.placement` forces either side: `driver` reads every pushed DataFrame into the driver
whatever its size; `cluster` moves every change to Spark, rows pushed from Python too; `auto` (the
default) decides by the threshold. Both paths write the same files and commit the same way, so steps
of either kind interleave freely. The read is the pushed frames as coerced and checked for their
table (`engines.spark.coerce`): a bad value rejects the step in this job, as it would later.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import polars as pl
import pyarrow as pa

from dbspark.algebra.zset import WEIGHT, ZSet

if TYPE_CHECKING:
    from dbspark.engines.spark.kernel import SparkKernel
    from dbspark.engines.spark.values import SparkZSet

MODES = ("auto", "driver", "cluster")
DRIVER_ROWS = 100_000


def _ipc(it: Iterator[pa.RecordBatch], tag: int) -> Iterator[pa.RecordBatch]:
    """A task's rows as one Arrow IPC stream in one row (tag, rows, bytes): frames of different
    schemas then travel in one union, collected by one job."""
    batches = [b for b in it if b.num_rows]
    if not batches:
        return
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batches[0].schema) as w:
        for b in batches:
            w.write_batch(b)
    yield pa.RecordBatch.from_pydict(
        {
            "tag": pa.array([tag], pa.int32()),
            "n": pa.array([sum(b.num_rows for b in batches)], pa.int64()),
            "ipc": pa.array([sink.getvalue().to_pybytes()], pa.binary()),
        }
    )


def _blob_schema() -> Any:
    from pyspark.sql import types as T

    return T.StructType(
        [
            T.StructField("tag", T.IntegerType(), False),
            T.StructField("n", T.LongType(), False),
            T.StructField("ipc", T.BinaryType(), False),
        ]
    )


def _frame(blobs: list[bytes], schema: pl.Schema) -> pl.DataFrame:
    """The rows of the IPC streams, in the value's Polars types."""
    tables = [pa.ipc.open_stream(b).read_all() for b in blobs]
    cols = [*schema, WEIGHT]
    if not tables:
        return pl.DataFrame(schema=pl.Schema([*schema.items(), (WEIGHT, pl.Int64())]))
    df = pl.from_arrow(pa.concat_tables(tables))
    assert isinstance(df, pl.DataFrame)
    return df.select(cols).cast({**dict(schema.items()), WEIGHT: pl.Int64()})


def mode(kernel: SparkKernel) -> str:
    m = kernel.handle.setting("placement", "auto").strip().lower()
    if m not in MODES:
        from dbspark.errors import EngineError

        # not the data's fault: the changes stay queued for a step run once the setting is fixed
        raise EngineError(f"spark.dbspark.placement is {m!r}; it is one of {', '.join(MODES)}")
    return m


def place(kernel: SparkKernel, batches: Sequence[SparkZSet]) -> list[SparkZSet]:
    """The step's pushed values, each held in the driver or on Spark as the placement decides."""
    from dbspark.engines.spark.values import SparkZSet

    m = mode(kernel)
    kernel.placed_to_driver = 0
    out = list(batches)
    if m == "cluster":
        for i, b in enumerate(out):
            if b._df is None and not b.known_empty:
                out[i] = SparkZSet(kernel.spark, b.schema, b.frame, keys=b.keys, lineage=b.lineage)
        return out
    on_spark = [i for i, b in enumerate(out) if b._df is not None]
    if not on_spark:
        return out
    limit = None if m == "driver" else int(kernel.handle.setting("driver_rows", str(DRIVER_ROWS)))
    df = None
    for tag, i in enumerate(on_spark):
        b = out[i]
        f = b.frame.select(*b.schema, WEIGHT)
        if limit is not None:
            f = f.limit(limit + 1)
        f = f.mapInArrow(lambda it, tag=tag: _ipc(it, tag), _blob_schema())
        df = f if df is None else df.unionByName(f)
    assert df is not None
    frame = df
    with kernel.step_settings():
        got = kernel.act(lambda: frame.toArrow())
    tags, rows, blobs = (got.column(c).to_pylist() for c in ("tag", "n", "ipc"))
    for tag, i in enumerate(on_spark):
        mine = [k for k, t in enumerate(tags) if t == tag]
        if limit is not None and sum(rows[k] for k in mine) > limit:
            continue  # too large for the driver: the step's work on it runs on the cluster
        b = out[i]
        local = _frame([blobs[k] for k in mine], b.schema)
        placed = SparkZSet(kernel.spark, b.schema, local=ZSet(local), keys=b.keys)
        placed.unordered = True
        out[i] = placed
        kernel.placed_to_driver += 1
    return out
