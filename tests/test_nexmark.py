"""The Nexmark benchmark's queries (`bench/nexmark`) as an oracle test: the generator's events, a batch
per step into tables with a lateness, every query's changes summed over the run against DuckDB's query
over all the events; the generator's reference structure (ids, proportions, time order). Small sizes:
the speed is the benchmark's to measure.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.nexmark.__main__ import oracle, run_dbspark, write_events
from bench.nexmark.generator import events
from bench.nexmark.queries import BY_NAME, QUERIES
from dbspark.testing.engines import is_spark
from dbspark.testing.sql_oracle import compare_frames


@pytest.fixture(scope="module")
def stream(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    root = tmp_path_factory.mktemp("nexmark")
    return root, write_events(root, 12_000, 3_000, seed=7)


def test_generator_follows_the_reference_structure():
    ev = events(0, 5_000, seed=1)
    assert (ev.person.height, ev.auction.height, ev.bid.height) == (100, 300, 4_600)
    assert ev.person["id"].to_list() == list(range(1000, 1100))
    assert ev.auction["id"].to_list() == list(range(1000, 1300))
    for df in ev.tables().values():
        assert df["date_time"].is_sorted()
    # a bid's auction and bidder, an auction's seller: ids issued up to then (and a few ahead)
    assert ev.bid["auction"].max() <= 1300 + 10 and ev.auction["seller"].max() <= 1100 + 10
    assert (ev.auction["expires"] > ev.auction["date_time"]).all()
    assert ev.auction["category"].is_between(10, 14).all()
    again = events(2_500, 2_500, seed=1)  # a batch depends on its range and seed only
    assert again.person["id"].to_list() == ev.person["id"].to_list()[50:]


@pytest.mark.parametrize("name", [q.name for q in QUERIES])
def test_query_matches_duckdb(stream, name):
    root, batches = stream
    q = BY_NAME[name]
    got = run_dbspark(q, "local", root, batches, None)
    differ = compare_frames(got["result"], oracle(q, root), name, check_names=False)
    assert differ is None, differ


@pytest.mark.parametrize("name", ["q5", "q7", "q8", "q15"])
def test_query_matches_duckdb_on_spark(stream, name, spark_engine):
    root, batches = stream
    q = BY_NAME[name]
    assert is_spark(spark_engine)
    got = run_dbspark(q, "spark", root, batches, spark_engine.spark)
    differ = compare_frames(got["result"], oracle(q, root), name, check_names=False)
    assert differ is None, differ
