"""The chain rule (Prop 3.2): (Q1 ∘ Q2)^Δ = Q1^Δ ∘ Q2^Δ, generalized to circuits.

Incrementalizing a circuit is incrementalizing each operator on the already incrementalized inputs;
each operator's Q^Δ comes from the first rule in `NODE_RULES` that applies to it."""

from __future__ import annotations

from types import ModuleType

from dbspark.circuit.circuit import Circuit, Node
from dbspark.circuit.stream import Stream
from dbspark.incremental import (
    aggregate,
    bilinear,
    closure,
    cycle,
    definition,
    distinct,
    fixpoint,
    linear,
    multilinear,
    topk,
    window,
)
from dbspark.incremental.rewrite import copy_circuit

# Order matters: the first rule whose `applies` holds rewrites the node; `definition` always applies.
NODE_RULES: tuple[ModuleType, ...] = (
    cycle,
    linear,
    bilinear,
    multilinear,
    distinct,
    aggregate,
    closure,
    fixpoint,
    topk,
    window,
    definition,
)


def delta_node(dst: Circuit, n: Node, ins: list[Stream]) -> Stream:
    for rule in NODE_RULES:
        if rule.applies(n):
            return rule.rewrite(dst, n, ins)
    raise AssertionError("the definition rule always applies")


def chain(c: Circuit) -> Circuit:
    return copy_circuit(c, delta_node)
