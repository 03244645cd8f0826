"""(↑top-k)^Δ: the top-k of the integral maintained through a window of its first rows
(`operators/topk.py`, `TopKWindow`), the integral read only to refill the window."""

from __future__ import annotations

from dbspark.circuit.circuit import Circuit, Node
from dbspark.circuit.stream import Stream
from dbspark.operators.topk import StreamTopK, TopKWindow


def applies(n: Node) -> bool:
    return isinstance(n.op, StreamTopK)


def rewrite(dst: Circuit, n: Node, ins: list[Stream]) -> Stream:
    op = n.op
    assert isinstance(op, StreamTopK)
    return dst.add(TopKWindow(op.order, op.limit, op.offset), ins[0], ins[0].integrate())
