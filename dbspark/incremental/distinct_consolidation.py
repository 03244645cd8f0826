"""Distinct consolidation (`dbsp-paper.txt` Prop 4.5, 4.6; Algorithm 4.8 step 2).

For positive inputs, distinct(Q(distinct(i))) = distinct(Q(i)) when Q is built from filter, projection,
map, addition, join and product (Prop 4.6); Prop 4.5 lets a distinct move later past filter, join and
product. Together: an inner `stream_distinct` whose every consumer path reaches another
`stream_distinct` through such operators only (none of them an output, all their inputs positive) can be
dropped, leaving one distinct at the end of the chain (the §4.4 example goes from three to one).
Positivity comes from inputs declared 'bag' or 'set' and is propagated through the operators.
"""

from __future__ import annotations

from dbspark.circuit.circuit import Circuit, Node
from dbspark.incremental.rewrite import copy_circuit, order, same
from dbspark.operators.aggregate import StreamAggregate
from dbspark.operators.distinct import StreamDistinct
from dbspark.operators.join import StreamJoin, StreamProduct
from dbspark.operators.linear import Filter, FlatMap, Index, Map, Plus
from dbspark.operators.source import Constant, Input
from dbspark.operators.time import Delay, Integrate

TRANSPARENT = (Filter, Map, Plus, StreamJoin, StreamProduct, Index)
PRESERVES_POSITIVE = (Filter, Map, FlatMap, Plus, StreamJoin, StreamProduct, Index, Delay, Integrate)
ALWAYS_POSITIVE = (StreamDistinct, StreamAggregate, Constant)  # a constant's rows weigh 1 each


def positive_nodes(c: Circuit) -> set[int]:
    """Nodes whose every value is a positive Z-set (a bag), by forward propagation."""
    pos: set[int] = set()
    for nid in order(c):
        n = c.nodes[nid]
        if isinstance(n.op, Input):
            if n.op.positive:
                pos.add(nid)
        elif isinstance(n.op, ALWAYS_POSITIVE):
            pos.add(nid)
        elif isinstance(n.op, PRESERVES_POSITIVE) and n.inputs and all(i in pos for i in n.inputs):
            pos.add(nid)
    return pos


def removable_distincts(c: Circuit) -> set[int]:
    pos = positive_nodes(c)
    consumers = c.consumers()
    outputs = set(c.outputs.values())
    memo: dict[int, bool] = {}

    def reaches_distinct(nid: int) -> bool:
        """Every path from nid's consumers ends in a stream_distinct through transparent operators."""
        if nid in memo:
            return memo[nid]
        memo[nid] = False  # cycles are not consolidated
        cons = consumers[nid]
        ok = bool(cons) and nid not in outputs
        for m in cons:
            node = c.nodes[m]
            if isinstance(node.op, StreamDistinct):
                continue
            if not (
                isinstance(node.op, TRANSPARENT)
                and all(i in pos for i in node.inputs)
                and reaches_distinct(m)
            ):
                ok = False
                break
        memo[nid] = ok
        return ok

    return {
        n.id
        for n in c.nodes.values()
        if isinstance(n.op, StreamDistinct) and n.inputs[0] in pos and reaches_distinct(n.id)
    }


def consolidate_distincts(c: Circuit) -> Circuit:
    """Drop the distincts made redundant by a later one (to convergence: one pass suffices)."""
    drop = removable_distincts(c)
    if not drop:
        return c

    def skip(n: Node) -> bool:
        return n.id in drop

    return copy_circuit(c, same, skip)
