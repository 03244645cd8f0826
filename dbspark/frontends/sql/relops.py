"""Relational building blocks on `Rel`s that SQL needs beyond the circuit's operators: joins on
expressions, null-safe row matching, outer joins with NULL padding.

The circuit's joins never match NULL keys (SQL equality). Matching whole rows, where NULL must equal
NULL (a row of a bag is a value), encodes each nullable column as two key columns: the value with
NULL replaced by a constant, and whether it was NULL.
"""

from __future__ import annotations

import datetime as dt
import decimal
from typing import TYPE_CHECKING, Any

import polars as pl

from dbspark.frontends.sql.scope import Names, Rel
from dbspark.ir import expr as ir

if TYPE_CHECKING:
    from dbspark.circuit.stream import Stream


def placeholder(t: pl.DataType) -> Any:
    """A constant of type `t` that stands for NULL in a null-safe key (paired with an is-null flag)."""
    if t == pl.String():
        return ""
    if t == pl.Boolean():
        return False
    if t == pl.Date():
        return dt.date(1970, 1, 1)
    if isinstance(t, pl.Datetime):
        return dt.datetime(1970, 1, 1)
    if isinstance(t, pl.Decimal):
        return decimal.Decimal(0)
    if t.is_float():
        return 0.0
    return 0


def null_safe_keys(s: Stream, cols: list[str], fresh: Names) -> tuple[Stream, list[str]]:
    """`s` with key columns that match NULL to NULL under SQL equality; returns the key column names."""
    items: list[tuple[str, ir.Expr]] = [(c, ir.Col(c)) for c in s.schema]
    keys: list[str] = []
    for c in cols:
        t = s.schema[c]
        v, n = fresh.fresh("k"), fresh.fresh("k")
        items.append((v, ir.Cast(ir.Func("coalesce", (ir.Col(c), ir.Lit(placeholder(t)))), t)))
        items.append((n, ir.Unary("is_null", ir.Col(c))))
        keys += [v, n]
    return s.map(*items), keys


def drop_to(s: Stream, cols: list[str]) -> Stream:
    return s if list(s.schema) == cols else s.map(*cols)


def semi_rows(rel: Rel, matched: Stream, cols: list[str], fresh: Names, anti: bool) -> Rel:
    """Rows of `rel` (with their weights) that occur (anti: do not occur) among the rows of `matched`,
    whose columns are `cols` of rel's stream, NULL matching NULL."""
    base = list(rel.stream.schema)
    a, ak = null_safe_keys(rel.stream, cols, fresh)
    b, bk = null_safe_keys(matched.stream_distinct(), cols, fresh)
    hit = a.stream_semijoin(b.map(*bk), left_on=ak, right_on=bk)
    out = (a - hit) if anti else hit
    return Rel(drop_to(out, base), rel.fields)


def pad_nulls(s: Stream, extra: pl.Schema) -> Stream:
    """`s` with NULL columns of `extra`'s names and types appended."""
    items: list[tuple[str, ir.Expr]] = [(c, ir.Col(c)) for c in s.schema]
    items += [(c, ir.Cast(ir.Lit(None), t)) for c, t in extra.items()]
    return s.map(*items)


def cast_to(s: Stream, types: dict[str, pl.DataType]) -> Stream:
    """`s` with the named columns cast (only where the type differs)."""
    if all(s.schema[c] == t for c, t in types.items()):
        return s
    return s.map(
        *[
            (c, ir.Cast(ir.Col(c), types[c]) if c in types and s.schema[c] != types[c] else ir.Col(c))
            for c in s.schema
        ]
    )


def add_columns(rel: Rel, items: list[tuple[str, ir.Expr]]) -> Rel:
    """`rel` with computed columns appended (not visible as fields: the caller names them)."""
    if not items:
        return rel
    s = rel.stream.map(*[(c, ir.Col(c)) for c in rel.stream.schema], *items)
    return Rel(s, list(rel.fields))
