"""`split_part`, `regexp_extract` and aggregates with a `FILTER (WHERE ...)` clause against DuckDB, on
both engines: rows with NULLs, empty strings, missing parts and groups, negative and zero part numbers,
an empty delimiter; a step of inserts, then one of deletes. On Spark the rows are pushed as a Spark
DataFrame, so that Spark's own functions compute them (rows pushed from Python are computed in the
driver by the local engine's).
"""

from __future__ import annotations

import duckdb
import pytest
from hypothesis import strategies as st

from dbspark.errors import UnsupportedError
from dbspark.testing.engines import engine_given, is_spark, pipeline_on
from dbspark.testing.sql_oracle import compare_frames, view_frame

TABLE = "CREATE TABLE t (u VARCHAR, v VARCHAR, k INTEGER, p INTEGER)"
VIEWS = {
    "rx": "SELECT u, regexp_extract(u, '(&|^)channel_id=([^&]*)', 2) AS c, regexp_extract(u, 'a+') AS d, "
    "regexp_extract(u, '(x)?c', 1) AS e, regexp_extract(u, '[0-9]+', 0) AS f FROM t",
    "sp": "SELECT v, split_part(v, '/', 2) AS a, split_part(v, '/', -1) AS b, split_part(v, '/', 5) AS c, "
    "split_part(v, '', 2) AS d, split_part(v, '/', 0) AS e, split_part(v, '', -1) AS f, "
    "split_part(v, '//', 1) AS g FROM t",
    "fi": "SELECT k % 2 AS g, count(*) FILTER (WHERE p < 50) AS a, count(DISTINCT k) FILTER (WHERE p < 50) AS b, "
    "sum(p) FILTER (WHERE k > 1) AS c, count(p) FILTER (k > 2) AS d, max(u) FILTER (WHERE p IS NULL) AS e, "
    "avg(p) FILTER (WHERE u LIKE '%c%') AS f FROM t GROUP BY ALL",
}
STRINGS = st.sampled_from(
    [
        "a&channel_id=7&x",
        "channel_id=",
        "nothing",
        "xchannel_id=3",
        "aa/b/c",
        "a//b",
        "",
        "/",
        "abc",
        "9a9",
        None,
    ]
)
ROW = st.tuples(
    STRINGS, STRINGS, st.one_of(st.none(), st.integers(0, 5)), st.one_of(st.none(), st.integers(0, 99))
)
FIXED = [
    ("a&channel_id=7&x", "a/b/c", 1, 5),
    ("nothing", "a//b", 2, 20),
    (None, None, 3, None),
    ("channel_id=9", "", 4, 70),
    ("xchannel_id=3", "abc", None, 3),
    ("9a9", "/", 5, 49),
]


@engine_given(
    st.lists(ROW, max_size=8),
    st.integers(0, 8),
    local=40,
    spark=1,
    spark_strategies=(st.just(FIXED), st.just(3)),
)
def test_split_part_regexp_extract_and_filter_match_duckdb(engine, rows, ndel):
    con = duckdb.connect()
    con.execute(TABLE)
    p = pipeline_on(engine)
    try:
        p.sql(TABLE + ";" + "".join(f"CREATE VIEW {n} AS {q};" for n, q in VIEWS.items()))
        for batch, weight in ((rows, 1), (rows[:ndel], -1)):
            if not batch:
                continue
            pushed = batch
            if is_spark(engine):
                pushed = engine.spark.createDataFrame(batch, "u string, v string, k int, p int")
            (p.insert if weight > 0 else p.delete)("t", pushed)
            if weight > 0:
                con.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", batch)
            else:
                for r in batch:
                    con.execute(
                        "DELETE FROM t WHERE rowid = (SELECT min(rowid) FROM t WHERE u IS NOT DISTINCT FROM ? AND "
                        "v IS NOT DISTINCT FROM ? AND k IS NOT DISTINCT FROM ? AND p IS NOT DISTINCT FROM ?)",
                        list(r),
                    )
            p.step()
            for view, query in VIEWS.items():
                differ = compare_frames(view_frame(p.view(view)), con.sql(query).pl(), view)
                assert differ is None, differ
    finally:
        p.close()


@pytest.mark.parametrize(
    "item, message",
    [
        ("split_part(v, u, 2)", "split_part: its delimiter must be a constant"),
        ("split_part(v, '/', k)", "split_part: its part number must be a constant"),
        ("regexp_extract(u, v)", "regexp_extract: its pattern must be a constant"),
        ("string_agg(u, ',') FILTER (WHERE k > 1)", "unsupported SQL: FILTER on"),
    ],
)
def test_non_constant_arguments_and_other_filters_are_refused(item, message):
    p = pipeline_on("local")
    try:
        with pytest.raises(UnsupportedError, match=message):
            p.sql(f"{TABLE}; CREATE VIEW w AS SELECT {item} AS x FROM t;")
    finally:
        p.close()
