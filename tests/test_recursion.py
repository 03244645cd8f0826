"""Recursive scopes: `Circuit.recursive` (`dbsp-paper.txt` §5-§6, §7.7).

Every query below is checked three ways against a plain-Python fixpoint computed from scratch:

* the non-incremental circuit in both modes, `naive` (the circuit of §5) and `seminaive` (eq. 5.1),
  fed the whole snapshot of every input at each step (Theorem 5.4: they compute the Datalog
  semantics);
* the doubly-incremental circuit (§6, eq. 6.1) obtained by `incrementalize()` from either mode, fed
  only the changes: after every step its view is the fixpoint of the current inputs, the running sum
  of its outputs is the naive circuit's output on the integrated inputs, and each output is the
  difference of two consecutive naive outputs (Prop 6.2 and Algorithm 4.8: Q^Δ = D ∘ Q ∘ I).

Change streams insert and delete edges (deletes only of present edges), contain empty steps, insert
whole cycles and delete edges that lie on a cycle, and may end with a delete of everything.

Every test that runs a circuit takes the `engine` fixture and runs on both engines, the Spark engine
with one example per property (`engine_given`: each iteration of a scope is Spark jobs); the tests of
errors raised while building a scope, and of the Python oracles, have no engine.
"""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dbspark
from dbspark import col, lit
from dbspark.circuit.stream import Stream
from dbspark.errors import CircuitError, RecursionLimitError, UnsupportedError
from dbspark.incremental import fixpoint
from dbspark.testing.engines import engine_given, is_spark

NODES = tuple(range(8))
EDGES = [(a, b) for a in NODES for b in NODES]
NODE_ROWS = [(n,) for n in NODES]
EDGE = {"src": "int64", "dst": "int64"}
PARENT = {"p": "int64", "c": "int64"}
NODE = {"n": "int64"}
XY = {"x": "int64", "y": "int64"}
MODES = ("naive", "seminaive")
MAX_HOPS = 3
MAX_IT = 60  # far above what 8 nodes need: an implementation bug that diverges fails fast

SETTINGS = settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])

Rel = set[tuple]
State = dict[str, Rel]


# ---- plain-Python fixpoints (the Datalog semantics, computed from scratch) ------------------------------
def py_fix(rule: Callable[[Rel], Rel]) -> Rel:
    """The least fixpoint of a monotone rule, iterated from the empty relation."""
    cur: Rel = set()
    while True:
        nxt = rule(cur)
        if nxt == cur:
            return cur
        cur = nxt


def py_tc(e: Rel) -> Rel:
    return py_fix(lambda p: set(e) | {(x, w) for (x, y) in e for (z, w) in p if y == z})


def py_sg(par: Rel) -> Rel:
    base = {(x, y) for (p, x) in par for (q, y) in par if p == q and x != y}
    return py_fix(
        lambda sg: (
            base | {(x, y) for (a, x) in par for (a2, b) in sg if a == a2 for (b2, y) in par if b == b2}
        )
    )


def py_reach(roots: set[int], e: Rel) -> set[int]:
    seen = set(roots)
    frontier = list(roots)
    while frontier:
        n = frontier.pop()
        for s, d in e:
            if s == n and d not in seen:
                seen.add(d)
                frontier.append(d)
    return seen


def py_even_odd(e: Rel) -> tuple[Rel, Rel]:
    even: Rel = set()
    odd: Rel = set()
    while True:
        new_even = {(x, y) for (x, z) in e for (z2, y) in odd if z == z2}
        new_odd = set(e) | {(x, y) for (x, z) in e for (z2, y) in even if z == z2}
        if (new_even, new_odd) == (even, odd):
            return even, odd
        even, odd = new_even, new_odd


def py_dist(roots: set[int], e: Rel, bound: int) -> Rel:
    """(n, fewest hops from a root), for nodes within `bound` hops (BFS)."""
    dist = {r: 0 for r in roots}
    frontier = set(roots)
    for d in range(1, bound + 1):
        frontier = {b for (a, b) in e if a in frontier and b not in dist}
        for n in frontier:
            dist[n] = d
    return set(dist.items())


def py_reach_avoiding(roots: set[int], e: Rel, blocked: set[int]) -> set[int]:
    """reach(n) :- root(n).  reach(y) :- reach(x), e(x, y), !blocked(y)."""
    return py_reach(roots, {(a, b) for (a, b) in e if b not in blocked})


def nodes_of(rel: Rel) -> set[int]:
    return {n for (n,) in rel}


def rows(ns: set[int]) -> Rel:
    return {(n,) for n in ns}


# ---- the queries as recursive scopes ----------------------------------------------------------------------
def tc_body(e: Stream, p: Stream) -> Stream:
    """p(x, y) :- e(x, y).  p(x, y) :- p(x, z), e(z, y)."""
    return (e + p.stream_join(e, left_on="dst", right_on="src").map("src", dst="dst_right")).stream_distinct()


def tc_left_body(e: Stream, p: Stream) -> Stream:
    """p(x, y) :- e(x, y).  p(x, y) :- e(x, z), p(z, y)  (the §6.1 form: the recursion on the right)."""
    return (e + e.stream_join(p, left_on="dst", right_on="src").map("src", dst="dst_right")).stream_distinct()


def sg_rules(par_a: Stream, par_b: Stream, sg: Stream) -> Stream:
    """sg(x, y) :- parent(p, x), parent(p, y), x != y.  sg(x, y) :- parent(a, x), sg(a, b), parent(b, y)."""
    base = par_a.stream_join(par_b, on="p").filter(col("c").ne(col("c_right"))).map(x="c", y="c_right")
    rec = (
        par_a.stream_join(sg, left_on="p", right_on="x")  # p, c, x, y
        .stream_join(par_b, left_on="y", right_on="p")  # ..., p_right, c_right
        .map(x="c", y="c_right")
    )
    return (base + rec).stream_distinct()


def reach_step(r: Stream, e: Stream) -> Stream:
    return r.stream_join(e, left_on="n", right_on="src").map(n="dst")


@dataclass
class Query:
    name: str
    inputs: dict[str, dict[str, str]]
    build: Callable[[dict[str, Stream], str], dict[str, Stream]]
    oracle: Callable[[State], dict[str, Rel]]
    universes: dict[str, list[tuple]]
    graph: str | None = "e"  # the edge input that `cycle` and `break` steps act on


def build_tc(
    body: Callable[[Stream, Stream], Stream],
) -> Callable[[dict[str, Stream], str], dict[str, Stream]]:
    def build(ins: dict[str, Stream], mode: str) -> dict[str, Stream]:
        return {
            "tc": ins["e"].circuit.recursive(body, [ins["e"]], name="tc", mode=mode, max_iterations=MAX_IT)
        }

    return build


def build_sg_one_import(ins: dict[str, Stream], mode: str) -> dict[str, Stream]:
    par = ins["par"]
    sg = par.circuit.recursive(
        lambda p, s: sg_rules(p, p, s), [par], schemas=[XY], name="sg", mode=mode, max_iterations=MAX_IT
    )
    return {"sg": sg}


def build_sg_two_imports(ins: dict[str, Stream], mode: str) -> dict[str, Stream]:
    par = ins["par"]
    sg = par.circuit.recursive(
        sg_rules, [par, par], schemas=[XY], name="sg", mode=mode, max_iterations=MAX_IT
    )
    return {"sg": sg}


def build_reach_root(ins: dict[str, Stream], mode: str) -> dict[str, Stream]:
    c = ins["e"].circuit
    reach = c.recursive(
        lambda root, e, r: (root + reach_step(r, e)).stream_distinct(),
        [ins["root"], ins["e"]],
        name="reach",
        mode=mode,
        max_iterations=MAX_IT,
    )
    return {"reach": reach}


def build_reach_const(ins: dict[str, Stream], mode: str) -> dict[str, Stream]:
    """reach(y) :- e(0, y).  reach(y) :- reach(x), e(x, y): a constant filter instead of a root input."""
    e = ins["e"]
    reach = e.circuit.recursive(
        lambda e, r: (e.filter(col("src").eq(0)).map(n="dst") + reach_step(r, e)).stream_distinct(),
        [e],
        schemas=[NODE],
        name="reach0",
        mode=mode,
        max_iterations=MAX_IT,
    )
    return {"reach0": reach}


def build_unreach(ins: dict[str, Stream], mode: str) -> dict[str, Stream]:
    """unreach(n) :- node(n), !reach(n): the negation is outside the scope, on its output (stratified)."""
    reach = build_reach_root(ins, mode)["reach"]
    return {"reach": reach, "unreach": ins["node"].stream_antijoin(reach, on="n")}


def build_even_odd(ins: dict[str, Stream], mode: str) -> dict[str, Stream]:
    def body(e: Stream, even: Stream, odd: Stream) -> tuple[Stream, Stream]:
        new_even = e.stream_join(odd, left_on="dst", right_on="x").map(x="src", y="y").stream_distinct()
        new_odd = (
            e.map(x="src", y="dst") + e.stream_join(even, left_on="dst", right_on="x").map(x="src", y="y")
        ).stream_distinct()
        return new_even, new_odd

    even, odd = ins["e"].circuit.recursive(
        body, [ins["e"]], schemas=[XY, XY], name="parity", mode=mode, max_iterations=MAX_IT
    )
    return {"even": even, "odd": odd}


def build_dist(ins: dict[str, Stream], mode: str) -> dict[str, Stream]:
    """dist(n, min(d)): dist(r, 0) :- root(r).  dist(m, d + 1) :- dist(n, d), e(n, m), d + 1 <= MAX_HOPS."""

    def body(root: Stream, e: Stream, dist: Stream) -> Stream:
        seed = root.map("n", d=lit(0))
        step = (
            dist.stream_join(e, left_on="n", right_on="src")
            .map(n="dst", d=col("d") + 1)
            .filter(col("d") <= MAX_HOPS)
        )
        return (seed + step).stream_aggregate(by="n", d=("min", "d"))

    dist = ins["e"].circuit.recursive(
        body,
        [ins["root"], ins["e"]],
        schemas=[{"n": "int64", "d": "int64"}],
        name="dist",
        mode=mode,
        max_iterations=MAX_IT,
    )
    return {"dist": dist}


def build_reach_avoiding(ins: dict[str, Stream], mode: str) -> dict[str, Stream]:
    """A body with a difference: reach(y) :- reach(x), e(x, y), !blocked(y) (antijoin = a - semijoin)."""

    def body(root: Stream, e: Stream, blocked: Stream, r: Stream) -> Stream:
        return (root + reach_step(r, e).stream_antijoin(blocked, on="n")).stream_distinct()

    reach = ins["e"].circuit.recursive(
        body, [ins["root"], ins["e"], ins["blocked"]], name="avoid", mode=mode, max_iterations=MAX_IT
    )
    return {"reach": reach}


def build_alternate(ins: dict[str, Stream], mode: str) -> dict[str, Stream]:
    """A non-monotone while-program (§7.7): x := {n in i : n - 1 not in x}, iterated from x = {}. The
    negation goes through the recursion (not stratified); on integers it converges (each run a..a+m of
    i settles from its left end: a, a+2, a+4, ...)."""
    i = ins["i"]
    x = i.circuit.recursive(
        lambda i, x: i.stream_antijoin(x.map(n=col("n") + 1), on="n"),
        [i],
        name="alternate",
        mode=mode,
        max_iterations=MAX_IT,
    )
    return {"x": x}


def py_alternate(i: set[int]) -> set[int]:
    x: set[int] = set()
    while True:
        nxt = {n for n in i if n - 1 not in x}
        if nxt == x:
            return x
        x = nxt


TC = Query("tc", {"e": EDGE}, build_tc(tc_body), lambda s: {"tc": py_tc(s["e"])}, {"e": EDGES})
TC_LEFT = Query("tc_left", {"e": EDGE}, build_tc(tc_left_body), lambda s: {"tc": py_tc(s["e"])}, {"e": EDGES})
SG1 = Query(
    "sg_one_import",
    {"par": PARENT},
    build_sg_one_import,
    lambda s: {"sg": py_sg(s["par"])},
    {"par": EDGES},
    graph="par",
)
SG2 = Query(
    "sg_two_imports",
    {"par": PARENT},
    build_sg_two_imports,
    lambda s: {"sg": py_sg(s["par"])},
    {"par": EDGES},
    graph="par",
)
REACH = Query(
    "reach_root",
    {"root": NODE, "e": EDGE},
    build_reach_root,
    lambda s: {"reach": rows(py_reach(nodes_of(s["root"]), s["e"]))},
    {"root": NODE_ROWS, "e": EDGES},
)
REACH0 = Query(
    "reach_const",
    {"e": EDGE},
    build_reach_const,
    lambda s: {"reach0": rows(py_reach({b for (a, b) in s["e"] if a == 0}, s["e"]))},
    {"e": EDGES},
)


def unreach_oracle(s: State) -> dict[str, Rel]:
    reach = py_reach(nodes_of(s["root"]), s["e"])
    return {"reach": rows(reach), "unreach": rows(nodes_of(s["node"]) - reach)}


UNREACH = Query(
    "unreach",
    {"node": NODE, "root": NODE, "e": EDGE},
    build_unreach,
    unreach_oracle,
    {"node": NODE_ROWS, "root": NODE_ROWS, "e": EDGES},
)


def even_odd_oracle(s: State) -> dict[str, Rel]:
    even, odd = py_even_odd(s["e"])
    return {"even": even, "odd": odd}


EVEN_ODD = Query("even_odd", {"e": EDGE}, build_even_odd, even_odd_oracle, {"e": EDGES})
DIST = Query(
    "dist",
    {"root": NODE, "e": EDGE},
    build_dist,
    lambda s: {"dist": py_dist(nodes_of(s["root"]), s["e"], MAX_HOPS)},
    {"root": NODE_ROWS, "e": EDGES},
)
AVOID = Query(
    "reach_avoiding",
    {"root": NODE, "e": EDGE, "blocked": NODE},
    build_reach_avoiding,
    lambda s: {"reach": rows(py_reach_avoiding(nodes_of(s["root"]), s["e"], nodes_of(s["blocked"])))},
    {"root": NODE_ROWS, "e": EDGES, "blocked": NODE_ROWS},
)


ALTERNATE = Query(
    "alternate",
    {"i": NODE},
    build_alternate,
    lambda s: {"x": rows(py_alternate(nodes_of(s["i"])))},
    {"i": NODE_ROWS},
    graph=None,
)


def build_reach_constant_root(ins: dict[str, Stream], mode: str) -> dict[str, Stream]:
    """reach(0).  reach(y) :- reach(x), e(x, y): the root is a constant of the body's own circuit."""
    e = ins["e"]
    reach = e.circuit.recursive(
        lambda e, r: (e.circuit.constant(NODE, [(0,)]) + reach_step(r, e)).stream_distinct(),
        [e],
        schemas=[NODE],
        name="reach_c",
        mode=mode,
        max_iterations=MAX_IT,
    )
    return {"reach": reach}


def build_reach_product(ins: dict[str, Stream], mode: str) -> dict[str, Stream]:
    """reach(n) :- root(n).  reach(y) :- reach(x), e(s, y), x = s: the step as a product and a filter."""

    def body(root: Stream, e: Stream, r: Stream) -> Stream:
        return (root + r.stream_product(e).filter(col("n").eq(col("src"))).map(n="dst")).stream_distinct()

    return {
        "reach": ins["e"].circuit.recursive(
            body, [ins["root"], ins["e"]], name="reach_x", mode=mode, max_iterations=MAX_IT
        )
    }


def build_count_bound(ins: dict[str, Stream], mode: str) -> dict[str, Stream]:
    """x := {n in i : n <= count(x)} from x = {}: an aggregate without GROUP BY over the recursive
    relation, whose row for the empty relation (count 0) starts the iteration."""

    def body(i: Stream, x: Stream) -> Stream:
        return i.stream_product(x.stream_aggregate(c="count")).filter(col("n") <= col("c")).map("n")

    return {
        "x": ins["i"].circuit.recursive(
            body, [ins["i"]], name="count_bound", mode=mode, max_iterations=MAX_IT
        )
    }


def py_count_bound(i: set[int]) -> set[int]:
    return py_fix(lambda x: {n for n in i if n <= len(x)})


SHARE_NODES = range(6)
OWNS = {"x": "int64", "y": "int64", "n": "decimal(10,2)", "i": "int64"}
OWNS_ROWS = [
    (a, b, Decimal(((3 * a + 5 * b) % 7 + 1) * 10) + Decimal("0.25"), ((3 * a + 5 * b) % 7 + 1) * 10)
    for a in SHARE_NODES
    for b in SHARE_NODES
    if a != b
]
SHARE_ROW = {"x": "int64", "y": "int64", "s": "decimal(38,2)", "t": "int64", "c": "int64", "a": "float64"}


def build_shares(ins: dict[str, Stream], mode: str) -> dict[str, Stream]:
    """Company control with its shares as the recursive relation: per (x, y), the DECIMAL and integer
    sums, the count and the average of the shares of y held by x and by the companies x controls (those
    whose DECIMAL sum is over 50): GROUP BY-aggregates of linear calls inside the scope, kept as
    accumulators (`nested_accumulators`)."""

    def body(o: Stream, r: Stream) -> Stream:
        controls = r.filter((col("s") > lit(Decimal(50))) & col("x").ne(col("y"))).map(x="x", z="y")
        cv = o.map("x", "y", "n", "i") + controls.stream_join(o, left_on="z", right_on="x").map(
            "x", "y", "n", "i"
        )
        return cv.stream_aggregate(by=("x", "y"), s=("sum", "n"), t=("sum", "i"), c="count", a=("avg", "i"))

    return {
        "shares": ins["o"].circuit.recursive(
            body, [ins["o"]], schemas=[SHARE_ROW], name="shares", mode=mode, max_iterations=MAX_IT
        )
    }


def py_shares(owns: Rel) -> Rel:
    """The least fixpoint of company control, and the shares of its last iteration per (x, y)."""
    ctrl: set[tuple[int, int]] = set()
    while True:
        groups: dict[tuple[int, int], list[tuple]] = {}
        for x in SHARE_NODES:
            for z in {x} | {z for (c, z) in ctrl if c == x}:
                for a, y, n, i in owns:
                    if a == z:
                        groups.setdefault((x, y), []).append((n, i))
        new = {g for g, v in groups.items() if sum(n for n, _ in v) > 50 and g[0] != g[1]}
        if new == ctrl:
            return {
                (x, y, sum(n for n, _ in v), sum(i for _, i in v), len(v), sum(i for _, i in v) / len(v))
                for (x, y), v in groups.items()
            }
        ctrl = new


def build_envelope(ins: dict[str, Stream], mode: str) -> dict[str, Stream]:
    """p := (min(src), max(dst)) of e and p: an aggregate without GROUP BY as the scope's result (one
    row of NULLs when e is empty)."""
    env = ins["e"].circuit.recursive(
        lambda e, p: (
            (e.map(src="src", dst="dst") + p)
            .stream_distinct()
            .stream_aggregate(src=("min", "src"), dst=("max", "dst"))
        ),
        [ins["e"]],
        name="envelope",
        mode=mode,
        max_iterations=MAX_IT,
    )
    return {"env": env}


def py_envelope(e: Rel) -> Rel:
    return {(min(a for a, _ in e), max(b for _, b in e))} if e else {(None, None)}


CONST_ROOT = Query(
    "reach_constant_root",
    {"e": EDGE},
    build_reach_constant_root,
    lambda s: {"reach": rows(py_reach({0}, s["e"]))},
    {"e": EDGES},
)
PRODUCT = Query(
    "reach_product",
    {"root": NODE, "e": EDGE},
    build_reach_product,
    lambda s: {"reach": rows(py_reach(nodes_of(s["root"]), s["e"]))},
    {"root": NODE_ROWS, "e": EDGES},
)
COUNT_BOUND = Query(
    "count_bound",
    {"i": NODE},
    build_count_bound,
    lambda s: {"x": rows(py_count_bound(nodes_of(s["i"])))},
    {"i": NODE_ROWS},
    graph=None,
)
SHARES = Query(
    "shares", {"o": OWNS}, build_shares, lambda s: {"shares": py_shares(s["o"])}, {"o": OWNS_ROWS}, graph=None
)
ENVELOPE = Query(
    "envelope", {"e": EDGE}, build_envelope, lambda s: {"env": py_envelope(s["e"])}, {"e": EDGES}
)


def make_circuit(q: Query, mode: str, kind: str = "set") -> dbspark.Circuit:
    c = dbspark.Circuit()
    ins = {name: c.input(name, schema, kind=kind) for name, schema in q.inputs.items()}
    for name, s in q.build(ins, mode).items():
        c.output(name, s)
    return c


# ---- change streams ----------------------------------------------------------------------------------------
@dataclass
class Step:
    kind: str
    inserts: dict[str, list[tuple]]
    deletes: dict[str, list[tuple]]


def on_cycle(edges: Rel) -> list[tuple]:
    """The edges that lie on a cycle (deleting one may break it)."""
    return sorted((a, b) for (a, b) in edges if a in py_reach({b}, edges))


def subset(draw: st.DrawFn, rel: Rel | list[tuple], lo: int, hi: int) -> set[tuple]:
    pool = sorted(rel)
    if not pool:
        return set()
    return set(draw(st.lists(st.sampled_from(pool), min_size=min(lo, len(pool)), max_size=hi, unique=True)))


@st.composite
def change_streams(
    draw: st.DrawFn, q: Query, max_steps: int = 5, end_clear: bool | None = None
) -> list[Step]:
    """Steps of inserts and deletes (deletes only of present rows) over `q`'s inputs.

    The first step builds a graph (random edges and a cycle); later steps mix inserts of absent rows
    with deletes of present ones, insert whole cycles, delete edges that lie on a cycle, do nothing,
    or delete everything."""
    state: State = {k: set() for k in q.universes}
    steps: list[Step] = []
    kinds = ["mixed", "mixed", "mixed", "cycle", "break", "break", "delete", "empty", "clear"]
    for i in range(draw(st.integers(min(3, max_steps), max_steps))):
        kind = "build" if i == 0 else draw(st.sampled_from(kinds))
        if q.graph is None and kind in ("cycle", "break"):
            kind = "mixed"
        ins: dict[str, set[tuple]] = {k: set() for k in q.universes}
        dels: dict[str, set[tuple]] = {k: set() for k in q.universes}
        if kind in ("build", "cycle"):  # random rows, and a whole cycle (a self-loop if one node)
            if q.graph is not None:
                ns = draw(st.lists(st.sampled_from(NODES), min_size=1, max_size=5, unique=True))
                cyc = {(ns[j], ns[(j + 1) % len(ns)]) for j in range(len(ns))}
                ins[q.graph] = cyc - state[q.graph]
            for k, universe in q.universes.items():
                ins[k] |= subset(
                    draw,
                    set(universe) - state[k],
                    1 if kind == "build" else 0,
                    10 if kind == "build" and k == q.graph else 2,
                )
        elif kind == "mixed":
            for k, universe in q.universes.items():
                dels[k] = subset(draw, state[k], 0, 3)
                ins[k] = subset(draw, set(universe) - state[k], 0, 3)
        elif kind == "delete":
            for k in q.universes:
                dels[k] = subset(draw, state[k], 1, 3)
        elif kind == "break" and q.graph is not None:  # delete edges that lie on cycles
            dels[q.graph] = subset(draw, on_cycle(state[q.graph]), 1, 2)
        elif kind == "clear":
            dels = {k: set(v) for k, v in state.items()}
        for k in q.universes:
            state[k] = (state[k] - dels[k]) | ins[k]
        steps.append(
            Step(
                kind,
                {k: sorted(v) for k, v in ins.items() if v},
                {k: sorted(v) for k, v in dels.items() if v},
            )
        )
    if end_clear if end_clear is not None else draw(st.booleans()):
        steps.append(Step("clear", {}, {k: sorted(v) for k, v in state.items() if v}))
    return steps


# ---- the harness -----------------------------------------------------------------------------------------
def add_into(acc: dict[tuple, int], change: dict[tuple, int]) -> dict[tuple, int]:
    out = dict(acc)
    for r, w in change.items():
        out[r] = out.get(r, 0) + w
        if out[r] == 0:
            del out[r]
    return out


def as_set(rel: Rel) -> dict[tuple, int]:
    return {r: 1 for r in rel}


# every oracle test runs each strategy that accepts the query. "auto" with its rule's thresholds at 0
# (`auto_scope.SWITCH_MIN`, `SWITCH_RATIO`, `SWITCH_SHARE`) recomputes the step after an over-delete that
# put facts back, and an over-delete whose removals are half still supported; "auto, early" recomputes
# every over-delete at its first iteration and, with a budget of 0, every step that runs a second
# iteration, then the steps after each by its backoff (`AutoScopeState.runaway`, `budget`, `skip`).
# Neither measures time: their budget is infinite or 0.
STRATEGIES = ("nested", "dred", "auto", "auto, early")


def incrementalized(c: dbspark.Circuit, strategy: str) -> dbspark.Circuit | None:
    """`c` incrementalized with every scope maintained by `strategy`; None if a scope does not qualify
    for "dred", or if none does for "auto"."""
    from dbspark.operators.fixpoint import Fixpoint

    strategy = strategy.split(",")[0]
    try:
        inc = c.incrementalize(recursion=strategy)
    except UnsupportedError:
        assert strategy == "dred"
        return None
    if strategy == "auto" and not any(
        isinstance(n.op, Fixpoint) and n.op.mode == "auto" for n in inc.nodes.values()
    ):
        return None  # no scope qualifies: auto is the nested circuit, run already
    return inc


def check_against_oracles(
    q: Query, steps: list[Step], inc_modes: tuple[str, ...] | str = MODES, engine: Any = "local"
) -> None:
    """After every step: the incremental views (incrementalized from each of `inc_modes`) equal the
    Python fixpoint and the non-incremental naive and semi-naive circuits run on the snapshot; the
    incremental outputs are the differences of consecutive naive outputs and their running sum is the
    naive output."""
    inc_modes = (inc_modes,) if isinstance(inc_modes, str) else inc_modes
    with eager_switch():
        check_steps(q, steps, inc_modes, engine)


@contextlib.contextmanager
def eager_switch() -> Iterator[None]:
    """The strategy "auto" recomputes at its rule's least sign (`operators/auto_scope.py`)."""
    from dbspark.operators import auto_scope

    saved = auto_scope.SWITCH_MIN, auto_scope.SWITCH_RATIO, auto_scope.SWITCH_SHARE
    auto_scope.SWITCH_MIN = auto_scope.SWITCH_RATIO = auto_scope.SWITCH_SHARE = 0
    try:
        yield
    finally:
        auto_scope.SWITCH_MIN, auto_scope.SWITCH_RATIO, auto_scope.SWITCH_SHARE = saved


def run_as(inc: dbspark.Circuit, engine: Any, strategy: str) -> Any:
    """A runtime of `inc`; under "auto, early" its scopes recompute at the first iteration of an
    over-delete and at the end of any step's second (`AutoScopeState.runaway`, `budget`), under "auto"
    by the rule (`auto_scope._runaway`, with the thresholds of `eager_switch` in the oracle tests)
    and no budget."""
    rt = inc.run(engine)
    for state in rt.states.values():
        if hasattr(state, "runaway"):
            early = strategy == "auto, early"
            state.budget = 0.0 if early else math.inf
            if early:
                state.runaway = lambda removed, kept: True
    return rt


def check_steps(q: Query, steps: list[Step], inc_modes: tuple[str, ...], engine: Any) -> None:
    circuits = {m: make_circuit(q, m) for m in MODES}
    incs = {
        f"{m}, {s}": run_as(inc, engine, s)
        for m in inc_modes
        for s in STRATEGIES
        if (inc := incrementalized(circuits[m], s)) is not None
    }
    # the non-incremental circuits, the oracle's second opinion, on the local engine (on Spark they are
    # checked by test_theorem_5_4_naive_and_seminaive_compute_datalog_semantics)
    fulls = {m: circuits[m].run("local", snapshots=True) for m in MODES}
    outs = list(circuits["naive"].outputs)
    state: State = {k: set() for k in q.inputs}
    acc = {m: {o: {} for o in outs} for m in incs}
    prev_naive: dict[str, dict[tuple, int]] = {o: {} for o in outs}
    for t, step in enumerate(steps):
        for k, rs in step.inserts.items():
            for rt in incs.values():
                rt.insert(k, rs)
            state[k] |= set(rs)
        for k, rs in step.deletes.items():
            for rt in incs.values():
                rt.delete(k, rs)
            state[k] -= set(rs)
        for k, rel in state.items():
            if rel:
                for rt in fulls.values():
                    rt.insert(k, sorted(rel))
        where = f"step {t} ({step.kind}: +{step.inserts} -{step.deletes}), state {state}"
        expected = {o: as_set(v) for o, v in q.oracle(state).items()}
        naive: dict[str, dict[tuple, int]] = {}
        for m, rt in fulls.items():
            got = rt.step()
            for o in outs:
                assert got[o].to_dict() == expected[o], f"{q.name}: {m} circuit, output {o}, {where}"
            if m == "naive":
                naive = {o: got[o].to_dict() for o in outs}
        for m, rt in incs.items():
            got = rt.step()
            for o in outs:
                change = got[o].to_dict()
                assert rt.view(o).to_dict() == expected[o], (
                    f"{q.name}: incremental from {m}, view {o}, {where}"
                )
                acc[m][o] = add_into(acc[m][o], change)
                assert acc[m][o] == naive[o], f"{q.name}: I(incremental {m} outputs) != naive, {o}, {where}"
                want = add_into(naive[o], {r: -w for r, w in prev_naive[o].items()})
                assert change == want, f"{q.name}: incremental {m} output {o} is not D(naive), {where}"
        prev_naive = naive


# ---- 1. oracle tests: incremental == Python fixpoint == naive == semi-naive, after every step ---------------
@engine_given(change_streams(TC), st.sampled_from(MODES), local=SETTINGS, spark=1)
def test_transitive_closure(engine: Any, steps, inc_from):
    check_against_oracles(TC, steps, inc_from, engine=engine)


@engine_given(change_streams(TC_LEFT), st.sampled_from(MODES), local=SETTINGS, spark=1)
def test_transitive_closure_recursion_on_the_right(engine: Any, steps, inc_from):
    check_against_oracles(TC_LEFT, steps, inc_from, engine=engine)


@engine_given(change_streams(SG1, max_steps=4), st.sampled_from(MODES), local=SETTINGS, spark=1)
def test_same_generation_one_import_used_twice(engine: Any, steps, inc_from):
    check_against_oracles(SG1, steps, inc_from, engine=engine)


@engine_given(
    change_streams(SG2, max_steps=4),
    st.sampled_from(MODES),
    local=settings(SETTINGS, max_examples=8),
    spark=1,
)
def test_same_generation_two_imports(engine: Any, steps, inc_from):
    check_against_oracles(SG2, steps, inc_from, engine=engine)


@engine_given(change_streams(REACH), st.sampled_from(MODES), local=SETTINGS, spark=1)
def test_reachability_from_root_input(engine: Any, steps, inc_from):
    check_against_oracles(REACH, steps, inc_from, engine=engine)


@engine_given(
    change_streams(REACH0), st.sampled_from(MODES), local=settings(SETTINGS, max_examples=8), spark=1
)
def test_reachability_from_constant_root(engine: Any, steps, inc_from):
    check_against_oracles(REACH0, steps, inc_from, engine=engine)


@engine_given(change_streams(UNREACH), st.sampled_from(MODES), local=SETTINGS, spark=1)
def test_stratified_negation_unreachable_nodes(engine: Any, steps, inc_from):
    check_against_oracles(UNREACH, steps, inc_from, engine=engine)


@engine_given(change_streams(EVEN_ODD), st.sampled_from(MODES), local=SETTINGS, spark=1)
def test_mutual_recursion_even_odd_paths(engine: Any, steps, inc_from):
    check_against_oracles(EVEN_ODD, steps, inc_from, engine=engine)


RING = [(i, (i + 1) % 8) for i in range(8)]


@pytest.mark.parametrize("q", [TC, EVEN_ODD, UNREACH], ids=lambda q: q.name)
def test_breaking_and_restoring_a_ring(engine: Any, q):
    """A ring of all 8 nodes; delete one ring edge (the closure collapses to a chain), put it back,
    delete two, add a chord, delete everything."""
    other = {k: [(0,), (3,)] for k in q.inputs if k != "e"}
    steps = [
        Step("ring", {"e": RING, **other}, {}),
        Step("break", {}, {"e": [(3, 4)]}),
        Step("empty", {}, {}),
        Step("restore", {"e": [(3, 4)]}, {}),
        Step("break2", {}, {"e": [(0, 1), (5, 6)]}),
        Step("chord", {"e": [(6, 1), (4, 4)]}, {"e": [(7, 0)]}),
        Step("clear", {}, {"e": sorted((set(RING) - {(0, 1), (5, 6), (7, 0)}) | {(6, 1), (4, 4)}), **other}),
        Step("empty", {}, {}),
    ]
    # on Spark one circuit form per query, the two forms between the three queries (CI's time)
    modes = (MODES[[TC, EVEN_ODD, UNREACH].index(q) % 2],) if is_spark(engine) else MODES
    check_against_oracles(q, steps, modes, engine=engine)


# ---- 2. Theorem 5.4: naive and semi-naive circuits compute the Datalog semantics ----------------------------
ALL_QUERIES = [TC, TC_LEFT, SG1, SG2, REACH, REACH0, UNREACH, EVEN_ODD, DIST, AVOID, ALTERNATE]


@st.composite
def query_and_sets(draw: st.DrawFn) -> tuple[Query, State]:
    q = draw(st.sampled_from(ALL_QUERIES))
    return q, {k: draw(st.sets(st.sampled_from(u), max_size=14)) for k, u in q.universes.items()}


@engine_given(query_and_sets(), local=settings(SETTINGS, max_examples=40), spark=1)
def test_theorem_5_4_naive_and_seminaive_compute_datalog_semantics(engine: Any, qs):
    q, inputs = qs
    expected = {o: as_set(v) for o, v in q.oracle(inputs).items()}
    for mode in MODES:
        rt = make_circuit(q, mode).run(engine)
        for k, rel in inputs.items():
            if rel:
                rt.insert(k, sorted(rel))
        got = rt.step()
        for o, want in expected.items():
            assert got[o].to_dict() == want, f"{q.name} [{mode}] output {o} on {inputs}"


def test_theorem_5_4_example_values(engine: Any):
    """A hand-checked instance, so the Python oracles themselves are pinned down."""
    e = {(0, 1), (1, 2), (2, 0), (3, 4)}
    assert py_tc(e) == {(a, b) for a in (0, 1, 2) for b in (0, 1, 2)} | {(3, 4)}
    assert py_even_odd({(0, 1), (1, 2), (2, 3)}) == ({(0, 2), (1, 3)}, {(0, 1), (1, 2), (2, 3), (0, 3)})
    assert py_sg({(0, 1), (0, 2), (1, 3), (2, 4)}) == {(1, 2), (2, 1), (3, 4), (4, 3)}
    assert py_dist({0}, {(0, 1), (1, 2), (2, 3), (3, 4), (0, 3)}, 3) == {
        (0, 0),
        (1, 1),
        (2, 2),
        (3, 1),
        (4, 2),
    }
    for mode in MODES:
        c = make_circuit(TC, mode)
        rt = c.run(engine)
        rt.insert("e", sorted(e))
        assert rt.step()["tc"].to_dict() == as_set(py_tc(e))


# ---- 3. Prop 6.2: I(incremental outputs) == naive on I(inputs), empty steps, delete back to empty ----------
@engine_given(
    st.sampled_from([TC, EVEN_ODD, REACH]).flatmap(
        lambda q: change_streams(q, max_steps=5, end_clear=True).map(lambda s: (q, s))
    ),
    local=settings(SETTINGS, max_examples=8),
    spark=1,
)
def test_prop_6_2_incremental_scope_is_the_lifted_scope(engine: Any, qs):
    q, steps = qs
    steps = [Step("empty", {}, {}), *steps, Step("empty", {}, {})]
    check_against_oracles(
        q, steps, engine=engine
    )  # the last non-empty step deletes everything: the views end empty


def test_incremental_scope_after_delete_to_empty_starts_afresh(engine: Any):
    """Delete the whole graph, then build a different one: no residue of the first graph remains."""
    q = TC
    first = [(0, 1), (1, 2), (2, 3), (3, 0), (5, 5)]
    second = [(3, 4), (4, 3), (6, 7)]
    steps = [
        Step("ins", {"e": first}, {}),
        Step("clear", {}, {"e": first}),
        Step("empty", {}, {}),
        Step("ins2", {"e": second}, {}),
        Step("mix", {"e": [(2, 3)]}, {"e": [(6, 7)]}),
    ]
    check_against_oracles(q, steps, engine=engine)


@st.composite
def bag_changes(draw: st.DrawFn) -> list[dict[tuple, int]]:
    """Changes to a bag of edges (weights up to 3; a delete never takes a weight below 0)."""
    cur: dict[tuple, int] = {}
    steps = []
    pool = [(a, b) for a in range(5) for b in range(5)]
    for _ in range(draw(st.integers(2, 5))):
        change: dict[tuple, int] = {}
        for edge, w in draw(st.lists(st.tuples(st.sampled_from(pool), st.integers(-3, 3)), max_size=7)):
            w = max(w, -(cur.get(edge, 0) + change.get(edge, 0)))
            if w:
                change[edge] = change.get(edge, 0) + w
        change = {r: w for r, w in change.items() if w}
        cur = add_into(cur, change)
        steps.append(change)
    steps.append({r: -w for r, w in cur.items()})
    return steps


@engine_given(bag_changes(), st.sampled_from(MODES), local=settings(SETTINGS, max_examples=6), spark=1)
def test_prop_6_2_with_multiplicities(engine: Any, steps, inc_from):
    """A bag input (edges with multiplicities): Prop 6.2 holds for any input stream, and the
    distinct in the body makes the fixpoint the closure of the support."""
    c = make_circuit(TC, inc_from, kind="bag")
    inc, full = c.incrementalize().run(engine), c.run(engine, snapshots=True)
    cur: dict[tuple, int] = {}
    acc: dict[tuple, int] = {}
    prev: dict[tuple, int] = {}
    for t, change in enumerate(steps):
        cur = add_into(cur, change)
        if change:
            inc.push("e", list(change), list(change.values()))
        if cur:
            full.push("e", list(cur), list(cur.values()))
        naive = full.step()["tc"].to_dict()
        out = inc.step()["tc"].to_dict()
        assert naive == as_set(py_tc(set(cur))), f"step {t}: naive on {cur}"
        acc = add_into(acc, out)
        assert acc == naive == inc.view("tc").to_dict(), f"step {t}: I(outputs) != naive on {cur}"
        assert out == add_into(naive, {r: -w for r, w in prev.items()}), f"step {t}: output != D(naive)"
        prev = naive
    assert inc.view("tc").to_dict() == {}


@pytest.mark.parametrize(("query", "static"), [(TC, (False, True)), (TC_LEFT, (True, False))])
def test_a_join_side_without_the_feedback_is_static(query: Query, static: tuple[bool, bool]):
    """The doubly-incremental join knows which side does not depend on the scope's feedback (the edges
    here): that side changes at the first iteration only, and the join skips its split by iteration
    (`NestedJoin.static`; a wrong flag fails the oracle tests above)."""
    from dbspark.operators.fixpoint import Fixpoint
    from dbspark.operators.nested import NestedJoin

    q = make_circuit(query, "naive").incrementalize(recursion="nested")
    (scope,) = [n.op for n in q.nodes.values() if isinstance(n.op, Fixpoint)]
    joins = [n.op for n in scope.inner.nodes.values() if isinstance(n.op, NestedJoin)]
    assert [j.static for j in joins] == [static]


@pytest.mark.parametrize("strategy", ["nested", "dred", "auto", "auto, recomputed"])
@pytest.mark.parametrize("mode", MODES)
def test_checkpoint_and_restore_of_an_incremental_scope(engine: Any, tmp_path, mode, strategy):
    """The scope's state is checkpointed (nested traces; the semi-naive body's integrals; under "auto"
    the imports' integrals with the active one of its two delete-and-rederive states, here the second
    after a recompute): a restored runtime (the same one after further steps, or a fresh one) continues
    from the checkpointed fixpoint."""
    rt = checkpoint_and_restore(
        engine, tmp_path, mode, strategy.split(",")[0], strategy == "auto, recomputed"
    )
    if strategy.startswith("auto"):
        (scope,) = [s for s in rt.states.values() if hasattr(s, "switched_at")]
        assert scope.switched_at is None


@engine_given(
    st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), min_size=4, max_size=30, unique=True),
    st.lists(st.lists(st.integers(0, 29), max_size=6), min_size=2, max_size=4),
    local=25,
    spark=2,
)
def test_auto_weighs_its_switch_against_the_fixpoint(engine, edges, drops):
    """Under "auto", an over-delete that runs away but puts back less than SWITCH_SHARE of the fixpoint
    keeps delete-and-rederive (here a share no step reaches): the scope never recomputes (no budget
    either), its results are the closure after every step, and the fixpoint's size it keeps up from each
    step's change is the view's."""
    from dbspark.operators import auto_scope as dred
    from dbspark.testing.datalog import evaluate
    from dbspark.testing.engines import is_spark, pipeline_on

    tc = (
        ".decl edge(x: number, y: number) .input edge\n.decl path(x: number, y: number) .output path\n"
        "path(x, y) :- edge(x, y).\npath(x, y) :- path(x, z), edge(z, y).\n"
    )
    saved = dred.SWITCH_MIN, dred.SWITCH_RATIO, dred.SWITCH_SHARE
    dred.SWITCH_MIN, dred.SWITCH_RATIO, dred.SWITCH_SHARE = 0, 0, 2.0
    p = pipeline_on(engine, recursion="auto")
    try:
        p.datalog(tc, closure_operator=False)
        have = set(edges)
        p.insert("edge", sorted(have))
        p.step()
        (scope,) = [s for s in p.runtime.states.values() if hasattr(s, "switched_at")]
        scope.budget = math.inf
        for n, drop in enumerate(drops):
            gone = sorted({edges[i] for i in drop if i < len(edges)} & have)
            back = gone[::2]  # some come back in the next step
            if gone:
                p.delete("edge", gone)
            p.step()
            have -= set(gone)
            want = evaluate(tc, {"edge": have})["path"]
            assert set(p.view("path").to_dict()) == want, f"step {n}"
            if not is_spark(engine):  # (on Spark the fixpoint is on the executors, not counted: no share)
                assert scope.switched_at is None and not scope.recomputed
                assert scope._size in (None, len(want)), f"step {n}: kept {scope._size}, not {len(want)}"
            if back:
                p.insert("edge", back)
                have |= set(back)
    finally:
        dred.SWITCH_MIN, dred.SWITCH_RATIO, dred.SWITCH_SHARE = saved
        p.close()


def checkpoint_and_restore(engine: Any, tmp_path: Any, mode: str, strategy: str, early: bool = False) -> Any:
    """Returns the fresh runtime restored from the checkpoint; `early`: "auto" recomputes every step
    after the first (`run_as`), so the checkpoint holds its second state."""
    q = make_circuit(TC, mode).incrementalize(recursion=strategy)
    rt = run_as(q, engine, "auto, early") if early else q.run(engine)
    rt.insert("e", RING)
    rt.step()
    rt.delete("e", [(3, 4)])
    rt.step()
    if early:
        (scope,) = [s for s in rt.states.values() if hasattr(s, "recomputed")]
        assert scope.recomputed == [1], scope.recomputed
        # (the state the recompute replaced emptied in its step)
        assert all(scope.kernel.trace_stats(t)[0] == 0 for t in scope.dreds[0].traces())
    rt.checkpoint(tmp_path / "ck")
    rule = [
        (s.cost, s.skip, s.backoff, s._size) for s in rt.states.values() if hasattr(s, "recomputed")
    ]  # (auto's: the last recompute's cost, the backoff, the fixpoint's size)
    assert strategy != "auto" or (len(rule) == 1 and rule[0][0] is not None and rule[0][3] == 28)
    rt.insert("e", [(3, 4), (6, 1)])
    rt.delete("e", [(0, 1)])
    rt.step()
    edges = set(RING) - {(3, 4)}
    for r in (rt, q.run(engine)):
        r.restore(tmp_path / "ck")
        # the rule restored with the rest: a restored scope keeps its budget
        assert [
            (s.cost, s.skip, s.backoff, s._size) for s in r.states.values() if hasattr(s, "recomputed")
        ] == rule
        if early:  # (the second step was recomputed into the second state, which the checkpoint holds)
            (scope,) = [s for s in r.states.values() if hasattr(s, "recomputed")]
            assert scope.active == 1
        assert r.view("tc").to_dict() == as_set(py_tc(edges))
        r.insert("e", [(4, 2)])
        r.delete("e", [(7, 0)])
        out = r.step()["tc"].to_dict()
        new = (edges | {(4, 2)}) - {(7, 0)}
        assert r.view("tc").to_dict() == as_set(py_tc(new))
        assert out == add_into(as_set(py_tc(new)), {k: -1 for k in py_tc(edges)})
        r.delete("e", sorted(new))
        r.step()
        assert r.view("tc").to_dict() == {}
    return r


# ---- 4. non-linear bodies (§7.7): GROUP BY-aggregate and a difference inside the scope ---------------------
@engine_given(change_streams(DIST), st.sampled_from(MODES), local=settings(SETTINGS, max_examples=8), spark=1)
def test_aggregate_in_body_bounded_shortest_paths(engine: Any, steps, inc_from):
    check_against_oracles(DIST, steps, inc_from, engine=engine)


def test_aggregate_in_body_distance_shrinks_and_grows(engine: Any):
    """A shortcut edge lowers distances (the min retracts the old ones), deleting it raises them again,
    and nodes beyond MAX_HOPS drop out."""
    chain = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)]
    steps = [
        Step("root", {"root": [(0,)], "e": chain}, {}),
        Step("shortcut", {"e": [(0, 3)]}, {}),
        Step("unshortcut", {}, {"e": [(0, 3)]}),
        Step("second root", {"root": [(4,)]}, {}),
        Step("cycle", {"e": [(5, 0)]}, {"root": [(0,)]}),
        Step("clear", {}, {"root": [(4,)], "e": [*chain, (5, 0)]}),
    ]
    check_against_oracles(DIST, steps, engine=engine)


@engine_given(
    change_streams(AVOID), st.sampled_from(MODES), local=settings(SETTINGS, max_examples=8), spark=1
)
def test_difference_in_body_reachability_avoiding_blocked_nodes(engine: Any, steps, inc_from):
    check_against_oracles(AVOID, steps, inc_from, engine=engine)


@engine_given(
    change_streams(ALTERNATE, max_steps=6),
    st.sampled_from(MODES),
    local=settings(SETTINGS, max_examples=10),
    spark=1,
)
def test_non_monotone_while_program(engine: Any, steps, inc_from):
    check_against_oracles(ALTERNATE, steps, inc_from, engine=engine)


def test_non_monotone_while_program_values():
    assert py_alternate({0, 1, 2, 3, 5, 6}) == {0, 2, 5}


# ---- 5. constants, products and aggregates without GROUP BY inside the scope --------------------------------
@engine_given(
    change_streams(CONST_ROOT), st.sampled_from(MODES), local=settings(SETTINGS, max_examples=8), spark=1
)
def test_constant_inside_the_body(engine: Any, steps, inc_from):
    check_against_oracles(CONST_ROOT, steps, inc_from, engine=engine)


@pytest.mark.parametrize("strategy", ["nested", "dred", "auto", "auto, early"])
def test_a_constant_enters_at_the_first_step_without_changes(engine: Any, strategy: str):
    """The body's constant (the root 0) is in the view from the first step on, a step that changes no
    import (delete-and-rederive ran no iteration there, and the root appeared a step late); and again
    after a recompute that starts from an empty graph (its fresh state's constant enters anew)."""
    steps = [
        Step("empty", {}, {}),
        Step("edge", {"e": [(0, 1)]}, {}),
        Step("none", {}, {}),
        Step("gone", {}, {"e": [(0, 1)]}),
        Step("back", {"e": [(0, 1), (1, 2)]}, {}),
    ]
    (mode,) = [m for m in MODES if m == "naive"]
    inc = incrementalized(make_circuit(CONST_ROOT, mode), strategy)
    assert inc is not None
    rt = run_as(inc, engine, strategy)
    edges: set[tuple[int, int]] = set()
    for n, step in enumerate(steps):
        for k, rs in step.inserts.items():
            rt.insert(k, rs)
            edges |= set(rs)
        for k, rs in step.deletes.items():
            rt.delete(k, rs)
            edges -= set(rs)
        rt.step()
        assert rt.view("reach").to_dict() == as_set(rows(py_reach({0}, edges))), f"step {n}: {step.kind}"
    if strategy == "auto, early":
        (scope,) = [s for s in rt.states.values() if hasattr(s, "recomputed")]
        assert 3 in scope.recomputed, scope.recomputed  # (the delete: its over-delete recomputed)


@engine_given(
    change_streams(PRODUCT), st.sampled_from(MODES), local=settings(SETTINGS, max_examples=8), spark=1
)
def test_product_inside_the_body(engine: Any, steps, inc_from):
    check_against_oracles(PRODUCT, steps, inc_from, engine=engine)


@engine_given(
    change_streams(COUNT_BOUND, max_steps=6),
    st.sampled_from(MODES),
    local=settings(SETTINGS, max_examples=10),
    spark=1,
)
def test_aggregate_without_group_by_over_the_recursive_relation(engine: Any, steps, inc_from):
    check_against_oracles(COUNT_BOUND, steps, inc_from, engine=engine)


def test_aggregate_without_group_by_values(engine: Any):
    assert py_count_bound({0, 1, 2, 5, 6}) == {0, 1, 2}
    steps = [
        Step("start", {"i": [(0,), (1,), (2,), (5,), (6,)]}, {}),
        Step("gap", {"i": [(3,), (4,)]}, {}),
        Step("cut", {}, {"i": [(0,)]}),
        Step("restart", {"i": [(0,)]}, {"i": [(2,)]}),
        Step("clear", {}, {"i": [(0,), (1,), (3,), (4,), (5,), (6,)]}),
    ]
    check_against_oracles(COUNT_BOUND, steps, engine=engine)


@engine_given(
    change_streams(SHARES, max_steps=6),
    st.sampled_from(MODES),
    local=settings(SETTINGS, max_examples=10),
    spark=1,
)
def test_linear_aggregates_kept_as_accumulators(engine: Any, steps, inc_from):
    check_against_oracles(SHARES, steps, inc_from, engine=engine)


@engine_given(
    change_streams(ENVELOPE, max_steps=4, end_clear=True),
    st.sampled_from(MODES),
    local=settings(SETTINGS, max_examples=5),
    spark=1,
)
def test_aggregate_without_group_by_as_the_result_empty_input_included(engine: Any, steps, inc_from):
    check_against_oracles(ENVELOPE, steps, inc_from, engine=engine)
    steps = [
        Step("run", {"i": [(0,), (1,), (2,), (3,), (5,), (6,)]}, {}),
        Step("join runs", {"i": [(4,)]}, {}),  # 0..6 is one run: 0, 2, 4, 6
        Step("cut at the start", {}, {"i": [(0,)]}),  # 1..6: 1, 3, 5
        Step("empty", {}, {}),
        Step("clear", {}, {"i": [(1,), (2,), (3,), (4,), (5,), (6,)]}),
    ]
    check_against_oracles(ALTERNATE, steps, engine=engine)


# ---- 5. runaway recursion --------------------------------------------------------------------------------
def counter_circuit(mode: str) -> dbspark.Circuit:
    """p(x) :- seed(x).  p(x + 1) :- p(x): never converges on a non-empty seed. A second, unrelated view
    shows that the whole step is rolled back, not just the scope."""
    c = dbspark.Circuit()
    seed = c.input("seed", {"x": "int64"}, kind="set")
    other = c.input("other", {"x": "int64"}, kind="set")
    p = c.recursive(
        lambda s, p: (s + p.map(x=col("x") + 1)).stream_distinct(),
        [seed],
        name="counter",
        max_iterations=50,
        mode=mode,
    )
    c.output("counter", p)
    c.output("other", other.filter(col("x") > 0))
    return c


def snapshot(rt: dbspark.Runtime, outs: list[str]) -> dict:
    return {
        "time": rt.time,
        **{o: rt.view(o).to_dict() for o in outs},
        **{f"last {o}": rt.output(o).to_dict() for o in outs},
    }


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("incremental", [True, False], ids=["incremental", "plain"])
def test_runaway_recursion_raises_and_rolls_back(engine: Any, mode, incremental):
    c = counter_circuit(mode)
    rt = c.incrementalize().run(engine) if incremental else c.run(engine)
    rt.insert("other", [(1,), (2,)])
    rt.step()
    before = snapshot(rt, ["counter", "other"])
    assert before["other"] == {(1,): 1, (2,): 1} and before["counter"] == {}

    rt.insert("seed", [(0,)])
    rt.insert("other", [(3,)])
    with pytest.raises(RecursionLimitError) as ei:
        rt.step()
    msg = str(ei.value)
    assert "'counter'" in msg and "50" in msg, msg
    assert snapshot(rt, ["counter", "other"]) == before  # nothing applied, not even the other view

    rt.insert("other", [(4,)])  # the failed step's pushes are discarded; a valid step works
    out = rt.step()
    assert out["other"].to_dict() == {(4,): 1}
    assert out["counter"].to_dict() == {}
    assert rt.view("other").to_dict() == {(1,): 1, (2,): 1, (4,): 1}
    assert rt.view("counter").to_dict() == {}
    assert rt.time == before["time"] + 1


def stride_circuit(mode: str) -> dbspark.Circuit:
    """p(x, k) :- seed(x, k).  p(x + k, k) :- p(x, k): converges iff every seed has k = 0."""
    c = dbspark.Circuit()
    seed = c.input("seed", {"x": "int64", "k": "int64"}, kind="set")
    p = c.recursive(
        lambda s, p: (s + p.map(x=col("x") + col("k"), k="k")).stream_distinct(),
        [seed],
        name="stride",
        max_iterations=15,
        mode=mode,
    )
    c.output("p", p)
    return c


@pytest.mark.parametrize("mode", MODES)
def test_runaway_rollback_leaves_incremental_scope_state_intact(engine: Any, mode):
    """The incremental scope's nested traces and feedback are rolled back too: later steps (inserts and
    deletes of rows the failed step touched) give exactly the fixpoint of the good contents."""
    c = stride_circuit(mode)
    rt = c.incrementalize().run(engine)
    rt.insert("seed", [(0, 0), (5, 0)])
    assert rt.step()["p"].to_dict() == {(0, 0): 1, (5, 0): 1}
    before = snapshot(rt, ["p"])

    rt.insert("seed", [(1, 1), (7, 0)])
    rt.delete("seed", [(0, 0)])
    with pytest.raises(RecursionLimitError, match="'stride'"):
        rt.step()
    assert snapshot(rt, ["p"]) == before

    rt.insert("seed", [(7, 0), (1, 0)])
    rt.delete("seed", [(0, 0)])
    assert rt.step()["p"].to_dict() == {(0, 0): -1, (7, 0): 1, (1, 0): 1}
    assert rt.view("p").to_dict() == {(5, 0): 1, (7, 0): 1, (1, 0): 1}
    rt.delete("seed", [(5, 0), (7, 0), (1, 0)])
    rt.insert("seed", [(2, 0)])
    assert rt.step()["p"].to_dict() == {(5, 0): -1, (7, 0): -1, (1, 0): -1, (2, 0): 1}
    assert rt.view("p").to_dict() == {(2, 0): 1}
    with pytest.raises(RecursionLimitError, match="'stride'"):  # still guarded after the recovery
        rt.insert("seed", [(9, 2)])
        rt.step()
    assert rt.view("p").to_dict() == {(2, 0): 1}


@pytest.mark.parametrize("strategy", ["dred", "auto", "nested"])
def test_a_first_step_that_runs_away_leaves_the_scope_empty(engine: Any, strategy: str):
    """The first step of all (a fresh run under dred and auto: `operators/fresh.py`) fails at the
    iteration limit; the scope is left empty: the next first step gives the fixpoint of its own seeds
    alone, and later steps maintain it."""
    rt = stride_circuit("naive").incrementalize(recursion=strategy).run(engine)
    rt.insert("seed", [(9, 2), (0, 0)])
    with pytest.raises(RecursionLimitError, match="'stride'"):
        rt.step()
    assert rt.view("p").to_dict() == {}
    rt.insert("seed", [(0, 0), (4, 0)])
    assert rt.step()["p"].to_dict() == {(0, 0): 1, (4, 0): 1}
    rt.delete("seed", [(0, 0)])
    rt.insert("seed", [(3, 0)])
    assert rt.step()["p"].to_dict() == {(0, 0): -1, (3, 0): 1}
    assert rt.view("p").to_dict() == {(3, 0): 1, (4, 0): 1}


@pytest.mark.parametrize("mode", MODES)
def test_runaway_rolls_back_a_scope_that_converged_in_the_same_step(engine: Any, mode):
    """The counter scope reads the closure, so it runs after the closure scope has finished its
    step (folded its iterations into its traces): the failure must undo that too."""
    c = dbspark.Circuit()
    e = c.input("e", EDGE, kind="set")
    seed = c.input("seed", {"x": "int64"}, kind="set")
    tc = c.recursive(tc_body, [e], name="tc", mode=mode)
    cnt = c.recursive(
        lambda s, _tc, p: (s + p.map(x=col("x") + 1)).stream_distinct(),
        [seed, tc],
        schemas=[{"x": "int64"}],
        name="counter",
        max_iterations=30,
        mode=mode,
    )
    c.output("tc", tc)
    c.output("counter", cnt)
    rt = c.incrementalize().run(engine)
    edges = {(0, 1), (1, 2), (2, 3)}
    rt.insert("e", sorted(edges))
    rt.step()
    before = snapshot(rt, ["tc", "counter"])
    rt.insert("e", [(3, 0)])
    rt.delete("e", [(1, 2)])
    rt.insert("seed", [(0,)])
    with pytest.raises(RecursionLimitError, match="'counter'"):
        rt.step()
    assert snapshot(rt, ["tc", "counter"]) == before
    for ins, dels in (
        ([(3, 1)], [(0, 1)]),
        ([(0, 1)], [(3, 1)]),
        ([(3, 0)], [(2, 3)]),
        ([], [(0, 1), (1, 2), (3, 0)]),
    ):
        old = py_tc(edges)
        edges = (edges | set(ins)) - set(dels)
        if ins:
            rt.insert("e", ins)
        if dels:
            rt.delete("e", dels)
        out = rt.step()
        assert rt.view("tc").to_dict() == as_set(py_tc(edges)), edges
        assert out["tc"].to_dict() == add_into(as_set(py_tc(edges)), {r: -1 for r in old}), edges
        assert rt.view("counter").to_dict() == {}


CHAIN = [(i, i + 1) for i in range(7)]


@pytest.mark.parametrize("mode", MODES)
def test_max_iterations_boundary_is_the_same_in_every_mode(engine: Any, mode):
    """The closure of a 7-edge chain takes 7 iterations that produce new facts: a limit of 7 passes and
    a limit of 6 fails, whether the scope is naive, semi-naive or incrementalized from either. Later
    incremental steps that shorten and restore the chain stay within the limit."""
    for limit, ok in ((7, True), (6, False)):
        c = dbspark.Circuit()
        e = c.input("e", EDGE, kind="set")
        c.output("tc", c.recursive(tc_body, [e], name="chain", max_iterations=limit, mode=mode))
        for incremental in (False, True):
            rt = c.incrementalize().run(engine) if incremental else c.run(engine)
            rt.insert("e", CHAIN)
            if not ok:
                with pytest.raises(RecursionLimitError, match="'chain' did not reach a fixpoint within 6"):
                    rt.step()
                assert rt.time == 0 and rt.view("tc").to_dict() == {}
                continue
            assert rt.step()["tc"].to_dict() == as_set(py_tc(set(CHAIN)))
            if incremental:
                for change in ("delete", "insert", "delete"):
                    getattr(rt, change)("e", [(0, 1)])
                    rt.step()
                    edges = set(CHAIN) - ({(0, 1)} if change == "delete" else set())
                    assert rt.view("tc").to_dict() == as_set(py_tc(edges))


# ---- 6. bad bodies get clear errors ----------------------------------------------------------------------
def edge_circuit() -> tuple[dbspark.Circuit, Stream]:
    c = dbspark.Circuit()
    return c, c.input("e", EDGE, kind="set")


def test_body_returning_too_many_relations():
    c, e = edge_circuit()
    with pytest.raises(CircuitError, match=re.escape("scope 'two': the body returned 2 relation(s) for 1")):
        c.recursive(lambda e, p: (e, p), [e], name="two")


def test_body_returning_too_few_relations_for_mutual_recursion():
    c, e = edge_circuit()
    with pytest.raises(CircuitError, match=re.escape("returned 1 relation(s) for 2 recursive relation(s)")):
        c.recursive(lambda e, a, b: a + e, [e], schemas=[EDGE, EDGE], name="mutual")


def test_body_returning_nothing():
    c, e = edge_circuit()
    with pytest.raises(CircuitError, match="'nothing'"):
        c.recursive(lambda e, p: None, [e], name="nothing")


def test_body_returning_an_outer_stream():
    c, e = edge_circuit()
    with pytest.raises(CircuitError, match="not built from the body's arguments"):
        c.recursive(lambda _e, p: e, [e], name="outer")


def test_body_result_with_the_wrong_schema():
    c, e = edge_circuit()
    with pytest.raises(CircuitError, match="feedback expects schema"):
        c.recursive(lambda e, p: e.map("src"), [e], name="narrow")


@pytest.mark.parametrize("mode", MODES)
def test_non_feedback_delay_in_body_is_unsupported_when_incrementalizing(mode):
    c, e = edge_circuit()

    def body(e: Stream, p: Stream) -> Stream:
        return (e + p.delay()).stream_distinct()

    if mode == "seminaive":  # the semi-naive body is incrementalized along the iterations at once
        with pytest.raises(UnsupportedError, match="z\\^-1 inside a recursive scope"):
            c.recursive(body, [e], mode=mode)
        return
    c.output("v", c.recursive(body, [e], mode=mode))
    with pytest.raises(
        UnsupportedError, match="z\\^-1 inside a recursive scope is only allowed as the scope's feedback"
    ):
        c.incrementalize()


def test_bad_scope_options():
    c, e = edge_circuit()
    with pytest.raises(CircuitError, match="mode"):
        c.recursive(tc_body, [e], mode="incremental")
    with pytest.raises(CircuitError, match="max_iterations"):
        c.recursive(tc_body, [e], max_iterations=0)
    with pytest.raises(CircuitError, match="at least one input"):
        c.recursive(tc_body, [])


# ---- 5. delete-and-rederive: the over-delete is the textbook one (`docs/recursion-strategies.md`) ---------
def py_overdelete(old: Rel, dels: Rel) -> Rel:
    """DRed's over-delete for tc(x, y) :- e(x, y); tc(x, y) :- tc(x, z), e(z, y), from its definition:
    the least set of old facts with a derivation (over the old edges and old facts) that uses a deleted
    edge or an over-deleted fact."""
    closure = py_tc(old)
    gone = {f for f in closure if f in dels}
    while True:
        more = {
            (x, y) for (x, z) in closure for (z2, y) in old if z == z2 and ((x, z) in gone or (z2, y) in dels)
        }
        if more <= gone:
            return gone
        gone |= more


def _overdeleted(edges: Rel, dels: Rel) -> tuple[dict, dict]:
    """The facts a dred step deleting `dels` over-deletes, and the step's change."""
    rt = make_circuit(TC, "naive").incrementalize(recursion="dred").run("local")
    rt.insert("e", sorted(edges))
    rt.step()
    rt.delete("e", sorted(dels))
    out = rt.step()["tc"].to_dict()
    (scope,) = [s for s in rt.states.values() if hasattr(s, "removed")]
    return scope.removed[0].to_dict(), out


@settings(SETTINGS, max_examples=30)
@given(st.data())
def test_the_over_delete_is_dreds(data):
    """Without ranks, for random graphs and deletes, the over-delete run removes exactly DRed's
    over-delete set from the closure, and the step's result is the closure of what is left (the
    re-derive put back the rest)."""
    edges = data.draw(st.sets(st.tuples(st.integers(0, 5), st.integers(0, 5)), min_size=1, max_size=14))
    dels = data.draw(st.sets(st.sampled_from(sorted(edges)), min_size=1))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fixpoint, "RANKS", False)
        removed, out = _overdeleted(edges, dels)
    assert set(removed.values()) <= {-1}
    assert set(removed) == py_overdelete(edges, dels)
    assert out == add_into(as_set(py_tc(edges - dels)), {f: -1 for f in py_tc(edges)})


@settings(SETTINGS, max_examples=40)
@given(st.data())
def test_the_ranked_over_delete_keeps_only_facts_still_derived(data):
    """With ranks (`incremental/ranked.py`), the over-delete removes part of DRed's set, and every fact
    it keeps is in the closure of the edges left (what makes the re-derive exact)."""
    edges = data.draw(st.sets(st.tuples(st.integers(0, 6), st.integers(0, 6)), min_size=1, max_size=18))
    dels = data.draw(st.sets(st.sampled_from(sorted(edges)), min_size=1))
    removed, out = _overdeleted(edges, dels)
    assert set(removed.values()) <= {-1}
    assert set(removed) <= py_overdelete(edges, dels)
    assert py_tc(edges) - set(removed) <= py_tc(edges - dels)
    assert out == add_into(as_set(py_tc(edges - dels)), {f: -1 for f in py_tc(edges)})


def test_the_ranked_over_delete_stops_at_a_fact_with_a_shorter_derivation():
    """0 -> 1 -> 2 -> 3 and 0 -> 2: deleting 1 -> 2, DRed over-deletes (0, 2) and (0, 3) too; with ranks
    (0, 2) keeps its derivation from the edge 0 -> 2, which ranks below it, and so does (0, 3)."""
    edges = {(0, 1), (1, 2), (2, 3), (0, 2)}
    assert py_overdelete(edges, {(1, 2)}) == {(0, 2), (0, 3), (1, 2), (1, 3)}
    removed, out = _overdeleted(edges, {(1, 2)})
    assert removed == {(1, 2): -1, (1, 3): -1}
    assert out == {(1, 2): -1, (1, 3): -1}


@pytest.mark.parametrize("write_rows", [2, 3, 5, 9])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_trace_written_during_a_step_keeps_the_delayed_integral(
    engine: Any, strategy: str, write_rows: int
):
    """On Spark a change of at least `write_rows` rows is written to a trace as it arrives (with the
    trace's smaller changes before it), in the middle of a scope's iterations: the integral an iteration
    reads (z^-1 of it, taken one iteration earlier) must not see the changes of the iterations after it.
    (It did: the write made every snapshot of the step name the new files, and delete-and-rederive's
    first step lost most of a 1M-edge graph's reachable nodes.)"""
    rt = run_as(make_circuit(TC, "naive").incrementalize(recursion=strategy.split(",")[0]), engine, strategy)
    if hasattr(rt.kernel, "write_rows"):
        rt.kernel.write_rows = write_rows
    edges = {(i, (i + 1) % 8) for i in range(8)} | {(0, 4), (5, 2)}
    rt.insert("e", sorted(edges))
    rt.step()
    assert rt.view("tc").to_dict() == as_set(py_tc(edges))
    for dels, ins in (([(3, 4)], [(6, 1)]), ([(0, 4), (6, 1)], [(3, 4)])):
        rt.delete("e", dels)
        rt.insert("e", ins)
        edges = (edges - set(dels)) | set(ins)
        rt.step()
        assert rt.view("tc").to_dict() == as_set(py_tc(edges))


def test_auto_backs_off_after_a_stopped_step() -> None:
    """Under "auto", a step stopped (here by a budget of 0, at its second iteration) is recomputed and
    so are the next 1, then 2, then 4 ... steps without a try; a step that delete-and-rederive finishes
    (the budget lifted) ends the backoff. The closure is right after every step."""
    q = make_circuit(TC, "naive").incrementalize(recursion="auto")
    rt = q.run("local")
    (scope,) = [s for s in rt.states.values() if hasattr(s, "recomputed")]
    chain = [(i, i + 1) for i in range(12)]
    edges = set(chain)
    rt.insert("e", chain)
    rt.step()
    assert scope.cost is not None and scope.recomputed == []  # (the first step: a fresh run, timed)
    scope.budget = 0.0
    tries = []
    for n in range(1, 13):
        e = (n % 6 + 3, n % 6 + 4)  # a link of the chain, cut or put back: paths over it change
        (rt.delete if e in edges else rt.insert)("e", [e])
        edges ^= {e}
        if n == 9:
            scope.budget = math.inf
        tried = scope.skip == 0
        rt.step()
        assert rt.view("tc").to_dict() == as_set(py_tc(edges)), f"step {n}"
        tries.append(tried)
    # stopped at 1, then 1 step direct; at 3, then 2; at 6, then 4 (7-10); from 11 on dred (no budget)
    assert tries == [True, False, True, False, False, True, False, False, False, False, True, True]
    assert scope.recomputed == list(range(1, 11)), scope.recomputed
    assert scope.backoff == 1 and scope.skip == 0


def test_auto_does_not_recompute_when_an_over_delete_keeps_nothing() -> None:
    """Deleting every edge: the over-delete keeps no fact, so there is nothing a recompute would save
    (with the thresholds at 0 and any share, `0 >= share * 0` once held)."""
    from dbspark.operators import auto_scope as dred
    from dbspark.testing.engines import pipeline_on

    tc = (
        ".decl edge(x: number, y: number) .input edge\n.decl path(x: number, y: number) .output path\n"
        "path(x, y) :- edge(x, y).\npath(x, y) :- path(x, z), edge(z, y).\n"
    )
    saved = dred.SWITCH_MIN, dred.SWITCH_RATIO, dred.SWITCH_SHARE
    dred.SWITCH_MIN, dred.SWITCH_RATIO, dred.SWITCH_SHARE = 0, 0, 2.0
    p = pipeline_on("local", recursion="auto")
    try:
        p.datalog(tc, closure_operator=False)
        edges = [(0, 0), (0, 1), (0, 2), (0, 3)]
        p.insert("edge", edges)
        p.step()
        (scope,) = [s for s in p.runtime.states.values() if hasattr(s, "switched_at")]
        scope.budget = math.inf
        p.delete("edge", edges)
        assert p.step()["path"].to_dict() == {(0, y): -1 for y in range(4)}
        assert scope.switched_at is None and not scope.recomputed
    finally:
        dred.SWITCH_MIN, dred.SWITCH_RATIO, dred.SWITCH_SHARE = saved
        p.close()


def test_auto_stops_an_over_delete_that_will_pass_its_budget(monkeypatch: Any) -> None:
    """The over-delete's watch under "auto" (`AutoScopeState._watch`): it stops the step once its time
    so far, times 1 + the share of its removals still supported (what re-deriving them will cost),
    passes the deadline; not before, not without removals or a count of them, and not where the budget
    is 0 or none (the deadline alone then stops a step). The rule's own `runaway` still stops it."""
    from dbspark.operators import auto_scope

    q = make_circuit(TC, "naive").incrementalize(recursion="auto")
    rt = q.run("local")
    (scope,) = [s for s in rt.states.values() if hasattr(s, "recomputed")]
    scope.runaway = lambda removed, kept: False
    now = [104.0]
    monkeypatch.setattr(auto_scope.time, "perf_counter", lambda: now[0])
    watch = scope._watch(100.0, 110.0)  # (began at 100 s, to end by 110 s)
    assert not watch(100, 50)  # 104 + 4 * 0.5 = 106
    assert not watch(100, 100)  # 104 + 4 = 108
    now[0] = 106.0
    assert watch(100, 100) and not watch(100, 0) and not watch(100, 60)  # 112; 106; 109.6
    assert not watch(0, 0) and not watch(None, None) and not watch(100, None)
    assert not scope._watch(100.0, None)(100, 100)  # (no budget)
    scope.budget = 0.0
    assert not scope._watch(100.0, 110.0)(100, 100)
    scope.runaway = lambda removed, kept: True
    assert scope._watch(100.0, None)(0, 0)


def test_auto_recomputes_lean_when_the_next_step_recomputes_too(engine: Any, tmp_path: Any) -> None:
    """Under "auto", a recompute whose next step recomputes directly too (a stopped step, or one of a
    backoff's but the last) keeps the results alone, its state empty (`AutoScopeState.lean`), where the
    engine keeps state in this process (local; on Spark the state stays in its files); the step before a
    try of delete-and-rederive recomputes in full. A checkpoint taken between keeps the results, and the
    restored scope goes on right. The closure is right after every step."""
    q = make_circuit(TC, "naive").incrementalize(recursion="auto")
    rt = q.run(engine)
    (scope,) = [s for s in rt.states.values() if hasattr(s, "recomputed")]
    local = not is_spark(engine)
    chain = [(i, i + 1) for i in range(12)]
    edges = set(chain)
    rt.insert("e", chain)
    rt.step()
    scope.budget = 0.0  # (every try stopped: at 1, then 1 direct; at 3, then 2 direct (4, 5); at 6)

    def held() -> bool:  # (the active state holds rows)
        return any(scope.kernel.trace_stats(t)[0] for t in scope.dred.traces())

    def flip(r: Any, edges: set, n: int) -> set:  # (link n cut or put back, a step, the closure right)
        e = (n % 6 + 3, n % 6 + 4)
        (r.delete if e in edges else r.insert)("e", [e])
        edges = edges ^ {e}
        r.step()
        assert r.view("tc").to_dict() == as_set(py_tc(edges)), f"step {n}"
        return edges

    seen = []
    for n in range(1, 7):
        edges = flip(rt, edges, n)
        seen.append((scope.lean is not None, held()))
        if n == 4:
            rt.checkpoint(tmp_path / "ck")
            at4 = set(edges)
    lean, full = (True, False), (False, True)
    assert seen == ([lean, full, lean, lean, full, lean] if local else [full] * 6), seen
    assert scope.recomputed == list(range(1, 7))
    # a step that would try delete-and-rederive on a lean state (its backoff cut short) recomputes in
    # full first (on Spark, never lean, it runs delete-and-rederive); the next one runs it
    scope.skip, scope.budget = 0, math.inf
    for n in (7, 8):
        edges = flip(rt, edges, n)
    assert scope.recomputed == list(range(1, 8 if local else 7)) and scope.lean is None and held()
    r = q.run(engine)
    r.restore(tmp_path / "ck")  # (lean at step 4: a restored scope recomputes, then goes on)
    (again,) = [s for s in r.states.values() if hasattr(s, "recomputed")]
    assert (again.lean is not None) == local
    edges = at4
    for n in range(5, 9):  # (restored)
        edges = flip(r, edges, n)
