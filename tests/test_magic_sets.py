"""Magic Sets (`frontends/datalog/magic.py`, `incremental-aggregation-monotonic-programs.txt` §6): a
program with bound calls, rewritten, gives its outputs the same facts as the program evaluated whole,
after every step of generated change streams, and derives fewer facts where the calls are selective."""

from __future__ import annotations

import random
from typing import Any

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
    relation whole; a relation recursive through an aggregate is not rewritten (cost-restricted sips
    are not built)."""
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
q(y) :- d(1, y).
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
