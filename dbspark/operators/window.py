"""SQL window functions (`OVER (PARTITION BY ... ORDER BY ... [ROWS BETWEEN ...])`) as operators on Z-sets.

`StreamWindow` is the lifted operator: each step's Z-set, every row with its window values, folded per
partition (`columnar/window_fold.py`, one `Kernel.cogroup` by the partition keys: on Spark inside the
tasks, after an exchange by partition). Its incremental form `Window` keeps the input's integral
indexed by the partition keys and, for a change, reads the integral at the change's partitions only
(a seek), folds them before and after the change from each one's first changed row on
(`columnar/window_suffix.py`; whole partitions for calls over the whole partition), and emits the
difference: the folds follow the rows the change can move, not the table. Rows whose values do not
change cancel in the difference.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import polars as pl

from dbspark.columnar import window_fold, window_suffix
from dbspark.ir.expr import Cast, col, lit
from dbspark.ir.window import WindowSpec
from dbspark.operators.base import NONLINEAR, Operator, Shape

if TYPE_CHECKING:
    from dbspark.engines.base import Kernel

G = "__wg"  # the constant partition key of a window without PARTITION BY


def _label(name: str, spec: WindowSpec) -> str:
    calls = ", ".join(f"{c.out}={c.func}({c.arg or ''})" for c in spec.calls)
    return f"{name}[partition ({', '.join(spec.partition)}) order ({', '.join(k.column for k in spec.order)}): {calls}]"


def _out_schema(spec: WindowSpec, schema: pl.Schema) -> pl.Schema:
    return window_fold.expected_schema(spec, schema)


@dataclass(frozen=True)
class StreamWindow(Operator):
    """↑window: each step's whole Z-set with the calls' columns (one row per unit, weight 1)."""

    spec: WindowSpec
    name = "stream_window"
    kind = NONLINEAR

    def shape(self, ins: list[Shape]) -> Shape:
        return Shape(_out_schema(self.spec, ins[0].schema))

    def label(self) -> str:
        return _label(self.name, self.spec)

    def init(self, kernel: Kernel, shape: Shape, in_shapes: list[Shape]) -> Any:
        return shape.schema

    def checkpoint(self, kernel: Kernel, state: Any) -> Any:
        return None

    def restore(self, kernel: Kernel, state: Any, saved: Any) -> Any:
        return state

    def eval(self, kernel: Kernel, state: Any, inputs: list[Any], undo: list) -> Any:
        fn = partial(window_fold.whole, self.spec)
        return kernel.cogroup(inputs, list(self.spec.partition), fn, state, None, True)


class WindowState:
    """The input's integral, indexed by the partition keys (a constant key without PARTITION BY)."""

    def __init__(self, kernel: Kernel, spec: WindowSpec, in_schema: pl.Schema, out_schema: pl.Schema) -> None:
        self.keys = list(spec.partition) or [G]
        self.cols = [(c, col(c)) for c in spec.columns] + (
            [] if spec.partition else [(G, Cast(lit(0), pl.Int8()))]
        )
        self.schema = pl.Schema([(c, pl.Int8() if c == G else in_schema[c]) for c, _ in self.cols])
        self.out_schema = out_schema
        self.trace = kernel.new_trace(self.schema, self.keys)
        # a change folds its partitions from their first changed row on where the calls allow, else whole
        fold = window_suffix.change if window_suffix.eligible(spec, in_schema) else window_fold.change
        self.fold = partial(fold, spec)


@dataclass(frozen=True)
class Window(Operator):
    """(↑window)^Δ: the changed partitions folded before and after the change, their difference emitted."""

    spec: WindowSpec
    name = "window"
    kind = NONLINEAR
    stateful = True

    def shape(self, ins: list[Shape]) -> Shape:
        return Shape(_out_schema(self.spec, ins[0].schema))

    def label(self) -> str:
        return _label(self.name, self.spec)

    def init(self, kernel: Kernel, shape: Shape, in_shapes: list[Shape]) -> WindowState:
        return WindowState(kernel, self.spec, in_shapes[0].schema, shape.schema)

    def eval(self, kernel: Kernel, state: WindowState, inputs: list[Any], undo: list) -> Any:
        (delta,) = inputs
        if kernel.known_empty(delta):
            return kernel.empty(state.out_schema)
        d = kernel.map(delta, state.cols, state.schema)
        found = kernel.seek(state.trace.snapshot(), d, [(k, k) for k in state.keys], exact=True)
        out = kernel.cogroup([d, found], state.keys, state.fold, state.out_schema, None, True)
        kernel.trace_insert(state.trace, d, undo)
        return out

    def checkpoint(self, kernel: Kernel, state: WindowState) -> Any:
        return state.trace.to_state()

    def restore(self, kernel: Kernel, state: WindowState, saved: Any) -> Any:
        state.trace.restore(saved)
        return state
