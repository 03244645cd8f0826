"""Magic Sets (`frontends/datalog/magic.py`, `incremental-aggregation-monotonic-programs.txt` §6): a
program with bound calls, rewritten, gives its outputs the same facts as the program evaluated whole,
after every step of generated change streams, and derives fewer facts where the calls are selective."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from hypothesis import strategies as st

import dbspark
from dbspark.frontends.datalog.check import check
from dbspark.frontends.datalog.magic import magic_sets
from dbspark.frontends.datalog.parser import parse
from dbspark.frontends.datalog.stratify import stratify
from dbspark.testing.datalog import (
    DOMAIN,
    REACH_FROM_1,
    GenProgram,
    change_streams,
    evaluate,
    program_of,
    programs,
    run_against_oracle,
)
from dbspark.testing.engines import engine_given, pipeline_on
from dbspark.testing.recursive_aggregates import APSP, CP, D41, SSSP
from dbspark.testing.weighted_graphs import N, apply, distances, nearest, weighted_changes

REACH = REACH_FROM_1


def rewritten(text: str) -> Any:
    c = check(parse(text))
    return magic_sets(c, stratify(sorted(c.relations), c.rules))


def test_reachability_from_a_constant_is_rewritten():
    """path(1, y) gives path the adornment bf, its magic relation the seed 1; path itself, which no
    output reads any more, is dropped, and reach1 reads path__bf."""
    c = rewritten(REACH)
    assert set(c.relations) == {"edge", "reach1", "path__bf", "path__bf__magic"}
    assert c.facts == {"path__bf__magic": [(1,)]}
    shown = sorted(str(r) for r in c.rules)
    assert "reach1(y) :- path__bf(1, y)." in shown
    assert "path__bf(x, y) :- path__bf__magic(x), edge(x, y)." in shown
    assert "path__bf(x, y) :- path__bf__magic(x), path__bf(x, z), edge(z, y)." in shown


def test_facts_derived_from_a_chain():
    """Reachability from node 1 on a chain 0 -> 1 -> ... -> 49 and a second chain 100 -> ... -> 149:
    the whole closure has 2 x 1225 pairs, the rewritten program 48 (and 1 magic fact)."""
    edges = [(i, i + 1) for i in range(49)] + [(100 + i, 101 + i) for i in range(49)]
    full = evaluate(REACH, {"edge": edges})
    magic = evaluate(program_of(rewritten(REACH)), {"edge": edges})
    assert full["reach1"] == magic["reach1"] == {(i,) for i in range(2, 50)}
    derived = lambda rels: sum(len(v) for k, v in rels.items() if k != "edge")  # noqa: E731
    assert derived(full) == 2 * 1225 + 48
    assert derived(magic) == 48 + 48 + 1


@engine_given(change_streams({"edge": 2}, max_steps=5, domain=6), local=20, spark=2)
def test_reachability_maintained_with_and_without_magic_sets(engine: Any, steps):
    pipes = {m: pipeline_on(engine) for m in (True, False)}
    for m, p in pipes.items():
        p.datalog(REACH, magic_sets=m)
    state: set[tuple] = set()
    try:
        for t, (ins, dels) in enumerate(steps):
            state = (state | set(ins.get("edge", []))) - set(dels.get("edge", []))
            for p in pipes.values():
                p.insert("edge", ins.get("edge", []))
                p.delete("edge", dels.get("edge", []))
            ch = {m: p.step()["reach1"].to_dict() for m, p in pipes.items()}
            want = evaluate(REACH, {"edge": state})["reach1"]
            assert ch[True] == ch[False], t
            for p in pipes.values():
                assert set(p.view("reach1").to_dict()) == want, t
    finally:
        for p in pipes.values():
            p.close()


@st.composite
def queried_programs(draw: st.DrawFn) -> tuple[GenProgram, str]:
    """A random stratified program whose relations are internal, and queries with constants on them:
    q_i(Y) :- r_j(c, Y), or r_j(Y, c), or q_i(c) :- r_j(c)."""
    g = draw(programs())
    lines = [ln for ln in g.text.splitlines() if not ln.startswith(".output")]
    arity = {}
    for ln in lines:
        if ln.startswith(".decl r"):
            name = ln.split()[1].split("(")[0]
            arity[name] = ln.count(":")
    queries = []
    for i in range(draw(st.integers(1, 3))):
        r = draw(st.sampled_from(sorted(arity)))
        c = draw(st.integers(0, DOMAIN - 1))
        if arity[r] == 1:
            queries += [f".decl q{i}(c0: number)", f".output q{i}", f"q{i}({c}) :- {r}({c})."]
        else:
            atom = draw(st.sampled_from([f"{r}({c}, Y)", f"{r}(Y, {c})"]))
            queries += [f".decl q{i}(c0: number)", f".output q{i}", f"q{i}(Y) :- {atom}."]
    text = "\n".join(lines + queries) + "\n"
    return GenProgram(text, dict(g.inputs), [f"q{i}" for i in range(len(queries) // 3)]), text


@engine_given(
    queried_programs().flatmap(lambda gt: change_streams(gt[0].inputs, 4).map(lambda s: (gt[0], s))),
    local=40,
    spark=2,
)
def test_random_programs_with_bound_queries(engine: Any, ps):
    """After every step, each query's view equals the oracle on the program as written, and its change
    the difference of the oracle's results."""
    prog, steps = ps
    p = pipeline_on(engine)
    p.datalog(prog.text)
    run_against_oracle(p, prog.text, prog.outputs, list(prog.inputs), steps)


def test_calls_that_are_not_rewritten():
    """A call under negation, with no bound argument, or of a relation with facts of its own reads the
    relation whole, and so does a call bound at a cost argument only (cost-restricted sips)."""
    text = """
.decl e(x: number, y: number)
.input e
.decl p(x: number, y: number)
p(x, y) :- e(x, y).
p(x, y) :- p(x, z), e(z, y).
.decl f(x: number)
f(3).
f(y) :- f(x), e(x, y).
.decl d(x: number, c: number)
d(x, 0) :- e(x, _).
d(y, c) :- e(_, y, ), c = min k : { d(x, k0), e(x, y), k = k0 + 1 }.
.decl q(x: number)
.output q
q(y) :- e(y, _), !p(1, y).
q(y) :- p(x, y).
q(y) :- f(2), e(y, _).
q(y) :- d(y, 1).
""".replace("e(_, y, )", "e(_, y)")
    c = rewritten(text)
    assert not any("__" in n for n in c.relations), sorted(c.relations)
    # an output's own recursive call binds z sideways, but the output is needed at every z: not
    # rewritten (it would compute its relation twice, and lose the closure operator)
    whole = REACH.replace(".output reach1", ".output path, reach1")
    assert set(rewritten(whole).relations) == {"edge", "path", "reach1"}
    left = REACH.replace("path(x, z), edge(z, y)", "edge(x, z), path(z, y)").replace(
        ".output reach1", ".output path"
    )
    assert rewritten(left).rules == check(parse(left)).rules


def test_the_rewrite_can_be_switched_off():
    p = dbspark.Pipeline(engine="local")
    p.datalog(REACH, magic_sets=False)
    assert p.tables == ["edge"]
    p.close()
    p = dbspark.Pipeline(engine="local")
    p.datalog(REACH)
    assert p.tables == ["edge", "_facts_path__bf__magic"]
    p.close()


@pytest.mark.parametrize("seed", range(3))
def test_bound_calls_deep_in_a_program(seed):
    """A bound call inside a recursive rule (`s(y) :- s(x), p(x, y).` with s seeded by a constant):
    the magic relation of p is fed by s, recursively."""
    rng = random.Random(seed)
    edges = {(rng.randrange(8), rng.randrange(8)) for _ in range(14)}
    text = """
.decl e(x: number, y: number)
.input e
.decl p(x: number, y: number)
p(x, y) :- e(x, y).
p(x, y) :- e(x, z), p(z, y).
.decl s(x: number)
.output s
s(0).
s(y) :- s(x), p(x, y), y != 5.
"""
    c = rewritten(text)
    assert "p__bf" in c.relations and "p" not in c.relations
    full = evaluate(text, {"e": edges})
    magic = evaluate(program_of(c), {"e": edges})
    assert full["s"] == magic["s"]


def test_a_durable_pipeline_resumes_the_rewritten_program(tmp_path):
    """The magic seed is a fact of the first step: reopened, the pipeline does not insert it again."""
    p = dbspark.Pipeline(tmp_path / "m", engine="local")
    p.datalog(REACH)
    p.insert("edge", [(1, 2), (2, 3)])
    p.step()
    p.close()
    q = dbspark.Pipeline(tmp_path / "m", engine="local")
    q.datalog(REACH)
    q.insert("edge", [(3, 4)])
    q.delete("edge", [(1, 2)])
    q.step()
    assert set(q.view("reach1").to_dict()) == set()
    q.insert("edge", [(1, 3)])
    q.step()
    assert set(q.view("reach1").to_dict()) == {(3,), (4,)}
    q.close()


# ---- cost-restricted sips (§6, Theorem 6.1): programs recursive through aggregates -------------------
def bound_query(text: str, decl: str, rule: str) -> str:
    """`text` with its outputs replaced by the query q: `decl` its columns, `rule` its rule."""
    lines = [ln for ln in text.splitlines() if not ln.startswith(".output")]
    return "\n".join([*lines, f".decl q({decl})", ".output q", rule]) + "\n"


CP_FROM_A = bound_query(CP, "y: symbol, c: number", 'q(y, c) :- mincost("a", y, c).')


def test_cheapest_paths_from_a_constant_with_cost_restricted_sips():
    """Example 4.1 asked from node a: the groupby's atom is called with its group variable X bound, the
    cost arguments never (the magic relations hold the source only), and the rewritten program is
    monotonic (it is not evaluated whole) and gives the cheapest paths from a."""
    c = rewritten(CP_FROM_A)
    assert set(c.relations) == {
        "edge",
        "q",
        "mincost__bff",
        "mincost__bff__magic",
        "cost__bfff",
        "cost__bfff__magic",
    }
    assert c.facts == {"mincost__bff__magic": [("a",)]}
    assert c.relations["mincost__bff__magic"].columns == ["x"]
    shown = {str(r) for r in c.rules}
    assert 'q(y, c) :- mincost__bff("a", y, c).' in shown
    assert (
        "mincost__bff(X, Y, C) :- mincost__bff__magic(X), groupby(cost__bfff(X, Z, Y, C1), [X, Y], C = min<C1>)."
        in shown
    )
    assert (
        "cost__bfff(X, Z, Y, C) :- cost__bfff__magic(X), mincost__bff(X, Z, C1), edge(Z, Y, C2), C = (C1 + C2)."
        in shown
    )
    p = dbspark.Pipeline(engine="local")
    p.datalog(CP_FROM_A)
    p.insert("edge", D41 + [("c", "a", 1), ("d", "a", 1)])
    p.step()
    assert set(p.view("q").to_dict()) == {("a", 8), ("b", 3), ("c", 7)}
    p.close()


QUERIES = {
    # cheapest paths of one edge or more from node 1, and to node 1; shortest paths to node 2 from the sources
    "from": (
        bound_query(APSP, "y: number, c: number", "q(y, c) :- mincost(1, y, c)."),
        "mincost__bff__magic",
    ),
    "to": (bound_query(APSP, "x: number, c: number", "q(x, c) :- mincost(x, 1, c)."), "mincost__fbf__magic"),
    "sssp": (bound_query(SSSP, "d: number", "q(d) :- dist(2, d)."), "dist__bf__magic"),
}


def expected(query: str, edges: set[tuple[int, int, int]], sources: set[int]) -> set[tuple]:
    """q by scipy: the cheapest path of one edge or more (from 1, to 1), the distance of 2 from the
    nearest source."""
    d = distances(edges)
    if query == "sssp":
        return {(c,) for y, c in nearest(edges, sources) if y == 2}
    out = set()
    for a in range(N):
        x, y = (1, a) if query == "from" else (a, 1)
        best = min((w + d[z, y] for (x2, z, w) in edges if x2 == x), default=np.inf)
        if np.isfinite(best):
            out.add((a, int(best)))
    return out


@engine_given(
    st.sampled_from(sorted(QUERIES)),
    weighted_changes(),
    st.sets(st.integers(0, N - 1), min_size=1, max_size=2),
    local=30,
    spark=3,
)
def test_bound_queries_on_recursive_aggregates_against_scipy(engine: Any, query, steps, sources):
    """Cheapest paths from a node, to a node, and a node's distance from the sources, with Magic Sets
    (the program is rewritten: not evaluated whole) and without, after every step of inserts, deletes
    and cost changes: both equal scipy's shortest paths, and their changes agree."""
    text, magic = QUERIES[query]
    assert magic in rewritten(text).relations
    pipes = {m: pipeline_on(engine) for m in (True, False)}
    cur: set = set()
    try:
        for p in pipes.values():
            p.datalog(text, magic_sets=p is pipes[True])
            if query == "sssp":
                p.insert("source", [(s,) for s in sorted(sources)])
        assert f"_facts_{magic}" in pipes[True].tables  # (its seed: the program ran rewritten)
        for t, (ins, dels) in enumerate(steps):
            for p in pipes.values():
                nxt = apply(p, "edge", cur, ins, dels)
            cur = nxt
            ch = {m: p.step()["q"].to_dict() for m, p in pipes.items()}
            assert ch[True] == ch[False], (t, cur)
            want = expected(query, cur, sources)
            for m, p in pipes.items():
                assert set(p.view("q").to_dict()) == want, (m, t, cur, sources)
    finally:
        for p in pipes.values():
            p.close()
