"""The Spark engine's traces: Parquet LSMs with size-tiered merges (`engines/spark/trace.py`)."""

from __future__ import annotations

from collections import Counter

import polars as pl
import pytest

from dbspark.algebra.zset import ZSet

pytestmark = pytest.mark.spark

SCHEMA = pl.Schema({"k": pl.Int64(), "v": pl.String()})


def test_small_appends_never_rewrite_a_large_batch_and_contents_stay_exact(spark_session):
    from dbspark.engines.spark.kernel import SparkKernel
    from dbspark.engines.spark.trace import FANOUT

    k = SparkKernel(spark=spark_session)
    try:
        trace = k.new_trace(SCHEMA, ("k",))
        expected: Counter = Counter()

        def append(rows: list[tuple], weights: list[int]) -> None:
            z = ZSet.from_rows(rows, SCHEMA, weights)
            for r, w in zip(rows, weights, strict=True):
                expected[r] += w
            k.trace_insert(trace, k.from_local(z), [])

        append([(i, f"v{i % 7}") for i in range(700)], [1] * 700)  # a load: tier log8(700) = 3
        big = trace.batches[0]
        assert big.rows == 700
        for step in range(3 * FANOUT + 3):
            append([(step, f"v{step % 7}"), (1000 + step, "x")], [-1 if step % 2 else 2, 1])
            assert trace.batches[0] == big  # the load batch is never rewritten by small appends
            assert len(trace.batches) <= 2 * FANOUT
        got = k.as_zset(trace.snapshot()).to_zset().to_dict()
        assert got == {r: w for r, w in expected.items() if w}
        assert any(b.level > 0 for b in trace.batches)  # small batches were merged
    finally:
        k.close()
