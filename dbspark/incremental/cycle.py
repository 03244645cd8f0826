"""The cycle rule of Prop 3.2: (λs. fix α. T(s, z^-1(α)))^Δ = λs. fix α. T^Δ(s, z^-1(α)).

A feedback delay stays a feedback delay; the loop body is rewritten by the other rules and the edge is
reconnected to the rewritten body (`rewrite.copy_circuit` does the reconnecting). This module only
recognizes feedback delays so that the chain driver leaves them to the copier."""

from __future__ import annotations

from dbspark.circuit.circuit import Circuit, Node
from dbspark.circuit.stream import Stream
from dbspark.errors import CircuitError
from dbspark.incremental.rewrite import is_feedback


def applies(n: Node) -> bool:
    return is_feedback(n)


def rewrite(dst: Circuit, n: Node, ins: list[Stream]) -> Stream:
    raise CircuitError("feedback delays are rewritten by the copier, not node by node")
