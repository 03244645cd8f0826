"""Incrementalizing a recursive scope (`dbsp-paper.txt` §6, Prop 6.2, Figure 2).

Lifting the scope's body and incrementalizing it along both time dimensions gives, operator by
operator: linear operators unchanged (Thm 3.3 twice), the feedback z^-1 unchanged (cycle rule,
Prop 3.2), joins doubly incremental (`NestedJoin`, the four joins of Figure 2) and distinct and
aggregates doubly incremental (`NestedKeyed`), and constants there at the first iteration of the first
step only (`NestedConstant`). The new scope keeps its state across outer steps.
"""

from __future__ import annotations

import dataclasses

import polars as pl

from dbspark.circuit.circuit import Circuit, Node
from dbspark.circuit.stream import Stream
from dbspark.errors import UnsupportedError
from dbspark.incremental.rewrite import copy_circuit, is_feedback, order
from dbspark.ir.aggregate import AggSpec
from dbspark.ir.expr import Lit
from dbspark.operators.aggregate import StreamAggregate
from dbspark.operators.base import LINEAR
from dbspark.operators.distinct import StreamDistinct
from dbspark.operators.fixpoint import Fixpoint
from dbspark.operators.join import StreamJoin, StreamProduct
from dbspark.operators.nested import NestedConstant, NestedJoin, NestedKeyed
from dbspark.operators.source import Constant


def applies(n: Node) -> bool:
    return isinstance(n.op, Fixpoint)


def nested_node(dst: Circuit, n: Node, ins: list[Stream], varying: set[int]) -> Stream:
    op = n.op
    if op.kind == LINEAR:
        return dst.add(op, *ins)
    # per side of a join or product: it does not depend on the feedback (`varying_nodes`)
    static = tuple(i not in varying for i in n.inputs[:2])
    if isinstance(op, StreamJoin):
        return dst.add(NestedJoin(op, (static[0], static[1])), *ins)
    if isinstance(op, StreamProduct):
        return nested_product(dst, op, ins[0], ins[1], (static[0], static[1]))
    if isinstance(op, Constant):
        return dst.add(NestedConstant(op))
    if isinstance(op, StreamDistinct):
        return dst.add(NestedKeyed(None), *ins)
    if isinstance(op, StreamAggregate):
        if not op.spec.by:
            return nested_global_aggregate(dst, op, ins[0])
        return dst.add(NestedKeyed(op.spec), *ins)
    raise UnsupportedError(
        f"operator {op.label()} inside a recursive scope is not supported; use filter, map, flat_map, plus, "
        "minus, constants, stream_join, semi/anti-joins, stream_distinct and stream_aggregate with GROUP BY"
    )


def nested_product(
    dst: Circuit, op: StreamProduct, a: Stream, b: Stream, static: tuple[bool, bool] = (False, False)
) -> Stream:
    """a × b as the doubly-incremental join of both sides on a constant key (a product is bilinear like
    a join: `NestedJoin`'s four terms with every row under the one key)."""
    key = "__product"
    while key in a.schema or key in b.schema:
        key += "_"
    ka = a.map(*a.columns, (key, Lit(0)))
    kb = b.map(*b.columns, (key, Lit(0)))
    joined = dst.add(NestedJoin(StreamJoin((key,), (key,), op.right_out), static), ka, kb)
    return joined.map(*[c for c in joined.columns if c != key])


def nested_global_aggregate(dst: Circuit, op: StreamAggregate, x: Stream) -> Stream:
    """An aggregate without GROUP BY, doubly incremental: its one row is the aggregate of X's one group
    when X is not empty, else the row of the empty input r0 (COUNT 0, SUM NULL, ...). So it is
    agg_g(X) + r0 - r0 ⋈ distinct(g(X)), with g a constant key: a grouped aggregate (`NestedKeyed`),
    a constant and a join with a distinct, each doubly incremental."""
    g = "__global"
    while g in x.schema:
        g += "_"
    keyed = x.map(*x.columns, (g, Lit(0)))
    spec = AggSpec((g,), op.spec.calls, keyed.schema)
    calls = [c.name for c in op.spec.calls]
    grouped = dst.add(NestedKeyed(spec), keyed).map(*calls)
    r0 = op.spec.empty_row()
    empty_row = Constant(pl.Schema({g: pl.Int64(), **r0.schema}), tuple((0, *row) for row in r0.rows()))
    nonempty = dst.add(NestedKeyed(None), keyed.map(g))
    unless = dst.add(NestedJoin(StreamJoin((g,), (g,), ())), dst.add(NestedConstant(empty_row)), nonempty)
    return grouped + dst.add(NestedConstant(empty_row)).map(*calls) - unless.map(*calls)


def varying_nodes(inner: Circuit) -> set[int]:
    """The nodes of a scope's body that depend on its feedback. The others (imports, constants and what
    is computed from them only) change at the first iteration of an outer step and never later: an
    import enters at t1 = 0 (δ0), a nested constant at (0, 0); a linear operator of inputs that are 0 at
    t1 > 0 is 0 there; so is the nested join of two such inputs (its terms a ⋈ B and A ⋈ b vanish with a
    and b, and its row ⋈ col terms with col(·)(t1), the earlier steps' changes at iteration t1 > 0);
    and so is a nested distinct or aggregate of one, whose 2-D difference f(X[t0, t1]) - f(X[t0, t1-1])
    - f(X[t0-1, t1]) + f(X[t0-1, t1-1]) is 0 when X[·, t1] = X[·, t1 - 1]. By induction over the body in
    topological order, every node outside this set is 0 at t1 > 0."""
    varying: set[int] = set()
    for nid in order(inner):
        n = inner.nodes[nid]
        if is_feedback(n) or any(i in varying for i in n.inputs):
            varying.add(nid)
    return varying


def nested_delta(inner: Circuit) -> Circuit:
    """The body with every operator replaced by its doubly-incremental version."""
    for n in inner.nodes.values():
        if n.op.name == "delay" and not is_feedback(n):
            raise UnsupportedError("z^-1 inside a recursive scope is only allowed as the scope's feedback")
    varying = varying_nodes(inner)
    return copy_circuit(inner, lambda dst, n, ins: nested_node(dst, n, ins, varying))


STRATEGIES = ("auto", "nested", "dred")
# delete-and-rederive over a body that ranks its facts (`incremental/ranked.py`): its over-delete stops at
# the facts that keep a derivation of smaller rank (tests and benchmarks switch it off to compare)
RANKS = True


def with_strategy(c: Circuit, strategy: str) -> Circuit:
    """`c` with every recursive scope set to be maintained by `strategy`."""
    if strategy not in STRATEGIES:
        raise UnsupportedError(f"unknown recursion strategy {strategy!r}; the strategies are {STRATEGIES}")

    def node(dst: Circuit, n: Node, ins: list[Stream]) -> Stream:
        op = n.op
        if isinstance(op, Fixpoint) and op.mode in ("naive", "seminaive"):
            return dst.add(dataclasses.replace(op, strategy=strategy), *ins)
        return dst.add(op, *ins)

    return copy_circuit(c, node)


def rewrite(dst: Circuit, n: Node, ins: list[Stream]) -> Stream:
    """The scope maintained by its strategy: "nested" (the doubly-incremental scope of §6), "dred"
    (semi-naive evaluation continued from the last fixpoint, deletes by delete-and-rederive;
    `operators/dred.py`, only for a body that `monotone.polarity` accepts), or "auto" (the default):
    "dred" where the body qualifies, each step recomputed instead when delete-and-rederive's
    over-delete runs away or the step passes its budget (`operators/auto_scope.py`), else "nested"
    (`docs/recursion-strategies.md`)."""
    from dbspark.incremental.monotone import dred_body, polarity
    from dbspark.incremental.ranked import ranked_body

    op = n.op
    assert isinstance(op, Fixpoint)
    plain = op.plain if op.plain is not None else op.inner
    if op.strategy not in STRATEGIES:
        raise UnsupportedError(
            f"recursive scope {op.scope!r}: unknown strategy {op.strategy!r}; the strategies are {STRATEGIES}"
        )
    pol = polarity(plain) if op.strategy != "nested" else None
    if op.strategy == "dred" and pol is not None and not pol.monotone:
        raise UnsupportedError(
            f"recursive scope {op.scope!r} cannot be maintained by delete-and-rederive: {pol.reason}; "
            "use the strategy 'nested' (or 'auto')"
        )
    body = op.inner if op.mode == "seminaive" else nested_delta(op.inner)
    inc = Fixpoint(
        body, op.imports, op.results, op.scope, "incremental", op.max_iterations, bounded=op.bounded
    )
    if pol is not None and pol.monotone:
        mode = "dred" if op.strategy == "dred" else "auto"
        inc = Fixpoint(
            dred_body((RANKS and ranked_body(plain)) or plain),
            op.imports,
            op.results,
            op.scope,
            mode,
            op.max_iterations,
            polarity=pol.imports,
            alt=inc if mode == "auto" else None,
            bounded=op.bounded,
        )
    return dst.add(inc, *ins)
