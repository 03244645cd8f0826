"""The multiway join's incremental version: its change telescopes input by input (`multilinear_delta`,
`circuit/stream.py`; `operators/multijoin.py`)."""

from __future__ import annotations

from dbspark.circuit.circuit import Circuit, Node
from dbspark.circuit.stream import Stream, multilinear_delta
from dbspark.operators.multijoin import StreamMultiJoin


def applies(n: Node) -> bool:
    return isinstance(n.op, StreamMultiJoin)


def rewrite(dst: Circuit, n: Node, ins: list[Stream]) -> Stream:
    return multilinear_delta(ins)
