"""Metrics of a running circuit, per operator and step (`Pipeline(metrics=True)`, `p.metrics()`,
`dbspark run --metrics`): the time of each operator's evaluation, the rows it read and wrote, and the
rows and bytes of the state it holds after the step.

Rows in are the rows of the changes an operator read (an integral it reads through a snapshot is the
state of the integral's node). Rows are counted where that costs nothing: always on the local engine, on Spark for values held in the
driver (elsewhere a count would be a Spark job: those rows are NULL). State is the operator's traces
(integrals, indexes, a window's rows and totals, an aggregate's groups) as the engine holds them:
`Kernel.trace_stats`. Operators are numbered as `explain` numbers the incremental circuit (evaluation
order), so a row of the metrics is a line of the explanation. `how`: for a recursive scope, how its
step ran (nested, delete-and-rederive, semi-naive, a fresh run or recomputed under `auto`, with the
iterations: `docs/recursion-strategies.md`); NULL for the other operators.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl

if TYPE_CHECKING:
    from dbspark.circuit.runtime import Runtime

KEEP = 10_000  # steps kept (the oldest are dropped)
SCHEMA = pl.Schema(
    {
        "step": pl.Int64(),
        "node": pl.String(),
        "operator": pl.String(),
        "family": pl.String(),
        "ms": pl.Float64(),
        "rows_in": pl.Int64(),
        "rows_out": pl.Int64(),
        "state_rows": pl.Int64(),
        "state_bytes": pl.Int64(),
        "how": pl.String(),
    }
)


class Metrics:
    """The metrics of one runtime's steps."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.num = {nid: i for i, nid in enumerate(runtime.order)}
        self.rows: list[tuple[Any, ...]] = []
        self._step: dict[int, tuple[float, int | None]] = {}

    def record(self, nid: int, seconds: float, value: Any) -> None:
        """An operator evaluated (`schedule.evaluate`)."""
        self._step[nid] = (seconds, self.runtime.kernel.known_rows(value))

    def abort(self) -> None:
        self._step = {}

    def end_step(self, step: int) -> None:
        """The step committed: its operators' times and rows, and the state after it."""
        rt, got = self.runtime, self._step
        self._step = {}
        traces = {id(t): t for t in getattr(rt.kernel, "traces", [])}
        for nid in rt.order:
            n = rt.circuit.nodes[nid]
            secs, out = got.get(nid, (0.0, None))
            # rows in: of the changes read (an integral read through its snapshot is its node's state)
            changes = [i for i in n.inputs if not rt.circuit.nodes[i].shape.trace]
            ins = [got.get(i, (0.0, None))[1] for i in changes]
            rows_in = sum(v for v in ins if v is not None) if changes and None not in ins else None
            held = [rt.kernel.trace_stats(t) for t in _traces(rt.states.get(nid), traces)]
            state_rows = sum(r for r, _ in held) if held else None
            sizes = [b for _, b in held]
            state_bytes = sum(b for b in sizes if b is not None) if held and None not in sizes else None
            label = n.op.label()
            how = getattr(rt.states.get(nid), "how", None)
            self.rows.append(
                (
                    step,
                    f"n{self.num[nid]}",
                    label,
                    n.op.kind,
                    secs * 1000,
                    rows_in,
                    out,
                    state_rows,
                    state_bytes,
                    how() if callable(how) else None,
                )
            )
        excess = len(self.rows) - KEEP * len(rt.order)
        if excess > 0:
            del self.rows[:excess]

    def frame(self) -> pl.DataFrame:
        return pl.DataFrame(self.rows, schema=SCHEMA, orient="row")


def _traces(state: Any, traces: dict[int, Any], depth: int = 0) -> list[Any]:
    """The kernel's traces an operator's state holds (its attributes, lists and dicts, six levels: a
    recursive scope's state holds its body's states, whose traces are its integrals and facts; with two
    levels its metrics counted its imports' traces alone)."""
    if state is None or depth > 6 or hasattr(state, "new_trace"):  # (not through a kernel)
        return []
    if id(state) in traces:
        return [state]
    if isinstance(state, (list, tuple)):
        items: Any = state
    elif isinstance(state, dict):
        items = state.values()
    elif hasattr(state, "__dict__"):
        items = vars(state).values()
    else:
        return []
    out: list[Any] = []
    for v in items:
        for t in _traces(v, traces, depth + 1):
            if all(t is not u for u in out):
                out.append(t)
    return out
