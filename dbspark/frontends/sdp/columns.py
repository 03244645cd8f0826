"""PySpark columns as Spark SQL text: how a Python definition's `F.col("x") > 5` becomes part of a view.

A Spark Declarative Pipelines project's Python files run here with Spark Connect's functions (the mode
`spark-pipelines` runs them in), so `pyspark.sql.functions` builds Connect expression trees (pure
Python: `pyspark.sql.connect.expressions`) without a Spark session; this module writes such a tree as
the Spark SQL expression it stands for, which the Spark dialect then reads (`frontends/sql/spark.py`).
A column given as a string is a column name (`df.select("a")`) or, where PySpark takes SQL
(`filter("a > 1")`, `selectExpr`, `F.expr`), SQL text as it is. Anything else (a Python UDF, a window
expression, a lambda) is an `UnsupportedError` naming it.
"""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

from dbspark.errors import UnsupportedError

INFIX = {
    "==": "=",
    "!=": "!=",
    "<": "<",
    "<=": "<=",
    ">": ">",
    ">=": ">=",
    "<=>": "<=>",
    "+": "+",
    "-": "-",
    "*": "*",
    "/": "/",
    "%": "%",
    "and": "AND",
    "or": "OR",
    "&": "&",
    "|": "|",
    "^": "^",
    "like": "LIKE",
    "ilike": "ILIKE",
    "rlike": "RLIKE",
}
POSTFIX = {"isNull": "IS NULL", "isNotNull": "IS NOT NULL", "isnull": "IS NULL", "isnotnull": "IS NOT NULL"}


def ident(name: str) -> str:
    """A column or table name (possibly dotted: `t.a`) in backticks, part by part."""
    return ".".join(f"`{p.replace('`', '``')}`" for p in name.split("."))


def literal(v: Any) -> str:
    """A Python value as a Spark SQL literal."""
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if v != v or v in (float("inf"), float("-inf")):
            return f"CAST('{v}' AS DOUBLE)"
        return f"CAST({v!r} AS DOUBLE)"
    if isinstance(v, decimal.Decimal):
        digits = v.as_tuple()
        scale = max(0, -int(digits.exponent))
        return f"CAST('{v}' AS DECIMAL({max(len(digits.digits), scale, 1)}, {scale}))"
    if isinstance(v, str):
        return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(v, dt.datetime):
        return f"TIMESTAMP '{v.isoformat(sep=' ')}'"
    if isinstance(v, dt.date):
        return f"DATE '{v.isoformat()}'"
    raise UnsupportedError(f"a literal {v!r} of type {type(v).__name__} in a Python definition")


def sql_of(c: Any, *, names: bool = True) -> str:
    """Spark SQL for a column: a Connect `Column`, a string (a column name if `names`, else SQL), or
    a Python value (a literal)."""
    from pyspark.sql.connect.column import Column

    if isinstance(c, Column):
        return _expr(c._expr)
    if isinstance(c, str):
        return ("*" if c == "*" else ident(c)) if names else c
    return literal(c)


def _expr(e: Any) -> str:
    from pyspark.sql.connect import expressions as x

    if isinstance(e, x.ColumnReference):
        return ident(e._unparsed_identifier)
    if isinstance(e, x.UnresolvedStar):
        return f"{ident(e._unparsed_target.rstrip('.*'))}.*" if e._unparsed_target else "*"
    if isinstance(e, x.LiteralExpression):
        return _literal(e)
    if isinstance(e, x.ColumnAlias):
        return f"{_expr(e._child)} AS {ident('.'.join(e._alias))}"
    if isinstance(e, x.SQLExpression):
        return f"({e._expr})"
    if isinstance(e, x.CastExpression):
        t = e._data_type if isinstance(e._data_type, str) else e._data_type.simpleString()
        return f"{'TRY_CAST' if e._eval_mode == 'try' else 'CAST'}({_expr(e._expr)} AS {t})"
    if isinstance(e, x.CaseWhen):
        arms = " ".join(f"WHEN {_expr(c)} THEN {_expr(v)}" for c, v in e._branches)
        other = f" ELSE {_expr(e._else_value)}" if e._else_value is not None else ""
        return f"CASE {arms}{other} END"
    if isinstance(e, x.SortOrder):
        nulls = "NULLS FIRST" if e._nullsFirst else "NULLS LAST"
        return f"{_expr(e._child)} {'ASC' if e._ascending else 'DESC'} {nulls}"
    if isinstance(e, x.UnresolvedFunction):
        return _function(e._name, [_expr(a) for a in e._args], e._is_distinct)
    raise UnsupportedError(f"the PySpark column expression {e!r} ({type(e).__name__}) in a Python definition")


def _function(name: str, args: list[str], distinct: bool) -> str:
    if name in INFIX and len(args) == 2:
        return f"({args[0]} {INFIX[name]} {args[1]})"
    if name in POSTFIX and len(args) == 1:
        return f"({args[0]} {POSTFIX[name]})"
    if name == "not" and len(args) == 1:
        return f"(NOT {args[0]})"
    if name == "negative" and len(args) == 1:
        return f"(- {args[0]})"
    if name == "in" and args:
        return f"({args[0]} IN ({', '.join(args[1:])}))"
    if name == "between" and len(args) == 3:
        return f"({args[0]} BETWEEN {args[1]} AND {args[2]})"
    return f"{name}({'DISTINCT ' if distinct else ''}{', '.join(args)})"


def _literal(e: Any) -> str:
    from pyspark.sql import types as T

    v, t = e._value, e._dataType
    if v is None:
        return "NULL" if isinstance(t, T.NullType) else f"CAST(NULL AS {t.simpleString()})"
    if isinstance(t, T.DateType):
        return literal(dt.date(1970, 1, 1) + dt.timedelta(days=int(v)))
    if isinstance(t, (T.TimestampType, T.TimestampNTZType)):
        when = dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=int(v))
        return literal(when)
    if isinstance(t, T.DecimalType):
        return f"CAST('{v}' AS {t.simpleString()})"
    if isinstance(t, (T.IntegerType, T.LongType, T.ShortType, T.ByteType)):
        return str(int(v))
    if isinstance(t, (T.FloatType, T.DoubleType)):
        return literal(float(v))
    if isinstance(t, T.DayTimeIntervalType):
        return f"INTERVAL {int(v)} MICROSECONDS"
    return literal(v)
