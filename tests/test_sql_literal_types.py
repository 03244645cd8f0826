"""String literals and NULL literals typed as DuckDB types them (issue 21), on both engines, each step
checked against DuckDB (`SqlOracle`), with deletes, duplicate rows and NULLs.

A string literal compared with (or combined in IN, CASE, COALESCE with) a value of another type is cast
to that type with CAST's text forms (`d_date BETWEEN '2002-02-01' AND '2002-03-01'`, `a = '5'`); a
VARCHAR column is not. A bare NULL item of a UNION / INTERSECT / EXCEPT branch takes the other branch's
column type.
"""

from __future__ import annotations

import datetime as dt
import decimal

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dbspark
from dbspark.columnar.sqlforms import parse_text
from dbspark.errors import DataError, SchemaError
from dbspark.ir import expr as ir
from dbspark.ir import functions as fn
from dbspark.testing.sql_oracle import SqlOracle

DDL = """
CREATE TABLE t (a BIGINT, d DATE, n DECIMAL(10,2), f DOUBLE, s VARCHAR, b BOOLEAN);
CREATE TABLE u (a BIGINT, d DATE, s VARCHAR);
"""

STRING_LITERALS = """
CREATE VIEW between_dates AS SELECT a, d FROM t WHERE d BETWEEN '2002-02-01' AND '2002-03-01';
CREATE VIEW eq_date AS SELECT a FROM t WHERE d = '2000-01-03';
CREATE VIEW literal_left AS SELECT a, '2000-01-03' < d AS later FROM t;
CREATE VIEW in_dates AS SELECT a, d IN ('2000-06-30', '2000-07-01') AS hit FROM t;
CREATE VIEW ne_date AS SELECT a, d FROM t WHERE d <> '2000-01-03';
CREATE VIEW date_with_time AS SELECT a FROM t WHERE d < '2000-01-03 10:00:00';
CREATE VIEW case_dates AS SELECT a, CASE WHEN d >= '2002-01-01' THEN 'new' ELSE 'old' END AS age,
  CASE d WHEN '2000-01-03' THEN 1 WHEN '2002-02-14' THEN 2 ELSE 0 END AS k FROM t;
CREATE VIEW coalesce_date AS SELECT a, coalesce(d, '1999-12-31') AS d FROM t;
CREATE VIEW having_date AS SELECT d, count(*) AS c FROM t GROUP BY d HAVING d > '2000-01-03';
CREATE VIEW join_on_date AS SELECT t.a, u.s FROM t JOIN u ON t.d = u.d AND u.d >= '2000-06-30';
CREATE VIEW distinct_from AS SELECT a, d IS DISTINCT FROM '2000-01-03' AS x FROM t;
CREATE VIEW numbers AS SELECT a, a = '5' AS five, '3' < a AS big, n = '1.504' AS n15, f > '2.5e0' AS fx,
  a IN ('5', 7) AS a57 FROM t;
CREATE VIEW boolean_words AS SELECT a FROM t WHERE b = 'yes';
CREATE VIEW subquery_date AS SELECT a FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.a = t.a AND
  u.d > '2000-01-01');
CREATE VIEW scalar_subquery AS SELECT a, (SELECT max(u.d) FROM u WHERE u.a = t.a) = '2002-02-14' AS m
  FROM t;
"""

NULL_ITEMS = """
CREATE VIEW null_first AS SELECT a, NULL AS s FROM t UNION ALL SELECT a, s FROM u;
CREATE VIEW null_second AS SELECT a, s FROM u UNION ALL SELECT a, NULL FROM t;
CREATE VIEW null_date AS SELECT NULL AS d, a FROM t UNION SELECT d, a FROM u;
CREATE VIEW null_decimal_bool AS SELECT NULL AS n, NULL AS b FROM u UNION ALL SELECT n, b FROM t;
CREATE VIEW null_both AS SELECT a, NULL AS x FROM t UNION ALL SELECT a, NULL FROM u;
CREATE VIEW null_three AS SELECT NULL AS x FROM t UNION ALL SELECT NULL FROM u UNION ALL SELECT s FROM u;
CREATE VIEW null_intersect AS SELECT a, (NULL) AS d FROM t INTERSECT SELECT a, d FROM u;
CREATE VIEW null_except AS SELECT a, NULL AS s FROM u EXCEPT ALL SELECT a, s FROM t;
CREATE VIEW null_in_parens AS (SELECT a, NULL AS d FROM t) UNION ALL (SELECT a, d FROM u);
"""

D = dt.date
T1 = (5, D(2000, 1, 3), decimal.Decimal("1.50"), 2.5, "x", True)
T2 = (3, D(2002, 2, 14), decimal.Decimal("-0.25"), 3.0, None, False)
T3 = (7, D(2000, 6, 30), None, None, "y", None)
TN = (None, None, None, None, None, None)
STEPS = [
    ({"t": [T1, T1, T2, TN], "u": [(5, D(2000, 7, 1), "p"), (3, None, None)]}, {}),
    (
        {
            "t": [T3, (5, D(2002, 3, 1), decimal.Decimal("9.99"), 1.0, "z", True)],
            "u": [(7, D(2000, 6, 30), "q")],
        },
        {},
    ),
    ({"u": [(5, D(2000, 7, 1), "p")]}, {"t": [T1, TN], "u": [(3, None, None)]}),
    ({"t": [TN]}, {"t": [T2], "u": [(7, D(2000, 6, 30), "q")]}),
]


@pytest.mark.parametrize("views", [STRING_LITERALS, NULL_ITEMS], ids=["string_literals", "null_items"])
def test_literals_typed_as_duckdb_types_them(pipeline, views):
    pipeline.sql(DDL + views)
    SqlOracle(DDL + views).run(pipeline, STEPS)


def test_null_item_takes_the_other_branch_type():
    p = dbspark.Pipeline(engine="local")
    p.sql(DDL + NULL_ITEMS)
    names = ("null_first", "null_date", "null_decimal_bool", "null_intersect")
    schema = {name: p.relation(name).schema for name in names}
    assert list(schema["null_first"].values()) == [pl.Int64(), pl.String()]
    assert list(schema["null_date"].values()) == [pl.Date(), pl.Int64()]
    assert list(schema["null_decimal_bool"].values()) == [pl.Decimal(10, 2), pl.Boolean()]
    assert list(schema["null_intersect"].values()) == [pl.Int64(), pl.Date()]


@pytest.mark.parametrize(
    ("query", "error", "message"),
    [
        # DuckDB: Conversion Error (invalid date field format / could not convert string)
        ("SELECT a FROM t WHERE d = 'abc'", DataError, r"'abc' to DATE.*line 4, column 44"),
        ("SELECT a FROM t WHERE d IN ('2000-01-01', '2000-02-30')", DataError, r"'2000-02-30' to DATE"),
        ("SELECT a = 'x' AS e FROM t", DataError, r"'x' to BIGINT"),
        ("SELECT a FROM t WHERE a = ''", DataError, r"'' to BIGINT"),
        ("SELECT a FROM t WHERE a = '9999999999999999999'", DataError, r"to BIGINT"),
        ("SELECT n = 'abc' AS e FROM t", DataError, r"'abc' to DECIMAL\(10,2\)"),
        ("SELECT a FROM t WHERE b = 'maybe'", DataError, r"'maybe' to BOOLEAN"),
        ("SELECT coalesce(d, 'never') AS e FROM t", DataError, r"'never' to DATE"),
        # DuckDB: Binder Error, cannot compare VARCHAR and DATE (a column, not a literal)
        ("SELECT a FROM t WHERE s < d", SchemaError, "cannot compare VARCHAR with DATE"),
        (
            "SELECT a FROM t WHERE d > CAST('2000-01-03' AS VARCHAR)",
            SchemaError,
            "cannot compare DATE with VARCHAR",
        ),
    ],
)
def test_literals_duckdb_refuses_are_errors(query, error, message):
    with pytest.raises(error, match=message):
        dbspark.Pipeline(engine="local").sql(DDL + f"CREATE VIEW v AS {query};")


ASCII = st.characters(max_codepoint=127)  # (the local engine's CAST fails on non-ASCII digits: left alone)
TEXTS = st.one_of(
    st.from_regex(r"\A ?[+-]?\d{0,3}(\.\d{0,3})? ?\Z", alphabet=ASCII),
    st.from_regex(r"\A\d{1,4}-\d{1,2}-\d{1,2}( \d{1,2}:\d{2}(:\d{2}(\.\d{1,7})?)?)?\Z", alphabet=ASCII),
    st.sampled_from(["yes", "No", "t", "1", "x", "", "1e2", " 2.5e0 ", ".5", "-", "2000-02-30"]),
)
KINDS = [("int", pl.Int64()), ("decimal", pl.Decimal(6, 2)), ("float", pl.Float64()), ("bool", pl.Boolean())]
KINDS += [("date", pl.Date()), ("datetime", pl.Datetime("us"))]


@settings(max_examples=60, deadline=None)
@given(text=TEXTS, target=st.sampled_from(KINDS))
def test_folded_literal_is_the_engines_cast(text, target):
    """The front end's folding of a literal (`parse_text`) gives the local engine's CAST value or error."""
    from dbspark.engines.local.exprs import evaluate, to_polars

    kind, t = target
    p, s = (6, 2) if kind == "decimal" else (38, 0)
    try:
        folded = parse_text(text, kind, p, s)
    except ValueError:
        folded = "error"
    row = pl.DataFrame({"row": [0]})  # the engine evaluates over a batch's rows, never frame-less
    try:
        out = evaluate(lambda: row.select(x=to_polars(ir.Cast(ir.Lit(text), t)))).item()
    except DataError:
        out = "error"
    assert folded == out, (text, kind)


# ---- integer literals in arithmetic ------------------------------------------------------------------
INT_DDL = "CREATE TABLE w (k BIGINT, i INTEGER, s SMALLINT, d18 DECIMAL(18,4), d4 DECIMAL(4,2));"
INT_LITERALS = """
CREATE VIEW dec_plus AS SELECT k, d18 + 3 AS a, 3 - d18 AS b, d18 - -3 AS c, d4 + 3 AS e, 1.5 + 1 AS f,
  d18 * 3 AS m, d18 + 3000000000 AS big FROM w;
CREATE VIEW int_plus AS SELECT k, k + 1 AS kp, 2 * 3000000000 AS six, -2147483648 + 0 AS low
  FROM w;
"""
# `a`, `b`, `c` and `m` all overflow; both engines evaluate a view's columns in parallel (Polars, Spark
# tasks), so the one reported first varies from run to run
DEC18 = r"DECIMAL overflow in '[-+*]' \(result DECIMAL\(18,4\)\)"
W1 = (1, 5, 7, decimal.Decimal("1.5000"), decimal.Decimal("2.25"))
WN = (None, None, None, None, None)


def test_integer_literals_typed_as_duckdb_types_them(pipeline):
    """An integer literal is INTEGER (BIGINT when it does not fit): `d18 + 3` is DECIMAL(18,4), `d4 + 3`
    DECIMAL(13,2), as DuckDB types them. (Integer columns are all BIGINT, see `frontends/sql/types.py`.)"""
    import duckdb

    pipeline.sql(INT_DDL + INT_LITERALS)
    con = duckdb.connect()
    con.execute(INT_DDL + INT_LITERALS)
    for view in ("dec_plus", "int_plus"):
        want = [r[1] for r in con.execute(f"DESCRIBE {view}").fetchall()]
        got = [fn.sql_name(t) for t in pipeline.relation(view).schema.values()]
        assert got == want, view
    SqlOracle(INT_DDL + INT_LITERALS).run(pipeline, [({"w": [W1, W1, WN]}, {}), ({}, {"w": [W1]})])


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ((1, 5, 7, decimal.Decimal("99999999999999.9999"), None), DEC18),
        ((1, 5, 7, decimal.Decimal("-99999999999999.9999"), None), DEC18),
        ((2**63 - 1, 5, 7, None, None), r"integer overflow in '\+' \(BIGINT\)"),
    ],
)
def test_integer_literal_arithmetic_overflows_where_duckdb_does(pipeline, row, message):
    """The result of `d18 + 3` stays DECIMAL(18,4), so a value past it rejects the step (DuckDB: Out of Range Error) and the views keep what they had."""
    pipeline.sql(INT_DDL + INT_LITERALS)
    oracle = SqlOracle(INT_DDL + INT_LITERALS)
    oracle.run(pipeline, [({"w": [W1]}, {})])
    pipeline.insert("w", [row])
    with pytest.raises(DataError, match=message):
        pipeline.step()
    oracle.check(pipeline, what="after the rejected step")


def test_views_before_the_first_step_are_over_empty_tables(pipeline):
    """Before a step commits (none ran, or the first was rejected) a view is its query over empty
    tables: a global aggregate has its one row, as DuckDB's."""
    ddl = (
        INT_DDL
        + "CREATE VIEW n AS SELECT count(*) AS c, sum(k) AS s FROM w; CREATE VIEW r AS SELECT k FROM w;"
    )
    pipeline.sql(ddl + INT_LITERALS)
    oracle = SqlOracle(ddl + INT_LITERALS)
    oracle.check(pipeline, what="before any step")
    pipeline.insert("w", [(2**63 - 1, 5, 7, None, None)])
    with pytest.raises(DataError):
        pipeline.step()
    oracle.check(pipeline, what="after a rejected first step")
    oracle.run(pipeline, [({"w": [W1]}, {})])
