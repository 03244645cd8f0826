"""Thm 3.4: (a × b)^Δ = a × b + z^-1(I(a)) × b + a × z^-1(I(b)) = a × I(b) + z^-1(I(a)) × b.

The two-term form needs one integral per side; the circuit cache shares each integral (an
arrangement) among every join that reads the same indexed stream."""

from __future__ import annotations

from dbspark.circuit.circuit import Circuit, Node
from dbspark.circuit.stream import Stream, bilinear_delta
from dbspark.operators.base import BILINEAR


def applies(n: Node) -> bool:
    return n.op.kind == BILINEAR


def rewrite(dst: Circuit, n: Node, ins: list[Stream]) -> Stream:
    return bilinear_delta(n.op, ins[0], ins[1])
