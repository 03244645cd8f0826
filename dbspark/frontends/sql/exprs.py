"""SQL scalar expressions (sqlglot nodes) as the IR of `dbspark.ir.expr`, resolved in a `Scope`.

Constants are folded where SQL gives them a fixed value (`DATE '1998-12-01' - INTERVAL '90' DAY`), so
that predicates on dates stay simple comparisons. Aggregates, GROUP BY keys and scalar subqueries are
computed before the expressions that use them and found in `Scope.computed` by their SQL text.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any, NoReturn

import polars as pl
from sqlglot import exp

from dbspark.columnar.sqlforms import parse_text
from dbspark.errors import UnsupportedError
from dbspark.frontends.sql import temporal
from dbspark.frontends.sql.literals import coerce_literals
from dbspark.frontends.sql.parse import Source
from dbspark.frontends.sql.scope import Scope
from dbspark.frontends.sql.types import sql_type
from dbspark.ir import expr as ir
from dbspark.ir import functions as fn
from dbspark.ir.macros import MACROS

AGGREGATES = (
    exp.LogicalAnd,
    exp.LogicalOr,
    exp.BitwiseAndAgg,
    exp.BitwiseOrAgg,
    exp.BitwiseXorAgg,
    exp.Count,
    exp.Sum,
    exp.Avg,
    exp.Min,
    exp.Max,
    exp.Stddev,
    exp.StddevSamp,
    exp.StddevPop,
    exp.Variance,
    exp.VariancePop,
    exp.Median,
    exp.Mode,
)
SUBQUERIES = (exp.Subquery, exp.Exists)

BINARY: dict[type, str] = {
    exp.Add: "add",
    exp.Sub: "sub",
    exp.Mul: "mul",
    exp.Div: "sql_div",
    exp.IntDiv: "int_div",
    exp.Mod: "sql_mod",
    exp.EQ: "eq",
    exp.NEQ: "ne",
    exp.LT: "lt",
    exp.LTE: "le",
    exp.GT: "gt",
    exp.GTE: "ge",
    exp.And: "and",
    exp.Or: "or",
}
# sqlglot function nodes -> (registry name, argument keys in order; "*" splats a list argument)
FUNCTIONS: dict[type, tuple[str, tuple[str, ...]]] = {
    exp.Coalesce: ("coalesce", ("this", "*expressions")),
    exp.Nullif: ("nullif", ("this", "expression")),
    exp.Upper: ("upper", ("this",)),
    exp.Lower: ("lower", ("this",)),
    exp.Length: ("length", ("this",)),
    exp.Substring: ("substring", ("this", "start", "length")),
    exp.StrPosition: ("strpos", ("this", "substr")),
    exp.Concat: ("concat", ("*expressions",)),
    exp.ConcatWs: ("concat_ws", ("*expressions",)),
    exp.DPipe: ("concat_op", ("this", "expression")),
    exp.Replace: ("replace", ("this", "expression", "replacement")),
    exp.SplitPart: ("split_part", ("this", "delimiter", "part_index")),
    exp.RegexpExtract: ("regexp_extract", ("this", "expression", "group")),
    exp.StartsWith: ("starts_with", ("this", "expression")),
    exp.EndsWith: ("ends_with", ("this", "expression")),
    exp.Contains: ("contains", ("this", "expression")),
    exp.Left: ("left", ("this", "expression")),
    exp.Right: ("right", ("this", "expression")),
    exp.Reverse: ("reverse", ("this",)),
    exp.Abs: ("abs", ("this",)),
    exp.Round: ("round", ("this", "decimals")),
    exp.Floor: ("floor", ("this",)),
    exp.Ceil: ("ceil", ("this",)),
    exp.Sqrt: ("sqrt", ("this",)),
    exp.Pow: ("power", ("this", "expression")),
    exp.Ln: ("ln", ("this",)),
    exp.Exp: ("exp", ("this",)),
    exp.Sign: ("sign", ("this",)),
    exp.Greatest: ("greatest", ("this", "*expressions")),
    exp.Least: ("least", ("this", "*expressions")),
}
# (months, days, microseconds) of one unit of an INTERVAL, as DuckDB's interval parts
_MICROS = {
    "hour": 3_600_000_000,
    "minute": 60_000_000,
    "second": 1_000_000,
    "millisecond": 1000,
    "microsecond": 1,
}
INTERVAL_UNITS: dict[str, tuple[int, int, int]] = {
    "year": (12, 0, 0),
    "quarter": (3, 0, 0),
    "month": (1, 0, 0),
    "week": (0, 7, 0),
    "day": (0, 1, 0),
    **{u: (0, 0, m) for u, m in _MICROS.items()},
}
INTERVAL_UNITS.update({u + "s": v for u, v in list(INTERVAL_UNITS.items())})
INTERVAL_UNITS.update({"min": INTERVAL_UNITS["minute"], "mins": INTERVAL_UNITS["minute"]})
INTERVAL_UNITS.update({"sec": INTERVAL_UNITS["second"], "secs": INTERVAL_UNITS["second"]})


def spark_division(e: Any, schema: pl.Schema) -> Any:
    """`e` with each `/` of a DECIMAL by a DECIMAL or an integer (or the other way round) as Spark
    divides them (Spark's dialect, `spark.py`): a DECIMAL of Spark's type, the exact quotient rounded
    half-up (`functions.spark_decimal_div`); a float operand keeps DuckDB's DOUBLE division."""
    if isinstance(e, ir.Binary) and e.op == "sql_div":
        left, right = spark_division(e.left, schema), spark_division(e.right, schema)
        ta, tb = left.dtype(schema), right.dtype(schema)
        if (isinstance(ta, pl.Decimal) or isinstance(tb, pl.Decimal)) and all(
            isinstance(t, pl.Decimal) or t.is_integer() for t in (ta, tb)
        ):
            da, db = _spark_operand(left, ta, schema), _spark_operand(right, tb, schema)
            p, s = fn.spark_decimal_quotient(da, db)
            # dbspark keeps every integer as 64-bit: where an integer operand's declared width (Spark
            # types an INT as DECIMAL(10, 0), a BIGINT as DECIMAL(20, 0)) would change the quotient's
            # scale (its value), refuse rather than guess
            widths = (3, 5, 10, 20)
            scales = {
                fn.spark_decimal_quotient(
                    _spark_operand(left, ta, schema, w1), _spark_operand(right, tb, schema, w2)
                )[1]
                for w1 in widths
                for w2 in widths
            }
            if len(scales) > 1:
                raise UnsupportedError(
                    "a DECIMAL divided by an integer column or expression: the quotient's scale in Spark "
                    "depends on the integer's declared width (INT or BIGINT), which dbspark does not keep; "
                    "CAST the divisor to the DECIMAL Spark would use (DECIMAL(10, 0) for an INT)"
                )
            args = tuple(
                x if t == pl.Decimal(*d) else ir.Cast(x, pl.Decimal(*d))
                for x, t, d in ((left, ta, da), (right, tb, db))
            )
            return ir.Func("spark_decimal_div", (*args, ir.Lit(p), ir.Lit(s)))
        return ir.Binary(e.op, left, right)
    if isinstance(e, ir.Expr) and dataclasses.is_dataclass(e):
        changes = {f.name: spark_division(getattr(e, f.name), schema) for f in dataclasses.fields(e)}
        return dataclasses.replace(e, **changes)
    if isinstance(e, tuple):
        return tuple(spark_division(x, schema) for x in e)
    return e


def _spark_operand(e: ir.Expr, t: pl.DataType, schema: pl.Schema, width: int = 20) -> tuple[int, int]:
    """The DECIMAL type Spark divides an operand as: an integer literal as its digits
    (`DecimalType.fromLiteral`), an integer column by its width, a DECIMAL as it is, a sum, difference
    or product of DECIMALs and integers as Spark types it (`DecimalPrecision`: its operands typed so,
    recursively; a literal by its digits), another Spark division as its own type. (DuckDB types
    `d + 1` of a DECIMAL(10, 2) as DECIMAL(13, 2), Spark as DECIMAL(11, 2): a quotient's scale
    follows from it.) An integer other than a literal is taken as `width` digits (its declared width
    is not kept: every integer is 64-bit here)."""
    v = (
        e.arg.value
        if isinstance(e, ir.Unary) and e.op == "neg" and isinstance(e.arg, ir.Lit)
        else getattr(e, "value", None)
    )
    if isinstance(e, (ir.Lit, ir.Unary)) and isinstance(v, int) and not isinstance(v, bool):
        return (max(1, len(str(abs(v)))), 0)
    if (  # a divisor's check for zero (`CASE WHEN x = 0 THEN error(...) ELSE x END`): x's type
        isinstance(e, ir.Case)
        and e.otherwise is not None
        and all(isinstance(w, ir.Func) and w.name == "error" for _, w in e.whens)
    ):
        return _spark_operand(e.otherwise, t, schema, width)
    if isinstance(e, ir.Binary) and e.op in ("add", "sub", "mul") and isinstance(t, pl.Decimal):
        tl, tr = e.left.dtype(schema), e.right.dtype(schema)
        if all(isinstance(x, pl.Decimal) or x.is_integer() for x in (tl, tr)):
            (p1, s1), (p2, s2) = (
                _spark_operand(x, tx, schema, width) for x, tx in ((e.left, tl), (e.right, tr))
            )
            if e.op == "mul":
                return fn.spark_decimal_bounded(p1 + p2 + 1, s1 + s2)
            scale = max(s1, s2)
            return fn.spark_decimal_bounded(scale + max(p1 - s1, p2 - s2) + 1, scale)
    if isinstance(e, ir.Func) and e.name == "spark_decimal_div":
        p, s = (getattr(a, "value", None) for a in e.args[2:4])
        if isinstance(p, int) and isinstance(s, int):
            return (p, s)
    return (width, 0) if t.is_integer() else fn.spark_dec_of(t)


def _walk(e: Any) -> Iterator[ir.Expr]:
    """An IR expression and every expression inside it."""
    if isinstance(e, ir.Expr):
        yield e
        if dataclasses.is_dataclass(e):
            for f in dataclasses.fields(e):
                yield from _walk(getattr(e, f.name))
    elif isinstance(e, (tuple, list)):
        for x in e:
            yield from _walk(x)


class ExprCompiler:
    """Translates sqlglot expressions in a scope into IR expressions."""

    def __init__(self, scope: Scope) -> None:
        self.scope = scope
        self.src: Source = scope.src
        self.schema: pl.Schema | None = None  # of the relation the expression runs on, when known

    def __call__(self, node: exp.Expression, schema: pl.Schema | None = None) -> ir.Expr:
        """The IR of `node`; with the schema of the relation it runs on, also type-checked, so that a
        type error names the expression's line and column."""
        self.schema = schema
        e = self.compile(node)
        if schema is not None:
            e = coerce_literals(e, schema, lambda text, t: self.bad_literal(node, text, t))
            typecheck(e, schema, node, self.src)
            if self.src.dialect == "spark" and any(
                isinstance(d, ir.Binary) and d.op == "sql_div" for d in _walk(e)
            ):
                try:
                    e = spark_division(e, schema)
                except UnsupportedError as err:
                    self.src.unsupported(str(err), node)
                typecheck(e, schema, node, self.src)
        return e

    def bad_literal(self, node: exp.Expression, text: str, t: pl.DataType) -> NoReturn:
        """A string literal in `node` that does not convert to the type it is compared with."""
        from dbspark.errors import DataError
        from dbspark.ir.functions import sql_name

        at = next((n for n in node.find_all(exp.Literal) if n.is_string and n.this == text), node)
        self.src.fail(
            DataError,
            f"cannot cast the string literal {text!r} to {sql_name(t)}, the type of the value it is compared or combined with",
            at,
        )

    def compile(self, node: exp.Expression) -> ir.Expr:
        if not isinstance(node, (exp.Column, exp.Literal)):
            col = self.scope.computed_col(node)
            if col is not None:
                return ir.Col(col)
        if isinstance(node, exp.Column):
            if isinstance(node.this, exp.Star):
                self.src.unsupported("* outside a SELECT list or COUNT(*)", node)
            target = self.scope.alias(node)
            if target is not None:  # a SELECT alias, bound in this scope without aliases (as DuckDB)
                return ExprCompiler(replace(self.scope, aliases={})).compile(target)
            return ir.Col(self.scope.lookup(node))
        if isinstance(node, exp.Paren):
            return self.compile(node.this)
        if isinstance(node, AGGREGATES):
            self.src.schema_error(f"aggregate {node.sql(dialect='duckdb')} is not allowed here", node)
        if isinstance(node, SUBQUERIES) or (isinstance(node, exp.In) and node.args.get("query")):
            self.src.unsupported(
                f"subquery {node.sql(dialect='duckdb')[:60]} in this position (subqueries are "
                "supported in WHERE and HAVING conditions and in the SELECT list)",
                node,
            )
        handler = _HANDLERS.get(type(node))
        if handler is not None:
            return handler(self, node)
        if type(node) in BINARY:
            return self.binary(BINARY[type(node)], node.this, node.expression)
        if type(node) in FUNCTIONS:
            name, keys = FUNCTIONS[type(node)]
            return self.func(name, _args(node, keys), node)
        if isinstance(node, exp.Anonymous):
            return self.func(str(node.this).lower(), list(node.expressions), node)
        self.src.unsupported(f"expression {node.sql(dialect='duckdb')[:80]} ({type(node).__name__})", node)

    # ---- pieces ---------------------------------------------------------------------------------
    def binary(self, op: str, left: exp.Expression, right: exp.Expression) -> ir.Expr:
        if op in ("add", "sub"):
            folded = self.fold_interval(op, left, right)
            if folded is not None:
                return folded
        return ir.Binary(op, self.compile(left), self.compile(right))

    def func(self, name: str, args: list[exp.Expression], node: exp.Expression) -> ir.Expr:
        from dbspark.ir.functions import REGISTRY

        alias = temporal.named(self, name, args, node)
        if alias is not None:
            return alias
        spark_macro = self.src.dialect == "spark" and name in MACROS  # (written by `spark.py` only)
        if (name not in REGISTRY or name.startswith("__")) and not spark_macro:  # (`__`: dbspark's own)
            self.src.unsupported(f"function {name}()", node)
        return ir.Func(name, tuple(self.compile(a) for a in args))

    def fold_interval(self, op: str, left: exp.Expression, right: exp.Expression) -> ir.Expr | None:
        """date ± INTERVAL: a constant when the date is one, else date_add(d, months, days, micros)."""
        if not isinstance(right, exp.Interval):
            if isinstance(left, exp.Interval) and op == "add":
                left, right = right, left
            else:
                return None
        assert isinstance(right, exp.Interval)
        months, days, micros = interval(right, self.src)
        if op == "sub":
            months, days, micros = -months, -days, -micros
        base = self.compile(left)
        if isinstance(base, ir.Lit) and isinstance(base.value, dt.date):
            v = base.value
            if isinstance(v, dt.datetime):
                shifted = dt.datetime.combine(add_months(v.date(), months), v.timetz())  # (keeps a zone)
                return ir.Lit(shifted + dt.timedelta(days=days, microseconds=micros))
            if micros == 0:  # a DATE stays a DATE when the interval has no time part (compares the same)
                return ir.Lit(add_months(v, months) + dt.timedelta(days=days))
            midnight = dt.datetime.combine(add_months(v, months), dt.time())
            return ir.Lit(midnight + dt.timedelta(days=days, microseconds=micros))
        return ir.Func("date_add", (base, ir.Lit(months), ir.Lit(days), ir.Lit(micros)))


def typecheck(e: ir.Expr, schema: pl.Schema, node: exp.Expression, src: Source) -> pl.DataType:
    from dbspark.errors import SchemaError, UnsupportedError

    try:
        return e.dtype(schema)
    except SchemaError as err:
        src.schema_error(f"type error in {node.sql(dialect='duckdb')[:80]}: {err}", node)
    except UnsupportedError as err:
        src.unsupported(f"{err} in {node.sql(dialect='duckdb')[:80]}", node)


def _args(node: exp.Expression, keys: tuple[str, ...]) -> list[exp.Expression]:
    out: list[exp.Expression] = []
    for k in keys:
        if k.startswith("*"):
            out += list(node.args.get(k[1:]) or [])
        elif node.args.get(k) is not None:
            out.append(node.args[k])
    return out


def interval(node: exp.Interval, src: Source) -> tuple[int, int, int]:
    """(months, days, microseconds) of a constant INTERVAL literal: `INTERVAL 3 HOUR`, `INTERVAL '3' HOUR`,
    `INTERVAL '1 day 2 hours'` (integer counts; DuckDB truncates a fractional count of some units and
    not of others, so a fraction is refused)."""
    text = node.this.name if node.this is not None else ""
    unit = node.args.get("unit")
    if unit is not None:
        pairs = [(text, unit.name)]
    else:
        parts = text.split()
        pairs = list(zip(parts[0::2], parts[1::2], strict=False)) if len(parts) % 2 == 0 else []
    if not pairs:
        src.unsupported(f"interval {node.sql(dialect='duckdb')}", node)
    months = days = micros = 0
    for count, u in pairs:
        try:
            n = int(count)
        except ValueError:
            src.unsupported(f"interval {node.sql(dialect='duckdb')} (the count must be an integer)", node)
        scale = INTERVAL_UNITS.get(u.lower())
        if scale is None:
            src.unsupported(
                f"interval unit {u} (supported: year, quarter, month, week, day, hour, minute, second, "
                "millisecond, microsecond)",
                node,
            )
        months, days, micros = months + n * scale[0], days + n * scale[1], micros + n * scale[2]
    return months, days, micros


def add_months(d: dt.date, months: int) -> dt.date:
    """d plus a number of months, the day clamped to the month's last day (as DuckDB does)."""
    y, m = divmod(d.month - 1 + months, 12)
    year, month = d.year + y, m + 1
    for day in (d.day, 30, 29, 28):
        try:
            return dt.date(year, month, min(d.day, day))
        except ValueError:
            continue
    raise AssertionError("unreachable")


def literal(node: exp.Literal) -> Any:
    if node.is_string:
        return node.this
    text = node.this
    if any(c in text for c in "eE"):
        return float(text)
    if "." in text:
        return decimal.Decimal(text)
    return int(text)


def _literal(c: ExprCompiler, node: exp.Literal) -> ir.Expr:
    v = literal(node)
    return ir.Lit(v, sql_int=isinstance(v, int))


def _cast(c: ExprCompiler, node: exp.Cast) -> ir.Expr:
    to = sql_type(node.args["to"], c.src)
    arg = node.this
    if isinstance(arg, exp.Literal) and arg.is_string:  # typed constants: DATE '...', CAST('...' AS DATE)
        try:
            if to == pl.Date():
                return ir.Lit(dt.date.fromisoformat(arg.this.strip()))
            if isinstance(to, pl.Datetime) and to.time_zone:  # the offset read, the instant in UTC
                return ir.Lit(parse_text(arg.this, "timestamptz"))
            if isinstance(to, pl.Datetime):  # DuckDB's TIMESTAMP ignores an offset
                return ir.Lit(dt.datetime.fromisoformat(arg.this.strip()).replace(tzinfo=None))
        except ValueError:
            c.src.fail(
                __import__("dbspark.errors", fromlist=["DataError"]).DataError,
                f"cannot cast {arg.this!r} to {node.args['to'].sql(dialect='duckdb')}",
                node,
            )
    return ir.Cast(c.compile(arg), to)


def _is(c: ExprCompiler, node: exp.Is) -> ir.Expr:
    if isinstance(node.expression, exp.Null):
        return ir.Unary("is_null", c.compile(node.this))
    if isinstance(node.expression, exp.Boolean):  # x IS TRUE / IS FALSE: never NULL
        v = c.compile(node.this)
        return ir.Func("is_not_distinct_from", (v, ir.Lit(bool(node.expression.this))))
    c.src.unsupported(f"IS {node.expression.sql(dialect='duckdb')}", node)


def _not(c: ExprCompiler, node: exp.Not) -> ir.Expr:
    inner = node.this
    if isinstance(inner, exp.Is) and isinstance(inner.expression, exp.Null):
        return ir.Unary("is_not_null", c.compile(inner.this))
    return ir.Unary("not", c.compile(inner))


def _like(c: ExprCompiler, node: exp.Expression, escape: exp.Expression | None = None) -> ir.Expr:
    name = "ilike" if isinstance(node, exp.ILike) else "like"
    args = [c.compile(node.this), c.compile(node.expression)]
    if escape is not None:
        args.append(c.compile(escape))
    out: ir.Expr = ir.Func(name, tuple(args))
    return ir.Unary("not", out) if node.args.get("negate") else out


def _escape(c: ExprCompiler, node: exp.Escape) -> ir.Expr:
    if not isinstance(node.this, (exp.Like, exp.ILike)):
        c.src.unsupported("ESCAPE outside LIKE", node)
    return _like(c, node.this, node.expression)


def _between(c: ExprCompiler, node: exp.Between) -> ir.Expr:
    v = c.compile(node.this)
    return ir.Binary(
        "and",
        ir.Binary("ge", v, c.compile(node.args["low"])),
        ir.Binary("le", v, c.compile(node.args["high"])),
    )


def _in(c: ExprCompiler, node: exp.In) -> ir.Expr:
    return ir.InList(c.compile(node.this), tuple(c.compile(e) for e in node.expressions))


def _case(c: ExprCompiler, node: exp.Case) -> ir.Expr:
    subject = node.this
    whens = []
    for branch in node.args.get("ifs") or []:
        cond = branch.this if subject is None else exp.EQ(this=subject, expression=branch.this)
        whens.append((c.compile(cond), c.compile(branch.args["true"])))
    default = node.args.get("default")
    return ir.Case(tuple(whens), c.compile(default) if default is not None else None)


def _if(c: ExprCompiler, node: exp.If) -> ir.Expr:
    f = node.args.get("false")
    return ir.Case(
        ((c.compile(node.this), c.compile(node.args["true"])),), c.compile(f) if f is not None else None
    )


def _trim(c: ExprCompiler, node: exp.Trim) -> ir.Expr:
    pos = (node.args.get("position") or "").upper()
    name = {"LEADING": "ltrim", "TRAILING": "rtrim"}.get(pos, "trim")
    if node.args.get("expression") is not None:
        c.src.unsupported("TRIM with characters", node)
    return ir.Func(name, (c.compile(node.this),))


def _log(c: ExprCompiler, node: exp.Log) -> ir.Expr:
    base = node.this
    if node.expression is None:
        return ir.Func("log10", (c.compile(base),))
    if isinstance(base, exp.Literal) and base.this == "10":
        return ir.Func("log10", (c.compile(node.expression),))
    c.src.unsupported("LOG with a base other than 10", node)


def _neq_ns(c: ExprCompiler, node: exp.Expression) -> ir.Expr:
    name = "is_distinct_from" if isinstance(node, exp.NullSafeNEQ) else "is_not_distinct_from"
    return ir.Func(name, (c.compile(node.this), c.compile(node.expression)))


_HANDLERS: dict[type, Callable[[ExprCompiler, Any], ir.Expr]] = {
    exp.Literal: _literal,
    exp.Null: lambda c, n: ir.Lit(None),
    exp.Boolean: lambda c, n: ir.Lit(bool(n.this)),
    exp.Neg: lambda c, n: ir.Unary("neg", c.compile(n.this)),
    exp.Not: _not,
    exp.Is: _is,
    exp.Cast: _cast,
    exp.TryCast: lambda c, n: c.src.unsupported("TRY_CAST", n),
    exp.Like: _like,
    exp.ILike: _like,
    exp.Escape: _escape,
    exp.Between: _between,
    exp.In: _in,
    exp.Case: _case,
    exp.If: _if,
    exp.Trim: _trim,
    exp.Log: _log,
    exp.NullSafeNEQ: _neq_ns,
    exp.NullSafeEQ: _neq_ns,
    **temporal.HANDLERS,
}
