"""The SQL functions of `dbspark.ir.functions.REGISTRY` on the local engine (Polars), DuckDB semantics."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NoReturn

import polars as pl

from dbspark.columnar.sqlforms import like_parts, like_regex
from dbspark.engines.local.casts import cast
from dbspark.engines.local.exprs import INT_RANGE, and_guard, checked, exact, fdiv, from_unscaled, unscaled
from dbspark.errors import DataError
from dbspark.ir import functions as fn
from dbspark.ir.expr import Expr, Func, Lit

if TYPE_CHECKING:
    from dbspark.engines.local.exprs import Compiler, Guard

Impl = Callable[["Compiler", Func, "Guard"], pl.Expr]
POLARS: dict[str, Impl] = {}


def compile_func(comp: Compiler, e: Func, g: Guard) -> pl.Expr:
    return POLARS[e.name](comp, e, g)


def _impl(*names: str) -> Callable[[Impl], Impl]:
    def deco(f: Impl) -> Impl:
        for n in names:
            POLARS[n] = f
        return f

    return deco


def _args(comp: Compiler, e: Func, g: Guard, to: pl.DataType | None = None) -> list[pl.Expr]:
    """The arguments compiled (and coerced to `to`, if given)."""
    out = []
    varying = any(a.columns() for a in e.args)
    for a in e.args:
        x = comp.c(a, g)
        if varying and not a.columns():  # Polars' string kernels do not all broadcast a constant
            x = pl.repeat(x.first(), pl.len())
        out.append(x if to is None else comp.coerce(x, comp.t(a), to))
    return out


def _lit(e: Func, i: int) -> object:
    return fn.literal_value(e.name, e.args[i], "argument")


# ---- NULL handling --------------------------------------------------------------------------------------
@_impl("coalesce", "ifnull")
def _coalesce(comp: Compiler, e: Func, g: Guard) -> pl.Expr:
    rt, rest, vals = comp.t(e), g, []
    for a in e.args:  # lazy, as DuckDB: an argument is evaluated only where the ones before are NULL
        v = comp.coerce(comp.c(a, rest), comp.t(a), rt)
        vals.append(v)
        rest = and_guard(rest, v.is_null())
    return pl.coalesce(vals) if rt != fn.NULL else pl.lit(None)


@_impl("nullif")
def _nullif(comp: Compiler, e: Func, g: Guard) -> pl.Expr:
    st = fn.supertype2(comp.t(e.args[0]), comp.t(e.args[1]), "nullif")
    a, b = comp.c(e.args[0], g), comp.c(e.args[1], g)
    ta, tb = comp.t(e.args[0]), comp.t(e.args[1])
    return checked(
        [a, b],
        lambda x: (
            pl.when(comp.coerce(x[0], ta, st) == comp.coerce(x[1], tb, st)).then(None).otherwise(x[0]),
            None,
        ),
        comp.t(e),
    )


@_impl("greatest", "least")
def _greatest(comp: Compiler, e: Func, g: Guard) -> pl.Expr:
    xs, rt = _args(comp, e, g, comp.t(e)), comp.t(e)
    if not rt.is_float():
        return pl.max_horizontal(xs) if e.name == "greatest" else pl.min_horizontal(xs)

    def build(c: list[pl.Expr]) -> tuple[pl.Expr, None]:  # NaN is the largest value (DuckDB)
        nan = pl.any_horizontal([x.is_nan() for x in c])
        plain = [x.fill_nan(None) for x in c]
        if e.name == "greatest":
            return pl.when(nan).then(float("nan")).otherwise(pl.max_horizontal(plain)), None
        m = pl.min_horizontal(plain)
        return pl.when(m.is_null() & nan).then(float("nan")).otherwise(m), None

    return checked(xs, build, rt)


@_impl("is_distinct_from", "is_not_distinct_from")
def _distinct(comp: Compiler, e: Func, g: Guard) -> pl.Expr:
    a, b = comp.operands(e.args[0], e.args[1], g)
    return a.ne_missing(b) if e.name == "is_distinct_from" else a.eq_missing(b)


# ---- strings --------------------------------------------------------------------------------------------
def substring_bounds(n: pl.Expr, off: pl.Expr, ln: pl.Expr | None) -> tuple[pl.Expr, pl.Expr]:
    """DuckDB's SubstringStartEnd: 0-based [start, end) of substring(s, off, ln) in a string of n chars."""
    start = pl.when(off > 0).then(off - 1).when(off < 0).then(n + off).otherwise(0)
    if ln is None:
        end = n
    else:
        ln = pl.when(off == 0).then(ln - 1).otherwise(ln)
        end = pl.when(ln > 0).then(start + ln).otherwise(start)
        start = pl.when(ln > 0).then(start).otherwise(start + ln)
        start = pl.when(ln == 0).then(0).otherwise(start)
        end = pl.when(ln == 0).then(0).otherwise(end)
    start = pl.min_horizontal(pl.max_horizontal(start, 0), n)
    end = pl.min_horizontal(pl.max_horizontal(end, 0), n)
    return start, pl.max_horizontal(end - start, 0)


@_impl("substring")
def _substring(comp: Compiler, e: Func, g: Guard) -> pl.Expr:
    def build(xs: list[pl.Expr]) -> tuple[pl.Expr, None]:
        s = xs[0]
        n = s.str.len_chars().cast(pl.Int64)
        start, ln = substring_bounds(n, xs[1].cast(pl.Int64), xs[2].cast(pl.Int64) if len(xs) > 2 else None)
        out = s.str.slice(start, ln)
        return (out if len(xs) == 2 else pl.when(xs[2].is_null()).then(None).otherwise(out)), None

    return checked(_args(comp, e, g), build, pl.String())


@_impl("left", "right")
def _left(comp: Compiler, e: Func, g: Guard) -> pl.Expr:
    def build(x: list[pl.Expr]) -> tuple[pl.Expr, None]:
        s, k = x[0], x[1].cast(pl.Int64)
        n = s.str.len_chars().cast(pl.Int64)
        take = pl.min_horizontal(pl.when(k >= 0).then(k).otherwise(pl.max_horizontal(n + k, 0)), n)
        out = s.str.slice(0, take) if e.name == "left" else s.str.slice(n - take, take)
        return pl.when(k.is_null()).then(None).otherwise(out), None

    return checked(_args(comp, e, g), build, pl.String())


@_impl("upper", "lower", "length", "reverse")
def _simple(comp: Compiler, e: Func, g: Guard) -> pl.Expr:
    (s,) = _args(comp, e, g)
    return {
        "upper": lambda: s.str.to_uppercase(),
        "lower": lambda: s.str.to_lowercase(),
        "length": lambda: s.str.len_chars().cast(pl.Int64),
        "reverse": lambda: s.str.reverse(),
    }[e.name]()


@_impl("trim", "ltrim", "rtrim")
def _trim(comp: Compiler, e: Func, g: Guard) -> pl.Expr:
    xs = _args(comp, e, g)
    chars = xs[1] if len(xs) > 1 else pl.lit(" ")
    f = {"trim": "strip_chars", "ltrim": "strip_chars_start", "rtrim": "strip_chars_end"}[e.name]
    return getattr(xs[0].str, f)(chars)


def _as_strings(comp: Compiler, e: Func, g: Guard) -> list[pl.Expr]:
    return [
        cast(comp, comp.c(a, g), comp.t(a), pl.String(), g)
        if comp.t(a) != fn.NULL
        else pl.lit(None, dtype=pl.String)
        for a in e.args
    ]


@_impl("error")
def _error(comp: Compiler, e: Func, g: Guard) -> pl.Expr:
    """DuckDB's error(message): a DataError with the message of the first row evaluated (the guard's)."""
    return raising(comp, e.args[0], g, DataError)


@_impl("__fail")
def _fail(comp: Compiler, e: Func, g: Guard) -> pl.Expr:
    """dbspark's own check (`operators.checks`): the named error class, as `error`."""
    return raising(comp, e.args[1], g, fn.error_class(e.args[0]))


def raising(comp: Compiler, message: Expr, g: Guard, cls: type) -> pl.Expr:
    """NULL, raising cls(the message of the first row evaluated, the guard's) if a row is evaluated.

    The message is computed for that one row only (not for every row of the batch, as a branch of
    when/then would be): the UDF gets the guard and the message's columns."""
    m = comp.c(message, None)
    cols = sorted(message.columns())
    hit = pl.lit(True) if g is None else g
    inputs = [
        pl.repeat(hit, pl.len()) if g is None else hit,
        pl.struct(cols) if cols else pl.repeat(0, pl.len()),
    ]

    def run(series: Sequence[pl.Series]) -> pl.Series:
        on = series[0].fill_null(False)
        if on.any():
            rows = series[1].filter(on).head(1)
            frame = rows.struct.unnest() if cols else pl.DataFrame({"__one": [0]})
            raise cls(str(frame.select(m.cast(pl.String)).item()))
        return pl.Series(series[0].name, [None] * len(on), dtype=pl.Null)

    return pl.map_batches(inputs, run, return_dtype=pl.Null)


@_impl("__repr")
def _repr(comp: Compiler, e: Func, g: Guard) -> pl.Expr:
    """A value as Python's repr shows it in a message naming a row (`operators.checks`)."""
    (a,) = e.args
    t, x = comp.t(a), comp.c(a, g)
    if t == pl.String():
        s = pl.concat_str(pl.lit("'"), x, pl.lit("'"))
    elif t == pl.Boolean():
        s = pl.when(x).then(pl.lit("True")).otherwise(pl.lit("False"))
    else:
        s = x.cast(pl.String)
    return pl.when(x.is_null()).then(pl.lit("None")).otherwise(s)


@_impl("concat")
def _concat(comp: Compiler, e: Func, g: Guard) -> pl.Expr:
    return pl.concat_str(_as_strings(comp, e, g), ignore_nulls=True)


@_impl("concat_op")
def _concat_op(comp: Compiler, e: Func, g: Guard) -> pl.Expr:
    return pl.concat_str(_as_strings(comp, e, g))


@_impl("concat_ws")
def _concat_ws(comp: Compiler, e: Func, g: Guard) -> pl.Expr:
    sep, *parts = _as_strings(comp, e, g)
    if isinstance(e.args[0], Lit) and _lit(e, 0) is not None:  # a constant separator: one concat_str
        return pl.concat_str(parts, separator=str(_lit(e, 0)), ignore_nulls=True)

    def build(x: list[pl.Expr]) -> tuple[pl.Expr, None]:
        s, *ps = x
        # the separator first in each row's list (so that the list has a row per row), then dropped
        joined = pl.concat_list([s, *ps]).list.slice(1).list.drop_nulls().list.join(s)
        return pl.when(s.is_null()).then(pl.lit(None, dtype=pl.String)).otherwise(joined), None

    # (on materialized operands: a NULL separator, the whole column's or a constant, must not skip
    # evaluating the parts, whose errors DuckDB raises)
    return checked([sep, *parts], build, pl.String())


@_impl("replace")
def _replace(comp: Compiler, e: Func, g: Guard) -> pl.Expr:
    frm = _lit(e, 1)
    if frm is None:
        return pl.lit(None, dtype=pl.String)
    assert isinstance(frm, str)

    def build(x: list[pl.Expr]) -> tuple[pl.Expr, None]:
        s, _, to = x
        out = s if frm == "" else s.str.replace_all(frm, to.fill_null(""), literal=True)
        return pl.when(to.is_null()).then(None).otherwise(out), None

    # (on materialized operands: a NULL `to` must not skip evaluating `s`, whose errors DuckDB raises)
    return checked(_args(comp, e, g), build, pl.String())


@_impl("split_part")
def _split_part(comp: Compiler, e: Func, g: Guard) -> pl.Expr:
    """DuckDB's: parts from 1 (from the end when negative), '' past the last or at 0; an empty
    delimiter splits into characters."""
    s = comp.c(e.args[0], g)
    delim, n = _lit(e, 1), _lit(e, 2)
    if delim is None or n is None:
        return pl.lit(None, dtype=pl.String)
    assert isinstance(delim, str) and isinstance(n, int)
    if n == 0:
        return pl.when(s.is_null()).then(None).otherwise(pl.lit(""))
    parts = s.str.split(delim) if delim else s.str.split("")
    return (
        pl.when(s.is_null())
        .then(None)
        .otherwise(parts.list.get(n - 1 if n > 0 else n, null_on_oob=True).fill_null(""))
    )


@_impl("spark_decimal_div")
def _spark_decimal_div(comp: Compiler, e: Func, g: Guard) -> pl.Expr:
    """Spark's DECIMAL division: the exact quotient of the unscaled values, rounded half-up at the
    result's scale (in Int128 where the scaled dividend fits, exactly in Python integers where it does
    not); a quotient past the result's precision is Spark's ANSI overflow error."""
    a, b = e.args[:2]
    ta, tb = comp.t(a), comp.t(b)
    p, s = _lit(e, 2), _lit(e, 3)
    assert isinstance(p, int) and isinstance(s, int)
    sa, sb = (t.scale or 0 if isinstance(t, pl.Decimal) else 0 for t in (ta, tb))
    shift = s + sb - sa  # (>= 0: `functions.spark_decimal_quotient`)

    def run(series: Sequence[pl.Series]) -> pl.Series:
        def overflow(i: int) -> NoReturn:
            raise DataError(
                f"[NUMERIC_VALUE_OUT_OF_RANGE] {series[0][i]} / {series[1][i]} does not fit DECIMAL({p},{s}) "
                "(Spark's ANSI mode)"
            )

        x, y = (
            v.cast(pl.Decimal(38, k)).to_physical() if isinstance(v.dtype, pl.Decimal) else v.cast(pl.Int128)
            for v, k in zip(series, (sa, sb), strict=True)
        )
        n = max(len(x), len(y))
        x, y = (v if len(v) == n else v.new_from_index(0, n) for v in (x, y))
        df = pl.DataFrame({"x": x, "y": y})
        fits = df.select(
            (pl.col("x").cast(pl.Float64).abs() * 10.0**shift < 1e37) | pl.col("x").is_null()
        ).to_series()
        ten = pl.lit(10**shift, dtype=pl.Int128)
        num, den = (pl.col("x") * ten).abs(), pl.col("y").abs()
        q = num // den
        up = q + pl.when(2 * (num - q * den) >= den).then(pl.lit(1, dtype=pl.Int128)).otherwise(
            pl.lit(0, dtype=pl.Int128)
        )
        neg = (pl.col("x") < 0) != (pl.col("y") < 0)
        r = (
            pl.when((pl.col("y") == 0) | ~pl.Series(fits))
            .then(None)
            .otherwise(pl.when(neg).then(pl.lit(0, dtype=pl.Int128) - up).otherwise(up))
        )
        got = df.select(r.alias("r")).to_series()
        if not fits.all():  # (a dividend too wide for Int128 once scaled: Python's integers)
            out = got.to_list()
            for i in (~fits).arg_true().to_list():
                xi, yi = x[i], y[i]
                if xi is None or yi is None or yi == 0:
                    continue
                qi, rem = divmod(abs(xi) * 10**shift, abs(yi))
                qi += 2 * rem >= abs(yi)
                if qi >= 10**p:
                    overflow(i)
                out[i] = -qi if (xi < 0) != (yi < 0) else qi
            got = pl.Series("r", out, dtype=pl.Int128)
        over = (got.abs() >= pl.Series([10**p], dtype=pl.Int128)).fill_null(False)
        if over.any():
            overflow(int(over.arg_true()[0]))
        return pl.DataFrame({"r": got}).select(from_unscaled(pl.col("r"), p, s)).to_series()

    return pl.map_batches([comp.c(a, g), comp.c(b, g)], run, return_dtype=pl.Decimal(p, s))


@_impl("regexp_extract")
def _regexp_extract(comp: Compiler, e: Func, g: Guard) -> pl.Expr:
    """The group's match of the first match ('' where there is none, or the group took no part)."""
    s = comp.c(e.args[0], g)
    pattern = _lit(e, 1)
    group = _lit(e, 2) if len(e.args) > 2 else 0
    if pattern is None or group is None:
        return pl.lit(None, dtype=pl.String)
    assert isinstance(pattern, str) and isinstance(group, int)
    return pl.when(s.is_null()).then(None).otherwise(s.str.extract(pattern, group).fill_null(""))


@_impl("strpos")
def _strpos(comp: Compiler, e: Func, g: Guard) -> pl.Expr:
    def build(x: list[pl.Expr]) -> tuple[pl.Expr, None]:
        s, sub = x
        before = s.str.split(sub).list.first().str.len_chars().cast(pl.Int64)
        found = s.str.contains(sub, literal=True)
        pos = pl.when(sub == "").then(1).when(found).then(before + 1).otherwise(0)
        return pl.when(s.is_null() | sub.is_null()).then(None).otherwise(pos.cast(pl.Int64)), None

    return checked(_args(comp, e, g), build, pl.Int64())


@_impl("starts_with", "ends_with", "contains")
def _prefix(comp: Compiler, e: Func, g: Guard) -> pl.Expr:
    s, p = _args(comp, e, g)
    if e.name == "contains":
        return s.str.contains(p, literal=True)
    return s.str.starts_with(p) if e.name == "starts_with" else s.str.ends_with(p)


@_impl("like", "ilike")
def _like(comp: Compiler, e: Func, g: Guard) -> pl.Expr:
    s = comp.c(e.args[0], g)
    pattern, escape = like_parts(e)
    if pattern is None:
        return pl.lit(None, dtype=pl.Boolean)
    return s.str.contains(like_regex(e.name, pattern, escape or None))


# ---- numbers --------------------------------------------------------------------------------------------
@_impl("abs")
def _abs(comp: Compiler, e: Func, g: Guard) -> pl.Expr:
    return comp.c(e.args[0].abs(), g)


def round_half_away(y: pl.Expr) -> pl.Expr:
    return y.round(0, mode="half_away_from_zero")


@_impl("round")
def _round(comp: Compiler, e: Func, g: Guard) -> pl.Expr:
    x, t, rt = comp.c(e.args[0], g), comp.t(e.args[0]), comp.t(e)
    n = int(_lit(e, 1)) if len(e.args) > 1 else 0  # type: ignore[call-overload]
    if t == fn.NULL:
        return pl.lit(None)
    if t.is_float():  # DuckDB's RoundOperatorPrecision, operation for operation

        def build_f(c: list[pl.Expr]) -> tuple[pl.Expr, None]:
            v, m = c
            if n >= 0:
                r = round_half_away(v * m) / m
                return pl.when(r.is_finite()).then(r).otherwise(v), None
            r = round_half_away(v / m) * m
            return pl.when(r.is_finite() | r.is_null()).then(r).otherwise(0.0), None

        return exact([x, pl.lit(float(10 ** abs(n)))], build_f)
    if n >= 0 and fn.is_int(t):
        return x
    (p, s) = fn.dec_of(t)
    if n >= 0:
        return x.round(n, mode="half_away_from_zero").cast(rt, strict=False) if n < s else x
    k = 10 ** (s - n)  # round the unscaled value to a multiple of k, half away from zero

    def build(c: list[pl.Expr]) -> tuple[pl.Expr, pl.Expr]:
        u = unscaled(c[0], s) if fn.is_dec(t) else c[0].cast(pl.Int128)
        q = ((u.abs() + k // 2) // k) * k * u.sign()
        if fn.is_dec(t):
            q = q // 10**s  # exact: q is a multiple of 10**s
            return from_unscaled(q, p, 0).cast(rt, strict=False), ~(q.abs() < 10 ** min(p, 38))
        lo, hi = INT_RANGE[rt]
        return q.cast(rt, strict=False), (q < lo) | (q > hi)

    return checked([x], build, rt, g, f"overflow in round({fn.sql_name(t)}, {n})")


@_impl("floor", "ceil")
def _floor(comp: Compiler, e: Func, g: Guard) -> pl.Expr:
    x, t, rt = comp.c(e.args[0], g), comp.t(e.args[0]), comp.t(e)
    if fn.is_dec(t):
        return (x.floor() if e.name == "floor" else x.ceil()).cast(rt)
    x = x.cast(pl.Float64)
    return x.floor() if e.name == "floor" else x.ceil()


@_impl("sqrt", "ln", "log10", "exp")
def _math(comp: Compiler, e: Func, g: Guard) -> pl.Expr:
    x = comp.c(e.args[0], g).cast(pl.Float64)
    if e.name == "exp":
        return x.exp()
    if e.name == "sqrt":
        return checked(
            [x],
            lambda c: (c[0].sqrt(), c[0] < 0),
            pl.Float64(),
            g,
            "cannot take square root of a negative number",
        )
    return checked(
        [x],
        lambda c: (c[0].log() if e.name == "ln" else c[0].log10(), c[0] <= 0),
        pl.Float64(),
        g,
        f"{e.name}: cannot take logarithm of zero or a negative number",
    )


@_impl("power")
def _power(comp: Compiler, e: Func, g: Guard) -> pl.Expr:
    # C's pow for every row, as DuckDB (Polars computes a scalar exponent 0.5 as sqrt, 2..9 as products)
    a, b = (x.cast(pl.Float64) for x in _args(comp, e, g))
    return exact([a, b], lambda x: (x[0].pow(x[1]), None))


@_impl("sign")
def _sign(comp: Compiler, e: Func, g: Guard) -> pl.Expr:
    x = comp.c(e.args[0], g)
    t = comp.t(e.args[0])
    if fn.is_dec(t):
        return checked(
            [x],
            lambda c: (
                pl.when(c[0] > 0).then(1).when(c[0] < 0).then(-1).when(c[0] == 0).then(0).cast(pl.Int8),
                None,
            ),
            pl.Int8(),
        )
    return checked(
        [x.cast(pl.Float64)],
        lambda c: (pl.when(c[0].is_nan()).then(0).otherwise(c[0].sign()).cast(pl.Int8), None),
        pl.Int8(),
    )


# ---- dates ----------------------------------------------------------------------------------------------
_TRUNC = {
    "year": "1y",
    "quarter": "1q",
    "month": "1mo",
    "week": "1w",
    "day": "1d",
    "hour": "1h",
    "minute": "1m",
    "second": "1s",
    "millisecond": "1ms",
    "microsecond": "1us",
}


def _datetime(comp: Compiler, a: Expr, g: Guard) -> pl.Expr:
    x = comp.c(a, g)
    return x.cast(pl.Datetime("us")) if comp.t(a) != pl.Datetime("us") else x


@_impl("extract")
def _extract(comp: Compiler, e: Func, g: Guard) -> pl.Expr:
    part = str(_lit(e, 0)).lower()
    x = _datetime(comp, e.args[1], g)
    dt = x.dt
    f = {
        "year": dt.year,
        "quarter": dt.quarter,
        "month": dt.month,
        "day": dt.day,
        "dayofweek": lambda: dt.weekday() % 7,
        "dow": lambda: dt.weekday() % 7,
        "dayofyear": dt.ordinal_day,
        "doy": dt.ordinal_day,
        "week": dt.week,
        "hour": dt.hour,
        "minute": dt.minute,
        "second": dt.second,
        "isodow": dt.weekday,
        # DuckDB: the seconds and their fraction, in milli- or microseconds
        "millisecond": lambda: dt.second().cast(pl.Int64) * 1000 + dt.microsecond() // 1000,
        "microsecond": lambda: dt.second().cast(pl.Int64) * 1_000_000 + dt.microsecond(),
    }
    if part == "epoch":
        return fdiv(dt.epoch("us"), pl.lit(1e6))
    return f[part]().cast(pl.Int64)


@_impl("date_trunc")
def _date_trunc(comp: Compiler, e: Func, g: Guard) -> pl.Expr:
    part = str(_lit(e, 0)).lower()
    return _datetime(comp, e.args[1], g).dt.truncate(_TRUNC[part]).cast(comp.t(e))  # in UTC


@_impl("date_add")
def _date_add(comp: Compiler, e: Func, g: Guard) -> pl.Expr:
    """d + INTERVAL: months first (the day clipped to the month's end), then days, then microseconds."""
    x = _datetime(comp, e.args[0], g)
    months, days, micros = (comp.c(a, g).cast(pl.Int64) for a in e.args[1:])
    shifted = x.dt.offset_by(pl.format("{}mo", months))
    return (shifted + pl.duration(days=days, microseconds=micros)).cast(comp.t(e))  # in UTC


from dbspark.engines.local import bitfuncs as _bitfuncs  # noqa: E402, F401
from dbspark.engines.local import timefuncs as _timefuncs  # noqa: E402, F401  (registers its functions)
