"""The leapfrog join (`columnar/trie.py`, `columnar/leapfrog.py`) and the multiway join operator
(`operators/multijoin.py`), against binary joins and DuckDB.

- The columnar join of hypothesis-generated Z-set frames (duplicates, NULLs, negative and large weights,
  string and integer keys, payload columns) equals a chain of Polars binary joins, in every order of the
  join variables; the trie's batched `children` / `seek` equal a scan of the sorted rows.
- Triangle, 4-cycle and 4-clique views of random edge streams with deletes, maintained by the
  incremental multiway join on both engines: after every step the view equals DuckDB's query over the
  current edges and the step's change equals the binary-join plan's.
- Datalog: random programs through every join plan agree with the naive evaluator after every step.
"""

from __future__ import annotations

from typing import Any

import duckdb
import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dbspark
from dbspark.algebra.zset import WEIGHT
from dbspark.columnar.leapfrog import join_variables, leapfrog_join
from dbspark.columnar.trie import Trie
from dbspark.errors import SchemaError, UnknownNameError
from dbspark.operators import multijoin
from dbspark.operators.multijoin import connected, is_cyclic
from dbspark.testing.datalog import change_streams, evaluate, programs, run_against_oracle
from dbspark.testing.engines import engine_given, pipeline_on

CFG = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])

QUERIES: dict[str, list[tuple[str, ...]]] = {
    "triangle": [("a", "b"), ("b", "c"), ("a", "c")],
    "4-cycle": [("a", "b"), ("b", "c"), ("c", "d"), ("d", "a")],
    "4-clique": [("a", "b"), ("b", "c"), ("c", "d"), ("d", "a"), ("a", "c"), ("b", "d")],
    "payload": [("a", "b", "p"), ("b", "c"), ("c", "a", "q")],
    "ternary": [("a", "b", "c"), ("a", "b"), ("c",)],
    "chain": [("a", "b"), ("b", "c"), ("c", "d")],
}


@st.composite
def frames(draw: Any, query: str, strings: bool) -> list[pl.DataFrame]:
    out = []
    for atom in QUERIES[query]:
        n = draw(st.integers(0, 14))
        key = st.one_of(st.none(), st.integers(0, 3)) if draw(st.booleans()) else st.integers(0, 3)
        cols: dict[str, list] = {}
        for v in atom:
            vals = draw(st.lists(key, min_size=n, max_size=n))
            cols[v] = [None if x is None else (f"s{x}" if strings else x) for x in vals]
        big = 10 ** (17 // len(QUERIES[query]))  # a product over every atom stays within 64 bits
        w = draw(st.lists(st.sampled_from([1, 1, 2, -1, -3, big]), min_size=n, max_size=n))
        t = pl.Utf8 if strings else pl.Int64
        out.append(pl.DataFrame({**cols, WEIGHT: w}, schema={**{v: t for v in atom}, WEIGHT: pl.Int64}))
    return out


def chained(fs: list[pl.DataFrame]) -> pl.DataFrame:
    """The natural join by Polars binary joins (a NULL matches nothing), weights multiplied."""
    j = fs[0]
    for f in fs[1:]:
        on = [c for c in f.columns if c in j.columns and c != WEIGHT]
        if on:
            j = j.join(f, on=on, suffix="_r")
        else:
            j = j.join(f, how="cross", suffix="_r")
        j = j.with_columns(pl.col(WEIGHT) * pl.col(f"{WEIGHT}_r")).drop(f"{WEIGHT}_r")
    return j


def consolidated(df: pl.DataFrame, cols: list[str]) -> dict[tuple, int]:
    out: dict[tuple, int] = {}
    for *row, w in df.select([*cols, WEIGHT]).iter_rows():
        out[tuple(row)] = out.get(tuple(row), 0) + w
    return {k: v for k, v in out.items() if v}


@pytest.mark.parametrize("query", sorted(QUERIES))
@settings(CFG)
@given(data=st.data())
def test_leapfrog_join_equals_binary_joins_in_every_order(query: str, data: st.DataObject) -> None:
    fs = data.draw(frames(query, data.draw(st.booleans())))
    cols = [c for c in dict.fromkeys(c for f in fs for c in f.columns) if c != WEIGHT]
    want = consolidated(chained(fs), cols)
    joins = join_variables([f.columns[:-1] for f in fs])
    for order in [None, *data.draw(st.lists(st.permutations(joins), min_size=1, max_size=2))]:
        got = leapfrog_join(fs, order)
        assert got.columns == [*cols, WEIGHT]
        assert consolidated(got, cols) == want, order


@settings(CFG)
@given(
    rows=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4), st.integers(0, 4)), max_size=30),
    probes=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4)), min_size=1, max_size=10),
)
def test_trie_children_and_seek_equal_a_scan(rows: list[tuple[int, int, int]], probes: list) -> None:
    codes = [np.array([r[d] for r in rows], dtype=np.int64) for d in range(3)]
    trie = Trie.build(codes, [5, 5, 5], len(rows))
    distinct = sorted(set(rows))
    # level 0 from the root: the distinct first values; level 1 under each: the distinct seconds
    lo, hi = trie.children(0, np.zeros(1, dtype=np.int64))
    assert list(trie.codes[0][lo[0] : hi[0]]) == sorted({r[0] for r in rows})
    for x, y in probes:
        found, node = trie.seek(0, np.zeros(1, dtype=np.int64), np.array([x]))
        assert bool(found[0]) == any(r[0] == x for r in rows)
        if not found[0]:
            continue
        lo, hi = trie.children(1, node)
        assert list(trie.codes[1][lo[0] : hi[0]]) == sorted({r[1] for r in rows if r[0] == x})
        found2, node2 = trie.seek(1, node, np.array([y]))
        assert bool(found2[0]) == any(r[:2] == (x, y) for r in rows)
        if found2[0]:
            lo, hi = trie.children(2, node2)
            zs = list(trie.codes[2][lo[0] : hi[0]])
            assert zs == sorted({r[2] for r in distinct if r[:2] == (x, y)})
            for z_node in range(lo[0], hi[0]):
                a, b = trie.leaves(np.array([z_node]))
                got = sorted(rows[i] for i in trie.rows[a[0] : b[0]])
                assert got == sorted(r for r in rows if r == (x, y, int(trie.codes[2][z_node])))


def test_cyclic_and_connected() -> None:
    assert is_cyclic(QUERIES["triangle"]) and is_cyclic(QUERIES["4-cycle"]) and is_cyclic(QUERIES["4-clique"])
    assert not is_cyclic(QUERIES["chain"]) and not is_cyclic([("a", "b"), ("a", "c"), ("a", "d")])
    # a triangle an atom covers is acyclic (α-acyclicity): the big atom absorbs the others
    assert not is_cyclic([("a", "b", "c"), ("a", "b"), ("b", "c"), ("a", "c")])
    assert connected(QUERIES["4-cycle"]) and not connected([("a", "b"), ("c", "d")])


# ---- the operator, incremental, on both engines --------------------------------------------------
EDGE = {"x": pl.Int64, "y": pl.Int64}
SQL = {
    "triangle": "SELECT r.x a, r.y b, s.y c FROM e r, e s, e t WHERE r.y = s.x AND t.x = r.x AND t.y = s.y",
    "4-cycle": "SELECT r.x a, r.y b, s.y c, t.y d FROM e r, e s, e t, e u "
    "WHERE r.y = s.x AND s.y = t.x AND t.y = u.x AND u.y = r.x",
    "4-clique": "SELECT r.x a, r.y b, s.y c, t.y d FROM e r, e s, e t, e u, e v, e w "
    "WHERE r.y = s.x AND s.y = t.x AND t.y = u.x AND u.y = r.x AND v.x = r.x AND v.y = s.y "
    "AND w.x = r.y AND w.y = t.y",
}


def view_circuit(query: str, multiway: bool, maintenance: str = "delta") -> dbspark.Circuit:
    c = dbspark.Circuit()
    e = c.input("e", EDGE)
    atoms = [e.map(**{u: "x", v: "y"}) for u, v in QUERIES[query]]
    if multiway:
        c.output("v", atoms[0].stream_multijoin(*atoms[1:], maintenance=maintenance))
        return c
    cur = atoms[0]
    for a in atoms[1:]:
        on = [x for x in a.columns if x in cur.columns]
        cur = cur.stream_join(a, on=on).map(*cur.columns, *[x for x in a.columns if x not in cur.columns])
    c.output("v", cur)
    return c


def edge_steps(edges: int, steps: int) -> st.SearchStrategy:
    edge = st.tuples(st.integers(0, 5), st.integers(0, 5), st.sampled_from([1, 1, 2, -1, -2]))
    return st.lists(st.lists(edge, max_size=edges), min_size=1, max_size=steps)


@pytest.mark.parametrize("maintenance", ["delta", "indexed"])
@pytest.mark.parametrize("query", ["triangle", "4-cycle", "4-clique"])
@engine_given(edge_steps(14, 5), local=25, spark=2, spark_strategies=(edge_steps(10, 3),))
def test_multiway_views_equal_duckdb_and_the_binary_plan(
    engine: Any, query: str, maintenance: str, steps: list
) -> None:
    """A cyclic view by the leapfrog join, its change by the delta join's terms (on Spark, a change left
    on the cluster by Spark's joins) or by the delta join over indexed tries, equals the binary plan and
    DuckDB after every step."""
    a = view_circuit(query, True, maintenance).incrementalize().run(engine)
    b = view_circuit(query, False).incrementalize().run("local")
    spark = getattr(engine, "spark", None)
    chained_terms: list[int] = []
    real = multijoin._chained
    multijoin._chained = lambda *args: chained_terms.append(1) or real(*args)
    clustered = False
    try:
        count: dict[tuple[int, int], int] = {}
        for t, ch in enumerate(steps):
            if spark is not None:  # a change held in the driver (leapfrog) or on the cluster (Spark's joins)
                spark.conf.set("spark.dbspark.placement", "cluster" if t % 2 == 0 else "driver")
            rows, ws = [], []
            for x, y, w in ch:
                if w < 0:  # a delete of what is there (a bag's weights stay non-negative)
                    w = -min(-w, count.get((x, y), 0))
                if w:
                    count[(x, y)] = count.get((x, y), 0) + w
                    rows.append((x, y))
                    ws.append(w)
            for rt in (a, b):
                if rows:
                    rt.push("e", rows, ws)
            clustered |= spark is not None and t % 2 == 0 and bool(rows)
            da, db = a.step()["v"].to_dict(), b.step()["v"].to_dict()
            assert da == db
            bag = [e for e, k in count.items() for _ in range(k)]
            con = duckdb.connect()
            con.execute("CREATE TABLE e (x BIGINT, y BIGINT)")
            if bag:
                con.executemany("INSERT INTO e VALUES (?, ?)", bag)
            want: dict[tuple, int] = {}
            for row in con.execute(SQL[query]).fetchall():
                want[row] = want.get(row, 0) + 1
            assert a.view("v").to_dict() == want
        # on Spark, a change left on the cluster: Spark's joins (the indexed join's state is in the driver)
        assert bool(chained_terms) == (clustered and maintenance == "delta")
    finally:
        multijoin._chained = real
        if spark is not None:
            spark.conf.unset("spark.dbspark.placement")


def test_multiway_join_errors_name_the_column() -> None:
    c = dbspark.Circuit()
    r = c.input("r", {"a": pl.Int64, "b": pl.Int64})
    s = c.input("s", {"b": pl.Utf8, "c": pl.Int64})
    t = c.input("t", {"c": pl.Int64, "d": pl.Int64})
    u = c.input("u", {"e": pl.Int64})
    with pytest.raises(SchemaError, match="column b is Int64 in one input and String in input 1"):
        r.stream_multijoin(s, t)
    with pytest.raises(SchemaError, match="connected"):
        r.stream_multijoin(t.map(b="c", d="d"), u)


# ---- Datalog: the join plans ---------------------------------------------------------------------
CYCLIC = """
.decl e(x: number, y: number)
.input e
.decl label(x: number, s: symbol)
.input label
.decl tri(a: number, b: number, c: number)
.output tri
tri(a, b, c) :- e(a, b), e(b, c), e(c, a), a < b.
.decl sq(a: number, c: number)
.output sq
sq(a, c) :- e(a, b), e(b, c), e(c, d), e(d, a), !e(a, c).
.decl named(s: symbol, t: symbol)
.output named
named(s, t) :- label(a, s), e(a, b), label(b, t), e(b, c), e(c, a), a != c.
.decl clique(n: number)
.output clique
clique(count : { e(a, b), e(b, c), e(c, d), e(a, c), e(b, d), e(a, d) }) :- e(_, _).
"""


def labelled_steps(edge: st.SearchStrategy, labels: int) -> st.SearchStrategy:
    """Up to 4 steps, each: edges to insert, up to `labels` (node, tag) rows, the share of rows to delete."""
    label = st.tuples(st.integers(0, 4), st.sampled_from(["p", "q"]))
    step = st.tuples(st.lists(edge, max_size=10), st.lists(label, max_size=labels), st.floats(0, 1))
    return st.lists(step, min_size=1, max_size=4)


@pytest.mark.parametrize("joins", ["auto", "leapfrog", "binary", "indexed"])
@engine_given(
    labelled_steps(st.tuples(st.integers(0, 4), st.integers(0, 4)), 3),
    local=15,
    spark=2,
)
def test_datalog_join_plans_equal_the_evaluator(engine: Any, joins: str, steps: list) -> None:
    p = pipeline_on(engine)
    p.datalog(CYCLIC, joins=joins)
    plan = p.circuit.explain()
    assert ("stream_multijoin" in plan) == (joins != "binary"), plan
    assert ("indexed_multijoin" in p.start().circuit.explain()) == (joins == "indexed")
    state: dict[str, set] = {"e": set(), "label": set()}
    try:
        for edges, labels, drop in steps:
            gone = {r for r in sorted(state["e"]) if hash(r) % 97 < drop * 97}
            new_e, new_l = set(edges) - state["e"], set(labels) - state["label"]
            if gone:
                p.delete("e", sorted(gone))
            if new_e - gone:
                p.insert("e", sorted(new_e - gone))
            if new_l:
                p.insert("label", sorted(new_l))
            state["e"] = (state["e"] - gone) | (new_e - gone)
            state["label"] |= new_l
            p.step()
            want = evaluate(CYCLIC, state)
            for v in ("tri", "sq", "named", "clique"):
                assert set(p.view(v).to_dict()) == set(want[v]), v
    finally:
        p.close()


@engine_given(
    programs(4).flatmap(lambda g: change_streams(g.inputs, 4).map(lambda s: (g, s))),
    local=40,
    spark=2,
    spark_strategies=(programs(3).flatmap(lambda g: change_streams(g.inputs, 3).map(lambda s: (g, s))),),
)
def test_random_programs_with_every_body_joined_by_leapfrog(engine: Any, ps: Any) -> None:
    """Stratified random programs (`dbspark.testing.datalog`: recursion, negation, aggregates) whose
    non-recursive bodies of two or more atoms are all multiway joins: the views equal the evaluator's
    after every step."""
    prog, steps = ps
    p = pipeline_on(engine)
    try:
        p.datalog(prog.text, joins="leapfrog")
        run_against_oracle(p, prog.text, prog.outputs, list(prog.inputs), steps)
    finally:
        p.close()


def test_datalog_unknown_join_plan() -> None:
    p = dbspark.Pipeline(engine="local")
    with pytest.raises(UnknownNameError, match="joins='fast'"):
        p.datalog(CYCLIC, joins="fast")


# ---- SQL: a FROM clause whose equalities form a cycle ---------------------------------------------
SQL_VIEWS = """
CREATE TABLE e (x BIGINT, y BIGINT, w VARCHAR);
CREATE TABLE lab (n BIGINT, tag VARCHAR);
CREATE VIEW tri AS SELECT r.x, r.y, s.y AS z, r.w, t.w AS tw FROM e r JOIN e s ON r.y = s.x
  JOIN e t ON t.x = r.x AND t.y = s.y WHERE r.x <> s.y OR s.w = 'a';
CREATE VIEW quad AS SELECT l.tag, count(*) AS n, sum(r.x) AS sx FROM e r, e s, e t, e u, lab l
  WHERE r.y = s.x AND s.y = t.x AND t.y = u.x AND u.y = r.x AND l.n = r.x GROUP BY l.tag;
CREATE VIEW covered AS SELECT r.x, s.y FROM e r, e s, e t WHERE r.y = s.x AND s.y = t.x AND t.y = r.x
  AND r.w = t.w;
"""


@pytest.mark.parametrize("joins", ["auto", "binary", "indexed"])
@engine_given(
    labelled_steps(
        st.tuples(
            st.one_of(st.none(), st.integers(0, 4)),
            st.integers(0, 4),
            st.one_of(st.none(), st.sampled_from(["a", "b"])),
        ),
        2,
    ),
    local=25,
    spark=2,
)
def test_sql_cyclic_joins_equal_duckdb(engine: Any, joins: str, steps: list) -> None:
    """Views whose FROM equalities form a triangle or a 4-cycle (with NULL keys, duplicates, a payload
    and conditions beyond the cycle), by the plan chosen, equal DuckDB after every step."""
    from dbspark.testing.sql_oracle import assert_view_equals_duckdb

    p = pipeline_on(engine)
    p.sql(SQL_VIEWS, joins=joins)
    assert ("stream_multijoin" in p.circuit.explain()) == (joins != "binary")
    assert ("indexed_multijoin" in p.start().circuit.explain()) == (joins == "indexed")
    con = duckdb.connect()
    con.execute(SQL_VIEWS.split("CREATE VIEW")[0])
    bag: list[tuple] = []
    try:
        for edges, labels, drop in steps:
            gone = [r for i, r in enumerate(bag) if (i * 37 % 100) < drop * 100][:5]
            if gone:
                p.delete("e", gone)
                for r in gone:
                    bag.remove(r)
            if edges:
                p.insert("e", edges)
                bag += edges
            if labels:
                p.insert("lab", labels)
                con.executemany("INSERT INTO lab VALUES (?, ?)", labels)
            p.step()
            con.execute("DELETE FROM e")
            if bag:
                con.executemany("INSERT INTO e VALUES (?, ?, ?)", bag)
            for v in ("tri", "quad", "covered"):
                query = SQL_VIEWS.split(f"CREATE VIEW {v} AS")[1].split(";")[0]
                assert_view_equals_duckdb(p.view(v), con, query, v)
    finally:
        p.close()


WIDE = """
CREATE TABLE e (x BIGINT, y BIGINT, price DOUBLE, note VARCHAR, stamp BIGINT);
CREATE VIEW tri AS SELECT r.x, r.y, s.y AS z, r.price, r.note, r.stamp, t.note AS tn
  FROM e r JOIN e s ON r.y = s.x JOIN e t ON t.x = r.x AND t.y = s.y;
"""


def test_sql_payload_columns_wider_than_a_packed_key(pipeline: Any) -> None:
    """joins="indexed" over an edge table whose other columns are distinct per row: r's five columns
    would need about 75 bits as trie levels; its own three are one level under (x, y), and the view
    equals DuckDB after a load, deletes and inserts (NULLs among the payloads)."""
    from dbspark.testing.sql_oracle import assert_view_equals_duckdb, view_frame

    rng = np.random.default_rng(5)
    n = 40_000
    xy = np.unique(rng.integers(0, 2_000, size=(n, 2)), axis=0)
    rows = [
        (int(a), int(b), float(i) / 7, f"n{i}" if i % 11 else None, 10**12 + i)
        for i, (a, b) in enumerate(xy.tolist())
    ]
    pipeline.sql(WIDE, joins="indexed")
    assert "indexed_multijoin" in pipeline.start().circuit.explain()
    con = duckdb.connect()
    con.execute(WIDE.split("CREATE VIEW")[0])
    query = WIDE.split("CREATE VIEW tri AS")[1].split(";")[0]
    bag: list[tuple] = []
    again = [(a, b, -p, "m", s + 1) for a, b, p, _, s in rows[:500]]  # a second tuple under 500 keys
    for gone, new in ((0, rows), (len(rows) // 50, again)):
        if gone:
            pipeline.delete("e", bag[-gone:])
            bag = bag[: len(bag) - gone]
        pipeline.insert("e", new)
        bag += new
        pipeline.step()
        con.execute("DELETE FROM e")
        current = pl.DataFrame(bag, schema=["x", "y", "price", "note", "stamp"], orient="row")
        con.register("current", current)
        con.execute("INSERT INTO e SELECT * FROM current")
        con.unregister("current")
        assert_view_equals_duckdb(pipeline.view("tri"), con, query, "tri")
    assert view_frame(pipeline.view("tri")).height > 100


def test_sql_columns_too_wide_are_refused_in_the_querys_names(pipeline: Any) -> None:
    """joins="sensitivity" packs every column of an input: past 62 bits the step is refused naming the
    columns as the query does (a join variable by its equality), not by the names the plan gave them."""
    n = 1 << 16
    pipeline.sql(
        "CREATE TABLE e (x BIGINT, y BIGINT, price DOUBLE, note VARCHAR); CREATE VIEW tri AS SELECT r.x, r.y, "
        "s.y AS z, r.price, r.note FROM e r JOIN e s ON r.y = s.x JOIN e t ON t.x = r.x AND t.y = s.y;",
        joins="sensitivity",
    )
    pipeline.insert(
        "e",
        pl.DataFrame(
            {
                "x": np.arange(n),
                "y": np.arange(n) * 7 % n,
                "price": np.arange(n) / 3,
                "note": [f"n{i}" for i in range(n)],
            }
        ),
    )
    with pytest.raises(
        SchemaError, match=r"input 0's columns \(r\.x = t\.x, r\.y = s\.x, r\.price, r\.note\)"
    ):
        pipeline.step()


def test_sql_unknown_join_plan() -> None:
    p = dbspark.Pipeline(engine="local")
    with pytest.raises(UnknownNameError, match="joins='wco'"):
        p.sql(SQL_VIEWS, joins="wco")
