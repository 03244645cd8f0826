"""Compile scalar expression IR (`dbspark.ir.expr`) to Spark Columns, with the local engine's semantics.

Python's operators (ops truediv, floordiv, mod) are bridged to the local engine's semantics: integer `//` and `%`
floor, division by zero gives NULL for integers and ±inf/NaN for floats, not an ANSI error. SQL
operators and functions follow DuckDB, as on the local engine (`engines/local/exprs.py`): errors
(integer overflow, a failed CAST) are raised by `raise_error` with a `DBSPARK[DataError]` tag inside a
CASE, so they fire only for the rows that are evaluated; Spark's CASE, COALESCE, AND and OR evaluate
lazily, as the local engine's guards do. Spark's own ANSI errors are never relied on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import polars as pl

from dbspark.engines.spark.convert import col, spark_type, sql_str
from dbspark.errors import DataError, DbsparkError, UnsupportedError
from dbspark.ir import functions as fn
from dbspark.ir.expr import ARITH, Binary, Case, Cast, Col, Expr, Func, InList, Lit, Unary
from dbspark.ir.macros import MACROS, expand

HOIST_CHARS = 1000  # a compiled subexpression longer than this is bound to a column (SparkCompiler)
INT_RANGE = fn.INT_RANGE


def _F() -> Any:
    from pyspark.sql import functions as F

    return F


def fail(message: Any) -> Any:
    """A Column raising DataError(message) when evaluated (the kernel's `act` maps the tag)."""
    return fail_as(DataError, message)


def fail_as(cls: type[DbsparkError], message: Any) -> Any:
    """A Column raising `cls(message)` when evaluated (`message` a Column or a string; the kernel's
    `act` reads the class back from the tag)."""
    F = _F()
    m = F.lit(message) if isinstance(message, str) else message
    return F.raise_error(F.concat(F.lit(f"DBSPARK[{cls.__name__}] "), m))


def fail_sql(cls: type[DbsparkError], message: str) -> str:
    """`fail_as` in Spark SQL text: `message` is a SQL string expression (built plans cost a few py4j
    calls as text, a dozen per Column function)."""
    return f"raise_error(concat({sql_str(f'DBSPARK[{cls.__name__}] ')}, {message}))"


def checked(value: Any, bad: Any, message: str, operands: tuple[Any, ...] = ()) -> Any:
    """`value`, raising DataError(message, with the operands) on the rows where `bad` holds."""
    F = _F()
    if operands:
        shown = [F.coalesce(o.cast("string"), F.lit("None")) for o in operands]
        parts: list[Any] = [F.lit(f"{message} (operands ")]
        for k, s in enumerate(shown):
            parts += ([F.lit(", ")] if k else []) + [s]
        msg = F.concat(*parts, F.lit(")"))
    else:
        msg = F.lit(message)
    return F.when(bad, fail(msg)).otherwise(value)


def _truediv(a: Any, b: Any) -> Any:
    """IEEE division, as DuckDB and the local engine (Spark's is NULL for a zero divisor): a / ±0 is NaN
    for a zero or NaN dividend, else an infinity whose sign is the product of the signs, the zero's too
    (Spark's `=` does not tell -0.0 from 0.0; its text does)."""
    F = _F()
    a, b = a.cast("double"), b.cast("double")
    inf = F.lit(float("inf"))
    positive = (a > 0) != b.cast("string").startswith("-")
    by_zero = (
        F.when(a.isNull(), None)
        .when(F.isnan(a) | (a == 0), F.lit(float("nan")))
        .when(positive, inf)
        .otherwise(-inf)
    )
    return F.when(b == 0, by_zero).otherwise(F.try_divide(a, b))


def _mod(a: Any, b: Any, floating: bool) -> Any:
    """Python's a % b (the sign of the divisor), as the local engine computes it: Java's exact % (C's
    fmod), plus b where the signs differ."""
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
        return float_floor(q)
    return F.when(b == 0, None).otherwise(F.call_function("div", a - _mod(a, b, False), b).cast("long"))


def float_floor(q: Any, ceil: bool = False) -> Any:
    F = _F()
    f = F.ceil(q) if ceil else F.floor(q)
    return F.when(F.abs(q) < F.lit(2.0**52), f.cast("double")).otherwise(q)


_CMP: dict[str, Callable[[Any, Any], Any]] = {
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b,
}


def may_raise(e: Expr) -> bool:
    """Whether evaluating `e` can raise a DataError (conservative: any SQL integer or DECIMAL
    arithmetic, CAST, or checked function in it)."""
    if isinstance(e, Binary) and e.op in ("add", "sub", "mul", "int_div", "sql_mod"):
        return True
    if isinstance(e, Unary) and e.op in ("neg", "abs"):
        return True
    if isinstance(e, Cast) or (
        isinstance(e, Func) and e.name in ("sqrt", "ln", "log10", "round", "abs", "error", *MACROS)
    ):
        return True
    children: list[Expr] = []
    if isinstance(e, Binary):
        children = [e.left, e.right]
    elif isinstance(e, Unary):
        children = [e.arg]
    elif isinstance(e, Func):
        children = list(e.args)
    elif isinstance(e, InList):
        children = [e.arg, *e.items]
    elif isinstance(e, Case):
        children = [x for w in e.whens for x in w] + ([e.otherwise] if e.otherwise is not None else [])
    return any(may_raise(c) for c in children)


def eager(result: Any, later: list[tuple[Expr, Any]]) -> Any:
    """`result` of a NULL-propagating operation, evaluating each later operand that may raise even when
    an earlier one is NULL (Spark skips the rest of a null-intolerant expression at the first NULL;
    DuckDB and the local engine evaluate every operand)."""
    F = _F()
    for e, x in later:
        if may_raise(e):
            result = F.when(x.isNull(), None).otherwise(result)
    return result


def with_spark_columns(
    frame: Any, exprs: Sequence[Expr], schema: pl.Schema, ansi_ints: bool = False
) -> tuple[Any, list[Any]]:
    """`frame` with the large subexpressions of `exprs` bound to columns (`SparkCompiler.lets`), and the
    Columns computing `exprs` over it (a frame with `schema`: its types decide the semantics). The
    caller selects or filters with them; the bound columns are named `__x<k>` and are not part of the
    result. Without large subexpressions, `frame` itself is returned. `ansi_ints`: BIGINT `+ - *` are
    Spark's own (an overflow is Spark's ANSI error, which `SparkKernel.act` makes a WeightError), for
    dbspark's arithmetic on weights, whose errors name no user expression."""
    comp = SparkCompiler(schema, ansi_ints)
    cols = [comp.c(e) for e in exprs]
    return comp.bind(frame), cols


class SparkCompiler:
    """Compiles expression IR to Spark Columns.

    An operation's emulation refers to its operands several times (IEEE division by zero, DuckDB's
    rounding, overflow checks), and a Column is a tree: nested operations would copy their operands
    exponentially (a decimal MEDIAN's `floor(round(x * 200) / 2) / 100` became a 2 MB plan whose
    analysis took 15 s and, over a few steps, the driver's heap). An operation whose Column is
    longer than `HOIST_CHARS` is therefore bound to a column of its own (`lets`, computed level by
    level by `bind`): written once, referred to by name; small ones stay inline (a
    projection per operation made TPC-H's plans deep and slow to analyse). One in a lazily evaluated
    position (a CASE branch or later condition, a later COALESCE argument, the right side of AND and
    OR) is bound as `CASE WHEN <the rows that reach it> THEN <it> END`, so an error still fires only
    on those rows, as the local engine's guards do.
    """

    def __init__(self, schema: pl.Schema, ansi_ints: bool = False) -> None:
        self.schema = schema
        self.ansi_ints = ansi_ints
        self._types: dict[int, pl.DataType] = {}
        self.lets: list[tuple[str, Any, int]] = []  # (column name, Column, level: 1 + its operands' max)
        self._guards: list[tuple[Any, int]] = []  # (Column true on the rows reaching here, its level)
        self._levels: list[int] = []

    @contextmanager
    def guarded(self, reach: Any, level: int = 0) -> Iterator[None]:
        """Compile for the rows where `reach` is true (it is made of operands of `level` or below);
        `reach` None: every row the enclosing position reaches."""
        if reach is None:
            yield
            return
        self._guards.append((reach, level))
        try:
            yield
        finally:
            self._guards.pop()

    def c(self, e: Expr) -> Any:
        return self.leveled(e)[0]

    def leveled(self, e: Expr) -> tuple[Any, int]:
        """The Column of `e` and its level (0 if it refers to no bound column)."""
        if isinstance(e, (Col, Lit)):
            return self._c(e), 0
        self._levels.append(0)
        try:
            col = self._c(e)
        finally:
            level = self._levels.pop()
        if len(str(col)) <= HOIST_CHARS:  # small enough to copy: stays inline (most expressions)
            if self._levels:
                self._levels[-1] = max(self._levels[-1], level)
            return col, level
        if self._guards:
            reach = self._guards[0][0]
            for g, _ in self._guards[1:]:
                reach = reach & g
            col = _F().when(reach, col)
            level = max(level, *(lv for _, lv in self._guards))
        name = f"__x{len(self.lets)}"
        level += 1
        self.lets.append((name, col, level))
        if self._levels:
            self._levels[-1] = max(self._levels[-1], level)
        return _F().col(name), level

    def bind(self, frame: Any) -> Any:
        """`frame` with the bound columns added, one projection per level."""
        for level in range(1, max((lv for _, _, lv in self.lets), default=0) + 1):
            frame = frame.select("*", *[col.alias(n) for n, col, lv in self.lets if lv == level])
        return frame

    def t(self, e: Expr) -> pl.DataType:
        k = id(e)
        if k not in self._types:
            self._types[k] = e.dtype(self.schema)
        return self._types[k]

    def coerce(self, x: Any, src: pl.DataType, to: pl.DataType) -> Any:
        if src == to or to == fn.NULL:
            return x
        return x.cast(spark_type(to))

    def _c(self, e: Expr) -> Any:
        F = _F()
        if isinstance(e, Col):
            return col(e.name)
        if isinstance(e, Lit):
            t = self.t(e)
            if e.value is None:
                return F.lit(None)
            if isinstance(t, pl.Decimal):
                return F.lit(str(e.value)).cast(spark_type(t))
            return F.lit(e.value).cast(spark_type(t))
        if isinstance(e, Binary):
            return self.binary(e)
        if isinstance(e, Unary):
            return self.unary(e)
        if isinstance(e, Cast):
            from dbspark.engines.spark.casts import cast

            return cast(self.c(e.arg), self.t(e.arg), e.to)
        if isinstance(e, Case):
            rt = self.t(e)
            out, missed, level = None, None, 0  # missed: no earlier condition held (rows reaching this one)
            for cond, val in e.whens:
                with self.guarded(missed, level):
                    c, lc = self.leveled(cond)
                level = max(level, lc)
                held = F.coalesce(c, F.lit(False))
                reach = held if missed is None else missed & held
                with self.guarded(reach, level):
                    v = self.coerce(self.c(val), self.t(val), rt)
                out = F.when(c, v) if out is None else out.when(c, v)
                missed = ~held if missed is None else missed & ~held
            assert out is not None
            if e.otherwise is not None:
                with self.guarded(missed, level):
                    out = out.otherwise(self.coerce(self.c(e.otherwise), self.t(e.otherwise), rt))
            return out if rt == fn.NULL else out.cast(spark_type(rt))
        if isinstance(e, InList):
            st = fn.supertype([self.t(e.arg), *(self.t(i) for i in e.items)], "IN")
            x = self.coerce(self.c(e.arg), self.t(e.arg), st)
            hit = None
            for i in e.items:
                eq = x == self.coerce(self.c(i), self.t(i), st)
                hit = eq if hit is None else hit | eq
            return hit
        if isinstance(e, Func):
            from dbspark.engines.spark.sqlfuncs import compile_func

            self.t(e)
            if e.name in MACROS:
                return self.c(expand(e, self.schema))
            return compile_func(self, e)
        raise UnsupportedError(f"the spark engine cannot evaluate expression {e!r} ({type(e).__name__})")

    def operands(self, a: Expr, b: Expr) -> tuple[Any, Any]:
        ta, tb = self.t(a), self.t(b)
        st = fn.supertype2(ta, tb, "operands")
        return self.coerce(self.c(a), ta, st), self.coerce(self.c(b), tb, st)

    def binary(self, e: Binary) -> Any:
        F = _F()
        if e.op in ("truediv", "floordiv", "mod"):
            a, b = self.c(e.left), self.c(e.right)
            if e.op == "truediv":
                return _truediv(a, b)
            floating = e.dtype(self.schema).is_float()
            return _floordiv(a, b, floating) if e.op == "floordiv" else _mod(a, b, floating)
        if e.op in _CMP:
            a, b = self.operands(e.left, e.right)
            return eager(_CMP[e.op](a, b), [(e.right, b)])
        if e.op in ("and", "or"):  # the right side is evaluated where the left one does not decide
            a, level = self.leveled(e.left)
            with self.guarded(
                F.coalesce(a, F.lit(True)) if e.op == "and" else ~F.coalesce(a, F.lit(False)), level
            ):
                b = self.c(e.right)
            return a & b if e.op == "and" else a | b
        return self.arith(e)

    def arith(self, e: Binary) -> Any:
        F = _F()
        rt, ta, tb = self.t(e), self.t(e.left), self.t(e.right)
        op, sym = e.op, ARITH[e.op]
        if rt == fn.NULL:
            return F.lit(None)
        a, b = self.c(e.left), self.c(e.right)
        return eager(self._arith(op, sym, rt, ta, tb, a, b), [(e.right, b)])

    def _arith(
        self, op: str, sym: str, rt: pl.DataType, ta: pl.DataType, tb: pl.DataType, a: Any, b: Any
    ) -> Any:
        F = _F()
        if rt == pl.Date() or (op == "sub" and ta == pl.Date()):
            if ta == pl.Date() and tb == pl.Date():
                return F.datediff(a, b).cast("long")
            d, n = (a, b) if ta == pl.Date() else (b, a)
            lo, hi = INT_RANGE[pl.Int32()]
            n32 = F.when((n >= lo) & (n <= hi), n).cast("int")
            out = F.date_sub(d, n32) if op == "sub" else F.date_add(d, n32)
            return checked(out, (n < lo) | (n > hi), f"DATE {sym} integer: days out of INTEGER range", (n,))
        if op == "sql_div" or rt.is_float():
            a, b = a.cast("double"), b.cast("double")
            if op == "sql_div":
                return _truediv(a, b)
            if op == "int_div":
                return F.when(b == 0, None).otherwise(_truediv(a, b))
            if op == "sql_mod":  # Java's % on doubles is fmod: the sign of the dividend
                return F.when(b == 0, F.when(a.isNotNull(), F.lit(float("nan")))).otherwise(F.try_mod(a, b))
            return {"add": a + b, "sub": a - b, "mul": a * b}[op]
        if fn.is_int(rt):
            return self.int_arith(op, sym, rt, a, b)
        from dbspark.engines.spark.casts import dec_arith

        return dec_arith(op, sym, rt, a, b, ta, tb)

    def int_arith(self, op: str, sym: str, rt: pl.DataType, a: Any, b: Any) -> Any:
        F = _F()
        lo, hi = INT_RANGE[rt]
        la, lb = a.cast("long"), b.cast("long")
        msg = f"integer overflow in {sym!r} ({fn.sql_name(rt)})"
        if op in ("int_div", "sql_mod"):
            q = F.call_function("div", la, lb) if op == "int_div" else F.try_mod(la, lb)
            over = (la == lo) & (lb == -1)
            q = F.when((lb == 0) | over, None).otherwise(q)
            return checked(q.cast(spark_type(rt)), over, msg, (a, b))
        if self.ansi_ints and rt == pl.Int64() and op in ("add", "sub", "mul"):
            # one reference to each operand: the checked form below refers to them five times, and a
            # sum of sums (a nested DISTINCT's weight) grew exponentially in Catalyst's filter pushdown,
            # which inlines the bound columns again (a recursive view on the cluster ran out of heap)
            return {"add": la + lb, "sub": la - lb, "mul": la * lb}[op]
        r = {"add": F.try_add, "sub": F.try_subtract, "mul": F.try_multiply}[op](la, lb)
        bad = (r.isNull() & la.isNotNull() & lb.isNotNull()) | (r < lo) | (r > hi)
        return checked(F.when(~bad, r).cast(spark_type(rt)), bad, msg, (a, b))

    def unary(self, e: Unary) -> Any:
        F = _F()
        a = self.c(e.arg)
        if e.op == "not":
            return ~a
        if e.op == "is_null":
            return a.isNull()
        if e.op == "is_not_null":
            return a.isNotNull()
        t = self.t(e)
        if fn.is_int(t):
            lo = INT_RANGE[t][0]
            what = "-" if e.op == "neg" else "abs"
            v = -a if e.op == "neg" else F.abs(a)
            return checked(
                F.when(a != lo, v), a == lo, f"integer overflow in {what!r} ({fn.sql_name(t)})", (a,)
            )
        if t == fn.NULL:
            return F.lit(None)
        return -a if e.op == "neg" else F.abs(a)


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
