"""(↑window)^Δ: a window's change folds only the partitions the input change touches (`operators/window.py`)."""

from __future__ import annotations

from dbspark.circuit.circuit import Circuit, Node
from dbspark.circuit.stream import Stream
from dbspark.operators.window import StreamWindow, Window


def applies(n: Node) -> bool:
    return isinstance(n.op, StreamWindow)


def rewrite(dst: Circuit, n: Node, ins: list[Stream]) -> Stream:
    assert isinstance(n.op, StreamWindow)
    return dst.add(Window(n.op.spec), ins[0])
