"""Polars frames moved to Spark (`engines/spark/convert.to_spark`): every row arrives, whatever the
frame's chunks."""

from __future__ import annotations

from collections import Counter
from typing import Any

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dbspark.algebra.zset import WEIGHT

pytestmark = pytest.mark.spark

VALUES = st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1))
ROWS = st.tuples(VALUES, st.integers(-3, 3), st.booleans())  # (value, weight, kept by the filter)
# a chunk's rows, or none of them (`False`: the filter leaves it an empty chunk)
CHUNKS = st.lists(
    st.tuples(st.lists(ROWS, min_size=1, max_size=3), st.booleans()).map(
        lambda c: c[0] if c[1] else [(v, w, False) for v, w, _ in c[0]]
    ),
    min_size=1,
    max_size=5,
)
SCHEMA = pl.Schema({"x": pl.Int64(), WEIGHT: pl.Int64()})


def _chunked(chunks: list[list[tuple]]) -> pl.DataFrame:
    """The rows kept, in the chunks they were built in: a filter of a frame of several chunks leaves a
    chunk whose rows all go as an empty chunk (as a consolidation's `_drop_zero` does)."""
    frames = [pl.DataFrame([r[:2] for r in c], schema=SCHEMA, orient="row") for c in chunks]
    return pl.concat(frames, rechunk=False).filter(pl.Series([r[2] for c in chunks for r in c]))


@settings(max_examples=30, deadline=None)
@given(chunks=CHUNKS)
def test_a_frame_of_several_chunks_some_empty_arrives_whole(spark_session: Any, chunks: list) -> None:
    """Every row of a frame whose chunks include empty ones reaches Spark; PySpark's createDataFrame of
    such an Arrow table kept only the rows before the first empty chunk after a non-empty one."""
    from dbspark.engines.spark.convert import to_spark

    df = _chunked(chunks)
    got = Counter(tuple(r) for r in to_spark(spark_session, df).collect())
    assert got == Counter(r[:2] for c in chunks for r in c if r[2])


def test_the_empty_middle_chunk_of_a_distinct_view_s_change(spark_session: Any) -> None:
    """The case found in a pipeline (a DISTINCT view's change consolidated into three chunks, the middle
    one empty): NULL and 10 deleted, 30 inserted twice."""
    from dbspark.engines.spark.convert import to_spark

    df = _chunked([[(None, -1, True), (10, -1, True)], [(20, 0, False)], [(30, 2, True)]])
    assert [len(c) for c in df.to_arrow()["x"].chunks] == [2, 0, 1]
    got = sorted(map(tuple, to_spark(spark_session, df).collect()), key=str)
    assert got == [(10, -1), (30, 2), (None, -1)]
