"""Weights as a tower of protocols: semigroup -> monoid -> abelian group.

A Z-set maps rows to weights in an abelian group (`dbsp-paper.txt` §2.2, §4.1); the integers `Z` are
the usual one. Aggregate accumulators (count, sum, sum of squares) are another abelian group, carried
by the same traces (see `dbspark.trace.spine`), which is why the group is a protocol and not `int`.
Vectorized implementations act on NumPy arrays; the scalar methods define the laws the tests check.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

from dbspark.errors import WeightError

INT64_MAX = np.iinfo(np.int64).max


@runtime_checkable
class Semigroup(Protocol):
    """An associative `plus`."""

    def plus(self, a: Any, b: Any) -> Any: ...


@runtime_checkable
class Monoid(Semigroup, Protocol):
    """A semigroup with an identity `zero`."""

    def zero(self) -> Any: ...

    def is_zero(self, a: Any) -> bool: ...


@runtime_checkable
class AbelianGroup(Monoid, Protocol):
    """A commutative monoid with inverses: what a stream needs for I, D and incrementalization (§2.2)."""

    def neg(self, a: Any) -> Any: ...


class IntegerWeights:
    """The ring of integers, stored as int64 with overflow detected instead of wrapping."""

    dtype = np.int64

    def plus(self, a: int, b: int) -> int:
        return check_scalar(a + b)

    def zero(self) -> int:
        return 0

    def is_zero(self, a: int) -> bool:
        return a == 0

    def neg(self, a: int) -> int:
        return check_scalar(-a)

    def times(self, a: int, b: int) -> int:
        return check_scalar(a * b)


class FloatWeights:
    """Real-valued weights (an abelian group up to rounding), e.g. for sums carried as weights."""

    dtype = np.float64

    def plus(self, a: float, b: float) -> float:
        return a + b

    def zero(self) -> float:
        return 0.0

    def is_zero(self, a: float) -> bool:
        return a == 0.0

    def neg(self, a: float) -> float:
        return -a


Z = IntegerWeights()
R = FloatWeights()


def check_scalar(v: int) -> int:
    if not -INT64_MAX <= v <= INT64_MAX:
        raise WeightError(f"weight overflow: {v} does not fit in a signed 64-bit integer")
    return v


def check_weights(values: Any, what: str = "weight") -> np.ndarray:
    """Validate a column of weights: integers only (bools and floats with fractions rejected)."""
    arr = np.asarray(values)
    if arr.dtype == object:
        out = np.empty(len(arr), dtype=np.int64)
        for i, v in enumerate(arr):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                raise WeightError(f"{what} {v!r} is not an integer")
            out[i] = check_scalar(int(v))
        return out
    if arr.dtype.kind == "b" or arr.dtype.kind not in "iu":
        if arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
            if np.any(np.abs(arr) > 2**62):
                raise WeightError(f"{what} too large for a 64-bit integer")
            return arr.astype(np.int64)
        bad = arr[0] if len(arr) else None
        raise WeightError(f"{what}s must be integers, got dtype {arr.dtype} (e.g. {bad!r})")
    if arr.dtype.kind == "u" and len(arr) and arr.max() > INT64_MAX:
        raise WeightError(f"{what} {int(arr.max())} does not fit in a signed 64-bit integer")
    return arr.astype(np.int64, copy=False)


def checked_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise int64 product that raises instead of wrapping on overflow. Checked by the largest
    magnitudes first (weights are mostly 1: two reductions), row by row in floats only when their
    product could overflow (a join's 30M weights: ~0.6 s of float conversions otherwise)."""
    out = a * b
    if len(out) and magnitude(a) * magnitude(b) > INT64_MAX:
        approx = a.astype(np.float64) * b.astype(np.float64)
        if np.any(np.abs(approx) > 9.2e18):
            raise WeightError("weight overflow in a product of weights (join or product)")
    return out


def magnitude(a: np.ndarray) -> int:
    """The largest |value| of a non-empty integer array, as a Python int (exact: |INT64_MIN| included),
    by two reductions: what bounds a sum or product of weights before it is computed."""
    return max(-int(a.min()), int(a.max()))
