"""Thm 2.22: I ∘ D = D ∘ I = id. The circuit cache cancels these pairs as they are built
(`Circuit.add`); this rule applies the same cancellation to a finished circuit."""

from __future__ import annotations

from dbspark.circuit.circuit import Circuit, Node
from dbspark.incremental.rewrite import copy_circuit, same
from dbspark.operators.time import Differentiate, Integrate


def cancel(c: Circuit) -> Circuit:
    """Rebuild through the cache, which drops every D(I(x)) and I(D(x))."""
    if not any(isinstance(n.op, (Integrate, Differentiate)) for n in c.nodes.values()):
        return c

    def rebuild(dst: Circuit, n: Node, ins: list) -> object:
        return same(dst, n, ins)

    return copy_circuit(c, rebuild)  # type: ignore[arg-type]
