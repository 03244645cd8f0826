"""Compile scalar expression IR (`dbspark.ir.expr`) to Polars expressions, with SQL (DuckDB) semantics.

Errors SQL raises at run time (integer overflow, a failed CAST, sqrt of a negative number) are checked
vectorized: `checked` wraps a value with a mask of the rows at fault and raises `DataError` naming the
operation and the first faulty operands. A check only counts the rows where the expression is really
evaluated: the compiler threads a *guard* (the rows that reach a CASE branch, or a COALESCE argument
after a NULL, the right side of AND / OR where the left does not decide), so
`CASE WHEN x < 10 THEN x * 1e18 END` is no error for x >= 10, as in DuckDB. AND / OR short-circuit
from left to right as in DuckDB's WHERE and in Spark (DuckDB's projections evaluate both sides).

A float operation gives a row the same bits whatever batch it arrives in (DBSP's maps must be
functions; a delete must cancel its insert): `exact` evaluates it on materialized operands, because
Polars computes an operation with a scalar operand by other means (x / c as x * (1/c), x + 0.0 as x,
which loses the sign of a zero sum; pow(x, c) for a small integer c as repeated products), and any
operand can be a scalar at run time: a literal, a when/then that no row meets, a frame's broadcast
column, every operand of a one-row batch.
"""

from __future__ import annotations

import decimal
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import polars as pl

from dbspark.errors import DataError, UnsupportedError
from dbspark.ir import functions as fn
from dbspark.ir.expr import ARITH, Binary, Case, Cast, Col, Expr, Func, InList, Lit, Unary
from dbspark.ir.macros import MACROS, expand

Guard = pl.Expr | None
_PY_BIN: dict[str, Callable[[pl.Expr, pl.Expr], pl.Expr]] = {
    "truediv": lambda a, b: a / b,
    "floordiv": lambda a, b: a // b,
    "mod": lambda a, b: a % b,
}
_CMP: dict[str, Callable[[pl.Expr, pl.Expr], pl.Expr]] = {
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b,
}
INT_RANGE = fn.INT_RANGE


COMPILED_CACHE = 1024  # compiled expressions kept, by the identity of the expression object
_compiled: OrderedDict[int, tuple[Expr, tuple, pl.Expr]] = OrderedDict()
_compiled_lock = threading.Lock()


def to_polars(e: Expr, schema: pl.Schema | None = None) -> pl.Expr:
    """The Polars expression computing `e` over a frame with `schema` (types pick the SQL semantics).

    An operator's expressions are the same objects every step, so the compiled form is kept by the
    object's identity and the schema (not by equality: `Lit(1) == Lit(True)`); an entry holds its
    expression, so the identity is not reused while it is cached."""
    schema = pl.Schema() if schema is None else schema
    key = tuple(schema.items())
    with _compiled_lock:  # (pipelines may step in several threads)
        hit = _compiled.get(id(e))
        if hit is not None and hit[0] is e and hit[1] == key:
            _compiled.move_to_end(id(e))
            return hit[2]
    out = Compiler(schema).c(e, None)
    with _compiled_lock:
        _compiled[id(e)] = (e, key, out)
        if len(_compiled) > COMPILED_CACHE:
            _compiled.popitem(last=False)
    return out


def evaluate(run: Callable[[], pl.DataFrame]) -> pl.DataFrame:
    """Run a Polars evaluation of compiled expressions; a DataError raised inside keeps its own message
    (without the expression dump Polars appends)."""
    try:
        return run()
    except DataError as e:
        raise DataError(str(e).split("\n\nThis error occurred")[0].strip()) from None


Build = Callable[[list[pl.Expr]], "tuple[pl.Expr, pl.Expr | None]"]


def _simple(x: pl.Expr) -> bool:
    return x.meta.is_column() or x.meta.is_literal()


def checked(
    inputs: list[pl.Expr], build: Build, dtype: pl.DataType, guard: Guard = None, message: str = ""
) -> pl.Expr:
    """The value `build` computes from `inputs`, raising DataError(message) if its mask of faulty rows
    holds on any row the guard admits. `build` gets placeholders for the inputs and returns (value,
    bad or None); each input is evaluated once (a Polars UDF over whole batches), so expressions that
    use an operand several times stay linear in size."""
    if all(_simple(x) for x in inputs):
        value, bad = build(inputs)
        if bad is None:
            return value
    return _on_batches(inputs, build, dtype, guard, message, 1)


def exact(
    inputs: list[pl.Expr],
    build: Build,
    dtype: pl.DataType | None = None,
    guard: Guard = None,
    message: str = "",
) -> pl.Expr:
    """As `checked`, always on materialized columns (a batch's scalar inputs repeated to its length, and
    a one-row batch padded to two rows): `build`'s float operations then take Polars' element-by-element
    kernels, so a row's value does not depend on its batch (see the module's docstring). A constant
    that `build` combines with a float must be one of the inputs, not a literal inside `build`. The
    value's type is `dtype` (DOUBLE by default)."""
    return _on_batches(inputs, build, pl.Float64() if dtype is None else dtype, guard, message, 2)


def fdiv(a: pl.Expr, b: pl.Expr) -> pl.Expr:
    """a / b in IEEE double division, exact whatever the batch (never as a * (1/b))."""
    return exact([a.cast(pl.Float64), b.cast(pl.Float64)], lambda x: (x[0] / x[1], None))


def _on_batches(
    inputs: list[pl.Expr], build: Build, dtype: pl.DataType, guard: Guard, message: str, least: int
) -> pl.Expr:
    names = [f"_{k}" for k in range(len(inputs))]
    value, bad = build([pl.col(n) for n in names])
    g = [] if bad is None or guard is None else [guard]

    def run(every: Sequence[pl.Series]) -> pl.Series:
        # the last input is the rows' positions: their number, even where Polars folded every other
        # input to a scalar (`CASE WHEN p THEN 1.25 ELSE 1.25 END` is the constant 1.25)
        *series, rows = every
        n = len(rows)
        m = max(n, least) if n else 0
        cols = [x if len(x) == m else x.new_from_index(0, m) for x in series]
        df = pl.DataFrame(dict(zip(names, cols[: len(names)], strict=True)))
        if bad is None:
            return df.select(value.cast(dtype)).to_series().head(n)
        out = df.select(value.cast(dtype).alias("v"), bad.fill_null(False).alias("b")).head(n)
        b = out["b"] if not g else out["b"] & cols[-1].head(n).fill_null(False)
        if b.any():
            i = int(b.arg_true()[0])
            vals = ", ".join(repr(c[i]) for c in cols[: len(names)])
            raise DataError(f"{message} (operands {vals})")
        return out["v"]

    return pl.map_batches([*inputs, *g, pl.int_range(pl.len(), dtype=pl.UInt32)], run, return_dtype=dtype)


def _fmod(series: Sequence[pl.Series]) -> pl.Series:
    import numpy as np

    n = next((len(x) for x in series if len(x) != 1), 1)
    a, b = (x if len(x) == n else x.new_from_index(0, n) for x in series)
    with np.errstate(all="ignore"):
        r = np.fmod(a.cast(pl.Float64).to_numpy(), b.cast(pl.Float64).to_numpy())
    return pl.Series(a.name, r, dtype=pl.Float64).set(a.is_null() | b.is_null(), None)


def _nonzero_lit(e: Expr) -> bool:
    """A literal number other than zero (Polars' float `+` / `-` with a scalar shortcut only zero)."""
    return (
        isinstance(e, Lit)
        and isinstance(e.value, int | float | decimal.Decimal)
        and not isinstance(e.value, bool)
        and e.value != 0
    )


def _py_fmod(x: list[pl.Expr]) -> tuple[pl.Expr, None]:
    """Python's float a % b (the sign of the divisor, a zero's too; NaN for a zero divisor), as on Spark and
    in the Datalog oracle: C's exact fmod, plus b where the signs differ (Polars' a - b * floor(a / b)
    rounds twice)."""
    r = pl.map_batches(x, _fmod, return_dtype=pl.Float64())
    zero = pl.when(x[1] < 0).then(pl.lit(-0.0)).otherwise(pl.lit(0.0))
    return pl.when(r == 0).then(zero).when((r < 0) != (x[1] < 0)).then(r + x[1]).otherwise(r), None


def and_guard(g: Guard, c: pl.Expr) -> pl.Expr:
    c = c.fill_null(False)
    return c if g is None else g & c


def wide(t: pl.DataType) -> pl.DataType:
    """An integer type wide enough to hold any +, -, * of two values of integer type `t`."""
    return pl.Int128() if t == pl.Int64() else pl.Int64()


def int_in_range(r: pl.Expr, t: pl.DataType) -> pl.Expr:
    lo, hi = INT_RANGE[fn.norm_int(t)]
    return (r >= lo) & (r <= hi)


def dec_lit(v: Any, p: int, s: int) -> pl.Expr:
    return pl.lit(decimal.Decimal(v), dtype=pl.Decimal(p, s))


def unscaled(x: pl.Expr, s: int) -> pl.Expr:
    """The Int128 unscaled value of a decimal expression at scale `s` (exact: rescales up first)."""
    return x.cast(pl.Decimal(38, s)).to_physical()


def from_unscaled(u: pl.Expr, p: int, s: int) -> pl.Expr:
    """The DECIMAL(p, s) whose unscaled value is the integer `u` (exact)."""
    one = pl.lit(decimal.Decimal(1).scaleb(-s), dtype=pl.Decimal(38, s))
    return (u.cast(pl.Int128).cast(pl.Decimal(38, 0)) * one).cast(pl.Decimal(p, s), strict=False)


def dec_fits(u: pl.Expr, p: int) -> pl.Expr:
    """An unscaled Int128 value has at most p digits (10^38 fits Int128: p = 38 is checked too)."""
    return u.abs() < pl.lit(10**p, dtype=pl.Int128)


# above this an Int128 sum or product of unscaled values may have wrapped (Int128 ends at 1.7e38): it is
# estimated in floats first, far enough from both 1e38 and 1.7e38 for their rounding not to matter
WRAPS = 1.5e38


class Compiler:
    """Compiles one expression tree against a schema; `c(e, guard)` is the Polars expression of `e`."""

    def __init__(self, schema: pl.Schema) -> None:
        self.schema = schema
        self._types: dict[int, pl.DataType] = {}

    def t(self, e: Expr) -> pl.DataType:
        k = id(e)
        if k not in self._types:
            self._types[k] = e.dtype(self.schema)
        return self._types[k]

    def c(self, e: Expr, g: Guard) -> pl.Expr:
        out = self._c(e, g)
        # a constant subexpression is a scalar, which Polars broadcasts (a checked one is a UDF)
        return out.first() if not isinstance(e, Lit) and not e.columns() else out

    def _c(self, e: Expr, g: Guard) -> pl.Expr:
        if isinstance(e, Col):
            return pl.col(e.name)
        if isinstance(e, Lit):
            return self.lit(e)
        if isinstance(e, Binary):
            return self.binary(e, g)
        if isinstance(e, Unary):
            return self.unary(e, g)
        if isinstance(e, Cast):
            from dbspark.engines.local.casts import cast

            return cast(self, self.c(e.arg, g), self.t(e.arg), e.to, g)
        if isinstance(e, Case):
            return self.case(e, g)
        if isinstance(e, InList):
            return self.in_list(e, g)
        if isinstance(e, Func):
            from dbspark.engines.local.sqlfuncs import compile_func

            self.t(e)  # type-checks the call
            if e.name in MACROS:
                return self.c(expand(e, self.schema), g)
            return compile_func(self, e, g)
        raise UnsupportedError(f"the local engine cannot evaluate expression {e!r} ({type(e).__name__})")

    def lit(self, e: Lit) -> pl.Expr:
        t = self.t(e)
        if e.value is None:
            return pl.lit(None)
        return pl.lit(e.value, dtype=t)

    def coerce(self, x: pl.Expr, src: pl.DataType, to: pl.DataType) -> pl.Expr:
        """A value of type `src` as the (wider, lossless) type `to`."""
        if src == to or src == fn.NULL:
            return x if src == to else x.cast(to)
        return x.cast(to)

    def operands(self, a: Expr, b: Expr, g: Guard, to: pl.DataType | None = None) -> tuple[pl.Expr, pl.Expr]:
        ta, tb = self.t(a), self.t(b)
        st = to if to is not None else fn.supertype2(ta, tb, "operands")
        return self.coerce(self.c(a, g), ta, st), self.coerce(self.c(b, g), tb, st)

    # ---- operators ---------------------------------------------------------------------------------------
    def binary(self, e: Binary, g: Guard) -> pl.Expr:
        if e.op in _PY_BIN:
            a, b = self.c(e.left, g), self.c(e.right, g)
            if e.op == "mod" and self.t(e).is_float():
                return exact([a, b], _py_fmod)
            if e.op == "truediv" or self.t(e).is_float():
                if e.op == "truediv":
                    a, b = a.cast(pl.Float64), b.cast(pl.Float64)
                return exact([a, b], lambda x: (_PY_BIN[e.op](x[0], x[1]), None), self.t(e))
            return _PY_BIN[e.op](a, b)
        if e.op in _CMP:
            a, b = self.operands(e.left, e.right, g)
            return _CMP[e.op](a, b)
        if e.op in ("and", "or"):  # Kleene logic; the right side runs where the left does not decide
            a = self.c(e.left, g)
            if e.op == "and":
                return a & self.c(e.right, and_guard(g, a.fill_null(True)))
            return a | self.c(e.right, and_guard(g, ~a.fill_null(False)))
        return self.arith(e, g)

    def arith(self, e: Binary, g: Guard) -> pl.Expr:
        rt, ta, tb = self.t(e), self.t(e.left), self.t(e.right)
        sym, op = ARITH[e.op], e.op
        if rt == fn.NULL:
            return pl.lit(None)
        if rt == pl.Date() or (op == "sub" and ta == pl.Date()):
            a, b = self.c(e.left, g), self.c(e.right, g)
            if ta == pl.Date() and tb == pl.Date():
                return (a - b).dt.total_days().cast(pl.Int64)
            d, n = (a, b) if ta == pl.Date() else (b, a)

            def add_days(x: list[pl.Expr]) -> tuple[pl.Expr, pl.Expr]:
                days = pl.duration(days=x[1].cast(pl.Int64))
                return ((x[0] - days) if op == "sub" else (x[0] + days)), ~int_in_range(x[1], pl.Int32())

            # DuckDB adds an INTEGER number of days to a DATE
            return checked([d, n], add_days, pl.Date(), g, f"DATE {sym} integer: days out of INTEGER range")
        if op == "sql_div" or rt.is_float():
            a, b = self.operands(e.left, e.right, g, pl.Float64())
            if op == "sql_div":
                return fdiv(a, b)
            if op == "int_div":  # DuckDB: // on floats divides, and is NULL for a zero divisor
                return exact([a, b], lambda x: (pl.when(x[1] == 0).then(None).otherwise(x[0] / x[1]), None))
            if op == "sql_mod":  # C's fmod (exact; the sign of the dividend), as DuckDB and Java
                return pl.map_batches([a, b], _fmod, return_dtype=pl.Float64())
            if op == "mul":  # Polars' scalar shortcuts (x * 1 as x, x * -1 as -x) give the same bits
                return a * b
            if _nonzero_lit(e.left) or _nonzero_lit(e.right):  # a scalar shortcut needs a zero scalar
                return a + b if op == "add" else a - b
            return exact([a, b], lambda x: ((x[0] + x[1]) if op == "add" else (x[0] - x[1]), None))
        if fn.is_int(rt):
            return self.int_arith(op, sym, rt, self.c(e.left, g), self.c(e.right, g), g)
        return self.dec_arith(op, sym, rt, e, g)

    def int_arith(self, op: str, sym: str, rt: pl.DataType, a: pl.Expr, b: pl.Expr, g: Guard) -> pl.Expr:
        w = wide(rt)
        message = f"integer overflow in {sym!r} ({fn.sql_name(rt)})"

        def build(x: list[pl.Expr]) -> tuple[pl.Expr, pl.Expr]:
            wa, wb = x[0].cast(w), x[1].cast(w)
            if op in ("int_div", "sql_mod"):  # truncating division; NULL for a zero divisor
                zero = wb == 0
                safe = pl.when(zero).then(1).otherwise(wb)
                q = (wa.abs() // safe.abs()) * wa.sign() * safe.sign()
                out = q if op == "int_div" else wa - q * safe
                bad = (wa == INT_RANGE[rt][0]) & (wb == -1)  # DuckDB: MIN // -1 and MIN % -1 overflow
                return pl.when(zero).then(None).otherwise(out).cast(rt, strict=False), bad
            r = {"add": wa + wb, "sub": wa - wb, "mul": wa * wb}[op]
            return r.cast(rt, strict=False), ~int_in_range(r, rt)

        return checked([a, b], build, rt, g, message)

    def dec_arith(self, op: str, sym: str, rt: pl.DataType, e: Binary, g: Guard) -> pl.Expr:
        (p, s) = fn.dec_of(rt)
        ta, tb = self.t(e.left), self.t(e.right)
        if ta == fn.NULL or tb == fn.NULL:
            return pl.lit(None, dtype=rt)
        sa, sb = fn.dec_of(ta)[1], fn.dec_of(tb)[1]

        def build(x: list[pl.Expr]) -> tuple[pl.Expr, pl.Expr]:
            big: pl.Expr = pl.lit(False)
            if op in ("add", "sub", "sql_mod"):
                ua, ub = unscaled(x[0], s), unscaled(x[1], s)
                if op == "sql_mod":
                    zero = ub == 0
                    safe = pl.when(zero).then(1).otherwise(ub)
                    u = pl.when(zero).then(None).otherwise((ua.abs() % safe.abs()) * ua.sign())
                else:
                    u = ua + ub if op == "add" else ua - ub
                    fa, fb = ua.cast(pl.Float64), ub.cast(pl.Float64)
                    big = (fa + fb if op == "add" else fa - fb).abs() >= WRAPS
                    # DuckDB casts both operands to the result type first: one that does not fit it
                    # (the width kept at 18 for two DECIMAL(<=18) inputs) is an overflow
                    big = big | ~dec_fits(ua, p) | ~dec_fits(ub, p)
            else:  # mul: the exact product of the unscaled values, at scale sa + sb
                ua, ub = unscaled(x[0], sa), unscaled(x[1], sb)
                u = ua * ub
                big = (ua.cast(pl.Float64) * ub.cast(pl.Float64)).abs() >= WRAPS
            # a wrapped value, or one past p digits, never reaches a (strict) cast
            over = big | ~dec_fits(u, p)
            return from_unscaled(pl.when(over).then(None).otherwise(u), p, s), over

        return checked(
            [self.c(e.left, g), self.c(e.right, g)],
            build,
            rt,
            g,
            f"DECIMAL overflow in {sym!r} (result {fn.sql_name(rt)})",
        )

    def unary(self, e: Unary, g: Guard) -> pl.Expr:
        a = self.c(e.arg, g)
        if e.op == "not":
            return ~a
        if e.op == "is_null":
            return a.is_null()
        if e.op == "is_not_null":
            return a.is_not_null()
        t = self.t(e)
        if fn.is_int(t):

            def build(x: list[pl.Expr]) -> tuple[pl.Expr, pl.Expr]:
                w = x[0].cast(wide(t))
                r = (pl.lit(0, dtype=wide(t)) - w) if e.op == "neg" else w.abs()
                return r.cast(t, strict=False), ~int_in_range(r, t)

            what = "-" if e.op == "neg" else "abs"
            return checked([a], build, t, g, f"integer overflow in {what!r} ({fn.sql_name(t)})")
        return -a if e.op == "neg" else a.abs()

    def case(self, e: Case, g: Guard) -> pl.Expr:
        rt = self.t(e)
        rest = g
        out: Any = None
        for cond, val in e.whens:
            c = self.c(cond, rest).fill_null(False)
            branch = self.coerce(self.c(val, and_guard(rest, c)), self.t(val), rt)
            out = pl.when(c).then(branch) if out is None else out.when(c).then(branch)
            rest = and_guard(rest, ~c)
        if e.otherwise is None:
            return out.otherwise(pl.lit(None, dtype=rt if rt != fn.NULL else None))
        return out.otherwise(self.coerce(self.c(e.otherwise, rest), self.t(e.otherwise), rt))

    def in_list(self, e: InList, g: Guard) -> pl.Expr:
        st = fn.supertype([self.t(e.arg), *(self.t(i) for i in e.items)], "IN")
        x = self.coerce(self.c(e.arg, g), self.t(e.arg), st)
        hit: pl.Expr | None = None
        for i in e.items:
            eq = x == self.coerce(self.c(i, g), self.t(i), st)
            hit = eq if hit is None else hit | eq  # Kleene OR: TRUE on a match, else NULL if any NULL
        assert hit is not None
        return hit
