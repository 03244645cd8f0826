"""distinct: the lifted operator and its incremental form H (`dbsp-paper.txt` §4.1, Prop 4.7)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dbspark.operators.base import NONLINEAR, Operator, Shape

if TYPE_CHECKING:
    from dbspark.engines.base import Kernel


@dataclass(frozen=True)
class StreamDistinct(Operator):
    """↑distinct: weight 1 for every row of positive weight, on each step's whole Z-set."""

    name = "stream_distinct"
    kind = NONLINEAR

    def shape(self, ins: list[Shape]) -> Shape:
        return Shape(ins[0].schema)

    def eval(self, kernel: Kernel, state: Any, inputs: list[Any], undo: list) -> Any:
        return kernel.distinct(inputs[0])


@dataclass(frozen=True)
class DistinctH(Operator):
    """↑H(z^-1(I(d)), d): the change of distinct, looking up only the rows of the change d (Prop 4.7).

    Inputs: the delayed integral (a trace over all columns) and the change."""

    name = "distinct"
    kind = NONLINEAR
    arity = 2

    def shape(self, ins: list[Shape]) -> Shape:
        return Shape(ins[1].schema)

    def label(self) -> str:
        return "distinct (H)"

    def eval(self, kernel: Kernel, state: Any, inputs: list[Any], undo: list) -> Any:
        return kernel.distinct_delta(inputs[0], inputs[1])
