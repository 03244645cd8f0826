"""A distinct on a delete-and-rederive scope's loop that ranks its facts (`incremental/ranked.py`).

Its input carries each derivation's rank, its output each fact's: a fact comes in at a rank above one of
its derivations, so that it has a derivation whose premises all rank below it. The over-delete
(`operators/dred.py`) then removes a fact of the change only when no derivation ranking below the fact
is left. That is sound (`docs/recursion-strategies.md`, "Ranks"): a fact kept has such a derivation
among the facts kept, and if one of those premises goes later in the run, the fact loses that derivation
and is looked at again; by induction on the rank, every fact kept is derived from the imports left.
Facts removed that still have a derivation come back in the second run, as in DRed.

It keeps, beside each fact, its derivations counted below and above its rank (`columnar/rank_fold.py`;
the doc's "A fact's supports, counted beside it"), one row per fact, and reads no integral of its input.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from dbspark.algebra.consolidate import WEIGHT, take
from dbspark.algebra.zset import ZSet
from dbspark.columnar.plans import pick
from dbspark.columnar.rank_fold import (
    FACTS,
    KEPT,
    OUT,
    RANK,
    REMOVED,
    TO,
    RankFold,
    fold_schema,
    state_schema,
)
from dbspark.ir.expr import col
from dbspark.operators.base import Shape
from dbspark.operators.dred import OVERDELETE, RecursiveDistinct, RecursiveDistinctState

if TYPE_CHECKING:
    from dbspark.engines.base import Kernel


class RankedDistinctState(RecursiveDistinctState):
    """`facts`: a row per fact held, with its rank and its supports counted (`columnar/rank_fold.py`), a
    trace by the fact's columns kept across steps; `removed`: this step's over-delete's removals, with
    their counts (scratch)."""

    def __init__(self, kernel: Kernel, schema: pl.Schema) -> None:
        super().__init__(state_schema(schema))
        self.out = pl.Schema(schema)
        self.cols = tuple(c for c in schema if c != RANK)
        self.facts = kernel.new_trace(self.schema, self.cols)

    def to_state(self) -> Any:
        return self.facts.to_state()

    def restore(self, saved: Any) -> None:
        self.facts.restore(saved)


@dataclass(frozen=True)
class RankedDistinct(RecursiveDistinct):
    """Input: the change of its input, with the derivations' ranks; output: the facts' changes with
    their ranks. Its state (the facts, their ranks and their supports' counts) is kept across steps, and
    it reads no integral of its input: the counts are kept beside the facts."""

    name = "ranked_distinct"
    arity = 1

    def shape(self, ins: list[Shape]) -> Shape:
        return Shape(ins[0].schema)

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
        (d,) = inputs
        d = k.consolidate(d)
        on = [(c, c) for c in state.cols]
        count = state.phase == OVERDELETE and state.watch and state.counts is not None
        if state.phase == OVERDELETE:
            if k.known_empty(d):
                return d
            facts, removed = (k.seek(t.snapshot(), d, on, exact=True) for t in (state.facts, state.removed))
            fold = RankFold(state.cols, True, count)
            rows = _computed(
                k, k.cogroup([d, facts, removed], state.cols, fold, fold_schema(state.out, count), None, True)
            )
            out, to_facts, to_removed = _parts(k, rows, state, count)
            if count:
                n, m = state.counts or (0, 0)
                z = k.to_local(out).df if k.is_local(out) else None
                state.counts = None if z is None else (n + z.height, m + int(z[KEPT].sum()))
            k.trace_insert(state.removed, to_removed, undo)
        else:
            gone = k.empty(state.schema)
            if state.resync:  # the facts removed come back if a derivation is left
                state.set(undo, resync=False)
                gone = k.as_zset(state.removed.snapshot())
            elif k.known_empty(d):
                return d
            parts = [d, k.seek(state.facts.snapshot(), d, on, exact=True), gone]
            fold = RankFold(state.cols, False)
            rows = _computed(k, k.cogroup(parts, state.cols, fold, fold_schema(state.out), None, True))
            out, to_facts, _ = _parts(k, rows, state, count)
        k.trace_insert(state.facts, to_facts, undo)
        return k.map(out, [(c, col(c)) for c in state.out], state.out) if count else out


def _parts(k: Kernel, rows: Any, state: RankedDistinctState, kept: bool) -> tuple[Any, Any, Any]:
    """The fold's rows (`columnar/rank_fold.py`) by where they go: out (with `KEPT` if `kept`), to the
    facts, to the removed facts, each with its own columns."""
    schemas = [pl.Schema({**state.out, **({KEPT: pl.Boolean()} if kept else {})}), state.schema, state.schema]
    if not k.is_local(rows):
        return tuple(
            k.map(k.filter(rows, col(TO).eq(to)), [(c, col(c)) for c in schema], schema)
            for to, schema in zip((OUT, FACTS, REMOVED), schemas, strict=True)
        )
    # (a mask and a select each: the kernel's filter and map are queries, ~1 ms each)
    df = k.to_local(rows).df
    to = df[TO].to_numpy()
    out = []
    for i, schema in zip((OUT, FACTS, REMOVED), schemas, strict=True):
        at = np.flatnonzero(to == i)
        part = pick(df, [*schema, WEIGHT])
        part = part if len(at) == len(to) else take(part, at)
        out.append(k.from_local(ZSet(part, consolidated=True)))  # (the fold's rows are distinct)
    return out[0], out[1], out[2]


def _computed(k: Kernel, out: Any) -> Any:
    """The fold's rows computed once where they are a plan (on Spark): they go to the facts' trace, which
    the next iterations seek, and downstream; kept as a plan, each iteration's would carry the ones
    before."""
    return out if k.is_local(out) else k.place([out], loop=True)[0]
