"""Soufflé's functors in plain Python, for the naive evaluator (`dbspark.testing.datalog`): written from
Soufflé's manual and C++ semantics on 64-bit integers, sharing nothing with the front end's lowering
(`dbspark.frontends.datalog.functors`) but the two regular expressions a symbol must match to be read
as a number. A case the engine rejects raises `DataError` here too."""

from __future__ import annotations

import math
import re
from typing import Any

from dbspark.errors import DataError
from dbspark.frontends.datalog.ast import Call
from dbspark.frontends.datalog.functors import FLOAT_PATTERN, INT_PATTERN
from dbspark.functors import REGISTRY


def wrap(v: int) -> int:
    """`v` as a 64-bit two's complement integer."""
    return (v + 2**63) % 2**64 - 2**63


def in_range(v: Any, t: object) -> Any:
    """`v`, raising DataError for an integer past 64 bits (the engines' overflow check)."""
    if isinstance(v, int) and not -(2**63) <= v < 2**63:
        raise DataError(f"oracle: {t} overflows: {v}")
    return v


def _int(v: float, t: Call) -> int:
    if not math.isfinite(v) or abs(v) >= 2.0**63:
        raise DataError(f"oracle: {t} of {v!r} is not a 64-bit integer")
    return int(v)  # toward zero


def _unsigned(v: int, t: Call) -> int:
    if v < 0:
        raise DataError(f"oracle: {t} of {v} is negative")
    return v


def _number(s: str, pattern: str, t: Call) -> str:
    if re.fullmatch(pattern, s) is None:
        raise DataError(f"oracle: {t} of {s!r} is not a number")
    return s


def functor(t: Call, v: list[Any]) -> Any:
    """The value of the functor `t` on the argument values `v`."""
    n = t.name
    if n.startswith("@"):  # user-defined: its Python function, called on the tuple's values
        return REGISTRY[n[1:]](*v)
    simple = {
        "band": lambda: v[0] & v[1],
        "bor": lambda: v[0] | v[1],
        "bxor": lambda: v[0] ^ v[1],
        "bnot": lambda: ~v[0],
        "bshl": lambda: wrap(v[0] << (v[1] & 63)),
        "bshr": lambda: v[0] >> (v[1] & 63),
        "bshru": lambda: wrap((v[0] % 2**64) >> (v[1] & 63)),
        "land": lambda: int(v[0] != 0 and v[1] != 0),
        "lor": lambda: int(v[0] != 0 or v[1] != 0),
        "lxor": lambda: int((v[0] != 0) != (v[1] != 0)),
        "lnot": lambda: int(v[0] == 0),
        "min": lambda: min(v),
        "max": lambda: max(v),
        "abs": lambda: abs(v[0]),
        "cat": lambda: "".join(v),
        "strlen": lambda: len(v[0]),
        "contains": lambda: int(v[0] in v[1]),
        "match": lambda: int(re.fullmatch(v[0], v[1]) is not None),
    }
    if n in simple:
        return simple[n]()
    if n == "range":
        raise AssertionError("oracle: range is a generator, not a value")
    if n == "^":
        try:
            p = math.pow(v[0], v[1])
        except (OverflowError, ValueError, ZeroDivisionError):
            p = math.nan
        return p if isinstance(v[0], float) or isinstance(v[1], float) else _int(p, t)
    if n == "substr":
        s, i, k = v
        if i < 0 or i > len(s):
            return ""
        return s[i:] if k < 0 else s[i : i + k]
    if n == "as":
        return _unsigned(v[0], t) if t.type == "unsigned" else v[0]
    x = v[0]
    if n == "to_string":
        return x if isinstance(x, str) else repr(x) if isinstance(x, float) else str(x)
    if n == "to_float":
        return float(_number(x, FLOAT_PATTERN, t)) if isinstance(x, str) else float(x)
    if isinstance(x, str):
        out = int(_number(x, INT_PATTERN, t))
    else:
        out = _int(x, t) if isinstance(x, float) else x
    return _unsigned(out, t) if n == "to_unsigned" else out


def souffle_range(lo: int, hi: int, step: int | None = None) -> list[int]:
    """The values of Soufflé's generator `range(lo, hi[, step])` (its `runRange`, written again)."""
    if step is None:
        step = 1 if lo <= hi else -1
    if step == 0:
        return [lo] if lo != hi else []
    out, x = [], lo
    while (x < hi) if step > 0 else (x > hi):
        out.append(x)
        x += step
    return out
