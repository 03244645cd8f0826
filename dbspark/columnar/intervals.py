"""Scan trees and interval indices: `lftj-incremental-maintenance.txt` §3.1 and §3.2.

A scan tree holds an array's values at its leaves and at each internal node the ⊕ of its children (here
⊕ = max), so that the ⊕ of any range is the ⊕ of O(log n) subtrees and a changed leaf is repaired by
recomputing its O(log n) ancestors (§3.1). An interval tree is a scan tree over intervals sorted by
their start whose nodes hold the largest end below them (§3.2): the intervals containing x are found
by descending from the root into every subtree whose range starts at or before x and whose largest end
reaches x, in O((m + 1) log n) for m answers. Here the tree is a flat array (node k's children are 2k
and 2k + 1) and a descent is done for a whole batch of queries at once, one NumPy pass per tree level.

`IntervalIndex` keeps closed integer intervals [lo, hi] grouped by a key (an atom's prefix, §3.2's
α_1..α_m) with a payload row each (§3.2's γ: the bindings of the variables bound before), answers
"which intervals of key k contain x" for many (k, x) at once, and removes answers (§4.1: a matched
interval is removed) by setting their end below every query and repairing the tree. New intervals go
to a new sorted run; runs are merged when there are too many (the log-structured merge of a paged
B-tree's role in §3.1.1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dbspark.algebra.consolidate import sorted_unique

DEAD = np.int64(-(2**62))  # the end of a removed interval: below every query
SCAN = 48  # a key with at most this many intervals in a run is stabbed by reading them all


class ScanTree:
    """A max scan tree over an int64 array (§3.1): range maxima and point updates in O(log n)."""

    def __init__(self, values: np.ndarray) -> None:
        n = max(len(values), 1)
        self.size = 1 << (n - 1).bit_length()
        self.tree = np.full(2 * self.size, DEAD, dtype=np.int64)
        self.tree[self.size : self.size + len(values)] = values
        k = self.size
        while k > 1:
            k //= 2
            lo, hi = k, 2 * k
            self.tree[lo:hi] = np.maximum(self.tree[2 * lo : 2 * hi : 2], self.tree[2 * lo + 1 : 2 * hi : 2])

    def set(self, at: np.ndarray, values: np.ndarray) -> None:
        """Leaves `at` take `values`; their ancestors are recomputed, level by level."""
        node = sorted_unique(at.astype(np.int64)) + self.size
        self.tree[at.astype(np.int64) + self.size] = values
        while len(node) and node[0] > 1:
            node = sorted_unique(node // 2)
            self.tree[node] = np.maximum(self.tree[2 * node], self.tree[2 * node + 1])

    def reaching(self, starts: np.ndarray, ends: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each query q: the leaves i in [starts[q], ends[q]) whose value is >= x[q]; returned as
        (query, leaf) pairs. One pass per level, over the nodes still worth descending."""
        q = np.flatnonzero(ends > starts)
        node = np.ones(len(q), dtype=np.int64)
        width = self.size
        while width > 1:
            keep = self.tree[node] >= x[q]
            q, node = q[keep], node[keep]
            width //= 2
            q = np.repeat(q, 2)
            node = np.repeat(2 * node, 2) + np.tile(np.array([0, 1], dtype=np.int64), len(node))
            first = (node - (self.size // width)) * width  # the child's leaf range [first, first + width)
            keep = (first < ends[q]) & (first + width > starts[q])
            q, node = q[keep], node[keep]
        keep = self.tree[node] >= x[q]
        return q[keep], node[keep] - self.size


@dataclass
class Run:
    """One sorted run of an interval index: rows sorted by (group, lo), a scan tree of their ends."""

    keys: np.ndarray  # the rows' keys, ascending
    lo: np.ndarray
    hi: np.ndarray
    payload: np.ndarray  # (rows, width)
    tree: ScanTree

    @classmethod
    def build(cls, keys: np.ndarray, lo: np.ndarray, hi: np.ndarray, payload: np.ndarray) -> Run:
        order = np.lexsort((lo, keys))
        return cls(keys[order], lo[order], hi[order], payload[order], ScanTree(hi[order]))

    def stab(self, keys: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(query, row) for each live row of key keys[q] whose interval contains x[q]. A key of few rows
        (at most `SCAN` here) is read row by row, in one pass for all such queries; a larger one is
        searched by its start and the scan tree of its ends."""
        start = np.searchsorted(self.keys, keys, side="left")
        end = np.searchsorted(self.keys, keys, side="right")
        few = end - start <= SCAN
        if few.all() or not len(keys):
            return self._scan(np.flatnonzero(few), start[few], end[few], x)
        q1, r1 = self._scan(np.flatnonzero(few), start[few], end[few], x)
        many = np.flatnonzero(~few)
        q2, r2 = self._search(start[many], end[many], x[many])
        return np.concatenate([q1, many[q2]]), np.concatenate([r1, r2])

    def _scan(
        self, q: np.ndarray, start: np.ndarray, end: np.ndarray, x: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        take = end - start
        qq = np.repeat(q, take)
        row = np.repeat(start, take) + (np.arange(int(take.sum())) - np.repeat(np.cumsum(take) - take, take))
        hit = (self.lo[row] <= x[qq]) & (self.hi[row] >= x[qq])
        return qq[hit], row[hit]

    def _search(self, start: np.ndarray, end: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        # among a key's rows (sorted by lo) those with lo <= x: a binary search per query within its range
        lo, hi = start.copy(), end.copy()
        while True:
            active = lo < hi
            if not active.any():
                break
            mid = (lo + hi) // 2
            below = self.lo[np.minimum(mid, len(self.lo) - 1)] <= x
            lo = np.where(active & below, mid + 1, lo)
            hi = np.where(active & ~below, mid, hi)
        return self.tree.reaching(start, lo, x)

    def live(self) -> np.ndarray:
        return self.hi != DEAD


class IntervalIndex:
    """Closed intervals [lo, hi] of int64 codes grouped by an int64 key, each with a payload row of
    `width` int64 values (see the module docstring)."""

    def __init__(self, width: int, max_runs: int = 6) -> None:
        self.width = width
        self.max_runs = max_runs
        self.runs: list[Run] = []
        self.taken: list[tuple[Run, np.ndarray, np.ndarray]] = []  # since the last `mark`: undo's log
        self.live = 0  # intervals in the index

    def mark(self) -> tuple[list[Run], int]:
        """Start logging removals; the index as it is now (for `undo`)."""
        self.taken = []
        return list(self.runs), self.live

    def undo(self, marked: tuple[list[Run], int]) -> None:
        """Back to the moment of `mark` (runs merged since are dropped; removed intervals come back)."""
        for r, row, hi in reversed(self.taken):
            r.hi[row] = hi
            r.tree.set(row, hi)
        self.runs, self.live = marked
        self.taken = []

    def __len__(self) -> int:
        return self.live

    def add(self, keys: np.ndarray, lo: np.ndarray, hi: np.ndarray, payload: np.ndarray) -> None:
        if len(keys) == 0:
            return
        self.live += len(keys)
        self.runs.append(Run.build(keys, lo, hi, payload.reshape(len(keys), self.width)))
        while len(self.runs) > self.max_runs or (
            len(self.runs) > 1 and len(self.runs[-1].keys) * 2 > len(self.runs[-2].keys)
        ):
            b, a = self.runs.pop(), self.runs.pop()
            keep_a, keep_b = a.live(), b.live()
            self.runs.append(
                Run.build(
                    np.concatenate([a.keys[keep_a], b.keys[keep_b]]),
                    np.concatenate([a.lo[keep_a], b.lo[keep_b]]),
                    np.concatenate([a.hi[keep_a], b.hi[keep_b]]),
                    np.concatenate([a.payload[keep_a], b.payload[keep_b]]),
                )
            )

    def take(self, keys: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The intervals of key keys[q] containing x[q], removed from the index (§4.1: a matched
        interval is removed; evaluating its region records it anew). Returns (query, lo, hi, payload)
        with each interval once, however many queries it contains."""
        return self._stab(keys, x, remove=True)

    def find(self, keys: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(query, lo, hi, payload) for every pair of a query and an interval of its key containing its
        value; nothing removed."""
        return self._stab(keys, x, remove=False)

    def _stab(
        self, keys: np.ndarray, x: np.ndarray, remove: bool
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        qs, los, his, pays = [], [], [], []
        for r in self.runs:
            q, row = r.stab(keys, x)
            if len(row) == 0:
                continue
            if remove:
                row, first = np.unique(row, return_index=True)
                q = q[first]
            qs.append(q)
            los.append(r.lo[row])
            his.append(r.hi[row])
            pays.append(r.payload[row])
            if remove:
                self.taken.append((r, row, r.hi[row].copy()))
                self.live -= len(row)
                r.hi[row] = DEAD
                r.tree.set(row, np.full(len(row), DEAD, dtype=np.int64))
        if not qs:
            e = np.zeros(0, dtype=np.int64)
            return e, e, e, np.zeros((0, self.width), dtype=np.int64)
        return np.concatenate(qs), np.concatenate(los), np.concatenate(his), np.concatenate(pays)

    def rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Every live interval: (key, lo, hi, payload), in no particular order."""
        live = [r.live() for r in self.runs]
        if not self.runs:
            e = np.zeros(0, dtype=np.int64)
            return e, e, e, np.zeros((0, self.width), dtype=np.int64)
        return (
            np.concatenate([r.keys[k] for r, k in zip(self.runs, live, strict=True)]),
            np.concatenate([r.lo[k] for r, k in zip(self.runs, live, strict=True)]),
            np.concatenate([r.hi[k] for r, k in zip(self.runs, live, strict=True)]),
            np.concatenate([r.payload[k] for r, k in zip(self.runs, live, strict=True)]),
        )
