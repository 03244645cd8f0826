"""Copy a circuit node by node through a rewrite function: the engine behind every rule.

Nodes are visited inputs-first; a feedback delay becomes a feedback edge of the new circuit that is
connected once its source has been rewritten, which is what the cycle rule needs (Prop 3.2).
"""

from __future__ import annotations

from collections.abc import Callable

from dbspark.circuit.circuit import Circuit, Feedback, Node
from dbspark.circuit.schedule import topological
from dbspark.circuit.stream import Stream
from dbspark.operators.source import Input
from dbspark.operators.time import Delay

RewriteFn = Callable[[Circuit, Node, list[Stream]], Stream]


def is_feedback(n: Node) -> bool:
    return isinstance(n.op, Delay) and n.op.tag != 0


def order(c: Circuit) -> list[int]:
    """Inputs-first order in which only feedback delays cut their input edge."""
    return topological(c, is_feedback)


def copy_circuit(src: Circuit, fn: RewriteFn, skip: Callable[[Node], bool] | None = None) -> Circuit:
    """A new circuit with `fn(dst, node, rewritten inputs)` in place of every non-input node.

    `skip(node)` true means: the node is replaced by its (single) rewritten input."""
    dst = Circuit()
    mapping: dict[int, Stream] = {}
    feedbacks: dict[int, Feedback] = {}
    alive = src.live()
    for nid in order(src):
        n = src.nodes[nid]
        if nid not in alive:
            continue
        if isinstance(n.op, Input):
            mapping[nid] = dst.input(
                n.op.name_,
                n.op.schema,
                n.op.kind_,
                n.op.primary_key,
                n.op.not_null,
                n.op.unique,
                n.op.lateness,
            )
        elif is_feedback(n):
            fb = dst.feedback(n.shape.schema, n.shape.keys)
            feedbacks[nid] = fb
            mapping[nid] = fb.stream
        elif skip is not None and skip(n):
            mapping[nid] = mapping[n.inputs[0]]
        else:
            mapping[nid] = fn(dst, n, [mapping[i] for i in n.inputs])
    for nid, fb in feedbacks.items():
        fb.connect(mapping[src.nodes[nid].inputs[0]])
    for name, nid in src.outputs.items():
        dst.output(name, mapping[nid])
    return dst


def same(dst: Circuit, n: Node, ins: list[Stream]) -> Stream:
    """The identity rewrite: the same operator on the rewritten inputs."""
    return dst.add(n.op, *ins)
