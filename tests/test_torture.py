"""Crash torture (`dbspark.testing.torture`): a sample of the harness's rounds on each engine, and its
checks shown to fail on outputs that are duplicated, lost or wrong."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest

from dbspark import faults
from dbspark.testing import torture


def test_a_local_pipeline_killed_at_every_kind_of_point_finishes_right(tmp_path: Path) -> None:
    result = torture.torture(tmp_path, "local", kills=6, seed=11)
    assert result.kills == 6, result


@pytest.mark.spark
def test_a_spark_pipeline_killed_again_and_again_finishes_right(tmp_path: Path) -> None:
    result = torture.torture(tmp_path, "spark", kills=3, seed=5)
    assert result.kills == 3, result


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, torture.Tables, int]:
    """A run with no kill: its work directory, the tables' final contents and its steps."""
    d = tmp_path_factory.mktemp("torture")
    r = torture.torture(d, "local", kills=0, seed=2)
    again = torture.Changes(tmp_path_factory.mktemp("again"), 2)
    again.write(r.steps)
    return d, again.tables, r.steps


def test_the_checks_pass_on_a_run_without_kills(finished: tuple[Path, torture.Tables, int]) -> None:
    d, tables, steps = finished
    assert torture.outputs(d / "out", steps) == torture.oracle(tables)
    assert any(torture.oracle(tables).values()), "the views are not all empty"


def test_the_checks_fail_on_a_step_written_twice_or_lost(
    finished: tuple[Path, torture.Tables, int], tmp_path: Path
) -> None:
    d, _, steps = finished
    out = tmp_path / "out"
    shutil.copytree(d / "out", out)
    shutil.copy(out / "reach" / "step-00000002.parquet", out / "reach" / "step-00000002 (1).parquet")
    with pytest.raises(AssertionError, match=r"extra \['reach/step-00000002 \(1\).parquet'\]"):
        torture.outputs(out, steps)
    (out / "reach" / "step-00000002 (1).parquet").unlink()
    (out / "largest" / "step-00000002.parquet").unlink()
    with pytest.raises(AssertionError, match=r"missing \['largest/step-00000002.parquet'\]"):
        torture.outputs(out, steps)


def test_the_checks_fail_on_a_view_that_differs_from_duckdb(
    finished: tuple[Path, torture.Tables, int],
) -> None:
    d, tables, steps = finished
    t = torture.Tables(dict(tables.customers), dict(tables.orders), Counter(tables.edges))
    t.edges[(9, 9)] += 1  # one more edge than the run saw: reach has (9, 9)
    with pytest.raises(AssertionError):
        assert torture.outputs(d / "out", steps) == torture.oracle(t)


def test_an_unknown_fault_point_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DBSPARK_KILL_AT", "nowhere:2")
    with pytest.raises(ValueError, match="no fault point 'nowhere'"):
        faults._target()
