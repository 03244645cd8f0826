"""The multiway join maintained by sensitivity indices: (↑⋈ of n inputs)^Δ as one stateful operator
(`columnar/sensitivity.py`; `lftj-incremental-maintenance.txt` §4).

Where the delta-join form (`incremental/multilinear.py`) joins each input's change with the others'
integrals, reading whole neighbourhoods of the change, this operator keeps each input as a trie and the
sensitivity intervals of the join's last evaluation, and per step evaluates the join again only over the
regions of the tuple space that the change oracle names: its cost follows the edit distance between
the two evaluations' traces. Chosen by `maintenance="sensitivity"` on `stream_multijoin` / `multijoin`
(or the front ends' `joins="sensitivity"`). Its state (the tries and the indices) is held in this
process on both engines: on Spark each step's changes are brought to the driver (a first step over
large tables is one collect). A checkpoint keeps the inputs' rows, as a base and the steps' changes
since (`Held`); a restore rebuilds the rest.

`IndexedMultiJoin` (`maintenance="indexed"`) is the delta join itself, each change's term a leapfrog join
in its own variable order over the inputs kept as tries (`columnar/indexed_delta.py`): no trace of the
evaluation, the other inputs read only through their tries' intersections under the change. Its state
is held as the sensitivity operator's is, and checkpointed the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
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


MIN_BASE = 10_000  # rows: a log shorter than this is never folded into a new base


@dataclass
class Held:
    """A join held in this process (`MaintainedJoin` or `IndexedDeltaJoin`: `step(changes, undo)`,
    `rows()`, `out_schema`) and what its checkpoints keep: the inputs' rows at some step (`base`) and the
    changes of the steps since (`log`). A checkpoint names the frames of the last one again, which are
    not written again (`circuit/checkpoint.FrameFiles`), so a step writes its changes, not the inputs:

    - the log is segments of consecutive steps' changes, each at least twice the next (a step's change
      is a segment; two are merged into one new frame per input while the later is at least half the
      earlier), so that a row is written O(log n) times and a checkpoint names O(log n) segments (small
      frames are inline in its manifest, which is written whole);
    - once the log holds as many rows as the base (and at least `MIN_BASE`), the next checkpoint writes
      the inputs' rows as a new base and empties the log;
    - nothing is logged before the first checkpoint (a pipeline without a directory takes none)."""

    join: Any
    base: list[pl.DataFrame] | None = None
    log: list[list[pl.DataFrame | None]] = field(default_factory=list)

    def logged(self) -> int:
        return sum(_rows(seg) for seg in self.log)

    def add(self, changes: list[pl.DataFrame | None]) -> None:
        """A step's changes logged (a new list: the old one is the step's undo), once checkpointed."""
        if self.base is None:
            return
        log = [*self.log, changes]
        while len(log) > 1 and 2 * _rows(log[-1]) >= _rows(log[-2]):
            later = log.pop()
            log[-1] = [_concat(a, b) for a, b in zip(log[-1], later, strict=True)]
        self.log = log

    def saved(self) -> dict[str, Any]:
        based = sum(f.height for f in self.base) if self.base is not None else 0
        if self.base is None or self.logged() > max(based, MIN_BASE):
            self.base, self.log = self.join.rows(), []
        return {"base": self.base, "log": self.log}

    def restore(self, saved: Any) -> None:
        if isinstance(saved, list):  # a checkpoint before 2026-12-05: the inputs' rows
            saved = {"base": saved, "log": []}
        base, log = saved["base"], saved["log"]
        self.join.step(
            [pl.concat([b, *(seg[j] for seg in log if seg[j] is not None)]) for j, b in enumerate(base)]
        )
        self.base, self.log = base, log


def _rows(seg: list[pl.DataFrame | None]) -> int:
    return sum(f.height for f in seg if f is not None)


def _concat(a: pl.DataFrame | None, b: pl.DataFrame | None) -> pl.DataFrame | None:
    return b if a is None else a if b is None else pl.concat([a, b], how="vertical")


@dataclass(frozen=True)
class _HeldJoin(Operator):
    """A multiway join's change kept by a state held in this process (`Held`): each step's changes
    brought here, the inputs' rows checkpointed (a base and the changes since) and stepped in again on a
    restore."""

    inputs: int
    names: tuple[tuple[str, str], ...] = field(default=(), compare=False)  # `StreamMultiJoin.names`
    kind = NONLINEAR
    stateful = True
    consolidates = False  # whether the state's changes come consolidated

    @property
    def arity(self) -> int:  # type: ignore[override]
        return self.inputs

    def eval(self, kernel: Kernel, state: Held, inputs: list[Any], undo: list) -> Any:
        changes = [None if kernel.known_empty(v) else kernel.to_local(v).df for v in inputs]
        if all(c is None or c.height == 0 for c in changes):
            return kernel.empty(pl.Schema([(c, t) for c, t in state.join.out_schema.items() if c != WEIGHT]))
        out = state.join.step(changes, undo)
        before = state.log
        state.add([None if c is None or c.height == 0 else c for c in changes])
        undo.append(lambda: setattr(state, "log", before))
        return kernel.from_local(ZSet(out, self.consolidates))

    def checkpoint(self, kernel: Kernel, state: Held) -> Any:
        return state.saved()

    def restore(self, kernel: Kernel, state: Held, saved: Any) -> Any:
        state.restore(saved)
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

    def init(self, kernel: Kernel, shape: Shape, in_shapes: list[Shape]) -> Held:
        return Held(MaintainedJoin(_with_weights(in_shapes), project=self.project, names=dict(self.names)))


@dataclass(frozen=True)
class IndexedMultiJoin(_HeldJoin):
    """(↑⋈ of `inputs` Z-sets)^Δ by the delta join over indexed tries, a variable order per change."""

    name = "indexed_multijoin"

    def shape(self, ins: list[Shape]) -> Shape:
        return Shape(check_inputs([Shape(s.schema) for s in ins]))

    def init(self, kernel: Kernel, shape: Shape, in_shapes: list[Shape]) -> Held:
        return Held(IndexedDeltaJoin(_with_weights(in_shapes), names=dict(self.names)))
