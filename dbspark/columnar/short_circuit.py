"""Short-circuit evaluation of a leapfrog join's quantified variables (`lftj-incremental-maintenance.txt`
§2.2.1), for the join maintained by sensitivity indices (`columnar/sensitivity.py`).

A rule `S(x, y) ← A(x, y), B(y, z)` needs, for each binding of its head's variables, only whether some
binding of the others completes it: `S(x, y) ← ∃z. A(x, y), B(y, z)`. With the head's variables first
in the join's order, the evaluation binds them as usual and then, for each head binding, searches the
quantified variables depth first and stops at the first completion whose every row has a positive
weight (a witness). The support count of §2.2 is not needed: the head is a set.

The search is vectorized over the bindings and bounded by rounds: at a quantified variable each binding
still searching takes the intersection's leader's first `limit` keys in its region (1, then 4, 16, ...
times more), their subtrees are searched the same way one level down, and the bindings that found a
witness stop. A binding without one goes on from the key after the last taken. So a head binding costs
about its first witness's share of the work, times a constant, and at most as much as a full
evaluation of its subtree, in O(log fan-out) rounds of NumPy calls per level.

What it records (soundness, with `docs/multiway-joins.md`, "Short-circuit evaluation"): every chunk is a
full evaluation of the part of the region it covers, so a head binding's records cover its subtree up
to where its search stopped. If it found no witness the whole subtree was read, as a full evaluation
reads it; if it found one, every row of the witness was read and recorded, so a change that removes the
witness matches a record, and a change anywhere else cannot make the binding's answer false.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from dbspark.columnar.intersections import first_keys
from dbspark.columnar.packed_trie import PackedTrie, find_sorted, pack
from dbspark.columnar.regions import Regions

Record = Callable[[int, int, np.ndarray, np.ndarray, np.ndarray, np.ndarray], None]
GROWTH = 4  # each round takes this many times more keys than the last


def exists(
    tries: list[PackedTrie],
    holders: list[list[int]],
    ends: list[np.int64],
    level: int,
    depth: list[int],
    keys: list[np.ndarray],
    prefix: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    record: Record | None,
) -> tuple[np.ndarray, np.ndarray]:
    """For each binding of the levels before `level` (its codes `prefix`, each atom's packed key `keys`
    at its depth `depth`), whether some binding of `level` in [lo, hi] and of every level after it
    completes it with rows of positive weight, and the first completion found (the witness: every
    level's code; rows of zeros where none); each operation read is passed to `record` (atom, depth,
    prefix key, lo, hi, payload) if given."""
    found = np.zeros(len(lo), dtype=bool)
    witness = np.zeros((len(lo), len(holders)), dtype=np.int64)
    hs = holders[level]
    active = np.arange(len(lo))
    start = lo.copy()
    limit = 1
    while len(active):
        b, c, ops, last, more, _ = first_keys(
            [tries[i] for i in hs],
            [depth[i] for i in hs],
            [keys[i][active] for i in hs],
            start[active],
            hi[active],
            ends[level],
            record is not None,
            limit,
        )
        if record is not None:
            for h, key, a, z, at in ops:
                record(hs[h], depth[hs[h]], key, a, z, prefix[active[at]])
        who = active[b]
        child_keys = [k[who] for k in keys]
        child_depth = list(depth)
        for i in hs:
            child_keys[i] = (child_keys[i] << np.int64(tries[i].bits[depth[i]])) | c
            child_depth[i] += 1
        child_prefix = np.concatenate([prefix[who], c[:, None]], axis=1)
        if level + 1 == len(holders):  # every atom's row is bound: a witness if all weigh > 0
            ok = np.ones(len(who), dtype=bool)
            for i, t in enumerate(tries):
                lk, lw = t.rows()
                if len(who):
                    ok &= lw[np.searchsorted(lk, child_keys[i])] > 0
            rows = child_prefix
        else:
            ok, rows = exists(
                tries,
                holders,
                ends,
                level + 1,
                child_depth,
                child_keys,
                child_prefix,
                np.full(len(who), -1, dtype=np.int64),
                np.full(len(who), ends[level + 1], dtype=np.int64),
                record,
            )
        first = np.unique(who[ok], return_index=True)[1]  # each binding's first witness of the round
        found[who[ok][first]] = True
        witness[who[ok][first]] = rows[ok][first]
        go = more & ~found[active]
        start[active[go]] = last[go] + 1
        active = active[go]
        limit *= GROWTH
    return found, witness


@dataclass(frozen=True)
class Heads:
    """The head bindings present (§2.2.1's head set), each with the witness its last search found: the
    head's codes packed (`bits`, the head levels') and sorted, and each witness's codes at every level.
    A step reads the old answers of its regions here instead of evaluating them on the old tries, and
    skips a head binding whose answer a change cannot move (`MaintainedJoin._step`)."""

    bits: tuple[int, ...]
    keys: np.ndarray
    witness: np.ndarray  # (n, levels)

    @classmethod
    def of(cls, bits: Sequence[int], rows: np.ndarray) -> Heads:
        """From an evaluation's rows (every level's codes, then the weight)."""
        keys = pack(list(rows[:, : len(bits)].T), bits) if len(rows) else np.zeros(0, np.int64)
        order = np.argsort(keys, kind="stable")
        return cls(tuple(bits), keys[order], rows[order, :-1])

    def find(self, heads: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For head bindings (rows of the head's codes): whether each is present, and its witness (rows
        of zeros where not)."""
        key = pack(list(heads.T), self.bits)
        at, here = find_sorted(self.keys, key)
        wit = np.zeros((len(key), self.witness.shape[1]), dtype=np.int64)
        wit[here] = self.witness[at[here]]
        return here, wit

    def within(self, regions: dict[int, Regions]) -> np.ndarray:
        """The present head bindings inside the regions, as an evaluation's rows (witness, weight 1): a
        region at a head level is a range of packed keys, one at the first quantified level (the whole
        subtree of its head binding) a single key."""
        h = len(self.bits)
        lows, highs = [], []
        for lv, r in regions.items():
            if lv >= h:
                k = pack(list(r.prefix[:, :h].T), self.bits)
                lows.append(k)
                highs.append(k)
                continue
            top = (1 << self.bits[lv]) - 2  # the largest code (the end marker is above every code)
            lo_cols = [*r.prefix.T, np.maximum(r.lo, 0)] + [np.zeros(len(r.lo), np.int64)] * (h - lv - 1)
            hi_cols = [*r.prefix.T, np.minimum(r.hi, top)] + [
                np.full(len(r.lo), (1 << b) - 1, np.int64) for b in self.bits[lv + 1 :]
            ]
            lows.append(pack(lo_cols, self.bits))
            highs.append(pack(hi_cols, self.bits))
        if not lows:
            return np.zeros((0, self.witness.shape[1] + 1), dtype=np.int64)
        a = np.searchsorted(self.keys, np.concatenate(lows))
        b = np.searchsorted(self.keys, np.concatenate(highs), side="right")
        take = np.maximum(b - a, 0)
        at = np.repeat(a, take) + (np.arange(int(take.sum())) - np.repeat(np.cumsum(take) - take, take))
        return np.concatenate([self.witness[at], np.ones((len(at), 1), dtype=np.int64)], axis=1)

    def update(self, old: np.ndarray, new: np.ndarray) -> Heads:
        """The set after a step whose regions held `old` (present before) and `new` (present now)."""
        h = len(self.bits)
        gone = pack(list(old[:, :h].T), self.bits) if len(old) else np.zeros(0, np.int64)
        pos = np.searchsorted(self.keys, gone)
        hit = pos < len(self.keys)
        hit[hit] = self.keys[pos[hit]] == gone[hit]
        keys, witness = np.delete(self.keys, pos[hit]), np.delete(self.witness, pos[hit], axis=0)
        fresh = Heads.of(self.bits, new)
        at = np.searchsorted(keys, fresh.keys)
        return Heads(
            self.bits, np.insert(keys, at, fresh.keys), np.insert(witness, at, fresh.witness, axis=0)
        )
