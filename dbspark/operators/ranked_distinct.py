"""A distinct on a delete-and-rederive scope's loop that ranks its facts (`incremental/ranked.py`).

Its input carries each derivation's rank, its output each fact's: a fact comes in at 1 + the least rank
of its derivations, so that it has a derivation whose premises all rank below it. The over-delete
(`operators/dred.py`) then removes a fact of the change only when no derivation ranking below the fact
is left. That is sound (`docs/recursion-strategies.md`, "Ranks"): a fact kept has such a derivation
among the facts kept, and if one of those premises goes later in the run, the fact loses that derivation
and is looked at again; by induction on the rank, every fact kept is derived from the imports left.
Facts removed that still have a derivation come back in the second run, as in DRed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import polars as pl

from dbspark.columnar.rank_fold import KEPT, RANK, RankFold
from dbspark.ir.expr import col
from dbspark.operators.base import Shape
from dbspark.operators.dred import OVERDELETE, RecursiveDistinct, RecursiveDistinctState

if TYPE_CHECKING:
    from dbspark.engines.base import Kernel


class RankedDistinctState(RecursiveDistinctState):
    """`facts`: the facts held, each with its rank (a trace by the fact's columns), kept across steps;
    `removed`: this step's over-delete's removals (scratch)."""

    def __init__(self, kernel: Kernel, schema: pl.Schema) -> None:
        super().__init__(schema)
        self.cols = tuple(c for c in schema if c != RANK)
        self.facts = kernel.new_trace(schema, self.cols)

    def to_state(self) -> Any:
        return self.facts.to_state()

    def restore(self, saved: Any) -> None:
        self.facts.restore(saved)


@dataclass(frozen=True)
class RankedDistinct(RecursiveDistinct):
    """Inputs: the delayed integral of its input (indexed by the fact's columns) and the input's change,
    both with the derivations' ranks; output: the facts' changes with their ranks. Its declaration is
    `RecursiveDistinct`'s; its state (the facts and their ranks) is kept across steps."""

    name = "ranked_distinct"

    def label(self) -> str:
        return "distinct (delete-and-rederive, ranked)"

    def init(self, kernel: Kernel, shape: Shape, in_shapes: list[Shape]) -> Any:
        return RankedDistinctState(kernel, shape.schema)

    def checkpoint(self, kernel: Kernel, state: Any) -> Any:
        return state.to_state()

    def restore(self, kernel: Kernel, state: Any, saved: Any) -> Any:
        state.restore(saved)
        return state

    def eval(self, kernel: Kernel, state: RecursiveDistinctState, inputs: list[Any], undo: list) -> Any:
        assert isinstance(state, RankedDistinctState)  # (made by `init`)
        k = kernel
        prev, d = inputs
        d = k.consolidate(d)
        on = [(c, c) for c in state.cols]
        schema = pl.Schema(state.schema)
        if state.phase == OVERDELETE:
            if k.known_empty(d):
                return d
            count = state.watch and state.counts is not None
            parts = [d, k.seek(prev, d, on, exact=True), k.seek(state.facts.snapshot(), d, on, exact=True)]
            out_schema = pl.Schema({**schema, KEPT: pl.Boolean()}) if count else schema
            out = k.cogroup(parts, state.cols, RankFold(state.cols, True, count), out_schema, None, True)
            if count:
                if k.is_local(out):
                    z = k.to_local(out)
                    n, m = state.counts or (0, 0)
                    state.counts = (n + len(z), m + int(z.df[KEPT].sum()))
                else:
                    state.counts = None
                out = k.map(out, [(c, col(c)) for c in schema], schema)
            out = _computed(k, out)
            k.trace_insert(state.removed, out, undo)
            k.trace_insert(state.facts, out, undo)
            return out
        probe, gone = d, k.empty(schema)
        if state.resync:  # the facts removed come back if a derivation is left
            state.set(undo, resync=False)
            gone = k.as_zset(state.removed.snapshot())
            probe = k.plus(d, gone)
        elif k.known_empty(d):
            return d
        # a held fact's rank is read only where the change removes derivations (a monotone body's second
        # run never does: its changes only add)
        losing = not k.is_local(d) or bool((k.to_local(d).weights() < 0).any())
        facts = k.seek(state.facts.snapshot(), d, on, exact=True) if losing else k.empty(schema)
        parts = [d, k.seek(prev, probe, on, exact=True), facts, gone]
        out = _computed(k, k.cogroup(parts, state.cols, RankFold(state.cols, False), schema, None, True))
        k.trace_insert(state.facts, out, undo)
        return out


def _computed(k: Kernel, out: Any) -> Any:
    """The output computed once where it is a plan (on Spark): it goes to the facts' trace, which the
    next iterations seek, and downstream; kept as a plan, each iteration's would carry the ones before."""
    return out if k.is_local(out) else k.place([out], loop=True)[0]
