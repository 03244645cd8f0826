"""The local engine's memory limit (`engines/local/memory.py`): a step whose state would pass it is
rejected with a clear error, nothing applied, and the pipeline goes on; the limit counts the state a
reopened pipeline restored; it is set by the Pipeline, the CLI or the environment."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import dbspark
from dbspark.engines.local.memory import parse_size
from dbspark.errors import DbsparkError, MemoryLimitError, UnsupportedError

ROOT = Path(__file__).resolve().parents[1]
SQL = """
CREATE TABLE t (k BIGINT, v BIGINT);
CREATE VIEW s AS SELECT k % 10 AS g, SUM(v) AS total, COUNT(*) AS n FROM t GROUP BY k % 10;
CREATE VIEW d AS SELECT DISTINCT k FROM t;
"""


def _rows(n: int, start: int = 0) -> pl.DataFrame:
    return pl.DataFrame({"k": np.arange(start, start + n), "v": np.arange(n) % 7})


def _pipeline(directory: Path | None = None, **options: object) -> dbspark.Pipeline:
    p = dbspark.Pipeline(directory, engine="local", **options)
    p.sql(SQL)
    return p


@pytest.mark.parametrize(
    "size, n",
    [
        (1000, 1000),
        ("512", 512),
        ("2KB", 2048),
        ("1.5MiB", 1572864),
        ("8GiB", 8 << 30),
        ("2g", 2 << 30),
        ("1T", 1 << 40),
    ],
)
def test_sizes(size: int | str, n: int) -> None:
    assert parse_size(size) == n


@pytest.mark.parametrize("size", ["", "lots", "-1GB", "0", 0, "1PB", "1.5.2G"])
def test_bad_sizes_are_refused(size: int | str) -> None:
    with pytest.raises(DbsparkError, match="memory limit"):
        parse_size(size)


def test_a_step_past_the_limit_is_rejected_and_the_pipeline_goes_on() -> None:
    p = _pipeline(memory_limit="1MiB")
    p.insert("t", _rows(1000))
    p.step()
    before = {v: p.view(v).to_dict() for v in p.views}
    p.insert("t", _rows(200_000, 1000))  # its DISTINCT trace alone holds MBs
    with pytest.raises(MemoryLimitError, match=r"step 2 rejected.*past its memory limit of 1\.0 MiB"):
        p.step()
    assert {v: p.view(v).to_dict() for v in p.views} == before and p.steps == 1
    p.insert("t", _rows(100, 5000))
    p.step()
    assert p.steps == 2 and len(p.view("d").to_dict()) == 1100


def test_without_a_limit_nothing_is_measured() -> None:
    p = _pipeline()
    p.insert("t", _rows(200_000))
    p.step()
    kernel = p.runtime.kernel  # type: ignore[union-attr]
    assert kernel.memory.limit is None and not kernel.memory.traces


def test_the_limit_counts_the_state_a_reopened_pipeline_restored(tmp_path: Path) -> None:
    with _pipeline(tmp_path) as p:
        p.insert("t", _rows(100_000))
        p.step()
    with _pipeline(tmp_path, memory_limit="1MiB") as q:
        q.insert("t", _rows(1, 10**6))
        with pytest.raises(MemoryLimitError, match="past its memory limit"):
            q.step()
    with _pipeline(tmp_path, memory_limit="1GiB") as r:
        r.insert("t", _rows(1, 10**6))
        r.step()
        assert r.steps == 2


def test_the_environment_sets_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DBSPARK_MEMORY_LIMIT", "64KB")
    p = _pipeline()
    p.insert("t", _rows(20_000))
    with pytest.raises(MemoryLimitError, match="past its memory limit of 64.0 KiB"):
        p.step()


def test_the_limit_is_the_local_engines() -> None:
    with pytest.raises(UnsupportedError, match="memory_limit is the local engine's"):
        dbspark.Pipeline(engine="spark", memory_limit="1GiB")


def test_the_cli_reports_a_step_past_the_limit_without_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "p.sql").write_text(SQL)
    step = tmp_path / "changes" / "step-1"
    step.mkdir(parents=True)
    _rows(50_000).write_csv(step / "t.csv")
    run = subprocess.run(
        [sys.executable, "-m", "dbspark.cli", "run", str(tmp_path / "p.sql"), "--changes", str(tmp_path / "changes"),
         "--engine", "local", "--memory-limit", "256KB"],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )  # fmt: skip
    assert run.returncode != 0
    assert "past its memory limit of 256.0 KiB" in run.stdout + run.stderr
    assert "Traceback" not in run.stdout + run.stderr
