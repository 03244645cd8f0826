"""The time operators: delay z^-1, integrate I, differentiate D (`dbsp-paper.txt` §2.2-2.3).

All three are linear and time-invariant, hence their own incremental versions (Prop 3.2, invariance).
I's value is a trace snapshot (the integral, indexed by the input's keys, all columns if not indexed);
a delay of it is the previous snapshot, which is how a join reads z^-1(I(b)) in O(change) work.
Delay is evaluated by the scheduler (its output is known before the step's inputs).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dbspark.operators.base import TIME, Operator, Shape

if TYPE_CHECKING:
    from dbspark.engines.base import Kernel


@dataclass(frozen=True)
class Delay(Operator):
    """z^-1: the input of the previous step (0 at step 0). `tag` makes feedback delays distinct nodes."""

    tag: int = field(default=0)
    name = "delay"
    kind = TIME
    stateful = True

    def shape(self, ins: list[Shape]) -> Shape:
        return ins[0]

    def label(self) -> str:
        return "z^-1" + (" (feedback)" if self.tag else "")


class DelayState:
    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


@dataclass(frozen=True)
class Integrate(Operator):
    """I: the running sum of the input, kept as a trace (LSM spine)."""

    name = "integrate"
    kind = TIME
    stateful = True

    def shape(self, ins: list[Shape]) -> Shape:
        s = ins[0]
        return Shape(s.schema, s.index_keys, trace=True)

    def label(self) -> str:
        return "I"

    def init(self, kernel: Kernel, shape: Shape, in_shapes: list[Shape]) -> Any:
        return kernel.new_trace(shape.schema, shape.index_keys)

    def eval(self, kernel: Kernel, state: Any, inputs: list[Any], undo: list) -> Any:
        return kernel.trace_insert(state, inputs[0], undo)

    def checkpoint(self, kernel: Kernel, state: Any) -> Any:
        return state.to_state()

    def restore(self, kernel: Kernel, state: Any, saved: Any) -> Any:
        state.restore(saved)
        return state


@dataclass(frozen=True)
class Differentiate(Operator):
    """D: s[t] - s[t-1]."""

    name = "differentiate"
    kind = TIME
    stateful = True

    def shape(self, ins: list[Shape]) -> Shape:
        return Shape(ins[0].schema, ins[0].keys if not ins[0].trace else None)

    def label(self) -> str:
        return "D"

    def init(self, kernel: Kernel, shape: Shape, in_shapes: list[Shape]) -> Any:
        return DelayState(kernel.empty(shape.schema))

    def eval(self, kernel: Kernel, state: DelayState, inputs: list[Any], undo: list) -> Any:
        cur = kernel.as_zset(inputs[0])
        prev = state.value
        undo.append(lambda: setattr(state, "value", prev))
        state.value = kernel.hold(cur)  # kept across steps: it must outlive the state files it reads
        return kernel.plus(cur, kernel.neg(prev))
