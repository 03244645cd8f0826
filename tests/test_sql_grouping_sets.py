"""GROUP BY ROLLUP / CUBE / GROUPING SETS and GROUPING() (`frontends/sql/grouping_sets.py`) against DuckDB:
after every step of a random change stream (NULL keys, duplicates, deletes, empty steps), every view
equals DuckDB's answer on the current table, on both engines.
"""

from __future__ import annotations

import pytest
from hypothesis import strategies as st

import dbspark
from dbspark.errors import SchemaError, UnsupportedError
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
def test_grouping_sets_match_duckdb(engine, steps):
    p = pipeline_on(engine)
    try:
        p.sql(DDL)
        o = SqlOracle(DDL)
        p.step()
        o.check(p, what="over the empty table")
        o.run(p, fifo_steps("t", steps))
    finally:
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
