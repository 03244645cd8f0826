"""The multiway join's incremental version: its change telescopes input by input (`multilinear_delta`,
`circuit/stream.py`; `operators/multijoin.py`), or, under `maintenance="sensitivity"`, it is kept by
sensitivity indices (`operators/maintained_join.py`)."""

from __future__ import annotations

from dbspark.circuit.circuit import Circuit, Node
from dbspark.circuit.stream import Stream, multilinear_delta
from dbspark.operators.maintained_join import MaintainedMultiJoin
from dbspark.operators.multijoin import StreamMultiJoin


def applies(n: Node) -> bool:
    return isinstance(n.op, StreamMultiJoin)


def rewrite(dst: Circuit, n: Node, ins: list[Stream]) -> Stream:
    assert isinstance(n.op, StreamMultiJoin)
    if n.op.maintenance == "sensitivity":
        return dst.add(MaintainedMultiJoin(len(ins)), *ins)
    return multilinear_delta(ins)
