"""A frame's rows grouped by integer join keys, built once for a side that many joins probe.

A fresh run of a recursive scope (`operators/fresh.py`) joins each iteration's new facts with the same
integral of an import (the edges of transitive closure, the parent facts of same generation), final
after the first iteration: hundreds of joins of a small change with one unchanged frame. Polars'
join hashes that frame at each call (a change of 3,000 rows with 100,000 edges: ~430 µs a join, of
which the probe's own work is a small part). Here the frame's rows are sorted once by their key, packed
into one integer, with where each key's rows start (`KeyIndex.build`); a probe packs its keys the same
way and reads each key's run (`KeyIndex.probe`): its matches' positions on both sides, by NumPy.

Only keys of integer columns without NULLs are indexed (a NULL never matches: probe rows with one are
dropped), packed when the columns' ranges fit in 62 bits together; other keys are left to Polars. A
Z-set's index is built at its `BUILD_AT`-th join by the same keys (`indexed_join`, kept with the value:
Z-sets are immutable) and probed by changes of at most `PROBE_ROWS` rows: past that Polars' parallel
join is faster (8M probes into 20,000 edges: 0.5-1.0 s against 2-3 s).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from dbspark.algebra.consolidate import INTEGER_LIKE, WEIGHT, take
from dbspark.algebra.weights import checked_mul
from dbspark.algebra.zset import ZSet
from dbspark.columnar.plans import all_ones, drop_null_rows, pick

_BITS = 62  # the packed key's width
_DENSE_SLACK = 4  # where the keys span at most this many times the rows (+ `_DENSE_MIN`), each key
_DENSE_MIN = 1 << 16  # value has its slot in an array of run starts; else the runs are searched
_INT64_MAX = (1 << 63) - 1
BUILD_AT = 3  # the join of a Z-set (by the same keys) that builds its index
PROBE_ROWS = 16_384  # the most rows of a change probed by NumPy (measured: 10k rows 0.27 against
# 0.93 ms by Polars, 20k 1.2 against 1.5 ms, 50k 3.1 against 2.8 ms, into 100,000 edges)


def indexed_join(
    a: ZSet, b: ZSet, left_keys: list[str], right_keys: list[str], right_out: Sequence[tuple[str, str]]
) -> ZSet | None:
    """`a ⋈ b` (consolidated Z-sets; weights multiplied, the left's columns then `right_out`) through
    the key index of a side that earlier joins have read, probed by the other where it is small; None
    where neither side serves (the caller joins by Polars)."""
    for static, probe, skeys, pkeys, on_left in (
        (b, a, right_keys, left_keys, False),
        (a, b, left_keys, right_keys, True),
    ):
        if len(probe) > PROBE_ROWS or len(static) <= len(probe):
            continue
        built = _index(static, skeys)
        if built is None:
            continue
        index, ones = built
        pdf = drop_null_rows(probe.df, pkeys)
        got = index.probe(pdf, pkeys)
        if got is None:
            continue
        pp, sp = got
        left, lpos, right, rpos = (static.df, sp, pdf, pp) if on_left else (pdf, pp, static.df, sp)
        lcols = [c for c in left.columns if c != WEIGHT]
        data = take(pick(left, lcols), lpos).get_columns() if lcols else []
        rdata = (
            take(pick(right, [s for s, _ in right_out], [d for _, d in right_out]), rpos).get_columns()
            if right_out
            else []  # (no column of the right side kept: a frame of none has no rows to take)
        )
        pw = pdf.get_column(WEIGHT).to_numpy()[pp]
        w = pw if ones else checked_mul(pw, static.df.get_column(WEIGHT).to_numpy()[sp])
        return ZSet(pl.DataFrame([*data, *rdata, pl.Series(WEIGHT, w)]))
    return None


def _index(z: ZSet, keys: list[str]) -> tuple[KeyIndex, bool] | None:
    """`z`'s index by `keys` and whether its weights are all 1, from the `BUILD_AT`-th call by those
    keys on (None before, or where the keys cannot be indexed)."""
    memo = getattr(z, "probes", None)  # (a Z-set pickled before the slot existed has none)
    if memo is None:
        memo = z.probes = {}
    got = memo.get(tuple(keys), 0)
    if isinstance(got, int):
        if got + 1 < BUILD_AT:
            memo[tuple(keys)] = got + 1
            return None
        index = KeyIndex.build(z.df, keys)
        got = memo[tuple(keys)] = None if index is None else (index, all_ones(z.df.get_column(WEIGHT)))
    return got


class KeyIndex:
    """The rows of a frame by their key: the positions that sort them by packed key, and each key's
    run among those positions."""

    def __init__(
        self,
        lows: np.ndarray,
        shifts: list[int],
        widths: list[int],
        order: np.ndarray,
        starts: np.ndarray,
        keys: np.ndarray | None,
    ) -> None:
        self.lows, self.shifts, self.widths = lows, shifts, widths
        self.order = order  # positions of the indexed rows, sorted by packed key
        # dense (`keys` None): the run of packed key k is order[starts[k]:starts[k + 1]]; else that of
        # keys[i] is order[starts[i]:starts[i + 1]]
        self.starts = starts
        self.keys = keys

    @classmethod
    def build(cls, df: pl.DataFrame, keys: Sequence[str]) -> KeyIndex | None:
        """The index of `df`'s rows by the columns `keys`, or None where they are not integer columns
        without NULLs whose ranges pack into 62 bits."""
        cols = [df.get_column(k) for k in keys]
        if not cols or df.height == 0:
            return None
        if any(not isinstance(c.dtype, INTEGER_LIKE) or c.null_count() for c in cols):
            return None
        lows, widths = [], []
        for c in cols:
            lo, hi = int(c.min()), int(c.max())  # type: ignore[arg-type]
            lows.append(lo)
            widths.append((hi - lo).bit_length())
        if sum(widths) > _BITS:
            return None
        shifts = list(np.cumsum([0, *widths[:-1]]).tolist())
        low = np.array(lows, dtype=np.int64)
        packed = _pack([c.to_numpy() for c in cols], low, shifts)
        n = len(packed)
        span = int(packed.max()) + 1
        if span <= _DENSE_SLACK * n + _DENSE_MIN:  # each key's count, then the rows by key: O(n + span)
            starts = np.zeros(span + 1, dtype=np.int64)
            np.cumsum(np.bincount(packed, minlength=span), out=starts[1:])
            return cls(low, shifts, widths, _order(packed), starts, None)
        order = _order(packed)
        sorted_keys = packed[order]
        first = np.flatnonzero(np.concatenate(([True], sorted_keys[1:] != sorted_keys[:-1])))
        return cls(low, shifts, widths, order, np.append(first, n), sorted_keys[first])

    def probe(self, df: pl.DataFrame, keys: Sequence[str]) -> tuple[np.ndarray, np.ndarray] | None:
        """(positions in `df`, positions in the indexed frame) of each pair of rows with equal keys, in
        the order of `df`'s rows; None where `df`'s key columns are not integers without NULLs."""
        cols = [df.get_column(k) for k in keys]
        if any(not isinstance(c.dtype, INTEGER_LIKE) or c.null_count() for c in cols):
            return None
        vals = [c.to_numpy() for c in cols]
        inside = np.ones(df.height, dtype=bool)
        for v, lo, w in zip(vals, self.lows.tolist(), self.widths, strict=True):
            inside &= (v >= lo) & (v <= min(lo + (1 << w) - 1, _INT64_MAX))  # (fits its bits)
        rows = None if inside.all() else np.flatnonzero(inside)
        if rows is not None:
            vals = [v[rows] for v in vals]
        packed = _pack(vals, self.lows, self.shifts)
        if self.keys is None:
            span = len(self.starts) - 1
            hit = packed < span
            at = np.where(hit, packed, 0)
            lo = np.where(hit, self.starts[at], 0)
            hi = np.where(hit, self.starts[at + 1], 0)
        else:
            at = np.searchsorted(self.keys, packed)
            at = np.minimum(at, len(self.keys) - 1)
            hit = self.keys[at] == packed
            lo = np.where(hit, self.starts[at], 0)
            hi = np.where(hit, self.starts[at + 1], 0)
        counts = hi - lo
        total = int(counts.sum())
        if total == 0:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
        left = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
        # each match's place in its key's run: its index less its run's first index among the matches
        ends = np.cumsum(counts)
        at_run = np.arange(total, dtype=np.int64) - np.repeat(ends - counts - lo, counts)
        right = self.order[at_run]
        if rows is not None:
            left = rows[left]
        return left, right


def _order(packed: np.ndarray) -> np.ndarray:
    """The positions that sort the packed keys (non-negative): each key shifted up with its position in
    the low bits, where they fit in 63, and sorted by NumPy's sort of numbers (vectorized: ~10x its
    stable argsort); else that argsort."""
    n = len(packed)
    bits = (n - 1).bit_length()
    if int(packed.max()).bit_length() + bits > 63:
        return np.argsort(packed, kind="stable")
    v = (packed << bits) | np.arange(n, dtype=np.int64)
    v.sort()
    return v & np.int64((1 << bits) - 1)


def _pack(vals: list[np.ndarray], lows: np.ndarray, shifts: list[int]) -> np.ndarray:
    """Key columns as one int64 each row: each column less its low, shifted to its place, or-ed."""
    out = vals[0].astype(np.int64) - lows[0]
    for v, lo, s in zip(vals[1:], lows[1:].tolist(), shifts[1:], strict=True):
        out |= (v.astype(np.int64) - lo) << s
    return out
