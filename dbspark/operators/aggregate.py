"""GROUP BY-aggregate (`dbsp-paper.txt` §7.2, §7.4): the lifted operator and the incremental one.

A spec of linear calls only (COUNT, SUM, AVG, VAR, STDDEV) is folded here, above the kernel, on every
engine: the change's accumulators per group (`aggfold.accumulate`), the trace's at those groups (a
seek), and the output's change from both (`aggfold.fold`), each fold a `cogroup` that the kernel runs
where the rows are; the accumulators are then added to the trace. MIN / MAX / MEDIAN / MODE and user
aggregates are still folded by each engine (`OperatorKernel.aggregate_state` / `aggregate_step`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import polars as pl

from dbspark.columnar import ordered_fold
from dbspark.columnar.aggfold import (
    G,
    accumulate,
    accumulator_schema,
    emitted_schema,
    fold,
    inexact,
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
    """The aggregate of a whole Z-set (not consolidated): one `cogroup` of its rows by the groups."""
    if kernel.known_empty(z) and spec.by:
        return kernel.empty(spec.output_schema())
    fn = partial(_whole, spec) if linear(spec) else partial(ordered_fold.whole, spec)
    return kernel.cogroup([z], spec.by, fn, spec.output_schema(), consolidated=True)


def _whole(spec: AggSpec, frames: list[Any]) -> Any:
    """The aggregate of whole groups' rows: their accumulators, folded into no earlier ones."""
    acc = accumulate(spec, frames)
    return fold(spec, False, [acc, acc.clear()])


class LinearState:
    """An incremental linear aggregate's state: its accumulators by group, whether the one row of an
    aggregate without GROUP BY exists yet and, for floating sums, the rows it emitted (`inexact`)."""

    def __init__(self, kernel: Kernel, spec: AggSpec) -> None:
        keys = keys_of(spec)
        self.trace = kernel.new_trace(key_schema(spec), keys, accumulator_schema(spec))
        self.emitted = kernel.new_trace(emitted_schema(spec), keys) if inexact(spec) else None
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
        if self.emitted is not None:
            parts.append(kernel.seek(self.emitted.snapshot(), dacc, on, exact=True))
        out = kernel.cogroup(parts, keys, partial(fold, spec, was), spec.output_schema(), None, True)
        kernel.trace_insert(self.trace, dacc, undo)
        if self.emitted is not None:
            cols = [(c, col(c)) for c in spec.output_schema()]
            kept = (
                out
                if spec.by
                else kernel.map(out, [(G, Cast(lit(0), pl.Int8())), *cols], emitted_schema(spec))
            )
            kernel.trace_insert(self.emitted, kept, undo)
        self.started = True
        undo.append(lambda: setattr(self, "started", was))
        return out

    def checkpoint(self) -> Any:
        return (self.trace.to_state(), self.started, self.emitted.to_state() if self.emitted else None)

    def restore(self, saved: Any) -> None:
        self.trace.restore(saved[0])
        self.started = saved[1]
        if self.emitted is not None:
            self.emitted.restore(saved[2])


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

    def init(self, kernel: Kernel, shape: Shape, in_shapes: list[Shape]) -> Any:
        if linear(self.spec):
            return LinearState(kernel, self.spec)
        return kernel.aggregate_state(self.spec)

    def eval(self, kernel: Kernel, state: Any, inputs: list[Any], undo: list) -> Any:
        if isinstance(state, LinearState):
            return state.step(kernel, self.spec, inputs[0], undo)
        return kernel.aggregate_step(state, inputs[0], undo)

    def checkpoint(self, kernel: Kernel, state: Any) -> Any:  # an engine's state may hold unpicklable handles
        return state.checkpoint() if hasattr(state, "checkpoint") else state

    def restore(self, kernel: Kernel, state: Any, saved: Any) -> Any:
        if hasattr(state, "restore"):
            state.restore(saved)
            return state
        return saved
