"""Spark SQL's functions in the Spark dialect: the ones whose DuckDB spelling computes what Spark computes,
the ones rewritten so that they do, and a clear refusal of every other one.

sqlglot reads each Spark function into a node that it writes in DuckDB's spelling; many of these compute
something else than Spark (`dayofweek` counts from 0 in DuckDB and from 1 in Spark, a CAST of a DOUBLE
to INT rounds in DuckDB and truncates in Spark, `sqrt(-1)` is an error in DuckDB and NaN in Spark, a
`date_format` pattern letter sqlglot does not know is copied into the strftime format). So a Spark
query's functions pass through `translate_functions`, bottom up: a function in `SAME` is kept (each is in
the catalog of `tests/test_spark_dialect.py`, checked against Spark SQL itself on both engines), one in
`REWRITES` is rewritten into DuckDB's constructs with Spark's meaning, and any other is an
UnsupportedError naming it and its line, never a silent difference.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from sqlglot import exp

from dbspark.frontends.sql.parse import Source, position

# Spark functions whose DuckDB translation (sqlglot's) gives Spark's result, NULLs and errors included
SAME: frozenset[type[exp.Expression]] = frozenset(
    {
        # strings
        exp.Upper, exp.Lower, exp.Length, exp.Substring, exp.Concat, exp.ConcatWs, exp.Replace,
        exp.StrPosition, exp.Left, exp.Right, exp.Reverse, exp.SplitPart, exp.RegexpExtract,
        exp.StartsWith, exp.EndsWith, exp.Contains,
        # numbers
        exp.Abs, exp.Greatest, exp.Least, exp.Exp, exp.Pow, exp.SafeDivide,
        # NULLs and conditions
        exp.Coalesce, exp.Nullif, exp.If, exp.Case, exp.Nvl2,
        # dates and times
        exp.Year, exp.Month, exp.Day, exp.DayOfMonth, exp.DayOfYear, exp.Quarter, exp.Hour, exp.Minute,
        exp.Second,
        # aggregates
        exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max, exp.Stddev, exp.StddevSamp, exp.StddevPop,
        exp.Variance, exp.VariancePop, exp.Median, exp.Grouping, exp.GroupingId, exp.LogicalAnd, exp.LogicalOr,
        exp.BitwiseAndAgg, exp.BitwiseOrAgg, exp.BitwiseXorAgg,
        # window functions
        exp.RowNumber, exp.Rank, exp.DenseRank, exp.PercentRank, exp.CumeDist, exp.Ntile, exp.Lag,
        exp.Lead, exp.FirstValue, exp.LastValue,
    }
)  # fmt: skip

# nodes sqlglot counts as functions that are syntax: kept
SYNTAX: frozenset[type[exp.Expression]] = frozenset({exp.And, exp.Or, exp.Exists})
Rewrite = Callable[[exp.Expression, Source], exp.Expression]
REWRITES: dict[type[exp.Expression], Rewrite] = {}
NAMED: dict[str, Rewrite] = {}  # functions sqlglot reads as Anonymous (its Spark reader has no node)


def rewrites(*keys: type[exp.Expression] | str) -> Callable[[Rewrite], Rewrite]:
    def deco(f: Rewrite) -> Rewrite:
        for k in keys:
            if isinstance(k, str):
                NAMED[k] = f
            else:
                REWRITES[k] = f
        return f

    return deco


def translate_functions(statement: exp.Expression, src: Source) -> exp.Expression:
    """`statement` with every Spark function kept, rewritten or refused (bottom up)."""
    for key, value in list(statement.args.items()):
        if isinstance(value, exp.Expression):
            statement.set(key, translate_functions(value, src))
        elif isinstance(value, list):
            statement.set(
                key, [translate_functions(v, src) if isinstance(v, exp.Expression) else v for v in value]
            )
    if not isinstance(statement, exp.Func) or type(statement) in SAME or type(statement) in SYNTAX:
        return statement
    if isinstance(statement, exp.Anonymous):
        name = str(statement.this).lower()
        if name in NAMED:
            return NAMED[name](statement, src)
    elif type(statement) in REWRITES:
        return REWRITES[type(statement)](statement, src)
    src.unsupported(
        f"the Spark function {spelled(statement, src)}() (not among the Spark dialect's functions)", statement
    )


def spelled(node: exp.Expression, src: Source) -> str:
    """The function's name as the text spells it (sqlglot records where a call's name is)."""
    meta = getattr(node, "_meta", None) or {}
    if "start" in meta and "end" in meta:
        return src.text[meta["start"] : meta["end"] + 1].lower()
    at = position(node)  # (a node sqlglot built: the name before its first argument)
    found = re.search(r"(\w+)\s*\(\s*$", src.text[:at]) if at is not None else None
    if found:
        return found.group(1).lower()
    if isinstance(node, exp.Func):
        return str(node.this if isinstance(node, exp.Anonymous) else node.sql_name()).lower()
    return type(node).__name__.lower()


def _num(v: int | float) -> exp.Expression:
    return exp.Literal.number(v)


def _call(name: str, *args: exp.Expression) -> exp.Anonymous:
    return exp.Anonymous(this=name, expressions=list(args))


def _case(cond: Any, then: exp.Expression, default: exp.Expression | None = None) -> exp.Case:
    return exp.Case(ifs=[exp.If(this=cond, true=then)], default=default)


def _literal(node: exp.Expression | None, what: str, src: Source, at: exp.Expression) -> str:
    if not isinstance(node, exp.Literal):
        src.unsupported(f"{what} that is not a constant", at)
    return str(node.this)


def _date(x: exp.Expression) -> exp.Expression:
    return exp.Cast(this=x, to=exp.DataType.build("DATE"))


# ---- numbers ------------------------------------------------------------------------------------------
INT_TYPES = {
    exp.DataType.Type.TINYINT: "TINYINT",
    exp.DataType.Type.SMALLINT: "SMALLINT",
    exp.DataType.Type.INT: "INT",
    exp.DataType.Type.BIGINT: "BIGINT",
}


@rewrites(exp.Cast)
def _cast(node: exp.Expression, src: Source) -> exp.Expression:
    """To an integer type: truncated, in the type's range (`ir.macros.spark_int_cast`); to a string: a
    TIMESTAMP without its zone (`spark_string_cast`)."""
    to = node.args["to"]
    if to.this in INT_TYPES:
        return _call("spark_int_cast", node.this, exp.Literal.string(INT_TYPES[to.this]))
    if to.this in (exp.DataType.Type.TEXT, exp.DataType.Type.VARCHAR):
        return _call("spark_string_cast", node.this)
    return node


@rewrites(exp.Round)
def _round(node: exp.Expression, src: Source) -> exp.Expression:
    return _call("spark_round", node.this, *([node.args["decimals"]] if node.args.get("decimals") else []))


@rewrites(exp.Floor, exp.Ceil)
def _floor_ceil(node: exp.Expression, src: Source) -> exp.Expression:
    """floor / ceil of a DOUBLE is a BIGINT in Spark (`spark_floor`, `spark_ceil`)."""
    if node.args.get("decimals") is not None:
        src.unsupported(f"{spelled(node, src)}() with a scale in Spark's dialect", node)
    return _call(f"spark_{type(node).__name__.lower()}", node.this)


@rewrites(exp.Sign)
def _sign(node: exp.Expression, src: Source) -> exp.Expression:
    """Spark's signum is a DOUBLE (of -0.0, -0.0)."""
    x = node.this
    double = exp.DataType.build("DOUBLE")
    zero = exp.EQ(this=x.copy(), expression=_num(0))
    return _case(zero, exp.Cast(this=x.copy(), to=double), exp.Cast(this=node, to=double))


@rewrites(exp.Sqrt)
def _sqrt(node: exp.Expression, src: Source) -> exp.Expression:
    """Spark's sqrt of a negative number is NaN (DuckDB's is an error); power(-1, 0.5) is NaN in both."""
    nan = exp.Pow(this=_num(-1.0), expression=_num(0.5))
    return _case(exp.LT(this=node.this.copy(), expression=_num(0)), nan, node)


@rewrites(exp.Ln)
def _ln(node: exp.Expression, src: Source) -> exp.Expression:
    """Spark's logarithm of a number <= 0 is NULL (DuckDB's is an error)."""
    return _case(exp.GT(this=node.this.copy(), expression=_num(0)), node)


@rewrites(exp.Log)
def _log(node: exp.Expression, src: Source) -> exp.Expression:
    """log10(x) as Spark's; log2(x) and log(b, x) as Spark computes them, ln(x) / ln(b); NULL where x or
    b is not positive."""
    base, x = node.this, node.expression
    if isinstance(base, exp.Literal) and base.this in ("10", 10):
        return _case(exp.GT(this=x.copy(), expression=_num(0)), _call("log10", x))
    positive = exp.and_(
        exp.GT(this=x.copy(), expression=_num(0)), exp.GT(this=base.copy(), expression=_num(0))
    )
    return _case(positive, exp.Div(this=exp.Ln(this=exp.paren(x)), expression=exp.Ln(this=exp.paren(base))))


@rewrites("pmod")
def _pmod(node: exp.Expression, src: Source) -> exp.Expression:
    """pmod(a, n): a % n, plus n where that is negative (then % n again), as Spark's `Pmod`."""
    a, n = node.expressions
    r = exp.paren(exp.Mod(this=exp.paren(a.copy()), expression=exp.paren(n.copy())))
    again = exp.Mod(
        this=exp.paren(exp.Add(this=r.copy(), expression=exp.paren(n.copy()))), expression=exp.paren(n)
    )
    return _case(exp.LT(this=r.copy(), expression=_num(0)), again, r)


@rewrites("isnull")
def _isnull(node: exp.Expression, src: Source) -> exp.Expression:
    return exp.Is(this=node.expressions[0], expression=exp.Null())


@rewrites("isnotnull")
def _isnotnull(node: exp.Expression, src: Source) -> exp.Expression:
    return exp.Not(this=exp.Is(this=node.expressions[0], expression=exp.Null()))


# ---- strings ------------------------------------------------------------------------------------------
@rewrites(exp.Trim)
def _trim(node: exp.Expression, src: Source) -> exp.Expression:
    if node.args.get("expression") is not None:
        src.unsupported("trim with characters in Spark's dialect", node)
    return node


# ---- dates and times ----------------------------------------------------------------------------------
@rewrites(exp.DayOfWeek)
def _dayofweek(node: exp.Expression, src: Source) -> exp.Expression:
    """Spark counts from 1 (Sunday), DuckDB from 0."""
    return exp.paren(exp.Add(this=node, expression=_num(1)))


@rewrites("weekday")
def _weekday(node: exp.Expression, src: Source) -> exp.Expression:
    """Spark's weekday: 0 for Monday .. 6 for Sunday."""
    dow = exp.DayOfWeek(this=_date(node.expressions[0]))
    return exp.paren(exp.Mod(this=exp.paren(exp.Add(this=dow, expression=_num(6))), expression=_num(7)))


@rewrites(exp.TsOrDsToDate)
def _to_date(node: exp.Expression, src: Source) -> exp.Expression:
    """to_date(x): a DATE as CAST reads it (ANSI: a string that is not a date is an error); with a
    pattern, refused."""
    if node.args.get("format") is not None:
        src.unsupported("to_date with a pattern in Spark's dialect (CAST(x AS DATE) reads yyyy-MM-dd)", node)
    return _date(node.this)


@rewrites(exp.TsOrDsAdd)
def _date_add(node: exp.Expression, src: Source) -> exp.Expression:
    """date_add(d, n) and date_sub(d, n): a DATE (d cast to one first), n days later or earlier."""
    return exp.paren(exp.Add(this=_date(node.this), expression=exp.paren(node.expression)))


@rewrites(exp.AddMonths)
def _add_months(node: exp.Expression, src: Source) -> exp.Expression:
    """add_months(d, n): a DATE, the day clamped to the month's last (as DuckDB's + INTERVAL)."""
    n = node.expression
    sign, lit = (-1, n.this) if isinstance(n, exp.Neg) else (1, n)
    if not (isinstance(lit, exp.Literal) and re.fullmatch(r"\d+", str(lit.this))):
        src.unsupported("add_months by a number of months that is not an integer constant", node)
    months = exp.Interval(this=exp.Literal.string(str(sign * int(lit.this))), unit=exp.Var(this="MONTH"))
    return _date(exp.Add(this=_date(node.this), expression=months))


@rewrites(exp.DateDiff)
def _datediff(node: exp.Expression, src: Source) -> exp.Expression:
    """datediff(end, start): the days from start to end, both read as DATEs."""
    days = exp.Sub(this=_call("epoch", _date(node.this)), expression=_call("epoch", _date(node.expression)))
    return exp.Cast(
        this=exp.Div(this=exp.paren(days), expression=_num(86400)), to=exp.DataType.build("BIGINT")
    )


@rewrites(exp.LastDay)
def _last_day(node: exp.Expression, src: Source) -> exp.Expression:
    first = exp.TimestampTrunc(this=_date(node.this), unit=exp.Var(this="MONTH"))
    month_on = exp.Add(this=first, expression=exp.Interval(this=_num(1), unit=exp.Var(this="MONTH")))
    return _date(exp.Sub(this=month_on, expression=exp.Interval(this=_num(1), unit=exp.Var(this="DAY"))))


# Spark's units of trunc(date, unit) and date_trunc(unit, timestamp), as DuckDB's date parts
DATE_UNITS = {
    "year": "year", "yyyy": "year", "yy": "year", "quarter": "quarter", "month": "month", "mon": "month",
    "mm": "month", "week": "week",
}  # fmt: skip
TIME_UNITS = {
    **DATE_UNITS, "day": "day", "dd": "day", "hour": "hour", "minute": "minute", "second": "second",
    "millisecond": "millisecond", "microsecond": "microsecond",
}  # fmt: skip


def _unit(node: exp.Expression, units: dict[str, str], src: Source) -> str:
    unit = node.args.get("unit")
    text = str(unit.this if isinstance(unit, (exp.Var, exp.Literal)) else "").lower()
    if text not in units:
        src.unsupported(
            f"the unit {text or unit!r} of {spelled(node, src)}() (Spark's: {sorted(units)})", node
        )
    return units[text]


@rewrites(exp.DateTrunc)
def _trunc(node: exp.Expression, src: Source) -> exp.Expression:
    """trunc(date, unit): a DATE."""
    unit = _unit(node, DATE_UNITS, src)
    return _date(exp.TimestampTrunc(this=_date(node.this), unit=exp.Var(this=unit.upper())))


@rewrites(exp.TimestampTrunc)
def _date_trunc(node: exp.Expression, src: Source) -> exp.Expression:
    """date_trunc(unit, t): a TIMESTAMP."""
    unit = _unit(node, TIME_UNITS, src)
    return exp.TimestampTrunc(this=node.this, unit=exp.Var(this=unit.upper()))


# Spark's datetime pattern letters (java.time's, as Spark 3+ reads them) as DuckDB's strftime specifiers
PATTERN = {
    "yyyy": "%Y", "yy": "%y", "y": "%Y", "MMMM": "%B", "MMM": "%b", "MM": "%m", "M": "%-m", "dd": "%d",
    "d": "%-d", "DDD": "%j", "D": "%-j", "HH": "%H", "H": "%-H", "hh": "%I", "h": "%-I", "mm": "%M",
    "m": "%-M", "ss": "%S", "s": "%-S", "SSSSSS": "%f", "SSS": "%g", "a": "%p", "EEEE": "%A", "EEE": "%a",
}  # fmt: skip


def strftime_pattern(pattern: str) -> str | None:
    """A Spark datetime pattern as a strftime format, or None if it has a letter (run) not in `PATTERN`."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "'":  # quoted text; '' is a quote
            j = pattern.find("'", i + 1)
            if j < 0:
                return None
            out.append(pattern[i + 1 : j].replace("%", "%%") if j > i + 1 else "'")
            i = j + 1
        elif c.isalpha():
            run = re.match(rf"{re.escape(c)}+", pattern[i:])
            assert run is not None
            if run.group() not in PATTERN:
                return None
            out.append(PATTERN[run.group()])
            i += len(run.group())
        else:
            out.append("%%" if c == "%" else c)
            i += 1
    return "".join(out)


@rewrites("date_format")
def _date_format(node: exp.Expression, src: Source) -> exp.Expression:
    value, pattern = node.expressions
    text = _literal(pattern, "date_format with a pattern", src, node)
    fmt = strftime_pattern(text)
    if fmt is None:
        src.unsupported(
            f"the date_format pattern {text!r} (Spark's dialect reads the letters {sorted(PATTERN)})", node
        )
    stamp = exp.Cast(this=value, to=exp.DataType.build("TIMESTAMP"))
    return exp.TimeToStr(this=stamp, format=exp.Literal.string(fmt))
