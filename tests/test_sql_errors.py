"""SQL front-end errors: each names the fault and its line and column, and declares nothing."""

from __future__ import annotations

import re

import pytest

import dbspark
from dbspark.errors import (
    DbsparkError,
    ParseError,
    SchemaError,
    UnknownNameError,
    UnsupportedError,
    WeightError,
)

DDL = """CREATE TABLE t (a BIGINT, b VARCHAR, c DOUBLE, d DATE);
CREATE TABLE u (a BIGINT PRIMARY KEY, e DECIMAL(10, 2));"""

CASES = [
    # (query on line 2, error class, message fragment, text at the fault's position: its first occurrence
    # in the query, or with a leading ^ its last)
    ("SELECT a FROM t WHERE (b", ParseError, "Expecting )", None),
    ("SELECT a FROM nowhere", UnknownNameError, "unknown table or view nowhere", "nowhere"),
    ("SELECT x FROM t", UnknownNameError, "unknown column x", "x"),
    ("SELECT t.x FROM t", UnknownNameError, "unknown column t.x", "t.x"),
    ("SELECT a FROM t, u", SchemaError, "column reference a is ambiguous", "a"),
    ("SELECT a FROM t WHERE b + 1 > 2", SchemaError, "arithmetic '+' on non-numeric type", "b +"),
    ("SELECT upper(a) FROM t", SchemaError, "upper", "upper"),
    ("SELECT a, count(*) FROM t GROUP BY b", SchemaError, "must appear in the GROUP BY clause", "a"),
    ("SELECT a FROM t WHERE sum(c) > 1", SchemaError, "aggregate SUM(c) is not allowed here", "sum"),
    ("SELECT foo(a) FROM t", UnsupportedError, "function foo()", "foo"),
    # dbspark's own functions (the checks of `operators.checks`) are not SQL
    ("SELECT __repr(a) FROM t", UnsupportedError, "function __repr()", "__repr"),
    ("SELECT __fail('DataError', b) FROM t", UnsupportedError, "function __fail()", "__fail"),
    ("SELECT median(c) OVER () FROM t", UnsupportedError, "the window function MEDIAN", "median"),
    ("SELECT a FROM t UNION SELECT a, e FROM u", SchemaError, "UNION of 1 and 2 columns", "a"),
    ("SELECT a FROM t LIMIT a", UnsupportedError, "LIMIT that is not a constant", "^a"),
    # (a scalar subquery that may return several rows is supported: tests/test_sql_scalar_subqueries.py)
    (
        "SELECT a FROM t WHERE a = (SELECT u.a FROM u WHERE u.e = t.c LIMIT 1)",
        UnsupportedError,
        "LIMIT in a correlated subquery",
        "1)",
    ),
    ("SELECT a FROM t ORDER BY 3 LIMIT 1", SchemaError, "ORDER BY position 3", "3"),
    ("SELECT CAST('x' AS DATE) FROM t", dbspark.DataError, "cannot cast 'x'", "'x'"),
    ("SELECT a FROM t WHERE d > DATE '2020-01-01' + INTERVAL 1 FORTNIGHT", DbsparkError, "", None),
]


@pytest.mark.parametrize(("query", "cls", "fragment", "at"), CASES, ids=[c[0][:40] for c in CASES])
def test_sql_errors_name_the_fault_and_its_position(query, cls, fragment, at):
    p = dbspark.Pipeline(engine="local")
    p.sql(DDL)
    with pytest.raises(cls) as info:
        p.sql("CREATE VIEW ok AS SELECT a FROM t;\nCREATE VIEW v AS " + query)
    msg = str(info.value)
    assert fragment in msg
    if at is not None:
        m = re.search(r"line (\d+), column (\d+)", msg)
        assert m is not None, msg
        # the view statement is on line 2, after "CREATE VIEW v AS " (17 characters)
        q = query.lower()
        col = 17 + (q.rindex(at[1:].lower()) if at.startswith("^") else q.index(at.lower())) + 1
        assert (int(m.group(1)), int(m.group(2))) == (2, col), msg
    # nothing of the failed text was declared: not even the view before the faulty one
    assert p.views == [] and sorted(p.tables) == ["t", "u"]
    p.sql("CREATE VIEW ok AS SELECT a FROM t")  # the names are still free


def test_unsupported_statements_and_types():
    p = dbspark.Pipeline(engine="local")
    with pytest.raises(UnsupportedError, match="statement INSERT"):
        p.sql("INSERT INTO t VALUES (1)")
    with pytest.raises(UnsupportedError, match="column type"):
        p.sql("CREATE TABLE w (a INTERVAL)")
    with pytest.raises(SchemaError, match="declared twice"):
        p.sql("CREATE TABLE w (a BIGINT, a BIGINT)")
    with pytest.raises(UnknownNameError, match="primary key column z"):
        p.sql("CREATE TABLE w (a BIGINT, PRIMARY KEY (z))")
    p.sql("CREATE TABLE w (a BIGINT)")
    with pytest.raises(SchemaError, match="already declared"):
        p.sql("CREATE TABLE w (b BIGINT)")
    with pytest.raises(SchemaError, match="already declared"):
        p.sql("CREATE VIEW w AS SELECT 1 AS x FROM w")


def test_syntax_error_position_on_a_later_line():
    p = dbspark.Pipeline(engine="local")
    with pytest.raises(ParseError) as info:
        p.sql("CREATE TABLE t (a BIGINT);\n\nCREATE VIEW v AS SELECT a FROM t WHERE a IN (1, 2")
    assert info.value.line == 3
    assert p.tables == []


@pytest.mark.parametrize(
    ("text", "line", "column", "near"),
    [
        ("CREATE TABLE t (id BIGINT);\nCREATE VIEW v AS SELEC id FROM t;", 2, 27, "FROM"),
        ("CREATE TABLE t (id BIGINT);\n  CREATE VIEW v AS\n   SELECT id FROM t WHERE id >;", 3, 30, ">"),
        ("CREATE VIEW v AS SELECT 1 +;", 1, 27, "+"),
    ],
)
def test_a_typo_is_a_parse_error_at_its_token(text: str, line: int, column: int, near: str, caplog) -> None:
    """A statement sqlglot cannot parse is a ParseError naming the token and where it is (not an
    'unsupported statement', and no warning from sqlglot on the log)."""
    p = dbspark.Pipeline(engine="local")
    with pytest.raises(ParseError) as info:
        p.sql(text)
    assert (info.value.line, info.value.column) == (line, column), str(info.value)
    assert repr(near) in str(info.value)
    assert not [r for r in caplog.records if r.name.startswith("sqlglot")]
    assert p.tables == [] and p.views == []


def test_a_sum_overflow_names_the_view_and_column(pipeline) -> None:
    """The error of a step whose SUM leaves BIGINT names the view, the aggregate as written and its
    output column (not the internal `_a0` / `_x1`), the same on both engines; the step is rejected."""
    pipeline.sql("CREATE TABLE t (x BIGINT); CREATE VIEW s AS SELECT sum(x + 1) AS total FROM t")
    pipeline.insert("t", [(9223372036854775806,)])
    pipeline.step()
    pipeline.insert("t", [(1,)])
    with pytest.raises(WeightError) as info:
        pipeline.step()
    assert "view 's', SUM(x + 1) AS total = 9223372036854775809 does not fit in a 64-bit integer" in str(
        info.value
    )
    assert pipeline.view("s").to_dict() == {(9223372036854775807,): 1}
