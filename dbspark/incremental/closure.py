"""(↑TC)^Δ: the transitive closure operator's incremental version keeps a graph index
(`operators/closure.py`) instead of the integral of its input."""

from __future__ import annotations

from dbspark.circuit.circuit import Circuit, Node
from dbspark.circuit.stream import Stream
from dbspark.operators.closure import Closure, StreamClosure


def applies(n: Node) -> bool:
    return isinstance(n.op, StreamClosure)


def rewrite(dst: Circuit, n: Node, ins: list[Stream]) -> Stream:
    assert isinstance(n.op, StreamClosure)
    return dst.add(Closure(n.op.src, n.op.dst), ins[0])
