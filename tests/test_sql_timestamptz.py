"""TIMESTAMP WITH TIME ZONE (TIMESTAMPTZ) columns in SQL pipelines, on both engines, each step checked against
DuckDB with its session time zone UTC (`SqlOracle`), and each view's column types against DuckDB's: inserts of
aware and naive datetimes and of strings with UTC offsets, deletes and NULLs; comparisons with TIMESTAMPTZ,
TIMESTAMP and DATE values and with string literals; casts to and from VARCHAR, DATE and TIMESTAMP; +/-
INTERVAL; date_trunc, extract, epoch, strftime; MIN / MAX / MEDIAN / COUNT DISTINCT; GROUP BY, JOIN and
UNION. What DuckDB does with a TIMESTAMPTZ and dbspark does not is an UnsupportedError naming it."""

from __future__ import annotations

import datetime as dt

import duckdb
import polars as pl
import pytest

import dbspark
from dbspark.errors import DataError, SchemaError, UnsupportedError
from dbspark.testing.sql_oracle import SqlOracle, view_frame

UTC = dt.UTC
T = dt.datetime
D = dt.date


def tz(hours: float) -> dt.timezone:
    return dt.timezone(dt.timedelta(hours=hours))


DDL = """
CREATE TABLE ev (id BIGINT, z TIMESTAMPTZ, ts TIMESTAMP, d DATE, s VARCHAR, k BIGINT);
CREATE TABLE seen (z TIMESTAMP WITH TIME ZONE, label VARCHAR);
"""

VIEWS = """
CREATE VIEW sel AS SELECT id, z FROM ev
  WHERE z > '2000-01-01' AND z <> '2024-03-10 03:00:00+02' AND z < TIMESTAMPTZ '2100-01-01 00:00:00-08';
CREATE VIEW mixed AS SELECT id, z > ts AS gt, z = d AS eq_d, z <= ts AS le, z BETWEEN d AND ts AS btw,
  z IN ('2024-03-10 01:00:00', '1999-12-31 23:00:00-01') AS inl, greatest(z, ts) AS g, least(z, d) AS l,
  coalesce(z, ts, d) AS c, CASE WHEN k = 1 THEN z ELSE ts END AS cs FROM ev;
CREATE VIEW casts AS SELECT id, CAST(z AS VARCHAR) AS v, CAST(z AS DATE) AS dd, CAST(z AS TIMESTAMP) AS t,
  CAST(ts AS TIMESTAMPTZ) AS tz, CAST(d AS TIMESTAMPTZ) AS dz, CASE WHEN s LIKE '%:%' THEN CAST(s AS TIMESTAMPTZ) END AS sz,
  CAST('2024-03-10 03:00:00.25+05:30' AS TIMESTAMPTZ) AS lit, TIMESTAMPTZ '1999-12-31 23:00:00-01' AS lit2 FROM ev;
CREATE VIEW intervals AS SELECT id, z + INTERVAL 1 HOUR AS h, z - INTERVAL '90 minutes' AS m,
  z + INTERVAL 1 MONTH AS mo, z - INTERVAL '1 day 2 hours' AS dh, z + INTERVAL 250 MILLISECOND AS ms FROM ev;
CREATE VIEW truncs AS SELECT id, date_trunc('hour', z) AS h, date_trunc('day', z) AS d1,
  date_trunc('month', z) AS mo, date_trunc('week', z) AS w, date_trunc('year', z) AS y FROM ev;
CREATE VIEW parts AS SELECT id, epoch(z) AS e, epoch_ms(z) AS ms, epoch_us(z) AS us,
  extract(hour FROM z) AS h, extract(day FROM z) AS dd, date_part('dow', z) AS dw, year(z) AS y,
  extract(microsecond FROM z) AS mic FROM ev;
CREATE VIEW formats AS SELECT id, strftime(z, '%Y-%m-%d %H:%M:%S.%f %z|%Z|') AS a,
  strftime(z, '%c %A %-d %B %I %p') AS b FROM ev;
CREATE VIEW aggs AS SELECT k, min(z) AS lo, max(z) AS hi, median(z) AS med, count(DISTINCT z) AS n,
  count(z) AS c FROM ev GROUP BY k;
CREATE VIEW totals AS SELECT median(z) AS med, max(z) AS hi, min(z) AS lo FROM ev;
CREATE VIEW by_at AS SELECT z, count(*) AS n, max(id) AS m FROM ev GROUP BY z;
CREATE VIEW by_day AS SELECT date_trunc('day', z) AS day, count(*) AS n FROM ev GROUP BY 1;
CREATE VIEW joined AS SELECT ev.id, seen.label FROM ev JOIN seen ON ev.z = seen.z;
CREATE VIEW joined_ts AS SELECT ev.id, seen.label FROM ev JOIN seen ON ev.ts = seen.z;
CREATE VIEW left_date AS SELECT ev.id, seen.label FROM ev LEFT JOIN seen ON ev.d = seen.z;
CREATE VIEW top AS SELECT id, z FROM ev ORDER BY z DESC NULLS LAST, id LIMIT 3;
CREATE VIEW unioned AS SELECT z AS x FROM ev UNION SELECT ts FROM ev UNION ALL SELECT d FROM ev;
CREATE VIEW shifted AS SELECT id, TIMESTAMPTZ '2024-01-31 00:00:00+02' + INTERVAL 1 MONTH AS m,
  CAST(TIMESTAMPTZ '2020-02-29 00:00:00+02' - INTERVAL 3 HOUR AS VARCHAR) AS s FROM ev;
"""

ROWS = [
    (1, T(2024, 3, 10, 3, 0, tzinfo=tz(2)), T(2024, 3, 10, 1), D(2024, 3, 10), "2024-03-10 03:00:00+02", 1),
    (2, T(2024, 3, 10, 1, 0, tzinfo=UTC), T(2024, 3, 10, 0, 30), D(2024, 3, 10), "2024-03-10T01:00:00Z", 1),
    (3, None, None, None, None, 2),
    (4, T(1999, 12, 31, 23, 0, tzinfo=tz(-1)), T(2000, 1, 1), D(1999, 12, 31), "1999-12-31 23:00:00 UTC", 2),
    (5, T(1970, 1, 1, 0, 0, 0, 1, tzinfo=UTC), T(1970, 1, 1), D(1970, 1, 1), "x", 3),
    (6, T(1969, 12, 31, 23, 59, 59, 999500, tzinfo=UTC), T(1970, 1, 1), D(1969, 12, 31), "1970-01-01", 3),
    (
        7,
        T(2024, 2, 29, 23, 30, tzinfo=tz(-5.5)),
        T(2024, 3, 1, 5),
        D(2024, 3, 1),
        "2024-02-29 23:30:00-0530",
        1,
    ),
]
SEEN = [
    (T(2024, 3, 10, 1, 0, tzinfo=UTC), "a"),
    (None, "n"),
    (T(2000, 1, 1, tzinfo=UTC), "y2k"),
    (T(2024, 3, 10, tzinfo=UTC), "day"),
]


def _duck_types(oracle: SqlOracle, view: str) -> list[str]:
    return [r[1] for r in oracle.con.execute(f'DESCRIBE "{view}"').fetchall()]


def _our_types(pipeline: dbspark.Pipeline, view: str) -> list[str]:
    from dbspark.columnar.coerce import sql_type

    names = {"TIMESTAMPTZ": "TIMESTAMP WITH TIME ZONE", "INT64": "BIGINT"}
    return [names.get(sql_type(t), sql_type(t)) for t in pipeline.relation(view).schema.values()]


def test_timestamptz_views(pipeline):
    oracle = SqlOracle(DDL + VIEWS)
    pipeline.sql(DDL + VIEWS)
    for v in oracle.views:  # the oracle compares values; the types must be DuckDB's too
        ours, duck = _our_types(pipeline, v), _duck_types(oracle, v)
        assert [t for t in ours if "TIMESTAMP" in t] == [t for t in duck if "TIMESTAMP" in t], v
    steps = [
        ({}, {"ev": ROWS, "seen": SEEN}),
        ({"ev": ROWS[:2], "seen": SEEN[:1]}, {"ev": [(8, T(2024, 6, 1, tzinfo=UTC), None, None, "", 1)]}),
        ({"ev": ROWS[2:5]}, {"ev": ROWS[:1], "seen": [(T(2024, 3, 10, 3, tzinfo=tz(2)), "b")]}),
    ]
    oracle.run(pipeline, [(ins, dels) for dels, ins in steps])
    # the engine's values are TIMESTAMPTZ (the oracle's comparison would cast a naive column to DuckDB's type)
    out = view_frame(pipeline.view("casts")).schema
    assert [out[c] for c in ("tz", "dz", "sz", "lit")] == [pl.Datetime("us", "UTC")] * 4
    assert (out["t"], out["dd"]) == (pl.Datetime("us"), pl.Date())


def test_timestamptz_inserted_as_strings_naive_datetimes_and_frames(pipeline):
    """Strings with UTC offsets ('+02', '-05:30', 'Z'), naive datetimes (in UTC, the session's zone), aware
    datetimes in other zones and a Polars frame, into a TIMESTAMPTZ column; deleted by an equal instant
    written another way."""
    ddl = (
        "CREATE TABLE e (id BIGINT, z TIMESTAMPTZ);\n"
        "CREATE VIEW v AS SELECT id, z, CAST(z AS VARCHAR) AS s, z < '2024-03-10 02:00:00+01' AS early FROM e;"
    )
    oracle = SqlOracle(ddl)
    pipeline.sql(ddl)
    as_text = [
        (1, "2024-03-10 03:00:00+02"),
        (2, "2024-03-09 20:00:00.5-05:30"),
        (3, "2024-03-10 01:00:00Z"),
        (4, "2024-03-10 01:00:00"),
        (5, None),
    ]
    pipeline.insert("e", as_text)
    oracle.insert("e", as_text)
    pipeline.step()
    oracle.check(pipeline, what="strings")
    mixed = [(6, T(2024, 3, 10, 1)), (7, T(2024, 3, 10, 12, tzinfo=tz(9)))]
    pipeline.insert("e", mixed)
    oracle.insert("e", [(i, v.replace(tzinfo=UTC) if v.tzinfo is None else v) for i, v in mixed])
    frame = pl.DataFrame(
        {"id": [8, 9], "z": [T(1900, 3, 1, 12, tzinfo=UTC), T(2100, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)]},
        schema={"id": pl.Int64, "z": pl.Datetime("us", "Asia/Tokyo")},
    )
    pipeline.insert("e", frame)
    oracle.insert("e", frame)
    pipeline.delete("e", [(1, T(2024, 3, 10, 1, tzinfo=UTC)), (3, "2024-03-10 03:00:00+02")])
    oracle.delete("e", [(1, T(2024, 3, 10, 1, tzinfo=UTC)), (3, T(2024, 3, 10, 1, tzinfo=UTC))])
    pipeline.step()
    oracle.check(pipeline, what="datetimes, frame and delete")
    assert pipeline.relation("e").schema["z"] == pl.Datetime("us", "UTC")


@pytest.mark.parametrize(
    "text", ["2024-03-10 03:00+02", "2024-03-10 03:00:00 +02:00", "2024-13-01 00:00:00+02"]
)
def test_timestamptz_casts_of_bad_strings_raise_where_duckdb_raises(pipeline, text):
    ddl = "CREATE TABLE s (x VARCHAR);\nCREATE VIEW v AS SELECT CAST(x AS TIMESTAMPTZ) AS t FROM s;"
    pipeline.sql(ddl)
    with pytest.raises(duckdb.ConversionException):
        duckdb.connect().execute("SELECT CAST(? AS TIMESTAMPTZ)", [text]).fetchall()
    pipeline.insert("s", [(text,)])
    with pytest.raises(DataError, match="CAST"):
        pipeline.step()


UNSUPPORTED = [
    ("SELECT z - z AS i FROM ev", "TIMESTAMP WITH TIME ZONE - TIMESTAMP WITH TIME ZONE"),
    ("SELECT z - ts AS i FROM ev", "TIMESTAMP WITH TIME ZONE - TIMESTAMP"),
    ("SELECT extract(timezone FROM z) AS x FROM ev", "timezone"),
    ("SELECT strptime(s, '%Y-%m-%d %H:%M:%S%z') AS x FROM ev", "%z"),
    ("SELECT date_trunc('decade', z) AS x FROM ev", "decade"),
]


@pytest.mark.parametrize("query, named", UNSUPPORTED)
def test_unsupported_timestamptz_sql_is_named(query, named):
    """DuckDB evaluates these; dbspark refuses them when the view is declared, naming the construct."""
    duckdb.connect().execute(DDL + f"CREATE VIEW v AS {query}; SELECT * FROM v").fetchall()
    p = dbspark.Pipeline(engine="local")
    with pytest.raises(UnsupportedError, match=named):
        p.sql(DDL + f"CREATE VIEW v AS {query};")


def test_timestamptz_with_parameters_is_a_schema_error():
    with pytest.raises(duckdb.BinderException):
        duckdb.connect().execute("CREATE TABLE t (x TIMESTAMPTZ(6))")
    with pytest.raises(SchemaError, match="type parameters"):
        dbspark.Pipeline(engine="local").sql("CREATE TABLE t (x TIMESTAMPTZ(6));")


def test_timestamptz_spellings():
    ddl = "CREATE TABLE t (a TIMESTAMPTZ, b TIMESTAMP WITH TIME ZONE);"
    p = dbspark.Pipeline(engine="local")
    p.sql(ddl)
    con = duckdb.connect()
    con.execute(ddl)
    assert {r[1] for r in con.execute("DESCRIBE t").fetchall()} == {"TIMESTAMP WITH TIME ZONE"}
    assert set(p.relation("t").schema.values()) == {pl.Datetime("us", "UTC")}
