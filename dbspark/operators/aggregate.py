"""GROUP BY-aggregate (`dbsp-paper.txt` §7.2, §7.4): the lifted operator and the incremental one.

Both are written here once, above the kernel, for every engine; each fold is a `cogroup` that the
kernel runs where the rows are (in this process, or inside Spark's tasks after an exchange by group).

- A spec of linear calls only (COUNT, SUM, AVG, VAR, STDDEV; `LinearState`): the change's
  accumulators per group (`aggfold.accumulate`), the trace's at those groups (a seek), and the
  output's change from both (`aggfold.fold`); the accumulators are then added to the trace.
- A spec of linear calls and user aggregates that all have an inverse (`InvertibleState`,
  `incremental-aggregation-monotonic-programs.txt` §2.3): the linear accumulators as above, and the
  user calls' accumulated values by group in a trace of their own, a change folded into them by g and
  d (`user_fold.fold`: O(change)).
- A spec with user aggregates without an inverse, beside user or linear calls (`SemigroupState`,
  `lftj-incremental-maintenance.txt` §2.3.3): each group's rows under a scan tree whose leaves are
  pages of rows; a change refolds its pages and their ancestors (`scan_fold.fold`: O(change · log
  group) calls of g).
- Any other spec, with MIN / MAX / MEDIAN / MODE (and user aggregates beside them) (`OrderedState`,
  `incremental-aggregation-monotonic-programs.txt` §2.4: not invertible, a delete needs the group's
  values): the input's integral by group, sought at the change's groups and folded with the change
  (`ordered_fold.fold`: O(changed groups' sizes)). A group of at least `ranked_fold.BIG` entries, of
  a change held in this process, is not read: its runs are handed over sorted by the aggregated
  column (`key_runs`) and MIN / MAX / MEDIAN / MODE are ranked over them (`ranked_fold`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from dbspark.algebra.zset import ZSet
from dbspark.columnar import ordered_fold, ranked_fold, scan_fold, user_fold
from dbspark.columnar.aggfold import (
    G,
    accumulate,
    accumulator_schema,
    fold,
    key_schema,
    keys_of,
    linear,
)
from dbspark.ir.aggregate import AggSpec
from dbspark.ir.expr import Cast, col, lit
from dbspark.operators.base import NONLINEAR, Operator, Shape

if TYPE_CHECKING:
    from dbspark.engines.base import Kernel


def _label(name: str, spec: AggSpec) -> str:
    calls = ", ".join(
        f"{c.name}={getattr(c.func, 'name', c.func)}({c.arg or '*'})".replace("count_star", "count")
        for c in spec.calls
    )
    by = ", ".join(spec.by)
    return f"{name}[by ({by}): {calls}]"


@dataclass(frozen=True)
class StreamAggregate(Operator):
    """↑Agg: aggregate each step's whole Z-set. Without GROUP BY it yields one row even when empty (SQL)."""

    spec: AggSpec
    name = "stream_aggregate"
    kind = NONLINEAR

    def shape(self, ins: list[Shape]) -> Shape:
        return Shape(self.spec.output_schema())

    def label(self) -> str:
        return _label(self.name, self.spec)

    def eval(self, kernel: Kernel, state: Any, inputs: list[Any], undo: list) -> Any:
        return aggregate(kernel, inputs[0], self.spec)


def aggregate(kernel: Kernel, z: Any, spec: AggSpec) -> Any:
    """The aggregate of a whole Z-set (not consolidated): one `cogroup` of its rows by the groups. A
    floating sum is summed as a function of the multiset alone (`ordered_fold`'s exact sums): the
    nested scope subtracts the aggregate of one Z-set from that of another holding the same group's
    rows in another order, which must cancel bit for bit."""
    if kernel.known_empty(z) and spec.by:
        return kernel.empty(spec.output_schema())
    fn = partial(_whole, spec) if linear(spec) else partial(ordered_fold.whole, spec)
    return kernel.cogroup([z], spec.by, fn, spec.output_schema(), consolidated=True)


def _whole(spec: AggSpec, frames: list[Any]) -> Any:
    """The aggregate of whole groups' rows: their accumulators, folded into no earlier ones."""
    acc = accumulate(spec, frames)
    return fold(spec, False, [acc, acc.clear()])


def _keyed(spec: AggSpec) -> tuple[list[tuple[str, Any]], pl.Schema]:
    """The input's columns as an aggregate's traces keep them (with the constant group key `G` of an
    aggregate without GROUP BY): the expressions that make them from a change, and their schema."""
    cols = [(c, col(c)) for c in spec.input_schema] + ([] if spec.by else [(G, Cast(lit(0), pl.Int8()))])
    return cols, pl.Schema([(c, pl.Int8() if c == G else spec.input_schema[c]) for c, _ in cols])


class LinearState:
    """An incremental linear aggregate's state: its accumulators by group (with floating sums, a row
    per group and limb, `columnar/exactsum.py`), and whether the one row of an aggregate without GROUP
    BY exists yet."""

    def __init__(self, kernel: Kernel, spec: AggSpec) -> None:
        self.trace = kernel.new_trace(key_schema(spec), keys_of(spec), accumulator_schema(spec))
        self.started = False

    def step(self, kernel: Kernel, spec: AggSpec, delta: Any, undo: list) -> Any:
        """The output's change: -old, +new rows of the change's groups whose row changed."""
        if kernel.known_empty(delta) and (self.started or spec.by):
            return kernel.empty(spec.output_schema())
        was = self.started
        prev = self.trace.snapshot()
        keys = keys_of(spec)
        on = [(k, k) for k in keys]
        dacc = kernel.cogroup(
            [delta], spec.by, partial(accumulate, spec), key_schema(spec), accumulator_schema(spec), True
        )
        parts = [dacc, kernel.seek(prev, dacc, on, exact=True)]
        out = kernel.cogroup(parts, keys, partial(fold, spec, was), spec.output_schema(), None, True)
        kernel.trace_insert(self.trace, dacc, undo)
        self.started = True
        undo.append(lambda: setattr(self, "started", was))
        return out

    def traces(self) -> list[Any]:
        """The traces of the state, all by group (`circuit/waterline.py` collects their old groups)."""
        return [self.trace]

    def checkpoint(self) -> Any:
        return (self.trace.to_state(), self.started)

    def restore(self, saved: Any) -> None:
        self.trace.restore(saved[0])
        self.started = saved[1]


class OrderedState:
    """An incremental aggregate with ordered or user calls: the input's integral by group (its rows
    sorted by the aggregated column within a key where the calls can be ranked), and whether the one
    row of an aggregate without GROUP BY exists yet."""

    def __init__(self, kernel: Kernel, spec: AggSpec) -> None:
        keys = keys_of(spec)
        self.order = ranked_fold.order_column(spec)
        self.cols, self.schema = _keyed(spec)
        self.trace = kernel.new_trace(self.schema, keys, order=self.order)
        self.started = False

    def step(self, kernel: Kernel, spec: AggSpec, delta: Any, undo: list) -> Any:
        """The output's change: -old, +new rows of the change's groups whose row changed."""
        if kernel.known_empty(delta) and (self.started or spec.by):
            return kernel.empty(spec.output_schema())
        was = self.started
        keys = keys_of(spec)
        d = delta if spec.by else kernel.map(delta, self.cols, self.schema)
        prev = self.trace.snapshot()
        big, rest = self._ranked(kernel, spec, d, prev, was) if self.order else (None, d)
        if big is None or not kernel.known_empty(rest):
            found = kernel.seek(prev, rest, [(k, k) for k in keys], exact=True)
            fn = partial(ordered_fold.fold, spec, was)
            out = kernel.cogroup([rest, found], spec.by, fn, spec.output_schema(), None, True)
            big = out if big is None else kernel.plus(big, out)
        kernel.trace_insert(self.trace, d, undo)
        self.started = True
        undo.append(lambda: setattr(self, "started", was))
        return big

    def _ranked(self, kernel: Kernel, spec: AggSpec, d: Any, prev: Any, was: bool) -> tuple[Any, Any]:
        """The output change of the changed groups that are big enough to rank (`ranked_fold`), and the
        change of the other groups; (None, d) when no group is ranked or the change is not held in
        this process."""
        if not kernel.is_local(d) or kernel.known_empty(d):
            return None, d
        dl = kernel.to_local(d).df
        groups = dl.select(spec.by).unique()
        runs = kernel.key_runs(prev, groups, ranked_fold.BIG)
        if not runs:
            return None, d
        idx = sorted(runs)
        out = ranked_fold.step(spec, list(spec.by), groups[idx], [runs[i] for i in idx], dl, was)
        if out is None:
            return None, d
        small = groups.filter(~pl.Series(np.isin(np.arange(groups.height), idx)))
        rest = dl.join(small, on=list(spec.by), how="semi", nulls_equal=True)
        return kernel.from_local(out), kernel.from_local(ZSet(rest))

    def traces(self) -> list[Any]:
        return [self.trace]

    def checkpoint(self) -> Any:
        return (self.trace.to_state(), self.started)

    def restore(self, saved: Any) -> None:
        self.trace.restore(saved[0])
        self.started = saved[1]


class _UserState:
    """What the states of user aggregates share: the linear calls' accumulators by group (as
    `LinearState` keeps them), the change's rows as the traces keep them (`_keyed`), whether the one
    row of an aggregate without GROUP BY exists yet, and a checkpoint of every trace."""

    def __init__(self, kernel: Kernel, spec: AggSpec) -> None:
        self.acc = kernel.new_trace(key_schema(spec), keys_of(spec), accumulator_schema(spec))
        self.cols, self.schema = _keyed(spec)
        self.started = False

    def _change(self, kernel: Kernel, spec: AggSpec, delta: Any) -> tuple[Any, Any, Any]:
        """The change's accumulators by group, its rows (with `G` without GROUP BY) and the linear
        accumulators' entries at its groups."""
        dacc = kernel.cogroup(
            [delta], spec.by, partial(accumulate, spec), key_schema(spec), accumulator_schema(spec), True
        )
        d = delta if spec.by else kernel.map(delta, self.cols, self.schema)
        return dacc, d, kernel.seek(self.acc.snapshot(), dacc, [(k, k) for k in keys_of(spec)], True)

    def _started(self, undo: list) -> None:
        was = self.started
        self.started = True
        undo.append(lambda: setattr(self, "started", was))

    def traces(self) -> list[Any]:
        return [self.acc]

    def checkpoint(self) -> Any:
        return (*[t.to_state() for t in self.traces()], self.started)

    def restore(self, saved: Any) -> None:
        for t, s in zip(self.traces(), saved[:-1], strict=True):
            t.restore(s)
        self.started = saved[-1]


def _tagged(
    kernel: Kernel, both: Any, k: int, schema: pl.Schema, exprs: list[tuple[str, Any]] | None = None
) -> Any:
    """The rows of a fold's output tagged `K` = k (`user_fold`, `scan_fold`), as rows of `schema`."""
    exprs = exprs if exprs is not None else [(c, col(c)) for c in schema]
    return kernel.map(kernel.filter(both, col(user_fold.K).eq(lit(k))), exprs, schema)


class InvertibleState(_UserState):
    """An incremental aggregate of linear calls and user aggregates with an inverse (`user_fold`):
    the linear calls' accumulators by group, as `LinearState` keeps them, and the user calls'
    accumulated values by group, a Z-set of one row per group; O(change) per step."""

    def __init__(self, kernel: Kernel, spec: AggSpec) -> None:
        super().__init__(kernel, spec)
        self.user = kernel.new_trace(user_fold.user_schema(spec), keys_of(spec))

    def step(self, kernel: Kernel, spec: AggSpec, delta: Any, undo: list) -> Any:
        """The output's change: -old, +new rows of the change's groups whose row changed."""
        if kernel.known_empty(delta) and (self.started or spec.by):
            return kernel.empty(spec.output_schema())
        keys = keys_of(spec)
        dacc, d, lin = self._change(kernel, spec, delta)
        users = kernel.seek(self.user.snapshot(), dacc, [(k, k) for k in keys], True)
        fn = partial(user_fold.fold, spec, self.started)
        both = kernel.cogroup([dacc, d, lin, users], keys, fn, user_fold.out_schema(spec))
        out = _tagged(kernel, both, 0, spec.output_schema())
        kernel.trace_insert(self.acc, dacc, undo)
        kernel.trace_insert(self.user, _tagged(kernel, both, 1, user_fold.user_schema(spec)), undo)
        self._started(undo)
        return out

    def traces(self) -> list[Any]:
        return [self.acc, self.user]


class SemigroupState(_UserState):
    """An incremental aggregate with user calls that have no inverse (and user or linear calls beside
    them, `scan_fold.applies`): the linear calls' accumulators by group; the user calls' values by group
    with each group's tree depth (the roots); the input's rows by (group, page) and the scan trees'
    nodes below the roots (`scan_fold`, `lftj-incremental-maintenance.txt` §2.3.3): a step refolds the
    change's pages and their ancestors, O(change · log group) calls of g."""

    def __init__(self, kernel: Kernel, spec: AggSpec) -> None:
        super().__init__(kernel, spec)
        keys = keys_of(spec)
        self.geo = scan_fold.Geometry(scan_fold.PAGE)
        self.roots = kernel.new_trace(scan_fold.root_schema(spec), keys)
        self.records = kernel.new_trace(scan_fold.record_schema(self.schema), [*keys, scan_fold.PG])
        self.nodes = kernel.new_trace(scan_fold.node_schema(spec), [*keys, scan_fold.LVL, scan_fold.PAR])

    def step(self, kernel: Kernel, spec: AggSpec, delta: Any, undo: list) -> Any:
        """The output's change: -old, +new rows of the change's groups whose row changed."""
        if kernel.known_empty(delta) and (self.started or spec.by):
            return kernel.empty(spec.output_schema())
        keys = keys_of(spec)
        on = [(k, k) for k in keys]
        pg, lvl, par = scan_fold.PG, scan_fold.LVL, scan_fold.PAR
        dacc, d, lin = self._change(kernel, spec, delta)
        roots = kernel.seek(self.roots.snapshot(), dacc, on, True)
        fn = partial(scan_fold.probes, spec, self.geo)
        probes = kernel.cogroup([d, roots, lin], keys, fn, scan_fold.probe_schema(spec))
        rp = kernel.filter(probes, col(pg).is_not_null())
        np_ = kernel.filter(probes, col(lvl).is_not_null())
        recs = kernel.seek(self.records.snapshot(), rp, [*on, (pg, pg)], True)
        nodes = kernel.seek(self.nodes.snapshot(), np_, [*on, (lvl, lvl), (par, par)], True)
        fn = partial(scan_fold.fold, spec, self.geo, self.started, self.schema)
        parts = [dacc, d, lin, roots, recs, nodes]
        both = kernel.cogroup(parts, keys, fn, scan_fold.fold_schema(spec, self.schema))
        rec_schema = scan_fold.record_schema(self.schema)
        kept = set(keys) | {pg}
        rec_cols = [(c, col(c if c in kept else scan_fold.REC + c)) for c in rec_schema]
        out = _tagged(kernel, both, 0, spec.output_schema())
        kernel.trace_insert(self.acc, dacc, undo)
        kernel.trace_insert(self.roots, _tagged(kernel, both, 1, scan_fold.root_schema(spec)), undo)
        kernel.trace_insert(self.records, _tagged(kernel, both, 2, rec_schema, rec_cols), undo)
        kernel.trace_insert(self.nodes, _tagged(kernel, both, 3, scan_fold.node_schema(spec)), undo)
        self._started(undo)
        return out

    def traces(self) -> list[Any]:
        return [self.acc, self.roots, self.records, self.nodes]


State = LinearState | InvertibleState | OrderedState | SemigroupState


@dataclass(frozen=True)
class Aggregate(Operator):
    """(↑Agg)^Δ: the change of the aggregate, recomputing only the groups present in the input change."""

    spec: AggSpec
    name = "aggregate"
    kind = NONLINEAR
    stateful = True

    def shape(self, ins: list[Shape]) -> Shape:
        return Shape(self.spec.output_schema())

    def label(self) -> str:
        return _label(self.name, self.spec)

    def init(self, kernel: Kernel, shape: Shape, in_shapes: list[Shape]) -> State:
        if linear(self.spec):
            return LinearState(kernel, self.spec)
        if user_fold.invertible(self.spec):
            return InvertibleState(kernel, self.spec)
        if scan_fold.applies(self.spec):
            return SemigroupState(kernel, self.spec)
        return OrderedState(kernel, self.spec)

    def eval(self, kernel: Kernel, state: State, inputs: list[Any], undo: list) -> Any:
        return state.step(kernel, self.spec, inputs[0], undo)

    def checkpoint(self, kernel: Kernel, state: State) -> Any:
        return state.checkpoint()

    def restore(self, kernel: Kernel, state: State, saved: Any) -> Any:
        state.restore(saved)
        return state
