"""Coerce pushed values to a column's declared type, as a SQL database does on INSERT (DuckDB 1.5 rules).

One column at a time, vectorized: a frame column (Polars / pandas / Arrow) is coerced by dtype; a column
of Python values (from tuples or dicts) is split by Python type (`type(v)` per value is the only per-row
Python) and each group is built as a typed Series and coerced the same way. What is accepted:

- integers: ints, bools (1/0), integral floats and decimals, integer strings ('7', ' 7 ', '+7', '1e3',
  '3.0'). A fractional value (1.5, '3.5') is rejected rather than rounded (DuckDB rounds it; dbspark
  never changes a key silently), as are NaN/inf and values out of the type's range.
- floats: any number, numeric strings as DuckDB parses them ('1.5', '1e3', 'nan', 'inf').
- DECIMAL(p, s): ints and decimals exactly, decimals of a larger scale and numeric strings rounded half
  away from zero; floats by DuckDB's cast (x·10^s rounded half away from zero in double arithmetic, so
  1.005 -> 1.00 and 2.675 -> 2.68, as `INSERT ... VALUES (?)` binds a Python float). A value whose
  integer part does not fit p - s digits is rejected (DuckDB: "could not cast value").
- DATE: dates, datetimes (their date; an aware one in UTC) and ISO strings 'YYYY-M-D' (what follows a space
  or 'T' is ignored, as DuckDB does); TIMESTAMP: datetimes (aware ones converted to UTC), dates (midnight),
  ISO strings 'YYYY-M-D[( |T)H:M[:S[.f]]]' with an optional offset, which is ignored (DuckDB, PostgreSQL).
- BOOLEAN: bools, numbers (non-zero is true), the strings true/false/t/f/yes/no/y/n/1/0 in any case.
- strings: strings, and numbers, bools and dates as their text.
NULL (None, a pandas NA) is NULL in every type. Anything else raises `CoercionError` naming the column,
its type and the first offending value with its row.
"""

from __future__ import annotations

import datetime as _dt
import decimal
from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from dbspark.errors import CoercionError

_TRUE = ("true", "t", "yes", "y", "1")
_FALSE = ("false", "f", "no", "n", "0")
_OFFSET = r"^(.*\d:\d{1,2}(?::\d{1,2}(?:\.\d*)?)?)\s*(?:Z|z|UTC|[+-]\d{1,2}(?::?\d{2})?)$"
# the offset of a TIMESTAMP WITH TIME ZONE string: sign, hours, minutes, seconds (none: UTC)
_TZ_OFFSET = (
    r"^.*\d:\d{1,2}(?::\d{1,2}(?:\.\d*)?)?\s*(?:Z|z|UTC|([+-])(\d{1,2})(?::?(\d{2}))?(?::?(\d{2}))?)$"
)
_DATE = r"^(\d{1,}-\d{1,2}-\d{1,2})(?:[ T].*)?$"
_TS_FORMATS = ("%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d")


def sql_type(t: pl.DataType) -> str:
    """A column type as SQL writes it (for messages)."""
    if isinstance(t, pl.Decimal):
        return f"DECIMAL({t.precision},{t.scale})"
    names = {
        pl.Int8: "TINYINT",
        pl.Int16: "SMALLINT",
        pl.Int32: "INTEGER",
        pl.Int64: "BIGINT",
        pl.Float32: "REAL",
        pl.Float64: "DOUBLE",
        pl.String: "VARCHAR",
        pl.Boolean: "BOOLEAN",
        pl.Date: "DATE",
    }
    for k, v in names.items():
        if t == k:
            return v
    if isinstance(t, pl.Datetime):
        return "TIMESTAMP" if t.time_zone is None else "TIMESTAMPTZ"
    return str(t)


def coerce_column(name: str, values: pl.Series | Sequence[Any], t: pl.DataType, where: str) -> pl.Series:
    """`values` (a Series, or Python values) coerced to `t`, or a CoercionError naming the first bad value."""
    if isinstance(values, pl.Series):
        out, bad = coerce_series(values, t)
        if bad is not None and bad.any():
            _raise(name, values, bad, t, where)
        return out.alias(name)
    return _coerce_python(name, list(values), t, where)


# ---- Python values -----------------------------------------------------------------------------
_CATEGORY: dict[type, str] = {}


def _category(tp: type) -> str:
    """The group of a Python type: how a Series of such values is built."""
    c = _CATEGORY.get(tp)
    if c is None:
        if tp is type(None) or tp.__name__ in ("NAType", "NaTType"):  # pandas' missing values are NULL
            c = "null"
        elif issubclass(tp, (bool, np.bool_)):
            c = "bool"
        elif issubclass(tp, (int, np.integer)):
            c = "int"
        elif issubclass(tp, (float, np.floating)):
            c = "float"
        elif issubclass(tp, str):
            c = "str"
        elif issubclass(tp, decimal.Decimal):
            c = "decimal"
        elif issubclass(tp, _dt.datetime):
            c = "datetime"
        elif issubclass(tp, _dt.date):
            c = "date"
        elif issubclass(tp, np.datetime64):
            c = "datetime64"
        else:
            c = "other"
        _CATEGORY[tp] = c
    return c


def _natural(cat: str, vals: list[Any]) -> pl.Series:
    """A typed Series of Python values of one category (raises when Polars cannot hold them)."""
    if cat == "bool":
        return pl.Series(vals, dtype=pl.Boolean)
    if cat == "int":
        try:
            return pl.Series(vals, dtype=pl.Int64)
        except (OverflowError, TypeError, pl.exceptions.PolarsError):
            return pl.Series(vals, dtype=pl.Int128)
    if cat == "float":
        return pl.Series(vals, dtype=pl.Float64)
    if cat == "str":
        return pl.Series(vals, dtype=pl.String)
    if cat == "decimal":
        try:
            return pl.Series(vals)
        except Exception:  # exponents or digits Polars cannot hold: go through the text
            return pl.Series([str(v) for v in vals], dtype=pl.String)
    if cat in ("datetime", "date", "datetime64"):
        return pl.Series(vals)
    raise TypeError(cat)


def _coerce_python(name: str, vals: list[Any], t: pl.DataType, where: str) -> pl.Series:
    n = len(vals)
    cats = [_category(tp) for tp in map(type, vals)]
    kinds = set(cats) - {"null"}
    if not kinds:
        return pl.Series(name, [None] * n, dtype=t)
    if len(kinds) == 1:  # the common case: one Python type (and NULLs)
        groups = [(next(iter(kinds)), None, vals)]
    else:
        idx = np.arange(n)
        cat_arr = np.array(cats, dtype=object)
        groups = []
        for cat in sorted(kinds):
            pos = idx[cat_arr == cat]
            groups.append((cat, pos, [vals[i] for i in pos]))
    parts: list[pl.DataFrame] = []
    first_bad = n
    for cat, pos, group in groups:
        s = None
        if cat != "other":
            try:
                s = _natural(cat, group)
            except Exception:
                s = None
        if s is None:  # the first value of the group that Polars cannot hold
            j = next(j for j, v in enumerate(group) if v is not None and not _holds(cat, v))
            first_bad = min(first_bad, j if pos is None else int(pos[j]))
            continue
        out, bad = coerce_series(s, t)
        if bad is not None and bad.any():
            j = int(np.argmax(bad.fill_null(False).to_numpy()))
            first_bad = min(first_bad, j if pos is None else int(pos[j]))
            continue
        if pos is None:
            return out.alias(name)
        parts.append(pl.DataFrame({"i": pos, "v": out}))
    if first_bad < n:  # the first offending value by row
        raise CoercionError(_message(name, vals[first_bad], first_bad, t, where))
    full = pl.DataFrame({"i": np.arange(n)}).join(pl.concat(parts), on="i", how="left", maintain_order="left")
    return full["v"].cast(t).alias(name)


def _holds(cat: str, v: Any) -> bool:
    if cat == "other":
        return False
    try:
        _natural(cat, [v])
        return True
    except Exception:
        return False


def _message(name: str, v: Any, i: int, t: pl.DataType, where: str) -> str:
    return f"{where}: column {name!r} ({sql_type(t)}) cannot take the value {v!r} (row {i})"


def _raise(name: str, values: pl.Series, bad: pl.Series, t: pl.DataType, where: str) -> None:
    i = int(np.argmax(bad.fill_null(False).to_numpy()))
    raise CoercionError(_message(name, values[i], i, t, where))


# ---- typed Series ----------------------------------------------------------------------------------
def coerce_series(s: pl.Series, t: pl.DataType) -> tuple[pl.Series, pl.Series | None]:
    """(`s` coerced to `t`, a mask of the values that could not be, or None when none failed)."""
    src = s.dtype
    if src == t:
        return s, None
    if src == pl.Null:
        return s.cast(t), None
    if isinstance(src, (pl.Categorical, pl.Enum)):
        s, src = s.cast(pl.String), pl.String()
        if src == t:
            return s, None
    if src == pl.Object:
        return s, s.is_not_null()
    if t.is_integer():
        out = _to_int(s, t)
    elif t.is_float():
        out = _to_float(s, t)
    elif isinstance(t, pl.Decimal):
        out = _to_decimal(s, t)
    elif t == pl.String:
        out = _to_string(s)
    elif t == pl.Boolean:
        out = _to_bool(s)
    elif t == pl.Date:
        out = _to_date(s)
    elif isinstance(t, pl.Datetime):
        out = _to_datetime(s, t)
    else:
        out = s.cast(t, strict=False)
    if out is None:  # a source type the target never takes
        return pl.Series(s.name, [None] * s.len(), dtype=t), s.is_not_null()
    bad = s.is_not_null() & out.is_null()
    return out, bad


def _to_int(s: pl.Series, t: pl.DataType) -> pl.Series | None:
    src = s.dtype
    if src == pl.Boolean or src.is_integer():
        return s.cast(t, strict=False)
    if src.is_float():
        return _int_where(s, s.is_finite() & (s == s.floor()) & (s.abs() < 2.0**63), t)
    if isinstance(src, pl.Decimal):
        whole = s.cast(pl.Int128, strict=False)
        ok = whole.cast(src, strict=False) == s
        return pl.select(pl.when(ok).then(whole)).to_series().cast(t, strict=False)
    if src == pl.String:  # integer text, or exact decimal text ('3.0', '1e3') with an integral value
        x = _number_text(s)
        i = pl.select(
            pl.coalesce(x.cast(pl.Int128, strict=False), _radix(s, "x", 16), _radix(s, "b", 2))
        ).to_series()
        d = x.cast(pl.Decimal(38, 9), strict=False)
        whole = d.cast(pl.Int128, strict=False)
        exact = pl.select(pl.when(whole.cast(pl.Decimal(38, 9), strict=False) == d).then(whole)).to_series()
        return pl.select(pl.coalesce(i, exact)).to_series().cast(t, strict=False)
    return None


def _radix(s: pl.Series, letter: str, base: int) -> pl.Series:
    """'0x1f' / '0b101' as DuckDB reads them into an integer column (no sign, no spaces)."""
    digits = s.str.extract(
        f"^\\s*0[{letter}{letter.upper()}]([0-9a-fA-F]+)$", 1
    )  # DuckDB: leading spaces only
    return digits.str.to_integer(base=base, strict=False).cast(pl.Int128)


def _number_text(s: pl.Series) -> pl.Series:
    """Numeric text as DuckDB reads it: spaces around it ignored, single '_' between digits allowed."""
    x = s.str.strip_chars()
    plain = x.str.contains(r"^[+-]?\d+(?:_\d+)*(?:\.\d+(?:_\d+)*)?$") & x.str.contains("_")
    y = x
    for _ in range(2):  # '1_0_0': every other '_' per pass
        y = y.str.replace_all(r"(\d)_(\d)", "${1}${2}")
    return pl.select(pl.when(plain).then(y).otherwise(x)).to_series()


def _int_where(f: pl.Series, ok: pl.Series, t: pl.DataType) -> pl.Series:
    return pl.select(pl.when(ok).then(f)).to_series().cast(pl.Int128, strict=False).cast(t, strict=False)


def _to_float(s: pl.Series, t: pl.DataType) -> pl.Series | None:
    src = s.dtype
    if src == pl.String:
        out = _number_text(s).cast(pl.Float64, strict=False)
    elif src == pl.Boolean or src.is_numeric() or isinstance(src, pl.Decimal):
        out = s.cast(pl.Float64, strict=False)
    else:
        return None
    if t == pl.Float32:  # a finite double beyond float32's range is out of range, not infinity
        f32 = out.cast(pl.Float32)
        return pl.select(pl.when(f32.is_infinite() & out.is_finite()).then(None).otherwise(f32)).to_series()
    return out.cast(t)


def _to_string(s: pl.Series) -> pl.Series | None:
    """Text as DuckDB writes it: 'true', 1.5, 1e-07, nan, '2024-01-02 10:00:00.5'."""
    src = s.dtype
    if src == pl.Boolean:
        return s.cast(pl.String)
    if src.is_float():
        out = s.cast(pl.String).str.replace(r"e([+-])(\d)$", "e${1}0${2}").str.replace("^NaN$", "nan")
        if src == pl.Float64:
            # Polars writes 1e-05 and 1e-06 in fixed notation, DuckDB as Python's repr does: the
            # shortest digits, an exponent below 1e-04 (those rare values through Python)
            small = ((s.abs() < 1e-4) & (s != 0)).fill_null(False)
            if small.any():
                at = small.arg_true()
                out = out.scatter(at, pl.Series([repr(v) for v in s.gather(at).to_list()], dtype=pl.String))
        nan = s.is_nan().fill_null(False)
        if nan.any():  # DuckDB writes a NaN with its sign bit set as -nan
            at = nan.arg_true()
            neg = np.signbit(s.gather(at).to_numpy())
            if neg.any():
                out = out.scatter(at.filter(pl.Series(neg)), "-nan")
        return out
    if isinstance(src, pl.Datetime):
        text = _naive_utc(s).dt.to_string("%Y-%m-%d %H:%M:%S%.6f").str.replace(r"\.?0+$", "")
        return text + "+00" if src.time_zone is not None else text
    if src.is_numeric() or isinstance(src, pl.Decimal) or src.is_temporal():
        return s.cast(pl.String, strict=False)
    return None


def _to_bool(s: pl.Series) -> pl.Series | None:
    src = s.dtype
    if src.is_integer() or isinstance(src, pl.Decimal):
        return s.cast(pl.Float64, strict=False) != 0 if isinstance(src, pl.Decimal) else s != 0
    if src.is_float():
        return s != 0  # NaN is not 0: true, as DuckDB stores it
    if src == pl.String:
        low = s.str.to_lowercase()
        return pl.select(pl.when(low.is_in(_TRUE)).then(True).when(low.is_in(_FALSE)).then(False)).to_series()
    return None


# ---- decimals ---------------------------------------------------------------------------------------
def _to_decimal(s: pl.Series, t: pl.Decimal) -> pl.Series | None:
    p, sc = t.precision or 38, t.scale or 0
    src = s.dtype
    if src == pl.Boolean:
        s, src = s.cast(pl.Int64), pl.Int64()
    if src.is_integer():
        return (
            s.cast(pl.Int128).cast(pl.Decimal(38, 0)).cast(t, strict=False)
            if src != pl.UInt64
            else s.cast(pl.Decimal(38, 0), strict=False).cast(t, strict=False)
        )
    if src.is_float():
        return _float_to_decimal(s.cast(pl.Float64), p, sc)
    if src == pl.String:
        x = _number_text(s)
        hi = max(sc, min(38 - (p - sc) - 1, sc + 20))  # parse exactly at a larger scale, then round
        d = x.cast(pl.Decimal(38, hi), strict=False)
        d = pl.select(
            pl.when(x.str.contains(r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$")).then(d)
        ).to_series()
        return _round_decimal(d, p, sc)
    if isinstance(src, pl.Decimal):
        return _round_decimal(s, p, sc)
    return None


def _round_decimal(s: pl.Series, p: int, sc: int) -> pl.Series:
    """A decimal Series rounded half away from zero to scale `sc`, NULL where it does not fit DECIMAL(p, sc)."""
    assert isinstance(s.dtype, pl.Decimal)
    if (s.dtype.scale or 0) > sc:
        a = s.to_arrow()
        r = pc.round(a, ndigits=sc, round_mode="half_towards_infinity")
        s = pl.Series(s.name, pc.cast(r, pa.decimal128(38, r.type.scale)))
    return s.cast(pl.Decimal(p, sc), strict=False)


def _float_to_decimal(s: pl.Series, p: int, sc: int) -> pl.Series:
    """DuckDB's DOUBLE -> DECIMAL(p, sc): v = x * 10^sc in double arithmetic, rounded half away from zero;
    |v| must be below 10^p."""
    x = s.to_numpy(allow_copy=True).astype(np.float64, copy=False)
    valid = s.is_not_null().to_numpy()
    with np.errstate(invalid="ignore", over="ignore"):
        v = x * (10.0**sc)
        whole = np.trunc(v)
        r = whole + np.where(np.abs(v - whole) >= 0.5, np.sign(v), 0.0)
        ok = valid & np.isfinite(r) & (np.abs(r) < 10.0**p)
    r = np.where(ok, r, 0.0)
    if np.all(np.abs(r) < 2.0**63):
        lo = r.astype(np.int64)
        words = np.empty(2 * len(lo), dtype=np.int64)
        words[0::2] = lo
        words[1::2] = lo >> 63
        arr = pa.Array.from_buffers(pa.decimal128(38, sc), len(lo), [None, pa.py_buffer(words.tobytes())])
    else:  # unscaled values beyond 64 bits (precision above 18): exact through Python integers
        arr = pa.array([decimal.Decimal(int(u)).scaleb(-sc) for u in r], pa.decimal128(38, sc))
    out = pl.Series(s.name, arr).cast(pl.Decimal(p, sc), strict=False)
    return pl.select(pl.when(pl.Series(ok)).then(out)).to_series().alias(s.name)


# ---- dates and timestamps --------------------------------------------------------------------------
def _naive_utc(s: pl.Series) -> pl.Series:
    dt = s.dtype
    if isinstance(dt, pl.Datetime) and dt.time_zone is not None:
        return s.dt.convert_time_zone("UTC").dt.replace_time_zone(None)
    return s


def _to_date(s: pl.Series) -> pl.Series | None:
    src = s.dtype
    if isinstance(src, pl.Datetime):
        return _naive_utc(s).dt.date()
    if src == pl.String:
        # DuckDB reads the date and ignores what follows a space or a 'T' (a time, or anything)
        return s.str.strip_chars().str.extract(_DATE, 1).str.to_date("%Y-%m-%d", strict=False)
    return None


def _parse_timestamp(x: pl.Series) -> pl.Series:
    y = x.str.replace(r"^(\d+-\d{1,2}-\d{1,2})T", "${1} ").str.replace(_OFFSET, "${1}")
    parsed = [y.str.to_datetime(f, time_unit="ns", strict=False) for f in _TS_FORMATS]
    return pl.select(pl.coalesce(parsed)).to_series()


def _to_datetime(s: pl.Series, t: pl.Datetime) -> pl.Series | None:
    src = s.dtype
    if src == pl.Date:
        out = s.cast(pl.Datetime("us"))
    elif isinstance(src, pl.Datetime):
        out = _naive_utc(s)
    elif src == pl.String:  # no stripping: DuckDB rejects a TIMESTAMP string with spaces around it
        out = _parse_timestamp(s)
        if t.time_zone:  # the local time less its UTC offset (a TIMESTAMP ignores the offset)
            m = s.str.extract_groups(_TZ_OFFSET)
            h, mi, sec = (m.struct.field(str(i)).cast(pl.Int64).fill_null(0) for i in (2, 3, 4))
            sign = pl.when(m.struct.field("1") == "-").then(-1).otherwise(1)
            off = pl.duration(seconds=sign * (h * 3600 + mi * 60 + sec))
            out = pl.select(out.cast(pl.Datetime("us")) - off).to_series()
    else:
        return None
    out = out.cast(pl.Datetime(t.time_unit or "us"))
    return out.dt.replace_time_zone(t.time_zone) if t.time_zone else out
