"""Schemas: ordered column names with Polars data types, parsed from friendly type names."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import polars as pl

from dbspark.errors import SchemaError

_NAMES: dict[str, pl.DataType] = {
    "int": pl.Int64(),
    "integer": pl.Int64(),
    "bigint": pl.Int64(),
    "int64": pl.Int64(),
    "i64": pl.Int64(),
    "int32": pl.Int32(),
    "smallint": pl.Int16(),
    "int16": pl.Int16(),
    "tinyint": pl.Int8(),
    "int8": pl.Int8(),
    "float": pl.Float64(),
    "double": pl.Float64(),
    "float64": pl.Float64(),
    "real": pl.Float32(),
    "float32": pl.Float32(),
    "number": pl.Int64(),
    "str": pl.String(),
    "string": pl.String(),
    "text": pl.String(),
    "varchar": pl.String(),
    "symbol": pl.String(),
    "bool": pl.Boolean(),
    "boolean": pl.Boolean(),
    "date": pl.Date(),
    "timestamp": pl.Datetime("us"),
    "datetime": pl.Datetime("us"),
}
_DECIMAL = re.compile(r"^(?:decimal|numeric)\s*\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\)$", re.I)


def to_dtype(t: Any) -> pl.DataType:
    """A Polars dtype from a dtype, a Python type or a name such as 'int64', 'str' or 'decimal(15,2)'."""
    if isinstance(t, pl.DataType):
        return t
    if isinstance(t, type) and issubclass(t, pl.DataType):
        return t()
    if t is int:
        return pl.Int64()
    if t is float:
        return pl.Float64()
    if t is str:
        return pl.String()
    if t is bool:
        return pl.Boolean()
    if isinstance(t, str):
        name = t.strip().lower()
        if name in _NAMES:
            return _NAMES[name]
        m = _DECIMAL.match(name)
        if m:
            return pl.Decimal(int(m.group(1)), int(m.group(2) or 0))
    raise SchemaError(
        f"unknown column type {t!r}; use e.g. 'int64', 'float64', 'str', 'bool', 'date', 'decimal(p,s)'"
    )


def to_schema(spec: Mapping[str, Any] | pl.Schema) -> pl.Schema:
    """A Polars schema from {column: type}; column names must be unique and not reserved."""
    if not spec:
        raise SchemaError("a schema needs at least one column")
    out = []
    for name, t in spec.items():
        if not isinstance(name, str) or not name:
            raise SchemaError(f"column names must be non-empty strings, got {name!r}")
        if name.startswith("__"):
            raise SchemaError(f"column name {name!r} is reserved (names starting with '__' are internal)")
        out.append((name, to_dtype(t)))
    return pl.Schema(out)


def describe(schema: pl.Schema) -> str:
    return "(" + ", ".join(f"{c}: {t}" for c, t in schema.items()) + ")"
