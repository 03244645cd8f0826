"""`epoch_ms` / `epoch_us`, `strftime`, `strptime` / `try_strptime` on the Spark engine, as on the local
engine (`engines/local/timefuncs.py`): a format read once (`dbspark.columnar.strformat`), the text
built from the value's fields and parsed by one regular expression, never by Java's date patterns."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dbspark.columnar import strformat as sf
from dbspark.engines.spark.casts import dec_type, valid_date
from dbspark.engines.spark.exprs import _F, checked
from dbspark.engines.spark.sqlfuncs import _impl, _lit, _ts, epoch_micros, micros_of_second
from dbspark.ir import functions as fn
from dbspark.ir.expr import Func

if TYPE_CHECKING:
    from dbspark.engines.spark.exprs import SparkCompiler


@_impl("epoch_ms", "epoch_us")
def _epoch(comp: SparkCompiler, e: Func) -> Any:
    us = epoch_micros(_ts(comp, e.args[0]))
    if e.name == "epoch_us":
        return us
    # toward zero, as DuckDB: the remainder takes the dividend's sign, the quotient of a multiple is exact
    return ((us - us % 1000).cast(dec_type(20, 0)) / 1000).cast("long")


def _fields(x: Any) -> dict[str, Any]:
    F = _F()
    us = micros_of_second(x)
    h = F.hour(x).cast("long")
    return {
        "year": F.year(x).cast("long"),
        "year2": F.year(x).cast("long") % 100,
        "month": F.month(x).cast("long"),
        "day": F.dayofmonth(x).cast("long"),
        "hour": h,
        "hour12": (h + 11) % 12 + 1,
        "minute": F.minute(x).cast("long"),
        "second": F.second(x).cast("long"),
        "micros": us,
        "millis": F.floor(us / 1000).cast("long"),
        "doy": F.dayofyear(x).cast("long"),
        "dow": (F.dayofweek(x) - 1).cast("long"),
        "isodow": ((F.dayofweek(x) + 5) % 7 + 1).cast("long"),
    }


@_impl("strftime")
def _strftime(comp: SparkCompiler, e: Func) -> Any:
    F = _F()
    x = _ts(comp, e.args[0])
    f = _fields(x)
    pieces: list[Any] = [F.when(x.isNotNull(), F.lit(""))]
    for t in sf.tokens(str(_lit(e, 1)), "strftime", zone=fn.is_tz(comp.t(e.args[0]))):
        if isinstance(t, str):
            pieces.append(F.lit(t))
        elif t.code == "p":
            pieces.append(F.when(f["hour"] < 12, F.lit("AM")).otherwise(F.lit("PM")))
        elif t.code in sf.NAMES:
            field, length, names = sf.NAMES[t.code]
            arr = F.array(*(F.lit(n[:length] if length else n) for n in names))
            pieces.append(F.element_at(arr, (f[field] + (1 if field == "dow" else 0)).cast("int")))
        else:
            field, width = sf.NUMERIC[t.code]
            v = f[field].cast("string")
            if t.pad and width:  # lpad would cut a longer value (a year after 9999)
                v = F.when(F.length(v) < width, F.lpad(v, width, "0")).otherwise(v)
            pieces.append(v)
    return F.concat(*pieces)


@_impl("strptime", "try_strptime")
def _strptime(comp: SparkCompiler, e: Func) -> Any:
    F = _F()
    fmt = str(_lit(e, 1))
    plan = sf.parse_plan(fmt, e.name)
    s = comp.c(e.args[0])

    def group(code: str) -> Any:
        return F.regexp_extract(s, plan.regex, plan.groups[code])

    def num(code: str, default: int) -> Any:
        if code not in plan.groups:
            return F.lit(default).cast("long")
        g = group(code)
        return F.when(g == "", 0).otherwise(g.cast("long"))

    def frac(code: str) -> Any:
        if code not in plan.groups:
            return F.lit(0).cast("long")
        g = group(code)
        return F.when(g == "", 0).otherwise(F.rpad(g, 6, "0").cast("long"))

    y = num("Y", 1900)
    if "y" in plan.groups:
        yy = num("y", 0)
        y = F.when(yy >= 69, yy + 1900).otherwise(yy + 2000)
    mo, d, mi, sec = num("m", 1), num("d", 1), num("M", 0), num("S", 0)
    us = frac("f") + frac("g")
    if "I" in plan.groups:
        i12 = num("I", 12)
        hour_ok = (i12 >= 1) & (i12 <= 12)
        h = i12 % 12
        if "p" in plan.groups:
            h = h + F.when(F.upper(group("p")) == "PM", 12).otherwise(0)
    else:
        h = num("H", 0)
        hour_ok = h < 24
    ok = s.rlike(plan.regex) & valid_date(y, mo, d) & hour_ok & (mi < 60) & (sec < 60)
    micros = (sec * 1_000_000 + us).cast(dec_type(14, 0))
    secs = micros / F.lit(1_000_000).cast(dec_type(7, 0))
    v = F.when(
        ok,
        F.make_timestamp_ntz(
            y.cast("int"),
            mo.cast("int"),
            d.cast("int"),
            h.cast("int"),
            mi.cast("int"),
            secs.cast(dec_type(8, 6)),
        ),
    )
    # year 0 is 1 BC in DuckDB, a value dbspark does not hold: refused, also by try_strptime
    bc = (s.rlike(plan.regex) & (y == 0)) if "Y" in plan.groups else F.lit(False)
    bad = bc if e.name == "try_strptime" else (s.isNotNull() & ~ok) | bc
    return checked(F.when(~bad, v), bad, f"{e.name}: {sf.BAD_TEXT.format(fmt=fmt)}", (s,))
