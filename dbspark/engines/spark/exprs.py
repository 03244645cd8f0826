"""Compile scalar expression IR (`dbspark.ir.expr`) to Spark Columns, with the local engine's semantics.

Differences between Spark's and Polars' operators are bridged here so that both engines agree:
integer `//` and `%` floor (Python/Polars), not truncate (Spark `div`, `%`); division by zero gives
NULL for integers and ±inf/NaN for floats (as Polars), not an ANSI error.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import singledispatch
from typing import Any

import polars as pl

from dbspark.engines.spark.convert import spark_type
from dbspark.errors import UnsupportedError
from dbspark.ir.expr import Binary, Cast, Col, Expr, Lit, Unary


def _F() -> Any:
    from pyspark.sql import functions as F

    return F


def _truediv(a: Any, b: Any) -> Any:
    F = _F()
    a, b = a.cast("double"), b.cast("double")
    inf = F.lit(float("inf"))
    by_zero = F.when(a.isNull(), None).when(F.isnan(a) | (a == 0), F.lit(float("nan"))).when(a > 0, inf).otherwise(-inf)
    return F.when(b == 0, by_zero).otherwise(F.try_divide(a, b))


def _mod(a: Any, b: Any, floating: bool) -> Any:
    """Python's a % b (the sign of the divisor), as Polars computes it."""
    F = _F()
    r = a % b
    fixed = F.when((r != 0) & ((r < 0) != (b < 0)), r + b).otherwise(r)
    by_zero = F.when(a.isNotNull(), F.lit(float("nan"))) if floating else F.lit(None)
    return F.when(b == 0, by_zero).otherwise(fixed)


def _floordiv(a: Any, b: Any, floating: bool) -> Any:
    """Python's a // b: the floor of the quotient (exact for integers: (a - a % b) is a multiple of b)."""
    F = _F()
    if floating:
        # Spark's FLOOR returns a BIGINT (an ANSI overflow for ±inf, NaN or |q| >= 2**63); a double of
        # magnitude >= 2**52 is already integral, and NaN/±inf are their own floor (as in Polars)
        q = _truediv(a, b)
        return F.when(F.abs(q) < F.lit(2.0**52), F.floor(q).cast("double")).otherwise(q)
    return F.when(b == 0, None).otherwise(F.call_function("div", a - _mod(a, b, False), b).cast("long"))


_CMP: dict[str, Callable[[Any, Any], Any]] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b,
    "and": lambda a, b: a & b,
    "or": lambda a, b: a | b,
}
_UN: dict[str, Callable[[Any], Any]] = {
    "neg": lambda a: -a,
    "not": lambda a: ~a,
    "is_null": lambda a: a.isNull(),
    "is_not_null": lambda a: a.isNotNull(),
    "abs": lambda a: _F().abs(a),
}


def to_spark_column(e: Expr, schema: pl.Schema) -> Any:
    """The Spark Column computing `e` over a frame with `schema` (its types decide integer vs float ops)."""
    return _compile(e, schema)


@singledispatch
def _compile(e: Expr, schema: pl.Schema) -> Any:
    raise UnsupportedError(f"the spark engine cannot evaluate expression {e!r} ({type(e).__name__})")


@_compile.register
def _(e: Col, schema: pl.Schema) -> Any:
    return _F().col(e.name)


@_compile.register
def _(e: Lit, schema: pl.Schema) -> Any:
    F = _F()
    t = e.dtype(schema)
    if e.value is None:
        return F.lit(None)
    return F.lit(e.value).cast(spark_type(t)) if t != pl.Null() else F.lit(e.value)


@_compile.register
def _(e: Binary, schema: pl.Schema) -> Any:
    a, b = _compile(e.left, schema), _compile(e.right, schema)
    if e.op == "truediv":
        return _truediv(a, b)
    if e.op in ("floordiv", "mod"):
        floating = e.dtype(schema).is_float()
        return _floordiv(a, b, floating) if e.op == "floordiv" else _mod(a, b, floating)
    return _CMP[e.op](a, b)


@_compile.register
def _(e: Unary, schema: pl.Schema) -> Any:
    return _UN[e.op](_compile(e.arg, schema))


@_compile.register
def _(e: Cast, schema: pl.Schema) -> Any:
    return _compile(e.arg, schema).cast(spark_type(e.to))


def py_repr(e: Any, t: pl.DataType) -> Any:
    """A string Column showing a value as Python's repr does (for error messages naming a row)."""
    F = _F()
    if t == pl.String():
        s = F.concat(F.lit("'"), e, F.lit("'"))
    elif t == pl.Boolean():
        s = F.when(e, F.lit("True")).otherwise(F.lit("False"))
    else:
        s = e.cast("string")
    return F.when(e.isNull(), F.lit("None")).otherwise(s)


def py_tuple(cols: list[Any], types: list[pl.DataType]) -> Any:
    """A string Column showing values as Python's repr of a tuple does: (1, 'a') or (1,)."""
    F = _F()
    parts: list[Any] = [F.lit("(")]
    for n, (c, t) in enumerate(zip(cols, types, strict=True)):
        parts += [F.lit("" if n == 0 else ", "), py_repr(c, t)]
    return F.concat(*parts, F.lit(",)" if len(cols) == 1 else ")"))
