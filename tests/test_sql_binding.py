"""Name binding in GROUP BY, HAVING and ORDER BY as DuckDB binds (issue 21), on both engines, each step
checked against DuckDB (`SqlOracle`), with deletes.

GROUP BY: a position is the SELECT item; a bare name is a FROM column if there is one, else a SELECT
alias; a repeated key is one key. HAVING: a name is a grouped column first, then a SELECT alias. ORDER BY:
an output name, a SELECT item's text, else an expression whose names are FROM columns first, then
aliases. A NULL literal compares with a subquery's column of any type.
"""

from __future__ import annotations

import pytest

import dbspark
from dbspark.errors import SchemaError, UnknownNameError
from dbspark.testing.sql_oracle import SqlOracle

DDL = """
CREATE TABLE t (a BIGINT, b BIGINT);
CREATE TABLE u (c BIGINT, s VARCHAR);
"""

VIEWS = """
CREATE VIEW column_first AS SELECT a % 2 AS a, COUNT(*) AS n FROM t GROUP BY a;
CREATE VIEW repeated_key AS SELECT a, COUNT(*) AS n FROM t GROUP BY a, a;
CREATE VIEW repeated_qualified AS SELECT cor0.a, COUNT(*) AS n FROM t AS cor0 GROUP BY cor0.a, a;
CREATE VIEW repeated_position AS SELECT a % 3 AS k, b, COUNT(*) AS n FROM t GROUP BY k, b, 1, t.b;
CREATE VIEW using_keys AS SELECT a AS g1, y.a AS g2, count(*) AS n FROM t AS x JOIN t AS y USING (a)
  GROUP BY a, y.a, x.a HAVING count(*) > 1;
CREATE VIEW having_grouped AS SELECT -t.a AS a FROM t GROUP BY a HAVING a > 0;
CREATE VIEW having_alias AS SELECT sum(a) AS a FROM t GROUP BY b HAVING a > 3;
CREATE VIEW having_alias_of_key AS SELECT -a AS a, count(*) AS n FROM t GROUP BY -a HAVING a < -1;
CREATE VIEW having_aggregate_named_key AS SELECT b, count(*) AS b FROM t GROUP BY b HAVING b > 1;
CREATE VIEW having_position AS SELECT a % 2 AS a, count(*) AS n FROM t GROUP BY 1 HAVING a > 0;
CREATE VIEW key_matched_bound AS SELECT t.a % 2 AS k, count(*) AS n, sum(t.b) AS s FROM t GROUP BY a % 2
  HAVING sum(b) > 2;
CREATE VIEW having_alias_in_subquery AS SELECT b AS a, count(*) AS n FROM t GROUP BY b
  HAVING a IN (SELECT c + 1 FROM u);
CREATE VIEW group_by_all AS SELECT a % 2 AS p, b, count(*) AS n FROM t GROUP BY ALL;
CREATE VIEW top_column_first AS SELECT a % 2 AS a, count(*) AS n FROM t GROUP BY a ORDER BY a, n LIMIT 2;
CREATE VIEW top_input_expr AS SELECT -a AS a, b FROM t ORDER BY a + 0 DESC, b LIMIT 2;
CREATE VIEW top_alias_expr AS SELECT a + 1 AS x, b FROM t ORDER BY x * 2, b LIMIT 2;
CREATE VIEW constant_key AS SELECT count(*) AS n FROM t GROUP BY 1.25;
CREATE VIEW constant_and_position AS SELECT b, count(*) AS n FROM t GROUP BY 1.0, 1;
CREATE VIEW top_item_text AS SELECT b AS x, count(*) AS n FROM t GROUP BY x ORDER BY b DESC LIMIT 1;
"""

STARS = """
CREATE VIEW star_exclude AS SELECT * EXCLUDE (a), a + 1 AS a FROM t;
CREATE VIEW star_replace AS SELECT * REPLACE (coalesce(b, 0) * 2 AS b) FROM t;
CREATE VIEW star_qualified AS SELECT t.* EXCLUDE (b), u.* EXCLUDE (c) FROM t JOIN u ON t.a = u.c;
CREATE VIEW star_both AS SELECT * EXCLUDE (s) REPLACE (a % 2 AS a) FROM t, u WHERE t.b = u.c;
"""

NULL_IN = """
CREATE VIEW null_in AS SELECT a FROM t WHERE NULL IN (SELECT s FROM u);
CREATE VIEW null_not_in AS SELECT a FROM t WHERE NULL NOT IN (SELECT s FROM u WHERE c > 5);
CREATE VIEW null_in_mark AS SELECT a, NULL IN (SELECT s FROM u) AS m FROM t;
CREATE VIEW null_in_correlated AS SELECT a, NULL IN (SELECT s FROM u WHERE u.c = t.a) AS m FROM t;
"""

STEPS = [
    ({"t": [(1, 2), (3, 2), (2, 5), (-4, 5), (5, None)], "u": [(1, "x"), (6, None)]}, {}),
    ({"t": [(7, 2), (None, 1)], "u": [(3, "y")]}, {"t": [(3, 2), (-4, 5)]}),
    ({}, {"t": [(1, 2), (7, 2)], "u": [(1, "x"), (6, None)]}),
    ({"u": [(6, "z")]}, {"u": [(3, "y")]}),
]


@pytest.mark.parametrize("views", [VIEWS, NULL_IN, STARS], ids=["group_having_order", "null_in", "stars"])
def test_names_bind_as_duckdb_binds_them(pipeline, views):
    pipeline.sql(DDL + views)
    SqlOracle(DDL + views).run(pipeline, STEPS)


@pytest.mark.parametrize(
    ("query", "names"),
    [
        (
            "SELECT b AS a, count(*) AS n FROM t GROUP BY a",
            "column b must appear in the GROUP BY",
        ),  # a is t.a
        ("SELECT count(*) AS c FROM t GROUP BY c", "GROUP BY c refers to an aggregate"),
        (
            "SELECT a + 1 AS x FROM t GROUP BY x + 1",
            "unknown column x",
        ),  # no alias inside a GROUP BY expression
        # after GROUP BY, ORDER BY's a is the FROM column (not grouped), not the alias
        ("SELECT a % 2 AS a, count(*) AS n FROM t GROUP BY 1 ORDER BY a + 0 LIMIT 5", "column a must appear"),
        ("SELECT * EXCLUDE (z) FROM t", "unknown column z in the EXCLUDE list"),
        ("SELECT t.* REPLACE (1 AS c) FROM t, u", "unknown column c in the REPLACE list"),
    ],
)
def test_names_duckdb_refuses_are_errors_naming_them(query, names):
    with pytest.raises(UnknownNameError if "unknown" in names else SchemaError, match=names):
        dbspark.Pipeline(engine="local").sql(DDL + f"CREATE VIEW v AS {query};")
