"""Large groups ranked over their sorted runs (`columnar.ranked_fold`, `TraceKernel.key_runs`) against
the same groups read whole, on both engines.

With `ranked_fold.BIG` at 1, every changed group that has entries in the integral is ranked: MIN, MAX,
MEDIAN and MODE by binary search and one pass over its runs, COUNT and SUM beside them. The same
change streams run through a circuit that reads every group (`BIG` out of reach); after each step both
views must be equal, and ranking must have happened. The runs hold rows inserted in one batch and
deleted in a later one, duplicates and NULLs. On the local engine the stream also runs with a weak key
hash, under which groups share hashes (`Spine.key_runs` must leave such groups to be read)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import numpy as np
import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dbspark
from dbspark.algebra import consolidate
from dbspark.algebra.consolidate import WEIGHT
from dbspark.columnar import ranked_fold
from dbspark.testing.engines import engine_given
from dbspark.trace import spine
from dbspark.trace.spine import Spine

SCHEMA = {"g": "int64", "x": "int64", "d": "date", "y": "int64"}
CALLS: dict[str, Any] = {
    "lo": ("min", "x"),
    "hi": ("max", "x"),
    "md": ("median", "x"),
    "mo": ("mode", "x"),
    "n": "count",
    "s": ("sum", "y"),
}
DATE_CALLS: dict[str, Any] = {
    "lo": ("min", "d"),
    "md": ("median", "d"),
    "mo": ("mode", "d"),
    "c": ("count", "d"),
}

rows = st.tuples(
    st.sampled_from([None, 0, 1, 2]),
    st.one_of(st.none(), st.integers(-3, 3), st.sampled_from([-(2**62), 10**12])),
    st.one_of(st.none(), st.dates(dt.date(1990, 1, 1), dt.date(1990, 1, 20))),
    st.integers(-5, 5),
)
# each step: inserts (with multiplicities), and which present rows to delete
steps = st.lists(
    st.tuples(
        st.lists(st.tuples(rows, st.integers(1, 3)), max_size=8), st.lists(st.integers(0, 99), max_size=4)
    ),
    min_size=1,
    max_size=6,
)


def _circuit(engine: Any) -> Any:
    c = dbspark.Circuit()
    t = c.input("t", SCHEMA)
    c.output("v", t.aggregate(by="g", **CALLS))
    c.output("w", t.aggregate(by="g", **DATE_CALLS))
    return c.run(engine)


@engine_given(steps, local=40, spark=4)
def test_ranked_groups_equal_groups_read_whole(engine: Any, monkeypatch: Any, steps: list) -> None:
    _compare(engine, monkeypatch, steps, weak_hash=False)


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(steps)
def test_ranked_groups_equal_groups_read_whole_under_hash_collisions(monkeypatch: Any, steps: list) -> None:
    """The local engine with a key hash of 4 values: groups share hashes within and across batches."""
    _compare("local", monkeypatch, steps, weak_hash=True)


def _compare(engine: Any, monkeypatch: Any, steps: list, weak_hash: bool) -> None:
    ranked = []
    real = ranked_fold.step

    def spy(*args: Any) -> Any:
        out = real(*args)
        ranked.append(out is not None)
        return out

    monkeypatch.setattr(ranked_fold, "step", spy)
    if weak_hash:  # at most 4 distinct hashes: groups collide
        real_hash = spine.key_hash
        monkeypatch.setattr(spine, "key_hash", lambda df, keys: real_hash(df, keys) & np.uint64(3))
    monkeypatch.setattr(ranked_fold, "BIG", 1)
    fast, slow = _circuit(engine), _circuit(engine)
    cur: list[tuple] = []
    for inserts, deletes in steps:
        gone = sorted({i % len(cur) for i in deletes}) if cur else []
        change = [(r, w) for r, w in inserts] + [(cur[i], -1) for i in gone]
        cur = [r for i, r in enumerate(cur) if i not in gone] + [r for r, w in inserts for _ in range(w)]
        for r, big in ((fast, 1), (slow, 10**9)):
            monkeypatch.setattr(ranked_fold, "BIG", big)
            r.push("t", [x for x, _ in change], [w for _, w in change])
            r.step()
        for view in ("v", "w"):
            assert fast.view(view).to_dict() == slow.view(view).to_dict(), view
    if not weak_hash and _groups_changed_twice(steps):
        # a group with entries changed again after the first step is ranked (unless its weights are too
        # large to rank without overflow checks, which these are not)
        assert any(ranked)


def _groups_changed_twice(steps: list) -> bool:
    seen: set = set()
    for inserts, _ in steps:
        gs = {r[0] for r, _ in inserts}
        if gs & seen:
            return True
        seen |= gs
    return False


def test_key_runs_are_a_groups_entries_sorted_and_exact(monkeypatch: Any) -> None:
    """`Spine.key_runs` over batches built by inserts and merges: each key's slices are exactly its
    entries (consolidated together, they are what a seek finds), each sorted by the order column with
    NULLs first; a key whose hash another key shares in a batch is left out."""
    rng = np.random.default_rng(7)
    for weak in (False, True):
        if weak:
            monkeypatch.setattr(
                spine, "key_hash", lambda df, keys: consolidate.key_hash(df, keys) & np.uint64(7)
            )
        sp = Spine(("g",), pl.Schema({"g": pl.Int64(), "x": pl.Int64(), WEIGHT: pl.Int64()}), order="x")
        monkeypatch.setattr(spine, "SMALL", 0)
        for n in (60, 60, 60, 60, 200, 80, 30, 10):  # merges, then batches that stay apart
            xs = pl.Series("x", rng.integers(-5, 5, n), dtype=pl.Int64)
            xs = pl.select(pl.when(pl.Series(rng.random(n) < 0.1)).then(None).otherwise(xs).alias("x"))["x"]
            sp.insert(
                pl.DataFrame(
                    {"g": rng.integers(0, 30, n), "x": xs, WEIGHT: rng.choice([-1, 1, 2], n)},
                    schema={"g": pl.Int64(), "x": pl.Int64(), WEIGHT: pl.Int64()},
                )
            )
        snap = sp.snapshot()
        assert len(snap.batches) > 1
        probe = pl.DataFrame({"g": list(range(60))}, schema={"g": pl.Int64()})  # 30-59: not there
        got = snap.key_runs(probe, 1)
        if not weak:
            assert len(got) == len(snap.seek_frame(probe)["g"].unique())
        for i, frames in got.items():
            for f in frames:
                assert f["g"].to_list() == [i] * f.height
                x = f["x"]
                assert x.slice(0, x.null_count()).is_null().all()
                assert x.slice(x.null_count()).is_sorted()
            mine = pl.concat(frames).group_by(["g", "x"]).agg(pl.col(WEIGHT).sum())
            want = snap.seek_frame(probe.slice(i, 1)).group_by(["g", "x"]).agg(pl.col(WEIGHT).sum())
            key = ["g", "x"]
            assert mine.sort(key, nulls_last=False).equals(want.sort(key, nulls_last=False))
