"""`dbspark run ... --follow` end to end, as a user runs it: a subprocess that keeps stepping as step
directories appear, Ctrl-C (SIGINT) stopping it at a step boundary with exit code 0, then a second run
on the same state resuming after the last committed step; the views equal those of a batch run over the
same directories."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl

ENV = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}  # (the checkout's dbspark)
PIPELINE = """
CREATE TABLE e (k VARCHAR, v INTEGER);
CREATE VIEW totals AS SELECT k, SUM(v) AS s, COUNT(*) AS n FROM e GROUP BY k;
"""


def _batch(changes: Path, name: str, rows: list[tuple[str, int, int]]) -> None:
    """A step directory written under a hidden name, then renamed (a batch is never read half-written)."""
    tmp = changes / f"_{name}"
    tmp.mkdir()
    pl.DataFrame(rows, schema=["k", "v", "weight"], orient="row").write_csv(tmp / "e.csv")
    tmp.rename(changes / name)


def _start(tmp_path: Path, *extra: str) -> subprocess.Popen:
    args = [
        sys.executable,
        "-m",
        "dbspark.cli",
        "run",
        str(tmp_path / "p.sql"),
        "--changes",
        str(tmp_path / "c"),
    ]
    args += ["--engine", "local", "--state", str(tmp_path / "st"), "--show", "0", "--poll", "0.1", *extra]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)


def _wait_for(path: Path, proc: subprocess.Popen, timeout: float = 120.0) -> None:
    end = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(proc.communicate())
        if time.monotonic() > end:
            proc.kill()  # (no run left behind)
            raise AssertionError(f"{path} did not appear: {proc.communicate()}")
        time.sleep(0.1)


def _stop(proc: subprocess.Popen) -> tuple[str, str]:
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    return out, err


def test_follow_steps_stops_at_a_boundary_and_resumes(tmp_path):
    (tmp_path / "p.sql").write_text(PIPELINE)
    changes = tmp_path / "c"
    changes.mkdir()
    _batch(changes, "1", [("a", 1, 1), ("b", 2, 1)])  # already there when the run starts
    out_dir = tmp_path / "out"
    proc = _start(tmp_path, "--follow", "--output", str(out_dir))
    _wait_for(out_dir / "totals" / "step-00000001.parquet", proc)
    _batch(changes, "2", [("a", 5, 1), ("b", 2, -1)])
    _wait_for(out_dir / "totals" / "step-00000002.parquet", proc)
    out, err = _stop(proc)
    assert "step 2 (2): 2 rows in" in err and "lag" in err
    assert re.search(r"step 2 \(2\): .*, state [\d,]+ rows", err), err
    assert "stopped after step 2 (committed)" in err
    assert "totals" in out  # the summary of a run that ended

    _batch(changes, "3", [("c", 7, 1)])
    proc = _start(tmp_path, "--follow", "--output", str(out_dir))
    _wait_for(out_dir / "totals" / "step-00000003.parquet", proc)
    out, err = _stop(proc)
    assert "resuming after step 2" in out
    assert "stopped after step 3 (committed)" in err

    batch = tmp_path / "batch"  # the same directories in one batch run
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "dbspark.cli",
            "run",
            str(tmp_path / "p.sql"),
            "--changes",
            str(changes),
            "--engine",
            "local",
            "--show",
            "0",
            "--output",
            str(batch),
        ],
        capture_output=True,
        text=True,
        env=ENV,
    )
    assert r.returncode == 0, r.stderr
    for n in (1, 2, 3):
        a = pl.read_parquet(out_dir / "totals" / f"step-{n:08d}.parquet").sort(pl.all())
        b = pl.read_parquet(batch / "totals" / f"step-{n:08d}.parquet").sort(pl.all())
        assert a.equals(b), (n, a, b)


def test_follow_needs_changes(tmp_path):
    (tmp_path / "p.sql").write_text(PIPELINE)
    from typer.testing import CliRunner

    from dbspark.cli.main import app

    r = CliRunner().invoke(app, ["run", str(tmp_path / "p.sql"), "--follow", "--engine", "local"])
    assert r.exit_code == 1 and "--follow needs --changes" in r.output


def test_follow_a_delta_change_data_feed_resumes_after_its_versions(tmp_path):
    """--changes holding a Delta table per pipeline table: each step takes the commits since the last
    one (appends, a delete, an update); stopped and restarted, the run reads every commit once, and the
    view's changes summed over the steps equal DuckDB over the table's final contents."""
    import duckdb
    from deltalake import DeltaTable, write_deltalake

    (tmp_path / "p.sql").write_text(PIPELINE)
    table = tmp_path / "c" / "e"
    rows = pl.DataFrame({"k": ["a", "b"], "v": [1, 2]})
    write_deltalake(str(table), rows.to_arrow(), configuration={"delta.enableChangeDataFeed": "true"})
    out_dir = tmp_path / "out"
    proc = _start(tmp_path, "--follow", "--output", str(out_dir))
    _wait_for(out_dir / "totals" / "step-00000001.parquet", proc)
    write_deltalake(str(table), pl.DataFrame({"k": ["c", "a"], "v": [3, 4]}).to_arrow(), mode="append")
    _wait_for(out_dir / "totals" / "step-00000002.parquet", proc)
    out, err = _stop(proc)
    assert "step 2 (e v1): 2 rows in" in err, err

    DeltaTable(str(table)).delete("v = 1")  # while no run follows: read by the next one
    DeltaTable(str(table)).update(predicate="k = 'b'", updates={"v": "20"})
    proc = _start(tmp_path, "--follow", "--output", str(out_dir))
    _wait_for(out_dir / "totals" / "step-00000003.parquet", proc)
    out, err = _stop(proc)
    assert "resuming after step 2" in out and "step 3 (e v2-3)" in err, (out, err)
    assert not (out_dir / "totals" / "step-00000004.parquet").exists()

    steps = [pl.read_parquet(f) for f in sorted((out_dir / "totals").glob("step-*.parquet"))]
    summed = (
        pl.concat(steps).group_by("k", "s", "n").agg(pl.col("weight").sum()).filter(pl.col("weight") != 0)
    )
    final = DeltaTable(str(table)).to_pyarrow_table()  # noqa: F841 (read by DuckDB)
    want = duckdb.sql("SELECT k, SUM(v) AS s, COUNT(*) AS n, 1 AS weight FROM final GROUP BY k").pl()
    assert sorted(summed.rows()) == sorted(want.rows()), (summed, want)
