"""Recursive scopes maintained by semi-naive evaluation with delete-and-rederive (`docs/recursion-strategies.md`).

A monotone scope (`incremental/monotone.py`) keeps, from one outer step to the next, the state of its
body incrementalized along the iterations only: the semi-naive circuit (`dbsp-paper.txt` eq. 5.1),
whose integrals then hold every intermediate relation at the last fixpoint, one row per fact (no
iteration column). An outer step splits each import's change into the part that can only remove facts
(deletes of an import read positively, inserts of one read under a negation) and the part that can
only add them, and runs the body's iterations twice:

1. **over-delete**: the removing part flows through the circuit; a recursive distinct removes a fact
   as soon as it loses a derivation (its count of derivations drops), once, even if others remain
   (`RecursiveDistinct`), or, where the body ranks its facts (`incremental/ranked.py`, the default),
   only when no derivation ranking below the fact is left (`operators/ranked_distinct.py`);
2. **re-derive and insert**: at the first iteration of the second run, each recursive distinct puts
   back the facts it removed that still have a derivation (count > 0), and the adding part flows in;
   the iterations go on until nothing changes, as semi-naive evaluation does.

A step without a removing part is only the second run: semi-naive evaluation continued from the
current fixpoint. The first step of all is semi-naive evaluation from empty state. The work follows
the facts that change, the facts over-deleted and re-derived, and the iterations each run needs; the
nested scope's (fact, iteration) cells (`operators/nested.py`) are not kept at all.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dbspark.errors import RecursionLimitError
from dbspark.ir.expr import Case, Expr, col, lit
from dbspark.operators.base import NONLINEAR, Operator, Shape
from dbspark.operators.distinct import H_WEIGHT, positive
from dbspark.operators.fixpoint import Iteration, ScopeState
from dbspark.operators.fresh import FreshRun, NotFresh
from dbspark.operators.nested_trace import total
from dbspark.operators.time import Delay, Integrate

if TYPE_CHECKING:
    from dbspark.engines.base import Kernel, Value
    from dbspark.operators.fixpoint import Fixpoint

W0, W1, W2 = col("__w0"), col("__w1"), col("__w2")
# over-delete: -1 where the count drops (w0 < 0) for a fact there before (w1 > 0) not removed yet (w2 = 0)
OVERDELETE_WEIGHT: Expr = Case((((W0 < 0) & (W1 > 0) & W2.eq(0), lit(-1)),), lit(0))
# the first evaluation after an over-delete: a removed fact (w2 < 0) is back iff its count is positive;
# any other fact follows H
RESYNC_WEIGHT: Expr = positive(W1 + W0) - Case(((W2.eq(0), positive(W1)),), lit(0))
# of the facts over-deleted (OVERDELETE_WEIGHT), those whose count stays positive: derivations remain,
# so the second run puts them back unless those go too (`AutoScopeState`'s early switch counts them)
SUPPORTED_WEIGHT: Expr = Case((((W0 < 0) & (W1 > 0) & W2.eq(0) & (W1 + W0 > 0), lit(1)),), lit(0))
NORMAL, OVERDELETE = "normal", "overdelete"
# a step from empty state that removes nothing runs as `FreshRun` (`DRedScopeState.fresh_runs`; tests
# switch it off to compare)
FRESH_RUNS = True


class Runaway(Exception):
    """An over-delete that puts back most of what it removes (`AutoScopeState`): the step is redone
    nested."""


class RecursiveDistinctState:
    """`removed`: the over-delete run's input changes (a scratch trace: negative where a fact lost
    derivations, hence was removed); `resync`: the next evaluation puts back what still has one."""

    def __init__(self, schema: Any) -> None:
        self.schema = schema
        self.cols = tuple(schema)
        self.phase = NORMAL
        self.removed: Any = None
        self.resync = False
        # counting the over-delete (`DRedScopeState.watch`): facts removed, of them still supported;
        # None when a value was not held in this process (on Spark: too many to read)
        self.watch = False
        self.counts: tuple[int, int] | None = (0, 0)

    def set(self, undo: list, **values: Any) -> None:
        old = {k: getattr(self, k) for k in values}
        undo.append(lambda: self.__dict__.update(old))
        self.__dict__.update(values)


@dataclass(frozen=True)
class RecursiveDistinct(Operator):
    """A distinct on a scope's loop, maintained by delete-and-rederive; inputs: the delayed integral of
    its input (every column indexed) and the input's change, as `DistinctH`'s."""

    name = "recursive_distinct"
    kind = NONLINEAR
    arity = 2
    stateful = True

    def shape(self, ins: list[Shape]) -> Shape:
        return Shape(ins[1].schema)

    def label(self) -> str:
        return "distinct (delete-and-rederive)"

    def init(self, kernel: Kernel, shape: Shape, in_shapes: list[Shape]) -> Any:
        return RecursiveDistinctState(shape.schema)

    def checkpoint(self, kernel: Kernel, state: Any) -> Any:
        return None  # between steps it holds nothing: `removed` lasts one step

    def restore(self, kernel: Kernel, state: Any, saved: Any) -> Any:
        return state

    def eval(self, kernel: Kernel, state: RecursiveDistinctState, inputs: list[Any], undo: list) -> Any:
        k = kernel
        prev, d = inputs
        if k.is_local(d) or state.phase == OVERDELETE:  # (`DistinctH.eval`)
            d = k.consolidate(d, by_rows=True)
        on = [(c, c) for c in state.cols]
        if state.phase == OVERDELETE:
            if k.known_empty(d):
                return d
            removed = state.removed
            parts = [d, k.seek(prev, d, on, exact=True), k.seek(removed.snapshot(), d, on, exact=True)]
            out = k.combine(parts, state.cols, OVERDELETE_WEIGHT)
            if state.watch and state.counts is not None:
                kept = k.combine(parts, state.cols, SUPPORTED_WEIGHT)
                if k.is_local(out) and k.is_local(kept):
                    n, m = state.counts
                    state.counts = (n + len(k.to_local(out)), m + len(k.to_local(kept)))
                else:
                    state.counts = None
            k.trace_insert(removed, d, undo)
            return out
        if state.resync:
            state.set(undo, resync=False)
            gone = k.as_zset(state.removed.snapshot())
            found = k.seek(prev, k.plus(d, gone), on, exact=True)
            return k.combine([d, found, gone], state.cols, RESYNC_WEIGHT)
        return k.combine([d, k.seek(prev, d, on, exact=True)], state.cols, H_WEIGHT)


def _rows(k: Kernel, values: Any) -> int:
    """How many rows the values hold, counted where they are held in this process (else 0)."""
    return sum(len(k.to_local(v)) for v in values if k.is_local(v))


def _part(k: Kernel, v: Value, sign: int) -> Value:
    """The rows of `v` of positive (sign 1) or negative (-1) weight."""
    w = col("__w0")
    keep = (w > 0) if sign > 0 else (w < 0)
    return k.combine([v], list(v.schema), Case(((keep, w),), lit(0)))


class DRedScopeState:
    """The state of a scope maintained by delete-and-rederive: its semi-naive body's integrals."""

    def __init__(self, op: Fixpoint, kernel: Kernel) -> None:
        self.op = op
        self.kernel = kernel
        self.it = Iteration(op.inner, kernel)
        inner = op.inner
        self.distincts = [s for s in self.it.states.values() if isinstance(s, RecursiveDistinctState)]
        # (a `RankedDistinct`'s state is a `RecursiveDistinctState` too)
        self.distinct_nodes = [
            nid for nid in self.it.order if isinstance(self.it.states.get(nid), RecursiveDistinctState)
        ]
        # each delay of an integral, with the integral's node: re-read from the trace at each step
        self.trace_delays = [
            (nid, inner.nodes[nid].inputs[0])
            for nid in self.it.order
            if isinstance(inner.nodes[nid].op, Delay) and inner.nodes[nid].shape.trace
        ]
        self.iterations: list[int] = []  # iterations run per outer step (both runs; for measurements)
        self.overdeleted: list[bool] = []  # whether a step ran the over-delete
        self.put_back = 0  # the last step's facts over-deleted and re-derived (at most: less what changed)
        self.removed: list[Any] = []  # the last over-delete's removals from each result
        self.integrals = [nid for nid in self.it.order if isinstance(inner.nodes[nid].op, Integrate)]
        self.fresh: FreshRun | None = None
        self.fresh_runs = FRESH_RUNS
        # raise `Runaway` from an over-delete whose removals are still supported (`AutoScopeState`)
        self.watch: Callable[[int | None, int | None], bool] | None = None

    def step(self, imports: dict[str, Any], undo: list) -> tuple:
        k, op = self.kernel, self.op
        self.reread()  # (a step's flush may have given the traces new files)
        removing, adding = {}, {}
        for name, v in imports.items():
            sign = op.polarity.get(name, 1)
            removing[name], adding[name] = _part(k, v, -sign), _part(k, v, sign)
        parts: list[list[Any]] = [[] for _ in op.results]
        runs = 0
        over = not all(k.is_empty(v) for v in removing.values())
        self.put_back = 0
        if over:
            with k.scratch():
                for s in self.distincts:
                    s.set(
                        undo,
                        phase=OVERDELETE,
                        removed=k.new_trace(s.schema, s.cols),
                        watch=self.watch is not None,
                        counts=(0, 0),
                    )
            runs += self._run(removing, parts, undo, watch=self.watch)
            for s in self.distincts:
                s.set(undo, phase=NORMAL, resync=True)
            removed = self.removed = [k.consolidate(total(k, ps)) for ps in parts]
        if not over and self.fresh_runs and self._fresh(adding):
            self.fresh = self.fresh or FreshRun(self)  # (made at the first step from empty state)
            try:
                runs += self.fresh.run(adding, parts, undo)
            except NotFresh:  # (nothing changed: the step runs the usual way)
                parts = [[] for _ in op.results]
                runs += self._run(adding, parts, undo)
        elif over or not all(k.is_empty(v) for v in adding.values()):
            runs += self._run(adding, parts, undo)
        for s in self.distincts:
            s.set(undo, removed=None, resync=False, watch=False)
        self.iterations.append(runs)
        self.overdeleted.append(over)
        if not parts[0]:
            return tuple(k.empty(op.inner.nodes[op.inner.outputs[r]].shape.schema) for r in op.results)
        out = tuple(k.consolidate(total(k, ps)) for ps in parts)
        if over:
            self.put_back = _rows(k, removed) - _rows(k, out)
        return out

    def _fresh(self, imports: dict[str, Any]) -> bool:
        """Whether the step starts from empty state with changes held in this process (`FreshRun`)."""
        k = self.kernel
        if not all(k.is_local(v) for v in imports.values()) or all(k.is_empty(v) for v in imports.values()):
            return False
        return all(k.trace_stats(self.it.states[nid])[0] == 0 for nid in self.integrals)

    def reread(self) -> None:
        """The delays of integrals read their traces again: at a step's start, and after it once its
        deferred inserts are batched (`Kernel.deferring`), when the snapshots they hold still carry the
        deferred frames, a second copy of what the traces then hold (same generation: 65 of 290 MB)."""
        for nid, src in self.trace_delays:
            self.it.states[nid].value = self.it.states[src].snapshot()

    def _run(self, imports: dict[str, Any], parts: list[list[Any]], undo: list, watch: Any = None) -> int:
        """Iterations from `imports` until the feedback is empty; returns how many ran. `watch`: called
        after each iteration with the facts removed so far and how many of them are still supported
        (None where not counted); raises `Runaway` when it says so."""
        k, op = self.kernel, self.op
        empty = {name: k.empty(v.schema) for name, v in imports.items()}
        n = 0
        while True:
            out = self.it.evaluate(imports if n == 0 else empty, n, undo)
            for i, r in enumerate(op.results):
                parts[i].append(out[r])
            n += 1
            if watch is not None:
                counts = [s.counts for s in self.distincts]
                known = all(c is not None for c in counts)
                removed = sum(c[0] for c in counts if c is not None) if known else None
                kept = sum(c[1] for c in counts if c is not None) if known else None
                if watch(removed, kept):
                    raise Runaway(op.scope)
            if self.it.feedback_empty:
                return n
            if n > op.max_iterations:
                raise RecursionLimitError(
                    f"recursive scope {op.scope!r} did not reach a fixpoint within {op.max_iterations} iterations"
                )

    def to_state(self) -> Any:
        """The integrals' states, and a ranked distinct's facts (`operators/ranked_distinct.py`)."""
        inner = self.op.inner
        return {
            nid: self.it.states[nid].to_state()
            for nid in self.it.order
            if isinstance(inner.nodes[nid].op, Integrate) or hasattr(self.it.states[nid], "facts")
        }

    def restore(self, saved: Any) -> None:
        for nid, st in saved.items():
            self.it.states[nid].restore(st)


# `AutoScopeState` switches to the nested scope after a step whose over-delete put back more than
# SWITCH_RATIO times the facts that changed, and at least SWITCH_MIN (module constants: tests lower them);
# and during an over-delete, as soon as at least SWITCH_MIN of the facts it removed, and half of them,
# kept a derivation when removed. (That share is a low estimate of the put-back: a fact removed at its
# last derivation often comes back through another path. Measured in `bench/recursion.py`: reachability
# 55% kept, 99.9% put back; transitive closure 86% and 99%; points-to 64% and 86%; same generation, whose
# facts have one derivation each, 0% and 0%.)
# Both also ask that the facts put back (or kept) be at least SWITCH_SHARE of the fixpoint: the switch
# costs one nested run from scratch (1-2 recomputes), which such over-deletes pay back within about 30
# steps; a smaller one costs each step less than a twentieth of a recompute, and the nested scope would
# not do much better (points-to at 1M statements: dred 1.33 s a batch, nested 1.39 s, the switch 34 s).
SWITCH_MIN = 2_000
SWITCH_RATIO = 4
SWITCH_SHARE = 0.05


def _runaway(removed: int | None, kept: int | None) -> bool:
    """Whether an over-delete runs away: of the facts it removed so far, at least SWITCH_MIN and half
    kept a derivation (uncounted: no)."""
    if removed is None or kept is None:
        return False
    return kept >= SWITCH_MIN and 2 * kept >= removed


class AutoScopeState:
    """A monotone scope under the strategy "auto": delete-and-rederive until a step shows that its
    over-delete runs away (the facts it removes come back: a cycle or many derivations support them,
    as reachability in a strongly connected graph), then the nested scope for good, built once from
    the imports' integrals (kept for that until the switch).

    Both states are made at once (an engine names its traces in the order they are made, and a
    checkpoint is restored into traces of the same names); the one not in use is kept empty: the
    nested one until the switch, the other from the step after it (a failed step may still undo it)."""

    def __init__(self, op: Fixpoint, kernel: Kernel) -> None:
        assert op.alt is not None
        self.op = op
        self.kernel = kernel
        self.dred = DRedScopeState(op, kernel)
        inner = op.inner
        self.inputs = {
            name: kernel.new_trace(sch, tuple(sch))
            for name in op.imports
            for sch in [inner.nodes[inner.inputs[name]].shape.schema]
        }
        self.nested = ScopeState(op.alt, kernel)
        self.empty = self._dred_state(), self.nested.to_state()
        self.switched_at: int | None = None  # the outer step after which it went nested
        self.released = False  # the delete-and-rederive state emptied after the switch
        # the early switch's rule (tests replace it)
        self.runaway: Callable[[int | None, int | None], bool] = self._runs_away
        # the fixpoint's rows: counted the first time a switch is weighed, then kept up by each step's
        # change (counting reads every fact: 0.3 s a step for points-to's 3.3M)
        self._size: int | None = None
        self._estimate: int | None = None  # this step's estimate of the fixpoint's rows (if it weighed one)

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
        where a switch is weighed, since it reads every fact."""
        return sum(_rows(self.kernel, [r]) for r in self._fixpoint())

    def _dred_state(self) -> Any:
        return {"dred": self.dred.to_state(), "inputs": {n: t.to_state() for n, t in self.inputs.items()}}

    def _restore_dred(self, saved: Any) -> None:
        self.dred.restore(saved["dred"])
        for n, st in saved["inputs"].items():
            self.inputs[n].restore(st)

    @property
    def iterations(self) -> list[int]:
        return self.dred.iterations + (self.nested.iterations if self.switched_at is not None else [])

    def step(self, imports: dict[str, Any], undo: list) -> tuple:
        if self.switched_at is not None:
            if not self.released:  # the switch is committed: free the other state's memory
                self._restore_dred(self.empty[0])
                self.released = True
            return self.nested.step(imports, undo)
        k = self.kernel
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
        self._estimate = None
        sub: list = []  # the delete-and-rederive step's own undo: a runaway over-delete is undone
        self.dred.watch = self.runaway
        try:
            out = self.dred.step(imports, sub)
        except Runaway:
            for f in reversed(sub):
                f()
            return self._switch(undo, self._fixpoint())
        except BaseException:
            undo.extend(sub)
            raise
        finally:
            self.dred.watch = None
        undo.extend(sub)
        back, size = self.dred.put_back, self._size
        undo.append(lambda: setattr(self, "_size", size))
        if size is not None:  # kept up: the step's change added
            net = [k.to_local(v) for v in out if k.is_local(v)]
            self._size = size + sum(int(z.weights().sum()) for z in net) if len(net) == len(out) else None
        over = self.dred.overdeleted[-1] and back >= SWITCH_MIN and back > 0
        if self._size is None and (self._estimate is not None or over):
            self._size = self._fixpoint_rows()  # (exact, once: later steps keep it up)
        if over and back >= SWITCH_RATIO * _rows(k, out) and back >= SWITCH_SHARE * (self._size or 0):
            self._switch(undo, None)  # (the step's change is dred's)
        return out

    def reread(self) -> None:
        if self.switched_at is None:
            self.dred.reread()

    def _fixpoint(self) -> tuple:
        """The scope's results at the last step: the rows of positive count in each result's trace."""
        k, inner = self.kernel, self.op.inner
        out = []
        for r in self.op.results:
            node = inner.nodes[inner.outputs[r]]
            facts = getattr(self.dred.it.states.get(node.inputs[0]), "facts", None)
            if facts is not None:  # a ranked distinct's facts, the rank left out by a map
                snap = facts.snapshot()
            else:
                integral = inner.nodes[node.inputs[0]].inputs[0]  # distinct(z^-1(I(d)), d): I(d)
                snap = self.dred.it.states[integral].snapshot()
            out.append(k.combine([k.as_zset(snap)], list(node.shape.schema), positive(W0)))
        return tuple(out)

    def _switch(
        self, undo: list, before: tuple | None, full: dict[str, Any] | None = None, here: bool = True
    ) -> Any:
        """Go nested: its state built from the imports' integrals (or from `full`, the imports'
        values); returns this step's change of the results: the nested step's, with `before` (the
        results at the last step) its change from them. `here`: every change of the imports was held
        in this process (on Spark: in the driver; a change that is not switches at once, `step`), so
        the integrals are read into it and the build runs there too; else they are placed as large."""
        k = self.kernel
        if full is None:
            ints = [k.as_zset(t.snapshot()) for t in self.inputs.values()]
            vals = [k.from_local(k.to_local(v)) for v in ints] if here else k.place(ints)
            full = dict(zip(self.inputs, vals, strict=True))
        now = self.nested.step(full, undo)
        undo.append(lambda: setattr(self, "switched_at", None))
        self.switched_at = len(self.dred.iterations)
        if before is None:
            return now
        return tuple(k.consolidate(k.plus(a, k.neg(b))) for a, b in zip(now, before, strict=True))

    def to_state(self) -> Any:
        if self.switched_at is not None:
            return {"nested": self.nested.to_state(), "switched_at": self.switched_at}
        return self._dred_state()

    def restore(self, saved: Any) -> None:
        if "nested" in saved:
            self.nested.restore(saved["nested"])
            self._restore_dred(self.empty[0])
            self.switched_at, self.released = saved["switched_at"], True
        else:
            self.nested.restore(self.empty[1])
            self._restore_dred(saved)
            self.switched_at, self.released = None, False
