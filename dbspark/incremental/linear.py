"""Thm 3.3 and Prop 3.2 (invariance): a linear time-invariant operator is its own incremental version.

Covers filter, map, flat_map, index, plus, neg and the time operators z^-1, I, D."""

from __future__ import annotations

from dbspark.circuit.circuit import Circuit, Node
from dbspark.circuit.stream import Stream
from dbspark.operators.base import LINEAR, TIME


def applies(n: Node) -> bool:
    return n.op.kind in (LINEAR, TIME)


def rewrite(dst: Circuit, n: Node, ins: list[Stream]) -> Stream:
    return dst.add(n.op, *ins)
