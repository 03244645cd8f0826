"""Date and time SQL in DuckDB's spellings, as the IR's `extract` / `date_trunc` / `epoch_*` /
`strftime` / `strptime` (`dbspark.ir.functions`, `dbspark.ir.timefuncs`).

DuckDB names a date part in many ways ('hours', 'hr', 'h', 'ms', 'usec', ...); they are read here into
one name per part. `hour(ts)`, `year(ts)`, ... and `date_part('hour', ts)` are `extract`; `epoch(ts)` is
`extract(epoch FROM ts)`.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

import polars as pl
from sqlglot import exp

from dbspark.ir import expr as ir

if TYPE_CHECKING:
    from dbspark.frontends.sql.exprs import ExprCompiler

_ALIASES = {
    "year": ("y", "yr", "yrs", "years"),
    "month": ("mon", "mons", "months"),
    "day": ("d", "days", "dayofmonth"),
    "week": ("w", "weeks", "weekofyear"),
    "quarter": ("quarters",),
    "hour": ("h", "hr", "hrs", "hours"),
    "minute": ("m", "min", "mins", "minutes"),
    "second": ("s", "sec", "secs", "seconds"),
    "millisecond": ("ms", "msec", "msecs", "milliseconds"),
    "microsecond": ("us", "usec", "usecs", "microseconds"),
    "dow": ("weekday", "dayofweek"),
    "doy": ("dayofyear",),
}
PARTS = {a: p for p, names in _ALIASES.items() for a in names}
# date_trunc to a day-of-week or day-of-year part is to the day (DuckDB)
TRUNC_DAY = {"dow", "doy", "isodow"}
_FIELD_FUNCS: dict[type, str] = {
    exp.Year: "year",
    exp.Month: "month",
    exp.Day: "day",
    exp.DayOfMonth: "day",
    exp.Hour: "hour",
    exp.Minute: "minute",
    exp.Second: "second",
    exp.DayOfWeek: "dow",
    exp.DayOfYear: "doy",
    exp.Week: "week",
    exp.WeekOfYear: "week",
    exp.Quarter: "quarter",
}
# functions written by name (sqlglot keeps them Anonymous): the extract part they are
NAMED_PARTS = {
    "millisecond": "millisecond",
    "microsecond": "microsecond",
    "isodow": "isodow",
    "dayofmonth": "day",
}


def part_name(name: str) -> str:
    p = name.lower()
    return PARTS.get(p, p)


def trunc_part(name: str) -> str:
    p = part_name(name)
    return "day" if p in TRUNC_DAY else p


def extract(c: ExprCompiler, node: exp.Extract) -> ir.Expr:
    return ir.Func("extract", (ir.Lit(part_name(node.this.name)), c.compile(node.expression)))


def trunc(c: ExprCompiler, node: exp.Expression) -> ir.Expr:
    return ir.Func("date_trunc", (ir.Lit(trunc_part(node.args["unit"].name)), c.compile(node.this)))


def field(c: ExprCompiler, node: exp.Expression) -> ir.Expr:
    return ir.Func("extract", (ir.Lit(_FIELD_FUNCS[type(node)]), c.compile(node.this)))


def epoch(c: ExprCompiler, node: exp.TimeToUnix) -> ir.Expr:
    return ir.Func("extract", (ir.Lit("epoch"), c.compile(node.this)))


def unix_to_time(c: ExprCompiler, node: exp.UnixToTime) -> ir.Expr:
    """sqlglot reads DuckDB's epoch_ms(x) as a TIMESTAMP from milliseconds; of a DATE or TIMESTAMP it is
    the count of milliseconds (the IR's `epoch_ms` types both, refusing the integer form)."""
    scale = node.args.get("scale")
    if isinstance(scale, exp.Literal) and scale.this == "3":
        return ir.Func("epoch_ms", (c.compile(node.this),))
    c.src.unsupported(f"function {node.sql(dialect='duckdb')[:60]} (a TIMESTAMP from an epoch count)", node)


def strftime(c: ExprCompiler, node: exp.TimeToStr) -> ir.Expr:
    return ir.Func("strftime", (c.compile(node.this), c.compile(node.args["format"])))


def strptime(c: ExprCompiler, node: exp.StrToTime) -> ir.Expr:
    return ir.Func("strptime", (c.compile(node.this), c.compile(node.args["format"])))


def named(c: ExprCompiler, name: str, args: list[exp.Expression], node: exp.Expression) -> ir.Expr | None:
    """A date function written by name that is another IR function, or None."""
    if name in ("date_part", "datepart") and len(args) == 2:
        part = args[0]
        if not (isinstance(part, exp.Literal) and part.is_string):
            c.src.unsupported(f"{name} with a part that is not a string constant", node)
        return ir.Func("extract", (ir.Lit(part_name(part.this)), c.compile(args[1])))
    if name in NAMED_PARTS and len(args) == 1:
        return ir.Func("extract", (ir.Lit(NAMED_PARTS[name]), c.compile(args[0])))
    if name == "epoch" and len(args) == 1:
        return ir.Func("extract", (ir.Lit("epoch"), c.compile(args[0])))
    return None


DAY_US = 86_400_000_000
EPOCH_2000_01_03_US = 946_857_600_000_000  # DuckDB's default origin of buckets of days and time (a Monday)


def time_bucket(c: ExprCompiler, node: exp.DateBin) -> ir.Expr:
    """DuckDB's `time_bucket(width, ts[, origin | offset])`: the start of the tumbling window of `width`
    holding ts. Buckets of months (and years) count months from 2000-01 (or the origin's month); others
    count the width in microseconds from 2000-01-03 (or the origin), shifted by an offset; a DATE gives a
    DATE, a TIMESTAMP a TIMESTAMP, NULL a NULL."""
    from dbspark.frontends.sql.exprs import interval  # (exprs imports this module)

    width, third = node.this, node.args.get("unit")
    if not isinstance(width, exp.Interval):
        c.src.unsupported("time_bucket whose width is not a constant INTERVAL", node)
    months, days, micros = interval(width, c.src)
    if months and (days or micros):
        c.src.unsupported("time_bucket of an interval of months with days or time in it", node)
    if months < 0 or days * DAY_US + micros < 0 or not (months or days or micros):
        c.src.schema_error("time_bucket: the width must be positive", width)
    x = c.compile(node.expression)
    if c.schema is None:
        c.src.unsupported("time_bucket here (its type is not known in this position)", node)
    is_date = x.dtype(c.schema) == pl.Date()
    ts = ir.Cast(x, pl.Datetime("us")) if is_date else x
    shift_us, origin = 0, None
    if isinstance(third, exp.Interval):
        m, d, u = interval(third, c.src)
        if m:
            c.src.unsupported("time_bucket with an offset of months", third)
        shift_us = d * DAY_US + u
    elif third is not None:
        origin = c.compile(third)
    if months:
        base = dt.datetime(2000, 1, 1)
        month_of = (
            (ir.Func("extract", (ir.Lit("year"), ts)) - ir.Lit(2000)) * ir.Lit(12)
            + ir.Func("extract", (ir.Lit("month"), ts))
            - ir.Lit(1)
        )
        if origin is not None:
            month_of = month_of - (
                (ir.Func("extract", (ir.Lit("year"), origin)) - ir.Lit(2000)) * ir.Lit(12)
                + ir.Func("extract", (ir.Lit("month"), origin))
                - ir.Lit(1)
            )
        start: ir.Expr = ir.Func(
            "date_add",
            (_origin(origin, base), floor_div(month_of, months) * ir.Lit(months), ir.Lit(0), ir.Lit(0)),
        )
        if origin is not None:  # (the origin's month, from its first day)
            start = ir.Func("date_trunc", (ir.Lit("month"), start))
    else:
        w = days * DAY_US + micros
        base_us = EPOCH_2000_01_03_US + shift_us
        since = ir.Func("epoch_us", (ts,)) - (
            ir.Func("epoch_us", (origin,)) if origin is not None else ir.Lit(base_us)
        )
        anchor = _origin(origin, dt.datetime(2000, 1, 3) + dt.timedelta(microseconds=shift_us))
        start = ir.Func("date_add", (anchor, ir.Lit(0), ir.Lit(0), floor_div(since, w) * ir.Lit(w)))
    return ir.Cast(start, pl.Date()) if is_date else start


def _origin(origin: ir.Expr | None, default: Any) -> ir.Expr:
    return origin if origin is not None else ir.Lit(default)


def floor_div(x: ir.Expr, w: int) -> ir.Expr:
    """x // w rounded toward minus infinity (`int_div` truncates toward zero)."""
    q = ir.Binary("int_div", x, ir.Lit(w))
    return ir.Case(((ir.Binary("lt", ir.Binary("sql_mod", x, ir.Lit(w)), ir.Lit(0)), q - ir.Lit(1)),), q)


HANDLERS: dict[type, Any] = {
    exp.DateBin: time_bucket,
    exp.Extract: extract,
    exp.TimestampTrunc: trunc,
    exp.DateTrunc: trunc,
    exp.TimeToUnix: epoch,
    exp.UnixToTime: unix_to_time,
    exp.TimeToStr: strftime,
    exp.StrToTime: strptime,
    **{t: field for t in _FIELD_FUNCS},
}
