"""Order statistics of a large group read as slices of the sorted runs, without reading it whole.

A bucketed trace's run is sorted by the key hash and then by its data columns (`bucket_files.sort_run`),
so the rows of one key in one run are a contiguous range, and within it they are sorted by the first
data column after the keys. A group of 10^6 rows is therefore a few zero-copy slices of the
memory-mapped runs (`group_slices`: two binary searches per run), and an order statistic of its values
(MIN, MAX, the two middle values of MEDIAN) is found by binary search over the value domain, counting
the values at or below a candidate in every run (`SortedRuns`): O(runs · log n) probes per statistic
after one prefix sum of each slice's weights, instead of gathering, grouping and selecting 10^6 rows.

Entries are consolidated within a run but not across runs: a value's multiplicity is the sum of its
entries' weights in every run (a delete stored in a newer run is a negative entry), so counting by
prefix sums is exact, and a value whose multiplicity is negative (a delete of a value that is not
there) is found among the values that have a negative entry (`SortedRuns.negative`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import polars as pl
import pyarrow as pa

from dbspark.algebra.keyhash import bucket_of, stable_hash
from dbspark.trace.bucket_files import HASH, open_run
from dbspark.trace.bucketed import SHARED, BucketEntry, BucketLayout

_SAFE = 2**62  # a group whose weights could sum past this is not ranked here (no overflow checks)


def group_slices(
    layout: BucketLayout, files: Mapping[int, BucketEntry], probe: pl.DataFrame, min_rows: int
) -> dict[int, list[pa.Table]]:
    """The runs' entries of each probe key (row i of `probe`, the layout's key columns) that has at
    least `min_rows` of them, as zero-copy slices (one per run holding the key, without `__h`); keys
    with fewer entries, and keys whose range in a run also holds another key (a hash collision), are
    left out. `files` is a version of the layout's trace."""
    keys = list(layout.keys)
    if probe.height == 0 or not files:
        return {}
    probe = layout.cast_probe(probe)
    hs = stable_hash(probe, keys)
    buckets = bucket_of(hs, layout.n_buckets)
    ranges: list[list[tuple[str, int, int]]] = [[] for _ in range(probe.height)]
    sizes = np.zeros(probe.height, dtype=np.int64)

    def search(path: str, rows: np.ndarray) -> None:
        _, h = open_run(path)
        lo = np.searchsorted(h, hs[rows], side="left")
        n = np.searchsorted(h, hs[rows], side="right") - lo
        for r, a, m in zip(rows[n > 0], lo[n > 0], n[n > 0], strict=True):
            ranges[r].append((path, int(a), int(m)))
        sizes[rows] += n

    everyone = np.arange(probe.height)
    shared = files.get(SHARED)
    for rel in shared.paths if shared is not None else ():
        search(layout.path(rel), everyone)
    for b in np.unique(buckets):
        entry = files.get(int(b))
        if entry is not None:
            for rel in entry.runs():
                search(layout.path(rel), everyone[buckets == b])
    out: dict[int, list[pa.Table]] = {}
    for i in np.flatnonzero(sizes >= max(min_rows, 1)):
        want = probe.row(int(i))
        parts = []
        for path, a, m in ranges[i]:
            t = open_run(path)[0].slice(a, m)
            ends = (t.slice(0, 1), t.slice(m - 1, 1))  # sorted by the keys within a hash: both ends hold it
            if any(tuple(e.column(k)[0].as_py() for k in keys) != want for e in ends):
                break
            parts.append(t.drop_columns([HASH]))
        else:
            out[int(i)] = parts
    return out


def values_of(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A column's values as NumPy integers (its storage: days, microseconds, ...), without copying a
    single-chunk column; NULLs must have been sliced off."""
    if isinstance(col, pa.ChunkedArray):
        col = col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
    arr = col
    t = arr.type
    if pa.types.is_date32(t) or pa.types.is_time32(t):
        arr = arr.view(pa.int32())
    elif (
        pa.types.is_timestamp(t) or pa.types.is_date64(t) or pa.types.is_time64(t) or pa.types.is_duration(t)
    ):
        arr = arr.view(pa.int64())
    return arr.to_numpy(zero_copy_only=False)


def sorted_slice(t: pa.Table, arg: str, weight: str) -> tuple[np.ndarray, np.ndarray]:
    """A run's slice of one group as (values, weights) of its non-NULL `arg`, sorted ascending (NULLs
    sort first in a run)."""
    col = t.column(arg)
    nulls = col.null_count
    return values_of(col.slice(nulls)), values_of(t.column(weight).slice(nulls)).astype(np.int64, copy=False)


class SortedRuns:
    """A multiset of integers given as sorted runs of (value, weight) entries, a value's multiplicity
    being the sum of its entries' weights across the runs."""

    def __init__(self, runs: Sequence[tuple[np.ndarray, np.ndarray]] = ()) -> None:
        self.xs: list[np.ndarray] = []
        self.cws: list[np.ndarray] = []
        self.negs: list[np.ndarray] = []
        self.safe = True  # no prefix sum can leave int64
        for x, w in runs:
            self._add(x, w)

    def _add(self, x: np.ndarray, w: np.ndarray) -> None:
        if not len(x):
            return
        lo, hi = int(w.min()), int(w.max())
        self.safe &= max(hi, -lo) * len(w) < _SAFE
        self.xs.append(x)
        self.cws.append(np.cumsum(w, dtype=np.int64))
        if lo < 0:
            self.negs.append(x[w < 0])

    def with_run(self, x: np.ndarray, w: np.ndarray) -> SortedRuns:
        """These runs and one more (the prefix sums already computed are shared)."""
        out = SortedRuns()
        out.xs, out.cws, out.negs, out.safe = list(self.xs), list(self.cws), list(self.negs), self.safe
        out._add(x, w)
        return out

    def total(self) -> int:
        """The number of values (with multiplicity)."""
        return sum(int(cw[-1]) for cw in self.cws)

    def count_le(self, v: int) -> int:
        """How many values are at most `v`."""
        n = 0
        for x, cw in zip(self.xs, self.cws, strict=True):
            i = int(np.searchsorted(x, v, side="right"))
            if i:
                n += int(cw[i - 1])
        return n

    def multiplicity(self, vs: np.ndarray) -> np.ndarray:
        """The multiplicity of each of the values `vs`."""
        out = np.zeros(len(vs), dtype=np.int64)
        for x, cw in zip(self.xs, self.cws, strict=True):
            hi, lo = np.searchsorted(x, vs, side="right"), np.searchsorted(x, vs, side="left")
            out += np.where(hi > 0, cw[np.maximum(hi - 1, 0)], 0) - np.where(
                lo > 0, cw[np.maximum(lo - 1, 0)], 0
            )
        return out

    def negative(self) -> tuple[int, int] | None:
        """A value whose multiplicity is negative, with it; None if there is none."""
        cand = np.unique(np.concatenate(self.negs)) if self.negs else np.zeros(0, dtype=np.int64)
        if not len(cand):
            return None
        m = self.multiplicity(cand)
        bad = np.flatnonzero(m < 0)
        return (int(cand[bad[0]]), int(m[bad[0]])) if len(bad) else None

    def kth(self, k: int) -> int:
        """The k-th smallest value (0-based; 0 <= k < total()): the least v with count_le(v) > k,
        by binary search over [least value, greatest value]."""
        lo = min(int(x[0]) for x in self.xs)
        hi = max(int(x[-1]) for x in self.xs)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.count_le(mid) > k:
                hi = mid
            else:
                lo = mid + 1
        return lo
