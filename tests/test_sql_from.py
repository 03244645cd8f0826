"""FROM items as DuckDB reads them, on both engines, every step checked against DuckDB (`SqlOracle`):
a join in parentheses keeps its tables' names visible (`FROM (t0 AS x CROSS JOIN t1 AS y)`), unless the
parentheses are aliased, and nests inside other joins."""

from __future__ import annotations

import polars as pl

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


def test_parenthesized_joins_equal_duckdb(pipeline):
    pipeline.sql(DDL + VIEWS)
    SqlOracle(DDL + VIEWS).run(pipeline, STEPS)


def test_a_join_multiplies_consolidated_changes():
    """A change is consolidated before a join multiplies it: an outer join's inner part and unmatched
    rows cancel, and unconsolidated the change of the n-th LEFT JOIN of a chain had 2·3^n rows (a chain
    of 20 did not fit in memory). Local engine (the Spark engine does not consolidate yet)."""
    from dbspark.algebra.zset import ZSet
    from dbspark.engines.local.kernel import LocalKernel

    rows = [(1, "x", 1), (1, "x", -1), (1, "x", 1)]  # one row, written as three that cancel
    a = ZSet.from_rows([r[:2] for r in rows], {"k": pl.Int64, "s": pl.String}, [r[2] for r in rows])
    b = ZSet.from_rows([(1,), (1,), (1,)], {"k": pl.Int64}, [1, -1, 1])
    out = LocalKernel().join(a, b, ["k"], ["k"], [])
    assert out.df.height == 1 and out.df["__w"].to_list() == [1]


def test_a_chain_of_left_joins_equals_duckdb():
    n = 16
    ddl = "".join(f"CREATE TABLE t{i} (k BIGINT, v{i} BIGINT);" for i in range(n))
    joins = "".join(f" LEFT JOIN t{i} ON t{i}.k = t0.k" for i in range(1, n))
    ddl += f"CREATE VIEW w AS SELECT t0.k, t{n - 1}.v{n - 1} FROM t0{joins};"
    p = dbspark.Pipeline(engine="local")
    p.sql(ddl)
    first = {f"t{i}": [(1, i), (2, i)] for i in range(n)}
    SqlOracle(ddl).run(p, [(first, {}), ({"t0": [(3, 0)]}, {f"t{n - 1}": [(2, n - 1)]})])


TWICE_DDL = "CREATE TABLE r (src BIGINT, dst BIGINT, n BIGINT);"
TWICE = """
CREATE VIEW right_twice AS SELECT x0.n, x1.n AS m FROM r AS x0 JOIN r AS x1 ON x0.dst = x1.src AND x0.src = x1.src;
CREATE VIEW left_twice AS SELECT x0.n, x1.n AS m FROM r AS x0 JOIN r AS x1 ON x0.dst = x1.src AND x0.dst = x1.dst;
CREATE VIEW both_and_more AS SELECT x0.src, x1.n FROM r AS x0 JOIN r AS x1
  ON x0.dst = x1.src AND x0.src = x1.src AND x0.n = x1.n;
CREATE VIEW cycle_twice AS SELECT 0 AS o1 FROM r AS x0 JOIN r AS x1 ON x0.dst = x1.src
  JOIN r AS x2 ON x1.dst = x2.src AND x2.dst = x0.src AND x0.n = x2.n WHERE (x0.src = x1.src);
"""
TWICE_STEPS = [
    ({"r": [(0, 0, None), (0, 0, None), (0, 0, 1), (1, 1, 2), (1, 0, 2), (0, 1, 2), (1, 1, None)]}, {}),
    ({"r": [(2, 2, 1), (0, 0, 2)]}, {"r": [(0, 0, None), (1, 1, 2)]}),
]


def test_a_column_joined_to_two_of_the_other_sides_columns(pipeline):
    """Found by the SQL fuzzer's cyclic family: `x0.dst = x1.src AND x0.src = x1.src` joins one right
    column to two left ones, and the join's keys named it twice (a raw Polars DuplicateError); those two
    left columns are equal, a filter before the join (`Stream._join_parts`), one pair keys it."""
    pipeline.sql(TWICE_DDL + TWICE)
    SqlOracle(TWICE_DDL + TWICE).run(pipeline, TWICE_STEPS)
