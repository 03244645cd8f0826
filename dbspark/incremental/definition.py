"""The definition Q^Δ = D ∘ Q ∘ I (Def 3.1), for any time-invariant operator no other rule covers
(e.g. an operator that is already incremental, or a user operator). Correct, not efficient."""

from __future__ import annotations

from dbspark.circuit.circuit import Circuit, Node
from dbspark.circuit.stream import Stream


def applies(n: Node) -> bool:
    return True


def rewrite(dst: Circuit, n: Node, ins: list[Stream]) -> Stream:
    return dst.add(n.op, *[s.integrate() for s in ins]).differentiate()
