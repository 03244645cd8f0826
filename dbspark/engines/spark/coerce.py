"""Coerce a pushed Spark DataFrame to an input's declared column types, lazily, inside the Spark plan.

The rules are those of `columnar.coerce` (a SQL INSERT as DuckDB does it), written as Spark column
expressions: each value is converted with `try_cast` (NULL where it does not convert) and a value that
was not NULL but converts to NULL fails the plan through `raise_error`, naming the input, the column and
the value; so do NULLs in NOT NULL columns and, for a keyed table, weights other than 1 / -1. Nothing
runs at push time: a bad value rejects the step that reads it (`SparkKernel.act` turns the tagged error
into the dbspark error). Known differences from the local engine: strings are parsed into dates and
timestamps by Spark's casts, and a DOUBLE into a DECIMAL of precision above 18 by Spark's cast (HALF_UP
on the double's shortest decimal text) rather than DuckDB's double arithmetic.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

from dbspark import errors
from dbspark.algebra.zset import WEIGHT
from dbspark.columnar.coerce import sql_type
from dbspark.columnar.rows import match_columns
from dbspark.engines.spark.convert import col, spark_type
from dbspark.engines.spark.exprs import fail_as


def _F() -> Any:
    from pyspark.sql import functions

    return functions


def coerce_frame(
    df: Any,
    schema: pl.Schema,
    weights: Any,
    where: str,
    not_null: Sequence[str] = (),
    key: Sequence[str] | None = None,
) -> Any:
    """`df` as a Z-set frame of `schema` (data columns, then the weight), checked inside the plan."""
    from pyspark.sql import types as T

    F = _F()
    carries_weight = "weight" in df.columns and "weight" not in schema
    given = [c for c in df.columns if not (carries_weight and c == "weight")]
    names = match_columns(given, list(schema), key, where, "DataFrame columns")
    key_only = len(names) < len(schema)
    if carries_weight and weights is not None:
        raise errors.SchemaError(f"{where}: rows carry a weight column and weights were given too")
    if carries_weight:
        w = F.col("weight").try_cast("long")
        w = F.when(
            F.col("weight").isNotNull() & w.isNull(),
            fail_as(
                errors.WeightError,
                F.concat(
                    F.lit(f"{where}: weight "), F.col("weight").cast("string"), F.lit(" is not an integer")
                ),
            ),
        ).otherwise(w)
    elif weights is None:
        w = F.lit(1).cast("long")
    elif isinstance(weights, int) and not isinstance(weights, bool):
        w = F.lit(weights).cast("long")
    else:
        raise errors.SchemaError(
            f"{where}: a Spark DataFrame takes one integer weight (or a `weight` column)"
        )
    if key is not None:
        w = F.when(
            (w != 1) & (w != -1),
            fail_as(
                errors.DataError,
                F.concat(
                    F.lit(
                        f"{where} has a primary key {tuple(key)}: a push takes weight 1 (insert or update) or -1 "
                        f"(delete), not "
                    ),
                    w.cast("string"),
                ),
            ),
        ).otherwise(w)
        if key_only:
            w = F.when(
                w > 0,
                fail_as(
                    errors.SchemaError,
                    f"{where}: an insert needs every column {list(schema)}; "
                    f"only a delete may give just the primary key {list(key)}",
                ),
            ).otherwise(w)
    required = set(key or ()) if key_only else set(not_null)
    sel = []
    for c, t in schema.items():
        target = spark_type(t)
        if c not in names:
            sel.append(F.lit(None).cast(target).alias(c))
            continue
        src = col(names[c])
        st = df.schema[names[c]].dataType
        if st == target:
            out = src
        else:
            conv = _convert(src, st, t, target, T)
            shown = (
                F.concat(F.lit("'"), src, F.lit("'")) if isinstance(st, T.StringType) else src.cast("string")
            )
            out = F.when(
                src.isNotNull() & conv.isNull(),
                fail_as(
                    errors.CoercionError,
                    F.concat(F.lit(f"{where}: column {c!r} ({sql_type(t)}) cannot take the value "), shown),
                ),
            ).otherwise(conv)
        if c in required:
            out = F.when(
                out.isNull(),
                fail_as(
                    errors.DataError,
                    f"{where}: column {c!r} is NOT NULL but a row has the value NULL (None) there",
                ),
            ).otherwise(out)
        sel.append(out.alias(c))
    return df.select(*sel, w.alias(WEIGHT)).filter(F.col(WEIGHT) != 0)


def _convert(src: Any, st: Any, t: pl.DataType, target: Any, T: Any) -> Any:
    """`src` (of Spark type `st`) converted to `t`, NULL where the value does not convert."""
    F = _F()
    numeric = isinstance(st, (T.IntegralType, T.FractionalType, T.BooleanType))
    floating = isinstance(st, (T.FloatType, T.DoubleType))
    null = F.lit(None).cast(target)
    if t.is_integer():
        if isinstance(st, (T.IntegralType, T.BooleanType)):
            return src.try_cast(target)
        if isinstance(st, (T.FractionalType)):
            ok = src == F.round(src, 0)
            if floating:
                ok = ok & ~F.isnan(src)
            return F.when(ok, src.try_cast(target)).otherwise(null)
        if isinstance(st, T.StringType):  # integer text, integral decimal text, '0x1f' / '0b101'
            x = _number_text(src)
            d = x.try_cast("decimal(38,9)")
            whole = F.when(d == F.round(d, 0), d.try_cast("long"))
            radix = [
                F.when(
                    src.rlike(f"^\\s*0[{a}{a.upper()}][0-9a-fA-F]+$"),
                    F.conv(F.regexp_extract(src, f"0[{a}{a.upper()}]([0-9a-fA-F]+)", 1), base, 10).try_cast(
                        "long"
                    ),
                )
                for a, base in (("x", 16), ("b", 2))
            ]
            return F.coalesce(x.try_cast("long"), whole, *radix).try_cast(target)
        return null
    if t.is_float():
        if numeric:
            return src.try_cast(target)
        if isinstance(st, T.StringType):
            return _number_text(src).try_cast("double").try_cast(target)
        return null
    if isinstance(t, pl.Decimal):
        p, s = t.precision or 38, t.scale or 0
        if floating and p <= 18:
            return _double_to_decimal(src.cast("double"), p, s, target)
        if numeric:
            return src.try_cast(target)
        if isinstance(st, T.StringType):
            return _number_text(src).try_cast(target)
        return null
    if t == pl.String:
        return src.cast("string")
    if t == pl.Boolean:
        if isinstance(st, T.StringType):
            low = F.lower(src)
            return F.when(low.isin("true", "t", "yes", "y", "1"), F.lit(True)).when(
                low.isin("false", "f", "no", "n", "0"), F.lit(False)
            )
        if numeric or floating:  # NaN is not 0: true, as DuckDB stores it
            return src != 0
        return null
    if t == pl.Date:
        if isinstance(st, T.StringType):
            return F.trim(src).try_cast(target)
        if isinstance(st, (T.TimestampType, T.TimestampNTZType)):
            return src.cast(target)
        return null
    if isinstance(t, pl.Datetime):
        if isinstance(st, T.StringType):
            return F.trim(src).try_cast(target)
        if isinstance(st, (T.DateType, T.TimestampType, T.TimestampNTZType)):
            return src.cast(target)
        return null
    return src.try_cast(target)


def _number_text(src: Any) -> Any:
    """Numeric text as DuckDB reads it: spaces around it ignored, single '_' between digits allowed."""
    F = _F()
    x = F.trim(src)
    plain = x.rlike(r"^[+-]?[0-9]+(_[0-9]+)*(\.[0-9]+(_[0-9]+)*)?$")
    return F.when(plain, F.regexp_replace(x, "_", "")).otherwise(x)


def _double_to_decimal(x: Any, p: int, s: int, target: Any) -> Any:
    """DuckDB's DOUBLE -> DECIMAL(p, s) (p <= 18): x·10^s in double arithmetic, rounded half away from zero,
    below 10^p; built as exact text, so the decimal is exactly that integer over 10^s."""
    F = _F()
    v = x * F.lit(10.0**s)
    a = F.abs(v)
    fits = ~F.isnan(v) & (a < F.lit(10.0**p))
    fl = F.when(fits, F.floor(a).cast("long"))
    n = fl + F.when(a - fl >= 0.5, 1).otherwise(0)
    sign = F.when(v < 0, F.lit("-")).otherwise(F.lit(""))
    if s == 0:
        text = F.concat(sign, n.cast("string"))
    else:
        digits = n.cast("string")  # at least s + 1 digits, then a point before the last s
        digits = F.when(F.length(digits) <= s, F.lpad(digits, s + 1, "0")).otherwise(digits)
        text = F.concat(sign, F.regexp_replace(digits, f"([0-9]{{{s}}})$", ".$1"))
    return F.when(fits & (n < F.lit(10**p)), text.try_cast(target))
