"""dbspark's SQL settings on a session passed in (`engines.spark.settings`): set while a step runs, the
session's own values put back afterwards (also after a rejected step), and answers as DuckDB's on a
session configured like a user's default one (200 partitions, ANSI off, another time zone, AQE on)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import polars as pl
import pytest

import dbspark
from dbspark import col
from dbspark.engines.spark.session import SessionHandle
from dbspark.engines.spark.settings import (
    ADAPTIVE,
    ANSI,
    CONSTRAINTS,
    PARTITIONS,
    TIME_ZONE,
    SessionSettings,
    shuffle_partitions,
)
from dbspark.ir.expr import Cast
from dbspark.testing.sql_oracle import SqlOracle


class FakeConf:
    """`spark.conf` of a session: what is set, and every set / unset call."""

    def __init__(self, values: dict[str, str]) -> None:
        self.values = dict(values)
        self.calls: list[tuple[str, str | None]] = []

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    def set(self, key: str, value: str) -> None:
        self.calls.append((key, value))
        self.values[key] = value

    def unset(self, key: str) -> None:
        self.calls.append((key, None))
        self.values.pop(key, None)


class FakeSession:
    def __init__(self, values: dict[str, str]) -> None:
        self.conf = FakeConf(values)


def settings(values: dict[str, str]) -> tuple[SessionSettings, FakeConf]:
    s = FakeSession(values)
    return SessionSettings(SessionHandle(s, owned=False)), s.conf


def test_shuffle_partitions_follow_the_rows_within_the_sessions_own_number():
    assert shuffle_partitions(10, 200) == 1
    assert shuffle_partitions(0, 200) == 1
    assert shuffle_partitions(250_000, 200) == 3
    assert shuffle_partitions(10**9, 200) == 200
    assert shuffle_partitions(None, 200) == 200
    assert shuffle_partitions(5_000, 200, rows_per_partition=1_000) == 5


def test_settings_are_applied_and_the_sessions_own_restored_unset_ones_unset():
    user = {PARTITIONS: "200", ANSI: "false", "spark.other": "x"}
    s, conf = settings(user)
    with s.applied(rows=10):
        assert conf.values[PARTITIONS] == "1"
        assert conf.values[ANSI] == "true"
        assert conf.values[TIME_ZONE] == "UTC"
        assert conf.values[CONSTRAINTS] == "false"
        assert ADAPTIVE not in conf.values  # the session's own
        with s.applied(rows=350_000):  # a part of known size: only the partitions change
            assert conf.values[PARTITIONS] == "4"
        assert conf.values[PARTITIONS] == "1"
        with s.applied():  # nested without a size: nothing changes
            pass
        assert conf.values[PARTITIONS] == "1"
    assert conf.values == user


def test_settings_are_restored_when_the_block_fails_and_unchanged_ones_are_not_set():
    user = {ANSI: "true", TIME_ZONE: "UTC", PARTITIONS: "4", CONSTRAINTS: "false"}
    s, conf = settings(user)
    with pytest.raises(ZeroDivisionError), s.applied(rows=None):
        assert conf.values == user  # unknown size: the session's own partitions and AQE
        with s.applied(rows=1_000_000):  # a merge of a known size
            assert conf.values[PARTITIONS] == "4"
        with s.applied(rows=10):
            assert conf.values[PARTITIONS] == "1"
        raise ZeroDivisionError
    assert conf.values == user
    assert conf.calls == [(PARTITIONS, "1"), (PARTITIONS, "4")]
    assert not s.active
    with pytest.raises(ZeroDivisionError), s.applied(rows=10):
        assert conf.values[PARTITIONS] == "1"
        raise ZeroDivisionError
    assert conf.values == user


def test_a_user_overrides_the_performance_settings_with_spark_dbspark_keys():
    s, conf = settings(
        {"spark.dbspark.shufflePartitions": "session", "spark.dbspark.adaptive": "session", ANSI: "false"}
    )
    with s.applied(rows=10):
        with s.applied(rows=10**6):
            assert PARTITIONS not in conf.values
        assert ADAPTIVE not in conf.values
        assert conf.values[ANSI] == "true"  # semantics are not a setting
    s, conf = settings({"spark.dbspark.shufflePartitions": "7", "spark.dbspark.adaptive": "false"})
    with s.applied(rows=10):
        assert (conf.values[PARTITIONS], conf.values[ADAPTIVE]) == ("7", "false")
    s, conf = settings({"spark.dbspark.rowsPerPartition": "5"})
    with s.applied(rows=10):
        assert conf.values[PARTITIONS] == "2"
    assert PARTITIONS not in conf.values


# ---- on a session configured like a user's: Spark's defaults, ANSI off, another time zone -------------
# ANSI off, another time zone; the shuffle partitions and AQE unset, i.e. Spark's defaults (200, on)
USER: dict[str, str | None] = {
    ANSI: "false",
    TIME_ZONE: "America/Los_Angeles",
    PARTITIONS: None,
    ADAPTIVE: None,
}


@pytest.fixture
def user_session(spark_session: Any) -> Any:
    """The shared test session set up like a user's; everything it changes is put back afterwards."""
    conf = spark_session.conf
    saved = {k: conf.get(k, None) for k in USER}
    try:
        put(conf, USER)
        yield spark_session
    finally:
        put(conf, saved)


def put(conf: Any, values: dict[str, str | None]) -> None:
    for k, v in values.items():
        if v is None:
            conf.unset(k)
        else:
            conf.set(k, v)


def user_values(spark: Any) -> dict[str, Any]:
    return {k: spark.conf.get(k, None) for k in USER}


@pytest.fixture(params=["local", "spark"])
def pipeline(request: Any) -> Any:
    if request.param == "spark":
        spark = request.getfixturevalue("user_session")
        p = dbspark.Pipeline(engine="spark", spark=spark)
    else:
        spark = None
        p = dbspark.Pipeline(engine="local")
    yield p, spark
    if spark is not None:
        assert user_values(spark) == USER, "the session's settings were not put back"
    p.close()


DDL = """
CREATE TABLE r (k BIGINT, g BIGINT, d DATE);
CREATE TABLE s (k BIGINT, v BIGINT);
CREATE VIEW per_g AS SELECT g, COUNT(*) AS n, SUM(v) AS total FROM r JOIN s USING (k) GROUP BY g;
CREATE VIEW dates AS SELECT k, d + 30 AS later, d - DATE '2000-01-01' AS days,
    date_trunc('month', d) AS month, d + INTERVAL 1 MONTH AS next_month, CAST(d AS VARCHAR) AS text FROM r;
CREATE VIEW tripled AS SELECT k, v * 3 AS x FROM s;
"""


def test_answers_equal_duckdb_and_the_users_settings_come_back(pipeline):
    p, spark = pipeline
    o = SqlOracle(DDL)
    p.sql(DDL)
    r = [(k, k % 3, dt.date(2024, 1 + k % 12, 1 + k % 28)) for k in range(10)]
    s = [(k, 10 * k) for k in range(0, 10, 2)]
    for table, rows in (("r", r), ("s", s)):
        p.insert(table, rows)
        o.insert(table, rows)
    during: dict[str, Any] = {}
    p.step(sink=lambda n, out: during.update(user_values(spark) if spark is not None else {}))
    o.check(p, what="after step 1")
    if spark is not None:  # within the step dbspark's, afterwards the user's
        assert during == {ANSI: "true", TIME_ZONE: "UTC", PARTITIONS: "1", ADAPTIVE: None}
        assert user_values(spark) == USER
    p.insert("s", [(3, 2**62)])  # 3 * 2**62 leaves BIGINT: DuckDB raises, so must the step
    with pytest.raises(dbspark.DbsparkError, match="overflow"):
        p.step()
    if spark is not None:
        assert user_values(spark) == USER
    p.delete("r", [r[0]])
    o.delete("r", [r[0]])
    p.insert("s", [(5, 7)])
    o.insert("s", [(5, 7)])
    p.step()
    o.check(p, what="after step 2")


def test_weight_overflow_is_an_error_on_a_session_with_ansi_off(pipeline):
    """A join multiplies weights: 2**40 copies joined with 2**40 copies leave int64 (ANSI mode)."""
    p, _ = pipeline
    p.sql(
        "CREATE TABLE r (k BIGINT); CREATE TABLE s (k BIGINT, v BIGINT); "
        "CREATE VIEW j AS SELECT k, v FROM r JOIN s USING (k)"
    )
    p.push("r", [(1,)], [2**40])
    p.push("s", [(1, 5)], [2**40])
    with pytest.raises(dbspark.WeightError):
        p.step()
    assert p.steps == 0


def test_dates_of_timestamps_with_a_time_zone_are_utc_on_a_session_in_another_zone(pipeline):
    """TIMESTAMP WITH TIME ZONE values are UTC instants: 03:00 UTC is still March 10 (in Los Angeles it
    is March 9), on both engines."""
    p, _ = pipeline
    e = p.table("e", {"id": "int64", "ts": pl.Datetime("us", "UTC")})
    p.create_view("d", e.map("id", day=Cast(col("ts"), pl.Date())))
    p.insert("e", [(1, dt.datetime(2024, 3, 10, 3, 0, tzinfo=dt.UTC))])
    p.step()
    assert p.view("d").to_rows() == [((1, dt.date(2024, 3, 10)), 1)]
