"""Spark SQL's functions in the Spark dialect (`frontends/sql/spark_functions.py`), each checked against
Spark SQL itself: every expression of `CATALOG` is evaluated by Spark SQL over `ROWS` and by dbspark (a
view of the same text, both engines), and the two must agree row for row; every expression of `FAILING`
must fail in both. The catalog covers every function the dialect keeps or rewrites (a test checks it), so
a function can only be added to the dialect with its check against Spark."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from typing import Any

import pytest
import sqlglot
from sqlglot import exp

import dbspark
from dbspark.errors import DbsparkError, UnsupportedError
from dbspark.frontends.sql.spark import SparkAnsi
from dbspark.frontends.sql.spark_functions import NAMED, REWRITES, SAME

SCHEMA = "k INT, a INT, b INT, x DOUBLE, s STRING, d DATE, ts TIMESTAMP, m DECIMAL(10,2)"
T = dt.datetime
ROWS = [
    (1, 1, 2, 2.5, "a,b,c", dt.date(2024, 1, 31), T(2024, 1, 31, 10, 30, 15), Decimal("1.25")),
    (
        2,
        -3,
        4,
        -2.7,
        " Hello World ",
        dt.date(2024, 2, 29),
        T(2024, 2, 29, 23, 59, 59, 500000),
        Decimal("-7.55"),
    ),
    (3, 7, -2, 1e10, "", dt.date(2023, 12, 31), T(2023, 12, 31, 0, 0, 0), Decimal("0.05")),
    (4, None, None, None, None, None, None, None),
    (5, 0, 5, 0.5, "xYz", dt.date(2024, 3, 3), T(2024, 3, 3, 12, 0, 0, 123456), Decimal("100.50")),
    (6, -8, 3, -0.5, "héllo, wörld", dt.date(2000, 1, 1), T(1999, 12, 31, 23, 0, 1), Decimal("-0.50")),
    (7, 12, -5, 1.5e-5, "12", dt.date(2024, 12, 30), T(2024, 7, 4, 6, 7, 8), Decimal("2.50")),
    (8, 2, 1, -0.0, "2024-05-06", dt.date(1970, 1, 1), T(1970, 1, 1, 0, 0, 0), Decimal("-2.45")),
]
CATALOG = [
    # strings
    "upper(s)", "lower(s)", "length(s)", "char_length(s)", "substring(s, 2)", "substring(s, -2, 1)",
    "substr(s, 0, 2)", "concat(s, '!')", "concat(s, a)", "concat_ws('-', s, 'y')", "replace(s, 'l', 'L')",
    "instr(s, 'l')", "locate('l', s)", "left(s, 2)", "right(s, 2)", "reverse(s)", "split_part(s, ',', 2)",
    "regexp_extract(s, '([a-z]+)', 1)", "startswith(s, 'x')", "endswith(s, 'z')", "contains(s, 'Y')",
    "trim(s)", "ltrim(s)", "rtrim(s)", "s LIKE '%l%'", "s ILIKE 'X%'", "nvl(s, 'none')",
    # numbers
    "abs(a)", "abs(m)", "sign(x)", "signum(a)", "greatest(a, b)", "least(a, b, 0)", "exp(x / 1e9)",
    "pow(x, 2)", "power(a, 3)", "try_divide(a, b)", "sqrt(x)", "ln(x)", "log10(x)", "log2(x)",
    "log(3, x)", "pmod(a, b)", "a % b", "a DIV b", "a / b", "m / 3", "floor(x)", "ceil(x)", "ceiling(m)",
    "floor(m)", "round(x)", "round(m, 1)", "round(a)", "CAST(x / 1e5 AS INT)", "CAST(x AS BIGINT)",
    "CAST(m AS INT)", "CAST(m AS SMALLINT)", "CAST(a AS TINYINT)", "CAST(a AS STRING)", "CAST(m AS STRING)",
    "CAST(d AS STRING)", "CAST(ts AS STRING)", "CAST(x AS DECIMAL(14, 2))", "CAST(a AS DOUBLE)",
    "CAST(m AS DOUBLE)", "int(m)", "x::bigint",
    # NULLs and conditions
    "coalesce(a, b, 0)", "nvl(a, 0)", "ifnull(b, 7)", "nullif(a, b)", "nvl2(a, b, 0)", "isnull(a)",
    "isnotnull(s)", "IF(a > b, a, b)", "CASE WHEN a IS NULL THEN -1 WHEN a > 0 THEN a ELSE b END",
    "CASE a WHEN 1 THEN 'one' ELSE 'other' END", "a BETWEEN 0 AND 2", "a <=> b", "NOT (a > b)",
    # dates and times
    "year(d)", "month(d)", "day(d)", "dayofmonth(d)", "dayofweek(d)", "weekday(d)", "dayofyear(d)",
    "quarter(d)", "hour(ts)", "minute(ts)", "second(ts)", "to_date(ts)", "to_date(CAST(d AS STRING))",
    "date_add(d, 3)", "date_add(d, a)", "date_sub(d, 2)", "add_months(d, 1)", "add_months(d, -13)",
    "datediff(d, DATE'2024-01-01')", "datediff(ts, d)", "last_day(d)", "trunc(d, 'MM')",
    "trunc(d, 'YEAR')", "trunc(d, 'QUARTER')", "trunc(d, 'WEEK')", "date_trunc('HOUR', ts)",
    "date_trunc('MONTH', ts)", "date_trunc('DD', ts)", "date_format(ts, 'yyyy-MM-dd HH:mm:ss')",
    "date_format(d, 'dd/MM/yy EEE MMM')", "date_format(ts, 'h:mm a D')",
    "date_format(ts, \"yyyy-MM-dd'T'HH:mm:ss.SSS\")", "date_format(ts, 'EEEE d MMMM y, H:m:s SSSSSS')",
    "d + 1", "ts > TIMESTAMP'2024-01-01 00:00:00'",
]  # fmt: skip
# Spark's own results differ from C's libm in the last bit for these (StrictMath), and log(b, x) is a
# quotient of two: compared within 2 ulps
NEAR = {"exp(x / 1e9)", "log10(x)", "log2(x)", "log(3, x)", "ln(x)", "pow(x, 2)"}
# each fails on some row in Spark (ANSI mode) and must fail in dbspark
FAILING = [
    "CAST(s AS INT)", "CAST(x AS INT)", "CAST(a * 1000 AS TINYINT)", "a / (b - b)", "a % (b - b)",
    "pmod(a, b - b)", "CAST(x * 1e10 AS BIGINT)", "to_date(s)",
]  # fmt: skip
# each is refused, naming the function as the text spells it
REFUSED = {
    "bround(x, 0)": "bround()", "regexp_replace(s, 'a', 'b')": "regexp_replace()", "lpad(s, 3, 'x')": "lpad()",
    "unix_timestamp(ts)": "unix_timestamp()", "md5(s)": "md5()", "round(x, 2)": "round of a DOUBLE to 2",
    "to_date(s, 'yyyy')": "to_date with a pattern", "date_format(ts, 'QQQ')": "date_format pattern 'QQQ'",
    "trunc(d, 'DAY')": "the unit 'day' of trunc()", "try_cast(s AS INT)": "try_cast()",
    "trim(BOTH 'x' FROM s)": "trim with characters", "floor(x, 1)": "floor() with a scale",
    "current_date()": "current_date()", "first(a)": "first()", "collect_list(a)": "collect_list()",
}  # fmt: skip


def test_lateral_view_is_refused_by_name() -> None:
    p = dbspark.Pipeline(engine="local")
    try:
        p.sql(f"CREATE TABLE t ({SCHEMA})", dialect="spark")
        with pytest.raises(UnsupportedError, match=r"LATERAL VIEW .* at line 2"):
            p.sql(
                "CREATE VIEW v AS SELECT k, v FROM t\n  LATERAL VIEW explode(array(a, b)) e AS v",
                dialect="spark",
            )
    finally:
        p.close()


def _ulps(a: float, b: float) -> float:
    return abs(a - b) / math.ulp(max(abs(a), abs(b))) if a != b else 0.0


def _same(e: str, got: Any, want: Any) -> bool:
    if isinstance(want, float) and isinstance(got, float):
        if math.isnan(want) or math.isnan(got):
            return math.isnan(want) and math.isnan(got)
        return got == want or (e in NEAR and _ulps(got, want) <= 2)
    if isinstance(want, dt.datetime) and isinstance(got, dt.datetime):
        return got.replace(tzinfo=None) == want.replace(tzinfo=None)
    return bool(got == want) and type(got) is type(want)


def _spark_rows(spark: Any, query: str) -> list[tuple] | Exception:
    spark.createDataFrame(ROWS, SCHEMA).createOrReplaceTempView("t")
    try:
        return [tuple(r) for r in spark.sql(query).collect()]
    except Exception as e:  # (Spark's ANSI errors)
        return e


def _pipeline(engine: str, spark: Any) -> dbspark.Pipeline:
    p = dbspark.Pipeline(engine=engine, spark=spark) if engine == "spark" else dbspark.Pipeline(engine=engine)
    p.sql(f"CREATE TABLE t ({SCHEMA})", dialect="spark")
    return p


@pytest.mark.spark
@pytest.mark.parametrize("engine", ["local", "spark"])
def test_every_spark_function_matches_spark_sql(spark_session: Any, engine: str) -> None:
    spark = spark_session
    cols = ", ".join(f"{e} AS c{i}" for i, e in enumerate(CATALOG))
    want = _spark_rows(spark, f"SELECT k, {cols} FROM t")
    assert not isinstance(want, Exception), want
    p = _pipeline(engine, spark)
    try:
        p.sql(f"CREATE VIEW v AS SELECT k, {cols} FROM t", dialect="spark")
        p.insert("t", ROWS)
        p.step()
        got = {row[0]: row[1:] for row in p.view("v").to_dict()}
    finally:
        p.close()
    wrong = [
        f"{e}: k={r[0]} Spark {r[i + 1]!r}, dbspark {got[r[0]][i]!r}"
        for r in sorted(want, key=lambda r: r[0])
        for i, e in enumerate(CATALOG)
        if not _same(e, got[r[0]][i], r[i + 1])
    ]
    assert not wrong, "\n".join(wrong)


@pytest.mark.spark
@pytest.mark.parametrize("engine", ["local", "spark"])
@pytest.mark.parametrize("expr", FAILING)
def test_what_fails_in_spark_fails_in_dbspark(spark_session: Any, engine: str, expr: str) -> None:
    assert isinstance(_spark_rows(spark_session, f"SELECT {expr} FROM t"), Exception)
    p = _pipeline(engine, spark_session)
    try:
        p.sql(f"CREATE VIEW v AS SELECT k, {expr} AS c FROM t", dialect="spark")
        p.insert("t", ROWS)
        with pytest.raises(DbsparkError, match=r"step 1 rejected"):
            p.step()
    finally:
        p.close()


@pytest.mark.parametrize("expr, message", REFUSED.items())
def test_other_spark_functions_are_refused_by_name(expr: str, message: str) -> None:
    p = dbspark.Pipeline(engine="local")
    try:
        p.sql(f"CREATE TABLE t ({SCHEMA})", dialect="spark")
        # (at the function's line; a refusal found once types are known, at the statement's first line)
        with pytest.raises(UnsupportedError, match=rf"{_re(message)}.* at line [23]"):
            p.sql(f"\nCREATE VIEW v AS\n  SELECT k, {expr} AS c FROM t", dialect="spark")
    finally:
        p.close()


def _re(text: str) -> str:
    import re

    return re.escape(text)


def test_the_catalog_covers_every_function_of_the_dialect() -> None:
    """Every function the dialect keeps or rewrites is checked against Spark: here, or (aggregates and
    window functions) in `test_spark_dialect.py`'s generated queries."""
    from tests.test_spark_dialect import AGGS, GROUPINGS, WINDOWS

    seen: set[Any] = set()
    for e in [*CATALOG, *FAILING, *AGGS, *GROUPINGS, *(f"{w} OVER (ORDER BY a)" for w in WINDOWS)]:
        tree = sqlglot.parse_one(f"SELECT {e} FROM t", dialect=SparkAnsi)
        for node in tree.walk():
            seen.add(str(node.this).lower() if isinstance(node, exp.Anonymous) else type(node))
    missing = (set(SAME) | set(REWRITES) | set(NAMED)) - seen
    assert not missing, f"functions of the dialect without a check against Spark: {missing}"
