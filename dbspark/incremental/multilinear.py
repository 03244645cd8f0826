"""The multiway join's incremental version: its change telescopes input by input (`multilinear_delta`,
`circuit/stream.py`; `operators/multijoin.py`), or, under `maintenance="sensitivity"`, it is kept by
sensitivity indices (`operators/maintained_join.py`), as is the projected join with short-circuit evaluation
(`StreamExistsJoin`); under `maintenance="indexed"`, by the delta join over indexed tries."""

from __future__ import annotations

from dbspark.circuit.circuit import Circuit, Node
from dbspark.circuit.stream import Stream, multilinear_delta
from dbspark.operators.maintained_join import IndexedMultiJoin, MaintainedMultiJoin
from dbspark.operators.multijoin import StreamExistsJoin, StreamMultiJoin


def applies(n: Node) -> bool:
    return isinstance(n.op, StreamMultiJoin | StreamExistsJoin)


def rewrite(dst: Circuit, n: Node, ins: list[Stream]) -> Stream:
    if isinstance(n.op, StreamExistsJoin):  # short-circuit evaluation: kept by sensitivity indices only
        return dst.add(MaintainedMultiJoin(len(ins), project=n.op.project), *ins)
    assert isinstance(n.op, StreamMultiJoin)
    if n.op.maintenance == "sensitivity":
        return dst.add(MaintainedMultiJoin(len(ins), names=n.op.names), *ins)
    if n.op.maintenance == "indexed":
        return dst.add(IndexedMultiJoin(len(ins), names=n.op.names), *ins)
    return multilinear_delta(ins)
