"""`epoch_ms` / `epoch_us`, `strftime`, `strptime` / `try_strptime` on the local engine (Polars).

A format is read once (`dbspark.columnar.strformat`) and built from the value's fields, never through
chrono's strftime / strptime, so that both engines write and read exactly DuckDB's forms.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from dbspark.columnar import strformat as sf
from dbspark.engines.local.casts import _valid_date
from dbspark.engines.local.exprs import checked
from dbspark.engines.local.sqlfuncs import _datetime, _impl, _lit
from dbspark.ir import functions as fn
from dbspark.ir.expr import Func

if TYPE_CHECKING:
    from dbspark.engines.local.exprs import Compiler, Guard


@_impl("epoch_ms", "epoch_us")
def _epoch(comp: Compiler, e: Func, g: Guard) -> pl.Expr:
    us = _datetime(comp, e.args[0], g).dt.epoch("us")
    if e.name == "epoch_us":
        return us
    ms = us // 1000  # floor; DuckDB truncates toward zero
    return pl.when((us < 0) & (us % 1000 != 0)).then(ms + 1).otherwise(ms)


def _fields(x: pl.Expr) -> dict[str, pl.Expr]:
    d = x.dt
    us = d.microsecond().cast(pl.Int64)
    h = d.hour().cast(pl.Int64)
    return {
        "year": d.year().cast(pl.Int64),
        "year2": d.year().cast(pl.Int64) % 100,
        "month": d.month().cast(pl.Int64),
        "day": d.day().cast(pl.Int64),
        "hour": h,
        "hour12": (h + 11) % 12 + 1,
        "minute": d.minute().cast(pl.Int64),
        "second": d.second().cast(pl.Int64),
        "micros": us,
        "millis": us // 1000,
        "doy": d.ordinal_day().cast(pl.Int64),
        "dow": d.weekday().cast(pl.Int64) % 7,
        "isodow": d.weekday().cast(pl.Int64),
    }


def _name(idx: pl.Expr, names: list[str], length: int, first: int) -> pl.Expr:
    out = pl.lit(None, dtype=pl.String)
    for k, n in enumerate(names):
        out = pl.when(idx == k + first).then(pl.lit(n[:length] if length else n)).otherwise(out)
    return out


@_impl("strftime")
def _strftime(comp: Compiler, e: Func, g: Guard) -> pl.Expr:
    x = _datetime(comp, e.args[0], g)
    f = _fields(x)
    pieces: list[pl.Expr] = []
    for t in sf.tokens(str(_lit(e, 1)), "strftime", zone=fn.is_tz(comp.t(e.args[0]))):
        if isinstance(t, str):
            pieces.append(pl.lit(t))
        elif t.code == "p":
            pieces.append(pl.when(f["hour"] < 12).then(pl.lit("AM")).otherwise(pl.lit("PM")))
        elif t.code in sf.NAMES:
            field, length, names = sf.NAMES[t.code]
            pieces.append(_name(f[field], names, length, 0 if field == "dow" else 1))
        else:
            field, width = sf.NUMERIC[t.code]
            v = f[field].cast(pl.String)
            pieces.append(v.str.zfill(width) if t.pad and width else v)
    if not pieces:
        return pl.when(x.is_not_null()).then(pl.lit(""))
    return pl.concat_str([pl.when(x.is_not_null()).then(pl.lit("")), *pieces])


@_impl("strptime", "try_strptime")
def _strptime(comp: Compiler, e: Func, g: Guard) -> pl.Expr:
    plan = sf.parse_plan(str(_lit(e, 1)), e.name)
    x = comp.c(e.args[0], g)

    def build(c: list[pl.Expr]) -> tuple[pl.Expr, pl.Expr | None]:
        s = c[0]
        m = s.str.extract_groups(plan.regex)

        def num(code: str, default: int) -> pl.Expr:
            if code not in plan.groups:
                return pl.lit(default, dtype=pl.Int64)
            return m.struct.field(str(plan.groups[code])).cast(pl.Int64, strict=False).fill_null(0)

        def frac(code: str) -> pl.Expr:
            if code not in plan.groups:
                return pl.lit(0, dtype=pl.Int64)
            text = m.struct.field(str(plan.groups[code])).fill_null("0")
            return text.str.pad_end(6, "0").cast(pl.Int64, strict=False).fill_null(0)

        y = num("Y", 1900)
        if "y" in plan.groups:
            yy = num("y", 0)
            y = pl.when(yy >= 69).then(yy + 1900).otherwise(yy + 2000)
        mo, d, mi, sec = num("m", 1), num("d", 1), num("M", 0), num("S", 0)
        us = frac("f") + frac("g")
        hour_ok = pl.lit(True)
        if "I" in plan.groups:
            i12 = num("I", 12)
            hour_ok = (i12 >= 1) & (i12 <= 12)
            h = i12 % 12
            if "p" in plan.groups:
                pm = m.struct.field(str(plan.groups["p"])).str.to_uppercase() == "PM"
                h = h + pl.when(pm).then(12).otherwise(0)
        else:
            h = num("H", 0)
            hour_ok = h < 24
        matched = s.str.contains(plan.regex)
        ok = (matched & _valid_date(y, mo, d) & hour_ok & (mi < 60) & (sec < 60)).fill_null(False)
        y, mo, d = (pl.when(ok).then(v).otherwise(1) for v in (y, mo, d))
        h, mi, sec, us = (pl.when(ok).then(v).otherwise(0) for v in (h, mi, sec, us))
        v = pl.when(ok).then(pl.datetime(y, mo, d, h, mi, sec, us, time_unit="us"))
        # year 0 is 1 BC in DuckDB, a value dbspark does not hold: refused, also by try_strptime
        bc = (matched & (y == 0)).fill_null(False) if "Y" in plan.groups else pl.lit(False)
        return v, (bc if e.name == "try_strptime" else (s.is_not_null() & ~ok) | bc)

    fmt = str(_lit(e, 1))
    return checked([x], build, pl.Datetime("us"), g, f"{e.name}: {sf.BAD_TEXT.format(fmt=fmt)}")
