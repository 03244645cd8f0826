"""The differential fuzzer (`dbspark.testing.fuzz`): a time-boxed sample with a fresh seed each run
(printed, and named by a failure; `DBSPARK_FUZZ_SEED` repeats one), on each engine; and a mismatch
shrunk to a minimal case and written as a regression test that runs."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import pytest

from dbspark.testing import fuzz
from dbspark.testing.sql_strategies import Case


def _seed() -> int:
    s = int(os.environ.get("DBSPARK_FUZZ_SEED") or random.SystemRandom().randrange(10**9))
    print(f"fuzz seed {s} (DBSPARK_FUZZ_SEED={s} repeats it)")
    return s


def test_a_sample_of_cases_agrees_with_duckdb_on_the_local_engine(tmp_path: Path) -> None:
    result = fuzz.fuzz(60, "local", _seed(), tmp_path, minutes=3)
    assert result.failure is None, str(result)
    assert result.cases > 0


@pytest.mark.spark
def test_a_sample_of_cases_agrees_with_duckdb_on_the_spark_engine(tmp_path: Path, spark_session: Any) -> None:
    result = fuzz.fuzz(4, "spark", _seed(), tmp_path, spark=spark_session, minutes=3)
    assert result.failure is None, str(result)


def test_a_mismatch_is_shrunk_and_written_as_a_regression_test(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def wrong_with_two_views(case: Case, make: Any = None, joins: str = "auto") -> None:
        if len(case.views) >= 2:
            raise AssertionError("view v1 after step 0: dbspark has 1 rows, DuckDB 2")

    monkeypatch.setattr(fuzz, "run_case", wrong_with_two_views)
    result = fuzz.fuzz(200, "local", 7, tmp_path)
    assert result.failure == "view v1 after step 0: dbspark has 1 rows, DuckDB 2"
    assert result.regression == tmp_path / "test_fuzz_7.py" and "seed 7" in str(result)
    text = result.regression.read_text()
    assert "def test_fuzz_7() -> None:" in text and 'joins="auto"' in text
    scope: dict[str, Any] = {}
    exec(compile(text, str(result.regression), "exec"), scope)  # the file is valid, self-contained Python
    case = scope["CASE"]
    assert isinstance(case, Case) and len(case.views) == 2, "shrunk to the fewest views that fail"
    with pytest.raises(AssertionError):
        wrong_with_two_views(case)
    scope["test_fuzz_7"]()  # the test runs the case for real (and passes: the mismatch was made up)
