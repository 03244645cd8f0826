"""DuckDB's implicit casts of string literals: a string constant compared with (or combined in CASE,
COALESCE, IN, ... with) a value of another type takes that type (`d_date = '2000-01-03'`,
`a BETWEEN '1' AND '5'`), read with CAST's text forms (`dbspark.columnar.sqlforms.parse_text`).

Only literals convert: a VARCHAR column compared with a DATE stays a type error. The literal is folded
when the view is declared, so a string that does not convert ('abc' compared with a DATE) is an error
at declaration naming the literal (DuckDB raises the same conversion error when it evaluates the
comparison on a row).
"""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

from dbspark.columnar.sqlforms import parse_text
from dbspark.errors import SchemaError
from dbspark.ir import expr as ir
from dbspark.ir import functions as fn

COMPARISONS = {"eq", "ne", "lt", "le", "gt", "ge"}
PAIRS = {"is_distinct_from", "is_not_distinct_from"}  # compare their two arguments
UNIFIED = {"coalesce", "greatest", "least", "nullif"}  # arguments of one common type
CASTABLE = {"int", "decimal", "float", "bool", "date", "datetime"}

# (the string, the type it fails to convert to) -> raises
OnError = Callable[[str, pl.DataType], None]


def coerce_literals(e: ir.Expr, schema: pl.Schema, on_error: OnError) -> ir.Expr:
    """`e` with each string literal that meets a non-string value converted to the value's type."""
    return _Coercer(schema, on_error).walk(e)


def _is_text(e: ir.Expr) -> bool:
    return isinstance(e, ir.Lit) and isinstance(e.value, str)


class _Coercer:
    def __init__(self, schema: pl.Schema, on_error: OnError) -> None:
        self.schema = schema
        self.on_error = on_error

    def dtype(self, e: ir.Expr) -> pl.DataType | None:
        try:
            return e.dtype(self.schema)
        except (SchemaError, KeyError):
            return None  # the type check after this pass reports it

    def target(self, others: list[ir.Expr]) -> pl.DataType | None:
        """The common type of the non-literal operands, if string literals convert to it."""
        types = [self.dtype(o) for o in others if not _is_text(o)]
        if not types or any(t is None for t in types):
            return None
        try:
            t = fn.supertype([t for t in types if t is not None], "")
        except SchemaError:
            return None
        return t if fn.kind(t) in CASTABLE else None

    def fold(self, e: ir.Expr, t: pl.DataType | None) -> ir.Expr:
        if t is None or not _is_text(e):
            return e
        assert isinstance(e, ir.Lit)
        p, s = fn.dec_of(t) if fn.kind(t) == "decimal" else (38, 0)
        try:
            k = "timestamptz" if fn.is_tz(t) else fn.kind(t)
            return ir.Lit(parse_text(e.value, k, p, s))
        except ValueError:
            self.on_error(e.value, t)
            raise

    def unify(self, items: list[ir.Expr]) -> list[ir.Expr]:
        t = self.target(items)
        return [self.fold(i, t) for i in items]

    def walk(self, e: ir.Expr) -> ir.Expr:
        if isinstance(e, ir.Binary):
            left, right = self.walk(e.left), self.walk(e.right)
            if e.op in COMPARISONS:
                left, right = self.unify([left, right])
            return ir.Binary(e.op, left, right)
        if isinstance(e, ir.Unary):
            return ir.Unary(e.op, self.walk(e.arg))
        if isinstance(e, ir.Cast):
            return ir.Cast(self.walk(e.arg), e.to)
        if isinstance(e, ir.Func):
            args = [self.walk(a) for a in e.args]
            if e.name in PAIRS or e.name in UNIFIED:
                args = self.unify(args)
            return ir.Func(e.name, tuple(args))
        if isinstance(e, ir.InList):
            items = self.unify([self.walk(e.arg), *(self.walk(i) for i in e.items)])
            return ir.InList(items[0], tuple(items[1:]))
        if isinstance(e, ir.Case):
            whens = [(self.walk(c), self.walk(v)) for c, v in e.whens]
            vals = self.unify(
                [v for _, v in whens] + ([] if e.otherwise is None else [self.walk(e.otherwise)])
            )
            out = tuple((c, v) for (c, _), v in zip(whens, vals, strict=False))
            return ir.Case(out, vals[len(whens)] if e.otherwise is not None else None)
        return e
