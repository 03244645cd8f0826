"""Column pruning: a join's inputs carry only the columns read after it (a pass before Algorithm 4.8).

A front end joins whole rows: TPC-H's Q5 joins six tables and carried all 47 of their columns through
every join, so each join's integral stored them all (`stream_join` keeps both sides' integrals), though
the view reads three of them. This pass computes, from the outputs back to the inputs, the columns of
each node that some later operator reads (`need`), and projects each side of an equi-join onto the
columns that the join's consumers need plus its keys, before the side's `index`; the join then emits
only the right side's columns that are needed. A multiway join's inputs likewise keep what is read
after it and the columns they share.

Projection commutes with the join on bags (π(a ⋈ b) = π(a) ⋈ π(b) when the keys are kept, weights
multiply either way) and with filter and index. The pass never projects under an operator whose result
depends on the columns it does not name: DISTINCT and the set operations (a row's multiplicity depends
on all its columns), aggregates (their spec names its input schema), unions (both sides must agree),
recursive scopes, delays, top-k, outputs — all need every column of their inputs. A node whose
consumers need all of its columns is copied unchanged, so a circuit with nothing to prune is copied
as it is.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from dbspark.circuit.circuit import Circuit, Node
from dbspark.circuit.stream import Stream
from dbspark.incremental.rewrite import copy_circuit, is_feedback, order, same
from dbspark.ir.expr import col
from dbspark.operators.join import StreamJoin
from dbspark.operators.linear import Filter, Index, Map
from dbspark.operators.multijoin import StreamMultiJoin
from dbspark.operators.source import Input


def _requires(c: Circuit, n: Node, need: set[str]) -> list[set[str]]:
    """The columns of each input that node `n` reads when its consumers need `need` of its output."""
    op = n.op
    whole = [set(c.nodes[i].shape.schema) for i in n.inputs]
    if isinstance(op, Filter):
        return [need | op.pred.columns()]
    if isinstance(op, Index):
        return [need | set(op.keys)]
    if isinstance(op, Map):
        return [set().union(*(e.columns() for _, e in op.exprs))]
    if isinstance(op, StreamJoin):
        left = (need & whole[0]) | set(op.left_keys)
        right = {s for s, d in op.right_out if d in need} | set(op.right_keys)
        return [left, right]
    if isinstance(op, StreamMultiJoin):  # each input: what is read after it, and the columns it joins on
        shared = {
            x for i, w in enumerate(whole) for x in w if any(x in v for j, v in enumerate(whole) if j != i)
        }
        return [(need & w) | (w & shared) for w in whole]
    return whole


def needed_columns(c: Circuit) -> dict[int, set[str]]:
    """For each live node, the columns of its output that its consumers (or an output) read."""
    need: dict[int, set[str]] = {nid: set() for nid in c.nodes}
    for nid in c.outputs.values():
        need[nid] = set(c.nodes[nid].shape.schema)
    for n in c.nodes.values():  # a feedback edge is cut in `order`: its source needs every column
        if is_feedback(n):
            need[n.inputs[0]] = set(c.nodes[n.inputs[0]].shape.schema)
    live = c.live()
    for nid in reversed(order(c)):
        n = c.nodes[nid]
        if nid not in live or not n.inputs:
            continue
        for i, req in zip(n.inputs, _requires(c, n, need[nid]), strict=True):
            need[i] |= req
    return need


def _narrowed_side(dst: Circuit, side: Stream, keep: set[str]) -> Stream:
    """`side` (an `index` of the rewritten circuit) rebuilt over a projection of its input onto `keep`."""
    node = dst.nodes[side.node_id]
    if not isinstance(node.op, Index):
        return side
    source = dst.stream(node.inputs[0])
    cols: Sequence[str] = [c for c in dst.nodes[source.node_id].shape.schema if c in keep]
    if len(cols) == len(dst.nodes[source.node_id].shape.schema):
        return side
    projected = dst.add(Map(tuple((c, col(c)) for c in cols)), source)
    return dst.add(node.op, projected)


def prune_columns(c: Circuit) -> Circuit:
    """The circuit with each equi-join's sides projected onto the columns read after the join.

    A node is copied once per set of its columns that a consumer needs (`_copies`), so that a view's
    joins are pruned by what that view reads, whatever other views read from the same joins: a view's
    incremental circuit, and so its state (`circuit/identity.py`), does not change when another view
    that shares its joins is added or dropped. (A join two views read for different columns is then two
    joins.) A circuit with a feedback edge at the top (a Python circuit's loop) is pruned by the union of
    its consumers' needs instead (`_union`)."""
    if any(is_feedback(n) for n in c.nodes.values()):
        return _union(c)
    return _copies(c)


def _join(dst: Circuit, c: Circuit, n: Node, need: set[str], ins: list[Stream]) -> Stream:
    assert isinstance(n.op, StreamJoin)
    left, right = _requires(c, n, need)
    out = tuple((s, d) for s, d in n.op.right_out if d in need)
    op = dataclasses.replace(n.op, right_out=out) if out != n.op.right_out else n.op
    return dst.add(op, _narrowed_side(dst, ins[0], left), _narrowed_side(dst, ins[1], right))


def _multijoin(dst: Circuit, c: Circuit, n: Node, need: set[str], ins: list[Stream]) -> Stream:
    """A multiway join over its inputs projected onto the columns `_requires` keeps."""
    narrowed = []
    for s, keep in zip(ins, _requires(c, n, need), strict=True):
        cols = [x for x in dst.nodes[s.node_id].shape.schema if x in keep]
        if len(cols) < len(dst.nodes[s.node_id].shape.schema):
            s = dst.add(Map(tuple((x, col(x)) for x in cols)), s)
        narrowed.append(s)
    return dst.add(n.op, *narrowed)


def _pruned(dst: Circuit, c: Circuit, n: Node, need: set[str], ins: list[Stream]) -> Stream:
    if isinstance(n.op, StreamJoin):
        return _join(dst, c, n, need, ins)
    if isinstance(n.op, StreamMultiJoin):
        return _multijoin(dst, c, n, need, ins)
    return same(dst, n, ins)


def _copies(c: Circuit) -> Circuit:
    """Each live node once per distinct set of its columns a consumer needs, made in the order the
    circuit's own nodes are (so a circuit with nothing to prune is copied as it is)."""
    dst = Circuit()
    live = c.live()
    nodes = [nid for nid in order(c) if nid in live]
    needs: dict[int, set[frozenset[str]]] = {nid: set() for nid in nodes}
    for nid in c.outputs.values():
        needs[nid].add(frozenset(c.nodes[nid].shape.schema))
    for nid in reversed(nodes):
        n = c.nodes[nid]
        for want in needs[nid]:
            for i, r in zip(n.inputs, _requires(c, n, set(want)), strict=True):
                needs[i].add(frozenset(r))
    memo: dict[tuple[int, frozenset[str]], Stream] = {}
    for nid in nodes:
        n = c.nodes[nid]
        if isinstance(n.op, Input):
            op = n.op
            s = dst.input(op.name_, op.schema, op.kind_, op.primary_key, op.not_null, op.unique, op.lateness)
            for want in needs[nid] or {frozenset()}:
                memo[(nid, want)] = s
            continue
        for want in sorted(needs[nid], key=sorted):
            reqs = [frozenset(r) for r in _requires(c, n, set(want))]
            ins = [memo[(i, r)] for i, r in zip(n.inputs, reqs, strict=True)]
            memo[(nid, want)] = _pruned(dst, c, n, set(want), ins)
    for name, nid in c.outputs.items():
        dst.output(name, memo[(nid, frozenset(c.nodes[nid].shape.schema))])
    return dst


def _union(c: Circuit) -> Circuit:
    need = needed_columns(c)

    def rewrite(dst: Circuit, n: Node, ins: list[Stream]) -> Stream:
        return _pruned(dst, c, n, need[n.id], ins)

    return copy_circuit(c, rewrite)
