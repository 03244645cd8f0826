"""A node's identity across circuits: a key that depends on what the node computes, not on its number.

A running pipeline's state is kept per node. When the pipeline's circuit changes (a view added to or
dropped from a running pipeline, or a durable pipeline reopened with a definition file that gained or
lost views), the state of a node that the old and the new circuit both have must carry over, and only
the nodes the old circuit did not have start empty (and are backfilled: `circuit/backfill.py`). Node
ids cannot tell which nodes those are, since they follow the order of declaration; this module's key
can: a node's key is a hash of its operator (`label()`, a recursive scope's body as `explain` prints
it), its shape and its inputs' keys, so two circuits give equal keys to the nodes that compute the same
stream from the same tables (the same reasoning as the circuit cache, `Circuit.add`, across circuits).

A feedback edge (`Circuit.feedback`, a delay whose input is computed after it) is keyed by the loop it
closes: its input's key computed with every feedback delay as a placeholder. Two nodes whose keys
coincide (an operator whose label does not tell two of them apart) get keys made apart by their order.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from dbspark.circuit.explain import explain
from dbspark.circuit.schedule import topological
from dbspark.operators.time import Delay

if TYPE_CHECKING:
    from dbspark.circuit.circuit import Circuit, Node

KEY_CHARS = 20  # hex digits of SHA-256 kept: 80 bits


def _feedback(n: Node) -> bool:
    return isinstance(n.op, Delay) and bool(n.op.tag)


def node_keys(c: Circuit) -> dict[int, str]:
    """Every node's key (see the module's docstring), by node id."""
    order = topological(c, _feedback)
    first = _keys(c, order, {})  # feedback delays as placeholders
    loops = {
        nid: identity_hash(["feedback", first[c.nodes[nid].inputs[0]]])
        for nid in order
        if _feedback(c.nodes[nid])
    }
    return _keys(c, order, loops) if loops else first


def _keys(c: Circuit, order: list[int], loops: dict[int, str]) -> dict[int, str]:
    keys: dict[int, str] = {}
    taken: set[str] = set()
    for nid in order:
        n = c.nodes[nid]
        if _feedback(n):
            parts = ["feedback", loops.get(nid, "")]
        else:
            parts = [n.op.label(), *(keys[i] for i in n.inputs)]
        inner = getattr(n.op, "inner", None)
        if inner is not None:  # a recursive scope: its body
            parts.append(explain(inner))
        sh = n.shape
        parts += [repr(list(sh.schema.items())), repr(sh.keys), repr(sh.trace)]
        k = identity_hash(parts)
        while k in taken:  # a twin: apart by order
            k = identity_hash([k, "twin"])
        taken.add(k)
        keys[nid] = k
    return keys


def identity_hash(parts: list[str]) -> str:
    """A short hex digest of `parts` (a key)."""
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:KEY_CHARS]
