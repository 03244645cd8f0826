"""Recursive scopes: a child circuit iterated to its fixpoint at every outer step (`dbsp-paper.txt` §5-§6).

The child circuit's inputs are the *imports* (delta0: the outer value enters the scope) and its
feedback delays carry the recursive relations from one iteration to the next; its outputs are the
new values of those relations. Three modes:

- `naive` (the circuit of §5): every outer step starts from empty relations and applies the body to
  the previous iteration's full value until it stops changing.
- `seminaive` (eq. 5.1, the cycle rule inside the scope): the body incrementalized along the
  iterations (its `inner` circuit is already rewritten), run from scratch every outer step; the
  result is the sum of the iterations' changes.
- `incremental` (§6, Prop 6.2): the body lifted and incrementalized along both dimensions (its
  operators are the doubly-incremental ones of `operators.nested`), with state kept across outer
  steps: each outer change adjusts the stored fixpoint computation. Imports carry changes.

Every mode runs on the engine's own kernel: on Spark the scope's values are the engine's (rows held in
the driver for a small change, Spark plans for a large one) and the incremental scope's nested traces
are the engine's traces (`operators/nested_trace.py`), so its state lives where every other operator's
does. The naive and semi-naive scopes' state lasts one step: it is built in scratch traces
(`Kernel.scratch`).

An iteration limit guards against runaway recursion: exceeding it raises `RecursionLimitError`
naming the scope, and the runtime rolls the whole step back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dbspark.errors import RecursionLimitError
from dbspark.operators.base import LINEAR, NONLINEAR, Operator, Shape
from dbspark.operators.nested import NestedState
from dbspark.operators.nested_trace import total
from dbspark.operators.source import Input
from dbspark.operators.time import Delay, DelayState

if TYPE_CHECKING:
    from dbspark.circuit.circuit import Circuit
    from dbspark.engines.base import Kernel

DEFAULT_MAX_ITERATIONS = 10_000


@dataclass(frozen=True, eq=False)
class Fixpoint(Operator):
    """A recursive scope; its value is the tuple of its results (pick one with `Pick`)."""

    inner: Circuit
    imports: tuple[str, ...]
    results: tuple[str, ...]
    scope: str
    mode: str = "naive"
    max_iterations: int = DEFAULT_MAX_ITERATIONS
    strategy: str = "auto"  # how incrementalize() maintains it: "auto", "nested" or "dred"
    plain: Circuit | None = None  # the body before any rewrite, when `inner` is not it (seminaive)
    polarity: dict[str, int] = field(default_factory=dict)  # "dred": +1 / -1 per import (monotone.py)
    alt: Fixpoint | None = None  # "auto": the scope maintained nested (for what the driver cannot hold)
    # set: the scope's results are sets whose iterates converge within about as many iterations as they
    # hold facts, or never (`ScopeState.step`); a run past that is refused, this reason in the error
    bounded: str = ""

    name = "fixpoint"
    kind = NONLINEAR
    stateful = True

    @property
    def arity(self) -> int:  # type: ignore[override]
        return len(self.imports)

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other: object) -> bool:
        return self is other

    def shape(self, ins: list[Shape]) -> Shape:
        return self.inner.nodes[self.inner.outputs[self.results[0]]].shape

    def label(self) -> str:
        return f"fixpoint {self.scope} [{self.mode}] -> ({', '.join(self.results)})"

    def init(self, kernel: Kernel, shape: Shape, in_shapes: list[Shape]) -> Any:
        if self.mode in ("dred", "auto"):
            from dbspark.operators.auto_scope import AutoScopeState
            from dbspark.operators.dred import DRedScopeState

            return DRedScopeState(self, kernel) if self.mode == "dred" else AutoScopeState(self, kernel)
        return ScopeState(self, kernel) if self.mode == "incremental" else None

    def eval(self, kernel: Kernel, state: Any, inputs: list[Any], undo: list) -> Any:
        """The imports are placed first (`Kernel.place`): on Spark a small change computed there is
        read into the driver, and the iterations over it run there."""
        placed = kernel.place([kernel.consolidate(v) for v in inputs])
        values = dict(zip(self.imports, placed, strict=True))
        # the traces the iterations write are indexed when read, or once at the end (`Kernel.deferring`)
        with kernel.deferring():
            if self.mode in ("incremental", "dred", "auto"):
                out = state.step(values, undo)
            else:
                with kernel.scratch():  # state of this step only
                    if self.mode == "naive":
                        out = self._naive(kernel, values)
                    else:  # `inner` is already the incremental body: run it from empty state
                        out = ScopeState(self, kernel).step(values, [])
        if self.mode in ("dred", "auto"):
            state.reread()
            out = state.settled(out)
        return out

    def _naive(self, kernel: Kernel, values: dict[str, Any]) -> tuple:
        it = Iteration(self.inner, kernel)
        prev: tuple | None = None
        for n in range(self.max_iterations + 1):
            out = it.evaluate(values, n, [])
            cur = tuple(kernel.consolidate(out[r]) for r in self.results)
            if prev is not None and all(
                kernel.is_empty(kernel.plus(a, kernel.neg(b))) for a, b in zip(cur, prev, strict=True)
            ):
                return cur
            prev = cur
        raise RecursionLimitError(
            f"recursive scope {self.scope!r} did not reach a fixpoint within {self.max_iterations} iterations"
        )

    def checkpoint(self, kernel: Kernel, state: Any) -> Any:
        return state.to_state() if state is not None else None

    def restore(self, kernel: Kernel, state: Any, saved: Any) -> Any:
        if state is not None:
            state.restore(saved)
        return state


class Iteration:
    """Evaluates a scope's child circuit one iteration at a time (feedback delays carry the loop)."""

    def __init__(self, inner: Circuit, kernel: Kernel) -> None:
        from dbspark.circuit.schedule import schedule

        self.inner = inner
        self.kernel = kernel
        alive = inner.live()
        self.order = [n for n in schedule(inner) if n in alive]
        self.states: dict[int, Any] = {}
        self.fed = []  # the feedback delays (the others delay an integral: `Stream.join`'s z^-1(I(a)))
        for nid in self.order:
            n = inner.nodes[nid]
            if isinstance(n.op, Delay) and n.shape.trace:
                self.states[nid] = DelayState(kernel.empty_snapshot(n.shape.schema, n.shape.index_keys))
            elif isinstance(n.op, Delay):
                self.fed.append(nid)
                self.states[nid] = DelayState(kernel.empty(n.shape.schema))
            else:
                self.states[nid] = n.op.init(kernel, n.shape, [inner.nodes[i].shape for i in n.inputs])

    def evaluate(self, imports: dict[str, Any], t1: int, undo: list, t0: int = 0) -> dict[str, Any]:
        from dbspark.circuit.schedule import advance_delays, evaluate

        k = self.kernel
        for st in self.nested_states():
            st.t0, st.t1 = t0, t1

        def source(op: Input) -> Any:
            return imports[op.name_] if op.name_ in imports else k.empty(op.schema)

        values = evaluate(self.order, self.inner, self.states, k, source, undo)
        advance_delays(self.order, self.inner, self.states, values, undo)
        # the feedback placed for the next iteration (on Spark one read for all of it, which also
        # tells whether it is empty)
        fed = self.fed
        stored = [k.consolidate(self.states[nid].value) for nid in fed]
        placed: dict[int, Any] = {}  # a delay's input node -> its value as placed
        for nid, v in zip(fed, k.place(stored, loop=True), strict=True):
            self.states[nid].value = v
            placed[self.inner.nodes[nid].inputs[0]] = v
        self.feedback_empty = all(k.is_empty(self.states[nid].value) for nid in fed)
        if self.feedback_empty:  # the next step's first iteration reads these: an empty plan (a change
            # on the cluster, counted empty) would put that step and all it derives on the cluster too
            for nid in fed:
                v = self.states[nid].value
                if not k.is_local(v):
                    self.states[nid].value = k.empty(v.schema)
        # a result that is also fed back is read as placed: on Spark it was computed once, and the
        # scope's sum of its iterations then reads that instead of computing its plan again
        return {name: placed.get(nid, values[nid]) for name, nid in self.inner.outputs.items()}

    def nested_states(self) -> list[NestedState]:
        return [s for s in self.states.values() if isinstance(s, NestedState)]


class ScopeState:
    """The state of an incremental (or semi-naive) scope: its child circuit's nested traces."""

    def __init__(self, op: Fixpoint, kernel: Kernel) -> None:
        self.op = op
        self.kernel = kernel
        self.it = Iteration(op.inner, kernel)
        self.t0 = 0
        self.iterations: list[int] = []  # iterations run per outer step (for measurements)
        # `Fixpoint.bounded`: the rows of the results after the last step (None: not counted, on Spark a
        # change left on the cluster), and the last iteration any step ran
        self.size: int | None = 0
        self.horizon = -1

    def step(self, imports: dict[str, Any], undo: list) -> tuple:
        k, op = self.kernel, self.op
        # each result's changes, one per iteration, summed at the end as a tree: a running sum's plan
        # grows by an iteration's at each one, and an engine that cuts long plans (Spark: one job per
        # cut) cut it at nearly every iteration (a 20k-edge load on the cluster: 10 cuts, 5 as a tree)
        parts: list[list[Any]] = [[] for _ in op.results]
        empty = {name: k.empty(v.schema) for name, v in imports.items()}
        states = self.it.nested_states()
        t1, runs = 0, 0
        counts: list[tuple[int, int]] | None = [] if op.bounded and self.size is not None else None
        while True:
            if counts is not None:
                self._converges(t1, counts)
            out = self.it.evaluate(imports if t1 == 0 else empty, t1, undo, self.t0)
            runs += 1
            for i, r in enumerate(op.results):
                parts[i].append(out[r])
            if counts is not None and not _counted(k, counts, t1, [out[r] for r in op.results]):
                counts = None
            last = t1
            if not self.it.feedback_empty:
                t1 += 1
            else:  # nothing flows back: jump to the next iteration where earlier steps left work
                nxt = min((j for s in states if (j := s.next_pending(t1)) is not None), default=None)
                if nxt is None:
                    break
                t1 = nxt
            if t1 > op.max_iterations:
                raise RecursionLimitError(
                    f"recursive scope {op.scope!r} did not reach a fixpoint within {op.max_iterations} iterations"
                )
        for s in self.it.nested_states():
            s.end_step(undo)
        t0, size, horizon = self.t0, self.size, self.horizon
        undo.append(lambda: self.__dict__.update(t0=t0, size=size, horizon=horizon))
        self.t0 += 1
        self.horizon = max(horizon, last)
        if op.bounded:
            self.size = None if counts is None or size is None else size + (counts[-1][1] if counts else 0)
        self.iterations.append(runs)
        return tuple(k.consolidate(total(k, ps)) for ps in parts)

    def _converges(self, t1: int, counts: list[tuple[int, int]]) -> None:
        """Refuse an iteration t1 that shows the scope does not converge (`Fixpoint.bounded`).

        Past the iterations earlier steps ran (t1 > horizon + 1) the scope reaches t1 only through
        feedback, so this step's naive iterate R_t (`dbsp-paper.txt` §5: the values from ∅ on the
        current inputs, whose 2-D differences the scope computes) changed at t1 - 1. The scope's
        maker vouches that an iterate that converges changes at iteration s only while
        s <= |R_(s-1)| + 2 (a monotonic program whose aggregates are min and max: the argument of
        Bellman-Ford, `docs/recursive-aggregation.md`). |R_(t1-2)| is the size after the last step plus
        this step's changes up to t1 - 2; the check allows twice that, plus 10."""
        if t1 <= self.horizon + 1 or self.size is None:
            return
        n = self.size + next((c for t, c in reversed(counts) if t <= t1 - 2), 0)
        if t1 - 1 > 2 * n + 10:
            raise RecursionLimitError(
                f"recursive scope {self.op.scope!r} does not converge: its results (about {n} facts) still "
                f"change at iteration {t1 - 1}, more than a fixpoint of that size needs; {self.op.bounded}"
            )

    def how(self) -> str | None:
        """How the last step ran (`circuit/metrics.py`): nested, and its iterations."""
        return f"nested, {self.iterations[-1]} iterations" if self.iterations else None

    def to_state(self) -> Any:
        return {
            "t0": self.t0,
            "size": self.size,
            "horizon": self.horizon,
            "traces": {
                nid: [t.to_state() for t in s.traces]
                for nid, s in self.it.states.items()
                if isinstance(s, NestedState)
            },
        }

    def restore(self, saved: Any) -> None:
        self.t0 = saved["t0"]
        self.size, self.horizon = saved.get("size"), saved.get("horizon", -1)
        for nid, traces in saved["traces"].items():
            for t, st in zip(self.it.states[nid].traces, traces, strict=True):
                t.restore(st)


def _counted(k: Kernel, counts: list[tuple[int, int]], t1: int, outs: list[Any]) -> bool:
    """Extend `counts` (per iteration run, the total weight of the results' changes up to it) by
    iteration t1's changes `outs`; False when one is not held in this process (not counted)."""
    if not all(k.is_local(v) for v in outs):
        return False
    w = sum(int(k.to_local(v).weights().sum()) for v in outs)
    counts.append((t1, (counts[-1][1] if counts else 0) + w))
    return True


@dataclass(frozen=True)
class Pick(Operator):
    """The i-th result of a scope."""

    index: int
    schema: Any
    name = "pick"
    kind = LINEAR

    def __hash__(self) -> int:
        return hash((self.index, tuple(self.schema.items())))

    def shape(self, ins: list[Shape]) -> Shape:
        return Shape(self.schema)

    def label(self) -> str:
        return f"pick[{self.index}]"

    def eval(self, kernel: Kernel, state: Any, inputs: list[Any], undo: list) -> Any:
        return inputs[0][self.index]
