"""Compile scalar expression IR (`dbspark.ir.expr`) to Polars expressions."""

from __future__ import annotations

from collections.abc import Callable
from functools import singledispatch

import polars as pl

from dbspark.errors import UnsupportedError
from dbspark.ir.expr import Binary, Cast, Col, Expr, Lit, Unary

_BIN: dict[str, Callable[[pl.Expr, pl.Expr], pl.Expr]] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "truediv": lambda a, b: a.cast(pl.Float64) / b.cast(pl.Float64),
    "floordiv": lambda a, b: a // b,
    "mod": lambda a, b: a % b,
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b,
    "and": lambda a, b: a & b,
    "or": lambda a, b: a | b,
}
_UN: dict[str, Callable[[pl.Expr], pl.Expr]] = {
    "neg": lambda a: -a,
    "not": lambda a: ~a,
    "is_null": lambda a: a.is_null(),
    "is_not_null": lambda a: a.is_not_null(),
    "abs": lambda a: a.abs(),
}


@singledispatch
def to_polars(e: Expr) -> pl.Expr:
    raise UnsupportedError(f"the local engine cannot evaluate expression {e!r} ({type(e).__name__})")


@to_polars.register
def _(e: Col) -> pl.Expr:
    return pl.col(e.name)


@to_polars.register
def _(e: Lit) -> pl.Expr:
    return pl.lit(e.value)


@to_polars.register
def _(e: Binary) -> pl.Expr:
    return _BIN[e.op](to_polars(e.left), to_polars(e.right))


@to_polars.register
def _(e: Unary) -> pl.Expr:
    return _UN[e.op](to_polars(e.arg))


@to_polars.register
def _(e: Cast) -> pl.Expr:
    return to_polars(e.arg).cast(e.to)
