"""The multiway join maintained by sensitivity indices: (↑⋈ of n inputs)^Δ as one stateful operator
(`columnar/sensitivity.py`; `lftj-incremental-maintenance.txt` §4).

Where the delta-join form (`incremental/multilinear.py`) joins each input's change with the others'
integrals, reading whole neighbourhoods of the change, this operator keeps each input as a trie and the
sensitivity intervals of the join's last evaluation, and per step evaluates the join again only over the
regions of the tuple space that the change oracle names: its cost follows the edit distance between
the two evaluations' traces. Chosen by `maintenance="sensitivity"` on `stream_multijoin` / `multijoin`
(or the front ends' `joins="sensitivity"`). Its state (the tries and the indices) is held in this
process on both engines: on Spark each step's changes are brought to the driver (a first step over
large tables is one collect). A checkpoint keeps the inputs' rows; a restore rebuilds the rest.

`IndexedMultiJoin` (`maintenance="indexed"`) is the delta join itself, each change's term a leapfrog join
in its own variable order over the inputs kept as tries (`columnar/indexed_delta.py`): no trace of the
evaluation, the other inputs read only through their tries' intersections under the change. Its state
is held as the sensitivity operator's is, and checkpointed the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import polars as pl

from dbspark.algebra.zset import WEIGHT, ZSet
from dbspark.columnar.indexed_delta import IndexedDeltaJoin
from dbspark.columnar.sensitivity import MaintainedJoin
from dbspark.operators.base import NONLINEAR, Operator, Shape
from dbspark.operators.multijoin import check_inputs, projected

if TYPE_CHECKING:
    from dbspark.engines.base import Kernel


def _with_weights(in_shapes: list[Shape]) -> list[pl.Schema]:
    return [pl.Schema([*s.schema.items(), (WEIGHT, pl.Int64())]) for s in in_shapes]


@dataclass(frozen=True)
class _HeldJoin(Operator):
    """A multiway join's change kept by a state held in this process (`MaintainedJoin` or
    `IndexedDeltaJoin`: `step(changes, undo)`, `rows()`, `out_schema`): each step's changes brought
    here, the inputs' rows checkpointed and stepped in again on a restore."""

    inputs: int
    kind = NONLINEAR
    stateful = True
    consolidates = False  # whether the state's changes come consolidated

    @property
    def arity(self) -> int:  # type: ignore[override]
        return self.inputs

    def eval(self, kernel: Kernel, state: Any, inputs: list[Any], undo: list) -> Any:
        changes = [None if kernel.known_empty(v) else kernel.to_local(v).df for v in inputs]
        if all(c is None or c.height == 0 for c in changes):
            return kernel.empty(pl.Schema([(c, t) for c, t in state.out_schema.items() if c != WEIGHT]))
        return kernel.from_local(ZSet(state.step(changes, undo), self.consolidates))

    def checkpoint(self, kernel: Kernel, state: Any) -> Any:
        return state.rows()

    def restore(self, kernel: Kernel, state: Any, saved: Any) -> Any:
        state.step(saved)
        return state


@dataclass(frozen=True)
class MaintainedMultiJoin(_HeldJoin):
    """(↑⋈ of `inputs` Z-sets)^Δ: the change of their natural join for their changes."""

    project: tuple[str, ...] | None = None  # short-circuit evaluation: see `StreamExistsJoin`
    name = "maintained_multijoin"
    consolidates = True

    def shape(self, ins: list[Shape]) -> Shape:
        schema = check_inputs([Shape(s.schema) for s in ins])
        return Shape(schema if self.project is None else projected(schema, self.project))

    def label(self) -> str:
        extra = "" if self.project is None else f", exists over all but {', '.join(self.project)}"
        return f"{self.name}[{self.inputs}{extra}]"

    def init(self, kernel: Kernel, shape: Shape, in_shapes: list[Shape]) -> MaintainedJoin:
        return MaintainedJoin(_with_weights(in_shapes), project=self.project)


@dataclass(frozen=True)
class IndexedMultiJoin(_HeldJoin):
    """(↑⋈ of `inputs` Z-sets)^Δ by the delta join over indexed tries, a variable order per change."""

    name = "indexed_multijoin"

    def shape(self, ins: list[Shape]) -> Shape:
        return Shape(check_inputs([Shape(s.schema) for s in ins]))

    def init(self, kernel: Kernel, shape: Shape, in_shapes: list[Shape]) -> IndexedDeltaJoin:
        return IndexedDeltaJoin(_with_weights(in_shapes))
