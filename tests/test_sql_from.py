"""FROM items as DuckDB reads them, on both engines, every step checked against DuckDB (`SqlOracle`):
a join in parentheses keeps its tables' names visible (`FROM (t0 AS x CROSS JOIN t1 AS y)`), unless the
parentheses are aliased, and nests inside other joins."""

from __future__ import annotations

import pytest

import dbspark
from dbspark.testing.sql_oracle import SqlOracle

DDL = """
CREATE TABLE t0 (a BIGINT, k BIGINT);
CREATE TABLE t1 (b BIGINT, k BIGINT);
CREATE TABLE t2 (c BIGINT, k BIGINT);
"""

VIEWS = """
CREATE VIEW cross_in_parens AS SELECT * FROM (t0 AS x CROSS JOIN t1 AS y) WHERE x.a < y.b;
CREATE VIEW parens_then_left AS SELECT x.a, y.b, z.c
  FROM (t0 AS x JOIN t1 AS y ON x.k = y.k) LEFT JOIN t2 AS z ON z.k = y.k;
CREATE VIEW parens_on_the_right AS SELECT z.c, x.a
  FROM t2 AS z JOIN (t0 AS x LEFT JOIN t1 AS y ON x.k = y.k) ON z.k = x.k WHERE y.b IS NULL;
CREATE VIEW aliased_parens AS SELECT j.a, j.b FROM (t0 CROSS JOIN t1) AS j;
CREATE VIEW nested_parens AS SELECT x.a, z.c FROM ((t0 AS x JOIN t1 AS y USING (k)) JOIN t2 AS z USING (k));
"""

STEPS = [
    ({"t0": [(1, 1), (2, 2), (3, None), (2, 2)], "t1": [(2, 1), (5, 2)], "t2": [(7, 1), (8, 3)]}, {}),
    ({"t2": [(9, 2)]}, {"t1": [(2, 1)], "t0": [(2, 2)]}),
    ({"t1": [(4, None)]}, {"t2": [(7, 1), (8, 3), (9, 2)]}),
]


@pytest.fixture(params=["local", "spark"])
def pipeline(request):
    if request.param == "spark":
        p = dbspark.Pipeline(engine="spark", spark=request.getfixturevalue("spark_session"))
    else:
        p = dbspark.Pipeline(engine="local")
    yield p
    p.close()


def test_parenthesized_joins_equal_duckdb(pipeline):
    pipeline.sql(DDL + VIEWS)
    SqlOracle(DDL + VIEWS).run(pipeline, STEPS)
