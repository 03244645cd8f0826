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

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dbspark.errors import RecursionLimitError
from dbspark.ir.expr import Case, Col, Expr, col, lit
from dbspark.operators.base import NONLINEAR, Operator, Shape
from dbspark.operators.distinct import H_WEIGHT, positive
from dbspark.operators.fixpoint import Iteration
from dbspark.operators.fresh import FreshRun, NotFresh
from dbspark.operators.linear import Map
from dbspark.operators.nested_trace import total
from dbspark.operators.source import Constant
from dbspark.operators.time import Delay, DelayState, Differentiate, Integrate

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
# so the second run puts them back unless those go too (`operators/auto_scope.py`'s rule counts them)
SUPPORTED_WEIGHT: Expr = Case((((W0 < 0) & (W1 > 0) & W2.eq(0) & (W1 + W0 > 0), lit(1)),), lit(0))
NORMAL, OVERDELETE = "normal", "overdelete"
# a step from empty state that removes nothing runs as `FreshRun` (`DRedScopeState.fresh_runs`; tests
# switch it off to compare)
FRESH_RUNS = True


class Runaway(Exception):
    """An over-delete that puts back most of what it removes (`operators/auto_scope.py`), or a step past
    its deadline: the step is undone and recomputed."""


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
        set_undoably(self, undo, **values)


def set_undoably(obj: Any, undo: list, **values: Any) -> None:
    """Set attributes of `obj`, registering an undo that sets them back."""
    old = {k: getattr(obj, k) for k in values}
    undo.append(lambda: obj.__dict__.update(old))
    obj.__dict__.update(values)


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


def held_rows(k: Kernel, values: Any) -> int:
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
        # a constant of the body enters it once, at the first step that runs it (its D along the
        # iterations, kept across steps, is 0 after): that step runs even without a change
        self.constants = [
            nid
            for nid in self.it.order
            if isinstance(inner.nodes[nid].op, Differentiate)
            and isinstance(inner.nodes[inner.nodes[nid].inputs[0]].op, Constant)
        ]
        self.fresh: FreshRun | None = None
        self.fresh_runs = FRESH_RUNS
        # raise `Runaway` from an over-delete whose removals are still supported, or from an iteration
        # that ends past `deadline` (a `time.perf_counter` value; `operators/auto_scope.py`)
        self.watch: Callable[[int | None, int | None], bool] | None = None
        self.deadline: float | None = None
        self.ran_fresh = False  # whether the last step was a fresh run (`FreshRun`)
        # a step from empty state computes its results alone and leaves the state empty (`FreshRun.run`'s
        # `lean`: a recompute the next step replaces, `operators/auto_scope.py`)
        self.lean = False

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
        self.ran_fresh = False
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
                runs += self.fresh.run(adding, parts, undo, lean=self.lean)
                self.ran_fresh = True
            except NotFresh:  # (nothing changed: the step runs the usual way)
                parts = [[] for _ in op.results]
                runs += self._run(adding, parts, undo)
        elif over or not all(k.is_empty(v) for v in adding.values()) or self._constants_due():
            runs += self._run(adding, parts, undo, watch=None)
        for s in self.distincts:
            s.set(undo, removed=None, resync=False, watch=False)
        if self.lean:  # (the results alone: what the step kept, and the delays' values, emptied)
            self.clear(undo)
        self.iterations.append(runs)
        self.overdeleted.append(over)
        if not parts[0]:
            return tuple(k.empty(op.inner.nodes[op.inner.outputs[r]].shape.schema) for r in op.results)
        out = tuple(k.consolidate(total(k, ps)) for ps in parts)
        if over:
            self.put_back = held_rows(k, removed) - held_rows(k, out)
        return out

    def _constants_due(self) -> bool:
        """Whether a constant of the body has not entered it yet (from empty state)."""
        return any(self.kernel.is_empty(self.it.states[nid].value) for nid in self.constants)

    def _fresh(self, imports: dict[str, Any]) -> bool:
        """Whether the step starts from empty state with changes held in this process (`FreshRun`)."""
        k = self.kernel
        if not all(k.is_local(v) for v in imports.values()) or all(k.is_empty(v) for v in imports.values()):
            return False
        # (every trace the state keeps: a body without a join keeps no integral, only its ranked
        # distincts' facts, and an insert into it is not a step from empty state)
        return all(k.trace_stats(t)[0] == 0 for t in self.traces())

    def traces(self) -> list[Any]:
        """The traces the state keeps across steps: its integrals, and its ranked distincts' facts."""
        facts = [s.facts for s in self.distincts if hasattr(s, "facts")]
        return [*(self.it.states[nid] for nid in self.integrals), *facts]

    def how(self) -> str | None:
        """How the last step ran (`circuit/metrics.py`): a fresh run or delete-and-rederive (with an
        over-delete or not), and its iterations; None before any step."""
        if not self.iterations:
            return None
        way = (
            "fresh run" if self.ran_fresh else "delete-and-rederive" if self.overdeleted[-1] else "semi-naive"
        )
        return f"{way}, {self.iterations[-1]} iterations"

    def reread(self) -> None:
        """The delays of integrals read their traces again: at a step's start, and after it once its
        deferred inserts are batched (`Kernel.deferring`), when the snapshots they hold still carry the
        deferred frames, a second copy of what the traces then hold (same generation: 65 of 290 MB)."""
        for nid, src in self.trace_delays:
            self.it.states[nid].value = self.it.states[src].snapshot()

    def settled(self, out: tuple) -> tuple:
        """The step's output once its traces are indexed (after `Kernel.deferring`): after a fresh run, a
        result that is a ranked distinct's facts less their rank is read from its trace of facts (the
        same rows: the step's new facts, into a trace empty before it), sharing that trace's columns
        and key hashes, so that the view's trace keeps them without sorting them again (transitive
        closure of 5,000 nodes: 24M facts, 1.2-1.7 s)."""
        if not self.ran_fresh:
            return out
        k, inner, res = self.kernel, self.op.inner, list(out)
        for i, r in enumerate(self.op.results):
            node = inner.nodes[inner.outputs[r]]
            st = self.it.states.get(node.inputs[0]) if node.inputs else None
            if not isinstance(node.op, Map) or st is None or not hasattr(st, "facts"):
                continue
            exprs = node.op.exprs
            if [e.name if isinstance(e, Col) else None for _, e in exprs] != list(st.cols):
                continue
            got = k.trace_keys(st.facts, [n for n, _ in exprs])
            if got is not None and held_rows(k, [got]) == held_rows(k, [out[i]]):
                res[i] = got
        return tuple(res)

    def _run(self, imports: dict[str, Any], parts: list[list[Any]], undo: list, watch: Any = None) -> int:
        """Iterations from `imports` until the feedback is empty; returns how many ran. `watch`: called
        after each iteration with the facts removed so far and how many of them are still supported
        (None where not counted); raises `Runaway` when it says so, or when an iteration ends past
        `self.deadline`."""
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
            if self.deadline is not None and time.perf_counter() > self.deadline:
                raise Runaway(op.scope)
            if n > op.max_iterations:
                raise RecursionLimitError(
                    f"recursive scope {op.scope!r} did not reach a fixpoint within {op.max_iterations} iterations"
                )

    def clear(self, undo: list) -> None:
        """Hold nothing, as when made: the state a recompute replaced (`operators/auto_scope.py`)."""
        k, inner = self.kernel, self.op.inner
        for t in self.traces():
            k.trace_clear(t, undo)
        for nid in self.it.order:  # (a delay, or a D's last value: a constant enters again)
            st = self.it.states.get(nid)
            if isinstance(st, DelayState):
                old = st.value
                undo.append(lambda st=st, old=old: setattr(st, "value", old))
                st.value = k.empty(inner.nodes[nid].shape.schema)

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
