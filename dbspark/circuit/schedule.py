"""Scheduling and evaluating a circuit's nodes for one step (`dbsp-paper.txt` §2.2.2).

Delays are sources of a step: their output (the previous step's input) is known before the step, which
is what makes feedback loops through z^-1 well-defined. The top-level runtime and a recursive scope's
iterations both evaluate their nodes with `evaluate` and then move every delay forward.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dbspark.errors import CircuitError
from dbspark.operators.source import Input
from dbspark.operators.time import Delay

if TYPE_CHECKING:
    from dbspark.circuit.circuit import Circuit, Node
    from dbspark.engines.base import Kernel


def topological(c: Circuit, cut: Callable[[Node], bool]) -> list[int]:
    """Inputs-first order of the nodes, ignoring the input edges of the nodes `cut` selects.

    A cycle that no cut node breaks is an error."""
    c.check()
    state: dict[int, int] = {}
    order: list[int] = []

    def deps(nid: int) -> Any:
        n = c.nodes[nid]
        return iter(() if cut(n) else n.inputs)

    for root in sorted(c.nodes):
        if state.get(root):
            continue
        state[root] = 1
        stack = [(root, deps(root))]
        while stack:
            nid, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                stack.pop()
                state[nid] = 2
                order.append(nid)
            elif state.get(nxt) == 1:
                raise CircuitError(f"the circuit has a cycle through n{nxt} without a delay (z^-1)")
            elif not state.get(nxt):
                state[nxt] = 1
                stack.append((nxt, deps(nxt)))
    return order


def schedule(c: Circuit) -> list[int]:
    """Evaluation order of a step: every delay is a source."""
    return topological(c, lambda n: isinstance(n.op, Delay))


def evaluate(
    order: list[int],
    c: Circuit,
    states: dict[int, Any],
    kernel: Kernel,
    source: Callable[[Input], Any],
    undo: list,
    record: Callable[[int, float, Any], None] | None = None,
) -> dict[int, Any]:
    """The values of the circuit's outputs and of the delays' inputs for one step (what the step's
    caller reads); `source(op)` gives an input's value; `record(node, seconds, value)`, if given, is
    told of each operator's evaluation (`circuit/metrics.py`).

    Any other node's value is dropped once its last reader has run, so a step holds the values still
    to be read, not every value of the step: a load through the 22 TPC-H views held every join's
    output until the step's end."""
    nodes, values = c.nodes, {}
    keep = set(c.outputs.values())
    keep.update(n.inputs[0] for n in nodes.values() if isinstance(n.op, Delay))
    last: dict[int, int] = {}
    for pos, nid in enumerate(order):
        for i in nodes[nid].inputs:
            last[i] = pos
    for pos, nid in enumerate(order):
        n = nodes[nid]
        if isinstance(n.op, Input):
            t0 = time.perf_counter() if record is not None else 0.0
            values[nid] = source(n.op)
            if record is not None:
                record(nid, time.perf_counter() - t0, values[nid])
        elif isinstance(n.op, Delay):
            values[nid] = states[nid].value
        else:
            t0 = time.perf_counter() if record is not None else 0.0
            values[nid] = n.op.eval(kernel, states[nid], [values[i] for i in n.inputs], undo)
            if record is not None:
                record(nid, time.perf_counter() - t0, values[nid])
            for i in n.inputs:
                if last[i] == pos and i not in keep:
                    values.pop(i, None)
    return values


def advance_delays(
    order: list[int],
    c: Circuit,
    states: dict[int, Any],
    values: dict[int, Any],
    undo: list,
    normalize: Callable[[Any], Any] = lambda v: v,
) -> list[Any]:
    """Store each delay's input for the next step; returns the stored values."""
    stored = []
    for nid in order:
        n = c.nodes[nid]
        if isinstance(n.op, Delay):
            st = states[nid]
            prev = st.value
            undo.append(lambda st=st, prev=prev: setattr(st, "value", prev))
            st.value = normalize(values[n.inputs[0]])
            stored.append(st.value)
    return stored
