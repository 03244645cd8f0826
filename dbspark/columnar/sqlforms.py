"""DuckDB's text forms that both engines' expression compilers parse the same way.

CAST from VARCHAR reads these patterns (integers and decimals `[+-]digits[.digits]`, doubles with an
exponent, DuckDB's DATE and TIMESTAMP forms, the boolean words), and LIKE / ILIKE patterns become one
anchored regular expression that Rust's regex (Polars) and Java's (Spark) read alike.
"""

from __future__ import annotations

from dbspark.errors import SchemaError
from dbspark.ir import functions as fn
from dbspark.ir.expr import Func

NUM_RE = r"^\s*([+-]?)(\d*)(?:\.(\d*))?\s*$"
FLOAT_RE = r"^\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*$"
# DuckDB's DATE: `YYYY-M-D`, then nothing, or anything that begins with a non-digit (its time is ignored)
DATE_RE = r"^\s*(\d{1,4})-(\d{1,2})-(\d{1,2})(?:\D[\s\S]*)?$"
TS_RE = r"^\s*(\d{1,4})-(\d{1,2})-(\d{1,2})(?:[ T](\d{1,2}):(\d{1,2})(?::(\d{1,2})(?:\.(\d{1,6})\d*)?)?)?\s*$"
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
