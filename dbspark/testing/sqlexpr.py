"""Print scalar expression IR (`dbspark.ir.expr`) as DuckDB SQL text: the oracle of `tests/test_sql_exprs.py`.

Constants carry their IR type (an int is `CAST(5 AS BIGINT)`, a Decimal `CAST('1.50' AS DECIMAL(3,2))`)
so that DuckDB types every subexpression as dbspark does. AND / OR print as a CASE that evaluates the
right side only where the left does not decide: dbspark's (and Spark's) short-circuit, under which an
error in the right side of `FALSE AND x` is no error. Python's `/`, `//`, `%` (ops truediv,
floordiv, mod) have no DuckDB operator and are not printed.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math

import polars as pl

from dbspark.errors import UnsupportedError
from dbspark.ir import functions as fn
from dbspark.ir.expr import Binary, Case, Cast, Col, Expr, Func, InList, Lit, Unary, decimal_literal_type

_BIN = {
    "add": "+",
    "sub": "-",
    "mul": "*",
    "sql_div": "/",
    "int_div": "//",
    "sql_mod": "%",
    "eq": "=",
    "ne": "<>",
    "lt": "<",
    "le": "<=",
    "gt": ">",
    "ge": ">=",
    "and": "AND",
    "or": "OR",
}


def quote(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def type_sql(t: pl.DataType) -> str:
    return fn.sql_name(t)


def lit_sql(v: object) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, int):
        return f"CAST({v} AS BIGINT)"
    if isinstance(v, float):
        text = "nan" if math.isnan(v) else repr(v)
        return f"CAST('{text}' AS DOUBLE)"
    if isinstance(v, str):
        return quote(v)
    if isinstance(v, decimal.Decimal):
        return f"CAST('{v:f}' AS {type_sql(decimal_literal_type(v))})"
    if isinstance(v, dt.datetime):
        return f"TIMESTAMP '{v.isoformat(sep=' ')}'"
    if isinstance(v, dt.date):
        return f"DATE '{v.isoformat()}'"
    raise UnsupportedError(f"no SQL text for the constant {v!r}")


def to_sql(e: Expr, schema: pl.Schema | None = None) -> str:
    """DuckDB SQL text of an expression over columns of `schema` (quoted identifiers). The schema is
    needed only where DuckDB's operator depends on a column's type (DATE + integer)."""
    return _Printer(schema if schema is not None else pl.Schema()).sql(e)


class _Printer:
    def __init__(self, schema: pl.Schema) -> None:
        self.schema = schema

    def dtype(self, e: Expr) -> pl.DataType:
        try:
            return e.dtype(self.schema)
        except Exception:
            return fn.NULL

    def sql(self, e: Expr) -> str:
        to_sql = self.sql
        if isinstance(e, Col):
            return ident(e.name)
        if isinstance(e, Lit):
            return lit_sql(e.value)
        if isinstance(e, Binary):
            if e.op not in _BIN:
                raise UnsupportedError(f"no DuckDB operator for {e.op!r}")
            if e.op in ("add", "sub") and pl.Date() in (self.dtype(e.left), self.dtype(e.right)):
                left, right = (
                    f"CAST({to_sql(x)} AS INTEGER)" if fn.is_int(self.dtype(x)) else to_sql(x)
                    for x in (e.left, e.right)
                )
                return f"({left} {_BIN[e.op]} {right})"
            if e.op in (
                "and",
                "or",
            ):  # dbspark short-circuits: the right side runs where the left does not decide
                a, b = to_sql(e.left), to_sql(e.right)
                stop = "FALSE" if e.op == "and" else "TRUE"
                return f"(CASE WHEN ({a}) IS NOT DISTINCT FROM {stop} THEN {stop} ELSE ({a} {_BIN[e.op]} {b}) END)"
            return f"({to_sql(e.left)} {_BIN[e.op]} {to_sql(e.right)})"
        if isinstance(e, Unary):
            a = to_sql(e.arg)
            return {
                "neg": f"(- {a})",
                "not": f"(NOT {a})",
                "is_null": f"({a} IS NULL)",
                "is_not_null": f"({a} IS NOT NULL)",
                "abs": f"abs({a})",
            }[e.op]
        if isinstance(e, Cast):
            return f"CAST({to_sql(e.arg)} AS {type_sql(e.to)})"
        if isinstance(e, Case):
            body = " ".join(f"WHEN {to_sql(c)} THEN {to_sql(v)}" for c, v in e.whens)
            tail = "" if e.otherwise is None else f" ELSE {to_sql(e.otherwise)}"
            return f"(CASE {body}{tail} END)"
        if isinstance(e, InList):
            return f"({to_sql(e.arg)} IN ({', '.join(to_sql(i) for i in e.items)}))"
        if isinstance(e, Func):
            return self.func(e)
        raise UnsupportedError(f"no SQL text for {e!r}")

    def func(self, e: Func) -> str:
        a = [self.sql(x) for x in e.args]
        n = e.name
        if n == "concat_op":
            return f"({a[0]} || {a[1]})"
        if n in ("like", "ilike"):
            esc = f" ESCAPE {a[2]}" if len(a) > 2 else ""
            return f"({a[0]} {n.upper()} {a[1]}{esc})"
        if n in ("is_distinct_from", "is_not_distinct_from"):
            word = "IS DISTINCT FROM" if n == "is_distinct_from" else "IS NOT DISTINCT FROM"
            return f"({a[0]} {word} {a[1]})"
        if n == "extract":
            part = fn.literal_value(n, e.args[0], "the part")
            return f"extract({part} FROM {a[1]})"
        if n == "date_add":
            return f"({a[0]} + (to_months({a[1]}) + to_days({a[2]}) + to_microseconds({a[3]})))"
        if n == "round" and len(a) > 1:
            return f"round({a[0]}, {fn.literal_value(n, e.args[1], 'the precision')})"
        return f"{n}({', '.join(a)})"
