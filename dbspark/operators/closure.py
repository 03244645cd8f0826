"""Transitive closure as one operator: TC(E) = {(x, y) : a path of one or more edges of E leads from x
to y}, edges being the rows of positive weight (set semantics, as `distinct`).

TC is what `dbsp-paper.txt` §5-§6 compute with a fixpoint (`path = E ∪ path ∘ E`), and
`Circuit.recursive` does so for any recursive query. As one operator its incremental version can use a
graph index instead of the fixpoint's iterations: `Closure` keeps the strongly connected components and
their reachability, and an edge change costs O(|V| + |E|) plus the change of the closure, not the
change of the fixpoint's (pair, iteration) trace (see `trace/closure.py`). It is (↑TC)^Δ =
D ∘ ↑TC ∘ I (Def 3.1) by construction: its output integrates to TC of the integrated input.

Both are written here, above the kernel, on rows held in this process (`to_local` / `from_local`): the
graph index lives in the driver on every engine. It holds the edges (O(|E|)) and the components'
reachability, never the closure itself; why it is not partitioned on Spark is in the README ("What
stays in the driver").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dbspark.algebra.zset import ZSet
from dbspark.errors import SchemaError
from dbspark.operators.base import NONLINEAR, Operator, Shape
from dbspark.trace.closure import ClosureState, closure_of

if TYPE_CHECKING:
    from dbspark.engines.base import Kernel


def _shape(src: str, dst: str, ins: list[Shape]) -> Shape:
    schema = ins[0].schema
    if list(schema) != [src, dst]:
        raise SchemaError(f"transitive closure needs exactly the columns ({src}, {dst}), got {list(schema)}")
    if schema[src] != schema[dst]:
        raise SchemaError(
            f"transitive closure: {src} is {schema[src]} and {dst} is {schema[dst]}; both ends of an edge "
            "must have one type (cast one of them)"
        )
    return Shape(schema)


@dataclass(frozen=True)
class StreamClosure(Operator):
    """↑TC: the transitive closure of each step's edge set, every pair with weight 1."""

    src: str
    dst: str
    name = "stream_transitive_closure"
    kind = NONLINEAR

    def shape(self, ins: list[Shape]) -> Shape:
        return _shape(self.src, self.dst, ins)

    def label(self) -> str:
        return f"{self.name}[{self.src} -> {self.dst}]"

    def eval(self, kernel: Kernel, state: Any, inputs: list[Any], undo: list) -> Any:
        return kernel.from_local(closure_of(kernel.to_local(inputs[0]), self.src, self.dst))


@dataclass(frozen=True)
class Closure(Operator):
    """(↑TC)^Δ: the change of the closure for a change of the edges, from a graph index."""

    src: str
    dst: str
    name = "transitive_closure"
    kind = NONLINEAR
    stateful = True

    def shape(self, ins: list[Shape]) -> Shape:
        return _shape(self.src, self.dst, ins)

    def label(self) -> str:
        return f"{self.name}[{self.src} -> {self.dst}]"

    def init(self, kernel: Kernel, shape: Shape, in_shapes: list[Shape]) -> Any:
        return ClosureState(self.src, self.dst, shape.schema[self.src])

    def eval(self, kernel: Kernel, state: Any, inputs: list[Any], undo: list) -> Any:
        return kernel.from_local(ZSet(state.step(kernel.to_local(inputs[0]).df, undo), True))

    def checkpoint(self, kernel: Kernel, state: Any) -> Any:
        return state.checkpoint()

    def restore(self, kernel: Kernel, state: Any, saved: Any) -> Any:
        state.restore(saved)
        return state
