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

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Any

import polars as pl

from dbspark.columnar import window_fold, window_suffix
from dbspark.ir.expr import Binary, Cast, col, lit
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
        # (a window without PARTITION BY: partitioned by the constant G)
        self.spec = spec if spec.partition else replace(spec, partition=(G,), columns=(*spec.columns, G))
        fold = window_suffix.change if window_suffix.eligible(spec, in_schema) else window_fold.change
        self.fold = partial(_without_g, partial(fold, self.spec))
        # rows below a waterline of the first ORDER BY column leave `trace` for their partitions' totals
        # (`Window.finish`, `circuit/garbage.py`)
        self.finished = None
        self.totals = window_suffix.totals_schema(self.spec, self.schema)
        if window_suffix.finishes(spec, in_schema):
            self.finished = kernel.new_trace(self.totals, self.keys)


def _without_g(fn: Callable[[list[pl.DataFrame]], pl.DataFrame], frames: list[pl.DataFrame]) -> pl.DataFrame:
    return fn(frames).drop(G, strict=False)


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
        on = [(k, k) for k in state.keys]
        frames = [d, kernel.seek(state.trace.snapshot(), d, on, exact=True)]
        if state.finished is not None:
            frames.append(kernel.seek(state.finished.snapshot(), d, on, exact=True))
        out = kernel.cogroup(frames, state.keys, state.fold, state.out_schema, None, True)
        kernel.trace_insert(state.trace, d, undo)
        return out

    def finish(self, kernel: Kernel, state: WindowState, below: Any, undo: list) -> list[tuple[Any, Any]]:
        """Fold the rows below `below` ((first ORDER BY column, bound): no later change reaches them) into
        their partitions' totals; returns the drops of those rows (`Kernel.trace_drop`), for the runtime
        to apply once the totals are written (`dbsp-paper.txt` §7.6: the window inside the integral)."""
        assert state.finished is not None
        ((c, v),) = below
        rows = kernel.filter(state.trace.snapshot(), Binary("lt", col(c), Cast(lit(v), state.schema[c])))
        if kernel.is_empty(rows):
            return []
        on = [(k, k) for k in state.keys]
        old = kernel.seek(state.finished.snapshot(), rows, on, exact=True)
        fn = partial(window_suffix.finish, state.spec)
        totals = kernel.cogroup([rows, old], state.keys, fn, state.totals, None, True)
        kernel.trace_insert(state.finished, totals, undo)
        return [(state.trace, below)]

    def checkpoint(self, kernel: Kernel, state: WindowState) -> Any:
        rows = state.trace.to_state()
        return rows if state.finished is None else {"rows": rows, "finished": state.finished.to_state()}

    def restore(self, kernel: Kernel, state: WindowState, saved: Any) -> Any:
        if state.finished is None:
            state.trace.restore(saved)
        else:
            state.trace.restore(saved["rows"])
            state.finished.restore(saved["finished"])
        return state
