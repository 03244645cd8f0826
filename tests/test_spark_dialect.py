"""Spark SQL's dialect (`frontends/sql/spark.py`): generated queries written in Spark SQL, maintained by
dbspark on the Spark engine, checked after every step against Spark SQL itself running the same text
on the same table (ANSI mode, Spark 4's default): the same rows, or both failing (a division by zero,
a string that is not a number). Plus the translation's spelling and its refusals."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import dbspark
from dbspark.errors import DbsparkError, SchemaError, UnsupportedError
from dbspark.frontends.sql.spark import to_duckdb
from dbspark.testing.sql_oracle import compare_frames, view_frame

TABLE = "CREATE TABLE t (a INT, b INT, s STRING, d DECIMAL(10,2), x DOUBLE, dt DATE)"
SPARK_SCHEMA = "a INT, b INT, s STRING, d DECIMAL(10,2), x DOUBLE, dt DATE"
SMALL = "CREATE TABLE t (a INT, b INT, s STRING, d DECIMAL(10,2))"
OTHER = "CREATE TABLE u (a INT, y STRING)"  # the other side of the joins
INTS = [
    "a", "b", "a + b", "a - b", "a * b", "a DIV b", "a % b", "abs(a)", "nvl(a, 0)", "coalesce(a, b)",
    "IF(a > b, a, b)", "CASE WHEN a IS NULL THEN -1 WHEN a > 0 THEN a ELSE b END", "length(s)",
    "instr(s, 'a')", "ifnull(b, 7)", "nullif(a, b)", "pmod(a, b)", "CAST(x AS INT)", "CAST(d AS INT)",
    "floor(x)", "ceil(d)", "round(x)", "dayofweek(dt)", "weekday(dt)", "year(dt)", "month(dt)",
    "datediff(dt, DATE'2024-02-01')", "dayofyear(dt)", "CAST(s AS INT)",
]  # fmt: skip
STRINGS = [
    "s", "upper(s)", "concat(s, 'x')", "concat_ws('-', s, 'y')", "substr(s, 2)", "nvl(s, 'none')",
    "CAST(a AS STRING)", "lower(concat(s, s))", "trim(s)", "date_format(dt, 'yyyy/MM/dd EEE')",
    "CAST(dt AS STRING)", "CAST(d AS STRING)",
]  # fmt: skip
OTHERS = [
    "a / b", "d", "d + 1", "d * 2", "CAST(d AS DOUBLE) / 4", "d / 3", "d / -7", "a / d", "d / (d + 1)",
    "(d * 3) / 0.07", "a > b", "a <=> b", "s LIKE 'a%'", "s IS NULL", "x", "x * 2", "sqrt(x)", "ln(x)",
    "sign(x)", "round(d, 1)", "dt", "date_add(dt, 3)", "date_sub(dt, a)", "add_months(dt, 1)",
    "last_day(dt)", "trunc(dt, 'MM')", "isnull(s)", "CAST(x AS DECIMAL(8, 2))", "power(x, 2)",
]  # fmt: skip
PREDICATES = [
    "a > 0", "s LIKE 'a%'", "a IS NOT NULL AND b IS NOT NULL", "b IN (1, 2)", "NOT (a <=> b)", "d > 1",
    "x < 1", "dt >= DATE'2024-02-29'", "isnotnull(s)",
]  # fmt: skip
AGGS = [
    "COUNT(*)", "SUM(b)", "MIN(s)", "MAX(a)", "AVG(b)", "COUNT(s)", "SUM(d)", "AVG(d)", "SUM(d) / 3",
    "stddev(b)", "stddev_samp(x)", "stddev_pop(b)", "variance(x)", "var_samp(b)", "var_pop(x)",
    "median(b)", "COUNT(DISTINCT s)", "MAX(dt)", "MIN(x)", "SUM(x)", "bool_and(a > 0)", "bool_or(s IS NULL)",
    "bit_or(a)", "bit_and(b)", "bit_xor(a - b)",
]  # fmt: skip
WINDOWS = [
    "row_number()", "rank()", "dense_rank()", "percent_rank()", "cume_dist()", "ntile(2)", "lag(a)",
    "lead(b, 1, 0)", "first_value(s)", "last_value(b)", "sum(b)", "count(*)", "max(x)",
]  # fmt: skip
GROUPINGS = ["grouping(s)", "grouping(k2)", "grouping_id(s, k2)", "grouping_id()"]
GROUP_FORMS = [  # the standard's and Spark's (Hive's) spellings
    "ROLLUP (s, a % 2)",
    "CUBE (s, a % 2)",
    "s, a % 2 WITH ROLLUP",
    "s, a % 2 WITH CUBE",
    "s, a % 2 GROUPING SETS ((s, a % 2), (s), ())",
    "s, a % 2 GROUPING SETS ((a % 2, s), (s))",
]
JOINS = ["LEFT SEMI JOIN", "LEFT ANTI JOIN", "JOIN", "LEFT JOIN"]


@st.composite
def queries(draw: st.DrawFn) -> str:
    where = draw(st.one_of(st.just(""), st.sampled_from(PREDICATES).map(lambda p: f" WHERE {p}")))
    shape = draw(st.sampled_from(["select", "group", "top", "window", "join", "rollup"]))
    if shape == "rollup":
        agg = draw(st.sampled_from(AGGS))
        g = draw(st.sampled_from(GROUPINGS)).replace("k2", "a % 2")
        group = draw(st.sampled_from(GROUP_FORMS))
        return f"SELECT s, a % 2 AS k2, {agg} AS g, {g} AS gs FROM t{where} GROUP BY {group}"
    if shape == "group":
        key = draw(st.sampled_from(["s", "a", "a % 3", "nvl(s, 'z')", "month(dt)"]))
        aggs = draw(st.lists(st.sampled_from(AGGS), min_size=1, max_size=3, unique=True))
        cols = ", ".join(f"{a} AS g{i}" for i, a in enumerate(aggs))
        return f"SELECT {key} AS k, {cols} FROM t{where} GROUP BY {key}"
    if shape == "window":  # ordered by every column: ties are equal rows
        call = draw(st.sampled_from(WINDOWS))
        part = draw(st.sampled_from(["", "PARTITION BY s ", "PARTITION BY a % 2 "]))
        over = f"{part}ORDER BY a, b DESC, s, d, x, dt" if call != "count(*)" else part.strip()
        return f"SELECT a, b, s, {call} OVER ({over}) AS w FROM t{where}"
    if shape == "join":
        join = draw(st.sampled_from(JOINS))
        cols = "t.a, t.s" + ("" if "SEMI" in join or "ANTI" in join else ", u.y")
        on = draw(st.sampled_from(["t.a = u.a", "t.a = u.a AND u.y = 'p'", "t.b <=> u.a"]))
        filt = draw(st.sampled_from(["", " WHERE t.b > 0", " WHERE t.s IS NOT NULL"]))
        return f"SELECT {cols} FROM t {join} u ON {on}{filt}"
    exprs = draw(st.lists(st.sampled_from(INTS + STRINGS + OTHERS), min_size=1, max_size=3, unique=True))
    cols = ", ".join(f"{e} AS c{i}" for i, e in enumerate(exprs))
    if shape == "top":  # ordered by every column: ties are equal rows
        order = ", ".join(f"c{i}{draw(st.sampled_from(['', ' DESC']))}" for i in range(len(exprs)))
        return f"SELECT {cols} FROM t{where} ORDER BY {order} LIMIT {draw(st.integers(1, 4))}"
    return f"SELECT {cols} FROM t{where}"


ROW = st.tuples(
    st.one_of(st.none(), st.integers(-3, 3)),
    st.one_of(st.none(), st.integers(-2, 2)),
    st.one_of(st.none(), st.sampled_from(["a", "ab", "b", " c ", "", "12"])),
    st.one_of(st.none(), st.decimals(-100, 100, places=2)),
    st.one_of(st.none(), st.sampled_from([0.0, -0.5, 2.5, 1.75, -3.25, 1e6, 0.125])),
    st.one_of(
        st.none(),
        st.sampled_from(
            [dt.date(2024, 1, 31), dt.date(2024, 2, 29), dt.date(2023, 12, 31), dt.date(2000, 3, 1)]
        ),
    ),
)
U_ROWS = st.lists(
    st.tuples(st.one_of(st.none(), st.integers(-3, 3)), st.sampled_from(["p", "q"])), max_size=4
)
STEPS = st.lists(st.tuples(st.lists(ROW, max_size=5), st.integers(0, 3)), min_size=1, max_size=3)


def spark_answer(spark: Any, rows: list[tuple], others: list[tuple], query: str) -> pl.DataFrame | Exception:
    spark.createDataFrame(rows, SPARK_SCHEMA).createOrReplaceTempView("t")
    spark.createDataFrame(others, "a INT, y STRING").createOrReplaceTempView("u")
    try:
        got = spark.sql(query).toArrow()
    except Exception as e:  # (Spark's errors: ArithmeticException, NumberFormatException, ...)
        return e
    return pl.from_arrow(got)  # type: ignore[return-value]


@pytest.mark.spark
@pytest.mark.parametrize("engine", ["spark", "local"])
@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(queries(), STEPS, U_ROWS)
# a quotient's scale follows Spark's type of a sum, difference or product under it (d + 1 of a
# DECIMAL(10, 2) is Spark's DECIMAL(11, 2), DuckDB's DECIMAL(13, 2)): found by this test
@example(
    query="SELECT d / (d + 1) AS c0, d / (2 * d - 3) AS c1, (d * d) / CAST(a AS DECIMAL(10, 0)) AS c2 FROM t",
    steps=[
        ([(None, None, None, Decimal("0.01"), None, None), (7, 1, "p", Decimal("-12345.67"), 1.5, None)], 0)
    ],
    others=[],
)
# Spark's GROUPING SETS after the keys are the sets listed, not a product with the keys (DuckDB's reading
# of the same text): a wrong answer before the translation wrote them in the standard's form
@example(
    query="SELECT s, a % 2 AS k2, COUNT(*) AS g, grouping_id() AS gs FROM t GROUP BY s, a % 2 "
    "GROUPING SETS ((s, a % 2), (s), ())",
    steps=[
        ([(1, 1, "a", None, None, None), (2, 1, "a", None, None, None), (3, 0, "b", None, None, None)], 0)
    ],
    others=[],
)
def test_spark_sql_text_matches_spark_sql(
    spark_engine: Any, engine: str, query: str, steps: list, others: list
) -> None:
    """On both engines (the local engine's DECIMAL division is its own code, Spark's is Spark's)."""
    spark = spark_engine.spark
    assert spark.conf.get("spark.sql.ansi.enabled") == "true"  # Spark 4's default, which the dialect reads
    p = (
        dbspark.Pipeline(engine="spark", spark=spark)
        if engine == "spark"
        else dbspark.Pipeline(engine="local")
    )
    try:
        p.sql(f"{TABLE} USING parquet; {OTHER}; CREATE MATERIALIZED VIEW q AS {query}", dialect="spark")
        if others:
            p.insert("u", others)
        live: list[tuple] = []
        for n, (ins, ndel) in enumerate(steps):
            gone, kept = live[:ndel], live[ndel:]
            if ins:
                p.insert("t", ins)
            if gone:
                p.delete("t", gone)
            expected = spark_answer(spark, kept + ins, others, query)
            if isinstance(expected, Exception):
                with pytest.raises(DbsparkError):
                    p.step()
                return
            p.step()
            live = kept + ins
            differ = compare_frames(
                view_frame(p.view("q")), expected, f"{query} after step {n + 1}", label="dbspark"
            )
            assert differ is None, differ
    finally:
        p.close()


def test_the_translation_spells_spark_in_duckdb() -> None:
    text = "CREATE TABLE t (a INT, `my col` STRING) USING delta;\n\nCREATE MATERIALIZED VIEW v AS\n  SELECT nvl(`my col`, 'x') FROM t ORDER BY a LIMIT 1"
    out = to_duckdb(text)
    assert out.splitlines()[0] == 'CREATE TABLE t (a INT, "my col" TEXT);'
    assert out.splitlines()[2].startswith("CREATE VIEW v AS SELECT COALESCE(\"my col\", 'x') FROM t")
    assert "ORDER BY a NULLS FIRST" in out  # Spark's NULL order, spelled out
    assert "a / 2" in to_duckdb("SELECT a / 2 FROM t")  # a non-zero constant divisor needs no check


def test_grouping_id_names_every_grouping_column() -> None:
    """Spark's grouping_id() takes every grouping column in order, or none (all of them); another list is
    Spark's analysis error, refused when the view is defined."""
    p = dbspark.Pipeline(engine="local")
    with pytest.raises(SchemaError, match=r"names every grouping column in order \(a, b\)"):
        p.sql(
            f"{SMALL}; CREATE VIEW v AS SELECT grouping_id(b) FROM t GROUP BY a, b WITH CUBE", dialect="spark"
        )


def test_a_decimal_divided_by_an_integer_column_is_refused() -> None:
    """Its scale in Spark follows the integer's declared width, which dbspark does not keep."""
    for q in ("d / a", "d / (d + a)", "SUM(d) / MAX(a)"):
        p = dbspark.Pipeline(engine="local")
        with pytest.raises(UnsupportedError, match="declared width"):
            p.sql(f"{SMALL}; CREATE VIEW v AS SELECT {q} AS c FROM t", dialect="spark")
    p = dbspark.Pipeline(engine="local")
    p.sql(
        f"{SMALL}; CREATE VIEW v AS SELECT a / d, d / 3, d / CAST(a AS DECIMAL(10, 0)) FROM t",
        dialect="spark",
    )


def test_ansi_errors_and_refusals() -> None:
    p = dbspark.Pipeline(engine="local")
    try:
        p.sql(f"{SMALL}; CREATE VIEW v AS SELECT a DIV b AS q, CAST(s AS INT) AS n FROM t", dialect="spark")
        p.insert("t", [(1, 0, "1", Decimal(1))])
        with pytest.raises(DbsparkError, match=r"DIVIDE_BY_ZERO"):
            p.step()
        p.insert("t", [(1, 1, "x", Decimal(1))])
        with pytest.raises(DbsparkError, match=r"'x'"):  # ANSI: a CAST that fails is an error
            p.step()
    finally:
        p.close()
    p = dbspark.Pipeline(engine="local")
    p.sql(f"{SMALL}; CREATE VIEW s AS SELECT sum(d) AS x, sum(DISTINCT d) AS y FROM t", dialect="spark")
    p.sql("CREATE VIEW a AS SELECT avg(d) AS m, d / d AS q, d / 7 AS r FROM t GROUP BY d", dialect="spark")
    types = {**p.relation("s").schema, **p.relation("a").schema}  # as Spark types them
    assert types == {
        "x": pl.Decimal(20, 2),
        "y": pl.Decimal(20, 2),
        "m": pl.Decimal(14, 6),
        "q": pl.Decimal(23, 13),
        "r": pl.Decimal(14, 6),
    }
    with pytest.raises(UnsupportedError, match=r"AVG\(DISTINCT\) of a DECIMAL in Spark's dialect at line 2"):
        p.sql("\nCREATE VIEW b AS\n  SELECT avg(DISTINCT d) AS q FROM t", dialect="spark")
    p.sql("CREATE VIEW big AS SELECT CAST(d AS DECIMAL(38, 2)) / 0.000001 AS q FROM t", dialect="spark")
    p.insert("t", [(1, 1, "x", Decimal("99999999.99"))])
    p.step()  # DECIMAL(38, 6): 99999999990000.000000 fits
    with pytest.raises(
        DbsparkError, match=r"nothing declared: \[NUMERIC_VALUE_OUT_OF_RANGE\]"
    ):  # at its backfill
        p.sql(
            "CREATE VIEW bigger AS SELECT CAST(d * 1e30 AS DECIMAL(38, 0)) / 0.01 AS q FROM t",
            dialect="spark",
        )
    p.sql(
        "CREATE VIEW bigger AS SELECT CAST(d * 1e30 AS DECIMAL(38, 0)) / 0.01 AS q FROM t WHERE a > 1",
        dialect="spark",
    )
    p.insert("t", [(2, 2, "y", Decimal("99999999.99"))])
    with pytest.raises(DbsparkError, match=r"step 2 rejected.*NUMERIC_VALUE_OUT_OF_RANGE"):
        p.step()
    with pytest.raises(UnsupportedError, match="the SQL dialect 'mysql'"):
        p.sql(SMALL, dialect="mysql")
    p.close()
