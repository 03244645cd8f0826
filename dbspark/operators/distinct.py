"""distinct: the lifted operator and its incremental form H (`dbsp-paper.txt` §4.1, Prop 4.7)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dbspark.ir.expr import Case, Expr, col, lit
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

    def init(self, kernel: Kernel, shape: Shape, in_shapes: list[Shape]) -> Any:
        return tuple(shape.schema)  # the columns (the integral is the first input, not state)

    def checkpoint(self, kernel: Kernel, state: Any) -> Any:
        return None

    def restore(self, kernel: Kernel, state: Any, saved: Any) -> Any:
        return state

    def eval(self, kernel: Kernel, state: Any, inputs: list[Any], undo: list) -> Any:
        """Per row of the change d, with i the integral before it (sought at d's rows): -1 where i was
        positive and i + d is not, +1 where i was not and i + d is, else nothing."""
        prev, d = inputs
        # held here: consolidated once, in the order of its rows' hashes (the integral of d reads it
        # too; a seek by its rows reuses the hashes); a plan on Spark is grouped by `combine`
        if kernel.is_local(d):
            d = kernel.consolidate(d, by_rows=True)
        found = kernel.seek(prev, d, [(c, c) for c in state], exact=True)
        return kernel.combine([d, found], state, H_WEIGHT)


def positive(e: Expr) -> Expr:
    """1 where e > 0, else 0: distinct's weight."""
    return Case(((e > 0, lit(1)),), lit(0))


# H's weight from the change's sum (`__w0`) and the integral's (`__w1`) at a row
H_WEIGHT = positive(col("__w1") + col("__w0")) - positive(col("__w1"))
