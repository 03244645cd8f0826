"""Macro functions: calls whose meaning depends on their arguments' types, expanded into plain IR once
the types are known (`Func.dtype`, and each engine's compiler before it compiles a call).

They carry a front end's semantics where a construct means something else than DuckDB's function of the
same spelling, without a new function on every engine: the Spark dialect (`frontends/sql/spark.py`)
writes them for Spark's CAST to an integer (truncation and the target's range), CAST to a string (a
TIMESTAMP written without its zone) and ROUND of a DOUBLE. A macro is not SQL: only the Spark dialect's
translation may call one (`frontends.sql.exprs.ExprCompiler.func`).
"""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

from dbspark.errors import UnsupportedError
from dbspark.ir import functions as fn
from dbspark.ir.expr import Binary, Case, Cast, Expr, Func, Lit, Unary

# Spark's integer types and their ranges (BIGINT's as a double: 2^63 is one, and every double below it fits)
SPARK_INTS = {
    "TINYINT": (-(2.0**7), 2.0**7 - 1),
    "SMALLINT": (-(2.0**15), 2.0**15 - 1),
    "INT": (-(2.0**31), 2.0**31 - 1),
    "BIGINT": (-(2.0**63), 2.0**63 - 1),
}
Expander = Callable[[tuple[Expr, ...], list[pl.DataType]], Expr]
MACROS: dict[str, Expander] = {}


def macro(name: str) -> Callable[[Expander], Expander]:
    def deco(f: Expander) -> Expander:
        MACROS[name] = f
        return f

    return deco


def expand(e: Func, schema: pl.Schema) -> Expr:
    """The plain IR of a macro call `e` over rows of `schema`."""
    return MACROS[e.name](e.args, [a.dtype(schema) for a in e.args])


def _overflow(x: Expr, target: str) -> Expr:
    message = Func(
        "concat",
        (
            Lit("[CAST_OVERFLOW] The value "),
            Func("__repr", (x,)),
            Lit(
                f' cannot be cast to "{target}" due to an overflow (Spark\'s ANSI mode; try_cast gives NULL)'
            ),
        ),
    )
    return Func("error", (message,))


@macro("spark_int_cast")
def _spark_int_cast(args: tuple[Expr, ...], ts: list[pl.DataType]) -> Expr:
    """`spark_int_cast(x, 'INT')`: Spark's CAST of x to an integer type (Spark's `Cast`, ANSI mode): a
    DOUBLE or DECIMAL is truncated toward zero, a string read strictly; a value outside the target's
    range (Spark's INT is 32 bits, SMALLINT 16, TINYINT 8), NaN or an infinity is an error."""
    x, target, t = args[0], str(fn.literal_value("CAST", args[1], "the target type")), ts[0]
    lo, hi = SPARK_INTS[target]
    if t.is_float():  # checked as a double before any cast, as Spark does (NaN, the largest, fails)
        whole = Case(((Binary("ge", x, Lit(0.0)), Func("floor", (x,))),), Func("ceil", (x,)))
        low = Binary("ge", x, Lit(lo)) if target == "BIGINT" else Binary("gt", x, Lit(lo - 1.0))
        inside = Binary("and", low, Binary("lt", x, Lit(hi + 1.0)))
        return Case(
            ((Unary("is_null", x), Lit(None)), (inside, Cast(whole, pl.Int64()))), _overflow(x, target)
        )
    if fn.is_dec(t):
        v: Expr = Cast(
            Case(((Binary("ge", x, Lit(0)), Func("floor", (x,))),), Func("ceil", (x,))), pl.Int64()
        )
    elif fn.is_int(t) or t in (fn.NULL, pl.String(), pl.Boolean()):
        v = Cast(x, pl.Int64())
    else:
        raise UnsupportedError(f"CAST from {fn.sql_name(t)} to {target}")
    if target == "BIGINT":
        return v
    fits = Binary("and", Binary("ge", v, Lit(int(lo))), Binary("le", v, Lit(int(hi))))
    return Case(((Unary("is_null", v), Lit(None)), (fits, v)), _overflow(x, target))


@macro("spark_string_cast")
def _spark_string_cast(args: tuple[Expr, ...], ts: list[pl.DataType]) -> Expr:
    """Spark's CAST to STRING: a TIMESTAMP (with its time zone, UTC here) is written without the zone,
    as Spark writes its session-time-zone timestamps; the other types as DuckDB writes them (the ones
    that differ, DOUBLE among them, are refused by the cast itself)."""
    (x,), (t,) = args, ts
    if fn.is_tz(t):
        return Cast(Cast(x, fn.TIMESTAMP), pl.String())
    return Cast(x, pl.String())


@macro("spark_round")
def _spark_round(args: tuple[Expr, ...], ts: list[pl.DataType]) -> Expr:
    """Spark's ROUND (half up): a DECIMAL exactly, as DuckDB's; a DOUBLE only to an integer (Spark rounds a
    DOUBLE's shortest decimal string, which differs from rounding its binary value at a scale other than 0;
    for 0 the two agree, each x.5 being a double)."""
    x = args[0]
    d = fn.literal_value("round", args[1], "the scale") if len(args) > 1 else 0
    if ts[0].is_float() and d != 0:
        raise UnsupportedError(
            f"round of a DOUBLE to {d} decimal places in Spark's dialect (Spark rounds the double's decimal "
            "string; round(CAST(x AS DECIMAL(p, s)), d) rounds exactly)"
        )
    return Func("round", (x, Lit(d)))


def _rounded(name: str) -> Expander:
    def expand_(args: tuple[Expr, ...], ts: list[pl.DataType]) -> Expr:
        """Spark's floor / ceil: of a DOUBLE a BIGINT (past its range an error: Spark saturates), of a
        DECIMAL or an integer as DuckDB's."""
        out: Expr = Func(name, args)
        return Cast(out, pl.Int64()) if ts[0].is_float() else out

    return expand_


MACROS["spark_floor"] = _rounded("floor")
MACROS["spark_ceil"] = _rounded("ceil")
