"""SQL CAST and DECIMAL arithmetic on the Spark engine, with the text forms of `columnar/sqlforms.py`, as on the local engine.

Spark rounds DECIMAL with HALF_UP (away from zero, as DuckDB) and `rint` is half-to-even (DuckDB's
DOUBLE -> integer). DECIMAL results are computed exactly: when Spark's own result type would exceed 38
digits (and Spark would drop scale), the operands' unscaled values are multiplied as DECIMAL(38, 0)
and the point is put back by text, which is exact.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from dbspark.columnar.sqlforms import BOOL_FALSE, BOOL_TRUE, DATE_RE, FLOAT_RE, NUM_RE, TS_RE, TSTZ_RE
from dbspark.engines.spark.convert import spark_type
from dbspark.engines.spark.exprs import _F, INT_RANGE, checked
from dbspark.errors import UnsupportedError
from dbspark.ir import functions as fn


def dec_type(p: int, s: int) -> Any:
    from pyspark.sql.types import DecimalType

    return DecimalType(p, s)


def dec_bound(x: Any, p: int, s: int) -> Any:
    """|x| < 10^(p - s): a value that fits DECIMAL(p, s) (x of a DECIMAL type with scale <= s)."""
    F = _F()
    if p - s >= 38:
        return F.lit(True)
    return F.abs(x) < F.lit(str(10 ** (p - s))).cast(dec_type(38, 0))


def unscaled(x: Any, s: int) -> Any:
    """The unscaled integer of a decimal at scale s, as DECIMAL(38, 0) (exact, by text)."""
    F = _F()
    return F.regexp_replace(x.cast(dec_type(38, s)).cast("string"), r"\.", "").cast(dec_type(38, 0))


def from_unscaled(u: Any, p: int, s: int) -> Any:
    """DECIMAL(p, s) of an unscaled DECIMAL(38, 0) value u (exact, by text)."""
    F = _F()
    if s == 0:
        return u.cast(dec_type(p, 0))
    plain = F.abs(u).cast("string")
    digits = F.when(F.length(plain) <= s, F.lpad(plain, s + 1, "0")).otherwise(plain)  # lpad truncates
    n = F.length(digits)
    text = F.concat(
        F.when(u < 0, F.lit("-")).otherwise(F.lit("")),
        F.substring(digits, F.lit(1), n - s),
        F.lit("."),
        F.substring(digits, n - s + 1, F.lit(s)),
    )
    return F.when(u.isNotNull(), text.cast(dec_type(p, s)))


def dec_arith(op: str, sym: str, rt: pl.DataType, a: Any, b: Any, ta: pl.DataType, tb: pl.DataType) -> Any:
    F = _F()
    p, s = fn.dec_of(rt)
    if ta == fn.NULL or tb == fn.NULL:
        return F.lit(None).cast(spark_type(rt))
    (pa, sa), (pb, sb) = fn.dec_of(ta), fn.dec_of(tb)
    a, b = a.cast(dec_type(pa, sa)), b.cast(dec_type(pb, sb))
    msg = f"DECIMAL overflow in {sym!r} (result {fn.sql_name(rt)})"
    if op == "sql_mod":
        r = F.when(b == 0, None).otherwise(F.try_mod(a, b))
        return r.cast(spark_type(rt))
    if op in ("add", "sub"):
        # DuckDB casts both operands to the result type first: one that does not fit it is an overflow
        fits = dec_bound(a, p, s) & dec_bound(b, p, s)
        if max(pa - sa, pb - sb) + max(sa, sb) + 1 <= 38:  # Spark's exact result type
            r = a + b if op == "add" else a - b
            ok = dec_bound(r, p, s) & fits
            return checked(F.when(ok, r).cast(spark_type(rt)), ~ok, msg, (a, b))
        ua, ub = unscaled(a, s), unscaled(b, s)
        u = F.try_add(ua, ub) if op == "add" else F.try_subtract(ua, ub)
        bad = ~fits | (u.isNull() & a.isNotNull() & b.isNotNull()) | ~dec_bound(u, p, 0)
        return checked(from_unscaled(F.when(~bad, u), p, s), bad, msg, (a, b))
    else:
        if pa + pb + 1 <= 38:
            r = a * b
            return checked(
                F.when(dec_bound(r, p, s), r).cast(spark_type(rt)), ~dec_bound(r, p, s), msg, (a, b)
            )
        u = F.try_multiply(unscaled(a, sa), unscaled(b, sb))
    bad = (u.isNull() & a.isNotNull() & b.isNotNull()) | ~dec_bound(u, p, 0)
    return checked(from_unscaled(F.when(~bad, u), p, s), bad, msg, (a, b))


def parse_number(x: Any, s: int) -> tuple[Any, Any]:
    """(DECIMAL(38, s) value rounded half away from zero, ok) of a numeric string (the local grammar)."""
    F = _F()
    ip = F.regexp_replace(F.regexp_extract(x, NUM_RE, 2), "^0+", "")
    fp = F.regexp_extract(x, NUM_RE, 3)
    ok = x.rlike(NUM_RE) & ((F.length(F.regexp_extract(x, NUM_RE, 2)) > 0) | (F.length(fp) > 0))
    ok = ok & (F.length(ip) + s <= 37)
    text = F.concat(
        F.regexp_extract(x, NUM_RE, 1),
        F.when(ip == "", F.lit("0")).otherwise(ip),
        F.lit("."),
        F.rpad(fp, s + 1, "0"),
    )
    # DECIMAL(38, s+1) is exact; the cast to scale s rounds HALF_UP
    v = F.when(ok, text).cast(dec_type(38, min(s + 1, 38))).cast(dec_type(38, s))
    return v, ok


def days_in_month(y: Any, m: Any) -> Any:
    F = _F()
    leap = ((y % 4 == 0) & (y % 100 != 0)) | (y % 400 == 0)
    base = F.when(m == 2, 28).when(m.isin(4, 6, 9, 11), 30).otherwise(31)
    return base + F.when(leap & (m == 2), 1).otherwise(0)


def valid_date(y: Any, m: Any, d: Any) -> Any:
    return (m >= 1) & (m <= 12) & (d >= 1) & (d <= days_in_month(y, m)) & (y >= 1)


def parse_date(x: Any) -> tuple[Any, Any]:
    """(DATE, ok) of a string in DuckDB's DATE form (`DATE_RE`: the time after the date is ignored)."""
    F = _F()
    y, mo, d = (F.regexp_extract(x, DATE_RE, k) for k in range(1, 4))
    y, mo, d = (F.when(v == "", 0).otherwise(v.cast("int")) for v in (y, mo, d))
    ok = x.rlike(DATE_RE) & valid_date(y, mo, d)
    return F.when(ok, F.make_date(y, mo, d)), ok


def parse_timestamp(x: Any, regex: str = TS_RE) -> tuple[Any, Any]:
    F = _F()
    g = [F.regexp_extract(x, regex, k) for k in range(1, 8)]
    y, mo, d, h, mi, sec = (F.when(v == "", 0).otherwise(v.cast("int")) for v in g[:6])
    us = F.when(g[6] == "", 0).otherwise(F.rpad(g[6], 6, "0").cast("int"))
    ok = x.rlike(regex) & valid_date(y, mo, d) & (h < 24) & (mi < 60) & (sec < 60)
    micros = (sec.cast("long") * 1_000_000 + us.cast("long")).cast(dec_type(14, 0))
    secs = micros / F.lit(1_000_000).cast(dec_type(7, 0))  # exact: DECIMAL(22, 8)
    v = F.when(ok, F.make_timestamp_ntz(y, mo, d, h, mi, secs.cast(dec_type(8, 6))))
    return v, ok


def parse_timestamptz(x: Any) -> tuple[Any, Any]:
    """A string in DuckDB's TIMESTAMP WITH TIME ZONE form (`TSTZ_RE`): the local time less its UTC offset
    (the session's time zone is UTC); an instant outside the years 1..9999 in UTC does not convert."""
    F = _F()
    local, ok = parse_timestamp(x, TSTZ_RE)
    oh, om, osec = (F.regexp_extract(x, TSTZ_RE, k) for k in (10, 11, 12))
    oh, om, osec = (F.when(v == "", 0).otherwise(v.cast("long")) for v in (oh, om, osec))
    sign = F.when(F.regexp_extract(x, TSTZ_RE, 9) == "-", -1).otherwise(1)
    off = sign * (oh * 3600 + om * 60 + osec)
    v = F.timestamp_micros(F.unix_micros(local.cast("timestamp")) - off * 1_000_000)
    return v, ok & (F.year(v) >= 1) & (F.year(v) <= 9999)


def cast(x: Any, src: pl.DataType, to: pl.DataType) -> Any:
    """CAST(x AS to) for x of type src: DuckDB's conversions, a value that does not convert raises."""
    F = _F()
    fn.check_cast(src, to)
    if src == to:
        return x
    ks, kt = fn.kind(src), fn.kind(to)
    if ks == "null":  # NULL; an expression of the NULL type is still evaluated (error())
        return x.cast(spark_type(to))
    value, ok = _body(x, src, to, ks, kt)
    if ok is None:
        return value
    bad = x.isNotNull() & ~ok
    return checked(
        F.when(~bad, value), bad, f"CAST from {fn.sql_name(src)} to {fn.sql_name(to)} failed", (x,)
    )


def _body(x: Any, src: pl.DataType, to: pl.DataType, ks: str, kt: str) -> tuple[Any, Any]:
    F = _F()
    st = spark_type(to)
    if kt == "bool":
        if ks == "string":
            v = F.lower(x)
            return v.isin(*BOOL_TRUE), v.isin(*(BOOL_TRUE + BOOL_FALSE))
        return x != 0, None
    if kt == "int":
        lo, hi = INT_RANGE[to]
        if ks == "bool":
            return x.cast(st), None
        if ks == "int":
            ok = (x >= lo) & (x <= hi)
        elif ks == "float":
            r = F.rint(x)
            ok = ~F.isnan(r) & (r >= float(lo)) & (r < float(hi) + 1)
            return F.when(ok, r).cast(st), ok
        else:
            v = F.round(x, 0) if ks == "decimal" else parse_number(x, 0)[0]
            v = v.cast(dec_type(38, 0))
            ok = (v >= F.lit(str(lo)).cast(dec_type(38, 0))) & (v <= F.lit(str(hi)).cast(dec_type(38, 0)))
            if ks == "string":
                ok = ok & parse_number(x, 0)[1]
            return F.when(ok, v).cast(st), ok
        return F.when(ok, x).cast(st), ok
    if kt == "decimal":
        p, s = fn.dec_of(to)
        if ks in ("int", "decimal"):
            ps, ss = fn.dec_of(src)
            v = F.round(x, s) if ss > s else x
            v = v.cast(dec_type(min(38, ps - ss + s + 1), s))
            ok = dec_bound(v, p, s)
        elif ks == "float":
            y = F.round(x * float(10**s), 0)
            ok = ~F.isnan(y) & (F.abs(y) < float(10**p))
            v = from_unscaled(F.when(ok, y).cast(dec_type(38, 0)), p, s)
        else:
            v, ok = parse_number(x, s)
            ok = ok & dec_bound(v, p, s)
        return F.when(ok, v).cast(st), ok
    if kt == "float":
        if ks == "string":
            ok = x.rlike(FLOAT_RE)
            return F.when(ok, F.trim(x)).cast("double"), ok
        return x.cast("double"), None
    if kt == "string":
        if ks == "date":
            return F.date_format(x, "yyyy-MM-dd"), None
        if ks == "datetime":
            frac = F.regexp_replace(F.date_format(x, "SSSSSS"), "0+$", "")
            return F.concat(
                F.date_format(x, "yyyy-MM-dd HH:mm:ss"),
                F.when(frac == "", F.lit("")).otherwise(F.concat(F.lit("."), frac)),
                F.lit("+00" if fn.is_tz(src) else ""),  # DuckDB shows the UTC offset
            ), None
        if ks == "decimal":
            p, s = fn.dec_of(src)
            v = x.cast("string")
            if p == s:
                v = F.regexp_replace(v, r"^(-?)0\.", "$1.")
            return v, None
        return x.cast("string"), None
    if kt == "date":
        if ks == "datetime":
            return F.to_date(x), None
        return parse_date(x)
    if kt == "datetime":
        if ks in ("date", "datetime"):  # a TIMESTAMP is a TIMESTAMPTZ in UTC (the session's zone), and back
            return x.cast(st), None
        return parse_timestamptz(x) if fn.is_tz(to) else parse_timestamp(x)
    raise UnsupportedError(f"CAST from {fn.sql_name(src)} to {fn.sql_name(to)}")
