"""The engine kernel: the primitives operators, circuits and runtimes call on an engine.

Every call an operator or the runtime makes on a kernel is declared here, and every `kernel` parameter
above `engines/` is typed `Kernel` (a test checks both: `tests/test_boundary.py`). An engine supplies
its own batch type (a Z-set value: `ZSet` locally, a lazy `SparkZSet` on Spark), its own trace type
(an integral with lookup by key) and snapshots of traces; operators hand them back to the kernel
without looking inside, so they are `Value` and `Trace` here.

The protocol is split by concern (DESIGN.md, Engines):

- `ZSetKernel`: the Z-set group (`dbsp-paper.txt` §4.1), linear operators (Thm 3.3), bilinear ones
  (Thm 3.4) and the per-step non-linear `distinct`.
- `TraceKernel`: integrals with lookup by the keys of a change.
- `StepKernel`: the step lifecycle (begin, place the step's pushed changes in the driver or on the
  cluster, commit an output, end, abort) and values kept across steps.
- `StepKernel`'s `input_batch` turns the rows a user pushes into a batch (each engine coerces its own
  frames: Polars, or Spark DataFrames on the cluster).

Every operator is written once, above the kernel, as seeks, groups and folds: distinct's H
(`operators/distinct.py`: a seek and a `combine`), the doubly-incremental operators of recursive
scopes (`operators/nested.py`: seeks of nested traces whose time is a column, semi-joins, `support`,
`combine`), the top-k's window (`operators/topk.py`: the per-step `topk` on a change held in this
process, the integral's order read only to refill it), the bag, set and UNIQUE checks of a table's
change (`operators/checks.py`: a seek and a `combine` whose weight raises where a check fails), a
primary-key table's upserts and deletes (`operators/keyed.py`: a seek, `ordinal`, `shifted` and
`weigh`), the closure operator (`operators/closure.py`: its graph index on rows held in this process,
on every engine) and the GROUP BY (`operators/aggregate.py`: linear calls by two `cogroup`s of one
columnar fold, `columnar/aggfold.py`, and a seek of its accumulator trace; user aggregates with an
inverse likewise, `columnar/user_fold.py`; MIN / MAX / MEDIAN / MODE and other user aggregates by a
seek of the input's integral and a `cogroup` of `columnar/ordered_fold.py`, a large group ranked over
its sorted runs instead, `key_runs` and `columnar/ranked_fold.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

import polars as pl

from dbspark.ir.expr import Expr

Value = Any  # an engine's Z-set batch or trace snapshot, opaque above the kernel
Undo = list[Callable[[], Any]]  # callables that roll a step's state changes back, run in reverse
# a columnar function of whole groups (`ZSetKernel.cogroup`): each part's rows, one frame per part
GroupFn = Callable[[list[pl.DataFrame]], pl.DataFrame]


class Trace(Protocol):
    """The mutable integral behind a stateful operator: snapshots are immutable values of it."""

    schema: pl.Schema
    keys: tuple[str, ...]

    def snapshot(self) -> Value: ...
    def to_state(self) -> Any: ...
    def restore(self, saved: Any) -> None: ...


class ZSetKernel(Protocol):
    """Z-sets: the group, linear and bilinear operators, and the per-step non-linear ones."""

    name: str
    # whether the engine keeps state in this process's memory (a value held across steps costs no more
    # than a trace of it; on Spark state lives in files, and the driver's memory stays flat)
    state_in_process: bool

    # the group and conversions
    def empty(self, schema: pl.Schema, keys: Sequence[str] | None = None) -> Value: ...
    def plus(self, a: Value, b: Value) -> Value: ...
    def neg(self, a: Value) -> Value: ...
    def consolidate(self, a: Value, by_rows: bool = False) -> Value:
        """`a` with the weights of equal rows summed, rows of weight 0 left out. `by_rows`: a hint that
        its rows are to be sought and indexed by every column (a distinct's change; the local engine
        then keeps them in the order of their hash)."""
        ...

    def as_zset(self, a: Value) -> Value: ...
    def is_empty(self, a: Value) -> bool: ...
    def known_empty(self, a: Value) -> bool:
        """`a` certainly holds no entry, known without computing anything (a plan not yet run is not
        known empty): lets an operator skip the terms of a side that has no change."""
        ...

    # linear operators
    def filter(self, a: Value, pred: Expr) -> Value: ...
    def map(self, a: Value, exprs: Sequence[tuple[str, Expr]], schema: pl.Schema) -> Value: ...
    def flat_map(self, a: Value, fn: Callable[[dict], Any], schema: pl.Schema) -> Value: ...
    def index(self, a: Value, keys: Sequence[str]) -> Value: ...
    def weigh(self, a: Value, column: str) -> Value: ...
    def ranges(self, a: Value, lo: str, hi: str, step: str, column: str) -> Value:
        """Each row once per value of the integer range its columns `lo`, `hi`, `step` give (Soufflé's
        range: lo, lo + step, ... while short of hi, in the step's direction; step 0 gives lo alone unless
        lo = hi), in `column`, which replaces the three (a NULL bound or step: no rows)."""
        ...

    # keys and selections (weights ignored): what operators above the kernel build their lookups from
    def support(self, a: Value, cols: Sequence[str]) -> Value:
        """The distinct values of `cols` among a's rows, each with weight 1 (a's weights are ignored:
        a consolidated `a` gives the keys it changes)."""
        ...

    def semijoin(self, a: Value, b: Value, on: Sequence[tuple[str, str]], exact: bool) -> Value:
        """The rows of `a` (with their weights) whose columns `on[i][0]` equal `on[i][1]` of some row of
        `b` (b's weights ignored). `exact`: NULL equals NULL (rows as values); else a NULL matches nothing."""
        ...

    def combine(self, parts: Sequence[Value], by: Sequence[str], weight: Expr) -> Value:
        """Group the rows of all `parts` by `by` (NULL equals NULL), each part's summed weight in a
        column `__w<i>` (0 where it has no row of the group); the result has one row per group, of
        weight `weight` (an INTEGER expression over `by` and the sums; an error it raises rejects the
        step), rows of weight 0 left out. A part may carry columns besides `by` (they are ignored).
        Operators written above the kernel fold their state and changes with it (distinct's H: the
        change and the integral at its rows)."""
        ...

    def cogroup(
        self,
        parts: Sequence[Value],
        by: Sequence[str],
        fn: GroupFn,
        schema: pl.Schema,
        sums: pl.Schema | None = None,
        consolidated: bool = False,
    ) -> Value:
        """`fn` applied to the rows of `parts` group by group: the rows of every part whose `by` values
        are equal (NULL equals NULL) are in one call, together with other whole groups (all of them in
        one call on the local engine and for rows held in the driver; a partition's on Spark, inside
        its task, after one exchange of the parts by `by`; without `by`, one group, which exists even without
        rows: `fn` is called once, as a GROUP BY () has one group). A part's frame has
        its columns (a Z-set's data and weight; an accumulator value's keys and sums), possibly no
        rows. `fn` returns rows of `schema` with a weight, or with the summed columns `sums` instead (an
        aggregate's accumulators, for a trace made with those sums); `consolidated`: no two of its rows
        are equal. It is how an operator's fold is written once, in Polars, above the kernel
        (`columnar/aggfold.py`); `fn` must be picklable (Spark ships it to its tasks)."""
        ...

    def split(self, a: Value, column: str) -> list[tuple[Any, Value]]:
        """a's rows by the (non-NULL) value of `column`, in increasing order of the value, each part
        without the column (rows whose value is NULL are left out): time is a column, and a nested
        operator splits the work it queues by iteration. Reads the column's distinct values into
        Python (on Spark one action unless `a` is held in the driver)."""
        ...

    def ordinal(self, a: Value, column: str) -> Value:
        """a's rows, each with its place in a new BIGINT `column`: 0, 1, ... in a's row order where the
        engine keeps one (rows pushed from Python); where it has none (a pushed Spark DataFrame), 0 for
        the rows of negative weight and 1 for the others (its deletes before its inserts)."""
        ...

    def shifted(
        self, a: Value, by: Sequence[str], order: Sequence[str], outs: Sequence[tuple[str, str, int]]
    ) -> Value:
        """a's rows as they are, each with new columns: `(name, column, k)` is the value of `column` in
        the row k places before it (k < 0: after it; 0: the row itself) among the rows with its values
        of `by` (NULL equals NULL) in the order of `order`, NULL where there is none. `column` may be
        the weight (`WEIGHT`). Rows that tie in `order` come in an order of the engine's choosing."""
        ...

    # conversions: rows held in this process (a constant, a result read in Python)
    def from_local(self, z: Any) -> Value: ...
    def to_local(self, a: Value) -> Any: ...
    def is_local(self, a: Value) -> bool:
        """Whether a's rows are held in this process: `to_local` reads them without a job."""
        ...

    # bilinear operators
    def join(
        self,
        a: Value,
        b: Value,
        left_keys: Sequence[str],
        right_keys: Sequence[str],
        right_out: Sequence[tuple[str, str]],
    ) -> Value: ...
    def product(self, a: Value, b: Value, right_out: Sequence[tuple[str, str]]) -> Value: ...
    # per-step non-linear operators
    def distinct(self, a: Value) -> Value: ...
    def topk(self, a: Value, order: Any, limit: int | None, offset: int) -> Value: ...


class TraceKernel(Protocol):
    """Integrals: created empty, appended to (registering the undo), read as snapshots."""

    def new_trace(
        self, schema: pl.Schema, keys: Sequence[str], sums: pl.Schema | None = None, order: str | None = None
    ) -> Any:
        """An empty trace of rows of `schema` (its weight, if any, ignored) indexed by `keys`, whose
        entries carry a weight; with `sums`, those summed columns instead (an aggregate's
        accumulators: rows of the keys and the sums, one per group once consolidated). `order`: a
        column of an integer-like type, not a key, by which each run of the trace keeps the entries of
        a key sorted (NULLs first), so that `key_runs` can hand a large group over in order."""
        ...

    def trace_insert(self, trace: Any, delta: Value, undo: Undo) -> Value: ...
    def trace_drop(self, drops: Sequence[tuple[Any, Sequence[tuple[str, Any]]]], undo: Undo) -> None:
        """For each (trace, below) of `drops`, drop from the trace, after the step's `flush_step`, the
        entries whose every column of `below` is below its bound (a NULL is not): state no future
        change reaches (`circuit/waterline.py`). All at once (on Spark, one job). Snapshots taken
        before keep what they held."""
        ...

    def known_rows(self, a: Value) -> int | None:
        """The rows of a value if counting them costs nothing (metrics), else None."""
        return None

    def trace_clear(self, trace: Any, undo: Undo) -> None:
        """Empty a trace: the state it held is dropped (a recursive scope's state replaced by a recompute,
        `operators/auto_scope.py`); its files, if any, are deleted when the step after this one commits,
        as a merge's replaced runs are. Snapshots taken before keep what they held."""
        ...

    def trace_stats(self, trace: Any) -> tuple[int, int | None]:
        """(rows, bytes) a trace holds (metrics; bytes None where unknown)."""
        raise NotImplementedError

    def trace_keys(self, trace: Any, names: Sequence[str]) -> Value | None:
        """The rows of a trace that holds one row per key, as a consolidated value of its key columns
        (renamed `names`) and weights that shares the trace's memory, where the engine has it at hand
        (the local engine: a trace of one batch, its columns and hashes); else None."""
        ...

    def state_rows(self) -> int:
        """The entries (rows) held in all of this engine's traces: the size of the state."""
        ...

    def empty_snapshot(self, schema: pl.Schema, keys: Sequence[str]) -> Value: ...
    def seek(self, snap: Value, probe: Value, on: Sequence[tuple[str, str]], exact: bool) -> Value:
        """The rows of the snapshot `snap` (with their weights; not consolidated across its parts) whose
        key `on[i][1]` equals the column `on[i][0]` of some row of `probe` (probe weights ignored).
        `exact`: NULL equals NULL; else a NULL key matches nothing (SQL). Touches only those keys."""
        ...

    def key_runs(self, snap: Value, probe: pl.DataFrame, min_rows: int) -> dict[int, list[pl.DataFrame]]:
        """The entries of each key of `probe` (row i: a frame of the trace's key columns, held in this
        process) that has at least `min_rows` entries in the snapshot of a trace made with an `order`:
        its entries (data columns and weight) as one frame per run, each sorted by that column (NULLs
        first), read without the rest of the trace (zero-copy slices of the runs where the engine keeps
        them in memory or memory-mapped). Keys with fewer entries are left out, and so is a key whose
        entries the engine cannot slice apart (a hash shared with another key), and every key when the
        snapshot holds a change not computed yet (on Spark, pending on the cluster). For an operator
        that ranks a large group instead of reading it (`columnar.ranked_fold`)."""
        ...

    def owned(self, owner: str) -> AbstractContextManager[None]:
        """While the block runs, `new_trace` makes traces of `owner` (a node's key, `circuit/identity.py`):
        an engine that keeps files names them after it, and `release` forgets them together."""
        ...

    def release(self, owners: Iterable[str]) -> None:
        """Forget the traces of `owners` (the state of nodes a changed circuit no longer has): they leave
        `state_rows` at once; their files, if any, are deleted when the next step commits (until then
        the committed checkpoint names them)."""
        ...

    def scratch(self) -> AbstractContextManager[None]:
        """While the block runs, `new_trace` makes *scratch* traces: state of the current step only
        (a semi-naive scope's iterations, a nested trace's this-step part), never written to storage
        nor checkpointed."""
        ...

    def deferring(self) -> AbstractContextManager[None]:
        """While the block runs, `trace_insert` may defer the work of indexing a change until the trace
        is read (a seek of a snapshot taken since) or the block ends; what snapshots hold is unchanged.
        A recursive scope's step: a trace its iterations write but only the next step reads is indexed
        once, not at every iteration."""
        ...


class StepKernel(Protocol):
    """The step lifecycle and the values a circuit keeps from one step to the next."""

    def begin_step(self, t: int) -> None: ...
    def input_batch(
        self,
        rows: Any,
        schema: pl.Schema,
        weights: Any,
        where: str,
        not_null: Sequence[str] = (),
        key: Sequence[str] | None = None,
    ) -> Value:
        """The rows a user pushed to a table (`where` names it in errors) as a batch of `schema`,
        coerced as the table's types demand, `not_null` and a primary `key` checked."""
        ...

    def place(self, batches: Sequence[Value], loop: bool = False) -> list[Value]:
        """The same values, each held where the engine computes it best: on Spark, values on the
        cluster are read into the driver together (one job), each kept there if it is small. For a
        step's pushed changes, and for a recursive scope's imports and feedback at each iteration.
        `loop`: the values are a loop's feedback, read by its next iteration; those left on the
        cluster are computed once here, so that no iteration recomputes the plans of the ones before."""
        ...

    def commit_output(self, trace: Any, delta: Value, name: str, undo: Undo) -> Value: ...
    def flush_step(self, undo: Undo) -> None: ...
    def end_step(self, t: int) -> None: ...
    def abort_step(self) -> None: ...
    def sweep_uncommitted(self, committed_steps: int) -> None: ...
    def hold(self, a: Value) -> Value: ...
    def save_value(self, a: Value) -> Any: ...
    def load_value(self, saved: Any) -> Value: ...
    def close(self) -> None: ...


class Kernel(ZSetKernel, TraceKernel, StepKernel, Protocol):
    """Everything an engine implements; the type of every `kernel` above `engines/`."""
