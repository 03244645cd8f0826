"""The Pipeline surface and durability: atomic steps, resume after a restart, a SIGKILL mid-step.

The crash tests run the `dbspark` CLI in a subprocess over a directory of change batches, kill it
with SIGKILL between writing a step's state and committing it (and, for the local engine, at random
moments), run it again, and check that the views equal an uninterrupted run's and that every step's
output was written exactly once.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import dbspark
from dbspark import col
from dbspark.errors import CircuitError, DataError, NegativeStateError, UnknownNameError

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "orders"


def _pipeline(engine: str, spark: Any, directory: Path | None = None) -> dbspark.Pipeline:
    p = (
        dbspark.Pipeline(directory, engine=engine, spark=spark)
        if engine == "spark"
        else dbspark.Pipeline(directory, engine="local")
    )
    t = p.table("t", {"k": "int64", "v": "int64"})
    p.create_view("sums", t.stream_aggregate("k", n="count", s=("sum", "v")))
    p.create_view("big", t.filter(col("v") > 10).map("k").stream_distinct())
    return p


@pytest.fixture(params=["local", "spark"])
def engine_session(request: pytest.FixtureRequest) -> tuple[str, Any]:
    if request.param == "spark":
        request.applymarker(pytest.mark.spark)
        return "spark", request.getfixturevalue("spark_session")
    return "local", None


def test_pipeline_steps_views_and_atomic_rejection(engine_session, tmp_path):
    engine, spark = engine_session
    with _pipeline(engine, spark, tmp_path / "p") as p:
        p.insert("t", [(1, 5), (1, 20), (2, 30)])
        out = p.step()
        assert out["sums"].to_dict() == {(1, 2, 25): 1, (2, 1, 30): 1}
        assert p.view("big").to_dict() == {(1,): 1, (2,): 1}
        p.delete("t", [(1, 20)])
        p.insert("t", [(3, 1)])
        out = p.step()
        assert out["big"].to_dict() == {(1,): -1}
        before = {v: p.view(v).to_dict() for v in p.views}
        p.delete("t", [(2, 30), (9, 9)])  # (9, 9) is not there: the whole step is rejected
        with pytest.raises(NegativeStateError, match=r"delete of row \(9, 9\)"):
            p.step()
        assert {v: p.view(v).to_dict() for v in p.views} == before
        assert p.steps == 2
        p.table("u", {"a": "int64"})  # a table declared on a running pipeline starts empty
        assert "u" in p.tables and p.steps == 2
        with pytest.raises(CircuitError, match="'t' is already declared"):
            p.table("t", {"a": "int64"})
        with pytest.raises(UnknownNameError):
            p.insert("nope", [(1, 1)])


@pytest.mark.parametrize("seed", [0, 1])
def test_a_change_larger_than_a_small_trace_is_the_views_new_batch_and_steps_stay_right(engine_session, seed):
    """A view's change of more rows than a trace keeps as one small batch (the local kernel's
    `commit_output`): the step's output is its rows sorted by their hashes, and the view's trace keeps
    that frame as its new batch (their columns shared). The changes of later steps (deletes, inserts,
    duplicates, a row whose weight goes from 2 to 1, everything deleted) and the view's contents are
    Python's."""
    from dbspark.trace.spine import SMALL

    engine, spark = engine_session
    rng = random.Random(seed)
    p = (
        dbspark.Pipeline(engine="spark", spark=spark)
        if engine == "spark"
        else dbspark.Pipeline(engine="local")
    )
    with p:
        t = p.table("t", {"k": "int64", "v": "int64"})
        p.create_view("bag", t.filter((col("v") % 3).ne(0)))
        p.create_view("keys", t.map("k").stream_distinct())
        rows = [(rng.randrange(3 * SMALL), rng.randrange(10)) for _ in range(3 * SMALL)]
        rows += rows[: SMALL // 2]  # (duplicates: weight 2)
        have: Counter = Counter()
        steps = [(rows, []), (rows[-SMALL:][:100] + [(-1, 1)] * 3, rows[: 2 * SMALL]), ([], None)]
        for ins, dels in steps:
            dels = list((have + Counter(ins)).elements()) if dels is None else dels
            before = have.copy()
            p.insert("t", ins)
            p.delete("t", dels)
            have = have + Counter(ins)
            have.subtract(Counter(dels))
            have = +have
            out = p.step()
            if engine == "local" and not before:  # (into an empty trace: the same frame, not a copy)
                (batch,) = p.runtime._views["bag"].batches
                assert batch.df is out["bag"].df
            bag = Counter({r: n for r, n in have.items() if r[1] % 3 != 0})
            keys = {(k,) for k, _ in have}
            was_bag = Counter({r: n for r, n in before.items() if r[1] % 3 != 0})
            change = {r: bag[r] - was_bag[r] for r in set(bag) | set(was_bag) if bag[r] != was_bag[r]}
            assert out["bag"].to_dict() == change
            was_keys = {(k,) for k, _ in before}
            assert out["keys"].to_dict() == {
                **{r: 1 for r in keys - was_keys},
                **{r: -1 for r in was_keys - keys},
            }
            assert p.view("bag").to_dict() == dict(bag)
            assert p.view("keys").to_dict() == dict.fromkeys(keys, 1)
        assert not have


def test_a_view_whose_constant_fails_is_empty_over_empty_tables(engine_session):
    """A constant that cannot be computed (a cast out of range) fails per row, as in DuckDB: the step
    that inserts rows is rejected, and the view read before any step committed is the view over the
    empty tables, with no row and no error (found by the SQL oracle's ORDER BY ... OFFSET family)."""
    engine, spark = engine_session
    p = (
        dbspark.Pipeline(engine="spark", spark=spark)
        if engine == "spark"
        else dbspark.Pipeline(engine="local")
    )
    with p:
        p.sql(
            "CREATE TABLE t (k BIGINT); CREATE VIEW v AS SELECT CAST(epoch_ms(TIMESTAMP '2020-01-31 "
            "23:59:59') AS DECIMAL(10,2)) AS o, k FROM t WHERE k IS NULL OR k <> 1"
        )
        p.insert("t", [(None,), (2,)])
        with pytest.raises(DataError, match=r"step 1 rejected.*DECIMAL\(10,2\)"):
            p.step()
        assert p.steps == 0 and p.view("v").to_dict() == {}


def test_pipeline_reopened_on_its_directory_resumes(engine_session, tmp_path):
    engine, spark = engine_session
    d = tmp_path / "p"
    with _pipeline(engine, spark, d) as p:
        p.insert("t", [(1, 5), (2, 50)])
        p.step()
        p.insert("t", [(1, 15)])
        p.step()
        views = {v: p.view(v).to_dict() for v in p.views}
    with _pipeline(engine, spark, d) as p:
        assert p.steps == 2
        assert {v: p.view(v).to_dict() for v in p.views} == views
        p.delete("t", [(2, 50)])
        out = p.step()
        assert out["sums"].to_dict() == {(2, 1, 50): -1}
        assert p.view("big").to_dict() == {(1,): 1}


def test_default_engine_is_spark():
    assert dbspark.Pipeline().engine == "spark"


# ---- crash tests through the CLI ---------------------------------------------------------------------------
def _cli(args: list[str], env: dict[str, str] | None = None) -> subprocess.Popen:
    e = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.Popen(
        [sys.executable, "-m", "dbspark.cli", *args],
        env=e,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _changes(tmp: Path, steps: int, seed: int) -> Path:
    """A directory of random change batches for the example pipeline (orders and customers)."""
    rng = random.Random(seed)
    d = tmp / "changes"
    orders: Counter = Counter()
    for s in range(steps):
        sd = d / f"{s + 1}"
        sd.mkdir(parents=True)
        if s == 0:
            pl.DataFrame(
                {"cust": [1, 2, 3], "name": ["a", "b", "c"], "region": ["EU", "US", "EU"]}
            ).write_csv(sd / "customers.csv")
        rows, ops = [], []
        for _ in range(rng.randint(0, 6)):
            r = (rng.randint(1, 30), rng.randint(1, 4), f"{rng.randint(1, 999)}.{rng.randint(0, 99):02d}")
            rows.append(r)
            ops.append("insert")
        live = [r for r, n in orders.items() for _ in range(n)]
        for r in rng.sample(live, min(len(live), rng.randint(0, 3))):
            rows.append(r)
            ops.append("delete")
        for r, o in zip(rows, ops, strict=True):
            orders[r] += 1 if o == "insert" else -1
            if orders[r] == 0:
                del orders[r]
        if rows:
            pl.DataFrame(
                {
                    "o_id": [r[0] for r in rows],
                    "cust": [r[1] for r in rows],
                    "total": [r[2] for r in rows],
                    "op": ops,
                }
            ).write_csv(sd / "orders.csv")
    return d


def _outputs(out: Path) -> dict[str, Counter]:
    """Each view's changes summed over the written step files (a duplicated step would double them)."""
    sums: dict[str, Counter] = {}
    for view_dir in sorted(out.iterdir()):
        c: Counter = Counter()
        for f in sorted(view_dir.glob("step-*.parquet")):
            df = pl.read_parquet(f)
            for r in df.iter_rows():
                c[r[:-1]] += r[-1]
        sums[view_dir.name] = Counter({k: w for k, w in c.items() if w != 0})
    return sums


def _reference(changes: Path) -> dict[str, dict]:
    from dbspark.cli.main import load_pipeline, push_batch, step_dirs

    p = dbspark.Pipeline(engine="local")
    load_pipeline(EXAMPLE / "pipeline.py", p)
    for d in step_dirs(changes):
        push_batch(p, d)
        p.step()
    return {v: p.view(v).to_dict() for v in p.views}


def _as_counter(view: dict) -> Counter:
    return Counter({tuple(str(x) for x in k): w for k, w in view.items()})


def _check(out: Path, expected: dict[str, dict], steps: int) -> None:
    got = _outputs(out)
    for view, rows in expected.items():
        assert {tuple(str(x) for x in k): w for k, w in got[view].items()} == _as_counter(rows), view
        assert len(list((out / view).glob("step-*.parquet"))) == steps


@pytest.mark.spark
def test_spark_pipeline_killed_before_commit_resumes_without_duplicates(tmp_path):
    changes = _changes(tmp_path, steps=4, seed=7)
    args = [
        "run",
        str(EXAMPLE / "pipeline.py"),
        "--changes",
        str(changes),
        "--state",
        str(tmp_path / "state"),
        "--output",
        str(tmp_path / "out"),
        "--show",
        "0",
        "--master",
        "local[2]",
    ]
    first = _cli(args, {"DBSPARK_KILL_BEFORE_COMMIT": "3"})
    first.communicate(timeout=600)
    assert first.returncode == -signal.SIGKILL
    assert len(list((tmp_path / "out").glob("*/step-00000003.parquet"))) == 3  # written, never committed
    second = _cli(args)
    so, se = second.communicate(timeout=600)
    assert second.returncode == 0, se
    assert "resuming after step 2" in so
    _check(tmp_path / "out", _reference(changes), 4)
    # the engine's own change logs (written by steps that ran on Spark; these small ones run in the
    # driver, `engines/spark/placement.py`) hold each committed step once
    for view in ("revenue_by_region", "largest_order", "big_spenders"):
        d = tmp_path / "state" / "state" / "outputs" / view
        logs = [p.name for p in d.iterdir()] if d.exists() else []
        assert len(logs) == len(set(logs)) and all(int(n[5:]) < 4 for n in logs)


def test_local_pipeline_killed_at_random_moments_finishes_equal_to_the_oracle(tmp_path):
    changes = _changes(tmp_path, steps=12, seed=3)
    args = [
        "run",
        str(EXAMPLE / "pipeline.py"),
        "--changes",
        str(changes),
        "--state",
        str(tmp_path / "state"),
        "--output",
        str(tmp_path / "out"),
        "--show",
        "0",
        "--engine",
        "local",
    ]
    rng = random.Random(5)
    kills = 0
    every_frame_a_file = {"DBSPARK_CHECKPOINT_FRAME_ROWS": "1"}  # (`circuit/checkpoint.py`)
    for _ in range(3):
        proc = _cli(args, every_frame_a_file)
        time.sleep(rng.uniform(0.5, 2.5))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        proc.communicate(timeout=120)
    for step in (3, 7):  # and mid-step, before the commit, at fixed steps
        proc = _cli(args, {"DBSPARK_KILL_BEFORE_COMMIT": str(step), **every_frame_a_file})
        proc.communicate(timeout=120)
    final = _cli(args, every_frame_a_file)
    _, se = final.communicate(timeout=300)
    assert final.returncode == 0, se
    _check(tmp_path / "out", _reference(changes), 12)


@pytest.mark.spark
def test_a_step_whose_spark_task_dies_fails_keeps_its_changes_and_runs_again(spark_session, tmp_path):
    """On `local[2]` a failed task is not retried: the step fails as an `EngineError` (not the data's
    fault), nothing is applied, its changes stay queued, and running the step again applies them once."""
    from dbspark.engines.spark.buckets import KILL_TASK_ONCE
    from dbspark.errors import EngineError
    from dbspark.testing.sql_oracle import SqlOracle

    ddl = "CREATE TABLE t (k BIGINT, g BIGINT); CREATE VIEW v AS SELECT g, count(*) AS n, sum(k) AS s FROM t GROUP BY g;"
    oracle = SqlOracle(ddl)
    p = dbspark.Pipeline(tmp_path / "state", engine="spark", spark=spark_session)
    spark_session.conf.set("spark.dbspark.placement", "cluster")  # (a small step runs in the driver)
    try:
        p.sql(ddl)
        rows = [(i, i % 3) for i in range(20)]
        p.insert("t", spark_session.createDataFrame(rows, "k long, g long"))
        oracle.insert("t", rows)
        trigger = tmp_path / "state" / "state" / "traces" / KILL_TASK_ONCE
        trigger.parent.mkdir(parents=True, exist_ok=True)
        trigger.write_text("")
        with pytest.raises(EngineError, match="step 1 failed on the engine, nothing applied"):
            p.step()
        assert p.steps == 0 and not trigger.exists()
        p.step()
        assert p.steps == 1
        oracle.check(p)
    finally:
        spark_session.conf.unset("spark.dbspark.placement")
        p.close()


@pytest.mark.parametrize("losses, applied", [(1, True), (2, False)])
def test_a_step_that_lost_an_executor_is_run_again_once(
    monkeypatch: pytest.MonkeyPatch, losses: int, applied: bool
) -> None:
    """The executor loss itself is tested on a local cluster (`test_spark_cluster.py`); here, the
    Pipeline's answer to it: one more run of the step, then the error."""
    from dbspark.circuit.runtime import Runtime
    from dbspark.errors import EngineError, ExecutorLostError

    p = _pipeline("local", None)
    p.insert("t", [(1, 20)])
    real, left = Runtime.step, [losses]

    def losing(self: Runtime, *args: Any, **kw: Any) -> Any:
        if left[0]:
            left[0] -= 1
            raise ExecutorLostError("Checkpoint block rdd_1_0 not found")  # nothing applied, as Runtime's
        return real(self, *args, **kw)

    monkeypatch.setattr(Runtime, "step", losing)
    if applied:
        assert p.step()["big"].to_dict() == {(1,): 1} and p.steps == 1
    else:
        with pytest.raises(EngineError, match="rdd_1_0"):
            p.step()
        assert p.steps == 0
