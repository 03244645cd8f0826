"""Nested traces: the changes of a stream over nested time (outer step t0, iteration t1).

`shared/notes/nested-incremental.md` and `rhizome-dbsp-implementation-notes.txt` §2.9.11-2.9.13: the
doubly-incremental join and distinct need, for the current time t = (t0, t1) and a set of keys,

- `col(t1)`  = Σ_{i0 < t0} x[i0][t1]        (earlier steps, same iteration: the w2 part),
- `prefix(t1)` = Σ_{i0 < t0, i1 <= t1} x[i0][i1]  (earlier steps, iterations up to t1),
- `row`      = Σ_{i1 < t1} x[t0][i1]        (this step, earlier iterations: the w3 part).

Earlier steps are consolidated along t0 into one spine per iteration (`cols[t1]`), which bounds the
trace by (iterations) × (distinct keys) as the note's "Garbage" section asks; this step's changes go
into `row` (a spine, appended every iteration) and, per iteration, into `current`, folded into
`cols` when the outer step ends. Every mutation registers an undo, so a failed step rolls back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl

from dbspark.algebra.zset import WEIGHT
from dbspark.trace.spine import Spine, TraceSnapshot, consolidate_frame, key_hash, sorted_unique


class NestedTrace:
    """The state of one input of a doubly-incremental operator."""

    def __init__(self, schema: pl.Schema, keys: Sequence[str]) -> None:
        self.schema = pl.Schema({**schema, WEIGHT: pl.Int64})
        self.keys = tuple(keys)
        self.cols: list[Spine] = []  # cols[t1]: earlier steps' changes at iteration t1
        self.row = Spine(self.keys, self.schema)  # this step, iterations so far
        self.current: list[pl.DataFrame] = []  # this step's change at each iteration

    def _spine(self) -> Spine:
        return Spine(self.keys, self.schema)

    @property
    def depth(self) -> int:
        """The number of iterations at which earlier steps have changes."""
        return len(self.cols)

    def col(self, t1: int) -> TraceSnapshot | None:
        if t1 < len(self.cols) and len(self.cols[t1]):
            return self.cols[t1].snapshot()
        return None

    def prefix_frame(self, t1: int, probe: pl.DataFrame) -> pl.DataFrame:
        """Unconsolidated rows of prefix(t1) for the probed keys."""
        parts = [s.snapshot().seek_frame(probe) for s in self.cols[: t1 + 1] if len(s)]
        parts = [p for p in parts if p.height]
        if not parts:
            return pl.DataFrame(schema=self.schema)
        return pl.concat(parts, how="vertical")

    def probe_hashes(self, probe: pl.DataFrame) -> np.ndarray:
        """Sorted unique key hashes of a probe, computed once for every spine of this trace."""
        probe = self.row.snapshot().cast_probe(probe)
        return sorted_unique(key_hash(probe, self.keys))

    def seek_cols(self, t1: int, hashes: np.ndarray) -> list[pl.DataFrame]:
        """For i <= t1: the rows of cols[i] whose key hash is probed (empty frames included).

        Hash collisions may add rows of other keys; key-local operators compute those keys right too."""
        empty = pl.DataFrame(schema=self.schema)
        return [s.snapshot().seek_hashes(hashes) if len(s) else empty for s in self.cols[: t1 + 1]]

    def prefix_snapshots(self, t1: int) -> list[TraceSnapshot]:
        return [s.snapshot() for s in self.cols[: t1 + 1] if len(s)]

    def row_snapshot(self) -> TraceSnapshot:
        return self.row.snapshot()

    def add(self, t1: int, change: pl.DataFrame, undo: list) -> None:
        """Record this step's change at iteration t1 (iterations are added in order)."""
        while len(self.current) <= t1:
            n = len(self.current)
            self.current.append(pl.DataFrame(schema=self.schema))
            undo.append(lambda n=n: self._truncate_current(n))
        if change.height == 0:
            return
        prev_cur = self.current[t1]
        undo.append(lambda: self.current.__setitem__(t1, prev_cur))
        self.current[t1] = pl.concat([prev_cur, change.select(list(self.schema))], how="vertical")
        saved = list(self.row.batches)
        undo.append(lambda: setattr(self.row, "batches", saved))
        self.row.insert(change)

    def _truncate_current(self, n: int) -> None:
        del self.current[n:]

    def end_step(self, undo: list) -> None:
        """Fold this step's per-iteration changes into `cols` (consolidating along t0)."""
        saved_cols = [(s, list(s.batches)) for s in self.cols]
        n_cols = len(self.cols)
        saved_row, saved_cur = list(self.row.batches), self.current

        def restore() -> None:
            del self.cols[n_cols:]
            for s, b in saved_cols:
                s.batches = b
            self.row.batches = saved_row
            self.current = saved_cur

        undo.append(restore)
        for t1, change in enumerate(self.current):
            change = consolidate_frame(change, [WEIGHT])
            if change.height == 0:
                continue
            while len(self.cols) <= t1:
                self.cols.append(self._spine())
            self.cols[t1].insert(change, consolidated=True)
        self.row = self._spine()
        self.current = []

    # checkpoints
    def to_state(self) -> Any:
        return [s.to_state() for s in self.cols]

    def restore(self, saved: Any) -> None:
        self.cols = []
        for frames in saved:
            s = self._spine()
            s.restore(frames)
            self.cols.append(s)
