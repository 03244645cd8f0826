"""(↑Agg)^Δ (`dbsp-paper.txt` §7.4): the incremental aggregate re-evaluates only changed groupings.

Its state (per-group accumulators and ordered multisets) stands for D∘↑Agg∘I without materializing I."""

from __future__ import annotations

from dbspark.circuit.circuit import Circuit, Node
from dbspark.circuit.stream import Stream
from dbspark.operators.aggregate import Aggregate, StreamAggregate


def applies(n: Node) -> bool:
    return isinstance(n.op, StreamAggregate)


def rewrite(dst: Circuit, n: Node, ins: list[Stream]) -> Stream:
    assert isinstance(n.op, StreamAggregate)
    return dst.add(Aggregate(n.op.spec), ins[0])
