"""The Datalog front end against the naive bottom-up evaluator (`dbspark.testing.datalog`).

For hypothesis-generated stratified programs (recursion, mutual recursion, negation, aggregates,
groupby literals, arithmetic, facts) and change streams that insert and delete facts, after every
step each output view equals the oracle evaluated from scratch on the current inputs, and the step's
change is the difference of consecutive oracle results (`dbsp-paper.txt` §6: Q^Δ = D ∘ Q ∘ I).
The "spark" parametrizations (marked by tests/conftest.py) run a smaller subset on Spark.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dbspark
from dbspark.columnar import row_set
from dbspark.errors import NegativeStateError, UnsupportedError
from dbspark.incremental import fixpoint
from dbspark.testing.datalog import (
    DOMAIN,
    GenProgram,
    as_set,
    change_streams,
    evaluate,
    programs,
    run_against_oracle,
)
from dbspark.testing.engines import engine_given, pipeline_on
from dbspark.trace.spine import Spine

ENGINES = ("local", "spark")
LOCAL = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SPARK = settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def make_pipeline(engine: str, request: pytest.FixtureRequest) -> dbspark.Pipeline:
    if engine == "spark":
        return dbspark.Pipeline(engine="spark", spark=request.getfixturevalue("spark_session"))
    return dbspark.Pipeline(engine="local")


def check_program(p: dbspark.Pipeline, prog: GenProgram, steps: list) -> None:
    declared = p.datalog(prog.text)
    assert declared == [*prog.inputs, *prog.outputs]
    run_against_oracle(p, prog.text, prog.outputs, list(prog.inputs), steps)


def program_and_changes(max_relations: int = 4, max_steps: int = 4) -> st.SearchStrategy:
    return programs(max_relations).flatmap(
        lambda g: change_streams(g.inputs, max_steps).map(lambda s: (g, s))
    )


# on Spark: smaller programs, shorter streams, few examples
@engine_given(
    program_and_changes(),
    local=LOCAL,
    spark=SPARK,
    spark_strategies=(program_and_changes(max_relations=3, max_steps=3),),
)
def test_random_stratified_programs(engine, ps):
    check_program(pipeline_on(engine), *ps)


@engine_given(
    program_and_changes(),
    local=settings(LOCAL, max_examples=40),
    spark=SPARK,
    spark_strategies=(program_and_changes(max_relations=3, max_steps=3),),
)
def test_recursion_strategies_agree_step_by_step(engine, ps):
    """The same program and changes through a pipeline per recursion strategy (each scope nested; each
    monotone one by delete-and-rederive, the others nested, and again recomputing each over-delete at
    its first iteration and each other step at its second; every scope by delete-and-rederive when all qualify, with its steps from empty state
    run fresh and again the usual way): after every step, the same change of every view, equal to the
    oracle's difference; and the two delete-and-rederive pipelines hold the same integrals. (A fresh
    step sums a recursive distinct's input whenever it passes a few rows: its compaction, too.)"""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(row_set, "COMPACT", 3)
        check_strategies(engine, *ps)


def check_strategies(engine: str, prog: GenProgram, steps: list) -> None:
    pipes = {}
    for strategy in ("nested", "auto", "auto, early", "dred", "dred, usual", "dred, unranked"):
        p = pipeline_on(engine, recursion=strategy.split(",")[0])
        p.datalog(prog.text)
        try:
            with pytest.MonkeyPatch.context() as mp:  # (DRed's own over-delete: `incremental/ranked.py`)
                mp.setattr(fixpoint, "RANKS", strategy != "dred, unranked")
                p.start()
        except UnsupportedError as e:  # a scope that is not monotone refuses "dred", naming itself
            assert strategy.startswith("dred") and "delete-and-rederive" in str(e), e
            p.close()
            continue
        for state in p.runtime.states.values():  # "auto, early": each scope recomputes its over-deletes
            if hasattr(state, "runaway"):  # at their first iteration, its other steps at their second
                state.budget = 0.0 if strategy == "auto, early" else math.inf  # ("auto": by the rule only)
                if strategy == "auto, early":
                    state.runaway = lambda removed, kept: True
        if strategy == "dred, usual":  # no step runs as `FreshRun`
            for st in p.runtime.states.values():
                if hasattr(st, "fresh_runs"):
                    st.fresh_runs = False
        pipes[strategy] = p
    state: dict[str, set[tuple]] = {k: set() for k in prog.inputs}
    prev = {o: set() for o in prog.outputs}
    try:
        for t, (ins, dels) in enumerate(steps):
            for k, rows in ins.items():
                state[k] |= set(rows)
            for k, rows in dels.items():
                state[k] -= set(rows)
            want = evaluate(prog.text, state)
            expected = {
                o: {r: 1 for r in want[o] - prev[o]} | {r: -1 for r in prev[o] - want[o]}
                for o in prog.outputs
            }
            for strategy, p in pipes.items():
                for k, rows in ins.items():
                    p.insert(k, rows)
                for k, rows in dels.items():
                    p.delete(k, rows)
                changes = p.step()
                for o in prog.outputs:
                    assert changes[o].to_dict() == expected[o], (
                        f"step {t}, strategy {strategy}: change of {o}\n{prog.text}\ninputs {state}"
                    )
            if "dred" in pipes:
                assert integrals(pipes["dred"]) == integrals(pipes["dred, usual"]), f"step {t}\n{prog.text}"
            prev = {o: want[o] for o in prog.outputs}
    finally:
        for p in pipes.values():
            p.close()


FRESH_PROGRAMS = {  # each through a scope kept by delete-and-rederive (TC not lowered to the closure)
    "tc": ".decl e(x: number, y: number)\n.input e\n.decl p(x: number, y: number)\n.output p\n"
    "p(x, y) :- e(x, y).\np(x, y) :- p(x, z), e(z, y).",
    "sg": ".decl e(x: number, y: number)\n.input e\n.decl p(x: number, y: number)\n.output p\n"
    "p(x, y) :- e(a, x), e(a, y), x != y.\np(x, y) :- e(a, x), p(a, b), e(b, y).",
    "nonlinear": ".decl e(x: number, y: number)\n.input e\n.decl p(x: number, y: number)\n.output p\n"
    "p(x, y) :- e(x, y).\np(x, y) :- p(x, z), p(z, y).",
    "negated import": ".decl e(x: number, y: number)\n.input e\n.decl b(x: number)\n.input b\n"
    ".decl p(x: number)\n.output p\np(x) :- e(0, x), !b(x).\np(y) :- p(x), e(x, y), !b(y).",
}
EDGES = st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), max_size=30)
CHANGES = st.lists(st.tuples(EDGES, EDGES, st.lists(st.integers(0, 7), max_size=3)), max_size=3)


@pytest.mark.parametrize("name", sorted(FRESH_PROGRAMS))
@engine_given(EDGES, CHANGES, local=settings(LOCAL, max_examples=40), spark=SPARK)
def test_a_fresh_step_leaves_the_usual_state(engine, name, edges, changes):
    """A program's first step from empty state run fresh and the usual way (its recursive distinct's
    input summed every few rows, to check that too): the same change of the view, and every integral
    of its scope the same Z-set, after the load and after each later step (inserts, deletes, and the
    negated relation's changes, which the usual way runs; a step that empties the state runs fresh
    again)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(row_set, "COMPACT", 3)
        pipes = [pipeline_on(engine, recursion="dred") for _ in range(2)]
        try:
            for p in pipes:
                p.datalog(FRESH_PROGRAMS[name], closure_operator=False)
                p.start()
            for s in pipes[1].runtime.states.values():
                if hasattr(s, "fresh_runs"):
                    s.fresh_runs = False
            cur: set[tuple[int, int]] = set()
            gone: set[int] = set()
            # the load, the changes, every edge deleted (the state emptied), the load again (fresh again)
            steps = [(edges, [], [0, 3]), *changes, ([], None, []), (edges, [], [])]
            for t, (ins, dels, blocked) in enumerate(steps):
                dels = sorted(cur if dels is None else {e for e in dels if e in cur})
                ins = sorted(set(ins) - cur - set(dels))
                block = sorted({(x,) for x in blocked if x not in gone})
                cur, gone = (cur | set(ins)) - set(dels), gone | {x for (x,) in block}
                outs = []
                for p in pipes:
                    p.insert("e", ins)
                    p.delete("e", dels)
                    if name == "negated import":
                        p.insert("b", block)
                    outs.append(p.step()["p"].to_dict())
                assert outs[0] == outs[1], f"step {t}"
                assert integrals(pipes[0]) == integrals(pipes[1]), f"step {t}"
        finally:
            for p in pipes:
                p.close()


REACH = """
.decl edge(x: number, y: number)
.input edge
.decl root(x: number)
.input root
.decl reach(x: number)
.output reach
reach(x) :- root(x).
reach(y) :- reach(x), edge(x, y).
"""


def _closure(program: str, edges: set[tuple[int, int]], roots: set[int]) -> set[tuple]:
    """reach (from `roots`) or path, in Python."""
    succ: dict[int, set[int]] = {}
    for x, y in edges:
        succ.setdefault(x, set()).add(y)

    def reached(front: set[int]) -> set[int]:
        seen = set(front)
        while front:
            front = {y for x in front for y in succ.get(x, ()) if y not in seen}
            seen |= front
        return seen

    if program == "reach":
        return {(x,) for x in reached(set(roots))}
    return {(x, y) for x in succ for y in reached(set(succ[x]))}


@pytest.mark.parametrize("program", ["reach", "path"])
@pytest.mark.parametrize("seed", [1, 2])
def test_dred_over_many_batches_of_a_random_graph(engine, program, seed):
    """Many batches of inserts and deletes on a random graph with cycles, the view against Python after
    each: facts removed and put back at new ranks meet later over-deletes (`incremental/ranked.py`; a
    fact's rank was once read from a stale row of its trace, which lost a node at the 3rd batch of the
    benchmark's reachability but passed the small graphs of the oracle tests)."""
    import random

    rng = random.Random(seed)
    nodes, n_edges, batches, change = (600, 1200, 8, 20) if engine == "local" else (50, 100, 3, 8)
    if program == "path":
        nodes, n_edges = nodes // 3, n_edges // 3
    edges = set()
    while len(edges) < n_edges:
        edges.add((rng.randrange(nodes), rng.randrange(nodes)))
    roots = {0, 1, 2}
    p = pipeline_on(engine, recursion="dred")
    try:
        p.datalog(REACH if program == "reach" else TC, closure_operator=False)
        p.insert("edge", sorted(edges))
        if program == "reach":
            p.insert("root", [(r,) for r in sorted(roots)])
        p.step()
        for b in range(batches):
            dels = set(rng.sample(sorted(edges), change))
            ins = set()
            while len(ins) < change:
                e = (rng.randrange(nodes), rng.randrange(nodes))
                if e not in edges:
                    ins.add(e)
            edges = (edges - dels) | ins
            p.delete("edge", sorted(dels))
            p.insert("edge", sorted(ins))
            p.step()
            got = set(p.view(program).to_dict())
            assert got == _closure(program, edges, roots), f"batch {b}"
    finally:
        p.close()


def integrals(p: dbspark.Pipeline) -> list[dict]:
    """The Z-set of every integral of every scope maintained by delete-and-rederive, in order, and each
    ranked distinct's facts with their ranks; each batch of the local engine's traces checked
    consolidated (a row once: a fresh run marks the sums of new facts so, and indexes them unsummed)."""
    k, out = p.runtime.kernel, []
    for s in p.runtime.states.values():
        if hasattr(s, "fresh_runs"):
            traces = [s.it.states[n] for n in s.integrals] + [
                d.facts for d in s.distincts if hasattr(d, "facts")
            ]
            out += [k.to_local(k.as_zset(t.snapshot())).to_dict() for t in traces]
            for t in (t for t in traces if isinstance(t, Spine)):  # (the local engine's)
                for b in t.batches:
                    data = [c for c in b.df.columns if c not in t.weight_cols]
                    assert not b.df.select(data).is_duplicated().any(), f"a batch of {data} not consolidated"
    return out


# ---- hand-written programs, each against the oracle --------------------------------------------------
TC = """
.decl edge(x: number, y: number)
.input edge
.decl path(x: number, y: number)
.output path
path(x, y) :- edge(x, y).
path(x, y) :- path(x, z), edge(z, y).
"""

SG = """
.decl par(p: number, c: number)
.input par
.decl sg(x: number, y: number)
.output sg
sg(x, y) :- par(p, x), par(p, y), x != y.
sg(x, y) :- par(a, x), sg(a, b), par(b, y).
"""

UNREACH = """
.decl edge(x: number, y: number)
.input edge
.decl root(x: number)
.input root
.decl node(x: number)
node(x) :- edge(x, _).
node(y) :- edge(_, y).
.decl reach(x: number)
.output reach
reach(x) :- root(x).
reach(y) :- reach(x), edge(x, y).
.decl unreach(x: number)
.output unreach
unreach(x) :- node(x), !reach(x).
"""

AGGS = """
.decl edge(x: number, y: number)
.input edge
.decl w(x: number, v: float, s: symbol)
.input w
.decl node(x: number)
node(x) :- edge(x, _) ; edge(_, x).
.decl deg(x: number, n: number)
.output deg
deg(x, n) :- node(x), n = count : { edge(x, _) }.
.decl total(x: number, s: number)
.output total
total(x, s) :- node(x), s = sum y : { edge(x, y) }.
.decl lo(x: number, m: number)
.output lo
lo(x, m) :- node(x), m = min y : edge(x, y).
.decl hi(x: number, m: number)
.output hi
hi(x, m) :- groupby(edge(x, y), [x], m = max<y>).
.decl avgw(s: symbol, m: float)
.output avgw
avgw(s, m) :- groupby(w(_, v, s), [s], m = mean<v>).
.decl nedges(n: number)
.output nedges
nedges(n) :- n = count : { edge(_, _) }.
.decl wsum(x: number, t: float)
.output wsum
wsum(x, t) :- node(x), t = sum v * 2.0 : { w(x, v, _) }.
.decl even_deg(x: number)
.output even_deg
even_deg(x) :- deg(x, n), n % 2 = 0, n > 0.
"""

MUTUAL = """
.decl edge(x: number, y: number)
.input edge
.decl even(x: number, y: number)
.decl odd(x: number, y: number)
.output even, odd
odd(x, y) :- edge(x, y).
odd(x, y) :- edge(x, z), even(z, y).
even(x, y) :- edge(x, z), odd(z, y).
.decl only_odd(x: number, y: number)
.output only_odd
only_odd(x, y) :- odd(x, y), !even(x, y).
"""

ARITH = """
.decl edge(x: number, y: number)
.input edge
.decl dist(x: number, d: number)
.output dist
dist(0, 0).
dist(y, d + 1) :- dist(x, d), edge(x, y), d < 5.
.decl shortest(x: number, d: number)
.output shortest
shortest(x, d) :- groupby(dist(x, d0), [x], d = min<d0>).
.decl pair(x: number, y: number, s: number)
.output pair
pair(x, y, s) :- edge(x, y), s = x * 10 - y, s >= 0, !edge(y, x).
"""

GRAPH_CHANGES = [
    ({"edge": [(0, 1), (1, 2), (2, 0), (3, 4), (2, 3)]}, {}),
    ({"edge": [(4, 4)]}, {"edge": [(2, 0)]}),
    ({}, {}),
    ({"edge": [(2, 0), (4, 1)]}, {"edge": [(0, 1)]}),
    ({}, {"edge": [(1, 2), (2, 0), (3, 4), (2, 3), (4, 4), (4, 1)]}),
    ({"edge": [(5, 5)]}, {}),
]


GRAPH_PROGRAMS = [
    ("tc", TC, ["edge"], ["path"]),
    ("unreach", UNREACH, ["edge", "root"], ["reach", "unreach"]),
    ("mutual", MUTUAL, ["edge"], ["even", "odd", "only_odd"]),
    ("arith", ARITH, ["edge"], ["dist", "shortest", "pair"]),
]
# the Spark subset (CI time) leaves out "arith": arithmetic and groupby literals reach Spark through the
# random programs
GRAPH_CASES = [(e, *g) for e in ENGINES for g in GRAPH_PROGRAMS if e == "local" or g[0] != "arith"]


@pytest.mark.parametrize(
    "engine,name,text,inputs,outputs", GRAPH_CASES, ids=[f"{c[1]}-{c[0]}" for c in GRAPH_CASES]
)
def test_graph_programs(request, engine, name, text, inputs, outputs):
    p = make_pipeline(engine, request)
    p.datalog(text)
    steps = [(dict(i), dict(d)) for i, d in GRAPH_CHANGES]
    if "root" in inputs:
        steps[0][0]["root"] = [(0,)]
        steps[3][0]["root"] = [(4,)]
        steps[4][1]["root"] = [(0,)]
    run_against_oracle(p, text, outputs, inputs, steps)


@pytest.mark.parametrize("engine", ENGINES)
def test_aggregates(request, engine):
    p = make_pipeline(engine, request)
    outs = ["deg", "total", "lo", "hi", "avgw", "nedges", "wsum", "even_deg"]
    text = AGGS
    if engine == "spark":  # each aggregate view costs several Spark jobs per step: a representative subset
        outs = ["total", "hi", "avgw", "nedges"]
        keep = {"edge", "w", "node", *outs}
        text = "\n".join(ln for ln in AGGS.splitlines() if not ln or ln.split("(")[0].split()[-1] in keep)
    p.datalog(text)
    steps = [
        ({"edge": [(0, 1), (0, 2), (1, 2), (3, 3)], "w": [(0, 1.5, "a"), (1, 2.0, "a"), (3, 0.5, "b")]}, {}),
        ({"edge": [(2, 0)], "w": [(0, 2.5, "b")]}, {"edge": [(0, 2)]}),
        ({}, {"w": [(0, 1.5, "a"), (1, 2.0, "a")]}),
        ({}, {"edge": [(0, 1), (1, 2), (3, 3), (2, 0)], "w": [(3, 0.5, "b"), (0, 2.5, "b")]}),
    ]
    if engine == "spark":
        steps = steps[:3]
    run_against_oracle(p, text, outs, ["edge", "w"], steps)


@settings(LOCAL, max_examples=10)
@given(change_streams({"par": 2}, max_steps=5, domain=5))
def test_same_generation(request, steps):
    p = make_pipeline("local", request)
    p.datalog(SG)
    run_against_oracle(p, SG, ["sg"], ["par"], steps)


def test_oracle_pins_transitive_closure():
    """The oracle itself, on a hand-checked case."""
    got = evaluate(TC, {"edge": {(0, 1), (1, 2), (2, 0), (3, 4)}})["path"]
    assert got == {(a, b) for a in range(3) for b in range(3)} | {(3, 4)}
    got = evaluate(AGGS, {"edge": {(0, 1), (0, 2)}, "w": set()})
    assert got["deg"] == {(0, 2), (1, 0), (2, 0)} and got["total"] == {(0, 3), (1, 0), (2, 0)}
    assert got["lo"] == {(0, 1)} and got["nedges"] == {(2,)}


# ---- input semantics ----------------------------------------------------------------------------------
@pytest.mark.parametrize("engine", ENGINES)
def test_input_relations_are_sets(request, engine):
    """Inserting a fact that is there, a change holding a row twice (whether none of its rows is held
    yet, a first load or rows never seen, checked by the change's weights alone, or some are) and
    deleting a fact that is not there (alone, or beside new rows) are errors naming the row; nothing of
    a refused step is kept."""
    p = make_pipeline(engine, request)
    p.datalog(TC)

    def refused(message: str) -> None:
        with pytest.raises(NegativeStateError, match=message):
            p.step()

    twice = r"'edge' is a set: row \({}\) would occur 2 times"
    absent = r"delete of row \({}\) that is not there"
    p.insert("edge", [(0, 1), (1, 2), (0, 1)])
    refused(twice.format("0, 1"))
    p.insert("edge", [(0, 1)])
    p.step()
    p.insert("edge", [(0, 1)])
    refused(twice.format("0, 1"))
    p.delete("edge", [(5, 6)])
    refused(absent.format("5, 6"))
    p.insert("edge", [(1, 2)])
    p.step()
    assert as_set(p.view("path")) == {(0, 1), (1, 2), (0, 2)}
    p.insert("edge", [(2, 3), (3, 4), (3, 4)])
    refused(twice.format("3, 4"))
    p.insert("edge", [(2, 3), (5, 6)])
    p.delete("edge", [(7, 8)])
    refused(absent.format("7, 8"))
    p.insert("edge", [(2, 3)])
    p.step()
    assert as_set(p.view("path")) == {(0, 1), (1, 2), (2, 3), (0, 2), (1, 3), (0, 3)}


def test_sql_and_datalog_share_relations(request):
    """A Datalog rule reads a table declared before (positionally, as a set); a view reads Datalog output."""
    from dbspark import col

    p = make_pipeline("local", request)
    t = p.table("links", {"src": "int64", "dst": "int64", "label": "str"}, kind="bag")
    p.create_view("heavy", t.filter(col("src") > 0))
    p.datalog("""
        .decl reach(x: number, y: number)
        .output reach
        reach(x, y) :- links(x, y, _).
        reach(x, y) :- reach(x, z), heavy(z, y, "h").
    """)
    p.create_view("reach_pairs", p.relation("reach").stream_aggregate(n="count"))
    rows = [(0, 1, "h"), (1, 2, "h"), (1, 2, "h"), (2, 3, "x")]
    p.insert("links", rows)
    p.step()
    ext = {"links": {r for r in rows}, "heavy": {r for r in rows if r[0] > 0}}
    prog = """
        .decl links(a: number, b: number, c: symbol)
        .decl heavy(a: number, b: number, c: symbol)
        .decl reach(x: number, y: number)
        reach(x, y) :- links(x, y, _).
        reach(x, y) :- reach(x, z), heavy(z, y, "h").
    """
    assert as_set(p.view("reach")) == evaluate(prog, {}, ext)["reach"]
    assert p.view("reach_pairs").to_dict() == {(len(evaluate(prog, {}, ext)["reach"]),): 1}
    p.delete("links", [(1, 2, "h")])
    p.step()
    assert as_set(p.view("reach")) == evaluate(prog, {}, ext)["reach"]  # still one (1, 2, "h") left
    p.close()


def test_program_facts_and_fact_files(tmp_path, request):
    (tmp_path / "edge.facts").write_text("0\t1\n1\t2\n1\t2\n")
    (tmp_path / "more.csv").write_text("x,y\n2,3\n")
    text = """
        .decl edge(x: number, y: number)
        .input edge
        .decl more(x: number, y: number)
        .input more(IO=file, filename="more.csv", headers=true)
        .decl seed(x: number)
        seed(7). seed(8). seed(7).
        .decl path(x: number, y: number)
        .output path
        edge(9, 9).
        path(x, y) :- edge(x, y) ; more(x, y).
        path(x, y) :- path(x, z), path(z, y).
        path(x, x) :- seed(x).
    """
    from dbspark.frontends.datalog import load

    p = make_pipeline("local", request)
    assert load(p, text, base_dir=tmp_path) == ["edge", "more", "path"]
    p.step()
    edges = {(0, 1), (1, 2), (9, 9)}
    want = evaluate(text, {"edge": edges, "more": {(2, 3)}})["path"]
    assert as_set(p.view("path")) == want and (0, 3) in want and (7, 7) in want
    p.delete("edge", [(1, 2)])  # a fact loaded from the file can be deleted like any other
    p.step()
    assert as_set(p.view("path")) == evaluate(text, {"edge": edges - {(1, 2)}, "more": {(2, 3)}})["path"]
    p.close()


def test_domain_is_small():
    assert DOMAIN == 4


CORNERS = """
.decl e(x: number, y: number)
.input e
.decl n(x: number)
.input n
n(y) :- n(x), e(x, y).
.decl out(x: number)
.output out
out(x) :- n(x).
.decl flag(x: number)
.output flag
flag(1) :- !e(1, 2).
flag(x) :- n(x), !e(_, _), x > 0.
.decl k(x: number, s: symbol)
.output k
k(x, "three") :- x = 3.
k(x, "n") :- n(x), e(1, _).
k(x, s) :- e(x, x), s = "loop".
.decl same(x: number)
.output same
same(x) :- e(x, y), e(y, x), x <= y.
same(x) :- e(x, x).
.decl cnt(c: number)
.output cnt
cnt(c) :- c = count : { n(_) }, c >= 0.
"""


@pytest.mark.parametrize("engine", ENGINES)
def test_corner_cases(request, engine):
    """Input relations extended by rules (recursively), bodies without a positive atom (the one-row unit),
    negation of atoms without variables, constant atoms, symbols, repeated variables, a global count."""
    p = make_pipeline(engine, request)
    p.datalog(CORNERS)
    steps = [
        ({"n": [(1,)]}, {}),
        ({"e": [(1, 2), (2, 3), (3, 3)]}, {}),
        ({"e": [(3, 1)]}, {"e": [(1, 2)]}),
        ({"n": [(5,)]}, {"e": [(2, 3), (3, 3), (3, 1)], "n": [(1,)]}),
    ]
    run_against_oracle(p, CORNERS, ["out", "flag", "k", "same", "cnt"], ["e", "n"], steps)


@pytest.mark.parametrize("engine", ENGINES)
def test_an_input_relation_that_is_also_an_output(request, engine, tmp_path):
    """`.input n` and `.output n`: the view named like the table holds the table's facts and those the
    rules derive into it; inserts and deletes still go to the table; a durable pipeline resumes it."""
    text = CORNERS + ".output e\n.output n\n"
    opts = {"spark": request.getfixturevalue("spark_session")} if engine == "spark" else {}
    p = dbspark.Pipeline(tmp_path / "state", engine=engine, **opts)
    assert p.datalog(text) == ["e", "n", "out", "flag", "k", "same", "cnt"]
    assert p.tables[:2] == ["e", "n"] and p.views[:2] == ["e", "n"]
    steps = [
        ({"n": [(1,)], "e": [(1, 2), (2, 3)]}, {}),
        ({"e": [(3, 1)]}, {"e": [(1, 2)]}),
    ]
    run_against_oracle(p, text, ["e", "n", "out"], ["e", "n"], steps)
    p.close()
    q = dbspark.Pipeline(tmp_path / "state", engine=engine, **opts)
    q.datalog(text)
    q.delete("n", [(1,)])
    q.step()
    want = evaluate(text, {"e": {(2, 3), (3, 1)}, "n": set()})
    assert as_set(q.view("n")) == want["n"] == set() and as_set(q.view("e")) == want["e"]
    q.close()


def test_durable_pipeline_resumes_without_reloading_facts(tmp_path):
    """Facts and fact files are the first step's inserts: a pipeline reopened on its directory resumes
    after its last step and does not insert them again."""
    (tmp_path / "edge.facts").write_text("0\t1\n1\t2\n")
    prog = tmp_path / "tc.dl"
    prog.write_text(TC + "edge(5, 6).\n")
    from dbspark.frontends.datalog import load

    p = dbspark.Pipeline(tmp_path / "state", engine="local")
    load(p, prog.read_text(), base_dir=tmp_path)
    p.step()
    p.insert("edge", [(2, 3)])
    p.step()
    p.close()
    q = dbspark.Pipeline(tmp_path / "state", engine="local")
    load(q, prog.read_text(), base_dir=tmp_path)
    assert q.steps == 2
    q.delete("edge", [(0, 1)])
    q.step()
    assert as_set(q.view("path")) == evaluate(TC, {"edge": {(1, 2), (2, 3), (5, 6)}})["path"]
    q.close()


# A recursive rule whose body joins the recursive relation and an import on no shared variable: under
# delete-and-rederive the join's arrangement of r (keyed by a projection of its columns) takes several
# deferred inserts in one batching (CI once found r(3, 3) kept after every r0 fact was deleted).
CROSS = """
.decl r0(c0: number)
.input r0
.decl r(c0: number, c1: number)
.output r
r(3, 3) :- r(3, _), r0(_).
r(3, 0).
"""


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("strategy", ["nested", "dred", "auto"])
def test_recursion_through_a_join_on_no_variable(request, engine, strategy):
    """The rule's facts come and go with r0's under every strategy, on both engines."""
    if engine == "spark":
        p = dbspark.Pipeline(
            engine="spark", spark=request.getfixturevalue("spark_session"), recursion=strategy
        )
    else:
        p = dbspark.Pipeline(engine="local", recursion=strategy)
    p.datalog(CROSS)
    steps = [
        ({"r0": [(1,), (2,)]}, {}),
        ({}, {"r0": [(1,), (2,)]}),
        ({"r0": [(2,)]}, {}),
        ({"r0": [(1,)]}, {"r0": [(2,)]}),
        ({}, {"r0": [(1,)]}),
    ]
    run_against_oracle(p, CROSS, ["r"], ["r0"], steps)


@pytest.mark.parametrize("recursion", ["dred", "auto"])
def test_a_recursive_body_without_a_join_continues_from_its_facts(engine, recursion: str) -> None:
    """A body without a join keeps no integral, only its ranked distinct's facts: a step after the
    first that only inserts continues from them, not as a fresh run from empty state (which wrote each
    fact again beside its old row: the insert's change held every fact, and a later delete lost facts
    still derived; found by the ADT test under some string hash seeds, whose lowering had no join)."""
    from dbspark.testing.datalog import run_against_oracle

    prog = (
        ".decl s(x: number) .input s\n.decl r(x: number) .output r\n"
        "r(x) :- s(x).\nr(y) :- r(x), x > 0, y = x - 1.\n"
    )
    steps = [
        ({"s": [(3,)]}, {}),
        ({"s": [(5,)]}, {}),
        ({}, {"s": [(3,)]}),
        ({}, {"s": [(5,)]}),
        ({"s": [(2,)]}, {}),
    ]
    p = pipeline_on(engine, recursion=recursion)
    p.datalog(prog)
    run_against_oracle(p, prog, ["r"], ["s"], steps)
