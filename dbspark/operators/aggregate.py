"""GROUP BY-aggregate (`dbsp-paper.txt` §7.2, §7.4): the lifted operator and the incremental one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dbspark.ir.aggregate import AggSpec
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
        return kernel.aggregate(inputs[0], self.spec)


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
        return kernel.aggregate_state(self.spec)

    def eval(self, kernel: Kernel, state: Any, inputs: list[Any], undo: list) -> Any:
        return kernel.aggregate_step(state, inputs[0], undo)

    def checkpoint(self, kernel: Kernel, state: Any) -> Any:  # an engine's state may hold unpicklable handles
        return state.checkpoint() if hasattr(state, "checkpoint") else state

    def restore(self, kernel: Kernel, state: Any, saved: Any) -> Any:
        if hasattr(state, "restore"):
            state.restore(saved)
            return state
        return saved
