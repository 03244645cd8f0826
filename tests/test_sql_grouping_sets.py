"""GROUP BY ROLLUP / CUBE / GROUPING SETS and GROUPING() (`frontends/sql/grouping_sets.py`) against DuckDB:
after every step of a random change stream (NULL keys, duplicates, deletes, empty steps), every view
equals DuckDB's answer on the current table, on both engines.
"""

from __future__ import annotations

import pytest
from hypothesis import strategies as st

import dbspark
from dbspark.errors import SchemaError, UnsupportedError
from dbspark.frontends.sql import grouping_levels
from dbspark.testing.engines import engine_given, pipeline_on
from dbspark.testing.sql_oracle import SqlOracle, fifo_steps

DDL = """
CREATE TABLE t (a INTEGER, b VARCHAR, x INTEGER);
CREATE VIEW r AS SELECT a, b, SUM(x) AS s, COUNT(*) AS n, GROUPING(a, b) AS g FROM t GROUP BY ROLLUP (a, b);
CREATE VIEW c AS SELECT a, b, COUNT(x) AS n, GROUPING_ID(a, b) AS gi FROM t GROUP BY CUBE (a, b)
    HAVING COUNT(*) > 1 OR GROUPING(a) = 1;
CREATE VIEW s AS SELECT a + 1 AS k, MAX(x) AS m, b FROM t GROUP BY GROUPING SETS ((a + 1), (), (a + 1, b));
CREATE VIEW p AS SELECT b, a, SUM(a) AS sa, AVG(x) AS av FROM t GROUP BY b, ROLLUP (a);
CREATE VIEW total AS SELECT a FROM t GROUP BY ROLLUP (a);
CREATE VIEW d AS SELECT DISTINCT b FROM t GROUP BY GROUPING SETS ((b), (a, b));
CREATE VIEW twice AS SELECT a, COUNT(*) AS n FROM t GROUP BY GROUPING SETS ((a), (a), ROLLUP (a));
CREATE VIEW top AS SELECT b, SUM(x) AS s FROM t GROUP BY ROLLUP (b) ORDER BY s DESC NULLS LAST, b LIMIT 2;
CREATE VIEW plain AS SELECT a, GROUPING(a) AS g, COUNT(*) AS n FROM t GROUP BY a;
CREATE VIEW lv AS SELECT a, b, MIN(x) AS lo, MAX(b) AS hb, SUM(x) AS s, COUNT(x) AS n, COUNT(*) AS m,
    GROUPING(a, b) AS g FROM t WHERE x IS DISTINCT FROM 0 GROUP BY ROLLUP (a, b)
    HAVING MAX(x) > -4 OR COUNT(*) = 0 OR MIN(b) = '';
CREATE VIEW dec AS SELECT b, a, SUM(CAST(x AS DECIMAL(20, 2)) * 0.25) AS s, MIN(x * 1.5) AS lo,
    MAX(a - x) AS hi FROM t GROUP BY CUBE (b, a);
CREATE VIEW self AS SELECT t1.b, t2.a, MAX(t1.x + t2.x) AS m, COUNT(*) AS n, SUM(t2.x) AS s
    FROM t AS t1 JOIN t AS t2 ON t1.a = t2.a GROUP BY ROLLUP (t1.b, t2.a);
CREATE VIEW fall AS SELECT a, AVG(x) AS av, COUNT(DISTINCT b) AS nb, MAX(x) AS m FROM t GROUP BY ROLLUP (a);
CREATE VIEW nofine AS SELECT a, b, MAX(x) AS m, COUNT(*) AS n FROM t GROUP BY GROUPING SETS ((a), (b));
CREATE VIEW win AS SELECT a, b, SUM(x) AS s, SUM(SUM(x)) OVER (PARTITION BY GROUPING(b), a) AS tot,
    GROUPING(a, b) AS g, RANK() OVER (ORDER BY COUNT(*) DESC, a NULLS FIRST, b NULLS FIRST) AS r
    FROM t GROUP BY ROLLUP (1, 2);
CREATE VIEW winq AS SELECT a, MAX(x) AS m FROM t GROUP BY CUBE (a, b)
    QUALIFY DENSE_RANK() OVER (PARTITION BY GROUPING(a, b) ORDER BY m DESC NULLS LAST) = 1;
CREATE VIEW inside AS SELECT a + 1 AS g1, a AS g2, COUNT(*) AS n, MAX(x) AS m FROM t GROUP BY ROLLUP (a + 1, a);
CREATE VIEW pos AS SELECT a, b, MAX(x) AS m, SUM(x) FILTER (WHERE x > 0) AS sp FROM t GROUP BY ROLLUP (1, 2);
CREATE VIEW al AS SELECT a AS k, b AS kb, SUM(x) AS s, GROUPING(k) AS gk, GROUPING(k, kb) AS g FROM t
    GROUP BY ROLLUP (k, kb) ORDER BY SUM(x) DESC NULLS LAST, g, k NULLS FIRST, kb NULLS FIRST LIMIT 3;
CREATE VIEW alx AS SELECT a + 1 AS k, x % 2 AS x, COUNT(*) AS n, MIN(b) AS lo FROM t GROUP BY CUBE (k, x);
CREATE VIEW aly AS SELECT a AS k, MAX(b) AS x, COUNT(*) AS n FROM t GROUP BY ROLLUP (k, x);
CREATE VIEW ordagg AS SELECT b, COUNT(*) AS n, MAX(x) AS m FROM t GROUP BY GROUPING SETS ((b), ())
    ORDER BY MAX(x) DESC NULLS FIRST, COUNT(*), b NULLS FIRST LIMIT 2;
"""

ROW = st.tuples(
    st.one_of(st.none(), st.integers(0, 3)),
    st.one_of(st.none(), st.sampled_from(["a", "b", ""])),
    st.one_of(st.none(), st.integers(-5, 5)),
)
STEPS = st.lists(st.tuples(st.lists(ROW, max_size=6), st.integers(0, 4)), min_size=1, max_size=5)


@engine_given(
    STEPS,
    local=25,
    spark=1,
    spark_strategies=(
        st.just([([(1, "a", 3), (1, None, 4), (None, "b", 7), (2, "a", None)], 0), ([(1, "a", 3)], 2)]),
    ),
)
@pytest.mark.parametrize("shared", [True, False], ids=["levels", "separate"])
def test_grouping_sets_match_duckdb(engine, shared, steps):
    """Under both plans: coarse sets folding their parent's groups (`grouping_levels.py`), and every set
    aggregating the rows."""
    was, grouping_levels.SHARED = grouping_levels.SHARED, shared
    p = pipeline_on(engine)
    try:
        p.sql(DDL)
        o = SqlOracle(DDL)
        p.step()
        o.check(p, what="over the empty table")
        o.run(p, fifo_steps("t", steps))
    finally:
        grouping_levels.SHARED = was
        p.close()


def test_grouping_sets_by_hand():
    """The manual's shape of a ROLLUP: detail rows, subtotals with NULL, the grand total, the mask."""
    p = dbspark.Pipeline(engine="local")
    p.sql(DDL)
    p.insert("t", [(1, "a", 3), (1, "b", 4), (2, "a", 5)])
    p.step()
    assert set(p.view("r").to_dict()) == {
        (1, "a", 3, 1, 0),
        (1, "b", 4, 1, 0),
        (2, "a", 5, 1, 0),
        (1, None, 7, 2, 1),
        (2, None, 5, 1, 1),
        (None, None, 12, 3, 3),
    }
    p.close()


@pytest.mark.parametrize(
    "view, error, message",
    [
        ("SELECT b, COUNT(*) FROM t GROUP BY ROLLUP (a)", SchemaError, "b"),
        (
            "SELECT a, GROUPING(b) FROM t GROUP BY ROLLUP (a)",
            SchemaError,
            "GROUPING argument b is not a grouping key",
        ),
        ("SELECT * FROM t GROUP BY ROLLUP (a, b, x)", UnsupportedError, r"\* in a query with grouping sets"),
        (
            "SELECT a, RANK() OVER (ORDER BY x) FROM t GROUP BY ROLLUP (a)",
            SchemaError,
            "column x must appear in the GROUP BY clause",
        ),
        (
            "SELECT a, COUNT(*) FROM t GROUP BY ROLLUP (3)",
            SchemaError,
            "GROUP BY position 3 is not in the select",
        ),
        (
            "SELECT a, COUNT(*) FROM t GROUP BY ROLLUP (a, 2)",
            SchemaError,
            r"aggregate COUNT\(\*\) is not allowed",
        ),
        ("SELECT b AS a, COUNT(*) FROM t GROUP BY ROLLUP (a)", SchemaError, "column b must appear"),
        (
            "SELECT a, COUNT(*) FROM t GROUP BY ROLLUP (a) ORDER BY SUM(x) LIMIT 2",
            SchemaError,
            r"ORDER BY SUM\(x\) is not a column of the result",
        ),
        (
            "SELECT COUNT(*) FROM t GROUP BY CUBE (a, b, x, a + 1, a + 2, a + 3, a + 4, a + 5, a + 6)",
            UnsupportedError,
            "CUBE of 9 keys",
        ),
    ],
)
def test_grouping_set_errors(view, error, message):
    p = pipeline_on("local")
    try:
        with pytest.raises(error, match=message):
            p.sql(f"CREATE TABLE t (a INTEGER, b VARCHAR, x INTEGER); CREATE VIEW v AS {view};")
    finally:
        p.close()


def _aggregates_read(p: dbspark.Pipeline) -> list[str]:
    """What each GROUP BY of the pipeline aggregates: the first operator above it that is not a map or an
    index (the FROM clause's join, or a finer set's aggregate)."""
    nodes = p.circuit.nodes
    out = []
    for n in nodes.values():
        if type(n.op).__name__ != "StreamAggregate":
            continue
        up = nodes[n.inputs[0]]
        while type(up.op).__name__ in ("Map", "Index"):
            up = nodes[up.inputs[0]]
        out.append(type(up.op).__name__)
    return out


@pytest.mark.parametrize(
    "aggregates, folds",
    [
        ("MAX(x), MIN(u.y), SUM(x), COUNT(*), COUNT(u.y)", True),
        ("MAX(x), AVG(x)", False),
        ("MAX(x), COUNT(DISTINCT u.y)", False),
        ("MAX(x), SUM(x * 1.5), MIN(b) FILTER (WHERE x > 0)", True),  # a DECIMAL's sum; a FILTER's CASE
        ("MAX(x), SUM(CAST(x AS DOUBLE))", False),  # a sum of floats: exact over rows, not rounded partials
    ],
)
def test_coarse_sets_fold_their_parents_groups(aggregates, folds):
    """A ROLLUP over a join reads the join once; its coarse sets aggregate the finer set's groups when
    every aggregate folds (MIN, MAX, COUNT, SUM of integers), else the rows (and the answers match DuckDB
    in `test_grouping_sets_match_duckdb`)."""
    p = pipeline_on("local")
    try:
        p.sql(
            "CREATE TABLE t (a INTEGER, b VARCHAR, x INTEGER); CREATE TABLE u (a INTEGER, y INTEGER);"
            f"CREATE VIEW v AS SELECT t.a, b, {aggregates} FROM t JOIN u ON t.a = u.a "
            "GROUP BY ROLLUP (t.a, b);"
        )
        reads = _aggregates_read(p)
        joins = [n for n in p.circuit.nodes.values() if type(n.op).__name__ == "StreamJoin"]
        assert len(joins) == 1 + (2 if "DISTINCT" in aggregates else 0)  # (a distinct call's join back)
        if folds:
            assert reads == ["StreamJoin", "StreamAggregate", "StreamAggregate"]
        else:
            assert "StreamAggregate" not in reads and reads.count("StreamJoin") == 3
    finally:
        p.close()


def test_a_rollup_keeps_float_sums_exact(engine):
    """SUM of DOUBLE is the exactly rounded sum of the group's values (`columnar/exactsum.py`): the grand
    total of a ROLLUP is not the sum of its sub-totals' rounded values."""
    p = pipeline_on(engine)
    try:
        p.sql(
            "CREATE TABLE t (a INTEGER, x DOUBLE);"
            "CREATE VIEW v AS SELECT a, SUM(x) AS s FROM t GROUP BY ROLLUP (a);"
        )
        p.insert("t", [(1, 1e300), (1, 1.0), (2, -1e300), (3, 0.5)])
        p.step()
        assert p.view("v").to_dict() == {(1, 1e300): 1, (2, -1e300): 1, (3, 0.5): 1, (None, 1.5): 1}
        p.delete("t", [(3, 0.5)])
        p.step()
        assert p.view("v").to_dict() == {(1, 1e300): 1, (2, -1e300): 1, (None, 1.0): 1}
    finally:
        p.close()
