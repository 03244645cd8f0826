"""Date and time SQL in DuckDB's spellings, as the IR's `extract` / `date_trunc` / `epoch_*` /
`strftime` / `strptime` (`dbspark.ir.functions`, `dbspark.ir.timefuncs`).

DuckDB names a date part in many ways ('hours', 'hr', 'h', 'ms', 'usec', ...); they are read here into
one name per part. `hour(ts)`, `year(ts)`, ... and `date_part('hour', ts)` are `extract`; `epoch(ts)` is
`extract(epoch FROM ts)`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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


HANDLERS: dict[type, Any] = {
    exp.Extract: extract,
    exp.TimestampTrunc: trunc,
    exp.DateTrunc: trunc,
    exp.TimeToUnix: epoch,
    exp.UnixToTime: unix_to_time,
    exp.TimeToStr: strftime,
    exp.StrToTime: strptime,
    **{t: field for t in _FIELD_FUNCS},
}
