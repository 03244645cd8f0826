"""SQL types as the engines' column types (Polars dtypes), and the common type of two columns.

All integer types are 64-bit (BIGINT): values are checked against the declared width on input only
through the 64-bit range. REAL/FLOAT are stored as DOUBLE. DECIMAL without parameters is DuckDB's
DECIMAL(18, 3).
"""

from __future__ import annotations

import polars as pl
from sqlglot import exp

from dbspark.frontends.sql.parse import Source

D = exp.DataType.Type

INTEGERS = {D.TINYINT, D.SMALLINT, D.INT, D.BIGINT, D.UTINYINT, D.USMALLINT, D.UINT, D.UBIGINT}
FLOATS = {D.FLOAT, D.DOUBLE}
STRINGS = {D.VARCHAR, D.CHAR, D.TEXT, D.NVARCHAR, D.NCHAR, D.NAME}
# DuckDB's TIMESTAMP (microseconds, no time zone): sqlglot reads TIMESTAMP and DATETIME as TIMESTAMPNTZ,
# TIMESTAMP_US as TIMESTAMP
TIMESTAMPS = {D.TIMESTAMP, D.TIMESTAMPNTZ, D.DATETIME}


def sql_type(t: exp.DataType, src: Source) -> pl.DataType:
    """The dtype of a SQL type; an unsupported type is an error naming it."""
    kind = t.this
    if kind in INTEGERS:
        return pl.Int64()
    if kind in FLOATS:
        return pl.Float64()
    if kind in STRINGS:
        return pl.String()
    if kind == D.BOOLEAN:
        return pl.Boolean()
    if kind == D.DATE:
        return pl.Date()
    if kind == D.TIMESTAMPTZ:  # TIMESTAMPTZ, TIMESTAMP WITH TIME ZONE: an instant, held in UTC
        if t.expressions:  # as DuckDB's binder
            src.schema_error("type TIMESTAMP WITH TIME ZONE does not take any type parameters", t)
        return pl.Datetime("us", "UTC")
    if kind == D.TIMESTAMPLTZ:
        src.unsupported(f"column type {t.sql(dialect='duckdb')} (TIMESTAMP WITH TIME ZONE is supported)", t)
    if kind in (D.TIMESTAMP_S, D.TIMESTAMP_MS, D.TIMESTAMP_NS):
        src.unsupported(f"column type {t.sql(dialect='duckdb')} (only TIMESTAMP, in microseconds)", t)
    if kind in TIMESTAMPS:
        if t.expressions and [p.this.this for p in t.expressions] != ["6"]:  # TIMESTAMP(0|3|9): _S/_MS/_NS
            src.unsupported(f"column type {t.sql(dialect='duckdb')} (only TIMESTAMP in microseconds)", t)
        return pl.Datetime("us")
    if kind == D.DECIMAL:
        params = [int(p.this.this) for p in t.expressions] if t.expressions else [18, 3]
        precision = params[0]
        scale = params[1] if len(params) > 1 else 0
        if not 1 <= precision <= 38 or not 0 <= scale <= precision:
            src.schema_error(f"DECIMAL({precision}, {scale}) is not a valid decimal type", t)
        return pl.Decimal(precision, scale)
    src.unsupported(f"column type {t.sql(dialect='duckdb')}", t)


def common_type(a: pl.DataType, b: pl.DataType) -> pl.DataType | None:
    """The type both columns convert to (UNION, join keys, CASE branches, IN lists), or None."""
    if a == b:
        return a
    if a == pl.Null():
        return b
    if b == pl.Null():
        return a
    if a.is_numeric() and b.is_numeric():
        if a.is_float() or b.is_float():
            return pl.Float64()
        if isinstance(a, pl.Decimal) or isinstance(b, pl.Decimal):
            sa = getattr(a, "scale", 0) or 0
            sb = getattr(b, "scale", 0) or 0
            ia = (a.precision - sa) if isinstance(a, pl.Decimal) and a.precision else 19
            ib = (b.precision - sb) if isinstance(b, pl.Decimal) and b.precision else 19
            scale = max(sa, sb)
            return pl.Decimal(min(38, max(ia, ib) + scale), scale)
        return pl.Int64()
    if {type(a), type(b)} <= {pl.Date, pl.Datetime}:  # DATE < TIMESTAMP < TIMESTAMP WITH TIME ZONE
        tz = any(isinstance(t, pl.Datetime) and t.time_zone for t in (a, b))
        return pl.Datetime("us", "UTC") if tz else pl.Datetime("us")
    return None
