"""The transitive closure operator (`operators/closure.py`, `trace/closure.py`).

Oracles: a brute-force closure of the present edges (BFS from every node), DuckDB's `WITH RECURSIVE ...
UNION` for NULL endpoints (SQL join semantics), and the general recursion (`Circuit.recursive`, the
doubly-incremental fixpoint of `dbsp-paper.txt` §6) on the same change streams. After every step the
integrated view equals the oracle's closure and the step's output is exactly the difference (no pair
emitted twice, no weight other than +1 / -1).
"""

from __future__ import annotations

from typing import Any

import duckdb
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dbspark
import dbspark.trace.closure as closure_kernel
from dbspark.algebra.zset import WEIGHT
from dbspark.errors import CircuitError, NegativeStateError, SchemaError, UnsupportedError
from dbspark.trace.closure import ClosureState

EDGE = {"x": "int64", "y": "int64"}
CFG = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def brute(edges: set[tuple]) -> set[tuple]:
    adj: dict[Any, set] = {}
    for u, v in edges:
        adj.setdefault(u, set()).add(v)
    out = set()
    for x in adj:
        seen: set = set()
        todo = [x]
        while todo:
            for b in adj.get(todo.pop(), ()):
                if b not in seen:
                    seen.add(b)
                    todo.append(b)
        out |= {(x, y) for y in seen}
    return out


def present(weights: dict[tuple, int]) -> set[tuple]:
    return {e for e, w in weights.items() if w > 0}


# change streams: per step a list of (edge, weight); weights include duplicates, over-deletes (an edge
# whose integrated weight goes negative is absent, as `distinct` counts it) and large weights
node = st.integers(0, 7)
change = st.lists(
    st.tuples(st.tuples(node, node), st.sampled_from([1, 1, 1, -1, -1, 2, -2, 10**12])), max_size=12
)
streams = st.lists(change, min_size=1, max_size=7)


def push(rt: Any, ch: list, name: str = "e") -> None:
    """Queue one change (an empty change queues nothing: the step sees no rows)."""
    if ch:
        rt.push(name, [e for e, _ in ch], [w for _, w in ch])


def circuit(stream_op: bool) -> dbspark.Circuit:
    c = dbspark.Circuit()
    e = c.input("e", EDGE)
    c.output("tc", e.stream_transitive_closure("x", "y") if stream_op else e.transitive_closure("x", "y"))
    return c


@pytest.mark.parametrize("reach", ["dense", "sparse"])
@settings(CFG, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(steps=streams)
def test_incremental_closure_equals_recomputation(
    steps: list, reach: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both forms of the component reachability: one bit matrix (few components), or searches of the
    condensation (over `DENSE_MAX` components; forced here by a limit of 0)."""
    monkeypatch.setattr(closure_kernel, "DENSE_MAX", 4096 if reach == "dense" else 0)
    rt = circuit(False).run()
    weights: dict[tuple, int] = {}
    before: set[tuple] = set()
    for ch in steps:
        push(rt, ch)
        out = rt.step()["tc"].to_dict()
        for e, w in ch:
            weights[e] = weights.get(e, 0) + w
        after = brute(present(weights))
        assert out == {**{p: 1 for p in after - before}, **{p: -1 for p in before - after}}
        assert rt.view("tc").to_dict() == {p: 1 for p in after}
        before = after


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=streams)
def test_closure_operator_equals_general_recursion(steps: list) -> None:
    """The same stream through the closure operator and through `Circuit.recursive` (semi-naive body,
    incrementalized into the doubly-incremental scope)."""

    def body(edge: dbspark.Stream, path: dbspark.Stream) -> dbspark.Stream:
        step = path.stream_join(edge, left_on="y", right_on="x").map("x", y="y_right")
        return (edge + step).stream_distinct()

    rec = dbspark.Circuit()
    e = rec.input("e", EDGE)
    rec.output("tc", rec.recursive(body, [e.stream_distinct()], schemas=[EDGE]))
    a, b = circuit(True).incrementalize().run(), rec.incrementalize().run()
    for ch in steps:
        for rt in (a, b):
            push(rt, ch)
        assert a.step()["tc"].to_dict() == b.step()["tc"].to_dict()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(
        st.lists(
            st.tuples(
                st.sampled_from(["a", "b", "c", "d", None]),
                st.sampled_from(["a", "b", "c", None]),
                st.sampled_from([1, -1]),
            ),
            max_size=8,
        ),
        min_size=1,
        max_size=5,
    )
)
def test_null_endpoints_follow_sql_joins(steps: list) -> None:
    """NULL never equals NULL: it ends or starts a path but is never its middle (DuckDB's recursive CTE)."""
    c = dbspark.Circuit()
    e = c.input("e", {"s": "string", "d": "string"})
    c.output("tc", e.transitive_closure("s", "d"))
    rt = c.run()
    con = duckdb.connect()
    con.execute("CREATE TABLE e (s VARCHAR, d VARCHAR, w BIGINT)")
    sql = (
        "WITH RECURSIVE p(s, d) AS (SELECT s, d FROM (SELECT s, d, sum(w) AS w FROM e GROUP BY ALL) WHERE w > 0 "
        "UNION SELECT p.s, e.d FROM p JOIN (SELECT s, d FROM e GROUP BY ALL HAVING sum(w) > 0) e ON p.d = e.s) "
        "SELECT s, d FROM p"
    )
    for ch in steps:
        df = pl.DataFrame(ch, schema={"s": pl.String, "d": pl.String, "w": pl.Int64}, orient="row")
        push(rt, [((s, d), w) for s, d, w in ch])
        rt.step()
        if df.height:
            con.execute("INSERT INTO e SELECT * FROM df")
        expect = {r: 1 for r in con.execute(sql).fetchall()}
        assert rt.view("tc").to_dict() == expect


def test_a_rejected_step_leaves_the_index_unchanged() -> None:
    st_ = ClosureState("x", "y", pl.Int64)

    def frame(rows: list[tuple[int, int, int]]) -> pl.DataFrame:
        return pl.DataFrame(rows, schema={"x": pl.Int64, "y": pl.Int64, WEIGHT: pl.Int64}, orient="row")

    st_.step(frame([(1, 2, 1), (2, 3, 1)]), [])
    undo: list = []
    assert st_.step(frame([(3, 1, 1), (9, 1, 1)]), undo).height > 0
    for f in reversed(undo):
        f()
    out = st_.step(frame([(3, 4, 1)]), [])
    assert {tuple(r[:2]) for r in out.iter_rows()} == {(1, 4), (2, 4), (3, 4)}


def test_a_failed_pipeline_step_is_atomic_through_the_closure() -> None:
    p = dbspark.Pipeline(engine="local")
    p.table("e", EDGE)
    with pytest.raises(CircuitError, match="incremental operator 'transitive_closure"):
        p.create_view("tc", p.relation("e").transitive_closure("x", "y"))
    p.create_view("tc", p.relation("e").stream_transitive_closure("x", "y"))
    p.table("k", {"id": "int64", "v": "int64"}, primary_key=["id"])  # evaluated after the closure
    p.create_view("kv", p.relation("k"))
    p.push("e", [(1, 2), (2, 1)])
    p.step()
    p.push("e", [(2, 1)], -1)
    p.push("k", [(7, 0)], -1)  # delete of an absent key: the whole step is rejected
    with pytest.raises(NegativeStateError, match="rejected, nothing applied"):
        p.step()
    assert p.view("tc").to_dict() == {(1, 2): 1, (2, 1): 1, (1, 1): 1, (2, 2): 1}
    p.push("e", [(2, 3)])
    p.step()
    assert set(p.view("tc").to_dict()) == {(1, 2), (2, 1), (1, 1), (2, 2), (1, 3), (2, 3)}


def test_schema_errors_and_scopes() -> None:
    c = dbspark.Circuit()
    e3 = c.input("e3", {"x": "int64", "y": "int64", "z": "int64"})
    with pytest.raises(SchemaError, match="exactly the columns"):
        e3.transitive_closure("x", "y")
    mixed = c.input("m", {"x": "int64", "y": "string"})
    with pytest.raises(SchemaError, match="one type"):
        mixed.stream_transitive_closure("x", "y")
    e = c.input("e", EDGE)
    c.output(
        "bad",
        c.recursive(
            lambda a, p: (a + p.stream_transitive_closure("x", "y")).stream_distinct(), [e], schemas=[EDGE]
        ),
    )
    with pytest.raises(UnsupportedError, match="transitive_closure"):
        c.incrementalize()


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_datalog_closure_components(engine: str, request: pytest.FixtureRequest) -> None:
    """The three ways of writing TC lower to the operator; other shapes keep the recursive scope; both
    give the same relation through deletes that break a cycle."""
    rec = {
        "right": "p(x, y) :- p(x, z), e(z, y).",
        "left": "p(x, y) :- e(x, z), p(z, y).",
        "double": "p(z, y) :- p(z, x), p(x, y).",
    }
    not_tc = {
        "p(x, x) :- e(x, y).": "p(x, y) :- p(x, z), e(z, y).",
        "p(x, y) :- e(y, x).": "p(x, y) :- p(x, z), e(z, y).",
        "p(x, y) :- e(x, y).": "p(x, y) :- p(x, z), f(z, y).",
    }
    head = (
        ".decl e(a: number, b: number)\n.input e\n.decl f(a: number, b: number)\n.input f\n"
        ".decl p(x: number, y: number)\n.output p\n"
    )
    programs = [(head + "p(x, y) :- e(x, y).\n" + r, True) for r in rec.values()]
    programs += [(head + f"{a}\n{b}", False) for a, b in not_tc.items()]
    steps = [([(1, 2), (2, 3), (3, 1), (3, 4)], 1), ([(3, 1)], -1), ([(4, 1)], 1), ([(1, 2), (4, 1)], -1)]
    modes: tuple[bool, ...] = (True, False)
    if engine == "spark":  # the operator on Spark, once; the lowering itself is engine-independent
        programs, modes = programs[:1], (True,)
    for text, is_tc in programs:
        results = []
        for closure_operator in modes:
            if engine == "spark":
                p = dbspark.Pipeline(engine="spark", spark=request.getfixturevalue("spark_session"))
            else:
                p = dbspark.Pipeline(engine="local")
            p.datalog(text, closure_operator=closure_operator)
            uses = "stream_transitive_closure" in p.circuit.explain()
            assert uses == (is_tc and closure_operator), text
            seen = []
            for rows, w in steps:
                p.push("e", rows, w)
                if not seen:
                    p.push("f", [(9, 9)], 1)
                p.step()
                seen.append(p.view("p").to_dict())
            results.append(seen)
            if engine == "spark":
                p.close()
        assert results[0] == results[-1], text
        if is_tc:
            assert set(results[0][0]) == brute({(1, 2), (2, 3), (3, 1), (3, 4)})
            assert set(results[0][1]) == brute({(1, 2), (2, 3), (3, 4)})


def test_deleting_an_edge_breaks_a_cycle(engine: Any) -> None:
    rt = circuit(False).run(engine)
    rt.push("e", [(1, 2), (2, 3), (3, 1)])
    rt.step()
    rt.push("e", [(3, 1)], -1)
    out = rt.step()["tc"].to_dict()
    assert out == {(1, 1): -1, (2, 2): -1, (3, 3): -1, (2, 1): -1, (3, 1): -1, (3, 2): -1}
    assert set(rt.view("tc").to_dict()) == {(1, 2), (1, 3), (2, 3)}


SQL_TC = """CREATE TABLE e (src VARCHAR, dst VARCHAR);
CREATE VIEW tc AS WITH RECURSIVE p(x, y) AS (SELECT src, dst FROM e UNION
    SELECT p.x, e.dst FROM p JOIN e ON p.y = e.src) SELECT * FROM p;
CREATE VIEW tc_left AS WITH RECURSIVE p(x, y) AS (SELECT src, dst FROM e UNION
    SELECT e.src, p.y FROM e, p WHERE e.dst = p.x) SELECT x, count(*) AS n FROM p GROUP BY x;
CREATE VIEW tc_alias AS WITH RECURSIVE p AS (SELECT src, dst FROM e UNION
    SELECT q.src, f.dst FROM p AS q JOIN e AS f ON f.src = q.dst) SELECT * FROM p;
CREATE VIEW not_tc AS WITH RECURSIVE p(x, y) AS (SELECT src, dst FROM e UNION
    SELECT p.x, e.dst FROM p JOIN e ON p.y = e.src WHERE p.x <> 'b') SELECT * FROM p;
"""


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(
        st.tuples(
            st.lists(
                st.tuples(
                    st.sampled_from(["a", "b", "c", "d", None]), st.sampled_from(["a", "b", "c", "d", None])
                ),
                max_size=6,
            ),
            st.integers(0, 3),
        ),
        min_size=1,
        max_size=5,
    )
)
def test_sql_transitive_closure_views_match_duckdb(steps: list) -> None:
    """WITH RECURSIVE in the transitive closure forms becomes the operator (the others a scope); all
    views equal DuckDB's after every step of inserts and deletes, NULL endpoints included."""
    from dbspark.testing.sql_oracle import SqlOracle

    p = dbspark.Pipeline(engine="local")
    p.sql(SQL_TC)
    text = p.circuit.explain()
    # the three closure forms are the closure of e: one operator, shared (each view compiles afresh, so
    # equal plans are one node); the fourth is a recursive scope
    assert text.count("stream_transitive_closure") == 1 and text.count("fixpoint") == 1
    o = SqlOracle(SQL_TC)
    present: list[tuple] = []
    for ins, ndel in steps:
        dels = present[:ndel]
        present = present[ndel:] + ins
        if ins:
            o.insert("e", ins)
            p.insert("e", ins)
        if dels:
            o.delete("e", dels)
            p.delete("e", dels)
        p.step()
        o.check(p)


def test_the_index_survives_a_restart(tmp_path: Any) -> None:
    """A pipeline reopened on its directory resumes the closure's index from the checkpoint."""

    def pipeline() -> dbspark.Pipeline:
        p = dbspark.Pipeline(tmp_path / "state", engine="local")
        p.table("e", EDGE)
        p.create_view("tc", p.relation("e").stream_transitive_closure("x", "y"))
        return p

    p = pipeline()
    p.push("e", [(1, 2), (2, 3)])
    p.step()
    p.close()
    q = pipeline()
    q.push("e", [(3, 1)])
    assert q.step()["tc"].to_dict() == {
        p_: 1 for p_ in brute({(1, 2), (2, 3), (3, 1)}) - {(1, 2), (2, 3), (1, 3)}
    }
    q.push("e", [(1, 2)], -1)
    q.step()
    assert set(q.view("tc").to_dict()) == brute({(2, 3), (3, 1)})
