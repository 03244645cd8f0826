"""Scalar expressions: one small immutable IR, compiled by each engine (local: Polars; spark: Column).

Expressions are built with `col`, `lit` and Python operators: `(col("a") + 1 > col("b")) & col("c").is_not_null()`.
Nodes are frozen dataclasses, so they hash and compare structurally; the circuit cache relies on it.
Types follow SQL: comparisons are three-valued (NULL propagates), `&`/`|` are Kleene logic.
"""

from __future__ import annotations

import datetime as _dt
import decimal as _decimal
from dataclasses import dataclass
from typing import Any

import polars as pl

from dbspark.errors import SchemaError, UnknownNameError
from dbspark.ir import functions as fn

# truediv / floordiv / mod are Python's (Polars') operators; sql_div / int_div / sql_mod are DuckDB's
# `/` (always DOUBLE), `//` and `%` (truncating, sign of the dividend); add / sub / mul / neg / abs
# raise DataError on integer overflow (SQL), in the result's width.
ARITH = {
    "add": "+",
    "sub": "-",
    "mul": "*",
    "truediv": "/",
    "floordiv": "//",
    "mod": "%",
    "sql_div": "/",
    "int_div": "//",
    "sql_mod": "%",
}
SQL_ARITH = ("add", "sub", "mul", "sql_div", "int_div", "sql_mod")
COMPARE = {"eq": "=", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
LOGIC = {"and": "AND", "or": "OR"}
UNARY = {"neg": "-", "not": "NOT", "is_null": "IS NULL", "is_not_null": "IS NOT NULL", "abs": "abs"}


class Expr:
    """Base class of scalar expressions; operators build new nodes."""

    def _bin(self, op: str, other: Any, swap: bool = False) -> Binary:
        if op in ("and", "or") and isinstance(other, bool):
            raise TypeError(BOOL_OPERAND.format(op=op))
        o = other if isinstance(other, Expr) else Lit(other)
        return Binary(op, o, self) if swap else Binary(op, self, o)

    def __add__(self, o: Any) -> Expr:
        return self._bin("add", o)

    def __radd__(self, o: Any) -> Expr:
        return self._bin("add", o, True)

    def __sub__(self, o: Any) -> Expr:
        return self._bin("sub", o)

    def __rsub__(self, o: Any) -> Expr:
        return self._bin("sub", o, True)

    def __mul__(self, o: Any) -> Expr:
        return self._bin("mul", o)

    def __rmul__(self, o: Any) -> Expr:
        return self._bin("mul", o, True)

    def __truediv__(self, o: Any) -> Expr:
        return self._bin("truediv", o)

    def __floordiv__(self, o: Any) -> Expr:
        return self._bin("floordiv", o)

    def __mod__(self, o: Any) -> Expr:
        return self._bin("mod", o)

    def __lt__(self, o: Any) -> Expr:
        return self._bin("lt", o)

    def __le__(self, o: Any) -> Expr:
        return self._bin("le", o)

    def __gt__(self, o: Any) -> Expr:
        return self._bin("gt", o)

    def __ge__(self, o: Any) -> Expr:
        return self._bin("ge", o)

    def __and__(self, o: Any) -> Expr:
        return self._bin("and", o)

    def __rand__(self, o: Any) -> Expr:
        return self._bin("and", o, True)

    def __or__(self, o: Any) -> Expr:
        return self._bin("or", o)

    def __ror__(self, o: Any) -> Expr:
        return self._bin("or", o, True)

    def __neg__(self) -> Expr:
        return Unary("neg", self)

    def __invert__(self) -> Expr:
        return Unary("not", self)

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
    # an integer as SQL text wrote it: typed as DuckDB types integer literals in arithmetic (INTEGER, or
    # the other operand's integer type); an `int` from the Python API is BIGINT
    sql_int: bool = False

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
        if isinstance(v, _decimal.Decimal):
            return decimal_literal_type(v)
        if isinstance(v, _dt.datetime):  # an aware datetime is a TIMESTAMP WITH TIME ZONE
            return pl.Datetime("us", "UTC") if v.tzinfo is not None else pl.Datetime("us")
        if isinstance(v, _dt.date):
            return pl.Date()
        return pl.Series([v]).dtype

    def __repr__(self) -> str:
        return repr(self.value)


def _int_literal(e: Expr) -> int | None:
    """The value of an integer literal, `-` applied to one included (DuckDB folds it), else None."""
    if isinstance(e, Unary) and e.op == "neg":
        v = _int_literal(e.arg)
        return None if v is None else -v
    if isinstance(e, Lit) and e.sql_int and isinstance(e.value, int) and not isinstance(e.value, bool):
        return e.value
    return None


def _literal_type(e: Expr, own: pl.DataType, other: pl.DataType) -> pl.DataType:
    """DuckDB's type of an integer literal in arithmetic: the other operand's integer type when the
    value fits it (`smallint_col + 1` stays SMALLINT), else INTEGER when it fits, else BIGINT; so
    `dec18_col + 3` is DECIMAL(18, s) with an overflow check, as in DuckDB (3 is INTEGER, not BIGINT)."""
    v = _int_literal(e)
    if v is None or not fn.is_int(own):
        return own
    mag = -v if isinstance(e, Unary) else v  # `-2147483648` is BIGINT: the literal is 2147483648
    if fn.is_int(other) and _int_literal_other(other, v):
        return fn.norm_int(other)
    return pl.Int32() if -(2**31) <= mag < 2**31 else pl.Int64()


def _int_literal_other(t: pl.DataType, v: int) -> bool:
    lo, hi = fn.INT_RANGE[fn.norm_int(t)]
    return lo <= v <= hi


@dataclass(frozen=True, eq=True)
class Binary(Expr):
    op: str
    left: Expr
    right: Expr

    def columns(self) -> set[str]:
        return self.left.columns() | self.right.columns()

    def dtype(self, schema: pl.Schema) -> pl.DataType:
        lt, rt = self.left.dtype(schema), self.right.dtype(schema)
        if self.op in COMPARE:
            fn.check_comparable(lt, rt, repr(self))
            return pl.Boolean()
        if self.op in LOGIC:
            return pl.Boolean()
        if self.op in SQL_ARITH:
            lt, rt = _literal_type(self.left, lt, rt), _literal_type(self.right, rt, lt)
            return fn.arith_type(self.op, lt, rt, ARITH[self.op])
        if self.op not in ARITH:
            raise SchemaError(f"unknown binary operator {self.op!r}")
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
        if self.op not in UNARY:
            raise SchemaError(f"unknown unary operator {self.op!r}")
        return fn.unary_type(self.op, t)

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
        fn.check_cast(self.arg.dtype(schema), self.to)
        return self.to

    def __repr__(self) -> str:
        return f"CAST({self.arg!r} AS {self.to})"


@dataclass(frozen=True, eq=True)
class Func(Expr):
    """A SQL function call by its DuckDB name (`dbspark.ir.functions.REGISTRY`)."""

    name: str
    args: tuple[Expr, ...]

    def columns(self) -> set[str]:
        return set().union(*(a.columns() for a in self.args)) if self.args else set()

    def dtype(self, schema: pl.Schema) -> pl.DataType:
        if self.name.startswith("spark_") and self.name in _macros().MACROS:
            return _macros().expand(self, schema).dtype(schema)
        return fn.typed(self.name, [a.dtype(schema) for a in self.args], self.args)

    def __repr__(self) -> str:
        return f"{self.name}({', '.join(repr(a) for a in self.args)})"


def _macros() -> Any:
    from dbspark.ir import macros  # (it builds expressions of this module)

    return macros


@dataclass(frozen=True, eq=True)
class Case(Expr):
    """Searched CASE WHEN c1 THEN v1 ... ELSE otherwise END (NULL when `otherwise` is None); branches
    are evaluated only on the rows that reach them (an error in a branch no row takes is no error)."""

    whens: tuple[tuple[Expr, Expr], ...]
    otherwise: Expr | None = None

    def columns(self) -> set[str]:
        out: set[str] = set() if self.otherwise is None else self.otherwise.columns()
        for c, v in self.whens:
            out |= c.columns() | v.columns()
        return out

    def dtype(self, schema: pl.Schema) -> pl.DataType:
        if not self.whens:
            raise SchemaError("CASE needs at least one WHEN")
        for c, _ in self.whens:
            t = c.dtype(schema)
            if t not in (pl.Boolean(), pl.Null()):
                raise SchemaError(f"CASE condition {c!r} has type {fn.sql_name(t)}, not BOOLEAN")
        vals = [v for _, v in self.whens] + ([] if self.otherwise is None else [self.otherwise])
        return fn.supertype([v.dtype(schema) for v in vals], "CASE")

    def __repr__(self) -> str:
        body = " ".join(f"WHEN {c!r} THEN {v!r}" for c, v in self.whens)
        tail = "" if self.otherwise is None else f" ELSE {self.otherwise!r}"
        return f"CASE {body}{tail} END"


@dataclass(frozen=True, eq=True)
class InList(Expr):
    """arg IN (items...): TRUE on a match, else NULL if arg or an item is NULL, else FALSE."""

    arg: Expr
    items: tuple[Expr, ...]

    def columns(self) -> set[str]:
        return self.arg.columns().union(*(i.columns() for i in self.items))

    def dtype(self, schema: pl.Schema) -> pl.DataType:
        if not self.items:
            raise SchemaError("IN needs at least one item")
        t = self.arg.dtype(schema)
        for i in self.items:
            fn.check_comparable(t, i.dtype(schema), repr(self))
        fn.supertype([t, *(i.dtype(schema) for i in self.items)], repr(self))
        return pl.Boolean()

    def __repr__(self) -> str:
        return f"({self.arg!r} IN ({', '.join(repr(i) for i in self.items)}))"


def decimal_literal_type(v: _decimal.Decimal) -> pl.Decimal:
    """DECIMAL(p, s) of a decimal constant as DuckDB types the literal: 1.50 is DECIMAL(3,2), 0.5 is
    DECIMAL(2,1) (the zero before the point counts), 1E+3 is DECIMAL(4,0)."""
    _, digits, exp = v.as_tuple()
    s = max(0, -int(exp))
    p = max(len(digits) + max(0, int(exp)), s + 1 if s else 1)
    return pl.Decimal(min(p, 38), min(s, 38))


def func(name: str, *args: Any) -> Func:
    """A SQL function call; arguments that are not expressions are constants (a str is a constant too)."""
    return Func(name, tuple(a if isinstance(a, Expr) else Lit(a) for a in args))


def col(name: str) -> Col:
    """A reference to a column of the input stream."""
    return Col(name)


def lit(value: Any) -> Lit:
    """A constant."""
    return Lit(value)


BOOL_OPERAND = (
    "a Python bool as an operand of {op!r}: `==` and `!=` between dbspark expressions compare the "
    "expressions themselves (a bool), not their values; write `a.eq(b)` / `a.ne(b)` (or lit(True))"
)


def as_predicate(e: Any) -> Expr:
    """A filter's predicate: an expression (a Python bool is refused: `BOOL_OPERAND`)."""
    if isinstance(e, bool):
        raise TypeError(BOOL_OPERAND.format(op="filter"))
    return as_expr(e)


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
