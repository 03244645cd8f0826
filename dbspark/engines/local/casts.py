"""SQL CAST on the local engine, as DuckDB casts: a value that does not convert is a DataError.

Rounding follows DuckDB: DECIMAL -> integer or a smaller scale rounds half away from zero; DOUBLE ->
integer rounds half to even (nearbyint); DOUBLE -> DECIMAL rounds x * 10^s half away from zero.
Strings parse with a fixed grammar, the same on the Spark engine (`engines/spark/casts.py`): integers
and decimals `[+-]digits[.digits]` with surrounding spaces (a fraction rounds), doubles also with an
exponent (no 'inf' or 'nan'), booleans true/t/yes/y/1 and false/f/no/n/0, timestamps
`YYYY-M-D[( |T)H:M[:S[.f]]]` and dates of the same form (a time part must be valid and is dropped).
Forms DuckDB accepts beyond these ('1e3' or '0x10' as an integer) are errors, never a different value.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from dbspark.columnar.sqlforms import BOOL_FALSE, BOOL_TRUE, DATE_RE, FLOAT_RE, NUM_RE, TS_RE, TSTZ_RE
from dbspark.engines.local.exprs import INT_RANGE, checked, dec_fits, from_unscaled, unscaled
from dbspark.errors import UnsupportedError
from dbspark.ir import functions as fn

if TYPE_CHECKING:
    from dbspark.engines.local.exprs import Compiler, Guard


def parse_number(x: pl.Expr, s: int) -> tuple[pl.Expr, pl.Expr]:
    """(Int128 unscaled value at scale s rounded half away from zero, ok) of a numeric string."""
    m = x.str.extract_groups(NUM_RE)
    sign, ip, fp = m.struct.field("1"), m.struct.field("2"), m.struct.field("3").fill_null("")
    ok = x.str.contains(NUM_RE) & ((ip.str.len_chars() > 0) | (fp.str.len_chars() > 0))
    ip = ip.str.replace(r"^0+", "")
    ok = ok & (ip.str.len_chars() + s <= 37)
    digits = pl.when(ip == "").then(pl.lit("0")).otherwise(ip) + (fp + "0" * (s + 1)).str.slice(0, s)
    u = pl.when(ok).then(digits).otherwise(pl.lit("0")).cast(pl.Int128, strict=False)
    rnd = (fp + "0" * (s + 1)).str.slice(s, 1).cast(pl.Int8, strict=False).fill_null(0) >= 5
    u = (u + rnd.cast(pl.Int128)) * pl.when(sign == "-").then(-1).otherwise(1).cast(pl.Int128)
    return u, ok


def days_in_month(y: pl.Expr, m: pl.Expr) -> pl.Expr:
    leap = ((y % 4 == 0) & (y % 100 != 0)) | (y % 400 == 0)
    base = pl.when(m == 2).then(28).when(m.is_in([4, 6, 9, 11])).then(30).otherwise(31)
    return base + (leap & (m == 2)).cast(pl.Int32)


def _valid_date(y: pl.Expr, m: pl.Expr, d: pl.Expr) -> pl.Expr:
    return (m >= 1) & (m <= 12) & (d >= 1) & (d <= days_in_month(y, m)) & (y >= 1)


def cast(comp: Compiler, x: pl.Expr, src: pl.DataType, to: pl.DataType, g: Guard) -> pl.Expr:
    """CAST(x AS to) for x of type src; a value that does not convert raises DataError."""
    fn.check_cast(src, to)
    if src == to:
        return x
    if fn.kind(src) == "null":  # NULL; an expression of the NULL type is still evaluated (error())
        return pl.lit(None, dtype=to) if x.meta.is_literal() else x.cast(to)

    def build(c: list[pl.Expr]) -> tuple[pl.Expr, pl.Expr | None]:
        value, bad = _body(c[0], src, to)
        if bad is None:
            return value, None
        return pl.when(c[0].is_not_null()).then(value), c[0].is_not_null() & bad

    return checked([x], build, to, g, f"CAST from {fn.sql_name(src)} to {fn.sql_name(to)} failed")


def _body(x: pl.Expr, src: pl.DataType, to: pl.DataType) -> tuple[pl.Expr, pl.Expr | None]:
    """(value, faulty-rows mask or None) of the cast of x."""
    ks, kt = fn.kind(src), fn.kind(to)
    if kt == "bool":
        if ks == "string":
            v = x.str.to_lowercase()
            ok = v.is_in(BOOL_TRUE + BOOL_FALSE)
            return v.is_in(BOOL_TRUE), ~ok
        return x != 0, None
    if kt == "int":
        if ks in ("int", "bool"):
            if ks == "int":
                lo, hi = INT_RANGE[to]
                return x.cast(to, strict=False), (x < lo) | (x > hi)
            return x.cast(to), None
        if ks == "float":
            r = x.round(0, mode="half_to_even")
            lo, hi = INT_RANGE[to]
            ok = r.is_finite() & (r >= lo) & (r <= hi)  # 2**63 as a double is out of range
            ok = ok & (r < float(hi) + 1)
            return pl.when(ok).then(r).cast(to, strict=False), ~ok
        lo, hi = INT_RANGE[to]
        if ks == "decimal":
            # far out of range values first (rounding 99...9.99 of DECIMAL(38, s) overflows Polars' decimal)
            bound = pl.lit((2**63 + 1) * 10 ** fn.dec_of(src)[1], dtype=pl.Int128)
            near = x.to_physical().abs() < bound
            xs = pl.when(near).then(x).otherwise(pl.lit(0).cast(src))
            u = xs.round(0, mode="half_away_from_zero").cast(pl.Decimal(38, 0)).to_physical()
            ok0 = near
        else:  # string
            u, ok0 = parse_number(x, 0)
        ok = (u >= lo) & (u <= hi) & ok0
        return pl.when(ok).then(u).cast(to, strict=False), ~ok
    if kt == "decimal":
        p, s = fn.dec_of(to)
        if ks in ("int", "decimal"):
            ss = fn.dec_of(src)[1]
            u = unscaled(x.round(s, mode="half_away_from_zero") if ss > s else x, max(s, ss))
            if ss > s:
                u = u // pl.lit(10 ** (ss - s), dtype=pl.Int128)  # exact: the digits below s are zero
            ok = dec_fits(u, p)
        elif ks == "float":
            y = (x * float(10**s)).round(0, mode="half_away_from_zero")
            ok = y.is_finite() & (y.abs() < float(10**p))
            u = pl.when(ok).then(y).otherwise(0.0).cast(pl.Int128)
        else:
            u, ok = parse_number(x, s)
            ok = ok & dec_fits(u, p)
        return from_unscaled(pl.when(ok).then(u).otherwise(0), p, s), ~ok
    if kt == "float":
        if ks == "string":
            v = x.str.strip_chars(" ").cast(pl.Float64, strict=False)
            return v, v.is_null() | ~x.str.contains(FLOAT_RE)  # no 'inf' / 'nan' (as on Spark)
        return x.cast(pl.Float64), None
    if kt == "string":
        if ks == "bool":
            return pl.when(x).then(pl.lit("true")).when(~x).then(pl.lit("false")), None
        if ks == "date":
            return x.dt.strftime("%Y-%m-%d"), None
        if ks == "datetime":
            us = x.dt.microsecond()
            frac = (
                pl.when(us == 0)
                .then(pl.lit(""))
                .otherwise(("." + us.cast(pl.String).str.zfill(6)).str.strip_chars_end("0"))
            )
            text = x.dt.strftime("%Y-%m-%d %H:%M:%S") + frac
            return (text + "+00" if fn.is_tz(src) else text), None  # DuckDB shows the UTC offset
        if ks == "decimal" and fn.dec_of(src)[0] == fn.dec_of(src)[1]:  # DuckDB: DECIMAL(p,p) has no "0."
            return x.cast(pl.String).str.replace(r"^(-?)0\.", "$1."), None
        return x.cast(pl.String), None
    if kt == "date":
        if ks == "datetime":
            return x.dt.date(), None
        return _parse_date(x)
    if kt == "datetime":
        if ks in ("date", "datetime"):  # a TIMESTAMP is a TIMESTAMPTZ in UTC, and back
            return x.cast(to), None
        if fn.is_tz(to):
            return _parse_timestamptz(x)
        return _parse_timestamp(x)
    raise UnsupportedError(f"CAST from {fn.sql_name(src)} to {fn.sql_name(to)}")  # unreachable: check_cast


def _parse_date(x: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """(DATE, faulty mask) of a string in DuckDB's DATE form (`DATE_RE`)."""
    m = x.str.extract_groups(DATE_RE)
    y, mo, d = (m.struct.field(str(i)).cast(pl.Int32).fill_null(0) for i in range(1, 4))
    ok = (x.str.contains(DATE_RE) & _valid_date(y, mo, d)).fill_null(False)
    y, mo, d = (pl.when(ok).then(v).otherwise(1) for v in (y, mo, d))
    return pl.when(ok).then(pl.date(y, mo, d)), ~ok


def _parse_timestamp(x: pl.Expr, regex: str = TS_RE) -> tuple[pl.Expr, pl.Expr]:
    """(TIMESTAMP, faulty mask) of a string `YYYY-M-D[( |T)H:M[:S[.f]]]`."""
    m = x.str.extract_groups(regex)
    parts = [m.struct.field(str(i)).cast(pl.Int32).fill_null(0) for i in range(1, 7)]
    y, mo, d, h, mi, sec = parts
    us = m.struct.field("7").fill_null("").str.pad_end(6, "0").cast(pl.Int32, strict=False).fill_null(0)
    ok = (x.str.contains(regex) & _valid_date(y, mo, d) & (h < 24) & (mi < 60) & (sec < 60)).fill_null(False)
    y, mo, d = (pl.when(ok).then(v).otherwise(1) for v in (y, mo, d))
    h, mi, sec, us = (pl.when(ok).then(v).otherwise(0) for v in (h, mi, sec, us))
    v = pl.when(ok).then(pl.datetime(y, mo, d, h, mi, sec, us, time_unit="us"))
    return v, ~ok


def _parse_timestamptz(x: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """(TIMESTAMP WITH TIME ZONE, faulty mask) of a string in DuckDB's form (`TSTZ_RE`): the local time
    less its UTC offset; an instant outside the years 1..9999 in UTC is faulty."""
    local, bad = _parse_timestamp(x, TSTZ_RE)
    m = x.str.extract_groups(TSTZ_RE)
    oh, om, osec = (m.struct.field(str(i)).cast(pl.Int64).fill_null(0) for i in (10, 11, 12))
    sign = pl.when(m.struct.field("9") == "-").then(-1).otherwise(1)
    v = (local - pl.duration(seconds=sign * (oh * 3600 + om * 60 + osec))).dt.replace_time_zone("UTC")
    year = v.dt.year()
    return v, bad | (year < 1) | (year > 9999)
