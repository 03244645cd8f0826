"""Nested traces: the changes of a stream over nested time (outer step t0, iteration t1), on the kernel.

`shared/notes/nested-incremental.md` and `rhizome-dbsp-implementation-notes.txt` §2.9.11-2.9.13:
the doubly-incremental join and distinct need, for the current time t = (t0, t1) and a set of keys,

- `col(j)`  = Σ_{i0 < t0} x[i0][j]            (earlier steps, iteration j: the w2 part at j = t1),
- `prefix(j)` = Σ_{i0 < t0, i1 <= j} x[i0][i1]  (earlier steps, iterations up to j),
- `row`     = Σ_{i1 < t1} x[t0][i1]            (this step, earlier iterations: the w3 part).

Time is a column: earlier steps are ONE kernel trace whose rows carry their iteration in `ITER`,
consolidated along t0 (the note's "Garbage" section: the trace is bounded by iterations × distinct
keys), so a nested trace is an ordinary trace of the engine: on Spark, hash buckets of sorted runs
under the state directory, sought at a change's keys in the driver or in Spark's tasks. A seek by key
returns a key's rows at every iteration at once, and the caller splits them with filters on `ITER`:
before, at and after the current iteration. This step's changes go into `row`, a scratch trace of the
step (`Kernel.scratch`), and per iteration into `current`, added to the trace of earlier steps with
their iteration when the outer step ends. Every mutation registers an undo, so a failed step rolls back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import polars as pl

from dbspark.ir.expr import Expr, col, lit

if TYPE_CHECKING:
    from dbspark.engines.base import Kernel, Value

ITER = "__it"


class NestedTrace:
    """The state of one input of a doubly-incremental operator.

    `rows=False`: this step's changes are not kept for seeks (`row_snapshot` stays empty), only per
    iteration for the step's end: for a join side whose partner is static (`NestedJoin.static`), the
    only reader of this side's `row`, the term row(A) ⋈ b, has b = 0 at every iteration but the first,
    where row(A) (the iterations before) is empty."""

    def __init__(self, kernel: Kernel, schema: pl.Schema, keys: Sequence[str], rows: bool = True) -> None:
        self.kernel = kernel
        self.rows = rows
        self.data = pl.Schema(schema)
        self.keys = tuple(keys)
        self.timed = pl.Schema([*self.data.items(), (ITER, pl.Int64())])
        self.cols: Any = kernel.new_trace(self.timed, self.keys)
        self._new_row()
        self.current: dict[int, Value] = {}  # this step's change at each iteration

    def _new_row(self) -> None:
        with self.kernel.scratch():
            self.row = self.kernel.new_trace(self.data, self.keys)
        self.row_snap: Value = self.row.snapshot()

    def seek_cols(self, probe: Value, on: Sequence[tuple[str, str]], exact: bool) -> Value | None:
        """Earlier steps' rows (with their iteration `ITER`) at the probe's keys; None if there are none."""
        snap = self.cols.snapshot()  # (taken afresh: a step's flush gives the trace new files)
        if self.kernel.is_empty(snap):
            return None
        return self.kernel.seek(snap, probe, on, exact)

    def row_snapshot(self) -> Value:
        """This step's changes at the iterations so far."""
        return self.row_snap

    def add(self, t1: int, change: Value, undo: list) -> None:
        """Record this step's change at iteration t1."""
        k = self.kernel
        prev = self.current.get(t1)
        self.current[t1] = change if prev is None else k.plus(prev, change)
        undo.append(lambda: self._set_current(t1, prev))
        if not self.rows:
            return
        snap = self.row_snap
        self.row_snap = k.trace_insert(self.row, self.row_change(change), undo)
        undo.append(lambda: setattr(self, "row_snap", snap))

    def row_change(self, change: Value) -> Value:
        """What a change adds to this step's part `row`: the change."""
        return change

    def _set_current(self, t1: int, v: Value | None) -> None:
        if v is None:
            self.current.pop(t1, None)
        else:
            self.current[t1] = v

    def end_step(self, undo: list) -> None:
        """Add this step's per-iteration changes, with their iteration, to the trace of earlier steps."""
        k = self.kernel
        saved = (self.row, self.row_snap, self.current)

        def restore() -> None:
            self.row, self.row_snap, self.current = saved

        undo.append(restore)
        if self.current:
            timed = [
                k.map(c, [*[(n, col(n)) for n in self.data], (ITER, lit(t1))], self.timed)
                for t1, c in sorted(self.current.items())
            ]
            k.trace_insert(self.cols, self.merged(total(k, timed)), undo)
        self._new_row()
        self.current = {}

    def merged(self, change: Value) -> Value:
        """What a step's timed change adds to the trace of earlier steps: the change, consolidated."""
        return self.kernel.consolidate(change)

    # checkpoints
    def to_state(self) -> Any:
        return self.cols.to_state()

    def restore(self, saved: Any) -> None:
        self.cols.restore(saved)


def total(kernel: Kernel, parts: list[Value]) -> Value:
    """The sum of `parts`, added as a balanced tree: a chain of pluses would copy the first parts once
    per later one (a step of many iterations ends with one part per iteration), and a plan's depth
    grows with the log of their number."""
    while len(parts) > 1:
        parts = [
            kernel.plus(*parts[i : i + 2]) if i + 1 < len(parts) else parts[i]
            for i in range(0, len(parts), 2)
        ]
    return parts[0]


def timed_rows(kernel: Kernel, v: Value, cmp: str, t1: int) -> Value:
    """The rows of a timed value `v` whose iteration compares `cmp` ('<', '<=', '==', '>') to t1, the
    iteration still a column (enough where the reader ignores it: a join's right side, `combine`)."""
    it = col(ITER)
    preds: dict[str, Expr] = {"<": it < t1, "<=": it <= t1, "==": it.eq(t1), ">": it > t1}
    return kernel.filter(v, preds[cmp])


def at_iterations(
    kernel: Kernel, v: Value, cmp: str, t1: int, cols: Sequence[str], schema: pl.Schema
) -> Value:
    """`timed_rows` projected on `cols` (the iteration dropped)."""
    return kernel.map(timed_rows(kernel, v, cmp, t1), [(c, col(c)) for c in cols], schema)
