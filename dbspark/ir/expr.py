"""Scalar expressions: one small immutable IR, compiled by each engine (local: Polars; spark: Column).

Expressions are built with `col`, `lit` and Python operators: `(col("a") + 1 > col("b")) & col("c").is_not_null()`.
Nodes are frozen dataclasses, so they hash and compare structurally; the circuit cache relies on it.
Types follow SQL: comparisons are three-valued (NULL propagates), `&`/`|` are Kleene logic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from dbspark.errors import SchemaError, UnknownNameError

ARITH = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%"}
COMPARE = {"eq": "=", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
LOGIC = {"and": "AND", "or": "OR"}
UNARY = {"neg": "-", "not": "NOT", "is_null": "IS NULL", "is_not_null": "IS NOT NULL", "abs": "abs"}


class Expr:
    """Base class of scalar expressions; operators build new nodes."""

    def _bin(self, op: str, other: Any, swap: bool = False) -> Binary:
        o = other if isinstance(other, Expr) else Lit(other)
        return Binary(op, o, self) if swap else Binary(op, self, o)

    def __add__(self, o: Any) -> Expr: return self._bin("add", o)
    def __radd__(self, o: Any) -> Expr: return self._bin("add", o, True)
    def __sub__(self, o: Any) -> Expr: return self._bin("sub", o)
    def __rsub__(self, o: Any) -> Expr: return self._bin("sub", o, True)
    def __mul__(self, o: Any) -> Expr: return self._bin("mul", o)
    def __rmul__(self, o: Any) -> Expr: return self._bin("mul", o, True)
    def __truediv__(self, o: Any) -> Expr: return self._bin("truediv", o)
    def __floordiv__(self, o: Any) -> Expr: return self._bin("floordiv", o)
    def __mod__(self, o: Any) -> Expr: return self._bin("mod", o)
    def __lt__(self, o: Any) -> Expr: return self._bin("lt", o)
    def __le__(self, o: Any) -> Expr: return self._bin("le", o)
    def __gt__(self, o: Any) -> Expr: return self._bin("gt", o)
    def __ge__(self, o: Any) -> Expr: return self._bin("ge", o)
    def __and__(self, o: Any) -> Expr: return self._bin("and", o)
    def __rand__(self, o: Any) -> Expr: return self._bin("and", o, True)
    def __or__(self, o: Any) -> Expr: return self._bin("or", o)
    def __ror__(self, o: Any) -> Expr: return self._bin("or", o, True)
    def __neg__(self) -> Expr: return Unary("neg", self)
    def __invert__(self) -> Expr: return Unary("not", self)

    def eq(self, o: Any) -> Expr:
        """SQL `=` (Python `==` stays structural equality, which the circuit cache needs)."""
        return self._bin("eq", o)

    def ne(self, o: Any) -> Expr:
        return self._bin("ne", o)

    def is_null(self) -> Expr:
        return Unary("is_null", self)

    def is_not_null(self) -> Expr:
        return Unary("is_not_null", self)

    def abs(self) -> Expr:
        return Unary("abs", self)

    def alias(self, name: str) -> tuple[str, Expr]:
        return (name, self)

    def columns(self) -> set[str]:
        raise NotImplementedError

    def dtype(self, schema: pl.Schema) -> pl.DataType:
        raise NotImplementedError


@dataclass(frozen=True, eq=True)
class Col(Expr):
    name: str

    def columns(self) -> set[str]:
        return {self.name}

    def dtype(self, schema: pl.Schema) -> pl.DataType:
        if self.name not in schema:
            raise UnknownNameError(f"unknown column {self.name!r}; the stream has columns {list(schema)}")
        return schema[self.name]

    def __repr__(self) -> str:
        return self.name


@dataclass(frozen=True, eq=True)
class Lit(Expr):
    value: Any

    def columns(self) -> set[str]:
        return set()

    def dtype(self, schema: pl.Schema) -> pl.DataType:
        v = self.value
        if v is None:
            return pl.Null()
        if isinstance(v, bool):
            return pl.Boolean()
        if isinstance(v, int):
            return pl.Int64()
        if isinstance(v, float):
            return pl.Float64()
        if isinstance(v, str):
            return pl.String()
        return pl.Series([v]).dtype

    def __repr__(self) -> str:
        return repr(self.value)


@dataclass(frozen=True, eq=True)
class Binary(Expr):
    op: str
    left: Expr
    right: Expr

    def columns(self) -> set[str]:
        return self.left.columns() | self.right.columns()

    def dtype(self, schema: pl.Schema) -> pl.DataType:
        lt, rt = self.left.dtype(schema), self.right.dtype(schema)
        if self.op in COMPARE or self.op in LOGIC:
            return pl.Boolean()
        if self.op == "truediv":
            return pl.Float64()
        for t in (lt, rt):
            if not (t.is_numeric() or t == pl.Null()):
                raise SchemaError(f"arithmetic {ARITH[self.op]!r} on non-numeric type {t} in {self!r}")
        if lt == pl.Null():
            return rt
        if rt == pl.Null():
            return lt
        if lt.is_float() or rt.is_float():
            return pl.Float64()
        if isinstance(lt, pl.Decimal) or isinstance(rt, pl.Decimal):
            return pl.Decimal(38, max(getattr(lt, "scale", 0) or 0, getattr(rt, "scale", 0) or 0))
        return pl.Int64()

    def __repr__(self) -> str:
        sym = ARITH.get(self.op) or COMPARE.get(self.op) or LOGIC.get(self.op)
        return f"({self.left!r} {sym} {self.right!r})"


@dataclass(frozen=True, eq=True)
class Unary(Expr):
    op: str
    arg: Expr

    def columns(self) -> set[str]:
        return self.arg.columns()

    def dtype(self, schema: pl.Schema) -> pl.DataType:
        t = self.arg.dtype(schema)
        if self.op in ("not", "is_null", "is_not_null"):
            return pl.Boolean()
        return t

    def __repr__(self) -> str:
        if self.op in ("is_null", "is_not_null"):
            return f"({self.arg!r} {UNARY[self.op]})"
        return f"{UNARY[self.op]}({self.arg!r})"


@dataclass(frozen=True, eq=True)
class Cast(Expr):
    arg: Expr
    to: pl.DataType

    def columns(self) -> set[str]:
        return self.arg.columns()

    def dtype(self, schema: pl.Schema) -> pl.DataType:
        return self.to

    def __repr__(self) -> str:
        return f"CAST({self.arg!r} AS {self.to})"


def col(name: str) -> Col:
    """A reference to a column of the input stream."""
    return Col(name)


def lit(value: Any) -> Lit:
    """A constant."""
    return Lit(value)


def as_expr(e: Any) -> Expr:
    if isinstance(e, Expr):
        return e
    if isinstance(e, str):
        return Col(e)
    return Lit(e)


def check_columns(e: Expr, schema: pl.Schema, where: str) -> None:
    missing = e.columns() - set(schema)
    if missing:
        raise UnknownNameError(f"{where}: unknown column(s) {sorted(missing)}; the stream has {list(schema)}")
