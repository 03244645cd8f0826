"""The operator protocol: what every node of a circuit runs.

An operator is an immutable description (its `params` make it hashable, so the circuit cache can
build a derived stream once); per-run state lives in the runtime, created by `init` and keyed by the
node id. `eval` may change that state but must register an undo for every change in `undo`, so the
scheduler can reject a failed step atomically. `kind` tells incrementalization which rule applies:
LINEAR (Thm 3.3: its own incremental version), BILINEAR (Thm 3.4), MULTILINEAR (Thm 3.4 for n inputs:
the multiway join), NONLINEAR (a dedicated rule or the
definition D∘Q∘I), TIME (z^-1, I, D: linear and time-invariant, Prop 3.2 invariance), SOURCE (inputs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import polars as pl

if TYPE_CHECKING:
    from dbspark.engines.base import Kernel

LINEAR = "linear"
BILINEAR = "bilinear"
MULTILINEAR = "multilinear"
NONLINEAR = "nonlinear"
TIME = "time"
SOURCE = "source"


@dataclass(frozen=True)
class Shape:
    """What flows on a stream: its schema, its index keys (None: not indexed) and whether it is a trace."""

    schema: pl.Schema
    keys: tuple[str, ...] | None = None
    trace: bool = False

    def __hash__(self) -> int:
        return hash((tuple(self.schema.items()), self.keys, self.trace))

    @property
    def index_keys(self) -> tuple[str, ...]:
        return self.keys if self.keys is not None else tuple(self.schema)


class Operator:
    """Base of all operators. Subclasses are frozen dataclasses whose fields are their parameters."""

    name: ClassVar[str] = "operator"
    kind: ClassVar[str] = NONLINEAR
    arity: ClassVar[int] = 1
    stateful: ClassVar[bool] = False

    def shape(self, ins: list[Shape]) -> Shape:
        raise NotImplementedError

    def label(self) -> str:
        """How `explain` prints the operator, parameters included."""
        return self.name

    def init(self, kernel: Kernel, shape: Shape, in_shapes: list[Shape]) -> Any:
        return None

    def eval(self, kernel: Kernel, state: Any, inputs: list[Any], undo: list) -> Any:
        raise NotImplementedError

    # checkpoints: stateful operators override these
    def checkpoint(self, kernel: Kernel, state: Any) -> Any:
        return state

    def restore(self, kernel: Kernel, state: Any, saved: Any) -> Any:
        return saved
