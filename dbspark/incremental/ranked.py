"""A monotone scope's body carrying each derivation's rank: what makes its over-delete small.

`docs/recursion-strategies.md` ("Ranks: an over-delete that stops at the facts with another
derivation") derives it. Every fact of a recursive relation carries a *rank* (a BIGINT column `__rank`),
and every fact has a derivation whose premises all have smaller ranks: a derivation's rank is the largest
rank among its recursive premises (-1 when it reads imports only), and a fact takes, when it is derived,
1 + the smallest rank among its derivations (`operators/ranked_distinct.py`; a fact removed and put
back may take a higher one). The delete-and-rederive over-delete then removes a fact that loses a derivation only if no derivation of smaller rank than the
fact's is left, instead of at its first lost derivation (DRed's over-delete): reachability on a random
graph over-deletes a few hundred nodes for a batch where DRed over-deleted all 40,000 reached ones.

`ranked_body` rewrites the body (before it is incrementalized, `monotone.dred_body`) so that every
operator that depends on the feedback carries the rank: the feedback and each distinct on the loop get
the column; filter, index, neg and plus pass it on (a side of a plus that reads imports only gets -1);
a map keeps it; a join or product takes the larger of its sides' ranks. A body with another operator on
the loop (a `flat_map`, whose function cannot pass a column it does not know) is not ranked: its scope
keeps DRed's over-delete. The results leave the scope without the column.
"""

from __future__ import annotations

import polars as pl

from dbspark.circuit.circuit import Circuit
from dbspark.circuit.stream import Stream
from dbspark.incremental.fixpoint import varying_nodes
from dbspark.incremental.rewrite import is_feedback, order
from dbspark.ir.expr import Case, Expr, col, lit
from dbspark.operators.distinct import StreamDistinct
from dbspark.operators.join import StreamJoin, StreamProduct
from dbspark.operators.linear import Filter, Index, Map, Neg, Plus
from dbspark.operators.source import Input

RANK = "__rank"  # a recursive fact's rank; in a join's output, the right side's rank until combined
_RIGHT = "__rank_right"
NO_RANK: Expr = lit(-1)  # the rank of a derivation from imports only


def greatest(a: Expr, b: Expr) -> Expr:
    return Case(((a > b, a),), b)


def _ranked(s: Stream) -> Stream:
    """`s` with the rank column last (a side that reads imports only: -1)."""
    if RANK in s.schema:
        return s
    return s.map(*s.columns, (RANK, NO_RANK))


def ranked_body(inner: Circuit) -> Circuit | None:
    """The body with the rank carried on the loop, or None if an operator there cannot carry it."""
    varying = varying_nodes(inner)
    for nid in varying:
        op = inner.nodes[nid].op
        if not (
            is_feedback(inner.nodes[nid])
            or isinstance(op, (Filter, Index, Neg, Plus, Map, StreamJoin, StreamProduct, StreamDistinct))
        ):
            return None
        if RANK in inner.nodes[nid].shape.schema or _RIGHT in inner.nodes[nid].shape.schema:
            return None  # (a user's column of that name)
    dst = Circuit()
    out: dict[int, Stream] = {}
    feedbacks = {}
    alive = inner.live()
    for nid in order(inner):
        n = inner.nodes[nid]
        if nid not in alive:
            continue
        op = n.op
        ins = [] if is_feedback(n) else [out[i] for i in n.inputs]
        if isinstance(op, Input):
            out[nid] = dst.input(
                op.name_, op.schema, op.kind_, op.primary_key, op.not_null, op.unique, op.lateness
            )
        elif is_feedback(n):
            fb = dst.feedback(pl.Schema({**n.shape.schema, RANK: pl.Int64()}), n.shape.keys)
            feedbacks[nid] = fb
            out[nid] = fb.stream
        elif nid not in varying:
            out[nid] = dst.add(op, *ins)
        elif isinstance(op, Map):
            out[nid] = dst.add(Map((*op.exprs, (RANK, col(RANK)))), ins[0])
        elif isinstance(op, Plus):
            out[nid] = dst.add(op, _ranked(ins[0]), _ranked(ins[1]))
        elif isinstance(op, (StreamJoin, StreamProduct)):
            out[nid] = _join(dst, op, ins[0], ins[1])
        else:  # filter, index, neg, distinct: the rows as they are (a distinct's rank: its operator)
            out[nid] = dst.add(op, *ins)
    for nid, fb in feedbacks.items():
        fb.connect(out[inner.nodes[nid].inputs[0]])
    for name, nid in inner.outputs.items():
        s = out[nid]
        dst.output(name, s.map(*[c for c in s.columns if c != RANK]) if RANK in s.schema else s)
    return dst


def _join(dst: Circuit, op: StreamJoin | StreamProduct, a: Stream, b: Stream) -> Stream:
    """The join with its output's rank: the larger of its sides' (a semi-join's right side counts too)."""
    right = op.right_out + ((RANK, _RIGHT),) if RANK in b.schema else op.right_out
    if isinstance(op, StreamJoin):
        j = dst.add(StreamJoin(op.left_keys, op.right_keys, right), a, b)
    else:
        j = dst.add(StreamProduct(right), a, b)
    data = [c for c in j.columns if c not in (RANK, _RIGHT)]
    if RANK in a.schema and RANK in b.schema:
        return j.map(*data, (RANK, greatest(col(RANK), col(_RIGHT))))
    if RANK in b.schema:
        return j.map(*data, (RANK, col(_RIGHT)))
    return j.map(*data, RANK)
