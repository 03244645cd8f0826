"""SQL window functions (`frontends/sql/windows.py`, `operators/window.py`) against DuckDB: after every step of
a random change stream (NULL partitions and order keys, ties, duplicates, deletes, empty steps), every
view equals DuckDB's answer on the current table, on both engines.

Functions whose value depends on the order of tied rows (ROW_NUMBER, NTILE, LAG, LEAD, FIRST_VALUE,
LAST_VALUE, ROWS frames) are ordered by every column here: DuckDB leaves ties to its plan, dbspark
breaks them by the other columns; RANGE frames hold whole peer groups, so they are ordered by one
column (FIRST_VALUE / LAST_VALUE of that column). Identical rows stay interchangeable only within one order, so the
sliding MIN / MAX views hold one window order each.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from hypothesis import strategies as st

from dbspark.errors import SchemaError, UnsupportedError
from dbspark.testing.engines import engine_given, pipeline_on
from dbspark.testing.sql_oracle import SqlOracle, fifo_steps

ALL = "o, x, s"  # a total order of a partition's rows (up to duplicates)
DDL = f"""
CREATE TABLE t (p INTEGER, o INTEGER, x INTEGER, s VARCHAR);
CREATE VIEW ranks AS SELECT p, o, x, s,
    RANK() OVER (PARTITION BY p ORDER BY o) AS rk,
    DENSE_RANK() OVER (PARTITION BY p ORDER BY o DESC NULLS FIRST) AS dr,
    PERCENT_RANK() OVER (PARTITION BY p ORDER BY o) AS pr,
    CUME_DIST() OVER (ORDER BY o) AS cd,
    ROW_NUMBER() OVER (PARTITION BY p ORDER BY {ALL}) AS rn,
    NTILE(3) OVER (ORDER BY p, {ALL}) AS nt FROM t;
CREATE VIEW shifts AS SELECT p, o, x, s,
    LAG(x) OVER (PARTITION BY p ORDER BY {ALL}) AS lg,
    LEAD(x, 2, -1) OVER (PARTITION BY p ORDER BY {ALL}) AS ld,
    FIRST_VALUE(s) OVER (PARTITION BY p ORDER BY {ALL}) AS fv,
    LAST_VALUE(x) OVER (PARTITION BY p ORDER BY {ALL} ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) AS lv
    FROM t;
CREATE VIEW frames AS SELECT p, o, x, s,
    SUM(x) OVER (PARTITION BY p ORDER BY o) AS cs,
    COUNT(*) OVER (PARTITION BY p) AS n,
    COUNT(x) OVER (PARTITION BY p ORDER BY o DESC) AS cx,
    AVG(x) OVER (PARTITION BY p) AS av,
    MIN(x) OVER (PARTITION BY p ORDER BY o) AS mn,
    MAX(x) OVER () AS mx,
    SUM(x) OVER (ORDER BY p, {ALL} ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) AS s3,
    COUNT(*) OVER (PARTITION BY p ORDER BY {ALL} ROWS BETWEEN 2 PRECEDING AND 1 PRECEDING) AS c2,
    MAX(o) OVER (PARTITION BY p ORDER BY {ALL} ROWS BETWEEN UNBOUNDED PRECEDING AND 1 FOLLOWING) AS mo,
    SUM(x) OVER (PARTITION BY p ORDER BY o RANGE BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS whole
    FROM t;
CREATE VIEW slides AS SELECT p, o, x, s,
    MIN(x) OVER (PARTITION BY p ORDER BY {ALL} ROWS BETWEEN 3 PRECEDING AND 1 FOLLOWING) AS mn5,
    MAX(s) OVER (PARTITION BY p ORDER BY {ALL} ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS ms2,
    MIN(o) OVER (PARTITION BY p ORDER BY {ALL} ROWS BETWEEN 2 PRECEDING AND UNBOUNDED FOLLOWING) AS mnu,
    MIN(x) OVER (PARTITION BY p ORDER BY {ALL} ROWS BETWEEN 1 PRECEDING AND 2 PRECEDING) AS never
    FROM t;
CREATE VIEW slides_all AS SELECT p, o, x, s,
    MAX(x) OVER (ORDER BY p, {ALL} ROWS BETWEEN 2 FOLLOWING AND 4 FOLLOWING) AS mxf FROM t;
CREATE VIEW slides_desc AS SELECT p, o, x, s,
    MAX(x) OVER (PARTITION BY p ORDER BY o DESC, x, s ROWS BETWEEN 6 PRECEDING AND 2 PRECEDING) AS mx5 FROM t;
CREATE VIEW ranges AS SELECT p, o, x, s,
    SUM(x) OVER (PARTITION BY p ORDER BY o RANGE BETWEEN 1 PRECEDING AND 1 FOLLOWING) AS r1,
    COUNT(x) OVER (PARTITION BY p ORDER BY o RANGE BETWEEN 3 PRECEDING AND 1 PRECEDING) AS r2,
    MAX(x) OVER (PARTITION BY p ORDER BY o RANGE BETWEEN UNBOUNDED PRECEDING AND 2 PRECEDING) AS r3,
    MIN(s) OVER (PARTITION BY p ORDER BY o RANGE BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING) AS r4,
    FIRST_VALUE(o) OVER (PARTITION BY p ORDER BY o RANGE BETWEEN 1 FOLLOWING AND 2 FOLLOWING) AS r5,
    AVG(x) OVER (PARTITION BY p ORDER BY o RANGE BETWEEN 0.5 PRECEDING AND 1.5 FOLLOWING) AS r6
    FROM t;
CREATE VIEW ranges_desc AS SELECT p, o, x, s,
    SUM(x) OVER (PARTITION BY p ORDER BY o DESC RANGE BETWEEN 2 PRECEDING AND CURRENT ROW) AS d1,
    MIN(x) OVER (PARTITION BY p ORDER BY o DESC RANGE BETWEEN 1 PRECEDING AND 1 FOLLOWING) AS d2,
    LAST_VALUE(o) OVER (PARTITION BY p ORDER BY o DESC RANGE BETWEEN UNBOUNDED PRECEDING AND 1 FOLLOWING) AS d3,
    COUNT(*) OVER (PARTITION BY p ORDER BY o DESC RANGE BETWEEN 2 FOLLOWING AND UNBOUNDED FOLLOWING) AS d4
    FROM t;
CREATE VIEW ranges_nulls_first AS SELECT p, o, x, s,
    SUM(x) OVER (ORDER BY o NULLS FIRST RANGE BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS n1,
    MAX(x) OVER (ORDER BY o NULLS FIRST RANGE BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING) AS n2,
    COUNT(*) OVER (ORDER BY o NULLS FIRST RANGE CURRENT ROW) AS n3 FROM t;
CREATE VIEW ranges_peers AS SELECT p, o, x, s,
    COUNT(*) OVER (PARTITION BY p ORDER BY o, x RANGE BETWEEN CURRENT ROW AND CURRENT ROW) AS e1,
    SUM(x) OVER (PARTITION BY p ORDER BY o, s DESC RANGE BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) AS e2,
    MIN(x) OVER (PARTITION BY p RANGE BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) AS e3 FROM t;
CREATE VIEW grouped AS SELECT p, SUM(x) AS total, RANK() OVER (ORDER BY SUM(x) DESC NULLS LAST) AS r,
    SUM(SUM(x)) OVER () AS everything, COUNT(*) AS n FROM t GROUP BY p;
CREATE VIEW filtered AS SELECT s, x + 1 AS y, DENSE_RANK() OVER (PARTITION BY s ORDER BY x) AS d
    FROM t WHERE o IS NOT NULL;
CREATE VIEW latest AS SELECT p, o, x FROM t QUALIFY RANK() OVER (PARTITION BY p ORDER BY o DESC NULLS LAST) = 1;
CREATE VIEW top2 AS SELECT p, s, COUNT(*) AS n FROM t GROUP BY p, s
    QUALIFY DENSE_RANK() OVER (PARTITION BY p ORDER BY COUNT(*) DESC) <= 2 AND p IS NOT NULL;
"""

ROW = st.tuples(
    st.one_of(st.none(), st.integers(0, 2)),
    st.one_of(st.none(), st.integers(0, 3)),
    st.one_of(st.none(), st.integers(-5, 5)),
    st.sampled_from(["a", "b", ""]),
)
STEPS = st.lists(st.tuples(st.lists(ROW, max_size=6), st.integers(0, 4)), min_size=1, max_size=5)
SPARK_STEPS = [
    ([(1, 1, 10, "a"), (1, 2, 20, "b"), (1, 2, None, "c"), (None, None, 5, "d"), (2, 3, 6, "a")], 0),
    ([(1, 1, 10, "a"), (2, 1, 1, "b")], 2),
]


@engine_given(STEPS, local=25, spark=1, spark_strategies=(st.just(SPARK_STEPS),))
def test_windows_match_duckdb(engine, steps):
    p = pipeline_on(engine)
    try:
        p.sql(DDL)
        o = SqlOracle(DDL)
        p.step()
        o.check(p, what="over the empty table")
        o.run(p, fifo_steps("t", steps))
    finally:
        p.close()


TIME_DDL = """
CREATE TABLE e (k INTEGER, d DATE, ts TIMESTAMP, m DECIMAL(9, 2), x INTEGER);
CREATE VIEW by_day AS SELECT k, d, x,
    SUM(x) OVER (PARTITION BY k ORDER BY d RANGE BETWEEN INTERVAL 2 DAY PRECEDING AND CURRENT ROW) AS s2,
    COUNT(*) OVER (PARTITION BY k ORDER BY d
        RANGE BETWEEN INTERVAL 1 MONTH PRECEDING AND INTERVAL 1 DAY FOLLOWING) AS month
    FROM e;
CREATE VIEW by_time AS SELECT ts, x,
    MAX(x) OVER (ORDER BY ts DESC RANGE BETWEEN INTERVAL 90 MINUTE PRECEDING AND INTERVAL 30 MINUTE FOLLOWING)
    AS mx FROM e;
CREATE VIEW by_amount AS SELECT k, m, x,
    SUM(x) OVER (PARTITION BY k ORDER BY m RANGE BETWEEN 0.25 PRECEDING AND 0.75 FOLLOWING) AS near
    FROM e;
"""
D0, T0 = dt.date(2024, 1, 27), dt.datetime(2024, 3, 1, 12)
TIME_ROW = st.tuples(
    st.one_of(st.none(), st.integers(0, 1)),
    st.one_of(st.none(), st.integers(0, 40).map(lambda n: D0 + dt.timedelta(days=n))),  # over Feb 29
    st.one_of(st.none(), st.integers(0, 12).map(lambda n: T0 + dt.timedelta(minutes=15 * n))),
    st.one_of(st.none(), st.integers(-8, 8).map(lambda n: Decimal(n) / 4)),
    st.integers(-5, 5),
)
TIME_STEPS = st.lists(st.tuples(st.lists(TIME_ROW, max_size=6), st.integers(0, 4)), min_size=1, max_size=4)
TIME_SPARK_STEPS = [
    (
        [
            (0, dt.date(2024, 2, 29), T0, Decimal("0.25"), 1),
            (0, dt.date(2024, 1, 29), T0, Decimal("0.50"), 2),
            (1, None, None, None, 3),
            (0, dt.date(2024, 3, 1), T0 + dt.timedelta(minutes=90), Decimal("1.00"), 4),
        ],
        0,
    ),
    ([(0, dt.date(2024, 1, 31), T0 - dt.timedelta(minutes=30), Decimal("-0.25"), 5)], 2),
]


@engine_given(TIME_STEPS, local=15, spark=1, spark_strategies=(st.just(TIME_SPARK_STEPS),))
def test_range_frames_over_time_and_decimals_match_duckdb(engine, steps):
    """RANGE frames with INTERVAL offsets (days, a month across month ends and a leap day, minutes,
    descending) and DECIMAL offsets, after every step against DuckDB."""
    p = pipeline_on(engine)
    try:
        p.sql(TIME_DDL)
        SqlOracle(TIME_DDL).run(p, fifo_steps("e", steps))
    finally:
        p.close()


def test_a_change_touches_its_partitions_only():
    """The change of a window view holds rows of the partitions the table's change touched."""
    p = pipeline_on("local")
    try:
        p.sql(DDL)
        p.insert("t", [(1, 1, 1, "a"), (1, 2, 2, "b"), (2, 1, 3, "c"), (2, 5, 4, "d")])
        p.step()
        p.insert("t", [(2, 3, 9, "e")])
        ch = p.step()
        assert {r[0] for r in ch["shifts"].to_dict()} == {2}  # (all its windows are by p)
        assert {r[0] for r in ch["ranks"].to_dict()} == {1, 2}  # (CUME_DIST and NTILE are over all rows)
        assert (2, 5, 4, "d", 9, -1, "c", 4) in set(p.view("shifts").to_dict())
    finally:
        p.close()


@pytest.mark.parametrize(
    "item, error, message",
    [
        ("SUM(x) OVER (ORDER BY o GROUPS BETWEEN 1 PRECEDING AND CURRENT ROW)", UnsupportedError, "frame"),
        ("SUM(x) OVER (ORDER BY o, x RANGE 1 PRECEDING)", SchemaError, "exactly one ORDER BY"),
        ("SUM(x) OVER (ORDER BY o RANGE INTERVAL 1 DAY PRECEDING)", SchemaError, "INTERVAL offset over"),
        ("SUM(x) OVER (ORDER BY s RANGE 1 PRECEDING)", SchemaError, "numeric offset over"),
        ("SUM(x) OVER (ORDER BY o RANGE x PRECEDING)", UnsupportedError, "RANGE frame offset x"),
        (
            "SUM(x) OVER (ORDER BY o RANGE BETWEEN 1 FOLLOWING AND 1 PRECEDING)",
            SchemaError,
            "starts FOLLOWING cannot end PRECEDING",
        ),
        (
            "SUM(x) OVER (ORDER BY o ROWS BETWEEN UNBOUNDED FOLLOWING AND CURRENT ROW)",
            SchemaError,
            "cannot start at UNBOUNDED FOLLOWING",
        ),
        (
            "SUM(x) OVER (ORDER BY o ROWS BETWEEN CURRENT ROW AND UNBOUNDED PRECEDING)",
            SchemaError,
            "cannot end at UNBOUNDED PRECEDING",
        ),
        ("COUNT(DISTINCT x) OVER ()", UnsupportedError, "DISTINCT in a window call"),
        ("MEDIAN(x) OVER ()", UnsupportedError, "the window function MEDIAN"),
        ("NTILE(0) OVER (ORDER BY o)", SchemaError, "buckets must be positive"),
    ],
)
def test_window_errors(item, error, message):
    p = pipeline_on("local")
    try:
        with pytest.raises(error, match=message):
            p.sql(
                f"CREATE TABLE t (p INTEGER, o INTEGER, x INTEGER, s VARCHAR); CREATE VIEW v AS SELECT {item} FROM t;"
            )
    finally:
        p.close()
