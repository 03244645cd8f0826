"""WITH RECURSIVE with constants (a base or a step reading no table), cross products and aggregates
that do not read the recursive CTE, on both engines, every step checked against DuckDB (`SqlOracle`);
and the aggregates over the recursive CTE outside the monotonic form (DuckDB evaluates them on each iteration's new rows only),
refused with an `UnsupportedError` naming them. Issue 21: `WITH RECURSIVE r(n) AS (SELECT 1 UNION
SELECT n + 1 FROM r WHERE n < 5)` failed with an internal CircuitError."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

import dbspark
from dbspark.testing.sql_oracle import SqlOracle

TABLES = "CREATE TABLE t (a BIGINT);\nCREATE TABLE e (src BIGINT, dst BIGINT);\n"

VIEWS = """
CREATE VIEW counter AS WITH RECURSIVE r(n) AS (SELECT 1 UNION SELECT n + 1 FROM r WHERE n < 5) SELECT n FROM r;
CREATE VIEW counter_all AS WITH RECURSIVE r(n, s) AS (SELECT 1, 'x' UNION ALL SELECT n + 1, s || 'x' FROM r WHERE n < 4)
  SELECT n, s FROM r;
CREATE VIEW counter_twice AS WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT 1 UNION ALL SELECT n + 1 FROM r
  WHERE n < 3) SELECT n FROM r;
CREATE VIEW step_const AS WITH RECURSIVE r(n) AS (SELECT 1 UNION SELECT n + one FROM r CROSS JOIN (SELECT 1 AS one)
  WHERE n < 5) SELECT n FROM r;
CREATE VIEW const_and_table AS WITH RECURSIVE r(n) AS (SELECT 1 UNION SELECT a FROM t UNION SELECT n + 1 FROM r
  WHERE n < 7) SELECT n FROM r;
CREATE VIEW up_to_max AS WITH RECURSIVE r(n) AS (SELECT 0 UNION SELECT n + 1 FROM r WHERE n < (SELECT max(a) FROM t))
  SELECT n FROM r;
CREATE VIEW up_to_count AS WITH RECURSIVE r(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM r
  WHERE n < (SELECT count(*) FROM t WHERE a > 0)) SELECT n FROM r;
CREATE VIEW sums AS WITH RECURSIVE r(n) AS (SELECT 0 UNION SELECT n + a FROM r CROSS JOIN t WHERE a > 0 AND n + a < 12)
  SELECT n FROM r;
CREATE VIEW sums_comma AS WITH RECURSIVE r(n) AS (SELECT 0 UNION SELECT r.n + t.a FROM r, t
  WHERE t.a > 0 AND r.n + t.a < 12) SELECT n FROM r;
CREATE VIEW reach_from_0 AS WITH RECURSIVE r(n) AS (SELECT 0 UNION SELECT e.dst FROM r JOIN e ON r.n = e.src)
  SELECT n FROM r;
CREATE VIEW paths AS WITH RECURSIVE p(a, len) AS (SELECT 0, 0 UNION ALL SELECT e.dst, p.len + 1 FROM p JOIN e
  ON p.a = e.src WHERE p.len < 3) SELECT a, len FROM p;
CREATE VIEW no_from AS SELECT 1 AS one, 'x' AS s, (SELECT count(*) FROM t) AS n;
"""

# (inserts into t, into e, deletes from t, from e)
STEPS: list[tuple[list, list, list, list]] = [
    ([], [], [], []),  # the constants alone, before any row
    ([(1,), (3,)], [(0, 1), (1, 2)], [], []),
    ([(5,), (0,)], [(2, 0), (2, 3)], [], []),
    ([(9,)], [], [(1,)], [(1, 2)]),
    ([(-2,), (3,)], [(1, 2), (3, 3)], [(5,), (9,)], [(0, 1)]),
    ([], [], [(0,), (3,), (-2,), (3,)], [(2, 0), (2, 3), (1, 2), (3, 3)]),  # everything deleted
]


@pytest.fixture(params=["local", "spark"])
def make_pipeline(request: pytest.FixtureRequest) -> Iterator[Any]:
    made: list[dbspark.Pipeline] = []

    def make() -> dbspark.Pipeline:
        if request.param == "spark":
            p = dbspark.Pipeline(engine="spark", spark=request.getfixturevalue("spark_session"))
        else:
            p = dbspark.Pipeline(engine="local")
        made.append(p)
        return p

    yield make
    for p in made:
        p.close()


def test_recursive_ctes_with_constants_products_and_aggregates_equal_duckdb(make_pipeline):
    p = make_pipeline()
    p.sql(TABLES + VIEWS)

    def present(**tables: list) -> dict[str, list]:
        return {t: rows for t, rows in tables.items() if rows}

    steps = [(present(t=it, e=ie), present(t=dt, e=de)) for it, ie, dt, de in STEPS]
    SqlOracle(TABLES + VIEWS).run(p, steps)
    assert p.view("counter").to_dict() == {(n,): 1 for n in range(1, 6)}


def test_pipeline_without_tables(make_pipeline):
    """Only constants: the views are there after the first step and never change."""
    ddl = """CREATE VIEW counter AS WITH RECURSIVE r(n) AS (SELECT 1 UNION SELECT n + 1 FROM r WHERE n < 5)
               SELECT n FROM r;
             CREATE VIEW fib AS WITH RECURSIVE f(i, a, b) AS (SELECT 0, 0, 1 UNION ALL SELECT i + 1, b, a + b FROM f
               WHERE i < 10) SELECT i, a FROM f;
             CREATE VIEW one AS SELECT 1 AS x, 'a' AS y"""
    p = make_pipeline()
    p.sql(ddl)
    o = SqlOracle(ddl)
    first = p.step()
    o.check(p)
    assert first["counter"].to_dict() == {(n,): 1 for n in range(1, 6)}
    assert p.step()["fib"].to_dict() == {}
    o.check(p, what="the second step")


@pytest.mark.parametrize(
    ("step", "what"),
    [
        ("SELECT max(n) + 1 FROM r WHERE n < 5", "an aggregate without GROUP BY over the CTE"),
        ("SELECT count(*) FROM r WHERE n < 5", "an aggregate without GROUP BY over the CTE"),
        ("SELECT n + 1 FROM r GROUP BY n HAVING n < 5", "HAVING"),
        (
            "SELECT n + 1 FROM r WHERE n < (SELECT max(n) FROM r) + 2",
            "an aggregate over the CTE other than in the recursive term's own SELECT",
        ),
        ("SELECT sum(a) FROM t WHERE a IN (SELECT n FROM r)", "an aggregate without GROUP BY over the CTE"),
    ],
)
def test_aggregates_over_the_recursive_cte_are_refused(make_pipeline, step, what):
    """DuckDB aggregates the rows the previous iteration added (its working table); dbspark accepts an
    aggregate over the CTE only in the monotonic form (tests/test_recursive_aggregates.py), whose
    meaning is a fixpoint over the whole relation (`SELECT max(n) + 1 ...` gives 1..5 and NULL in
    DuckDB, and has no fixpoint over the whole relation)."""
    p = make_pipeline()
    with pytest.raises(dbspark.UnsupportedError, match=re.escape(what) + ".*recursive term of r"):
        p.sql(
            f"CREATE TABLE t (a BIGINT); CREATE VIEW v AS WITH RECURSIVE r(n) AS (SELECT 1 UNION {step}) "
            "SELECT n FROM r"
        )
    assert p.views == []
