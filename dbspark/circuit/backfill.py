"""Backfill: the state of the nodes and views a running pipeline's circuit gained.

When a running pipeline's circuit changes (a view added or dropped: `Runtime(adopt=...)`; a durable
pipeline reopened with other views: `Runtime.restore`), the nodes both circuits have keep their state
(`circuit/identity.py`), and a node the old circuit lacked starts empty, though its inputs have a
history. Its state must be the one it would hold had it run from the first step.

The incremental operators are time-invariant and their state after steps 1..t depends on their inputs'
integrals only (I's trace; a join's traces of its inputs; distinct's H over I; an aggregate's
accumulators; a top-k's and a window's ordered input; a recursive scope's nested traces, whose sums over
outer time are the fixpoint's iterates on the integrated inputs; `docs/changing-pipelines.md`). So it
is the state after ONE step whose change is the whole history: step 0 of a run over the tables' current
contents (`dbsp-paper.txt` §3: Q^Δ at step 0 of a stream whose first value is the integral). The
backfill evaluates that step for what the new nodes read:

- a table's change is its contents (the integral its checks keep, `Runtime._input_traces`);
- a node the old circuit had is evaluated again from empty (scratch) state and its state is dropped,
  unless its value in that step is known without it: an integral I(x) is its trace as it is, a view's
  output is the view's contents, a delay is empty (step 0) — so an existing view or integral bounds the
  recomputation;
- a new node is evaluated on its own state, which it keeps; a new delay keeps its input's value.

A new view's output in that step is its contents, reported as the first part of its change at the next
step (`Runtime.backfilled`), so a sink that sums a view's changes gets its contents. Nothing is written
here: the new state is written and committed with the next step (a pipeline that stops before it
backfills again when reopened with the same views).
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from dbspark.errors import UnsupportedError
from dbspark.operators.source import Input
from dbspark.operators.time import Delay, Integrate

if TYPE_CHECKING:
    from dbspark.circuit.circuit import Node
    from dbspark.circuit.runtime import Runtime


def backfill(rt: Runtime, undo: list) -> None:
    """Fill the state of `rt.fresh` nodes and the contents of `rt.fresh_views` (see the module's
    docstring); every state change registers its undo in `undo`."""
    if not rt.fresh and not rt.fresh_views:
        return
    c, k, nodes = rt.circuit, rt.kernel, rt.circuit.nodes
    views = {nid: name for name, nid in c.outputs.items() if name not in rt.fresh_views}

    def known(nid: int) -> bool:  # its value in the step from scratch, without its inputs
        return nid not in rt.fresh and (nid in views or isinstance(nodes[nid].op, (Input, Delay, Integrate)))

    need: set[int] = set()
    todo = [*rt.fresh, *(c.outputs[v] for v in rt.fresh_views)]
    todo += [i for nid in rt.fresh for i in nodes[nid].inputs]
    while todo:
        nid = todo.pop()
        if nid not in need:
            need.add(nid)
            if not known(nid) and not isinstance(nodes[nid].op, Delay):
                todo.extend(nodes[nid].inputs)
    values: dict[int, Any] = {}
    for nid in rt.order:
        if nid not in need:
            continue
        n = nodes[nid]
        if isinstance(n.op, Input):
            values[nid] = _contents(rt, n.op)
        elif isinstance(n.op, Delay):
            values[nid] = _empty(rt, n)
        elif nid in rt.fresh:
            values[nid] = n.op.eval(k, rt.states[nid], [values[i] for i in n.inputs], undo)
        elif nid in views:
            values[nid] = rt.view(views[nid])
        elif isinstance(n.op, Integrate):
            values[nid] = rt.states[nid].snapshot()
        else:  # computed again from scratch; its state is thrown away
            with k.scratch():
                state = n.op.init(k, n.shape, [nodes[i].shape for i in n.inputs])
            values[nid] = n.op.eval(k, state, [values[i] for i in n.inputs], [])
    for nid in rt.fresh:
        n = nodes[nid]
        if isinstance(n.op, Delay):
            st, before = rt.states[nid], rt.states[nid].value
            undo.append(lambda st=st, before=before: setattr(st, "value", before))
            st.value = k.hold(values[n.inputs[0]])
    before_views = rt.backfilled
    undo.append(lambda: setattr(rt, "backfilled", before_views))
    rt.backfilled = dict(before_views)
    # computed now (on Spark, one job): a view the current contents make fail (a scalar subquery of
    # several rows, an overflow) is refused when declared, not at the next step
    names = sorted(rt.fresh_views)
    for name, v in zip(
        names, k.place([k.consolidate(values[c.outputs[n]]) for n in names], loop=True), strict=True
    ):
        rt.backfilled[name] = v
    undo.append(partial(setattr, rt, "fresh", rt.fresh))
    undo.append(partial(setattr, rt, "fresh_views", rt.fresh_views))
    rt.fresh, rt.fresh_views = set(), set()


def _contents(rt: Runtime, op: Input) -> Any:
    """A table's current contents, from the integral its checks keep; refused (naming the table and the
    new views) where dbspark does not keep them whole."""
    name = op.name_
    added = sorted(rt.fresh_views) or "the new views"
    if name not in rt._input_traces:
        raise UnsupportedError(
            f"{rt.input_noun} {name!r} is a 'zset' {rt.input_noun}, whose contents dbspark does not keep, so "
            f"{added} cannot be backfilled from them on a pipeline that has run steps; declare it as a "
            "'bag' or 'set' (SQL tables are), or declare the views before the first step"
        )
    if op.lateness is not None and name in rt.waterlines:
        raise UnsupportedError(
            f"{rt.input_noun} {name!r} has a lateness, and its rows below the waterline "
            f"{rt.waterlines[name]} are no longer kept, so {added} cannot be backfilled from its "
            "contents; declare the views before the first step"
        )
    return rt.kernel.as_zset(rt._input_traces[name].snapshot())


def _empty(rt: Runtime, n: Node) -> Any:
    sh = n.shape
    return rt.kernel.empty_snapshot(sh.schema, sh.index_keys) if sh.trace else rt.kernel.empty(sh.schema)
