"""DuckDB's `strftime` / `strptime` format strings, read once for both engines.

`tokens(fmt)` splits a format into literal text and specifiers. The specifiers dbspark evaluates are the
ones below (`FORMAT_SPECS` for strftime, `PARSE_SPECS` for strptime); any other one is refused with an
UnsupportedError naming it, so that a format never gives a different string than DuckDB's.

strftime (DuckDB 1.5): %Y year (at least 4 digits), %y (2), %m %d %H %M %S (2 digits), %I 12-hour clock,
%p AM/PM, %f microseconds (6 digits), %g milliseconds (3), %j day of year (3), %w day
of week (0 = Sunday), %u ISO day of week (1 = Monday), %a %A %b %B abbreviated / full English day and
month names, %-m %-d %-H %-M %-S %-I %-j %-y without padding, %c %x %X the date and time, %z '+00', %Z ''
(TIMESTAMP has no zone; of a TIMESTAMP WITH TIME ZONE, 'UTC', the session's time zone), %% a percent sign. (%n, nanoseconds, is refused: DuckDB 1.5 writes it
with NUL characters after it.)

strptime (`parse_regex`): the input may begin and end with whitespace; a run of whitespace in the format
matches one or more whitespace characters; a numeric specifier reads 1 up to its width of digits (%Y 4,
%f 6, %g 3, the others 2); %y is 19yy from 69, else 20yy; %p reads AM or PM in any case; other text must
match exactly. The fields are then checked (month 1..12, a day of that month, hour < 24 or 1..12 with
%I, minute and second < 60).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dbspark.errors import UnsupportedError

DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
# field, zero-padded width (0: no padding)
NUMERIC = {
    "Y": ("year", 4),
    "y": ("year2", 2),
    "m": ("month", 2),
    "d": ("day", 2),
    "H": ("hour", 2),
    "M": ("minute", 2),
    "S": ("second", 2),
    "I": ("hour12", 2),
    "f": ("micros", 6),
    "g": ("millis", 3),
    "j": ("doy", 3),
    "w": ("dow", 0),
    "u": ("isodow", 0),
}
NAMES = {"a": ("dow", 3, DAYS), "A": ("dow", 0, DAYS), "b": ("month", 3, MONTHS), "B": ("month", 0, MONTHS)}
EXPAND = {"c": "%Y-%m-%d %H:%M:%S", "x": "%Y-%m-%d", "X": "%H:%M:%S"}
CONSTANT = {"%": "%", "z": "+00", "Z": ""}
UNPADDED = {"m", "d", "H", "M", "S", "I", "j", "y"}
# the error of a string strptime does not read
BAD_TEXT = "a string does not match the format {fmt!r} (or is in year 0, 1 BC, which dbspark does not hold)"
PARSE_SPECS = {"Y", "y", "m", "d", "H", "M", "S", "I", "f", "g", "p", "%"}


@dataclass(frozen=True)
class Spec:
    """A specifier: `code` (the letter), `pad` False for the `%-x` forms."""

    code: str
    pad: bool = True


Token = str | Spec


def tokens(fmt: str, function: str, zone: bool = False, parsing: bool = False) -> list[Token]:
    """The format as literal strings and specifiers (%c %x %X expanded); an unknown specifier is refused.
    `zone`: of a TIMESTAMP WITH TIME ZONE, whose %Z is the session's time zone, UTC. `parsing`: for
    strptime, where %z / %Z read a zone (DuckDB's result is then a TIMESTAMP WITH TIME ZONE): refused."""
    out: list[Token] = []
    i = 0
    while i < len(fmt):
        c = fmt[i]
        if c != "%":
            out.append(c)
            i += 1
            continue
        pad = True
        j = i + 1
        if j < len(fmt) and fmt[j] == "-":
            pad, j = False, j + 1
        if j >= len(fmt):
            raise UnsupportedError(f"function {function}: the format {fmt!r} ends in a lone '%'")
        code = fmt[j]
        if code in EXPAND and pad:
            out += tokens(EXPAND[code], function)
        elif code in "zZ" and parsing:
            raise UnsupportedError(
                f"function {function}: format specifier %{code} in {fmt!r} (reading a time zone) is not supported"
            )
        elif code == "Z" and pad and zone:
            out.append("UTC")
        elif code in CONSTANT and pad:
            out.append(CONSTANT[code])
        elif (code in NUMERIC or code in NAMES or code == "p") and (pad or code in UNPADDED):
            out.append(Spec(code, pad))
        else:
            raise UnsupportedError(
                f"function {function}: format specifier %{'' if pad else '-'}{code} in {fmt!r} is not supported "
                f"(supported: %{' %'.join(sorted(set(NUMERIC) | set(NAMES) | set(EXPAND) | set(CONSTANT) | {'p'}))})"
            )
        i = j + 1
    return out


def _lit_regex(ch: str) -> str:
    """One literal character as a regex both Rust (Polars) and Java (Spark) read the same way."""
    if not ch.isascii() or ch.isalnum():
        return ch
    return f"\\x{ord(ch):02X}"


@dataclass(frozen=True)
class ParsePlan:
    """A strptime format compiled: the regex, and which group (1-based) holds each specifier's text."""

    regex: str
    groups: dict[str, int]


def parse_plan(fmt: str, function: str) -> ParsePlan:
    toks = tokens(fmt, function, parsing=True)
    parts = [r"^\s*"]
    groups: dict[str, int] = {}
    prev_space = False
    for i, t in enumerate(toks):
        if isinstance(t, str):
            if t.isspace():
                if not prev_space:
                    parts.append(r"\s+")
                prev_space = True
                continue
            parts.append(_lit_regex(t))
            prev_space = False
            continue
        prev_space = False
        if t.code not in PARSE_SPECS:
            raise UnsupportedError(
                f"function {function}: format specifier %{t.code} in {fmt!r} is not supported for parsing "
                f"(supported: %{' %'.join(sorted(PARSE_SPECS))})"
            )
        if t.code in groups:
            raise UnsupportedError(f"function {function}: the format {fmt!r} repeats %{t.code}")
        groups[t.code] = len(groups) + 1
        if t.code == "p":
            parts.append("([AaPp][Mm])")
            continue
        nxt = toks[i + 1] if i + 1 < len(toks) else None
        width = NUMERIC[t.code][1]
        # DuckDB reads up to `width` digits: before another number it reads exactly `width` (a regex would
        # backtrack into fewer); a digit written in the format after a number is ambiguous, so refused
        if isinstance(nxt, Spec) and nxt.code != "p":
            parts.append(f"([0-9]{{{width}}})")
        elif isinstance(nxt, str) and nxt.isdigit():
            raise UnsupportedError(f"function {function}: a digit after %{t.code} in the format {fmt!r}")
        else:
            parts.append(f"([0-9]{{1,{width}}})")
    if "p" in groups and "I" not in groups:
        raise UnsupportedError(f"function {function}: the format {fmt!r} has %p without %I")
    if "I" in groups and "H" in groups:
        raise UnsupportedError(f"function {function}: the format {fmt!r} has both %H and %I")
    if "Y" in groups and "y" in groups:
        raise UnsupportedError(f"function {function}: the format {fmt!r} has both %Y and %y")
    if "f" in groups and "g" in groups:
        raise UnsupportedError(f"function {function}: the format {fmt!r} has both %f and %g")
    parts.append(r"\s*$")
    regex = "".join(parts)
    re.compile(regex)
    return ParsePlan(regex, groups)
