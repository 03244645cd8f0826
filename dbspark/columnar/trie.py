"""Tries over sorted columnar rows, and the trie iterator's operations done for many positions at once.

`lftj-incremental-maintenance.txt` §1.3 and §4.1: leapfrog triejoin reads each atom of a rule body as a
trie over its variables in one global order, through iterators with `open` (go down to a node's first
child), `next` and `seek_lub` (the least key at or after a value, among a node's children) and `up`.
Here a trie is a few flat arrays built from the atom's rows sorted by its variables' codes, and an
operation is applied to a whole batch of positions (one per partial binding) with NumPy: `children` is
`open` with every `next` of a node at once (the range of its children), `seek` is `seek_lub` followed
by the test of whether it landed on the key. A variable's values are codes (`encode`): positions in the
sorted distinct values the atoms hold, so that one code means one value in every atom.

A node of level d is one distinct prefix (x_0, ..., x_d) of the sorted rows; `keys[d]` holds
parent * radix[d] + code for each node of level d, ascending (the rows are sorted, and a node's parent
number grows with it), so a seek of (parent, code) is one binary search of the whole level. The root is
node 0 of level -1; `starts[d][p]` is the first child of node p of level d-1 (one more entry, the end);
`leaf_starts[p]` the first of the rows (`rows`, positions in the atom's frame in trie order) under
node p of the last level.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from dbspark.algebra.consolidate import sorted_unique


def encode(columns: Sequence[pl.Series]) -> tuple[list[np.ndarray], int]:
    """Codes for the values of one variable in several atoms (each a column without NULLs, of one
    type): equal values get equal codes, in every column; and the number of codes (the radix)."""
    if all(c.dtype.is_integer() or c.dtype.is_float() for c in columns):  # NumPy's: no frame per call
        arrays = [c.to_numpy() for c in columns]
        distinct = sorted_unique(np.concatenate(arrays))
        return [np.searchsorted(distinct, a).astype(np.int64) for a in arrays], max(len(distinct), 1)
    values = pl.concat([c.rename("v") for c in columns], how="vertical").unique().sort()
    codes = [values.search_sorted(c).cast(pl.Int64).to_numpy() for c in columns]
    return codes, max(len(values), 1)


@dataclass(frozen=True)
class Trie:
    """An atom's rows as a trie over its variables (in the join's order); see the module docstring."""

    keys: tuple[np.ndarray, ...]
    codes: tuple[np.ndarray, ...]
    starts: tuple[np.ndarray, ...]
    radix: tuple[int, ...]
    rows: np.ndarray
    leaf_starts: np.ndarray

    @property
    def depth(self) -> int:
        return len(self.keys)

    @classmethod
    def build(cls, codes: Sequence[np.ndarray], radix: Sequence[int], n: int) -> Trie:
        """The trie of `n` rows whose level-d codes are `codes[d]` (the rows in any order)."""
        order = np.lexsort(tuple(reversed(codes))) if codes else np.arange(n, dtype=np.int64)
        sorted_codes = [c[order] for c in codes]
        keys, node_codes, starts = [], [], []
        ids = np.zeros(n, dtype=np.int64)  # each row's node at the level above (the root: 0)
        above = 1  # nodes at the level above
        new = np.zeros(n, dtype=bool)
        if n:
            new[0] = True
        for c, r in zip(sorted_codes, radix, strict=True):
            if n:
                new[1:] |= c[1:] != c[:-1]
            first = np.flatnonzero(new)
            parent = ids[first]
            keys.append(parent * np.int64(r) + c[first])
            node_codes.append(c[first])
            starts.append(np.searchsorted(parent, np.arange(above + 1)))
            ids = np.cumsum(new, dtype=np.int64) - 1
            above = len(first)
        leaf_starts = np.searchsorted(ids, np.arange(above + 1)) if codes else np.array([0, n])
        return cls(tuple(keys), tuple(node_codes), tuple(starts), tuple(radix), order, leaf_starts)

    def children(self, d: int, parents: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each node of level d-1 in `parents`: the range [lo, hi) of its children at level d."""
        s = self.starts[d]
        return s[parents], s[parents + 1]

    def seek(self, d: int, parents: np.ndarray, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each (parent, code): whether the parent has a child of that code at level d, and its node."""
        level = self.keys[d]
        want = parents * np.int64(self.radix[d]) + codes
        at = np.searchsorted(level, want)
        if len(level) == 0:
            return np.zeros(len(want), dtype=bool), at
        found = level[np.minimum(at, len(level) - 1)] == want
        return found & (at < len(level)), at

    def leaves(self, parents: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each node of the last level (the root if the trie has no level): its rows' range in `rows`."""
        return self.leaf_starts[parents], self.leaf_starts[parents + 1]
