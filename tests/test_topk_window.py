"""ORDER BY ... LIMIT views maintained through a window of the integral's first rows (`TopKWindow`), on
both engines, each step checked against DuckDB (`SqlOracle`, with the front end's tie rule).

The window is kept small here (no slack: it holds twice offset + limit units after a refill), and the
steps delete rows of the window, insert before and after its last row, duplicate rows (a bag: a row's
weight spans the window's edge), and include NULLs and DESC / NULLS FIRST orders, so that a step takes
each path: the window alone, a window drained below offset + limit (refilled from the integral), a
whole integral smaller than the window, and a first step."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dbspark
from dbspark.operators import topk
from dbspark.operators.topk import window_step
from dbspark.testing.sql_oracle import SqlOracle

SQL = """
CREATE TABLE t (a INTEGER, b VARCHAR);
CREATE VIEW hi AS SELECT a, b FROM t ORDER BY a DESC NULLS FIRST LIMIT 2 OFFSET 1;
CREATE VIEW lo AS SELECT b, count(*) AS n FROM t GROUP BY b ORDER BY n, b NULLS FIRST LIMIT 1;
CREATE VIEW pg AS SELECT a, b FROM t ORDER BY b NULLS FIRST, a DESC LIMIT 3;
CREATE VIEW one AS SELECT a FROM t WHERE a IS NOT NULL ORDER BY a LIMIT 1;
"""

value = st.tuples(st.none() | st.integers(0, 6), st.none() | st.sampled_from(["x", "y", "z"]))
steps = st.lists(
    st.tuples(st.lists(value, max_size=5), st.lists(st.integers(0, 40), max_size=4)), min_size=1, max_size=8
)


@pytest.fixture(params=["local", "spark"])
def engine_name(request: pytest.FixtureRequest) -> Iterator[str]:
    """The engine, with the windows kept small (no slack) for the test."""
    if request.param == "spark":
        request.getfixturevalue("spark_session")
    slack, topk.WINDOW_SLACK = topk.WINDOW_SLACK, 0
    yield request.param
    topk.WINDOW_SLACK = slack


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(steps=steps)
def test_top_k_views_through_small_windows_equal_duckdb(request: Any, engine_name: str, steps: list) -> None:
    spark = request.getfixturevalue("spark_session") if engine_name == "spark" else None
    p = dbspark.Pipeline(engine=engine_name, spark=spark)
    oracle = SqlOracle(SQL)
    p.sql(SQL)
    rows: list[tuple] = []
    try:
        run = []
        for ins, dels in steps:
            gone = sorted({i % len(rows) for i in dels}) if rows else []
            out = [rows[i] for i in gone]
            rows = [r for i, r in enumerate(rows) if i not in gone] + list(ins)
            run.append(({"t": ins} if ins else {}, {"t": out} if out else {}))
        oracle.run(p, run)
    finally:
        p.close()


def test_a_drained_window_asks_for_a_refill_and_a_complete_one_does_not() -> None:
    """`window_step` directly: deleting the window's rows below offset + limit is a refill (None); the
    same delete over a window that is the whole integral is not; a row after the window's last row
    does not enter it."""
    import polars as pl

    from dbspark.algebra.zset import WEIGHT
    from dbspark.operators.topk import SortKey

    order = (SortKey("a"),)
    w = pl.DataFrame({"a": [1, 2, 3], WEIGHT: [1, 1, 2]})
    d = pl.DataFrame({"a": [1, 2], WEIGHT: [-1, -1]})
    assert window_step(w, False, d, order, 3) is None
    kept = window_step(w, True, d, order, 3)
    assert kept is not None and kept[0].rows() == [(3, 2)] and kept[1]
    after = window_step(w, False, pl.DataFrame({"a": [9, 0], WEIGHT: [5, 1]}), order, 3)
    assert after is not None and after[0].rows() == [(0, 1), (1, 1), (2, 1), (3, 2)] and not after[1]
