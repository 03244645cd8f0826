"""The Spark engine's traces: hash buckets of sorted Arrow runs, changed at the end of each step by
`flush_step`, read by seeks at a change's keys (`engines/spark/buckets.py`)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import polars as pl
import pytest

from dbspark.algebra.zset import ZSet

pytestmark = pytest.mark.spark

SCHEMA = pl.Schema({"k": pl.Int64(), "v": pl.String()})


def test_steps_of_local_and_spark_changes_keep_the_contents_exact_and_seek_only_their_keys(
    spark_session, tmp_path
):
    from dbspark.engines.spark.kernel import SparkKernel

    k = SparkKernel(spark=spark_session, directory=tmp_path)
    try:
        trace = k.new_trace(SCHEMA, ("k",))
        expected: Counter = Counter()

        def step(t: int, rows: list[tuple], weights: list[int], on_spark: bool) -> None:
            z = k.from_local(ZSet.from_rows(rows, SCHEMA, weights))
            if on_spark:
                z = k._z(SCHEMA, z.frame)  # the same change as a Spark plan
            for r, w in zip(rows, weights, strict=True):
                expected[r] += w
            undo: list = []
            k.begin_step(t)
            snap = k.trace_insert(trace, z, undo)
            assert snap.pending  # not written before the step's end
            k.flush_step(undo)
            assert not snap.pending and snap.files == trace.files  # the step's snapshot follows
            k.end_step(t)

        step(0, [(i, f"v{i % 7}") for i in range(5000)], [1] * 5000, on_spark=True)  # a load
        bases = {b: e.paths[0] for b, e in trace.files.items()}
        for t in range(1, 9):
            step(t, [(t, f"v{t % 7}"), (10000 + t, "x")], [-1 if t % 2 else 2, 1], on_spark=t % 3 == 0)
            # a small change adds or carries into the newest runs (a driver step: one run shared by the
            # buckets), never rewrites a bucket's oldest run
            assert {b: e.paths[0] for b, e in trace.files.items() if b in bases} == bases
        want = {r: w for r, w in expected.items() if w}
        snap = trace.snapshot()
        assert k.as_zset(snap).to_zset().to_dict() == want  # read in the driver
        from dbspark.engines.spark.convert import from_spark

        assert from_spark(k.as_zset(snap).frame, SCHEMA).consolidate().to_dict() == want  # by Spark
        # a seek returns exactly the rows of the probed keys, from a local or a Spark probe
        probe = ZSet.from_rows([(3, "?"), (10003, "?"), (50000, "?")], SCHEMA, [1, 1, 1])
        keys = {3, 10003, 50000}
        sub = {r: w for r, w in want.items() if r[0] in keys}
        for z in (k.from_local(probe), k._z(SCHEMA, k.from_local(probe).frame)):
            got = k.seek(snap, z, [("k", "k")], exact=False)
            assert k.act(lambda got=got: got.to_zset()).to_dict() == sub
    finally:
        k.close()


@pytest.mark.parametrize("early", [False, True])
def test_a_rolled_back_flush_leaves_the_trace_as_it_was(spark_session, tmp_path, early: bool):
    """A step's writes rolled back: the trace has its files back and nothing pending, the snapshot of
    the step before (what a delay holds) still reads that step, and the step run again (with another
    change) is right. With `early`, the change is written as it arrives (`write_rows` 1), and a second
    change of the same step writes the trace again under other names."""
    from dbspark.engines.spark.kernel import SparkKernel

    k = SparkKernel(spark=spark_session, directory=tmp_path)
    if early:
        k.write_rows = 1
    try:
        trace = k.new_trace(SCHEMA, ("k",))
        undo: list = []
        k.begin_step(0)
        held = k.trace_insert(trace, k.from_local(ZSet.from_rows([(1, "a")], SCHEMA, [1])), undo)
        k.flush_step(undo)
        k.end_step(0)
        before = dict(trace.files)
        undo = []
        k.begin_step(1)
        mid = k.trace_insert(trace, k.from_local(ZSet.from_rows([(2, "b")], SCHEMA, [1])), undo)
        # a plan on Spark that seeks the trace as it is now, run only after the step's next write
        probe = k.from_local(ZSet.from_rows([(1, "?"), (2, "?")], SCHEMA, [1, 1]))
        sought = k.seek(mid, k._z(SCHEMA, probe.frame), [("k", "k")], exact=False)
        k.trace_insert(trace, k.from_local(ZSet.from_rows([(1, "a"), (3, "c")], SCHEMA, [-1, 1])), undo)
        k.flush_step(undo)
        assert k.act(lambda: sought.to_zset()).to_dict() == {(1, "a"): 1, (2, "b"): 1}
        assert trace.files != before
        if early:  # written twice in the step, the second write's runs named apart
            assert any("-w001-" in r for e in trace.files.values() for r in e.runs())
        for f in reversed(undo):
            f()
        k.abort_step()
        assert trace.files == before and not trace.pending and trace.writes == 0
        assert k.as_zset(trace.snapshot()).to_zset().to_dict() == {(1, "a"): 1}
        assert k.as_zset(held).to_zset().to_dict() == {(1, "a"): 1}
        undo = []
        k.begin_step(1)  # the step again, with another change
        k.trace_insert(trace, k.from_local(ZSet.from_rows([(4, "d")], SCHEMA, [1])), undo)
        k.flush_step(undo)
        k.end_step(1)
        assert k.as_zset(trace.snapshot()).to_zset().to_dict() == {(1, "a"): 1, (4, "d"): 1}
        assert k.as_zset(held).to_zset().to_dict() == {(1, "a"): 1}
    finally:
        k.close()


def _insert_spark_plans(k: Any, trace: Any, undo: list) -> dict:
    """Twelve changes inserted into `trace`, each a plan on Spark holding two copies of its leaf (a
    recursive scope's iteration on the cluster); checks that the pending parts' plans stay short (past
    half the kernel's `max_lineage` they become one computed part) and returns the rows' weights."""
    want: Counter = Counter()
    lengths = []
    for i in range(12):
        rows = [(i, f"v{i}"), (i + 1, f"v{i + 1}")]
        for r in rows:
            want[r] += 2  # (each change's rows twice: the union)
        z = k.from_local(ZSet.from_rows(rows, SCHEMA, [1, 1]))
        z = k._z(SCHEMA, z.frame.unionByName(z.frame), lineage=2)  # a plan on Spark (2 leaf copies)
        k.trace_insert(trace, z, undo)
        lengths.append(sum(p.lineage for p in trace.pending))
    assert max(lengths) <= k.max_lineage // 2 + 2, lengths  # merged whenever they passed half
    assert len(trace.pending) < 12
    return dict(want)


def test_a_trace_given_a_change_on_spark_per_iteration_keeps_its_pending_parts_computed(
    spark_session, tmp_path
):
    """A trace of the state (not scratch) given a change on Spark per iteration of a recursive scope on
    the cluster keeps its pending parts' plans short as a scratch trace does: each seek of the pending
    parts is one plan over all of them, and held apart they made every iteration's plan wider than the
    last (delete-and-rederive on the cluster: 4, 5, 6, ... Spark jobs an iteration's cut, 2x a step's
    time at 3,000 edges). The step's flush writes their rows; rolled back, the parts are as they were."""
    from dbspark.engines.spark.kernel import SparkKernel

    k = SparkKernel(spark=spark_session, directory=tmp_path)
    try:
        trace = k.new_trace(SCHEMA, ("k",))
        for rollback in (True, False):
            undo: list = []
            k.begin_step(0)
            want = _insert_spark_plans(k, trace, undo)
            assert k.as_zset(trace.snapshot()).to_zset().to_dict() == want
            if rollback:
                for f in reversed(undo):
                    f()
                k.abort_step()
                assert not trace.pending and not trace.files
                continue
            k.flush_step(undo)
            k.end_step(0)
            assert not trace.pending
            assert k.as_zset(trace.snapshot()).to_zset().to_dict() == want
    finally:
        k.close()


def test_a_scratch_trace_on_spark_keeps_its_parts_computed_and_seeks_by_sort_merge(spark_session, tmp_path):
    """A scratch trace (a recursive scope's per-step state) given a change on Spark per iteration keeps
    the parts' plans short: past half the kernel's `max_lineage` they become one computed part (one job),
    and rolled back they are the parts as they were. A seek of its parts joins the probe's keys by sort-
    merge: a shuffled hash join built on a large change's keys ran the executors out of memory (a
    recursive view loaded from a 1M-edge DataFrame), and a broadcast is a job of its own."""
    from dbspark.engines.spark.kernel import SparkKernel

    k = SparkKernel(spark=spark_session, directory=tmp_path)
    try:
        with k.scratch():
            trace = k.new_trace(SCHEMA, ("k",))
        undo: list = []
        k.begin_step(0)
        want = _insert_spark_plans(k, trace, undo)
        assert k.as_zset(trace.snapshot()).to_zset().to_dict() == want
        probe = k._z(SCHEMA, k.from_local(ZSet.from_rows([(3, "?"), (7, "?")], SCHEMA, [1, 1])).frame)
        sought = k.seek(trace.snapshot(), probe, [("k", "k")], exact=True)
        plan = sought.frame._jdf.queryExecution().executedPlan().toString()
        assert "SortMergeJoin" in plan and "HashJoin" not in plan, plan
        assert sought.to_zset().to_dict() == {
            (3, "v3"): 4,
            (7, "v7"): 4,
        }
        for f in reversed(undo):
            f()
        assert not trace.pending
    finally:
        k.abort_step()
        k.close()
