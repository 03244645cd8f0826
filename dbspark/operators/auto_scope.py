"""The strategy "auto" of a monotone recursive scope: delete-and-rederive, or a recompute, chosen per step
(`docs/recursion-strategies.md`, "The rule of auto").

A step runs delete-and-rederive (`operators/dred.py`) unless that costs more than recomputing the scope
from its imports. Two signs say it does, and either stops the step, which is undone and recomputed:

- *the over-delete runs away*: of the facts it removed so far, at least SWITCH_MIN, half, and
  SWITCH_SHARE of the fixpoint still had a derivation when removed, so most will be re-derived (a
  cycle or many derivations support them: reachability in a strongly connected graph);
- *the step passes its budget*: an iteration ends more than BUDGET times the scope's last recompute
  after the step began, and at least MIN_BUDGET seconds (measured by the clock, the whole recompute:
  reading the imports' integrals and the old fixpoint, the fresh run and the change; scaled by the
  fixpoint's growth since). Before the first recompute a step has no budget; the first step, when it
  runs from empty state, counts as one that took FRESH_TO_RECOMPUTE times its fresh run (which reads
  no old fixpoint and makes no change against it);
- *the step will pass its budget*: after an iteration of the over-delete, its time so far times
  1 + the share of its removals still supported passes the budget: re-deriving those costs about what
  removing them did (transitive closure of 2,000 nodes: 162k facts removed in 0.92 s, 90% of them
  supported; the step passed its budget of 1.46 s in the re-derivation, at 1.65 s, and then
  recomputed).

A recompute is a fresh run (`operators/fresh.py`) of the body from empty state over the imports'
integrals, kept for it, into a second delete-and-rederive state kept empty for it; the step's change is
the new fixpoint less the old, and the two states trade places, the old one emptied in the same step
(its undo holds it until the step commits: between steps the scope holds one fixpoint, not two). A
recompute whose next step recomputes too is lean where the engine keeps state in this process: its
results alone, kept as the next change's old fixpoint, the state left empty (`_recompute`). After a
stopped step the next 1, 2, 4, ... (at most MAX_SKIP) steps recompute without trying
delete-and-rederive first; a step that delete-and-rederive finishes resets that. After a step whose
over-delete put back more than SWITCH_RATIO times the facts that changed (and SWITCH_MIN, and
SWITCH_SHARE of the fixpoint), the next step recomputes too.

A change too large for this process (on Spark: left on the cluster by the placement), or a recompute
whose imports' integrals are, makes the scope nested (`operators/nested.py`) from that step on, built
on the cluster from the imports' integrals.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dbspark.algebra.zset import ZSet
from dbspark.columnar.set_change import set_change
from dbspark.ir.expr import col
from dbspark.operators.distinct import positive
from dbspark.operators.dred import DRedScopeState, Runaway, held_rows, set_undoably
from dbspark.operators.fixpoint import ScopeState

if TYPE_CHECKING:
    from dbspark.engines.base import Kernel
    from dbspark.operators.fixpoint import Fixpoint

W0, W1 = col("__w0"), col("__w1")
# The rule's constants (tests change them). The share of removed facts still supported is a low
# estimate of the put-back: a fact removed at its last derivation often comes back through another path
# (measured in `bench/recursion.py`: reachability 55% supported, 99.9% put back; transitive closure 86%
# and 99%; points-to 64% and 86%; same generation, whose facts have one derivation each, 0% and 0%).
# The share of the fixpoint (2026-12-06, 0.05 before): the supported removals of a batch of 100 + 100
# reach 3.8% of the fixpoint in transitive closure of 2,000 nodes (146k of 3.8M, its try then ran
# 0.9 s against a 1.0-1.4 s recompute) and 0.8% in points-to (2.6k of 334k, whose batches
# delete-and-rederive does in 0.25 s against a 0.42 s recompute): at a twentieth, tc's tries of 1,000
# nodes ran to the budget (0.37-0.42 s a try, 0.21-0.29 s now)
SWITCH_MIN = 2_000
SWITCH_RATIO = 4
SWITCH_SHARE = 0.02
# A delete-and-rederive step may take BUDGET times the last recompute before it is stopped: a step then
# costs at most about (1 + BUDGET) recomputes, and one that delete-and-rederive does faster is not
# stopped (reachability at 100k edges: 49 ms a batch against a 71 ms recompute, `bench/README.md`)
BUDGET = 1.0
MAX_SKIP = 8
# a step is not stopped before this many seconds (a recompute's fixed costs, the clock's noise on small
# scopes; on Spark a recompute reads every import's integral)
MIN_BUDGET = 0.5
# a recompute step's time over the first step's (a fresh run from empty state, the process's first: its
# memory touched the first time): the first step's time, times this, is the first recompute's estimate.
# Measured 2026-12-06 (a full recompute step, warm, against the first step): transitive closure of
# 1,000 nodes 0.66x, of 2,000 0.89x, points-to 0.87x, reachability 0.74x, same generation on a forest
# 0.83x and on a tree of 20,000 0.25-0.55x (1.5 before, set when a recompute's change was a group-by of
# both fixpoints: the first tries of a batch then ran half as long again as a recompute)
FRESH_TO_RECOMPUTE = 1.0


def _runaway(removed: int | None, kept: int | None) -> bool:
    """Whether an over-delete runs away: of the facts it removed so far, at least SWITCH_MIN and half
    kept a derivation (uncounted: no)."""
    if removed is None or kept is None:
        return False
    return kept >= SWITCH_MIN and 2 * kept >= removed


class AutoScopeState:
    """A monotone scope under the strategy "auto" (see the module docstring).

    Its states are made at once (an engine names its traces in the order they are made, and a
    checkpoint is restored into traces of the same names): two delete-and-rederive states, of which
    `active` holds the fixpoint, the imports' integrals, and the nested state, kept empty until a change
    too large for this process switches to it."""

    def __init__(self, op: Fixpoint, kernel: Kernel) -> None:
        assert op.alt is not None
        self.op = op
        self.kernel = kernel
        self.dreds = [DRedScopeState(op, kernel)]
        inner = op.inner
        self.inputs = {
            name: kernel.new_trace(sch, tuple(sch))
            for name in op.imports
            for sch in [inner.nodes[inner.inputs[name]].shape.schema]
        }
        self.nested = ScopeState(op.alt, kernel)
        self.dreds.append(DRedScopeState(op, kernel))  # (made last: the others' trace names as before)
        self.empty = [d.to_state() for d in self.dreds], {n: t.to_state() for n, t in self.inputs.items()}
        self.empty_nested = self.nested.to_state()
        self.active = 0
        self.switched_at: int | None = None  # the outer step after which it went nested
        self.released = False  # the delete-and-rederive states emptied after the switch
        self.runs: list[int] = []  # iterations per step (for measurements)
        self.recomputed: list[int] = []  # the steps recomputed (numbered from 0)
        # the rule (tests replace `runaway`, set `budget`)
        self.runaway: Callable[[int | None, int | None], bool] = self._runs_away
        self.budget = BUDGET
        self.skip, self.backoff = 0, 1  # steps left to recompute directly; the next stop's skip
        self.cost: tuple[float, int] | None = None  # the last recompute's seconds, and the rows it made
        # the fixpoint's rows: from the first step's fresh run or a recompute, else counted the first
        # time the rule weighs its share (counting reads every fact: 0.3 s for points-to's 3.3M; tc at
        # 5,000 nodes, its 24M facts grouped twice, had a first batch of 41.6 s against dred's 12.5 s),
        # then kept up by each step's change
        self._size: int | None = None
        self._estimate: int | None = None  # this step's estimate of the fixpoint's rows (if it weighed one)
        self.plain = False  # the last step's output is the active state's step's (`settled`)
        # the results' facts at the last step (local Z-sets), where it recomputed lean: the active
        # state then holds nothing (`_recompute`)
        self.lean: tuple[Any, ...] | None = None

    @property
    def dred(self) -> DRedScopeState:
        return self.dreds[self.active]

    @property
    def iterations(self) -> list[int]:
        return self.runs + (self.nested.iterations if self.switched_at is not None else [])

    def _set(self, undo: list, **values: Any) -> None:
        set_undoably(self, undo, **values)

    def _runs_away(self, removed: int | None, kept: int | None) -> bool:
        if not _runaway(removed, kept) or removed is None or kept is None:
            return False
        # the results at the last step: kept up since counted, or an estimate made once in this step
        # (what is left of them, and the removals, which count a fact once per result it leaves)
        if self._size is None and self._estimate is None:
            self._estimate = self._fixpoint_rows() + removed
        size = self._size if self._size is not None else self._estimate
        return kept > 0 and kept >= SWITCH_SHARE * (size or 0)  # (nothing kept: nothing to save)

    def _fixpoint_rows(self) -> int:
        """The rows the results hold now (those held in this process: on the cluster, 0). Counted only
        where the rule weighs its share and the size is not kept, since it reads every fact."""
        return sum(held_rows(self.kernel, [r]) for r in self._fixpoint())

    def _watch(self, began: float, deadline: float | None) -> Callable[[int | None, int | None], bool]:
        """The over-delete's watch of a step that began at `began`: `runaway`, or the step will pass
        its `deadline` (a budget of 0 or none: by the deadline alone)."""

        def watch(removed: int | None, kept: int | None) -> bool:
            if self.runaway(removed, kept):
                return True
            if deadline is None or self.budget <= 0 or not removed or kept is None:
                return False
            now = time.perf_counter()
            return now + (now - began) * kept / removed > deadline

        return watch

    def _deadline(self) -> float | None:
        """When a delete-and-rederive step that begins now passes its budget (None: no budget, as before
        the first recompute)."""
        if self.cost is None or math.isinf(self.budget):
            return None
        secs, rows = self.cost
        grown = self._size / rows if self._size is not None and rows > 0 else 1.0
        allowed = max(self.budget * secs * max(1.0, grown), MIN_BUDGET) if self.budget > 0 else 0.0
        return time.perf_counter() + allowed

    def step(self, imports: dict[str, Any], undo: list) -> tuple:
        k = self.kernel
        self.plain = False  # (until the active state's own step returns)
        if self.switched_at is not None:
            if not self.released:  # the switch is committed: free the other states' memory
                for d in self.dreds:
                    d.clear(undo)
                for t in self.inputs.values():
                    k.trace_clear(t, undo)
                self._set(undo, released=True, lean=None)
            return self.nested.step(imports, undo)
        if not all(k.is_local(v) for v in imports.values()):
            # a change too large for this process (on Spark: left on the cluster): nested from this
            # step on, built there, which loads faster than dred's iterations on the cluster (1M
            # edges: 112 against 124 s; dred's later batches in the driver are faster, 71 against 95
            # ms: docs/recursion-strategies.md); from empty state it is the nested scope's first step
            # on the change itself
            if all(k.is_empty(t.snapshot()) for t in self.inputs.values()):
                return self._switch(undo, None, imports)
            for name, v in imports.items():
                k.trace_insert(self.inputs[name], v, undo)
            return self._switch(undo, self._fixpoint(), here=False)
        for name, v in imports.items():
            k.trace_insert(self.inputs[name], v, undo)
        if self.skip > 0:
            self._set(undo, skip=self.skip - 1)
            return self._recompute(undo, lean=self.skip > 0)
        if self.lean is not None:  # (the active state holds nothing: a recompute that keeps its state)
            return self._recompute(undo)
        self._estimate = None
        sub: list = []  # the delete-and-rederive step's own undo: a stopped step is undone
        dred = self.dred
        dred.deadline = self._deadline()
        began = time.perf_counter()
        dred.watch = self._watch(began, dred.deadline)
        try:
            out = dred.step(imports, sub)
        except Runaway:
            for f in reversed(sub):
                f()
            self._set(undo, skip=self.backoff, backoff=min(2 * self.backoff, MAX_SKIP))
            return self._recompute(undo, lean=True)
        except BaseException:
            undo.extend(sub)
            raise
        finally:
            dred.watch = dred.deadline = None
        undo.extend(sub)
        self.runs.append(dred.iterations[-1])
        back, size = dred.put_back, self._size
        self._set(undo, backoff=1)
        undo.append(lambda: setattr(self, "_size", size))
        if dred.ran_fresh:  # from empty state (the first step): what a recompute costs, and its rows
            rows = sum(held_rows(k, [v]) for v in out)
            self.cost = FRESH_TO_RECOMPUTE * (time.perf_counter() - began), rows
            self._size = rows if all(k.is_local(v) for v in out) else None
        elif size is not None:  # kept up: the step's change added
            net = [k.to_local(v) for v in out if k.is_local(v)]
            self._size = size + sum(int(z.weights().sum()) for z in net) if len(net) == len(out) else None
        over = dred.overdeleted[-1] and back >= SWITCH_MIN and back > 0
        if self._size is None and (self._estimate is not None or over):
            self._size = self._fixpoint_rows()  # (exact, once: later steps keep it up)
        if over and back >= SWITCH_RATIO * held_rows(k, out) and back >= SWITCH_SHARE * (self._size or 0):
            self._set(undo, skip=1)  # (the step's change is dred's; the next one recomputes)
        self.plain = True
        return out

    def _recompute(self, undo: list, lean: bool = False) -> tuple:
        """This step recomputed: the spare state's fresh run over the imports' integrals, placed in this
        process (`Kernel.place`); returns the new fixpoint less the old, and makes the spare state the
        active one. Integrals too large for this process (on Spark: left on the cluster by the
        placement) make the scope nested from this step on instead, built there (`_switch`).

        `lean`: the next step recomputes too (it replaces this one's state without reading it), so
        where the engine keeps state in this process the fresh run computes the results alone and the
        scope keeps them (`self.lean`), not the state delete-and-rederive would read: no facts' counts,
        no integrals indexed (transitive closure of 1,000 nodes: ~35% of a recompute). A step that
        would try delete-and-rederive after one recomputes in full first."""
        k = self.kernel
        lean = lean and k.state_in_process
        began = time.perf_counter()
        placed = k.place([k.as_zset(t.snapshot()) for t in self.inputs.values()])
        full = dict(zip(self.inputs, placed, strict=True))
        if not all(k.is_local(v) for v in placed):
            return self._switch(undo, self._fixpoint(), full)
        before = self._traces()
        spare = self.dreds[1 - self.active]
        spare.lean = lean
        try:
            now = spare.step(full, undo)
        finally:
            spare.lean = False
        rows = sum(held_rows(k, [v]) for v in now)
        here = all(k.is_local(v) for v in now)  # (else not counted: on Spark, left on the cluster)
        kept = tuple(now) if lean and here else None
        self._set(undo, active=1 - self.active, _size=rows if here else None, lean=kept)
        self.runs.append(spare.iterations[-1])
        self.recomputed.append(len(self.runs) - 1)
        if here:  # (on Spark: the old fixpoint read into the driver too)
            before = [(k.from_local(k.to_local(z)), cols) for z, cols in before]
        out = tuple(self._change(a, z, cols) for a, (z, cols) in zip(now, before, strict=True))
        del before
        # the replaced state emptied now: its undo keeps it until the step commits, so that a failed
        # step finds it (before 2026-12-06 it stayed until the next step: twice the fixpoint's state
        # between steps, tc of 2,000 nodes 0.92 GiB of traces against 0.49)
        self.dreds[1 - self.active].clear(undo)
        self.cost = time.perf_counter() - began, rows  # (the whole step: what stopping a try leads to)
        return out

    def _change(self, new: Any, old: Any, cols: list[str]) -> Any:
        """The new facts (weight 1) less the old (their rows of positive count): by the facts' packed
        keys where both are held in this process (`columnar/set_change.py`), else in one pass grouping
        both by the facts' columns (`Kernel.combine`)."""
        k = self.kernel
        if k.is_local(new) and k.is_local(old):
            n, o = k.to_local(new), k.to_local(old)
            if bool((n.weights() == 1).all()) and bool((o.weights() > 0).all()):
                got = set_change(n.df, o.df, cols)
                if got is not None:
                    return k.from_local(ZSet(got, consolidated=True))
        return k.combine([new, old], cols, W0 - positive(W1))

    def how(self) -> str | None:
        """How the last step ran (`circuit/metrics.py`): nested, recomputed (after a stopped attempt or
        directly) or as its delete-and-rederive state says."""
        if self.switched_at is not None:
            return self.nested.how()
        if not self.runs:
            return None
        if self.recomputed and self.recomputed[-1] == len(self.runs) - 1:
            return f"recomputed, {self.runs[-1]} iterations"
        return self.dred.how()

    def reread(self) -> None:
        if self.switched_at is None:
            self.dred.reread()

    def settled(self, out: tuple) -> tuple:
        """`DRedScopeState.settled`, after a step its active state ran (not a recompute: its output
        is the new fixpoint less the old)."""
        return self.dred.settled(out) if self.plain else out

    def _traces(self) -> list[tuple[Any, list[str]]]:
        """Each result's trace in the active state, whose rows of positive count are the result's facts
        at the last step, with the result's columns (where the last step recomputed lean, its facts)."""
        inner, out = self.op.inner, []
        if self.lean is not None:
            return [
                (z, list(inner.nodes[inner.outputs[r]].shape.schema))
                for z, r in zip(self.lean, self.op.results, strict=True)
            ]
        for r in self.op.results:
            node = inner.nodes[inner.outputs[r]]
            facts = getattr(self.dred.it.states.get(node.inputs[0]), "facts", None)
            if facts is not None:  # a ranked distinct's facts (their rank and counts left out)
                snap = facts.snapshot()
            else:
                integral = inner.nodes[node.inputs[0]].inputs[0]  # distinct(z^-1(I(d)), d): I(d)
                snap = self.dred.it.states[integral].snapshot()
            out.append((self.kernel.as_zset(snap), list(node.shape.schema)))
        return out

    def _fixpoint(self) -> tuple:
        """The scope's results at the last step."""
        return tuple(self.kernel.combine([z], cols, positive(W0)) for z, cols in self._traces())

    def _switch(
        self, undo: list, before: tuple | None, full: dict[str, Any] | None = None, here: bool = True
    ) -> Any:
        """Go nested: its state built from the imports' integrals (or from `full`, the imports'
        values); returns this step's change of the results: the nested step's, with `before` (the
        results at the last step) its change from them. `here`: every change of the imports was held
        in this process (on Spark: in the driver), so the integrals are read into it and the build runs
        there too; else they are placed as large."""
        k = self.kernel
        if full is None:
            ints = [k.as_zset(t.snapshot()) for t in self.inputs.values()]
            vals = [k.from_local(k.to_local(v)) for v in ints] if here else k.place(ints)
            full = dict(zip(self.inputs, vals, strict=True))
        now = self.nested.step(full, undo)
        undo.append(lambda: setattr(self, "switched_at", None))
        self.switched_at = len(self.runs)
        if before is None:
            return now
        return tuple(k.consolidate(k.plus(a, k.neg(b))) for a, b in zip(now, before, strict=True))

    def to_state(self) -> Any:
        if self.switched_at is not None:
            return {"nested": self.nested.to_state(), "switched_at": self.switched_at}
        return {
            "dred": self.dred.to_state(),
            "active": self.active,
            "inputs": {n: t.to_state() for n, t in self.inputs.items()},
            # the rule's memory: without it a restored scope has no budget until it next recomputes,
            # which a workload whose over-delete never runs away (same generation) never does
            "rule": {
                "cost": None if self.cost is None else [self.cost[0], self.cost[1]],
                "skip": self.skip,
                "backoff": self.backoff,
                "size": self._size,
            },
            # the results' facts where the last step recomputed lean (the dred state is then empty)
            "lean": None if self.lean is None else [self.kernel.to_local(z).df for z in self.lean],
        }

    def restore(self, saved: Any) -> None:
        for d, st in zip(self.dreds, self.empty[0], strict=True):
            d.restore(st)
        for n, st in self.empty[1].items():
            self.inputs[n].restore(st)
        if "nested" in saved:
            self.nested.restore(saved["nested"])
            self.switched_at, self.released = saved["switched_at"], True
        else:
            self.nested.restore(self.empty_nested)
            self.active = saved["active"]
            self.dred.restore(saved["dred"])
            for n, st in saved["inputs"].items():
                self.inputs[n].restore(st)
            self.switched_at, self.released = None, False
        lean = saved.get("lean")
        self.lean = (
            None if lean is None else tuple(self.kernel.from_local(ZSet(f, consolidated=True)) for f in lean)
        )
        rule = saved.get("rule") or {}  # (a checkpoint of before it kept none: no budget, as then)
        cost = rule.get("cost")
        self.cost = None if cost is None else (float(cost[0]), int(cost[1]))
        self.skip, self.backoff = int(rule.get("skip", 0)), int(rule.get("backoff", 1))
        self._size = rule.get("size")
