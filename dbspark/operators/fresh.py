"""A delete-and-rederive scope's step from empty state, at full speed: semi-naive evaluation without the
bookkeeping that later steps do not need (issue 14, item 1; `docs/recursion-strategies.md`).

The first step of a monotone scope (`operators/dred.py`), and any step that starts from an empty state
and removes nothing, is semi-naive evaluation from empty relations (`dbsp-paper.txt` eq. 5.1). Run by
the scope's incrementalized body as every other step is, each iteration indexes its changes into the
body's integrals, and each recursive distinct seeks the integral of its input (the count of every
fact's derivations) to find which facts are new: the integrals' sorts and merges were most of the time
(transitive closure of 1,000 nodes: 2.3 of the scope's 2.7 s, profiled). Here the same body runs with:

- **the integrals kept as lists of their changes** while only joins read them (a join is bilinear, so a
  sum of changes serves as well as their consolidated form), and indexed once at the end: what the
  later steps need, built once. A sum of changes that hold each row once over the run (a recursive
  distinct's new facts, renamed or indexed; an import's; an incremental join of two such: `new_once`)
  is consolidated as it is, and so is the scope's output where it is one: neither is hashed and sorted
  to find that (transitive closure of 5,000 nodes: 4.2 of the first step's 23 s);
- **each recursive distinct answering from a set of the facts derived so far** (`columnar/row_set.py`:
  rows packed into int64 keys, a bitmap or sorted runs): from empty state every derivation has a
  positive weight (the body is monotone and no import removes anything), so a fact is new exactly when
  it is not in the set; the distinct's input integral is not read, and its contents, the derivations'
  counts, are tallied by the set under the keys it packs anyway.

Integrals read otherwise (by a non-recursive distinct, say) are maintained as in any step. A
derivation of negative weight after consolidation (possible only with imports read under a negation,
whose deletes then add facts) stops the run with `NotFresh`; the step is then undone and run the usual
way. The state left is the one the usual way leaves: every integral holds the same Z-set.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from dbspark.algebra.consolidate import INTEGER_LIKE, WEIGHT, sorted_unique
from dbspark.algebra.zset import ZSet
from dbspark.columnar.packed_rank_fold import round_supports
from dbspark.columnar.plans import pick
from dbspark.columnar.rank_fold import RANK, tallied_supports
from dbspark.columnar.row_set import RowSet
from dbspark.errors import RecursionLimitError
from dbspark.ir.expr import Col
from dbspark.operators.join import StreamJoin, StreamProduct
from dbspark.operators.linear import Filter, Index, Map, Plus
from dbspark.operators.source import Input
from dbspark.operators.time import Delay, Integrate

if TYPE_CHECKING:
    from dbspark.operators.dred import DRedScopeState


class NotFresh(Exception):
    """A derivation of negative weight: the step is not semi-naive evaluation from empty state."""


class _Sum:
    """An integral's value kept as its changes (local Z-sets, in order); immutable, so that a delay holds
    the value of the iteration before. `value()` their sum, for a join."""

    def __init__(self, schema: Any, parts: tuple[ZSet, ...] = ()) -> None:
        self.schema = schema
        self.parts = parts
        self._value: ZSet | None = None

    def plus(self, z: ZSet) -> _Sum:
        return _Sum(self.schema, (*self.parts, z)) if len(z) else self

    def value(self) -> ZSet:
        if self._value is None:
            if not self.parts:
                self._value = ZSet.empty(self.schema)
            elif len(self.parts) == 1:
                self._value = self.parts[0]
            else:  # a sum of changes, marked consolidated for the join (bilinear: its rows need not be)
                self._value = ZSet(_frames(self.parts), consolidated=True)
        return self._value

    def total(self, consolidated: bool = False) -> ZSet:
        """The integral's Z-set: its changes' frames one after another (the trace consolidates them
        once, unless they are `consolidated`: each row in one change once, as a distinct's new facts)."""
        return ZSet(_frames(self.parts), consolidated)


def new_once(inner: Any, order: list[int], distincts: Collection[int], ranked: Collection[int]) -> set[int]:
    """The nodes of a scope's body whose changes over a fresh run hold each row once (no row in two
    iterations' changes, none twice in one): a sum of their changes is consolidated as it is.

    - a recursive distinct's output: each fact is new once; an import's: it enters at the first
      iteration, consolidated;
    - through feedback delays, indexes, filters, and maps of plain columns that keep every column (or,
      of a ranked distinct's facts, every column but the rank: a fact is new at one rank);
    - an incremental join, Δa ⋈ I(b) + z⁻¹(I(a)) ⋈ Δb, of two such changes, that keeps every column of
      both sides on keys whose equality is identity (integers, strings): over the run it joins each row
      of a with each row of b once, at the iteration of the later one (from empty integrals, its two
      halves give the pairs whose a-row came at or after, and strictly before, the b-row), and
      the output row names its pair."""

    def halves(n: Any) -> tuple[int, int] | None:  # (Δa, Δb) of an incremental join
        if not isinstance(n.op, Plus):
            return None
        for x, y in (n.inputs, n.inputs[::-1]):
            j1, j2 = inner.nodes[x], inner.nodes[y]
            if not isinstance(j1.op, StreamJoin) or j1.op != j2.op:
                continue
            (da, ib), (dia, db) = j1.inputs, j2.inputs
            ia = inner.nodes[dia].inputs[0] if isinstance(inner.nodes[dia].op, Delay) else None
            if not (
                isinstance(inner.nodes[ib].op, Integrate)
                and inner.nodes[ib].inputs == (db,)
                and inner.nodes[dia].shape.trace
                and ia is not None
                and isinstance(inner.nodes[ia].op, Integrate)
                and inner.nodes[ia].inputs == (da,)
            ):
                continue
            left, right = inner.nodes[da].shape.schema, inner.nodes[db].shape.schema
            op = j1.op
            if {src for src, _ in op.right_out} >= set(right) - set(op.right_keys) and all(
                isinstance(left[c], INTEGER_LIKE) or left[c] == pl.String for c in op.left_keys
            ):
                return da, db
        return None

    def once(nid: int, rank_dropped: bool = False) -> bool:
        n = inner.nodes[nid]
        if nid in distincts:
            return not rank_dropped or nid in ranked
        if isinstance(n.op, Input):
            return True
        if isinstance(n.op, (Index, Filter)) or (isinstance(n.op, Delay) and not n.shape.trace):
            return once(n.inputs[0], rank_dropped)
        if isinstance(n.op, Map):
            cols = [e for _, e in n.op.exprs if isinstance(e, Col)]
            have, kept = set(inner.nodes[n.inputs[0]].shape.schema), {e.name for e in cols}
            return (
                len(cols) == len(n.op.exprs)
                and kept >= have - {RANK}
                and once(n.inputs[0], rank_dropped or (RANK in have and RANK not in kept))
            )
        pair = None if rank_dropped else halves(n)
        return pair is not None and once(pair[0]) and once(pair[1])

    return {nid for nid in order if once(nid)}


def _frames(parts: tuple[ZSet, ...]) -> pl.DataFrame:
    """The frames of Z-sets, one after another."""
    cols = parts[0].df.columns
    return pl.concat([p.df.select(cols) for p in parts], how="vertical_relaxed")


class FreshRun:
    """One fresh step of a `DRedScopeState`'s body (see the module docstring)."""

    def __init__(self, scope: DRedScopeState) -> None:
        self.scope = scope
        self.kernel = scope.kernel
        inner = scope.op.inner
        self.inner = inner
        self.order = scope.it.order
        distincts = self.distincts = scope.distinct_nodes
        readers: dict[int, list[tuple[int, int]]] = {nid: [] for nid in self.order}
        for nid in self.order:
            for pos, i in enumerate(inner.nodes[nid].inputs):
                readers.setdefault(i, []).append((nid, pos))

        def joined(nid: int) -> bool:  # read only by joins, or as a recursive distinct's integral
            for r, pos in readers[nid]:
                op = inner.nodes[r].op
                if isinstance(op, Delay) and inner.nodes[r].shape.trace:
                    if not joined(r):
                        return False
                elif not (isinstance(op, (StreamJoin, StreamProduct)) or (r in distincts and pos == 0)):
                    return False
            return True

        def by_join(nid: int) -> bool:  # read by a join (its changes are consolidated for it)
            return any(
                by_join(r)
                if isinstance(inner.nodes[r].op, Delay)
                else isinstance(inner.nodes[r].op, (StreamJoin, StreamProduct))
                for r, _ in readers[nid]
            )

        self.ranked = {nid for nid in distincts if hasattr(scope.it.states[nid], "facts")}

        self.once = new_once(inner, self.order, distincts, self.ranked)
        # the feedback delays `once` passes through: their value before the run must be empty
        self.once_delays = [
            nid for nid in self.once if isinstance(inner.nodes[nid].op, Delay) and nid not in distincts
        ]
        self.sums = {nid for nid in self.order if isinstance(inner.nodes[nid].op, Integrate) and joined(nid)}
        self.for_join = {nid for nid in self.sums if by_join(nid)}
        # a recursive distinct's input integral (the derivations' counts: its set tallies them), with
        # the distinct, where the integral's input is the distinct's change (indexed by every column)
        self.counted: dict[int, int] = {}
        for d in distincts:
            if d in self.ranked:  # (it reads no integral: `operators/ranked_distinct.py`)
                continue
            x = inner.nodes[inner.nodes[d].inputs[0]].inputs[0]
            src, change = inner.nodes[x].inputs[0], inner.nodes[d].inputs[1]
            if src != change and isinstance(inner.nodes[src].op, Index):
                src = inner.nodes[src].inputs[0]
            if x in self.sums and src == change:
                self.counted[x] = d

    def run(self, imports: dict[str, Any], parts: list[list[Any]], undo: list, lean: bool = False) -> int:
        """Iterations from `imports` until nothing is fed back, each result's changes appended to
        `parts`; returns how many ran. Raises `NotFresh` having changed nothing. `lean`: the results
        alone, for a recompute the next step replaces (`operators/auto_scope.py`): the integrals kept as
        sums are not indexed and the ranked distincts' facts not counted into their traces (the caller
        empties the state after)."""
        k, st, inner = self.kernel, self.scope, self.inner
        sums = {nid: _Sum(inner.nodes[nid].shape.schema) for nid in self.sums}  # each one's value now
        seen = {
            nid: RowSet(inner.nodes[nid].shape.schema) for nid in self.distincts if nid not in self.ranked
        }
        # a ranked distinct (`operators/ranked_distinct.py`): its set holds the facts (rank left out), a
        # second one tallies the derivations by rank, and its output goes to its facts at the end
        ranked = {nid: _Ranked(st.it.states[nid]) for nid in self.ranked}
        delayed: dict[int, Any] = {}  # each delay's value: the iteration before's
        for nid in self.order:
            n = inner.nodes[nid]
            if isinstance(n.op, Delay):
                src = n.inputs[0]
                delayed[nid] = sums[src] if src in sums else st.it.states[nid].value
        fed = [nid for nid in delayed if not inner.nodes[nid].shape.trace]  # the feedback delays
        empty = {name: k.empty(v.schema) for name, v in imports.items()}
        sub: list = []  # this run's own undo: the inserts into integrals maintained as usual
        before = [len(p) for p in parts]
        imports = {name: k.consolidate(v) for name, v in imports.items()}  # (rows once: `new_once`)
        once = self.once if all(k.known_empty(delayed[nid]) for nid in self.once_delays) else set()
        try:
            runs = 0
            while True:
                values = self._iteration(
                    imports if runs == 0 else empty, sums, seen, ranked, delayed, once, sub
                )
                for i, r in enumerate(st.op.results):
                    parts[i].append(values[inner.outputs[r]])
                runs += 1
                for nid in delayed:
                    src = inner.nodes[nid].inputs[0]
                    if nid not in fed:
                        delayed[nid] = sums[src] if src in sums else values[src]
                back = k.place([k.consolidate(values[inner.nodes[nid].inputs[0]]) for nid in fed], loop=True)
                if not all(k.is_local(v) for v in back):
                    raise NotFresh  # (on Spark: iterations too large for the driver run the usual way)
                delayed.update(zip(fed, back, strict=True))
                if all(k.known_empty(v) for v in back):
                    break
                if runs > st.op.max_iterations:
                    raise RecursionLimitError(
                        f"recursive scope {st.op.scope!r} did not reach a fixpoint within "
                        f"{st.op.max_iterations} iterations"
                    )
            for nid, s in sums.items() if not lean else ():  # the integrals kept as sums: indexed once
                if nid in self.counted:
                    counts = ZSet(seen[self.counted[nid]].counts(), consolidated=True)  # (rows once, none 0)
                    k.trace_insert(st.it.states[nid], k.from_local(counts), sub)
                elif s.parts:  # (a sum of new facts is consolidated: not hashed and sorted to find that)
                    k.trace_insert(
                        st.it.states[nid], k.from_local(s.total(inner.nodes[nid].inputs[0] in once)), sub
                    )
            for i, r in enumerate(st.op.results):  # (the scope's output, where it is new facts, too)
                if inner.outputs[r] in once and len(parts[i]) - before[i] > 1:
                    got = tuple(k.to_local(v) for v in parts[i][before[i] :])
                    parts[i][before[i] :] = [k.from_local(ZSet(_frames(got), consolidated=True))]
            for rd in ranked.values() if not lean else ():
                rd.finish(k, sub)
        except NotFresh:
            for f in reversed(sub):
                f()
            raise
        except BaseException:  # (a failed step: the runtime undoes it, these inserts too)
            undo.extend(sub)
            raise
        undo.extend(sub)
        return runs

    def _iteration(
        self,
        imports: dict[str, Any],
        sums: dict[int, _Sum],
        seen: dict[int, RowSet],
        ranked: dict[int, _Ranked],
        delayed: dict[int, Any],
        once: Collection[int],
        undo: list,
    ) -> dict[int, Any]:
        k, inner, st = self.kernel, self.inner, self.scope
        values: dict[int, Any] = {}
        for nid in self.order:
            n = inner.nodes[nid]
            op = n.op
            if isinstance(op, Input):
                values[nid] = imports[op.name_] if op.name_ in imports else k.empty(op.schema)
            elif isinstance(op, Delay):
                values[nid] = delayed[nid]
            elif nid in sums:
                if nid not in self.counted:  # (a counted one is tallied by its distinct's set)
                    d = values[n.inputs[0]]
                    sums[nid] = sums[nid].plus(k.to_local(k.consolidate(d) if nid in self.for_join else d))
                values[nid] = sums[nid]
            elif nid in seen:
                values[nid] = self._distinct(seen[nid], values[n.inputs[1]])
            elif nid in ranked:
                values[nid] = k.from_local(ranked[nid].new(_derived(k, values[n.inputs[0]])))
            else:
                ins = [values[i] for i in n.inputs]
                if isinstance(op, (StreamJoin, StreamProduct)):
                    if any(not isinstance(v, _Sum) and k.known_empty(v) for v in ins):
                        values[nid] = k.empty(n.shape.schema)
                        continue
                    ins = [k.from_local(v.value()) if isinstance(v, _Sum) else v for v in ins]
                out = op.eval(k, st.it.states[nid], ins, undo)
                if nid in once and isinstance(out, ZSet) and not out.consolidated:
                    # each row once in the run, so once in this change (a product of non-zero weights):
                    # a join reading it does not hash and sort it to find that (`new_once`)
                    out = out.with_df(out.df, consolidated=True)
                values[nid] = out
        return values

    def _distinct(self, facts: RowSet, d: Any) -> Any:
        """The facts of the change `d` not derived before (weight 1 each)."""
        k = self.kernel
        z = _derived(k, d)
        new = facts.new(z.data(), z.weights())
        return k.from_local(
            ZSet(new.with_columns(pl.lit(1, dtype=pl.Int64).alias(WEIGHT)), consolidated=True)
        )


def _derived(k: Any, d: Any) -> ZSet:
    """A distinct's change of derivations, held here, each of positive weight (else `NotFresh`)."""
    z = k.to_local(d)
    if len(z) and (z.weights() <= 0).any():
        z = z.consolidate()
        if len(z) and (z.weights() < 0).any():
            raise NotFresh
    return z


class _Ranked:
    """A ranked distinct's fresh run: the facts derived so far (a set of the facts' columns), the
    derivations by fact and rank, and the facts' changes for its trace of facts.

    While every call's derivations share one rank, the set keeps each call's derivations as a round
    (`RowSet.fresh_round`: summed by fact, which facts were new) and the supports are read from the
    rounds (`round_supports`); from the first call of several ranks, or once the set is a frame, the
    rounds so far and every later call's derivations are tallied by fact and rank in a second set
    (`tallied_supports`)."""

    def __init__(self, state: Any) -> None:
        self.state = state
        self.cols = list(state.cols)
        self.facts = RowSet(pl.Schema([(c, state.schema[c]) for c in self.cols]))
        self.ranks: list[int] | None = []  # each round's rank; None once the derivations are tallied
        self.tally = RowSet(pl.Schema(state.out))  # (the derivations: the fact and their rank)
        self.tallied: set[int] = set()  # the ranks of the derivations tallied so far
        self.out: list[pl.DataFrame] = []

    def new(self, z: ZSet) -> ZSet:
        """The facts of `z` not derived before, each at 1 + the least rank of its derivations here.

        From empty state an iteration's derivations share one rank, the previous iteration's (a
        derivation first arrives once its last premise is new, and its rank is its premises'
        largest), so the new facts take that rank + 1 and the set's new rows serve as they are. An
        iteration whose derivations' ranks differ (a recursive distinct reading another's change of
        the same iteration) groups the new facts' derivations by fact for the least."""
        data = z.data()
        ranks = data[RANK].to_numpy()
        one = int(ranks[0]) if len(ranks) and ranks.min() == ranks.max() else None
        if not len(ranks):  # (no derivation: no new fact, nothing to count)
            return self._least(pick(data, self.cols), 0)
        if self.ranks is not None and one is not None:
            facts = self.facts.fresh_round(pick(data, self.cols), z.weights())
            if facts is not None:
                self.ranks.append(one)
                return self._least(facts, one + 1)
        self._tally_rounds()
        # derivations of one rank that none tallied before had: rows of their own in the tally
        self.tally.count(data, z.weights(), apart=one is not None and one not in self.tallied)
        self.tallied.update(sorted_unique(ranks).tolist() if one is None else [one])
        got = self.facts.fresh_rows(data)
        if got is None:  # (the set is a frame: its new facts, and their derivations by a semi-join)
            new = self.facts.new(data.select(self.cols))
            derived = data.join(new, on=self.cols, how="semi", nulls_equal=True)
        else:
            mask, facts = got
            new_ranks = ranks[mask]
            if len(new_ranks) == 0 or new_ranks.min() == new_ranks.max():
                return self._least(facts, int(new_ranks[0]) + 1 if len(new_ranks) else 0)
            derived = data.filter(pl.Series(mask))
        least = (
            derived.group_by(self.cols)
            .agg((pl.col(RANK).min() + 1).alias(RANK))
            .with_columns(pl.lit(1, dtype=pl.Int64).alias(WEIGHT))
        )
        self.out.append(least)
        return ZSet(least, consolidated=True)

    def _least(self, facts: pl.DataFrame, rank: int) -> ZSet:
        """New facts, all at `rank`, as the distinct's output (kept for its trace of facts)."""
        n = facts.height
        least = pl.DataFrame(  # (of its columns: `with_columns` is a query, ~66 against ~10 µs)
            [
                *facts.get_columns(),
                pl.Series(RANK, np.full(n, rank, dtype=np.int64)),
                pl.Series(WEIGHT, np.ones(n, dtype=np.int64)),
            ]
        )
        self.out.append(least)
        return ZSet(least, consolidated=True)

    def _tally_rounds(self) -> None:
        """The rounds kept so far into the tally by fact and rank, and no rounds after."""
        if self.ranks is None:
            return
        for rows, rank in zip(self.facts.take_rounds(), self.ranks, strict=True):
            r = rows.with_columns(pl.lit(rank, dtype=pl.Int64).alias(RANK))
            self.tally.count(pick(r, list(self.tally.cols)), rows[WEIGHT].to_numpy())
        self.tallied.update(self.ranks)
        self.ranks = None

    def finish(self, k: Any, undo: list) -> None:
        """The facts derived, with their ranks and their derivations counted (`columnar/rank_fold.py`),
        into the distinct's trace of facts."""
        if self.out:
            facts = pl.concat(self.out)  # (each fact is new once)
            if self.ranks is not None:
                rows = round_supports(facts, self.cols, self.facts.rounds, self.ranks)
            else:
                rows = tallied_supports(facts, self.tally, self.cols)
            k.trace_insert(self.state.facts, k.from_local(ZSet(rows, consolidated=True)), undo)
