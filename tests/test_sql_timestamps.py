"""TIMESTAMP columns in SQL pipelines, on both engines, each step checked against DuckDB (`SqlOracle`):
inserts of datetimes, strings and DataFrames, deletes and NULLs; comparisons with string literals;
casts; TIMESTAMP +/- INTERVAL; date_trunc, epoch, extract / date_part, strftime, strptime; MIN / MAX /
MEDIAN / COUNT DISTINCT; GROUP BY and JOIN on TIMESTAMP keys. What DuckDB does with a TIMESTAMP and
dbspark does not is an UnsupportedError naming it."""

from __future__ import annotations

import datetime as dt

import duckdb
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dbspark
from dbspark.errors import DataError, UnsupportedError
from dbspark.testing.sql_oracle import SqlOracle

T = dt.datetime
D = dt.date

DDL = """
CREATE TABLE ev (id BIGINT, ts TIMESTAMP, d DATE, s VARCHAR, k BIGINT);
CREATE TABLE tag (t_at DATETIME, label VARCHAR);
"""

VIEWS = """
CREATE VIEW sel AS SELECT id, ts FROM ev WHERE ts > '2000-01-01' AND ts <> '2024-02-29 23:59:59.999999';
CREATE VIEW between_ AS SELECT id FROM ev WHERE ts BETWEEN '1969-12-31 12:00' AND DATE '2024-02-01';
CREATE VIEW in_list AS SELECT id FROM ev WHERE ts IN ('1999-12-31', '2024-01-31 10:15:30.123456');
CREATE VIEW vs_date AS SELECT id, ts >= d AS ge, greatest(ts, d) AS g, coalesce(ts, d) AS c FROM ev;
CREATE VIEW casts AS SELECT id, CAST(ts AS VARCHAR) AS v, CAST(ts AS DATE) AS dd, CAST(d AS TIMESTAMP) AS t,
  CAST('2024-03-01 10:00:00.5' AS TIMESTAMP) AS lit FROM ev;
CREATE VIEW intervals AS SELECT id, ts + INTERVAL 1 HOUR AS h, ts - INTERVAL '90 minutes' AS m,
  ts + INTERVAL 1 MONTH AS mo, ts - INTERVAL '1 day 2 hours' AS dh, ts + INTERVAL 250 MILLISECOND AS ms,
  d + INTERVAL 3 SECOND AS ds, TIMESTAMP '2024-01-31 12:00' + INTERVAL 1 MONTH AS c FROM ev;
CREATE VIEW truncs AS SELECT id, date_trunc('hour', ts) AS h, date_trunc('day', ts) AS d1,
  date_trunc('month', ts) AS mo, date_trunc('week', ts) AS w, date_trunc('quarter', ts) AS q,
  date_trunc('ms', ts) AS ms, date_trunc('minutes', ts) AS mi, date_trunc('year', d) AS y FROM ev;
CREATE VIEW epochs AS SELECT id, epoch(ts) AS e, epoch_ms(ts) AS ms, epoch_us(ts) AS us,
  extract(epoch FROM ts) AS e2, epoch_ms(d) AS dms FROM ev;
CREATE VIEW parts AS SELECT id, extract(year FROM ts) AS y, extract(hour FROM ts) AS h,
  extract(second FROM ts) AS s, extract(millisecond FROM ts) AS ms, extract(microsecond FROM ts) AS us,
  extract(isodow FROM ts) AS idw, date_part('dow', ts) AS dw, date_part('doy', ts) AS dy,
  hour(ts) AS hh, minute(ts) AS mm, second(ts) AS ss, week(ts) AS wk, quarter(ts) AS q FROM ev;
CREATE VIEW formats AS SELECT id, strftime(ts, '%Y-%m-%d %H:%M:%S.%f') AS a,
  strftime(ts, '%d/%m/%y %I:%M %p, %j %g') AS b, strftime(ts, '%A %-d %B %Y %-H:%-M:%-S %a %b %w %u') AS c,
  strftime(d, '%c|%x|%X|%%') AS dd FROM ev;
CREATE VIEW parses AS SELECT id, try_strptime(s, '%Y-%m-%d %H:%M:%S') AS a,
  try_strptime(s, '%d/%m/%Y %I %p') AS b, try_strptime(s, '%Y%m%d') AS c,
  strptime('2024-3-1 7:05:09.25', '%Y-%m-%d %H:%M:%S.%f') AS lit FROM ev;
CREATE VIEW aggs AS SELECT k, min(ts) AS lo, max(ts) AS hi, median(ts) AS med, count(DISTINCT ts) AS n,
  count(ts) AS c, min(DISTINCT ts) AS lo2 FROM ev GROUP BY k;
CREATE VIEW totals AS SELECT median(ts) AS med, max(ts) AS hi, min(ts) AS lo FROM ev;
CREATE VIEW by_ts AS SELECT ts, count(*) AS n, max(id) AS m FROM ev GROUP BY ts;
CREATE VIEW by_hour AS SELECT date_trunc('hour', ts) AS h, count(*) AS n FROM ev GROUP BY 1;
CREATE VIEW joined AS SELECT ev.id, tag.label FROM ev JOIN tag ON ev.ts = tag.t_at;
CREATE VIEW left_date AS SELECT ev.id, tag.label FROM ev LEFT JOIN tag ON ev.d = tag.t_at;
CREATE VIEW top AS SELECT id, ts FROM ev ORDER BY ts DESC NULLS LAST, id LIMIT 3;
CREATE VIEW unioned AS SELECT ts AS x FROM ev UNION SELECT d FROM ev;
"""

ROWS = [
    (1, T(2024, 1, 31, 10, 15, 30, 123456), D(2024, 1, 31), "2024-01-31 10:15:30", 1),
    (2, T(2024, 2, 29, 23, 59, 59, 999999), D(2024, 2, 29), "29/02/2024 11 pm", 1),
    (3, None, None, None, 2),
    (4, T(1999, 12, 31), D(1999, 12, 31), "19991231", 2),
    (5, T(1970, 1, 1, 0, 0, 0, 1), D(1970, 1, 1), "x", 3),
    (6, T(1969, 12, 31, 23, 59, 59, 999500), D(1969, 12, 31), " 1969-12-31 23:59:59 ", 3),
    (7, T(2024, 1, 31, 10, 15, 30, 123456), D(2024, 1, 31), "2024-02-30 00:00:00", 1),
]
TAGS = [
    (T(2024, 1, 31, 10, 15, 30, 123456), "a"),
    (None, "n"),
    (T(1999, 12, 31), "y2k"),
    (T(1970, 1, 1), "e"),
]


def test_timestamp_views(pipeline):
    oracle = SqlOracle(DDL + VIEWS)
    pipeline.sql(DDL + VIEWS)
    steps = [
        ({}, {"ev": ROWS, "tag": TAGS}),
        ({"ev": ROWS[:2], "tag": TAGS[:1]}, {"ev": [(8, T(2024, 6, 1, 0, 0), D(2024, 6, 1), "20240601", 1)]}),
        ({"ev": ROWS[2:5]}, {"ev": ROWS[:1], "tag": [(T(2024, 1, 31, 10, 15, 30, 123456), "b")]}),
    ]
    oracle.run(pipeline, [(ins, dels) for dels, ins in steps])


def test_timestamps_inserted_as_strings_and_frames(pipeline):
    """ISO strings (DuckDB's TIMESTAMP forms) and a Polars frame of datetimes into a TIMESTAMP column."""
    ddl = (
        "CREATE TABLE e (id BIGINT, ts TIMESTAMP);\n"
        "CREATE VIEW v AS SELECT id, ts, ts + INTERVAL 1 SECOND AS t1, ts < '2024-01-01 00:00:00.000001' AS early FROM e;"
    )
    oracle = SqlOracle(ddl)
    pipeline.sql(ddl)
    as_text = [(1, "2024-01-01 00:00:00"), (2, "2023-12-31T23:59:59.5"), (3, "2024-1-2 3:04"), (4, None)]
    as_values = [
        (1, T(2024, 1, 1)),
        (2, T(2023, 12, 31, 23, 59, 59, 500000)),
        (3, T(2024, 1, 2, 3, 4)),
        (4, None),
    ]
    pipeline.insert("e", as_text)
    oracle.insert("e", as_values)
    pipeline.step()
    oracle.check(pipeline, what="strings")
    frame = pl.DataFrame(
        {"id": [5, 6], "ts": [T(1900, 3, 1, 12), T(2100, 12, 31, 23, 59, 59, 999999)]},
        schema={"id": pl.Int64, "ts": pl.Datetime("us")},
    )
    pipeline.insert("e", frame)
    oracle.insert("e", frame.rows())
    pipeline.delete("e", [(2, "2023-12-31 23:59:59.5")])
    oracle.delete("e", as_values[1:2])
    pipeline.step()
    oracle.check(pipeline, what="frame and delete")


def test_strptime_raises_where_duckdb_raises(pipeline):
    ddl = "CREATE TABLE s (x VARCHAR);\nCREATE VIEW v AS SELECT strptime(x, '%Y-%m-%d %H:%M') AS t FROM s;"
    pipeline.sql(ddl)
    pipeline.insert("s", [("2024-01-02 03:04",), (None,)])
    pipeline.step()
    con = duckdb.connect()
    for bad in ("2024-01-02 24:00", "2024-02-30 00:00", "2024-01-0203:04", "2024-01-02 03:04x"):
        with pytest.raises((duckdb.InvalidInputException, duckdb.ConversionException)):
            con.execute("SELECT strptime(?, '%Y-%m-%d %H:%M')", [bad]).fetchall()
        pipeline.insert("s", [(bad,)])
        with pytest.raises(DataError, match="strptime"):
            pipeline.step()


UNSUPPORTED = [
    ("SELECT ts - ts AS i FROM ev", "TIMESTAMP - TIMESTAMP"),
    ("SELECT ts - d AS i FROM ev", "TIMESTAMP - DATE"),
    ("SELECT strftime(ts, '%U') AS x FROM ev", "%U"),
    ("SELECT strptime(s, '%Y-%j') AS x FROM ev", "%j"),
    ("SELECT to_timestamp(k) AS x FROM ev", "TO_TIMESTAMP"),
    ("SELECT epoch_ms(k) AS x FROM ev", "epoch_ms"),
    ("SELECT date_trunc('decade', ts) AS x FROM ev", "decade"),
    ("SELECT extract(century FROM ts) AS x FROM ev", "century"),
    ("SELECT ts + INTERVAL '1.5' HOUR AS x FROM ev", "INTERVAL"),
    ("SELECT date_diff('day', ts, ts) AS x FROM ev", "DATE_DIFF"),
]


@pytest.mark.parametrize("query, named", UNSUPPORTED)
def test_unsupported_timestamp_sql_is_named(query, named):
    """DuckDB evaluates these; dbspark refuses them when the view is declared, naming the construct."""
    duckdb.connect().execute(DDL + f"CREATE VIEW v AS {query}; SELECT * FROM v").fetchall()
    p = dbspark.Pipeline(engine="local")
    with pytest.raises(UnsupportedError, match=named):
        p.sql(DDL + f"CREATE VIEW v AS {query};")


@pytest.mark.parametrize(
    "column_type", ["TIMESTAMP WITH LOCAL TIME ZONE", "TIMESTAMP_NS", "TIMESTAMP_MS", "TIMESTAMP(3)"]
)
def test_other_timestamp_types_are_refused(column_type):
    p = dbspark.Pipeline(engine="local")
    with pytest.raises(UnsupportedError, match="column type"):
        p.sql(f"CREATE TABLE t (x {column_type});")


def test_timestamp_synonyms_are_timestamp():
    ddl = "CREATE TABLE t (a TIMESTAMP, b DATETIME, c TIMESTAMP_US, e TIMESTAMP(6));"
    p = dbspark.Pipeline(engine="local")
    p.sql(ddl)
    con = duckdb.connect()
    con.execute(ddl)
    assert {r[1] for r in con.execute("DESCRIBE t").fetchall()} == {"TIMESTAMP"}
    assert set(p.relation("t").schema.values()) == {pl.Datetime("us")}


# ---- strftime / strptime against DuckDB, value by value ----------------------------------------------------
FORMATS = [
    "%Y-%m-%d %H:%M:%S",
    "%Y-%m-%d %H:%M:%S.%f",
    "%d/%m/%Y %I:%M %p",
    "%Y%m%d",
    "%y-%m-%d %H:%M:%S.%g",
    "%Y-%-m-%-d",
]
timestamps = st.datetimes(min_value=T(1, 1, 1), max_value=T(9999, 12, 31, 23, 59, 59, 999999))
texts = st.one_of(
    st.builds(
        lambda t, f: t.strftime(f.replace("%-m", "%m").replace("%-d", "%d").replace("%g", "%f")),
        timestamps,
        st.sampled_from(FORMATS),
    ),
    st.text(alphabet=" 0123456789-:/.APMapm", max_size=22),
)
_DUCK = duckdb.connect()


def _not_bc(s: str) -> bool:
    """DuckDB reads year 0 of %Y as 1 BC (a TIMESTAMP Python cannot hold, and dbspark refuses)."""
    years = [f"year(try_strptime(?, '{f}')) < 1" for f in FORMATS]
    return not _DUCK.execute(f"SELECT coalesce({' OR '.join(years)}, false)", [s] * len(FORMATS)).fetchone()[
        0
    ]


def test_strftime_and_strptime_agree_with_duckdb(engine_pipeline):
    """strftime of drawn TIMESTAMPs in every supported specifier, try_strptime of drawn strings (the text of
    timestamps in a format, and near misses) in each format, both as DuckDB."""
    p, oracle, name = engine_pipeline

    @settings(
        max_examples=60 if name == "local" else 4,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(
        values=st.lists(timestamps, min_size=1, max_size=6),
        strs=st.lists(texts.filter(_not_bc), min_size=1, max_size=6),
    )
    def check(values: list[T], strs: list[str]) -> None:
        f, g = [(v,) for v in values], [(s,) for s in strs]
        p.insert("f", f)
        oracle.insert("f", f)
        p.insert("g", g)
        oracle.insert("g", g)
        p.step()
        try:
            oracle.check(p)
        finally:  # each example leaves the tables empty
            p.delete("f", f)
            oracle.delete("f", f)
            p.delete("g", g)
            oracle.delete("g", g)
            p.step()

    check()


FMT_DDL = (
    "CREATE TABLE f (ts TIMESTAMP);\nCREATE TABLE g (s VARCHAR);\n"
    "CREATE VIEW out AS SELECT ts, strftime(ts, '%c %y %-y %j %-j %f %g %I %-I %p %a %A %b %B %w %u %-m %-d %-H %-M %-S %z%Z %%') AS a FROM f;\n"
    + "".join(
        f"CREATE VIEW in{i} AS SELECT s, try_strptime(s, '{f}') AS t FROM g;\n" for i, f in enumerate(FORMATS)
    )
)


@pytest.fixture(params=["local", "spark"])
def engine_pipeline(request):
    """One pipeline per engine for the whole hypothesis run (each example deletes what it inserted)."""
    if request.param == "spark":
        p = dbspark.Pipeline(engine="spark", spark=request.getfixturevalue("spark_session"))
    else:
        p = dbspark.Pipeline(engine="local")
    p.sql(FMT_DDL)
    yield p, SqlOracle(FMT_DDL), request.param
    p.close()


# ---- found on the way (by the `ordered` family of tests/test_sql_oracle.py) -------------------------------
def test_wide_decimal_to_bigint_out_of_range_is_a_data_error(pipeline):
    """CAST of a DECIMAL(38,10) far outside BIGINT: a DataError (Polars' rounding of 99...9.9999999999
    overflowed DECIMAL(38,10) and raised a ComputeError), and the values at BIGINT's bounds as DuckDB's."""
    from decimal import Decimal

    ddl = "CREATE TABLE w (k BIGINT, x DECIMAL(38,10));\nCREATE VIEW v AS SELECT k, CAST(x AS BIGINT) AS b FROM w;"
    oracle = SqlOracle(ddl)
    pipeline.sql(ddl)
    near = [(1, Decimal("9223372036854775807.4")), (2, Decimal("-9223372036854775808.4")), (3, None)]
    pipeline.insert("w", near)
    oracle.insert("w", near)
    pipeline.step()
    oracle.check(pipeline)
    for big in ("9999999999999999999999999999.9999999999", "9223372036854775807.5"):
        with pytest.raises(duckdb.ConversionException):
            duckdb.connect().execute(f"SELECT CAST(CAST('{big}' AS DECIMAL(38,10)) AS BIGINT)").fetchall()
        pipeline.insert("w", [(4, Decimal(big))])
        with pytest.raises(DataError, match="CAST"):
            pipeline.step()


def test_outer_join_keys_of_different_types_join_in_their_common_type(pipeline):
    """`LEFT JOIN ... ON date = timestamp` (and BIGINT = DECIMAL): the unmatched rows' anti-join compared
    the keys uncast and refused them (SchemaError: join key ... incompatible types)."""
    from decimal import Decimal

    ddl = (
        "CREATE TABLE a (x BIGINT, d DATE);\nCREATE TABLE b (y DECIMAL(10,2), t TIMESTAMP);\n"
        "CREATE VIEW by_num AS SELECT x, y FROM a LEFT JOIN b ON a.x = b.y;\n"
        "CREATE VIEW by_time AS SELECT d, t, x FROM a FULL JOIN b ON a.d = b.t;\n"
    )
    oracle = SqlOracle(ddl)
    pipeline.sql(ddl)
    a = [(1, D(2024, 1, 1)), (2, D(2024, 1, 2)), (None, None)]
    b = [(Decimal("1.00"), T(2024, 1, 1)), (Decimal("2.50"), T(2024, 1, 2, 0, 0, 1)), (None, None)]
    for rows_a, rows_b, dels in [(a, b, False), (a[:1], b[1:2], True)]:
        if dels:
            pipeline.delete("a", rows_a)
            oracle.delete("a", rows_a)
            pipeline.delete("b", rows_b)
            oracle.delete("b", rows_b)
        else:
            pipeline.insert("a", rows_a)
            oracle.insert("a", rows_a)
            pipeline.insert("b", rows_b)
            oracle.insert("b", rows_b)
        pipeline.step()
        oracle.check(pipeline)
