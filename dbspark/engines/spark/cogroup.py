"""`ZSetKernel.cogroup` on the cluster: a columnar function of whole groups, run inside Spark's tasks.

The parts are tagged, unioned and exchanged by the group keys (one shuffle; rows whose keys are equal,
NULL included, land in one partition), and each task hands its partition's rows of every part, as
Polars frames, to the function in one call: the same function the local engine calls on all the rows
at once (an operator's fold written once above the kernel, `columnar/aggfold.py`). A task holds its
partition's rows; the partitions are the step's shuffle partitions, sized by the work
(`engines.spark.settings`). Without keys there is one group, in one partition, which a sentinel row of
no part keeps in being when every part is empty.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import polars as pl
import pyarrow as pa

from dbspark.engines.spark.convert import col, col_list, map_in_arrow, polars_type, spark_schema, spark_type

PART = "__part"  # which part a row of the union comes from


def frame_schema(df: Any) -> pl.Schema:
    """The Polars schema of a Spark frame's columns."""
    return pl.Schema([(f.name, polars_type(f.dataType)) for f in df.schema.fields])


def cogroup_frames(
    frames: Sequence[Any | None],
    schemas: Sequence[pl.Schema],
    by: Sequence[str],
    fn: Callable[[list[pl.DataFrame]], pl.DataFrame],
    out: pl.Schema,
) -> Any:
    """The Spark plan of `fn` over the groups of `frames` (None: a part without rows, whose frame is
    empty in every call) with columns `schemas`; the result has the columns `out`."""
    from pyspark.sql import functions as F

    wide: dict[str, pl.DataType] = {}
    for s in schemas:
        for c, t in s.items():
            if wide.setdefault(c, t) != t:
                raise TypeError(f"cogroup: column {c!r} is {wide[c]} in one part and {t} in another")
    union = None
    for i, (df, s) in enumerate(zip(frames, schemas, strict=True)):
        if df is None:
            continue
        f = df.select(
            F.lit(i).cast("int").alias(PART),
            *[(col(c) if c in s else F.lit(None).cast(spark_type(t))).alias(c) for c, t in wide.items()],
        )
        union = f if union is None else union.unionByName(f)
    assert union is not None
    if not by:  # a sentinel row (of no part): the one group's task runs even when Spark's optimizer
        # proves every part empty and plans no partition at all (a filter it folds to FALSE)
        nulls = [F.lit(None).cast(spark_type(t)).alias(c) for c, t in wide.items()]
        union = union.unionByName(
            union.sparkSession.range(1).select(F.lit(-1).cast("int").alias(PART), *nulls)
        )
    exchanged = union.repartition(*col_list(by)) if by else union.repartition(1)
    parts = [pl.Schema(s) for s in schemas]
    keyed = bool(by)

    def task(it: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from dbspark.engines.spark.convert import to_arrow

        batches = [b for b in it if b.num_rows]
        if not batches and keyed:
            return
        if batches:
            rows = pl.from_arrow(pa.Table.from_batches(batches))
            assert isinstance(rows, pl.DataFrame)
            tag = rows[PART]
            given = [
                rows.filter(tag == i).select([pl.col(c).cast(t) for c, t in s.items()])
                for i, s in enumerate(parts)
            ]
        else:  # without keys the one group exists without rows (a global aggregate's)
            given = [pl.DataFrame(schema=s) for s in parts]
        result = fn(given)
        if result.height:
            yield from to_arrow(result.select([pl.col(c).cast(t) for c, t in out.items()])).to_batches()

    return map_in_arrow(exchanged, task, spark_schema(out, weight=False))
