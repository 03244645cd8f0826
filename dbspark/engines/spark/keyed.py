"""Tables with a primary key on the spark engine: one step's upserts and deletes as one lazy change.

The semantics are those of `columnar/keyed.py`, which runs a step held in the driver (operations in push order, per key: a delete is valid
iff the key is there at that point; the final row is the last insert's unless a delete came last; the
change is -old + final). The step's operations are ordered by (push, position): rows pushed from
Python keep their row order; a Spark DataFrame has no row order, so within one such push its deletes
come before its inserts (a delete and an insert of a key in one DataFrame update the row), and two
inserts of one key in it are an error. The table's integral is read only at the change's keys (a
seek, then a semi-join with the keys, shuffled: a broadcast would be a Spark job of its own); the
checks fail the plan (`raise_error`) when the change is written, so a step costs no extra action.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

from dbspark import errors
from dbspark.algebra.zset import WEIGHT
from dbspark.engines.spark.convert import col, col_list, to_spark
from dbspark.engines.spark.exprs import fail_as, py_repr
from dbspark.engines.spark.values import SparkZSet

PUSH, POS = "__push", "__pos"


def _F() -> Any:
    from pyspark.sql import functions

    return functions


def _ops(spark: Any, batches: Sequence[SparkZSet], schema: pl.Schema) -> Any:
    """The step's operations: data columns, the weight, and their order (PUSH, POS)."""
    F = _F()
    cols = [*schema, WEIGHT]
    local = [(i, b, b.local) for i, b in enumerate(batches) if b._df is None and b.local is not None]
    parts = []
    if local:
        frames = [
            z.df.select(
                *schema,
                pl.lit(i, pl.Int64).alias(PUSH),
                # rows of a DataFrame read into the driver keep the frame's order: deletes, then inserts
                (pl.when(pl.col(WEIGHT) < 0).then(0).otherwise(1) if b.unordered else pl.int_range(pl.len()))
                .cast(pl.Int64)
                .alias(POS),
                WEIGHT,
            )
            for i, b, z in local
            if z.df.height
        ]
        if frames:
            parts.append(
                to_spark(spark, pl.concat(frames, how="vertical")).select(*col_list(cols), PUSH, POS)
            )
    for i, b in enumerate(batches):
        if b._df is not None:
            pos = F.when(F.col(WEIGHT) < 0, 0).otherwise(1).cast("long")
            parts.append(b.frame.select(*col_list(cols), F.lit(i).cast("long").alias(PUSH), pos.alias(POS)))
    if not parts:
        return None
    out = parts[0]
    for p in parts[1:]:
        out = out.unionByName(p)
    return out


def keyed_change(
    spark: Any, snap: Any, batches: Sequence[SparkZSet], schema: pl.Schema, key: Sequence[str], where: str
) -> Any:
    """The change (data columns and weight, consolidated) of a keyed table whose integral is the
    DataFrame `snap` (None: empty), as a lazy DataFrame that fails when an operation is invalid."""
    from pyspark.sql import Window

    F = _F()
    key, cols = list(key), list(schema)
    ops = _ops(spark, batches, schema)
    if ops is None:
        return spark.createDataFrame([], schema=_empty_schema(schema))
    w = F.col(WEIGHT)
    if snap is not None:
        keys = ops.select(*col_list(key)).distinct().hint("shuffle_hash")
        # (a join `on` names takes them literally, as `unionByName` does: one column each, deduplicated)
        old = (
            snap.join(keys, on=key, how="left_semi")
            .groupBy(*col_list(cols))
            .agg(F.sum(WEIGHT).alias(WEIGHT))
            .filter(w != 0)
        )
        had = old.select(*col_list(key)).distinct().withColumn("__had", F.lit(True))
        ops = ops.join(had.hint("shuffle_hash"), on=key, how="left")
    else:
        old = None
        ops = ops.withColumn("__had", F.lit(False))
    order = Window.partitionBy(*col_list(key)).orderBy(PUSH, POS)  # one window (one sort) for every column
    ops = ops.select(
        "*",
        F.lag(WEIGHT).over(order).alias("__prev"),
        F.lead(PUSH).over(order).isNull().alias("__last"),
        ((F.lag(PUSH).over(order) == F.col(PUSH)) & (F.lag(POS).over(order) == F.col(POS))).alias("__tie"),
    )
    present = F.when(F.col("__prev").isNull(), F.coalesce(F.col("__had"), F.lit(False))).otherwise(
        F.col("__prev") == 1
    )
    shown = F.concat(  # (a=7, b='q'), as `columnar.keyed` shows a key
        F.lit("("),
        *[
            part
            for i, c in enumerate(key)
            for part in (F.lit(("" if i == 0 else ", ") + f"{c}="), py_repr(col(c), schema[c]))
        ],
        F.lit(")"),
    )
    checked = (
        F.when(
            (w == -1) & ~present,
            fail_as(
                errors.NegativeStateError,
                F.concat(
                    F.lit(f"{where}: delete of key "),
                    shown,
                    F.lit(" that is not there ("),
                    F.when(F.col("__prev").isNull(), F.lit("it is not in the table")).otherwise(
                        F.lit("it was deleted earlier in this step")
                    ),
                    F.lit(")"),
                ),
            ),
        )
        .when(
            (w == 1) & (F.col("__prev") == 1) & F.coalesce(F.col("__tie"), F.lit(False)),
            fail_as(
                errors.DataError,
                F.concat(
                    F.lit(f"{where}: one pushed DataFrame inserts key "),
                    shown,
                    F.lit(" twice (a DataFrame has no row order: push the rows in order, or one per key)"),
                ),
            ),
        )
        .otherwise(w)
    )
    # every operation's check is evaluated (it is the first operand); only the key's last insert stays
    new = ops.select(
        *col_list(cols),
        F.when(checked == 1, F.when(F.col("__last"), 1).otherwise(0)).otherwise(0).cast("long").alias(WEIGHT),
    )
    change = new if old is None else new.unionByName(old.select(*col_list(cols), (-w).alias(WEIGHT)))
    return change.groupBy(*col_list(cols)).agg(F.sum(WEIGHT).alias(WEIGHT)).filter(w != 0)


def _empty_schema(schema: pl.Schema) -> Any:
    from dbspark.engines.spark.convert import spark_schema

    return spark_schema(schema)
