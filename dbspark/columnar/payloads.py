"""An input's own columns (those no other input of a join reads) coded under its join key, for the
delta join over indexed tries (`columnar/indexed_delta.py`).

A trie packs a row's codes into one int64 (`columnar/packed_trie.py`), so every level's bits count
against 62. The join needs only the join columns as levels: the others (a payload: a price, a label, a
timestamp) are read once a binding is found, to be copied into the output. So each input keeps them as
one more level, a *local code*: the distinct tuples of its own columns under one join key are numbered
0, 1, 2, ... in the order they arrive, and the level's bits follow the largest number of them under any
key (one, for an edge table with a label per edge), not the number of distinct values of each column.
A code is stable once given (the tries hold it), including after the rows it names are deleted, as a
`Dictionary`'s are.

The codes given are entries (join codes, own values, local code) found by two sorted arrays of hashes
(`algebra.keyhash.stable_hash`): of (join codes, own values), to code a change, and of (join codes,
local code), to decode a step's output; a hash found is checked against the entry (values equal as a
join's, NULLs equal), and entries whose hashes collide are all looked at, so a lookup is exact. A step
costs binary searches for its rows and one copy of the arrays when it gives new codes (`np.insert`),
not a pass over the entries. Arrays and frames are replaced, never changed in place, so a step's undo
is keeping the old ones.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from dbspark.algebra.keyhash import column_hash, stable_hash
from dbspark.columnar.packed_trie import pack

CHUNKS = 32  # the own values' frame is made one chunk past this many (a gather across chunks is slow)


@dataclass(frozen=True)
class Runs:
    """An index from int64 / uint64 keys (not unique) to entries that only grows: sorted runs, each at
    least twice the next, so that adding m entries merges O(m log n) rows over time and a lookup is a
    binary search per run. Immutable: `add` returns the next version."""

    runs: tuple[tuple[np.ndarray, np.ndarray], ...] = ()

    def add(self, keys: np.ndarray, entries: np.ndarray) -> Runs:
        if not len(keys):
            return self
        order = np.argsort(keys, kind="stable")
        runs = [*self.runs, (keys[order], entries[order])]
        while len(runs) > 1 and 2 * len(runs[-1][0]) > len(runs[-2][0]):
            (k1, e1), (k2, e2) = runs[-2], runs.pop()
            k, e = np.concatenate([k1, k2]), np.concatenate([e1, e2])
            order = np.argsort(k, kind="stable")
            runs[-1] = (k[order], e[order])
        return Runs(tuple(runs))

    def count(self, keys: np.ndarray) -> np.ndarray:
        """How many entries each key has."""
        n = np.zeros(len(keys), dtype=np.int64)
        for k, _ in self.runs:
            n += np.searchsorted(k, keys, "right") - np.searchsorted(k, keys, "left")
        return n

    def find(self, keys: np.ndarray, same: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
        """The entry of each key (-1: none): the first of the entries with that key that `same`
        (queries, entries -> bool per pair) accepts."""
        out = np.full(len(keys), -1, dtype=np.int64)
        for k, es in self.runs:
            q = np.nonzero(out < 0)[0]
            if not len(q):
                break
            lo, hi = np.searchsorted(k, keys[q], "left"), np.searchsorted(k, keys[q], "right")
            has = hi > lo
            q, lo, hi = q[has], lo[has], hi[has]
            if not len(q):
                continue
            first = es[lo]
            ok = same(q, first)
            out[q[ok]] = first[ok]
            for i, a, b in zip(q[~ok].tolist(), (lo[~ok] + 1).tolist(), hi[~ok].tolist(), strict=True):
                for e in es[a:b].tolist():  # only where two entries' keys collide
                    if same(np.array([i]), np.array([e]))[0]:
                        out[i] = e
                        break
        return out


def _hashed(s: pl.Series) -> pl.Series:
    """A column by its values' 64-bit hashes (`algebra.keyhash.column_hash`; where it has none, a list or
    a struct, Polars' hash with fixed seeds: a hash lives only in this process, never in a checkpoint)."""
    try:
        return pl.Series(s.name, column_hash(s), dtype=pl.UInt64)
    except TypeError:
        return s.hash(seed=0).rename(s.name)


def _equal_rows(ka: np.ndarray, oa: pl.DataFrame, kb: np.ndarray, ob: pl.DataFrame) -> np.ndarray:
    """Whether each row (join codes `ka`, own values `oa`) equals its partner in `kb`, `ob` (values equal
    as a join's: NULLs equal, -0.0 and 0.0 equal, NaNs equal)."""
    ok = (ka == kb).all(axis=1)
    for c in oa.columns:
        ok &= oa[c].eq_missing(ob[c]).to_numpy()
    return ok


class Payloads:
    """The local codes of one kind of input's own columns (`schema`, positional names) under its
    `keys` join columns' codes (module docstring). Inputs of one row type with their own columns at the
    same positions (a self-join) share one, so that equal rows have equal codes."""

    def __init__(self, keys: int, schema: pl.Schema) -> None:
        self.keys = [f"__k{i}" for i in range(keys)]
        self.own = list(schema)
        self.values = pl.DataFrame(schema=schema)  # entry e's own columns: row e
        self.n = 0  # entries
        self.codes = np.zeros((16, keys + 1), dtype=np.int64)  # entry e's join codes and local code: row e
        self.by_row = Runs()  # hash of (join codes, own values) -> entry
        self.by_key = Runs()  # hash of the join codes -> entry (their count is the next local code)
        self.by_leaf = Runs()  # (join codes, local code) packed by `leaf_bits` -> entry, up to `leaf_n`
        self.leaf_bits: tuple[int, ...] = ()
        self.leaf_n = 0
        self.most = 0  # the largest number of codes given under one join key's hash

    def __len__(self) -> int:
        """How many codes the level needs: 0 .. len - 1."""
        return self.most

    def state(self) -> tuple:
        return tuple(self.__dict__[k] for k in _STATE)

    def set_state(self, saved: tuple) -> None:
        for k, v in zip(_STATE, saved, strict=True):
            self.__dict__[k] = v

    def _keyed(self, keys: np.ndarray) -> pl.DataFrame:
        return pl.DataFrame([pl.Series(k, keys[:, i], dtype=pl.Int64) for i, k in enumerate(self.keys)])

    def encode(self, keys: np.ndarray, own: pl.DataFrame) -> np.ndarray:
        """The local code of each row: `keys` its join columns' codes (rows x keys), `own` its own
        columns (in this coder's order); tuples not seen under their key before get new codes."""
        own = own.rename(dict(zip(own.columns, self.own, strict=True)))
        kh = stable_hash(self._keyed(keys), self.keys)  # the join key's hash: a row's hash goes on from it
        h = stable_hash(
            pl.DataFrame([pl.Series("__k", kh), *(_hashed(own[c]) for c in self.own)]), ["__k", *self.own]
        )

        def same(q: np.ndarray, e: np.ndarray) -> np.ndarray:
            return _equal_rows(self.codes[e, :-1], self.values[e], keys[q], own[q])

        entry = self.by_row.find(h, same)
        new = np.nonzero(entry < 0)[0]
        if not len(new):
            return self.codes[entry, -1]
        # the distinct new tuples (by hash), each given a code in its first row's order
        _, first, inv = np.unique(h[new], return_index=True, return_inverse=True)
        reps = new[first]
        alike = _equal_rows(keys[new], own[new], keys[reps[inv]], own[reps[inv]])
        order = np.argsort(reps, kind="stable")
        ids = np.empty(len(reps), dtype=np.int64)
        ids[order] = np.arange(self.n, self.n + len(reps), dtype=np.int64)
        reps = reps[order]
        u, at, cnt = np.unique(kh[reps], return_inverse=True, return_counts=True)
        rank = np.empty(len(reps), dtype=np.int64)
        rank[np.argsort(at, kind="stable")] = np.arange(len(reps)) - np.repeat(np.cumsum(cnt) - cnt, cnt)
        given = self.by_key.count(u)
        loc = given[at] + rank  # after the codes given under the key's hash, in order of the rows
        self._append(np.column_stack([keys[reps], loc]), own[reps])
        self.by_row = self.by_row.add(h[reps], ids[order])
        self.by_key = self.by_key.add(kh[reps], ids[order])
        self.most = max(self.most, int((given + cnt).max()))
        entry[new[alike]] = ids[inv[alike]]
        out = self.codes[np.maximum(entry, 0), -1]
        if not alike.all():  # rows whose hash an earlier row of this change has: coded again, exactly
            rest = new[~alike]
            out[rest] = self.encode(keys[rest], own[rest])
        return out

    def _append(self, rows: np.ndarray, own: pl.DataFrame) -> None:
        """New entries: rows of (join codes, local code) and their own values. The buffer is written past
        the entries only (an earlier state, shorter, reads it as before) or copied into a larger one."""
        n, m = self.n, len(rows)
        if n + m > len(self.codes):
            grown = np.zeros((max(2 * len(self.codes), n + m), self.codes.shape[1]), dtype=np.int64)
            grown[:n] = self.codes[:n]
            self.codes = grown
        self.codes[n : n + m] = rows
        self.n = n + m
        values = pl.concat([self.values, own], how="vertical", rechunk=False)
        self.values = values.rechunk() if values.n_chunks() > CHUNKS else values

    def decode(self, keys: np.ndarray, loc: np.ndarray, bits: Sequence[int]) -> pl.DataFrame:
        """The own columns of rows of join codes `keys` (rows x keys) and local codes `loc`, whose
        codes pack in `bits` (the input's levels, the local code last)."""
        bits = tuple(bits)
        if bits != self.leaf_bits:  # the codes' bits grew: the leaves packed again
            self.by_leaf, self.leaf_bits, self.leaf_n = Runs(), bits, 0
        if self.leaf_n < self.n:
            rows = self.codes[self.leaf_n : self.n]
            packed = pack([rows[:, i] for i in range(rows.shape[1])], bits)
            self.by_leaf = self.by_leaf.add(packed, np.arange(self.leaf_n, self.n, dtype=np.int64))
            self.leaf_n = self.n
        want = pack([*(keys[:, i] for i in range(keys.shape[1])), loc], bits)
        entry = self.by_leaf.find(want, lambda q, e: np.ones(len(q), dtype=bool))
        if np.any(entry < 0):
            raise AssertionError("a local code that was never given")  # the tries hold only codes given
        return self.values[entry]


_STATE = ("values", "n", "codes", "by_row", "by_key", "by_leaf", "leaf_bits", "leaf_n", "most")
