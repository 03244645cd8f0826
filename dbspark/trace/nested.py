"""Nested traces: the changes of a stream over nested time (outer step t0, iteration t1).

`shared/notes/nested-incremental.md` and `rhizome-dbsp-implementation-notes.txt` §2.9.11-2.9.13: the
doubly-incremental join and distinct need, for the current time t = (t0, t1) and a set of keys,

- `col(j)`  = Σ_{i0 < t0} x[i0][j]            (earlier steps, iteration j: the w2 part at j = t1),
- `prefix(j)` = Σ_{i0 < t0, i1 <= j} x[i0][i1]  (earlier steps, iterations up to j),
- `row`     = Σ_{i1 < t1} x[t0][i1]            (this step, earlier iterations: the w3 part).

Earlier steps are consolidated along t0 into ONE spine whose rows carry their iteration in a column
`ITER` (the note's "Garbage" section: the trace is bounded by iterations × distinct keys). A seek by
key therefore returns a key's rows at every iteration at once, and the caller splits them: before,
at and after the current iteration. This step's changes go into `row` (appended every iteration)
and, per iteration, into `current`, folded into the spine when the outer step ends. Every mutation
registers an undo, so a failed step rolls back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl

from dbspark.algebra.zset import WEIGHT, with_weight
from dbspark.trace.spine import Spine, TraceSnapshot, consolidate_frame, key_hash, sorted_unique

ITER = "__it"


class NestedTrace:
    """The state of one input of a doubly-incremental operator."""

    def __init__(self, schema: pl.Schema, keys: Sequence[str]) -> None:
        self.data = pl.Schema(schema)
        self.schema = with_weight(schema)
        self.keys = tuple(keys)
        self.cols = Spine(self.keys, with_weight(schema, (ITER, pl.Int32())))
        self.row = Spine(self.keys, self.schema)  # this step, iterations so far
        self.current: list[pl.DataFrame] = []  # this step's change at each iteration

    def probe_hashes(self, probe: pl.DataFrame) -> np.ndarray:
        """Sorted unique key hashes of a probe (key columns cast to this trace's types)."""
        probe = self.row.snapshot().cast_probe(probe)
        return sorted_unique(key_hash(probe, self.keys))

    def seek_cols(self, hashes: np.ndarray) -> pl.DataFrame:
        """Earlier steps' rows (with their iteration `ITER`) whose key hash is probed.

        Hash collisions may add rows of other keys: joins and key-local operators handle those."""
        if not len(self.cols):
            return pl.DataFrame(schema=self.cols.schema)
        return self.cols.snapshot().seek_hashes(hashes)

    def row_snapshot(self) -> TraceSnapshot:
        return self.row.snapshot()

    def add(self, t1: int, change: pl.DataFrame, undo: list) -> None:
        """Record this step's change at iteration t1 (iterations are added in order)."""
        if change.height == 0:
            return
        n = len(self.current)
        if n <= t1:
            undo.append(lambda: self._truncate_current(n))
            self.current.extend(pl.DataFrame(schema=self.schema) for _ in range(t1 + 1 - n))
        prev_cur = self.current[t1]
        undo.append(lambda: self.current.__setitem__(t1, prev_cur) if t1 < len(self.current) else None)
        self.current[t1] = pl.concat([prev_cur, change.select(list(self.schema))], how="vertical")
        saved = list(self.row.batches)
        undo.append(lambda: setattr(self.row, "batches", saved))
        self.row.insert(change.select(list(self.schema)))

    def _truncate_current(self, n: int) -> None:
        del self.current[n:]

    def end_step(self, undo: list) -> None:
        """Fold this step's per-iteration changes into the spine of earlier steps."""
        saved_cols, saved_row, saved_cur = list(self.cols.batches), list(self.row.batches), self.current

        def restore() -> None:
            self.cols.batches = saved_cols
            self.row.batches = saved_row
            self.current = saved_cur

        undo.append(restore)
        frames = [
            c.with_columns(pl.lit(t1, pl.Int32).alias(ITER)) for t1, c in enumerate(self.current) if c.height
        ]
        if frames:
            change = pl.concat(frames, how="vertical").select(list(self.cols.schema))
            self.cols.insert(consolidate_frame(change, [WEIGHT]), consolidated=True)
        self.row = Spine(self.keys, self.schema)
        self.current = []

    # checkpoints
    def to_state(self) -> Any:
        return self.cols.to_state()

    def restore(self, saved: Any) -> None:
        self.cols.restore(saved)
