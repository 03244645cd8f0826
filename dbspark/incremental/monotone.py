"""Which recursive scopes may be maintained by delete-and-rederive, and their body for it.

`docs/recursion-strategies.md` derives the strategy. It needs a body F(I, R) that is *monotone* in its
recursive relations R (more facts in R never take a fact out of F) and in each import I either
monotone or antitone (an import read only under a negation: `!q(x)`, an anti-join). `polarity` finds
that by a sign analysis of the body's operators, source by source (each import; each feedback):

- an import is +1 for itself, a feedback +1 for itself, a constant has no source;
- filter, map, flat_map, index and plus keep their inputs' signs (a plus merges them: +1 and -1 give
  0, "both ways");
- a join or product of non-negative relations is monotone in both sides: it merges their signs;
- a distinct keeps its input's signs;
- an anti-join, which the circuit spells a - semijoin(a, distinct(b)) (`Stream.stream_antijoin`),
  keeps a's signs and flips b's;
- any other negation, a weigh, an aggregate or another operator makes every source it reads 0.

The scope qualifies when every result is a distinct (the loop carries sets: over-deletion decides
membership, not counts), every feedback is +1 at every result, and no import is 0 at any result.
"""

from __future__ import annotations

from dataclasses import dataclass

from dbspark.circuit.circuit import Circuit, Node
from dbspark.circuit.stream import Stream, distinct_delta
from dbspark.incremental.chain import delta_node
from dbspark.incremental.fixpoint import varying_nodes
from dbspark.incremental.rewrite import copy_circuit, is_feedback, order
from dbspark.operators.base import BILINEAR
from dbspark.operators.distinct import StreamDistinct
from dbspark.operators.dred import RecursiveDistinct
from dbspark.operators.join import StreamJoin
from dbspark.operators.ranked_distinct import RANK, RankedDistinct
from dbspark.operators.source import Constant, Input

Signs = dict[str, int]  # source -> +1 (monotone), -1 (antitone), 0 (both ways)
KEEP = ("filter", "map", "flat_map", "index", "plus", "stream_distinct")


@dataclass(frozen=True)
class Polarity:
    """The verdict on a scope's body: `imports` maps each import to +1 (read positively) or -1 (read
    under a negation only); `reason` says why a body does not qualify (then `imports` is empty)."""

    imports: dict[str, int]
    reason: str = ""

    @property
    def monotone(self) -> bool:
        return not self.reason


def _merge(*parts: Signs) -> Signs:
    out: Signs = {}
    for p in parts:
        for s, v in p.items():
            out[s] = v if s not in out or out[s] == v else 0
    return out


def _antijoin_right(c: Circuit, n: Node) -> tuple[int, int] | None:
    """(a, b) when `n` is a plus(a, neg(semijoin(a, b))): the anti-join of a by b's keys."""
    if n.op.name != "plus" or len(n.inputs) != 2:
        return None
    a, m = n.inputs
    neg = c.nodes[m]
    if neg.op.name != "neg":
        return None
    j = c.nodes[neg.inputs[0]]
    if not isinstance(j.op, StreamJoin) or j.op.right_out:
        return None
    left = j.inputs[0]
    if left != a and not (c.nodes[left].op.name == "index" and c.nodes[left].inputs[0] == a):
        return None
    return a, j.inputs[1]


def polarity(inner: Circuit) -> Polarity:
    signs: dict[int, Signs] = {}
    fb = 0
    for nid in order(inner):
        n = inner.nodes[nid]
        ins = [signs[i] for i in n.inputs if i in signs]
        op = n.op
        if isinstance(op, Input):
            signs[nid] = {op.name_: 1}
        elif is_feedback(n):
            signs[nid] = {f"feedback {fb}": 1}
            fb += 1
        elif isinstance(op, Constant):
            signs[nid] = {}
        elif (aj := _antijoin_right(inner, n)) is not None:
            a, b = aj
            signs[nid] = _merge(signs[a], {s: -v for s, v in signs[b].items()})
        elif op.name in KEEP or op.kind == BILINEAR:
            signs[nid] = _merge(*ins)
        else:
            signs[nid] = {s: 0 for s in _merge(*ins)}
    at_results = _merge(*(signs[nid] for nid in inner.outputs.values()))
    for name, nid in inner.outputs.items():
        if not isinstance(inner.nodes[nid].op, StreamDistinct):
            return Polarity({}, f"its result {name} is not a distinct (a set)")
    for s, v in at_results.items():
        if s.startswith("feedback") and v != 1:
            return Polarity(
                {},
                "it is not monotone in its recursive relations (a negation, an aggregate or "
                "a difference reads them)",
            )
        if v == 0:
            return Polarity({}, f"its input {s} is read both positively and under a negation or aggregate")
    return Polarity({s: v for s, v in at_results.items() if not s.startswith("feedback")})


def dred_body(inner: Circuit) -> Circuit:
    """The body incrementalized along the iterations only (the cycle rule, Prop 3.2, with each operator's
    Q^Δ of the chain rule), whose distincts that depend on the feedback are `RecursiveDistinct`: the
    semi-naive circuit of eq. 5.1, kept from one outer step to the next."""
    varying = varying_nodes(inner)

    def node(dst: Circuit, n: Node, ins: list[Stream]) -> Stream:
        if isinstance(n.op, StreamDistinct) and n.id in varying:
            d = ins[0]
            if RANK in d.schema:  # (`incremental/ranked.py`: it counts the derivations beside its facts)
                return dst.add(RankedDistinct(), d)
            plain = d.index(tuple(d.schema))
            return dst.add(RecursiveDistinct(), plain.integrate().delay(), d)
        if isinstance(n.op, StreamDistinct):
            return distinct_delta(ins[0])
        return delta_node(dst, n, ins)

    return copy_circuit(inner, node)
