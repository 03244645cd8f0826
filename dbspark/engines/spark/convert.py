"""Between the IR's Polars schemas and Spark: data types, and frames in both directions through Arrow."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import polars as pl
import pyarrow as pa

from dbspark.algebra.zset import WEIGHT, ZSet
from dbspark.errors import UnsupportedError


def sql_name(name: str) -> str:
    """A column name quoted for Spark SQL text."""
    return "`" + name.replace("`", "``") + "`"


def sql_str(text: str) -> str:
    """A string literal for Spark SQL text (backslash escapes, Spark's default parser)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def col(name: str) -> Any:
    """The column `name` of a frame, the name taken as it is spelled. Spark parses a name given as a
    string (`F.col`, `df[name]`, `select`, `groupBy`, `orderBy`, `Window.partitionBy`, `F.sum`, ...): "k.1"
    would be field `1` of a column `k`, and "a`b" a syntax error. Every column name that reaches one of
    those APIs goes through here (or `col_list`); `alias`, `withColumn`, `withColumnRenamed`, `drop` and
    `unionByName` take names literally."""
    from pyspark.sql import functions as F

    return F.col(sql_name(name))


def col_list(names: Iterable[str]) -> list[Any]:
    """`col` of each name: for `select(*col_list(names))`, `groupBy(*col_list(names))` and the like."""
    return [col(n) for n in names]


def map_in_arrow(
    df: Any, fn: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]], schema: Any
) -> Any:
    """`df.mapInArrow(fn, schema)` for a frame whose columns may have any names: pyspark hands the frame's
    columns to its UDF by name (`df[name]`, which Spark parses, see `col`), so they go in under the
    names `__m<i>` and `fn` gets its batches under the frame's own names again (a rename, no copy)."""
    names = list(df.columns)
    plain = df.select(*[col(n).alias(f"__m{i}") for i, n in enumerate(names)])
    return plain.mapInArrow(lambda it: fn(_named(it, names)), schema)


def _named(batches: Iterator[pa.RecordBatch], names: list[str]) -> Iterator[pa.RecordBatch]:
    for b in batches:
        yield b.rename_columns(names)


def spark_type(t: pl.DataType) -> Any:
    """The Spark SQL type of a Polars data type (the ones a schema can declare, `ir.schema`)."""
    from pyspark.sql import types as T

    simple = {
        pl.Int8: T.ByteType,
        pl.Int16: T.ShortType,
        pl.Int32: T.IntegerType,
        pl.Int64: T.LongType,
        pl.Float32: T.FloatType,
        pl.Float64: T.DoubleType,
        pl.String: T.StringType,
        pl.Binary: T.BinaryType,
        pl.Boolean: T.BooleanType,
        pl.Date: T.DateType,
    }
    for pt, st in simple.items():
        if t == pt:
            return st()
    if isinstance(t, pl.Datetime):
        return T.TimestampType() if t.time_zone else T.TimestampNTZType()
    if isinstance(t, pl.Decimal):
        return T.DecimalType(t.precision or 38, t.scale or 0)
    raise UnsupportedError(f"the spark engine has no column type for {t}")


def polars_type(t: Any) -> pl.DataType:
    """The Polars type of a Spark SQL type (the inverse of `spark_type`)."""
    from pyspark.sql import types as T

    simple = {
        T.ByteType: pl.Int8,
        T.ShortType: pl.Int16,
        T.IntegerType: pl.Int32,
        T.LongType: pl.Int64,
        T.FloatType: pl.Float32,
        T.DoubleType: pl.Float64,
        T.StringType: pl.String,
        T.BinaryType: pl.Binary,
        T.BooleanType: pl.Boolean,
        T.DateType: pl.Date,
    }
    for st, pt in simple.items():
        if isinstance(t, st):
            return pt()
    if isinstance(t, T.DecimalType):
        return pl.Decimal(t.precision, t.scale)
    if isinstance(t, T.TimestampNTZType):
        return pl.Datetime("us")
    if isinstance(t, T.TimestampType):
        return pl.Datetime("us", "UTC")
    raise UnsupportedError(f"the spark engine has no column type for {t}")


def spark_schema(schema: pl.Schema, weight: bool = True) -> Any:
    from pyspark.sql import types as T

    fields = [T.StructField(c, spark_type(t), True) for c, t in schema.items()]
    if weight:
        fields.append(T.StructField(WEIGHT, T.LongType(), False))
    return T.StructType(fields)


def _arrow_type(t: pl.DataType) -> pa.DataType:
    if t == pl.String:
        return pa.string()
    if isinstance(t, pl.Datetime):
        return pa.timestamp(t.time_unit or "us", t.time_zone)
    if isinstance(t, pl.Decimal):
        return pa.decimal128(t.precision or 38, t.scale or 0)
    return pl.Series([], dtype=t).to_arrow().type


def to_arrow(df: pl.DataFrame) -> pa.Table:
    """A Polars frame as an Arrow table of the plain types Spark reads (string, not string_view)."""
    t = df.to_arrow()
    target = pa.schema([pa.field(c, _arrow_type(dt)) for c, dt in df.schema.items()])
    return t.cast(target)


def to_spark(spark: Any, df: pl.DataFrame) -> Any:
    """A Polars frame (data columns and the weight) as a Spark DataFrame of the matching types."""
    data = pl.Schema([(c, t) for c, t in df.schema.items() if c != WEIGHT])
    schema = spark_schema(data, weight=WEIGHT in df.columns)
    if df.height == 0:
        return spark.createDataFrame([], schema)
    t = to_arrow(df)
    batches = t.to_batches()
    if any(b.num_rows == 0 for b in batches):
        # PySpark 4's createDataFrame of an Arrow table drops every record batch after an empty one
        # (measured: chunks [1], [], [2], [3] give the row 1 only); a Polars frame's chunks may be empty
        # (a consolidation's concatenated parts), so the empty ones are left out
        t = pa.Table.from_batches([b for b in batches if b.num_rows], schema=t.schema)
    return spark.createDataFrame(t, schema=schema)


def from_spark(sdf: Any, schema: pl.Schema) -> ZSet:
    """Collect a Spark Z-set (data columns of `schema` and the weight) into a local Z-set."""
    t = sdf.toArrow()
    df = pl.from_arrow(t)
    assert isinstance(df, pl.DataFrame)
    cols = [pl.col(c).cast(schema[c]) for c in schema]
    if df.height == 0:
        return ZSet.empty(schema)
    return ZSet(df.select(*cols, pl.col(WEIGHT).cast(pl.Int64)))


def _local_dir(path: str) -> str | None:
    """The local directory a Parquet path names, or None if it is not on this machine's file system."""
    import os

    if path.startswith("file:"):
        path = path[5:]
        while path.startswith("//"):
            path = path[1:]
    elif "://" in path:
        return None
    return path if os.path.isdir(path) else None


def read_local_parquet(paths: tuple[str, ...], schema: pl.Schema) -> ZSet | None:
    """The Z-set stored in Spark-written Parquet directories (data columns and the weight), read in
    Python without a Spark job; None when that is not possible here (a path on another file system, a
    timestamp column whose Parquet encoding Spark chooses by configuration), and Spark reads it."""
    import pyarrow.parquet as pq

    if any(isinstance(t, (pl.Datetime, pl.Time, pl.Duration)) for t in schema.values()):
        return None
    dirs = [_local_dir(p) for p in paths]
    if any(d is None for d in dirs):
        return None
    cols = [*schema, WEIGHT]
    frames = []
    for d in dirs:
        t = pq.read_table(d)
        if t.num_rows == 0:
            continue
        if any(c not in t.column_names for c in cols):
            return None
        df = pl.from_arrow(t.select(cols))
        assert isinstance(df, pl.DataFrame)
        frames.append(df.select(*[pl.col(c).cast(schema[c]) for c in schema], pl.col(WEIGHT).cast(pl.Int64)))
    if not frames:
        return ZSet.empty(schema)
    return ZSet(pl.concat(frames))
