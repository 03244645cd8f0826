"""Prop 4.7: (↑distinct)^Δ = ↑H(z^-1(I(d)), d), with work bounded by the size of the change d."""

from __future__ import annotations

from dbspark.circuit.circuit import Circuit, Node
from dbspark.circuit.stream import Stream, distinct_delta
from dbspark.operators.distinct import StreamDistinct


def applies(n: Node) -> bool:
    return isinstance(n.op, StreamDistinct)


def rewrite(dst: Circuit, n: Node, ins: list[Stream]) -> Stream:
    return distinct_delta(ins[0])
