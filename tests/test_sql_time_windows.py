"""Time windows as table functions (`frontends/sql/timewindows.py`): tumbling, hopping and session windows,
grouped, against the same windows written in DuckDB's SQL (time_bucket, a range of hops, sessions by LAG
and a running SUM), after every step of random events (duplicate times, NULL keys and times, a late
event that bridges two sessions, deletes that split one), on both engines.
"""

from __future__ import annotations

import datetime as dt

import duckdb
import pytest
from hypothesis import strategies as st

from dbspark.errors import SchemaError, UnsupportedError
from dbspark.testing.engines import engine_given, pipeline_on
from dbspark.testing.sql_oracle import compare_frames, view_frame

DDL = """
CREATE TABLE e (k VARCHAR, ts TIMESTAMP, v INTEGER);
CREATE VIEW tum AS SELECT window_start, window_end, COUNT(*) AS n, SUM(v) AS s
    FROM tumble(e, ts, INTERVAL '5 minutes') GROUP BY ALL;
CREATE VIEW hp AS SELECT h.k, window_start, window_end, COUNT(*) AS n
    FROM hop(e, ts, INTERVAL '5 minutes', INTERVAL '15 minutes') AS h GROUP BY ALL;
CREATE VIEW ss AS SELECT k, window_start, window_end, COUNT(*) AS n, MAX(v) AS m
    FROM session_window(e, ts, INTERVAL '10 minutes', k) GROUP BY ALL;
CREATE VIEW rows_in AS SELECT v, window_start FROM session_window(e, ts, INTERVAL '5 minutes');
"""
ORACLE = {
    "tum": "SELECT time_bucket(INTERVAL '5 minutes', ts) AS window_start, time_bucket(INTERVAL '5 minutes', ts) "
    "+ INTERVAL '5 minutes' AS window_end, COUNT(*) AS n, SUM(v) AS s FROM e WHERE ts IS NOT NULL GROUP BY ALL",
    "hp": "SELECT k, ws AS window_start, ws + INTERVAL '15 minutes' AS window_end, COUNT(*) AS n FROM (SELECT k, "
    "time_bucket(INTERVAL '5 minutes', ts) - to_minutes(5 * g) AS ws FROM e, range(3) t(g) WHERE ts IS NOT NULL) "
    "GROUP BY ALL",
    "ss": """WITH a AS (SELECT *, CASE WHEN lag(ts) OVER w IS NULL OR ts - lag(ts) OVER w > INTERVAL '10 minutes'
        THEN 1 ELSE 0 END AS nw FROM e WHERE ts IS NOT NULL WINDOW w AS (PARTITION BY k ORDER BY ts)),
        b AS (SELECT *, SUM(nw) OVER (PARTITION BY k ORDER BY ts, nw DESC ROWS UNBOUNDED PRECEDING) AS sid FROM a)
        SELECT k, MIN(ts) AS window_start, MAX(ts) + INTERVAL '10 minutes' AS window_end, COUNT(*) AS n,
        MAX(v) AS m FROM b GROUP BY k, sid""",
    "rows_in": """WITH a AS (SELECT *, CASE WHEN lag(ts) OVER w IS NULL OR ts - lag(ts) OVER w > INTERVAL '5 minutes'
        THEN 1 ELSE 0 END AS nw FROM e WHERE ts IS NOT NULL WINDOW w AS (ORDER BY ts)),
        b AS (SELECT *, SUM(nw) OVER (ORDER BY ts, nw DESC ROWS UNBOUNDED PRECEDING) AS sid FROM a)
        SELECT v, MIN(ts) OVER (PARTITION BY sid) AS window_start FROM b""",
}
T0 = dt.datetime(2024, 3, 5, 10, 0)
EVENT = st.tuples(
    st.sampled_from(["a", "b", None]),
    # on a grid of 5 minutes and one more: times on the windows' edges, gaps of exactly the session gap
    st.one_of(
        st.none(),
        st.integers(0, 12).map(lambda m: T0 + dt.timedelta(minutes=5 * m)),
        st.just(T0 + dt.timedelta(minutes=11)),
    ),
    st.integers(0, 9),
)
STEPS = st.lists(st.tuples(st.lists(EVENT, max_size=6), st.integers(0, 3)), min_size=1, max_size=4)
SPARK_STEPS = [
    (
        [
            ("a", T0, 1),
            ("a", T0 + dt.timedelta(minutes=7), 2),
            ("a", T0 + dt.timedelta(minutes=30), 3),
            (None, T0, 5),
        ],
        0,
    ),
    ([("a", T0 + dt.timedelta(minutes=17), 9), ("b", None, 4)], 1),
]


@engine_given(STEPS, local=25, spark=1, spark_strategies=(st.just(SPARK_STEPS),))
def test_time_windows_match_duckdb(engine, steps):
    con = duckdb.connect()
    con.execute("CREATE TABLE e (k VARCHAR, ts TIMESTAMP, v INTEGER)")
    p = pipeline_on(engine)
    try:
        p.sql(DDL)
        present: list[tuple] = []
        for ins, ndel in steps:
            gone, present = present[:ndel], present[ndel:] + ins
            if ins:
                con.executemany("INSERT INTO e VALUES (?, ?, ?)", ins)
                p.insert("e", ins)
            for row in gone:  # one copy each
                con.execute(
                    "DELETE FROM e WHERE rowid = (SELECT min(rowid) FROM e WHERE k IS NOT DISTINCT FROM ? "
                    "AND ts IS NOT DISTINCT FROM ? AND v = ?)",
                    list(row),
                )
            if gone:
                p.delete("e", gone)
            p.step()
            for view, query in ORACLE.items():
                differ = compare_frames(view_frame(p.view(view)), con.sql(query).pl(), view)
                assert differ is None, differ
    finally:
        p.close()


@pytest.mark.parametrize(
    "item, error, message",
    [
        (
            "hop(e, ts, INTERVAL '4 minutes', INTERVAL '10 minutes')",
            UnsupportedError,
            "not a multiple of the slide",
        ),
        ("tumble(e, ts, INTERVAL '1 month')", UnsupportedError, "a width of months"),
        ("tumble(e, v, INTERVAL '1 hour')", SchemaError, "the time column must be a TIMESTAMP"),
        ("hop(e, ts, INTERVAL '1 hour')", SchemaError, r"hop\(table, time column, slide, size\) takes 4"),
        ("session_window(e, ts, INTERVAL '0 minutes')", SchemaError, "a width must be positive"),
    ],
)
def test_time_window_errors(item, error, message):
    p = pipeline_on("local")
    try:
        with pytest.raises(error, match=message):
            p.sql(
                f"CREATE TABLE e (k VARCHAR, ts TIMESTAMP, v INTEGER); CREATE VIEW w AS SELECT * FROM {item};"
            )
    finally:
        p.close()
