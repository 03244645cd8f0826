"""DuckDB's `time_bucket` (tumbling windows: `frontends/sql/temporal.py`) against DuckDB: widths of time,
days, weeks and months, offsets and origins, DATE and TIMESTAMP values before and after 1970 and 2000,
NULLs; grouped views after every step of inserts and deletes, on both engines.
"""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import strategies as st

from dbspark.errors import SchemaError, UnsupportedError
from dbspark.testing.engines import engine_given, pipeline_on
from dbspark.testing.sql_oracle import SqlOracle, fifo_steps

DDL = """
CREATE TABLE e (ts TIMESTAMP, d DATE, v INTEGER);
CREATE VIEW m15 AS SELECT time_bucket(INTERVAL '15 minutes', ts) AS b, COUNT(*) AS n, SUM(v) AS s FROM e GROUP BY 1;
CREATE VIEW days2 AS SELECT time_bucket(INTERVAL '2 days', d) AS b, COUNT(*) AS n FROM e GROUP BY 1;
CREATE VIEW wk AS SELECT time_bucket(INTERVAL '1 week', ts) AS b, MAX(v) AS m FROM e GROUP BY 1;
CREATE VIEW q AS SELECT time_bucket(INTERVAL '3 months', ts) AS b, COUNT(*) AS n FROM e GROUP BY 1;
CREATE VIEW mo AS SELECT time_bucket(INTERVAL '1 month', d) AS b, COUNT(*) AS n FROM e GROUP BY 1;
CREATE VIEW off AS SELECT time_bucket(INTERVAL '1 hour', ts, INTERVAL '15 minutes') AS b, COUNT(*) AS n
    FROM e GROUP BY 1;
CREATE VIEW org AS SELECT time_bucket(INTERVAL '90 minutes', ts, TIMESTAMP '2024-01-01 00:10:00') AS b,
    COUNT(*) AS n FROM e GROUP BY 1;
CREATE VIEW orgm AS SELECT time_bucket(INTERVAL '2 months', ts, TIMESTAMP '2023-02-15 00:00:00') AS b,
    COUNT(*) AS n FROM e GROUP BY 1;
CREATE VIEW per_row AS SELECT v, time_bucket(INTERVAL '1 day', ts) AS b FROM e;
"""

TS = st.one_of(st.none(), st.datetimes(dt.datetime(1960, 1, 1), dt.datetime(2040, 12, 31)))
ROW = st.tuples(
    TS, st.one_of(st.none(), st.dates(dt.date(1960, 1, 1), dt.date(2040, 12, 31))), st.integers(-3, 3)
)
STEPS = st.lists(st.tuples(st.lists(ROW, max_size=6), st.integers(0, 4)), min_size=1, max_size=4)
SPARK_STEPS = [
    (
        [
            (dt.datetime(2024, 3, 5, 10, 37, 12), dt.date(2024, 3, 5), 1),
            (dt.datetime(1969, 12, 31, 23, 59), dt.date(1965, 6, 7), 2),
            (None, None, 3),
        ],
        0,
    ),
    ([(dt.datetime(1999, 12, 31, 23, 59, 59, 999999), dt.date(2000, 1, 2), 4)], 1),
]


@engine_given(STEPS, local=25, spark=1, spark_strategies=(st.just(SPARK_STEPS),))
def test_time_buckets_match_duckdb(engine, steps):
    p = pipeline_on(engine)
    try:
        p.sql(DDL)
        o = SqlOracle(DDL)
        o.run(p, fifo_steps("e", steps))
    finally:
        p.close()


@pytest.mark.parametrize(
    "item, error, message",
    [
        ("time_bucket(INTERVAL '1 month 1 day', d)", UnsupportedError, "months with days or time"),
        ("time_bucket(INTERVAL '0 days', d)", SchemaError, "the width must be positive"),
        ("time_bucket(INTERVAL '1 hour', ts, INTERVAL '1 month')", UnsupportedError, "an offset of months"),
    ],
)
def test_time_bucket_errors(item, error, message):
    p = pipeline_on("local")
    try:
        with pytest.raises(error, match=message):
            p.sql(f"CREATE TABLE e (ts TIMESTAMP, d DATE, v INTEGER); CREATE VIEW v AS SELECT {item} FROM e;")
    finally:
        p.close()
