"""Recursion through aggregation: Datalog programs monotonic in Ross and Sagiv's sense
(`incremental-aggregation-monotonic-programs.txt` §4), maintained by the nested scope.

- The paper's worked examples: Example 4.1 (cheapest path; the iterations of the lowered body against
  the paper's T_CP^k, and the meaning), Example 1.1 / 5.1 (company control on the dataset of Figure 1).
- Oracles after every step of hypothesis-generated change streams (inserts, deletes, cost changes;
  zero and equal costs; cycles), on both engines: single-source shortest paths and all-pairs cheapest
  paths against scipy's shortest paths, connected components by smallest label against scipy, company
  control against a direct fixpoint of its definition.
- Refusals: programs that are not monotonic, named by rule.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from hypothesis import strategies as st
from scipy.sparse.csgraph import connected_components

import dbspark
from dbspark.frontends.datalog.monotonic import Cost, MonotonicityError
from dbspark.testing.engines import by_engine, engine_given, is_spark, pipeline_on
from dbspark.testing.recursive_aggregates import APSP, CC, COMPANY, CP, D41, SSSP, control, figure_1
from dbspark.testing.weighted_graphs import N, apply, distances, nearest, weighted_changes


def facts(p: dbspark.Pipeline, view: str) -> set[tuple]:
    d = p.view(view).to_dict()
    assert all(w == 1 for w in d.values()), f"{view} is a set, got weights {d}"
    return set(d)


# ---- Example 4.1 -------------------------------------------------------------------------------------
def t_cp(db: set[tuple], s: set[tuple]) -> set[tuple]:
    """The paper's T_CP on a set of facts `s` (tagged by predicate): the database `db` (its facts are
    rules with empty bodies) and one application of r1, r2 and r3 to `s`."""
    edges = {f[1:] for f in s if f[0] == "edge"}
    out = set(db)
    out |= {("cost", x, y, y, c) for x, y, c in edges}
    out |= {
        ("cost", x, z, y, c1 + c2)
        for (_, x, z, c1) in (f for f in s if f[0] == "mincost")
        for (z2, y, c2) in edges
        if z2 == z
    }
    best: dict[tuple, int] = {}
    for f in s:
        if f[0] == "cost":
            key = (f[1], f[3])
            best[key] = min(best.get(key, f[4]), f[4])
    out |= {("mincost", x, y, c) for (x, y), c in best.items()}
    return out


def test_example_4_1_iterations_are_the_papers():
    """T_CP^k(∅) as the paper lists it (T^2 adds the costs of r1; T^3 mincost(a, c, 9); T^4 cost(a, b,
    c, 7) beside mincost(a, c, 9); T^5 mincost(a, c, 7) instead; T^6 = T^5), and the lowered body's
    naive iterations (the scope's child circuit run on the edges) derive the same facts at each one."""
    db = {("edge", *e) for e in D41}
    paper = {
        2: {("cost", "a", "b", "b", 3), ("cost", "b", "c", "c", 4), ("cost", "a", "c", "c", 9)},
        3: {("mincost", "a", "b", 3), ("mincost", "a", "c", 9)},
        4: {("cost", "a", "b", "c", 7), ("mincost", "a", "c", 9)},
        5: {("cost", "a", "b", "c", 7), ("mincost", "a", "c", 7)},
    }
    ts = {0: set()}
    for k in range(1, 7):
        ts[k] = t_cp(db, ts[k - 1])
    for k, listed in paper.items():
        assert listed <= ts[k], (k, listed - ts[k])
    assert ("mincost", "a", "c", 9) not in ts[5] and ts[6] == ts[5]

    from dbspark.engines.local.kernel import LocalKernel
    from dbspark.operators.fixpoint import Fixpoint, Iteration

    p = dbspark.Pipeline(engine="local")
    p.datalog(CP)
    (node,) = [n for n in p.circuit.nodes.values() if isinstance(n.op, Fixpoint)]
    fp: Fixpoint = node.op
    kernel = LocalKernel()
    it = Iteration(fp.inner, kernel)
    outer = [p.circuit.nodes[i].op.name_ for i in node.inputs]
    assert outer == ["edge"]
    schema = p.relation("edge").schema
    imports = {fp.imports[0]: kernel.from_local(dbspark.ZSet.from_rows(D41, schema))}
    for k in range(1, 7):  # iteration n of the body computes T_CP^(n+2) (its first reads T^1 = D)
        out = it.evaluate(imports, k - 1, [])
        got = {
            (pred, *row)
            for r, pred in zip(fp.results, ["cost", "mincost"], strict=True)  # (the component's order)
            for row in kernel.to_local(kernel.consolidate(out[r])).to_dict()
        }
        want = {f for f in ts[min(k + 1, 6)] if f[0] != "edge"}
        assert got == want, (k, got ^ want)
    p.close()


def test_example_4_1_meaning_and_changes(engine: Any):
    """The meaning of CP on D (`T_CP^5`), then after deleting edge(a, b, 3) (the cheapest path a -> c
    goes back to 9), making b -> c dearer, and adding a cycle."""
    p = pipeline_on(engine)
    assert p.datalog(CP) == ["edge", "cost", "mincost"]
    db = {("edge", *e) for e in D41}

    def meaning(db: set[tuple]) -> set[tuple]:
        s: set[tuple] = set()
        while (nxt := t_cp(db, s)) != s:
            s = nxt
        return s

    def check() -> None:
        m = meaning(db)
        assert facts(p, "mincost") == {f[1:] for f in m if f[0] == "mincost"}
        assert facts(p, "cost") == {f[1:] for f in m if f[0] == "cost"}

    try:
        p.insert("edge", D41)
        p.step()
        assert facts(p, "mincost") == {("a", "b", 3), ("b", "c", 4), ("a", "c", 7)}
        check()
        steps = [
            ([], [("a", "b", 3)]),
            ([("a", "b", 3)], []),
            ([("b", "c", 10)], [("b", "c", 4)]),
            ([("c", "a", 1)], []),
            ([("b", "c", 4)], [("b", "c", 10), ("a", "c", 9)]),
        ]
        for ins, dels in steps:
            p.insert("edge", ins)
            p.delete("edge", dels)
            db |= {("edge", *e) for e in ins}
            db -= {("edge", *e) for e in dels}
            p.step()
            check()
    finally:
        p.close()


# ---- Example 1.1 / 5.1 -------------------------------------------------------------------------------


def test_example_1_1_company_control_on_figure_1(engine: Any):
    """Company 0 controls 1, then 2, ... n - 1 one after the other (each through the last), and n at the
    end, when the shares 1/2n of the companies it controls add up (Example 5.1)."""
    n = 12
    p = pipeline_on(engine)
    p.datalog(COMPANY.format(t="float", half=0.5))
    try:
        owns = figure_1(n)
        p.insert("owns", owns)
        p.step()
        want = {(0, i) for i in range(1, n + 1)}
        assert facts(p, "controls") == want == control(set(owns), 0.5)
        cv1 = {(x, y): s for x, y, s in facts(p, "cv1")}
        assert cv1[(0, n)] == pytest.approx((n + 1) / (2 * n))
        p.delete("owns", [(0, 1, 0.6)])  # 0 no longer controls 1, hence none of the chain
        p.step()
        assert facts(p, "controls") == control(set(owns) - {(0, 1, 0.6)}, 0.5) == set()
    finally:
        p.close()


# ---- oracles on generated graphs and change streams ----------------------------------------------------
@engine_given(weighted_changes(), local=25, spark=3)
def test_all_pairs_cheapest_paths_against_scipy(engine: Any, steps):
    p = pipeline_on(engine)
    p.datalog(APSP)
    cur: set = set()
    try:
        for t, (ins, dels) in enumerate(steps):
            cur = apply(p, "edge", cur, ins, dels)
            p.step()
            d = distances(cur)
            # mincost(x, y) is over paths of one edge or more: x -> x needs a cycle through x
            want = set()
            for x, z, _w in cur:
                for y in range(N):
                    if np.isfinite(d[z, y]):
                        want.add((x, y))
            got = facts(p, "mincost")
            assert {(x, y) for x, y, _ in got} == want, (t, cur)
            for x, y, c in got:
                best = min(w + d[z2, y] for (x2, z2, w) in cur if x2 == x)
                assert c == best, (t, x, y, c, best, cur)
    finally:
        p.close()


@engine_given(weighted_changes(), st.sets(st.integers(0, N - 1), min_size=1, max_size=2), local=25, spark=3)
def test_single_source_shortest_paths_against_scipy(engine: Any, steps, sources):
    p = pipeline_on(engine)
    p.datalog(SSSP)
    cur: set = set()
    try:
        p.insert("source", [(s,) for s in sorted(sources)])
        for t, (ins, dels) in enumerate(steps):
            cur = apply(p, "edge", cur, ins, dels)
            p.step()
            want = nearest(cur, sources)
            assert facts(p, "dist") == want, (t, cur, sources)
    finally:
        p.close()


@engine_given(weighted_changes(max_weight=0), local=25, spark=3)
def test_connected_components_by_smallest_label_against_scipy(engine: Any, steps):
    p = pipeline_on(engine)
    p.datalog(CC)
    cur: set = set()
    try:
        for t, (ins, dels) in enumerate(steps):
            cur = apply(p, "edge", cur, [(x, y) for x, y, _ in ins], [(x, y) for x, y, _ in dels])
            p.step()
            nodes = sorted({x for e in cur for x in e})
            m = np.zeros((N, N))
            for x, y in cur:
                m[x, y] = 1
            _, lab = connected_components(m, directed=False)
            want = {(x, min(z for z in nodes if lab[z] == lab[x])) for x in nodes}
            assert facts(p, "cc") == want, (t, cur)
    finally:
        p.close()


@engine_given(weighted_changes(max_weight=60, one_per_pair=True), local=25, spark=3)
def test_company_control_against_its_definition(engine: Any, steps):
    """Shares in percent (integers: the sums are exact), one share per pair of companies (the program
    is cost-consistent then: `cv` has one share per (x, z, y))."""
    p = pipeline_on(engine)
    p.datalog(COMPANY.format(t="number", half=50))
    cur: set = set()
    try:
        for t, (ins, dels) in enumerate(steps):
            cur = apply(p, "owns", cur, ins, dels)
            p.step()
            assert facts(p, "controls") == control(cur, 50), (t, cur)
    finally:
        p.close()


SQL_SP = """
CREATE TABLE edge (x BIGINT, y BIGINT, w BIGINT);
CREATE TABLE source (x BIGINT);
CREATE VIEW dist AS WITH RECURSIVE sp(node, cost) AS (
    SELECT x, 0 FROM source
    UNION
    SELECT e.y, MIN(sp.cost + e.w) FROM sp JOIN edge e ON sp.node = e.x GROUP BY e.y)
SELECT node, cost FROM sp;
"""


@engine_given(weighted_changes(), st.sets(st.integers(0, N - 1), min_size=1, max_size=2), local=25, spark=3)
def test_sql_shortest_paths_against_scipy_and_datalog(engine: Any, steps, sources):
    """The same shortest paths as a recursive CTE whose recursive term takes the MIN over itself: after
    every step equal to scipy's and to the Datalog program's view in the same pipeline."""
    p = pipeline_on(engine)
    p.sql(SQL_SP)
    p.datalog(
        SSSP.replace(".decl edge(x: number, y: number, w: number)\n.input edge\n", "")
        .replace(".decl source(x: number)\n.input source\n", "")
        .replace("dist", "ddist")
    )
    cur: set = set()
    try:
        p.insert("source", [(s,) for s in sorted(sources)])
        for t, (ins, dels) in enumerate(steps):
            cur = apply(p, "edge", cur, ins, dels)
            p.step()
            want = nearest(cur, sources)
            assert facts(p, "dist") == want == facts(p, "ddist"), (t, cur, sources)
    finally:
        p.close()


@pytest.mark.parametrize(
    "step,why",
    [
        (
            "SELECT e.y, MIN(e.w - sp.cost) FROM sp JOIN edge e ON sp.node = e.x GROUP BY e.y",
            "is not increasing",
        ),
        ("SELECT e.y, MIN(sp.cost + e.w) FROM sp JOIN edge e ON sp.cost = e.x GROUP BY e.y", "used outside"),
        (
            "SELECT e.y, MIN(sp.cost + e.w) FROM sp JOIN edge e ON sp.node = e.x WHERE sp.cost > 3 GROUP BY e.y",
            "can turn false",
        ),
        ("SELECT e.y, AVG(sp.cost + e.w) FROM sp JOIN edge e ON sp.node = e.x GROUP BY e.y", "AVG"),
        (
            "SELECT e.y, MIN(sp.cost + e.w) FROM sp JOIN edge e ON sp.node = e.x GROUP BY e.y HAVING 1 = 1",
            "HAVING",
        ),
        (
            "SELECT e.y, MIN(sp.cost), MAX(sp.cost) FROM sp JOIN edge e ON sp.node = e.x GROUP BY e.y",
            "2 aggregates",
        ),
        (
            "SELECT e.y, MIN(sp.cost) + 1 FROM sp JOIN edge e ON sp.node = e.x GROUP BY e.y",
            "the cost column itself",
        ),
    ],
)
def test_sql_refused_unless_monotonic(step, why):
    p = dbspark.Pipeline(engine="local")
    p.sql("CREATE TABLE edge (x BIGINT, y BIGINT, w BIGINT); CREATE TABLE source (x BIGINT);")
    with pytest.raises(dbspark.UnsupportedError, match=re.escape(why) + ".*recursive term of sp"):
        p.sql(
            f"CREATE VIEW v AS WITH RECURSIVE sp(node, cost) AS (SELECT x, 0 FROM source UNION {step}) SELECT * FROM sp"
        )
    with pytest.raises(dbspark.UnsupportedError, match="UNION ALL"):
        p.sql(
            "CREATE VIEW v AS WITH RECURSIVE sp(node, cost) AS (SELECT x, 0 FROM source UNION ALL "
            "SELECT e.y, MIN(sp.cost + e.w) FROM sp JOIN edge e ON sp.node = e.x GROUP BY e.y) SELECT * FROM sp"
        )
    assert p.views == []
    p.close()


# ---- what is inferred, and what is refused -----------------------------------------------------------
def test_cost_arguments_are_inferred():
    from dbspark.frontends.datalog import compile_program
    from dbspark.frontends.datalog.check import check
    from dbspark.frontends.datalog.parser import parse
    from dbspark.frontends.datalog.stratify import stratify

    def costs(text: str) -> dict[str, Cost]:
        compile_program(text)
        c = check(parse(text))
        out: dict[str, Cost] = {}
        for comp in stratify(sorted(c.relations), c.rules):
            out |= comp.costs or {}
        return out

    assert costs(CP) == {"cost": Cost(3, "min"), "mincost": Cost(2, "min")}
    assert costs(SSSP) == {"dist": Cost(1, "min")}
    assert costs(CC) == {"cc": Cost(1, "min"), "cand": Cost(1, "min")}
    assert costs(COMPANY.format(t="float", half=0.5)) == {"cv": Cost(3, "max"), "cv1": Cost(2, "max")}


HEAD = """
.decl e(x: number, y: number, w: number)
.input e
.decl d(x: number, c: number)
.decl q(x: number, c: number)
.decl f(x: number, c: float)
.output d
"""


@pytest.mark.parametrize(
    "rules,why",
    [
        (
            "d(y, c) :- e(_, y, _), c = min k : { d(x, k0), e(x, y, w), k = k0 - w }.\nd(x, 0) :- e(x, _, _).",
            None,  # accepted: k0 - w is increasing in the cost k0
        ),
        (
            "d(y, c) :- e(_, y, _), c = min k : { d(x, k0), e(x, y, w), k = w - k0 }.",
            "(w - k0) is not increasing in the cost k0",
        ),
        ("f(y, c) :- e(_, y, _), c = mean k : { f(y, k) }.", "mean is not monotonic"),
        ("d(y, c) :- e(_, y, _), c = min k : { d(y, k) }.\nq(x, c) :- d(x, c), e(x, c, _).", None),
        (
            "d(y, c) :- e(_, y, _), c = min k : { d(y, k), e(y, k, _) }.",
            "is joined on",
        ),
        (
            "d(y, c) :- e(_, y, _), c = min k : { q(y, k) }.\nq(x, c) :- d(x, c), c > 3.",
            "can turn false as the cost gets better",
        ),
        (
            "d(y, c) :- e(_, y, _), c = min k : { q(y, k) }.\nq(x, c) :- d(x, c), c < 3.\nq(x, 1) :- d(x, 5).",
            "with the constant 5",
        ),
        (
            "d(y, c) :- e(_, y, _), c = max k : { q(y, k) }.\nq(x, c) :- d(x, c).\nq(x, c) :- e(x, _, _), c = min k : { q(x, k) }.",
            "order",
        ),
        (
            "d(y, c) :- e(_, y, _), c = count : { q(y, _) }, c < 2.\nq(x, c) :- d(x, c).",
            "can turn false",
        ),
        (  # q's cost argument may come first ...
            "d(y, c) :- e(y, _, _), c = min k : { d(y, k) }.\nq(c, y) :- d(y, c).\nd(x, c) :- q(c, x).",
            None,
        ),
        (  # ... but only at one argument
            "d(y, c) :- e(y, _, _), c = min k : { q(y, k) }.\nq(x, c) :- d(x, c).\nq(c, x) :- d(x, c).",
            "but the cost argument of q is argument 2",
        ),
    ],
)
def test_refused_unless_monotonic(rules, why):
    from dbspark.frontends.datalog import compile_program

    text = HEAD + rules + "\n"
    if why is None:
        compile_program(text)
        return
    with pytest.raises(MonotonicityError) as ei:
        compile_program(text)
    msg = str(ei.value)
    assert "is not monotonic" in msg and why in msg and "depends on itself through aggregation" in msg, msg
    assert ei.value.line > HEAD.count("\n")  # type: ignore[attr-defined]


def test_dred_is_refused_for_a_recursion_through_aggregates(engine: Any):
    """Delete-and-rederive needs a body without aggregates; "auto" keeps the nested scope there."""
    if is_spark(engine):
        pytest.skip("a front-end and rewrite check: the same on both engines")
    p = pipeline_on(engine, recursion="dred")
    with pytest.raises(Exception, match="datalog_dist"):
        p.datalog(SSSP)
        p.insert("source", [(0,)])
        p.step()
    p.close()


def test_a_negative_value_summed_in_the_recursion_is_refused(engine: Any):
    """A sum in a recursion through aggregation must only grow: a negative share is a DataError naming
    the rule and the value, the step is rolled back, and the pipeline goes on from the last step. The
    same negative value summed outside the recursion is accepted."""
    p = pipeline_on(engine)
    p.datalog(COMPANY.format(t="number", half=50))
    try:
        p.insert("owns", [(0, 1, 60), (1, 2, 30), (0, 2, 30)])
        p.step()
        assert facts(p, "controls") == {(0, 1), (0, 2)}
        p.insert("owns", [(1, 3, -5)])
        with pytest.raises(dbspark.DataError) as ei:
            p.step()
        msg = str(ei.value)
        assert "cv1(X, Y, S) :- groupby(cv(X, Z, Y, N), [X, Y], S = sum<N>)." in msg, msg
        assert "sum of -5, a negative value, in a recursion through aggregation" in msg, msg
        assert facts(p, "controls") == {(0, 1), (0, 2)}
        p.insert("owns", [(1, 3, 55)])  # (the failed step's pushes are gone with it)
        p.step()
        assert facts(p, "controls") == {(0, 1), (0, 2), (0, 3), (1, 3)}
    finally:
        p.close()
    q = pipeline_on(engine)
    q.datalog(
        ".decl e(x: number, y: number)\n.input e\n.decl s(x: number, t: number)\n.output s\n"
        "s(X, T) :- groupby(e(X, Y), [X], T = sum<Y>).\n"
    )
    try:
        q.insert("e", [(1, -3), (1, 2)])
        q.step()
        assert facts(q, "s") == {(1, -1)}
    finally:
        q.close()


def test_sql_a_negative_value_summed_in_the_recursion_is_refused(engine: Any):
    """The SQL form of the refusal above: SUM in a recursive term over its CTE rejects the step whose
    data makes it sum a negative value, naming the CTE, the aggregate and the value."""
    p = pipeline_on(engine)
    try:
        p.sql(  # a bill of materials: a part's weight is its own or the sum of its components'
            "CREATE TABLE parts (p BIGINT, c BIGINT, n BIGINT);\n"
            "CREATE VIEW total AS WITH RECURSIVE t(x, s) AS (SELECT c, n FROM parts UNION "
            "SELECT pa.p, SUM(t.s) FROM t JOIN parts pa ON t.x = pa.c GROUP BY pa.p) SELECT * FROM t;"
        )
        p.insert("parts", [(1, 2, 5), (1, 3, 7), (0, 1, 1)])
        p.step()
        assert facts(p, "total") == {(2, 5), (3, 7), (1, 12), (0, 12)}
        p.insert("parts", [(1, 4, -3)])
        with pytest.raises(dbspark.DataError) as ei:
            p.step()
        msg = str(ei.value)
        assert "recursive CTE t: SUM(t.s) sums -3, a negative value" in msg, msg
        assert facts(p, "total") == {(2, 5), (3, 7), (1, 12), (0, 12)}
    finally:
        p.close()


# ---- runs that do not converge --------------------------------------------------------------------------
def test_a_negative_cycle_is_refused_not_run_to_the_iteration_limit(engine: Any):
    """Under min a cycle of negative cost improves the distances forever. The step is refused within
    about as many iterations as the scope has facts (not the pipeline's 10,000), naming the rule, and
    rolled back: the pipeline goes on from the last step."""
    p = pipeline_on(engine)
    p.datalog(SSSP)
    try:
        p.insert("source", [(0,)])
        p.insert("edge", [(0, 1, 1), (1, 2, 2), (2, 1, 1)])
        p.step()
        assert facts(p, "dist") == {(0, 0), (1, 1), (2, 3)}
        p.delete("edge", [(2, 1, 1)])
        p.insert("edge", [(2, 1, -4)])
        with pytest.raises(dbspark.RecursionLimitError) as ei:
            p.step()
        msg = str(ei.value)
        assert "datalog_dist" in msg and "does not converge" in msg and "negative cost" in msg, msg
        assert "d = min c : { dist(x, d0), edge(x, y, w), c = (d0 + w) }" in msg, msg
        assert facts(p, "dist") == {(0, 0), (1, 1), (2, 3)}
        p.delete("edge", [(2, 1, 1)])  # (the refused step's changes are gone: edit from the last state)
        p.insert("edge", [(2, 1, 0)])
        p.step()
        assert facts(p, "dist") == {(0, 0), (1, 1), (2, 3)}
    finally:
        p.close()


def test_long_chains_converge_without_refusal(engine: Any):
    """A path of n nodes needs n iterations, and n facts hold it: within the bound. After a step, a
    shortcut and its removal (iterations that earlier steps ran) and a longer chain."""
    n = by_engine(engine, 120, 40)
    chain = [(i, i + 1, 1) for i in range(n)]
    p = pipeline_on(engine)
    p.datalog(SSSP)
    try:
        p.insert("source", [(0,)])
        p.insert("edge", chain)
        p.step()
        assert facts(p, "dist") == {(i, i) for i in range(n + 1)}
        p.insert("edge", [(0, n // 2, 0)])
        p.step()
        assert facts(p, "dist") == {(i, i if i < n // 2 else i - n // 2) for i in range(n + 1)}
        p.delete("edge", [(0, n // 2, 0)])
        p.insert("edge", [(i, i + 1, 1) for i in range(n, 2 * n)])
        p.step()
        assert facts(p, "dist") == {(i, i) for i in range(2 * n + 1)}
    finally:
        p.close()


def test_an_aggregate_body_is_joined_not_multiplied():
    """`min c : { dist(x, d0), edge(x, y, w), ... }` with y bound outside: the body is joined from the
    bound y through edge to dist, not dist x (the bound groups) first (at 10,000 nodes a product of
    10^8 rows, which ran the machine out of memory)."""
    from dbspark.operators.fixpoint import Fixpoint

    p = dbspark.Pipeline(engine="local")
    p.datalog(SSSP)
    (node,) = [n for n in p.circuit.nodes.values() if isinstance(n.op, Fixpoint)]
    joins = [line for line in node.op.inner.explain().splitlines() if "join" in line]
    assert joins and not any("[j" in line for line in joins), joins  # (a product joins on a key j<n>)
    p.close()


def test_a_durable_pipeline_resumes_with_its_convergence_bound(tmp_path):
    """The scope's state (its traces, and the facts and iterations its convergence check counts) is
    in the checkpoint: reopened, the pipeline goes on from its last step and still refuses a negative
    cycle early."""
    p = dbspark.Pipeline(tmp_path / "sp", engine="local")
    p.datalog(SSSP)
    p.insert("source", [(0,)])
    p.insert("edge", [(i, i + 1, 1) for i in range(30)])
    p.step()
    p.insert("edge", [(0, 10, 2)])
    p.step()
    p.close()
    q = dbspark.Pipeline(tmp_path / "sp", engine="local")
    q.datalog(SSSP)
    assert q.steps == 2
    assert facts(q, "dist") == {(i, i if i < 10 else i - 8) for i in range(31)}
    q.delete("edge", [(0, 10, 2)])
    q.step()
    assert facts(q, "dist") == {(i, i) for i in range(31)}
    q.insert("edge", [(30, 29, -5)])
    with pytest.raises(dbspark.RecursionLimitError, match="does not converge"):
        q.step()
    q.close()
