"""Incrementalizing a recursive scope (`dbsp-paper.txt` §6, Prop 6.2, Figure 2).

Lifting the scope's body and incrementalizing it along both time dimensions gives, operator by
operator: linear operators unchanged (Thm 3.3 twice), the feedback z^-1 unchanged (cycle rule,
Prop 3.2), joins doubly incremental (`NestedJoin`, the four joins of Figure 2) and distinct and
aggregates doubly incremental (`NestedKeyed`). The new scope keeps its state across outer steps.
"""

from __future__ import annotations

from dbspark.circuit.circuit import Circuit, Node
from dbspark.circuit.stream import Stream
from dbspark.errors import UnsupportedError
from dbspark.incremental.rewrite import copy_circuit, is_feedback
from dbspark.operators.aggregate import StreamAggregate
from dbspark.operators.base import LINEAR
from dbspark.operators.distinct import StreamDistinct
from dbspark.operators.fixpoint import Fixpoint
from dbspark.operators.join import StreamJoin
from dbspark.operators.nested import NestedJoin, NestedKeyed


def applies(n: Node) -> bool:
    return isinstance(n.op, Fixpoint)


def nested_node(dst: Circuit, n: Node, ins: list[Stream]) -> Stream:
    op = n.op
    if op.kind == LINEAR:
        return dst.add(op, *ins)
    if isinstance(op, StreamJoin):
        return dst.add(NestedJoin(op), *ins)
    if isinstance(op, StreamDistinct):
        return dst.add(NestedKeyed(None), *ins)
    if isinstance(op, StreamAggregate):
        return dst.add(NestedKeyed(op.spec), *ins)
    raise UnsupportedError(
        f"operator {op.label()} inside a recursive scope is not supported; use filter, map, flat_map, plus, "
        "minus, stream_join, semi/anti-joins, stream_distinct and stream_aggregate with GROUP BY"
    )


def nested_delta(inner: Circuit) -> Circuit:
    """The body with every operator replaced by its doubly-incremental version."""
    for n in inner.nodes.values():
        if n.op.name == "delay" and not is_feedback(n):
            raise UnsupportedError("z^-1 inside a recursive scope is only allowed as the scope's feedback")
    return copy_circuit(inner, nested_node)


def rewrite(dst: Circuit, n: Node, ins: list[Stream]) -> Stream:
    op = n.op
    assert isinstance(op, Fixpoint)
    body = op.inner if op.mode == "seminaive" else nested_delta(op.inner)
    inc = Fixpoint(body, op.imports, op.results, op.scope, "incremental", op.max_iterations)
    return dst.add(inc, *ins)
