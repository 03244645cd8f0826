"""The SQL functions of `dbspark.ir.functions.REGISTRY` on the Spark engine, as on the local engine."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import polars as pl

from dbspark.columnar.sqlforms import like_parts, like_regex
from dbspark.engines.spark.casts import cast, dec_bound, dec_type
from dbspark.engines.spark.convert import spark_type
from dbspark.engines.spark.exprs import (
    _F,
    INT_RANGE,
    checked,
    eager,
    fail,
    fail_as,
    float_floor,
    may_raise,
    py_repr,
)
from dbspark.ir import functions as fn
from dbspark.ir.expr import Func

if TYPE_CHECKING:
    from dbspark.engines.spark.exprs import SparkCompiler

Impl = Callable[["SparkCompiler", Func], Any]
SPARK: dict[str, Impl] = {}


# functions whose value is NULL when any argument is: Spark may skip the later arguments at a NULL
NULL_PROPAGATING = {
    "substring",
    "left",
    "right",
    "trim",
    "ltrim",
    "rtrim",
    "replace",
    "split_part",
    "regexp_extract",
    "strpos",
    "starts_with",
    "ends_with",
    "contains",
    "power",
    "date_add",
    "concat_op",
}


def compile_func(comp: SparkCompiler, e: Func) -> Any:
    out = SPARK[e.name](comp, e)
    if e.name in NULL_PROPAGATING and any(may_raise(a) for a in e.args[1:]):
        out = eager(out, [(a, comp.c(a)) for a in e.args[1:]])
    return out


def _impl(*names: str) -> Callable[[Impl], Impl]:
    def deco(f: Impl) -> Impl:
        for n in names:
            SPARK[n] = f
        return f

    return deco


def _args(comp: SparkCompiler, e: Func, to: pl.DataType | None = None) -> list[Any]:
    out = []
    for a in e.args:
        x = comp.c(a)
        out.append(x if to is None else comp.coerce(x, comp.t(a), to))
    return out


def _lit(e: Func, i: int) -> object:
    return fn.literal_value(e.name, e.args[i], "argument")


@_impl("coalesce", "ifnull")
def _coalesce(comp: SparkCompiler, e: Func) -> Any:
    rt = comp.t(e)
    if rt == fn.NULL:
        return _F().lit(None)
    out, missed, level = [], None, 0  # a later argument is evaluated where the earlier ones are all NULL
    for a in e.args:
        with comp.guarded(missed, level):
            x, lx = comp.leveled(a)
        out.append(comp.coerce(x, comp.t(a), rt))
        level = max(level, lx)
        missed = x.isNull() if missed is None else missed & x.isNull()
    return _F().coalesce(*out)


@_impl("nullif")
def _nullif(comp: SparkCompiler, e: Func) -> Any:
    a, b = comp.operands(e.args[0], e.args[1])  # <=> evaluates both sides (== skips b at a NULL a)
    return _F().when(a.eqNullSafe(b) & a.isNotNull(), None).otherwise(comp.c(e.args[0]))


@_impl("greatest", "least")
def _greatest(comp: SparkCompiler, e: Func) -> Any:
    xs = _args(comp, e, comp.t(e))  # Spark skips NULLs and orders NaN above every number, as DuckDB
    if len(xs) == 1:
        return xs[0]
    return _F().greatest(*xs) if e.name == "greatest" else _F().least(*xs)


@_impl("is_distinct_from", "is_not_distinct_from")
def _distinct(comp: SparkCompiler, e: Func) -> Any:
    a, b = comp.operands(e.args[0], e.args[1])
    return ~a.eqNullSafe(b) if e.name == "is_distinct_from" else a.eqNullSafe(b)


def _slice(s: Any, start: Any, length: Any) -> Any:
    """s[start:start+length] by characters, 0-based start >= 0, length >= 0."""
    return _F().substring(s, start + 1, length)


@_impl("substring")
def _substring(comp: SparkCompiler, e: Func) -> Any:
    F = _F()
    xs = _args(comp, e)
    s, off = xs[0], xs[1].cast("long")
    n = F.char_length(s).cast("long")
    start = F.when(off > 0, off - 1).when(off < 0, n + off).otherwise(0)
    if len(xs) == 2:
        end = n
    else:
        ln = xs[2].cast("long")
        ln = F.when(off == 0, ln - 1).otherwise(ln)
        end = F.when(ln > 0, start + ln).otherwise(start)
        start = F.when(ln > 0, start).otherwise(start + ln)
        start = F.when(ln == 0, 0).otherwise(start)
        end = F.when(ln == 0, 0).otherwise(end)
    start = F.least(F.greatest(start, F.lit(0)), n)
    end = F.least(F.greatest(end, F.lit(0)), n)
    out = _slice(s, start.cast("int"), F.greatest(end - start, F.lit(0)).cast("int"))
    return out if len(xs) == 2 else F.when(xs[2].isNull(), None).otherwise(out)


@_impl("left", "right")
def _left(comp: SparkCompiler, e: Func) -> Any:
    F = _F()
    s, k = _args(comp, e)
    k = k.cast("long")
    n = F.char_length(s).cast("long")
    take = F.least(F.when(k >= 0, k).otherwise(F.greatest(n + k, F.lit(0))), n)
    start = F.lit(0) if e.name == "left" else n - take
    return F.when(k.isNull(), None).otherwise(_slice(s, start.cast("int"), take.cast("int")))


@_impl("upper", "lower", "length", "reverse")
def _simple(comp: SparkCompiler, e: Func) -> Any:
    F = _F()
    (s,) = _args(comp, e)
    return {
        "upper": F.upper,
        "lower": F.lower,
        "reverse": F.reverse,
        "length": lambda x: F.char_length(x).cast("long"),
    }[e.name](s)


@_impl("trim", "ltrim", "rtrim")
def _trim(comp: SparkCompiler, e: Func) -> Any:
    F = _F()
    xs = _args(comp, e)
    chars = xs[1] if len(xs) > 1 else F.lit(" ")
    return {"trim": F.btrim, "ltrim": F.ltrim, "rtrim": F.rtrim}[e.name](xs[0], chars)


def _as_strings(comp: SparkCompiler, e: Func) -> list[Any]:
    return [
        cast(comp.c(a), comp.t(a), pl.String()) if comp.t(a) != fn.NULL else _F().lit(None).cast("string")
        for a in e.args
    ]


@_impl("error")
def _error(comp: SparkCompiler, e: Func) -> Any:
    """DuckDB's error(message): a DataError with the message where it is evaluated (`raise_error`)."""
    return fail(comp.c(e.args[0]).cast("string"))


@_impl("__fail")
def _fail(comp: SparkCompiler, e: Func) -> Any:
    """dbspark's own check (`operators.checks`): the named error class, as `error`."""
    return fail_as(fn.error_class(e.args[0]), comp.c(e.args[1]).cast("string"))


@_impl("__repr")
def _repr(comp: SparkCompiler, e: Func) -> Any:
    """A value as Python's repr shows it in a message naming a row (`operators.checks`)."""
    (a,) = e.args
    return py_repr(comp.c(a), comp.t(a))


@_impl("concat")
def _concat(comp: SparkCompiler, e: Func) -> Any:
    return _F().concat_ws("", *_as_strings(comp, e))


@_impl("concat_op")
def _concat_op(comp: SparkCompiler, e: Func) -> Any:
    return _F().concat(*_as_strings(comp, e))


@_impl("concat_ws")
def _concat_ws(comp: SparkCompiler, e: Func) -> Any:
    """Spark's concat_ws as DuckDB's: NULL arguments skipped, a NULL separator NULL."""
    return _F().call_function("concat_ws", *_as_strings(comp, e))


@_impl("replace")
def _replace(comp: SparkCompiler, e: Func) -> Any:
    F = _F()
    s, _, to = _args(comp, e)
    frm = _lit(e, 1)
    if frm is None:
        return F.lit(None).cast("string")
    out = s if frm == "" else F.replace(s, F.lit(frm), to)
    # NULL where `to` is, `s` evaluated on every row all the same (DuckDB raises its errors): GREATEST
    # evaluates all of its operands, where CASE WHEN `to` IS NULL would skip `s`
    either = F.greatest(s.isNull().cast("int"), to.isNull().cast("int")) == 1
    return F.when(either, None).otherwise(out)


@_impl("split_part")
def _split_part(comp: SparkCompiler, e: Func) -> Any:
    """As the local engine (DuckDB's): Spark's split_part, which also gives '' past the last part; part 0
    and an empty delimiter (characters) written out."""
    F = _F()
    s = comp.c(e.args[0])
    delim, n = _lit(e, 1), _lit(e, 2)
    if delim is None or n is None:
        return F.lit(None).cast("string")
    assert isinstance(delim, str) and isinstance(n, int)
    if n == 0:
        return F.when(s.isNull(), None).otherwise(F.lit(""))
    if delim == "":
        chars = F.split(s, "(?!$)")  # one element per character ('' for '')
        k = F.lit(n) if n > 0 else F.size(chars) + F.lit(n + 1)
        got = F.when((k >= 1) & (k <= F.size(chars)), F.element_at(chars, F.greatest(k, F.lit(1))))
        return F.when(s.isNull(), None).otherwise(F.coalesce(got, F.lit("")))
    return F.split_part(s, F.lit(delim), F.lit(n))


@_impl("spark_decimal_div")
def _spark_decimal_div(comp: SparkCompiler, e: Func) -> Any:
    """Spark's own DECIMAL division (its result type is DECIMAL(p, s) for operands of the types the
    front end assumed, `functions.spark_dec_of`; ANSI mode makes an overflow an error)."""
    a, b = e.args[:2]
    p, s = _lit(e, 2), _lit(e, 3)
    assert isinstance(p, int) and isinstance(s, int)
    x, y = (comp.c(v).cast("decimal({}, {})".format(*fn.spark_dec_of(comp.t(v)))) for v in (a, b))
    return (x / y).cast(f"decimal({p}, {s})")


@_impl("regexp_extract")
def _regexp_extract(comp: SparkCompiler, e: Func) -> Any:
    """Java's regex engine where DuckDB has RE2: the same for the patterns both accept."""
    F = _F()
    s = comp.c(e.args[0])
    pattern = _lit(e, 1)
    group = _lit(e, 2) if len(e.args) > 2 else 0
    if pattern is None or group is None:
        return F.lit(None).cast("string")
    assert isinstance(pattern, str) and isinstance(group, int)
    return F.regexp_extract(s, pattern, group)


@_impl("strpos")
def _strpos(comp: SparkCompiler, e: Func) -> Any:
    s, sub = _args(comp, e)
    return _F().call_function("instr", s, sub).cast("long")


@_impl("starts_with", "ends_with", "contains")
def _prefix(comp: SparkCompiler, e: Func) -> Any:
    F = _F()
    s, p = _args(comp, e)
    return {"starts_with": F.startswith, "ends_with": F.endswith, "contains": F.contains}[e.name](s, p)


@_impl("like", "ilike")
def _like(comp: SparkCompiler, e: Func) -> Any:
    s = comp.c(e.args[0])
    pattern, escape = like_parts(e)
    if pattern is None:
        return _F().lit(None).cast("boolean")
    return s.rlike(like_regex(e.name, pattern, escape or None))


@_impl("abs")
def _abs(comp: SparkCompiler, e: Func) -> Any:
    return comp.c(e.args[0].abs())


@_impl("round")
def _round(comp: SparkCompiler, e: Func) -> Any:
    F = _F()
    x, t, rt = comp.c(e.args[0]), comp.t(e.args[0]), comp.t(e)
    n = int(_lit(e, 1)) if len(e.args) > 1 else 0  # type: ignore[call-overload]
    if t == fn.NULL:
        return F.lit(None)
    if t.is_float():  # DuckDB: round(x * 10^n) / 10^n, x itself when that is not finite
        x = x.cast("double")
        if n >= 0:
            m = float(10**n)
            r = F.round(x * m, 0) / m
            return F.when(F.isnan(r) | (F.abs(r) == float("inf")), x).otherwise(r)
        m = float(10**-n)
        r = F.round(x / m, 0) * m
        return F.when(F.isnan(r) | (F.abs(r) == float("inf")), 0.0).otherwise(r)
    if n >= 0 and fn.is_int(t):
        return x
    p, s = fn.dec_of(t)
    if n >= 0:
        return F.round(x, n).cast(spark_type(rt)) if n < s else x
    v = F.round(x.cast(dec_type(min(p + 1, 38), s)), n)  # HALF_UP: away from zero
    if fn.is_int(rt):
        lo, hi = INT_RANGE[rt]
        ok = (v >= F.lit(str(lo)).cast(dec_type(38, 0))) & (v <= F.lit(str(hi)).cast(dec_type(38, 0)))
    else:
        ok = dec_bound(v, p, 0)
    return checked(F.when(ok, v).cast(spark_type(rt)), ~ok, f"overflow in round({fn.sql_name(t)}, {n})", (x,))


@_impl("floor", "ceil")
def _floor(comp: SparkCompiler, e: Func) -> Any:
    F = _F()
    x, t, rt = comp.c(e.args[0]), comp.t(e.args[0]), comp.t(e)
    if fn.is_dec(t):
        return (F.floor(x) if e.name == "floor" else F.ceil(x)).cast(spark_type(rt))
    return float_floor(x.cast("double"), ceil=e.name == "ceil")


@_impl("sqrt", "ln", "log10", "exp")
def _math(comp: SparkCompiler, e: Func) -> Any:
    F = _F()
    x = comp.c(e.args[0]).cast("double")
    if e.name == "exp":
        return F.exp(x)
    if e.name == "sqrt":
        return checked(
            F.when(x >= 0, F.sqrt(x)).otherwise(x),
            x < 0,
            "cannot take square root of a negative number",
            (x,),
        )
    v = F.log(x) if e.name == "ln" else F.log10(x)
    return checked(
        F.when(x > 0, v).otherwise(x),
        x <= 0,
        f"{e.name}: cannot take logarithm of zero or a negative number",
        (x,),
    )


@_impl("power")
def _power(comp: SparkCompiler, e: Func) -> Any:
    a, b = (x.cast("double") for x in _args(comp, e))
    return _F().pow(a, b)


@_impl("sign")
def _sign(comp: SparkCompiler, e: Func) -> Any:
    F = _F()
    x = comp.c(e.args[0])
    if fn.is_dec(comp.t(e.args[0])):
        return F.when(x > 0, 1).when(x < 0, -1).when(x == 0, 0).cast("byte")
    x = x.cast("double")
    return F.when(F.isnan(x), 0).otherwise(F.signum(x)).cast("byte")


def _ts(comp: SparkCompiler, a: Any) -> Any:
    x = comp.c(a)
    return x if comp.t(a) == pl.Datetime("us") else x.cast(spark_type(pl.Datetime("us")))


def micros_of_second(x: Any) -> Any:
    """The microseconds of a TIMESTAMP's second (0..999999)."""
    return _F().date_format(x, "SSSSSS").cast("long")


def epoch_micros(x: Any) -> Any:
    """Microseconds since 1970-01-01 of a TIMESTAMP (exact, whatever the session's time zone)."""
    F = _F()
    days = F.datediff(F.to_date(x), F.lit("1970-01-01").cast("date")).cast("long")
    return (
        days * 86_400_000_000
        + F.hour(x).cast("long") * 3_600_000_000
        + F.minute(x).cast("long") * 60_000_000
        + F.second(x).cast("long") * 1_000_000
        + micros_of_second(x)
    )


@_impl("extract")
def _extract(comp: SparkCompiler, e: Func) -> Any:
    F = _F()
    part = str(_lit(e, 0)).lower()
    x = _ts(comp, e.args[1])
    if part == "epoch":
        return epoch_micros(x).cast("double") / 1e6
    f = {
        "year": F.year,
        "quarter": F.quarter,
        "month": F.month,
        "day": F.dayofmonth,
        "dayofweek": lambda v: F.dayofweek(v) - 1,
        "dow": lambda v: F.dayofweek(v) - 1,
        "dayofyear": F.dayofyear,
        "doy": F.dayofyear,
        "week": F.weekofyear,
        "hour": F.hour,
        "minute": F.minute,
        "second": F.second,
        "isodow": lambda v: (F.dayofweek(v) + 5) % 7 + 1,
        # DuckDB: the seconds and their fraction, in milli- or microseconds
        "millisecond": lambda v: F.second(v).cast("long") * 1000 + F.floor(micros_of_second(v) / 1000),
        "microsecond": lambda v: F.second(v).cast("long") * 1_000_000 + micros_of_second(v),
    }
    return f[part](x).cast("long")


@_impl("date_trunc")
def _date_trunc(comp: SparkCompiler, e: Func) -> Any:
    F = _F()
    part = str(_lit(e, 0)).lower()
    x = _ts(comp, e.args[1])
    return F.date_trunc(part, x).cast(spark_type(comp.t(e)))  # in UTC, the session's zone


@_impl("date_add")
def _date_add(comp: SparkCompiler, e: Func) -> Any:
    """d + INTERVAL: months first (the day clipped to the month's end), then days, then microseconds."""
    F = _F()
    x = _ts(comp, e.args[0])
    months, days, micros = (comp.c(a).cast("long") for a in e.args[1:])
    secs = micros.cast(dec_type(38, 0)) / F.lit(1_000_000).cast(dec_type(7, 0))
    iv = F.make_interval(
        F.lit(0),
        months.cast("int"),
        F.lit(0),
        days.cast("int"),
        F.lit(0),
        F.lit(0),
        secs.cast(dec_type(18, 6)),
    )
    return (x + iv).cast(spark_type(comp.t(e)))  # in UTC, the session's zone


from dbspark.engines.spark import bitfuncs as _bitfuncs  # noqa: E402, F401
from dbspark.engines.spark import timefuncs as _timefuncs  # noqa: E402, F401  (registers its functions)
