"""Coerce a pushed Spark DataFrame to an input's declared column types, lazily, inside the Spark plan.

The rules are those of `columnar.coerce` (a SQL INSERT as DuckDB does it), written as Spark column
expressions (as SQL text: a pushed frame is planned in a few py4j calls, where each Column function
would cost a dozen): each value is converted with `try_cast` (NULL where it does not convert) and a value that
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
from dbspark.engines.spark.convert import spark_type, sql_name, sql_str
from dbspark.engines.spark.exprs import fail_sql

RADIX_TEXT = r"^\s*0[{a}{A}][0-9a-fA-F]+$"  # '0x1f', '0b101'
NUMBER_TEXT = r"^[+-]?[0-9]+(_[0-9]+)*(\.[0-9]+(_[0-9]+)*)?$"


QUOTE = sql_str("'")


def _when(cond: str, then: str, otherwise: str | None = None) -> str:
    return f"CASE WHEN {cond} THEN {then}" + (f" ELSE {otherwise}" if otherwise is not None else "") + " END"


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

    types = {f.name: f.dataType for f in df.schema.fields}  # one schema read (each builds it anew)
    carries_weight = "weight" in types and "weight" not in schema
    given = [c for c in types if not (carries_weight and c == "weight")]
    names = match_columns(given, list(schema), key, where, "DataFrame columns")
    key_only = len(names) < len(schema)
    if carries_weight and weights is not None:
        raise errors.SchemaError(f"{where}: rows carry a weight column and weights were given too")
    if carries_weight:
        given_w = sql_name("weight")
        w = f"try_cast({given_w} AS bigint)"
        msg = f"concat({sql_str(f'{where}: weight ')}, CAST({given_w} AS string), ' is not an integer')"
        w = _when(f"{given_w} IS NOT NULL AND {w} IS NULL", fail_sql(errors.WeightError, msg), w)
    elif weights is None:
        w = "CAST(1 AS bigint)"
    elif isinstance(weights, int) and not isinstance(weights, bool):
        w = f"CAST({int(weights)} AS bigint)"
    else:
        raise errors.SchemaError(
            f"{where}: a Spark DataFrame takes one integer weight (or a `weight` column)"
        )
    if key is not None:
        prefix = (
            f"{where} has a primary key {tuple(key)}: a push takes weight 1 (insert or update) or -1 "
            f"(delete), not "
        )
        msg = f"concat({sql_str(prefix)}, CAST({w} AS string))"
        w = _when(f"({w}) != 1 AND ({w}) != -1", fail_sql(errors.DataError, msg), w)
        if key_only:
            msg = sql_str(
                f"{where}: an insert needs every column {list(schema)}; "
                f"only a delete may give just the primary key {list(key)}"
            )
            w = _when(f"({w}) > 0", fail_sql(errors.SchemaError, msg), w)
    required = set(key or ()) if key_only else set(not_null)
    sel = []
    for c, t in schema.items():
        target = spark_type(t)
        tname = target.simpleString()
        if c not in names:
            sel.append(f"CAST(NULL AS {tname}) AS {sql_name(c)}")
            continue
        src = sql_name(names[c])
        st = types[names[c]]
        if st == target:
            out = src
        else:
            conv = _convert(src, st, t, tname, T)
            shown = (
                f"concat({QUOTE}, {src}, {QUOTE})"
                if isinstance(st, T.StringType)
                else f"CAST({src} AS string)"
            )
            msg = (
                f"concat({sql_str(f'{where}: column {c!r} ({sql_type(t)}) cannot take the value ')}, {shown})"
            )
            out = _when(f"{src} IS NOT NULL AND ({conv}) IS NULL", fail_sql(errors.CoercionError, msg), conv)
        if c in required:
            msg = sql_str(f"{where}: column {c!r} is NOT NULL but a row has the value NULL (None) there")
            out = _when(f"({out}) IS NULL", fail_sql(errors.DataError, msg), out)
        sel.append(f"{out} AS {sql_name(c)}")
    weight = sql_name(WEIGHT)
    return df.selectExpr(*sel, f"{w} AS {weight}").filter(f"{weight} != 0")


def _convert(src: str, st: Any, t: pl.DataType, target: str, T: Any) -> str:
    """`src` (SQL, of Spark type `st`) converted to `t` (SQL type name `target`), NULL where the value
    does not convert."""
    numeric = isinstance(st, (T.IntegralType, T.FractionalType, T.BooleanType))
    floating = isinstance(st, (T.FloatType, T.DoubleType))
    null = f"CAST(NULL AS {target})"
    if t.is_integer():
        if isinstance(st, (T.IntegralType, T.BooleanType)):
            return f"try_cast({src} AS {target})"
        if isinstance(st, (T.FractionalType)):
            ok = f"{src} = round({src}, 0)"
            if floating:
                ok = f"{ok} AND NOT isnan({src})"
            return _when(ok, f"try_cast({src} AS {target})", null)
        if isinstance(st, T.StringType):  # integer text, integral decimal text, '0x1f' / '0b101'
            x = _number_text(src)
            d = f"try_cast({x} AS decimal(38,9))"
            whole = _when(f"{d} = round({d}, 0)", f"try_cast({d} AS bigint)")
            radix = [
                _when(
                    f"{src} RLIKE {sql_str(RADIX_TEXT.format(a=a, A=a.upper()))}",
                    f"try_cast(conv(regexp_extract({src}, {sql_str(f'0[{a}{a.upper()}]([0-9a-fA-F]+)')}, 1), "
                    f"{base}, 10) AS bigint)",
                )
                for a, base in (("x", 16), ("b", 2))
            ]
            return f"try_cast(coalesce(try_cast({x} AS bigint), {whole}, {', '.join(radix)}) AS {target})"
        return null
    if t.is_float():
        if numeric:
            return f"try_cast({src} AS {target})"
        if isinstance(st, T.StringType):
            return f"try_cast(try_cast({_number_text(src)} AS double) AS {target})"
        return null
    if isinstance(t, pl.Decimal):
        p, s = t.precision or 38, t.scale or 0
        if floating and p <= 18:
            return _double_to_decimal(f"CAST({src} AS double)", p, s, target)
        if numeric:
            return f"try_cast({src} AS {target})"
        if isinstance(st, T.StringType):
            return f"try_cast({_number_text(src)} AS {target})"
        return null
    if t == pl.String:
        return f"CAST({src} AS string)"
    if t == pl.Boolean:
        if isinstance(st, T.StringType):
            low = f"lower({src})"
            return (
                f"CASE WHEN {low} IN ('true', 't', 'yes', 'y', '1') THEN true "
                f"WHEN {low} IN ('false', 'f', 'no', 'n', '0') THEN false END"
            )
        if numeric or floating:  # NaN is not 0: true, as DuckDB stores it
            return f"({src} != 0)"
        return null
    if t == pl.Date:
        if isinstance(st, T.StringType):
            return f"try_cast(trim({src}) AS {target})"
        if isinstance(st, (T.TimestampType, T.TimestampNTZType)):
            return f"CAST({src} AS {target})"
        return null
    if isinstance(t, pl.Datetime):
        if isinstance(st, T.StringType):
            return f"try_cast(trim({src}) AS {target})"
        if isinstance(st, (T.DateType, T.TimestampType, T.TimestampNTZType)):
            return f"CAST({src} AS {target})"
        return null
    return f"try_cast({src} AS {target})"


def _number_text(src: str) -> str:
    """Numeric text as DuckDB reads it: spaces around it ignored, single '_' between digits allowed."""
    x = f"trim({src})"
    plain = f"{x} RLIKE {sql_str(NUMBER_TEXT)}"
    return _when(plain, f"regexp_replace({x}, '_', '')", x)


def _double_to_decimal(x: str, p: int, s: int, target: str) -> str:
    """DuckDB's DOUBLE -> DECIMAL(p, s) (p <= 18): x·10^s in double arithmetic, rounded half away from zero,
    below 10^p; built as exact text, so the decimal is exactly that integer over 10^s."""
    v = f"({x} * CAST({10.0**s:.1f} AS double))"
    a = f"abs({v})"
    fits = f"(NOT isnan({v}) AND {a} < CAST({10.0**p:.1f} AS double))"
    fl = _when(fits, f"CAST(floor({a}) AS bigint)")
    n = f"({fl} + {_when(f'{a} - {fl} >= 0.5', '1', '0')})"
    sign = _when(f"{v} < 0", "'-'", "''")
    if s == 0:
        text = f"concat({sign}, CAST({n} AS string))"
    else:
        digits = f"CAST({n} AS string)"  # at least s + 1 digits, then a point before the last s
        digits = _when(f"length({digits}) <= {s}", f"lpad({digits}, {s + 1}, '0')", digits)
        text = f"concat({sign}, regexp_replace({digits}, {sql_str(f'([0-9]{{{s}}})$')}, '.$1'))"
    return _when(f"{fits} AND {n} < {10**p}L", f"try_cast({text} AS {target})")
