"""DuckDB's text forms that both engines' expression compilers parse the same way.

CAST from VARCHAR reads these patterns (integers and decimals `[+-]digits[.digits]`, doubles with an
exponent, DuckDB's DATE and TIMESTAMP forms, the boolean words), and LIKE / ILIKE patterns become one
anchored regular expression that Rust's regex (Polars) and Java's (Spark) read alike.
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
from typing import Any

from dbspark.errors import SchemaError
from dbspark.ir import functions as fn
from dbspark.ir.expr import Func

NUM_RE = r"^\s*([+-]?)(\d*)(?:\.(\d*))?\s*$"
FLOAT_RE = r"^\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*$"
# DuckDB's DATE: `YYYY-M-D`, then nothing, or anything that begins with a non-digit (its time is ignored)
DATE_RE = r"^\s*(\d{1,4})-(\d{1,2})-(\d{1,2})(?:\D[\s\S]*)?$"
TS_RE = r"^\s*(\d{1,4})-(\d{1,2})-(\d{1,2})(?:[ T](\d{1,2}):(\d{1,2})(?::(\d{1,2})(?:\.(\d{1,6})\d*)?)?)?\s*$"
# DuckDB's TIMESTAMP WITH TIME ZONE: the TIMESTAMP form, then (after the seconds) an optional UTC offset
# `Z`, `+HH`, `+HH:MM`, `+HHMM`, `+HH:MM:SS` or the zone ` UTC` (other zone names are not read)
TSTZ_RE = (
    r"^\s*(\d{1,4})-(\d{1,2})-(\d{1,2})(?:[ T](\d{1,2}):(\d{1,2})(?::(\d{1,2})(?:\.(\d{1,6})\d*)?"
    r"(?:(Z| ?UTC)|([+-])(\d{2})(?::?(\d{2})(?::?(\d{2}))?)?)?)?)?\s*$"
)
BOOL_TRUE = ["true", "t", "1", "yes", "y"]
BOOL_FALSE = ["false", "f", "0", "no", "n"]


def like_regex(name: str, pattern: str, escape: str | None) -> str:
    """The anchored regular expression of a LIKE pattern (`%` any run, `_` one character); every other
    character is written as `\\x{hex}`, which Rust's and Java's regex engines read alike."""
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if escape and ch == escape:
            if i + 1 >= len(pattern):
                raise SchemaError(f"{name}: the pattern {pattern!r} ends with its escape character")
            ch = pattern[i + 1]
            out.append(f"\\x{{{ord(ch):x}}}")
            i += 2
            continue
        out.append(
            ".*"
            if ch == "%"
            else "."
            if ch == "_"
            else ch
            if ch.isascii() and ch.isalnum()
            else f"\\x{{{ord(ch):x}}}"
        )
        i += 1
    return ("(?si)" if name == "ilike" else "(?s)") + "^" + "".join(out) + "$"


def like_parts(e: Func) -> tuple[str | None, str | None]:
    pattern = fn.literal_value(e.name, e.args[1], "the pattern")
    escape = fn.literal_value(e.name, e.args[2], "the escape") if len(e.args) > 2 else None
    return pattern, escape  # type: ignore[return-value]


def parse_text(text: str, kind: str, precision: int = 38, scale: int = 0) -> Any:
    """The value CAST(text AS <kind>) gives on both engines (`engines/local/casts.py`), in Python, for
    constants the front ends fold; a text that does not convert raises ValueError. `kind` is one of
    `dbspark.ir.functions.kind`'s names: int (BIGINT), decimal (with precision and scale), float, bool,
    date, datetime, timestamptz (an aware datetime in UTC)."""
    if kind in ("int", "decimal"):
        m = re.match(NUM_RE, text, re.ASCII)
        if m is None or not (m.group(2) or m.group(3)):
            raise ValueError(text)
        ip, fp = m.group(2).lstrip("0"), m.group(3) or ""
        s = scale if kind == "decimal" else 0
        if len(ip) + s > 37:
            raise ValueError(text)
        padded = fp + "0" * (s + 1)
        u = int((ip or "0") + padded[:s]) + (int(padded[s]) >= 5)
        u = -u if m.group(1) == "-" else u
        if kind == "int":
            if not -(2**63) <= u < 2**63:
                raise ValueError(text)
            return u
        if abs(u) >= 10**precision:
            raise ValueError(text)
        return decimal.Decimal(u).scaleb(-s)
    if kind == "float":
        if re.match(FLOAT_RE, text, re.ASCII) is None:
            raise ValueError(text)
        return float(text.strip(" "))
    if kind == "bool":
        low = text.lower()
        if low in BOOL_TRUE:
            return True
        if low in BOOL_FALSE:
            return False
        raise ValueError(text)
    if kind == "date":
        m = re.match(DATE_RE, text, re.ASCII)
        if m is None:
            raise ValueError(text)
        return dt.date(*(int(g) for g in m.groups()[:3]))  # ValueError for a day that does not exist
    if kind == "datetime":
        m = re.match(TS_RE, text, re.ASCII)
        if m is None:
            raise ValueError(text)
        y, mo, d, h, mi, sec = (int(g or 0) for g in m.groups()[:6])
        us = int((m.group(7) or "").ljust(6, "0"))
        return dt.datetime(y, mo, d, h, mi, sec, us)
    if kind == "timestamptz":
        m = re.match(TSTZ_RE, text, re.ASCII)
        if m is None:
            raise ValueError(text)
        y, mo, d, h, mi, sec = (int(g or 0) for g in m.groups()[:6])
        us = int((m.group(7) or "").ljust(6, "0"))
        oh, om, osec = (int(g or 0) for g in m.groups()[9:12])
        offset = (-1 if m.group(9) == "-" else 1) * (oh * 3600 + om * 60 + osec)
        local = dt.datetime(y, mo, d, h, mi, sec, us, tzinfo=dt.UTC)
        try:
            return local - dt.timedelta(seconds=offset)
        except OverflowError:  # before year 1 or after 9999 in UTC
            raise ValueError(text) from None
    raise ValueError(f"no text form for {kind}")
