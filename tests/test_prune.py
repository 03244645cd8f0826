"""Column pruning (`incremental/prune.py`): a join's sides carry only the columns read after the join.

The views below read few of their tables' columns, through joins, filters on a joined column, a
self-join, DISTINCT, a union, an outer join, an aggregate and a subquery; random inserts and deletes
(duplicates and NULL keys among them) are checked against DuckDB after every step, on both engines. The
structural tests check what the pass removes and what it must leave alone."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

import dbspark
from dbspark.incremental.prune import prune_columns
from dbspark.testing import tpch
from dbspark.testing.engines import engine_given, pipeline_on
from dbspark.testing.sql_oracle import SqlOracle

DDL = """
CREATE TABLE a (k BIGINT, x BIGINT, y VARCHAR, z DOUBLE);
CREATE TABLE b (k BIGINT, u BIGINT, v VARCHAR);
CREATE TABLE c (u BIGINT, w BIGINT, s VARCHAR);
"""
VIEWS = """
CREATE VIEW j3 AS SELECT a.x, c.w FROM a JOIN b ON a.k = b.k JOIN c ON b.u = c.u WHERE b.v <> 'q';
CREATE VIEW filtered_after AS SELECT a.y FROM a JOIN b USING (k) WHERE b.u > a.x;
CREATE VIEW self_join AS SELECT p.x, q.y FROM a AS p JOIN a AS q ON p.k = q.x;
CREATE VIEW dist AS SELECT DISTINCT a.y, b.v FROM a JOIN b ON a.k = b.k;
CREATE VIEW agg AS SELECT c.s, COUNT(*) AS n, SUM(a.x) AS sx FROM a JOIN b ON a.k = b.k JOIN c ON c.u = b.u
  GROUP BY c.s;
CREATE VIEW uni AS SELECT a.x AS v FROM a JOIN b ON a.k = b.k UNION ALL SELECT c.w FROM c JOIN b ON c.u = b.u;
CREATE VIEW outer_j AS SELECT a.x, b.v FROM a LEFT JOIN b ON a.k = b.k;
CREATE VIEW sub AS SELECT a.x FROM a WHERE a.k IN (SELECT b.k FROM b JOIN c ON b.u = c.u WHERE c.w > 0);
CREATE VIEW everything AS SELECT * FROM a JOIN b USING (k);
"""

small = st.integers(0, 3) | st.none()
row_a = st.tuples(small, small, st.sampled_from(["p", "q", None]), st.sampled_from([0.5, -2.0, None]))
row_b = st.tuples(small, small, st.sampled_from(["p", "q", None]))
row_c = st.tuples(small, small, st.sampled_from(["r", "s", None]))
ROWS = {"a": row_a, "b": row_b, "c": row_c}
step = st.tuples(
    st.fixed_dictionaries({t: st.lists(r, max_size=5) for t, r in ROWS.items()}),
    st.fixed_dictionaries({t: st.lists(st.integers(0, 40), max_size=3) for t in ROWS}),
)


@engine_given(steps=st.lists(step, min_size=1, max_size=4), local=15, spark=2)
def test_pruned_joins_equal_duckdb_under_inserts_and_deletes(engine: Any, steps: list) -> None:
    pipeline = pipeline_on(engine)
    pipeline.sql(DDL + VIEWS)
    cur: dict[str, list[tuple]] = {t: [] for t in ROWS}
    plan = []
    for inserts, deletes in steps:
        gone = {t: sorted({i % len(cur[t]) for i in d}) if cur[t] else [] for t, d in deletes.items()}
        dels = {t: [cur[t][i] for i in g] for t, g in gone.items() if g}
        for t in ROWS:
            cur[t] = [r for i, r in enumerate(cur[t]) if i not in gone[t]] + list(inserts[t])
        plan.append(({t: r for t, r in inserts.items() if r}, dels))
    try:
        SqlOracle(DDL + VIEWS).run(pipeline, plan)
    finally:
        pipeline.close()


def _circuit(sql: str, joins: str = "auto") -> dbspark.Circuit:
    p = dbspark.Pipeline(engine="local")
    p.sql(sql, joins=joins)
    return p.circuit


def test_each_join_side_keeps_the_columns_read_after_it():
    """TPC-H Q5 joins six tables (47 columns); after pruning, the widest join output has 5 columns, and
    the lineitem side keeps its key, the next join's key and the two columns the revenue reads."""
    c = prune_columns(_circuit(tpch.DDL + tpch.VIEWS["q05"], joins="binary"))
    joins = [n for n in c.nodes.values() if n.op.name == "stream_join"]
    assert joins and max(len(n.shape.schema) for n in joins) <= 5
    projections = {
        tuple(n.shape.schema)
        for n in c.nodes.values()
        if n.op.name == "map" and "l_orderkey" in n.shape.schema
    }
    assert ("l_orderkey", "l_suppkey", "l_extendedprice", "l_discount") in projections


def test_each_multiway_join_input_keeps_the_columns_read_after_it_and_its_join_columns():
    """Q5 by default is one multiway join of six tables (its equalities form a cycle): after pruning
    each input holds its join columns and what the view reads (region its key alone, lineitem its
    order and supplier keys and the two columns of the revenue); 8 columns come out, not 47."""
    c = prune_columns(_circuit(tpch.DDL + tpch.VIEWS["q05"]))
    (mj,) = [n for n in c.nodes.values() if n.op.name == "stream_multijoin"]
    widths = sorted(len(c.nodes[i].shape.schema) for i in mj.inputs)
    assert widths == [1, 2, 2, 2, 3, 4] and len(mj.shape.schema) == 8, (widths, mj.shape.schema)


def test_nothing_to_prune_leaves_the_circuit_as_it_was():
    """`SELECT *` over a join reads every column: the pass changes nothing."""
    c = _circuit(DDL + "CREATE VIEW everything AS SELECT * FROM a JOIN b USING (k);")
    assert prune_columns(c).explain() == c.explain()


def test_distinct_and_union_inputs_keep_every_column_they_read():
    """Under DISTINCT a row's multiplicity depends on all its columns: what feeds it is not narrowed
    below what it reads (here both selected columns survive the join)."""
    c = prune_columns(_circuit(DDL + "CREATE VIEW d AS SELECT DISTINCT a.y, b.v FROM a JOIN b ON a.k = b.k;"))
    (join,) = [n for n in c.nodes.values() if n.op.name == "stream_join"]
    assert {"y", "v", "k"} <= set(join.shape.schema) and "x" not in join.shape.schema
