"""`Pipeline.follow_stream`: a Spark Structured Streaming source, one step per micro-batch, each applied
once: a query over Parquet files (rows with weights, a delete among them) fed into a durable pipeline,
then a new file read by a restarted query and a reopened pipeline; the view against DuckDB over the
rows' weights, and a micro-batch delivered again after a restart skipped.
"""

from __future__ import annotations

import duckdb
import polars as pl
import pytest

from dbspark.errors import UnknownNameError
from dbspark.testing.engines import pipeline_on
from dbspark.testing.sql_oracle import compare_frames, view_frame

DDL = "CREATE TABLE e (k VARCHAR, v INTEGER); CREATE VIEW totals AS SELECT k, SUM(v) AS s, COUNT(*) AS n FROM e GROUP BY k;"
BATCHES = [
    [("a", 1, 1), ("b", 2, 1)],
    [("a", 5, 1), ("b", 2, -1)],
    [("c", 7, 1), ("a", 1, -1)],
]


def _write(directory, n: int, rows) -> None:
    pl.DataFrame(rows, schema=["k", "v", "weight"], orient="row").with_columns(
        pl.col("v").cast(pl.Int32)
    ).write_parquet(directory / f"batch-{n:03d}.parquet")


def _expected(batches) -> pl.DataFrame:
    rows = pl.DataFrame([r for b in batches for r in b], schema=["k", "v", "weight"], orient="row")  # noqa: F841
    return duckdb.sql(
        "SELECT k, SUM(v * weight) AS s, SUM(weight) AS n FROM rows GROUP BY k HAVING SUM(weight) > 0"
    ).pl()


@pytest.mark.spark
def test_a_streaming_source_steps_once_per_micro_batch(spark_engine, tmp_path):
    spark = spark_engine.spark
    src = tmp_path / "src"
    src.mkdir()
    for n, b in enumerate(BATCHES):
        _write(src, n, b)
    schema = "k string, v int, weight long"

    def stream():
        return spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(src))

    p = pipeline_on(spark_engine, tmp_path / "state")
    try:
        p.sql(DDL)
        with pytest.raises(UnknownNameError, match="no table 'nope'"):
            p.follow_stream("nope", stream())
        q = p.follow_stream("e", stream(), checkpoint=tmp_path / "chk", trigger={"availableNow": True})
        q.awaitTermination()
        assert p.steps == 3 and p.offsets == {"stream:e": 2}
        differ = compare_frames(view_frame(p.view("totals")), _expected(BATCHES), "totals")
        assert differ is None, differ
    finally:
        p.close()

    _write(src, 3, [("b", 4, 1)])
    again = pipeline_on(spark_engine, tmp_path / "state")
    try:
        again.sql(DDL)
        q = again.follow_stream("e", stream(), checkpoint=tmp_path / "chk", trigger={"availableNow": True})
        q.awaitTermination()
        assert again.steps == 4 and again.offsets == {"stream:e": 3}
        differ = compare_frames(
            view_frame(again.view("totals")), _expected([*BATCHES, [("b", 4, 1)]]), "totals"
        )
        assert differ is None, differ
        # a micro-batch Spark delivers again (its query restarted before committing its checkpoint)
        from dbspark.io.streams import follow_stream

        before = again.steps
        replay = spark.createDataFrame([("z", 9, 1)], schema)
        step = _foreach(follow_stream, again)
        step(replay, 3)
        assert again.steps == before
    finally:
        again.close()


def _foreach(follow_stream, p):
    """The foreachBatch function `follow_stream` gives its query (taken from a query never started)."""
    got = {}

    class Writer:
        def foreachBatch(self, fn):
            got["fn"] = fn
            return self

        def option(self, *a):
            return self

        def trigger(self, **kw):
            return self

        def start(self):
            return None

    class Stream:
        isStreaming = True
        columns = ["k", "v", "weight"]
        writeStream = Writer()

    follow_stream(p, "e", Stream())
    return got["fn"]
