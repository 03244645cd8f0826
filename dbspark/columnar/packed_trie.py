"""Versioned tries of packed keys, and the tree surgery between two versions
(`lftj-incremental-maintenance.txt` §3.3 and §4.2.1).

For the maintenance of a leapfrog join (`columnar/sensitivity.py`) each atom's rows stay indexed from
one step to the next, as a trie over its columns in the join's variable order. A value is a stable code
(`Dictionary`: codes are given in sorted order to the values first seen together, then appended); a
node of depth d is its path's codes packed into one int64, `key_d = key_(d-1) << bits[d] | code_d`, so
that a node's children are the keys in [key << bits, (key + 1) << bits) of the next level and a
`seek_lub` is one binary search. Level d holds its sorted keys and, per key, the number of rows under it;
the last level holds each row's weight. `apply` makes the next version (the older one stays valid: the
arrays are not changed in place) and returns its tree surgery operations (§4.2.1): per depth, the
nodes that appeared or disappeared, and at the last depth every row whose weight changed (a weight is
part of what a join reads there, so a Z-set row's change of multiplicity is a change of the leaf).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from dbspark.algebra.consolidate import sorted_unique
from dbspark.errors import WeightError

MAX_BITS = 62  # a packed key stays below 2**62: room for the end marker of any level


class Dictionary:
    """A variable's values and their codes (0, 1, ...): stable once given."""

    def __init__(self, dtype: pl.DataType) -> None:
        self.values = pl.Series("v", [], dtype=dtype)
        self.integer = dtype.is_integer()
        self.sorted = np.zeros(0, dtype=np.int64)  # integers: the values sorted, and their codes
        self.sorted_codes = np.zeros(0, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.values)

    def encode(self, columns: Sequence[pl.Series]) -> list[np.ndarray]:
        """The codes of each column's values; values not seen before get new codes, in sorted order."""
        if not columns:
            return []
        if self.integer and not any(c.null_count() for c in columns) and self.values.null_count() == 0:
            return self._encode_integers(columns)
        allv = pl.concat([c.rename("v").cast(self.values.dtype) for c in columns], how="vertical")
        known = pl.DataFrame({"v": self.values, "code": np.arange(len(self.values), dtype=np.int64)})
        new = allv.unique().to_frame().join(known, on="v", how="anti", nulls_equal=True).sort("v")
        if new.height:
            self.values = pl.concat([self.values, new["v"]], how="vertical")
            known = pl.DataFrame({"v": self.values, "code": np.arange(len(self.values), dtype=np.int64)})
        out = []
        for c in columns:
            f = c.rename("v").cast(self.values.dtype).to_frame().with_row_index("i")
            got = f.join(known, on="v", how="left", nulls_equal=True).sort("i")
            out.append(got["code"].to_numpy().astype(np.int64))
        return out

    def _encode_integers(self, columns: Sequence[pl.Series]) -> list[np.ndarray]:
        """`encode` for integer columns without NULLs: binary searches in the sorted values."""
        arrays = [c.cast(pl.Int64).to_numpy() for c in columns]
        u = sorted_unique(np.concatenate(arrays))
        pos = np.searchsorted(self.sorted, u)
        known = pos < len(self.sorted)
        known[known] = self.sorted[pos[known]] == u[known]
        new = u[~known]
        if len(new):
            codes = np.arange(len(self.values), len(self.values) + len(new), dtype=np.int64)
            self.values = pl.concat(
                [self.values, pl.Series("v", new).cast(self.values.dtype)], how="vertical"
            )
            at = np.searchsorted(self.sorted, new)
            self.sorted = np.insert(self.sorted, at, new)
            self.sorted_codes = np.insert(self.sorted_codes, at, codes)
        return [self.sorted_codes[np.searchsorted(self.sorted, a)] for a in arrays]

    def decode(self, codes: np.ndarray) -> pl.Series:
        return self.values.gather(codes)


def find_sorted(keys: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each of `x`: its position in the sorted unique `keys` (clipped to the last) and whether it is
    there."""
    if not len(keys):
        return np.zeros(len(x), dtype=np.int64), np.zeros(len(x), dtype=bool)
    at = np.minimum(np.searchsorted(keys, x), len(keys) - 1)
    return at, keys[at] == x


def bits_for(n_codes: int) -> int:
    """Bits per code for a variable with n_codes values: room to double, and the end marker."""
    return max(2, int(2 * max(n_codes, 1) + 1).bit_length())


def pack(codes: Sequence[np.ndarray], bits: Sequence[int]) -> np.ndarray:
    """The packed key of each row's first len(codes) codes."""
    key = np.zeros(len(codes[0]) if codes else 0, dtype=np.int64)
    for c, b in zip(codes, bits, strict=False):
        key = (key << np.int64(b)) | c
    return key


def pack_offsets(columns: Sequence[tuple[np.ndarray, int]], bits: Sequence[int]) -> np.ndarray:
    """`pack` of each column's (values - offset), the key built in one array: shifted and added in
    place, the offsets subtracted once at the end. (Codes by subtraction, then `pack`, made seven
    arrays of the batch's length; on this machine a fresh array's pages cost more than the arithmetic:
    the largest iteration of 5,000-node transitive closure packed 32M derivations in 2.2 s, profiled.)
    The arithmetic wraps in uint64, so values far from 0 shift exactly: each code fits its bits, so
    the key's true value fits the key."""
    (first, lo), *rest = columns
    key = first.astype(np.uint64)  # (a copy: the key's one array)
    offset = lo
    for (v, lo), b in zip(rest, bits[1:], strict=False):
        key <<= np.uint64(b)
        key += v.view(np.uint64) if v.dtype == np.int64 else v.astype(np.uint64)
        offset = (offset << b) + lo
    key -= np.uint64(offset % 2**64)
    return key.view(np.int64)


def unpack(keys: np.ndarray, bits: Sequence[int]) -> list[np.ndarray]:
    """The codes of packed keys of len(bits) levels."""
    out = []
    for b in reversed(bits):
        out.append(keys & np.int64((1 << b) - 1))
        keys = keys >> np.int64(b)
    return out[::-1]


def consolidate_rows(m: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows of codes with their weights summed per distinct row, zeros dropped."""
    if len(w) == 0:
        return m, w
    u, inv = np.unique(m, axis=0, return_inverse=True)
    s = np.zeros(len(u), dtype=np.int64)
    np.add.at(s, inv.ravel(), w)
    if np.any(np.abs(np.bincount(inv.ravel(), weights=w.astype(np.float64), minlength=len(u))) > 9.2e18):
        raise WeightError("weight overflow in a sum of weights (a multiway join's change)")
    keep = s != 0
    return u[keep], s[keep]


@dataclass(frozen=True)
class PackedTrie:
    """One version of an atom's trie (see the module docstring)."""

    bits: tuple[int, ...]
    keys: tuple[np.ndarray, ...]  # per depth, ascending
    counts: tuple[np.ndarray, ...]  # per depth: rows under the node; at the last depth, the row's weight

    @classmethod
    def empty(cls, bits: Sequence[int]) -> PackedTrie:
        if sum(bits) > MAX_BITS:
            raise ValueError(f"packed keys of {sum(bits)} bits (at most {MAX_BITS})")  # callers check first
        e = tuple(np.zeros(0, dtype=np.int64) for _ in bits)
        return cls(tuple(bits), e, e)

    @property
    def depth(self) -> int:
        return len(self.bits)

    def shift(self, d: int) -> np.int64:
        """How far a leaf key is shifted right to give its ancestor of depth d."""
        return np.int64(sum(self.bits[d + 1 :]))

    def end(self, d: int) -> np.int64:
        """The end marker of depth d's codes (above every code)."""
        return np.int64((1 << self.bits[d]) - 1)

    def rows(self) -> tuple[np.ndarray, np.ndarray]:
        """The leaf keys and their weights."""
        return self.keys[-1], self.counts[-1]

    def apply(self, leaf: np.ndarray, weight: np.ndarray) -> tuple[PackedTrie, list[np.ndarray]]:
        """The next version after adding `weight` to the rows of packed keys `leaf` (unique), and its
        tree surgery operations per depth (keys of that depth)."""
        last = self.depth - 1
        keys, counts, appear, disappear = _merge(self.keys[last], self.counts[last], leaf, weight)
        new_keys, new_counts, ops = [keys], [counts], [leaf[weight != 0]]
        # the levels above: a node's row count moves with the rows that appear or disappear under it
        moved = np.concatenate([appear, disappear])
        sign = np.concatenate([np.ones(len(appear), np.int64), -np.ones(len(disappear), np.int64)])
        for d in range(last - 1, -1, -1):
            u, inv = np.unique(moved >> self.shift(d), return_inverse=True)
            dc = np.bincount(inv, weights=sign, minlength=len(u)).astype(np.int64)
            keys, counts, appear_d, disappear_d = _merge(self.keys[d], self.counts[d], u, dc)
            new_keys.append(keys)
            new_counts.append(counts)
            ops.append(np.concatenate([appear_d, disappear_d]))
        return PackedTrie(self.bits, tuple(new_keys[::-1]), tuple(new_counts[::-1])), ops[::-1]


def _merge(
    keys: np.ndarray, counts: np.ndarray, add: np.ndarray, by: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Sorted unique `keys` with `counts` after adding `by` to the counts of `add` (unique, sorted; new
    keys inserted, keys whose count reaches 0 removed): new arrays, and the keys that appeared and went."""
    pos: np.ndarray = np.searchsorted(keys, add)
    found: np.ndarray = pos < len(keys)
    found[found] = keys[pos[found]] == add[found]
    at = pos[found]
    now = counts[at] + by[found]
    if np.any(np.abs(counts[at].astype(np.float64) + by[found]) > 9.2e18):
        raise WeightError("weight overflow in a sum of weights (a multiway join's input)")
    gone, stay, stay_count = at[now == 0], at[now != 0], now[now != 0]
    fresh = ~found & (by != 0)
    into = pos[fresh]
    new_keys = _splice(keys, gone, into, add[fresh])
    new_counts = _splice(counts, gone, into, by[fresh])
    # a kept key's position after the splice: less the keys removed before it, plus those inserted up to it
    new_counts[stay - np.searchsorted(gone, stay) + np.searchsorted(into, stay, side="right")] = stay_count
    return new_keys, new_counts, add[fresh], keys[gone]


SPLICE = 4096  # at most this many removals and insertions: the array is copied piece by piece


def _splice(a: np.ndarray, drop: np.ndarray, into: np.ndarray, values: np.ndarray) -> np.ndarray:
    """A new array: `a` without its elements at positions `drop` (sorted) and with `values` inserted
    before the positions `into` (sorted, positions of `a`). A few changes copy the unchanged runs
    between them whole (one memory copy each); many go through NumPy's masked delete and insert."""
    if len(drop) + len(into) > SPLICE:
        kept = np.delete(a, drop)
        return np.insert(kept, into - np.searchsorted(drop, into), values)
    if not len(drop) and not len(into):
        return a.copy()
    where = np.concatenate([into, drop])
    kind = np.concatenate([np.zeros(len(into), np.int8), np.ones(len(drop), np.int8)])
    order = np.lexsort((kind, where))  # at one position the insertion comes before the removal
    pieces = []
    prev = 0
    for k in order.tolist():
        p = int(where[k])
        pieces.append(a[prev:p])
        if k < len(into):
            pieces.append(values[k : k + 1])
            prev = p
        else:
            prev = p + 1
    pieces.append(a[prev:])
    return np.concatenate(pieces)
