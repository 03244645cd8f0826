"""Traces (LSM spines): seek, merging and snapshots against a dict oracle; checkpoints of a runtime."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Sequence
from unittest.mock import patch

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dbspark
from dbspark import col
from dbspark.algebra.zset import WEIGHT
from dbspark.errors import WeightError
from dbspark.operators.distinct import H_WEIGHT
from dbspark.trace import spine
from dbspark.trace.spine import Spine

SCHEMA = pl.Schema({"k": pl.Int64, "v": pl.String, WEIGHT: pl.Int64})
rows = st.tuples(
    st.one_of(st.none(), st.integers(0, 6)), st.sampled_from(["a", "b", None]), st.integers(-3, 3)
)


def frame(batch: list[tuple]) -> pl.DataFrame:
    return pl.DataFrame(batch, schema=SCHEMA, orient="row")


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(rows, max_size=12), max_size=12),
    st.lists(st.one_of(st.none(), st.integers(0, 7)), max_size=4),
)
def test_spine_matches_a_dict_oracle(batches: list[list[tuple]], probe: list[int | None]) -> None:
    sp = Spine(("k",), SCHEMA)
    oracle: Counter = Counter()
    snapshots = []
    for b in batches:
        sp.insert(frame(b))
        for k, v, w in b:
            oracle[(k, v)] += w
        snapshots.append((sp.snapshot(), dict(oracle)))
    for snap, expected in snapshots:  # older snapshots stay valid after later merges
        full = {(k, v): w for k, v, w in snap.to_frame().rows()}
        assert full == {kv: w for kv, w in expected.items() if w != 0}
        assert all(w != 0 for w in full.values())
        got = {
            (k, v): w for k, v, w in snap.seek(pl.DataFrame({"k": probe}, schema={"k": pl.Int64})).df.rows()
        }
        want = {kv: w for kv, w in expected.items() if w != 0 and kv[0] in set(probe)}
        assert got == want
    # geometric merging keeps the number of batches logarithmic
    assert len(sp.batches) <= 2 + 2 * max(1, int(np.log2(max(2, len(sp)))))


NUMBERS = pl.Schema({"k": pl.Int64, "v": pl.Int32, "f": pl.Float64, WEIGHT: pl.Int64})
number_rows = st.tuples(
    st.integers(0, 9), st.integers(-2, 2), st.sampled_from([0.5, -1.0]), st.integers(-2, 3)
)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(number_rows, min_size=1, max_size=12), min_size=1, max_size=10),
    st.lists(st.integers(0, 10), max_size=6),
    st.sampled_from([0, 2, 1024]),
)
def test_a_few_keys_sought_in_batches_of_numbers(
    batches: list[list[tuple]], probe: list[int], few: int
) -> None:
    """Seeks of a few keys gather their rows of every batch by NumPy (`Batch.arrays`, `SEEK_FEW`):
    the same rows as the oracle's, in traces of several batches (no trace kept as one small batch)."""
    with patch.object(spine, "SMALL", 0), patch.object(spine, "SEEK_FEW", few):
        sp = Spine(("k",), NUMBERS)
        oracle: Counter = Counter()
        for b in reversed(sorted(batches, key=len)):  # (shrinking batches: several stay apart)
            sp.insert(pl.DataFrame(b, schema=NUMBERS, orient="row"))
            for k, v, f, w in b:
                oracle[(k, v, f)] += w
            snap = sp.snapshot()
            found = snap.seek_frame(pl.DataFrame({"k": probe}, schema={"k": pl.Int64}))
            assert found.schema == NUMBERS
            got: Counter = Counter()
            for k, v, f, w in found.rows():
                got[(k, v, f)] += w
            assert {r: w for r, w in got.items() if w} == {
                r: w for r, w in oracle.items() if w and r[0] in set(probe)
            }


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(rows, min_size=1, max_size=10),
            st.sampled_from([True, True, True, False]),  # deferred mostly: runs of them are the case
            st.sampled_from(["none", "none", "none", "settle", "undo", "hold", "release"]),
            st.one_of(st.none(), st.integers(0, 11)),
        ),
        max_size=12,
    ),
    st.lists(st.one_of(st.none(), st.integers(0, 7)), max_size=4),
)
def test_deferred_inserts_keep_every_snapshot_exact(ops: list[tuple], probe: list[int | None]) -> None:
    """Inserts deferred until a read (`Spine.insert(defer=True)`): every snapshot holds what was
    inserted before it, read in any order (by the spine when it still holds the inserts, else by the
    snapshot), after settles, after an undo of the last insert, and while the step's batches are held
    apart from the older ones (`hold` / `release`, as in a recursive scope's step)."""
    sp = Spine(("k",), SCHEMA)
    oracle: Counter = Counter()
    snapshots = []
    for batch, defer, then, read in ops:
        saved = list(sp.batches), list(sp.pending), sp.floor, Counter(oracle)
        sp.insert(frame(batch), defer=defer)
        for k, v, w in batch:
            oracle[(k, v)] += w
        if then == "undo":
            sp.batches, sp.pending, sp.floor, oracle = saved
        snapshots.append((sp.snapshot(), dict(oracle)))
        if read is not None:  # a snapshot read (the latest or an older one): batched by it or the spine
            assert len(snapshots[read % len(snapshots)][0].batches) >= 0
        if then == "settle":
            sp.settle()
        elif then == "hold":
            sp.hold()
            assert not sp.pending and sp.floor == len(sp.batches)
        elif then == "release":
            sp.release()
            assert sp.floor == 0 and not sp.pending
    snapshots.append((sp.snapshot(), dict(oracle)))
    for snap, expected in reversed(snapshots):
        full = {(k, v): w for k, v, w in snap.to_frame().rows()}
        assert full == {kv: w for kv, w in expected.items() if w != 0}
        got = {
            (k, v): w for k, v, w in snap.seek(pl.DataFrame({"k": probe}, schema={"k": pl.Int64})).df.rows()
        }
        assert got == {kv: w for kv, w in expected.items() if w != 0 and kv[0] in set(probe)}
    sp.settle()
    assert not sp.pending
    assert {(k, v): w for k, v, w in sp.snapshot().to_frame().rows()} == {
        kv: w for kv, w in oracle.items() if w != 0
    }


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(st.tuples(st.integers(0, 5), st.integers(0, 3), st.integers(-2, 3)), max_size=14),
        max_size=8,
    ),
    st.lists(st.tuples(st.integers(0, 6), st.integers(0, 3)), max_size=10),
    st.booleans(),
    st.sampled_from([("a", "b"), ("b", "a"), ("a",), ("b",)]),
)
def test_rows_hashed_once_index_and_seek_a_trace_by_every_column(
    batches: list[list[tuple]], probe: list[tuple], defer: bool, keys: tuple[str, ...]
) -> None:
    """A change consolidated by NumPy keeps its rows' sorted hashes (`consolidate_sorted`): a trace
    indexed by every column, in order, takes it as a batch with them, and a seek by a consolidated
    change's rows reuses them, its rows matched to the probe's by position, and distinct's H combines
    them by position; a trace indexed otherwise hashes its keys. Contents, seeks and H agree with a
    dict oracle, deferred or not (and the hashes with `key_hash`)."""
    from dbspark.algebra.consolidate import key_hash
    from dbspark.algebra.zset import ZSet
    from dbspark.engines.local.kernel import LocalKernel

    k = LocalKernel()
    schema = pl.Schema({"a": pl.Int64, "b": pl.Int64})
    tr = k.new_trace(schema, keys)
    oracle: Counter = Counter()
    undo: list = []
    with k.deferring() if defer else contextlib.nullcontext():
        for b in batches:
            z = ZSet(pl.DataFrame(b, schema={"a": pl.Int64, "b": pl.Int64, WEIGHT: pl.Int64}, orient="row"))
            c = z.consolidate()
            if c.hashes is not None:
                assert list(c.hashes) == sorted(key_hash(c.df, ["a", "b"]))
            snap = k.trace_insert(tr, z, undo)
            for a, bb, w in b:
                oracle[(a, bb)] += w
    p = ZSet(
        pl.DataFrame(
            [(*r, 1) for r in probe + probe],
            schema={"a": pl.Int64, "b": pl.Int64, WEIGHT: pl.Int64},
            orient="row",
        )
    ).consolidate()
    pos = [("a", "b").index(c) for c in keys]
    probed = {tuple(r[i] for i in pos) for r in probe}
    want = {r: w for r, w in oracle.items() if w != 0 and tuple(r[i] for i in pos) in probed}
    snap = tr.snapshot()
    found = k.seek(snap, p, [(c, c) for c in keys], exact=True)
    assert found.consolidate().to_dict() == want
    if keys == ("a", "b") and p.hashes is not None:  # found at the probe's rows: combined by position
        assert len(found) == 0 or (found.at is not None and found.at[0] is p)
        h = k.combine([p, found], ["a", "b"], H_WEIGHT).to_dict()
        prev = {r: oracle.get(r, 0) for r in p.to_dict()}
        assert h == {
            r: v for r, w in p.to_dict().items() if (v := int(prev[r] + w > 0) - int(prev[r] > 0)) != 0
        }
    assert {r: w for r, w in snap.to_zset().to_dict().items()} == {r: w for r, w in oracle.items() if w != 0}


INTS = pl.Schema({"k": pl.Int64, "r": pl.Int64, WEIGHT: pl.Int64})
int_rows = st.tuples(st.integers(0, 4), st.integers(0, 1), st.integers(-2, 2))  # few distinct rows


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(st.lists(int_rows, min_size=1, max_size=12), st.one_of(st.none(), st.integers(0, 11))),
        min_size=2,
        max_size=12,
    ),
    st.sampled_from(["real", "keys", "rows", "zero"]),
    st.lists(st.sampled_from(["hold", "release", "drop", "none", "none"]), min_size=12, max_size=12),
    st.sampled_from([None, 2**61, -(2**62), 2**62]),
    st.sampled_from([2, 3, 8]),
    st.sampled_from([None, "r"]),
)
def test_merges_of_integer_rows_match_a_dict_oracle(
    changes: list[tuple[list[tuple], int | None]],
    hashing: str,
    steps: list[str],
    big: int | None,
    tier: int,
    order: str | None,
) -> None:
    """Batches of integer rows, several per key (a ranked trace's old and new rank), merged on every
    insert: by NumPy (`_merge_summed`), or by grouping when two rows' sort keys collide (`hashing`: the
    key hashes by parity, the row hashes by the key's parity, or every hash zero) or a sum could
    overflow; the step's batches held apart (merged `tier` at a time, `merge_many`), released and
    dropped from at random. After each insert
    every batch is consolidated (no zero weight, no row twice) and sorted by key hash, and the trace
    equals a dict oracle. A change may also delete an earlier one (`undone`: rows that cancel across
    batches); the last may add a row of a large weight (`big`; from 2^62 on, the NumPy path leaves a
    merge to grouping), which no later change negates: every sum stays inside int64. With an `order`
    column (an ordered aggregate's trace) a key's rows are also sorted by it, and two batches merge by
    consolidating the rows of the hashes both hold."""
    batches: list[list[tuple]] = []
    for rows, undone in changes:
        earlier = batches[undone % len(batches)] if batches and undone is not None else []
        batches.append(rows + [(k, r, -w) for k, r, w in earlier])
    if big is not None:
        batches[-1].append((0, 0, big))
    real = spine.key_hash

    def key_hash(df: pl.DataFrame, keys: Sequence[str]) -> np.ndarray:
        by_key = list(keys) == ["k"]  # else the row hash (every column), as `_merge_summed` asks
        if hashing == "zero":
            return np.zeros(df.height, dtype=np.uint64)
        if hashing == "real" or (hashing == "keys") != by_key:
            return real(df, keys)
        return (df["k"].to_numpy() % 2).astype(np.uint64)

    sp = Spine(("k",), INTS, order=order)
    oracle: Counter = Counter()
    with (
        patch.object(spine, "SMALL", 0),
        patch.object(spine, "key_hash", key_hash),
        patch.object(spine, "HELD_TIER", tier),
    ):
        for b, step in zip(batches, steps, strict=False):
            for k, r, w in b:
                oracle[(k, r)] += w
            sp.insert(pl.DataFrame(b, schema=INTS, orient="row"))
            if step == "hold":
                sp.hold()
            elif step == "release":
                sp.release()
            elif step == "drop":
                sp.drop([("k", 2)])
                oracle = Counter({kr: w for kr, w in oracle.items() if kr[0] >= 2})
            for batch in sp.batches:
                assert (batch.hashes[1:] >= batch.hashes[:-1]).all()
                assert (batch.hashes == key_hash(batch.df, ["k"])).all()
                assert (batch.df[WEIGHT] != 0).all()
                assert not batch.df.select("k", "r").is_duplicated().any()
                if order is not None:  # (by hash, then by the order column)
                    hr = list(zip(batch.hashes.tolist(), batch.df["r"].to_list(), strict=True))
                    assert hr == sorted(hr)
            if sp.holding:  # tiers from the oldest held batch down, fewer than `tier` of each
                levels = [b.level for b in sp.batches[sp.floor :]]
                assert levels == sorted(levels, reverse=True)
                assert all(levels.count(v) < tier for v in levels)
            full = {(k, r): w for k, r, w in sp.snapshot().to_frame().rows()}
            assert full == {kr: w for kr, w in oracle.items() if w != 0}
        sp.release()
    assert {(k, r): w for k, r, w in sp.snapshot().to_frame().rows()} == {
        kr: w for kr, w in oracle.items() if w != 0
    }


def test_hash_collisions_are_filtered(monkeypatch) -> None:
    """With every key hashing alike, seek must still return exactly the probed keys."""
    monkeypatch.setattr(spine, "key_hash", lambda df, keys: np.zeros(df.height, dtype=np.uint64))
    sp = Spine(("k",), SCHEMA)
    sp.insert(frame([(1, "a", 1), (2, "b", 1), (3, "c", 2)]))
    sp.insert(frame([(2, "b", -1), (4, "d", 1)]))
    got = sp.snapshot().seek(pl.DataFrame({"k": [3, 2]}, schema={"k": pl.Int64})).df.rows()
    assert got == [(3, "c", 2)]


def test_rows_sought_by_position_drop_hash_collisions(monkeypatch) -> None:
    """`seek_rows` with every stored key hashing to its parity: rows sharing a probe row's hash but not
    its values are dropped, each kept one is matched to its probe row; a probe whose rows share a hash
    is refused (None: the caller seeks by a join)."""
    monkeypatch.setattr(spine, "key_hash", lambda df, keys: (df["k"].to_numpy() % 2).astype(np.uint64))
    sp = Spine(("k",), pl.Schema({"k": pl.Int64, WEIGHT: pl.Int64}))
    sp.insert(pl.DataFrame({"k": [1, 2, 3, 4], WEIGHT: [1, 1, 1, 1]}))
    sp.insert(pl.DataFrame({"k": [3, 5], WEIGHT: [2, 1]}))
    probe = pl.DataFrame({"k": [4, 3]})  # in the order of their hashes, 0 and 1
    rows, at = sp.snapshot().seek_rows(probe, np.array([0, 1], dtype=np.uint64))
    got = sorted(zip(rows["k"].to_list(), rows[WEIGHT].to_list(), at.tolist(), strict=True))
    assert got == [(3, 3, 1), (4, 1, 0)]
    assert sp.snapshot().seek_rows(pl.DataFrame({"k": [1, 3]}), np.array([1, 1], dtype=np.uint64)) is None


def test_checkpoint_restore_resumes_the_same_views(tmp_path, engine) -> None:
    def build() -> dbspark.Circuit:
        c = dbspark.Circuit()
        t = c.input("t", {"g": "int64", "x": "int64"}, kind="bag")
        u = c.input("u", {"g": "int64", "y": "str"})
        c.output("agg", t.aggregate("g", n="count", lo=("min", "x"), med=("median", "x")))
        c.output("j", t.join(u, on="g").filter(col("x") > 0).distinct())
        return c

    a = build().run(engine)
    a.insert("t", [(1, 5), (1, 7), (2, 1)])
    a.insert("u", [(1, "p"), (2, "q")])
    a.step()
    a.checkpoint(tmp_path / "state.json")
    b = build().run(engine)
    b.restore(tmp_path / "state.json")
    for r in (a, b):
        r.delete("t", [(1, 5)])
        r.insert("t", [(2, 9)])
        r.insert("u", [(1, "z")])
    assert a.step() == b.step()
    assert a.view("agg") == b.view("agg") and a.view("j") == b.view("j")
    assert b.time == a.time == 2


def test_seek_and_merge_with_crowded_keys() -> None:
    """Keys with many rows (more than a directory bucket scans) next to keys with one: seeks and
    merges (inserts and deletes of the same rows across batches) agree with a dict oracle."""
    rng = np.random.default_rng(7)
    sp = Spine(("k",), SCHEMA)
    oracle: Counter = Counter()
    for step in range(12):
        n = 400 if step == 0 else 60
        ks = np.where(rng.random(n) < 0.3, 0, rng.integers(1, 300, n))  # key 0 holds ~30% of the rows
        vs = [str(x) for x in rng.integers(0, 200, n)]
        ws = rng.choice([-1, 1, 2], n)
        b = list(zip(ks.tolist(), vs, ws.tolist(), strict=True))
        sp.insert(frame(b))
        for k, v, w in b:
            oracle[(k, v)] += w
        probe = pl.DataFrame({"k": [0, *rng.integers(0, 320, 30).tolist()]}, schema={"k": pl.Int64})
        got = {(k, v): w for k, v, w in sp.snapshot().seek(probe).df.rows()}
        keys = set(probe["k"].to_list())
        assert got == {kv: w for kv, w in oracle.items() if w != 0 and kv[0] in keys}
    full = {(k, v): w for k, v, w in sp.snapshot().to_frame().rows()}
    assert full == {kv: w for kv, w in oracle.items() if w != 0}


def test_hash_collisions_in_a_crowded_bucket_are_filtered(monkeypatch) -> None:
    """Every key hashing alike puts all rows in one bucket (found by binary search): still exact."""
    monkeypatch.setattr(spine, "key_hash", lambda df, keys: np.zeros(df.height, dtype=np.uint64))
    sp = Spine(("k",), SCHEMA)
    sp.insert(frame([(i, "a", 1) for i in range(40)]))
    sp.insert(frame([(i, "a", -1) for i in range(0, 40, 2)]))
    got = sp.snapshot().seek(pl.DataFrame({"k": [3, 2, 99]}, schema={"k": pl.Int64})).df.rows()
    assert got == [(3, "a", 1)]
    assert sorted(r[0] for r in sp.snapshot().to_frame().rows()) == list(range(1, 40, 2))


def test_a_merge_whose_sum_leaves_int64_is_refused() -> None:
    """Two batches holding one row at 2^62 each: their merge would wrap around int64 in NumPy; it is
    left to the checked grouping, which refuses it (WeightError) instead of storing -2^63."""
    sp = Spine(("k",), INTS)
    with patch.object(spine, "SMALL", 0):
        sp.insert(pl.DataFrame([(0, 0, 2**62), (1, 0, 1)], schema=INTS, orient="row"))
        with pytest.raises(WeightError):
            sp.insert(pl.DataFrame([(0, 0, 2**62)], schema=INTS, orient="row"))


def test_a_batch_restored_from_rows_in_another_order_is_sorted_again(monkeypatch) -> None:
    """A checkpoint keeps a batch's rows, not their hashes (`Batch._stored_state`), in the order of the
    hashes of the version that wrote it: restored under another hash (a new version of `key_hash`),
    the rows are sorted again by the new one, and every key is found."""
    sp = Spine(("k",), SCHEMA)
    sp.insert(frame([(i, "a", 1) for i in range(40)]))
    stored = sp.batches[0]._stored_state()
    monkeypatch.setattr(
        spine, "key_hash", lambda df, keys: (df["k"].to_numpy() * 7919 % 101).astype(np.uint64)
    )
    monkeypatch.setattr("dbspark.algebra.consolidate.key_hash", spine.key_hash)
    b = spine.Batch._from_stored(stored)
    assert (b.hashes[1:] >= b.hashes[:-1]).all()
    snap = spine.TraceSnapshot((b,), ("k",), SCHEMA)
    got = snap.seek_frame(pl.DataFrame({"k": list(range(40))}))
    assert sorted(got["k"].to_list()) == list(range(40))


def test_a_large_batch_is_sorted_by_polars_with_its_rows() -> None:
    """A batch of many rows is put in hash order by one Polars sort of the frame with its hashes
    (`sorted_by_hash`): its hashes are sorted and each is its row's key hash; seeks find every key's
    rows."""
    from dbspark.algebra.consolidate import _POLARS_SORT, key_hash

    n = _POLARS_SORT + 1000
    rng = np.random.default_rng(3)
    df = pl.DataFrame(
        {
            "k": rng.integers(0, n // 3, n),
            "v": [str(i % 7) for i in range(n)],
            WEIGHT: np.ones(n, dtype=np.int64),
        }
    )
    b = spine.Batch(df, ("k",))
    assert (b.hashes[1:] >= b.hashes[:-1]).all()
    assert (b.hashes == key_hash(b.df, ["k"])).all()
    assert sorted(b.df.rows()) == sorted(df.rows())
    probe = pl.DataFrame({"k": [0, 5, n // 3 - 1]})
    got = spine.TraceSnapshot((b,), ("k",), SCHEMA).seek_frame(probe)
    assert sorted(got.rows()) == sorted(df.filter(pl.col("k").is_in([0, 5, n // 3 - 1])).rows())


def test_a_released_spine_holds_none_of_the_steps_merged_batches() -> None:
    """After `release` the spine refers to its batches and nothing it merged away: the step's held batches
    and deferred inserts (the last batching's key once kept them, a second copy of the step's changes
    between steps)."""
    import gc

    sp = Spine(("k",), SCHEMA)
    n = 2 * spine.SMALL  # (a trace past SMALL keeps its batches apart)
    sp.insert(frame([(k, "a", 1) for k in range(n)]))
    sp.hold()
    for i in range(3):  # (an iteration's insert, batched when a snapshot taken since is read)
        sp.insert(frame([(k, "b", 1) for k in range(n + 50 * i, n + 50 * i + 40)]), defer=True)
        assert sp.snapshot().batches
    step = {id(b) for b in sp.batches[sp.floor :]} | {id(p) for p in sp.pending}
    assert step
    sp.release()
    reachable, todo = set(), [sp]
    while todo:
        o = todo.pop()
        if id(o) in reachable or isinstance(o, type):
            continue
        reachable.add(id(o))
        todo.extend(gc.get_referents(o))
    live = {id(b) for b in sp.batches}
    assert not (step - live) & reachable
    assert {(k, v): w for k, v, w in sp.snapshot().to_frame().rows()} == {
        **{(k, "a"): 1 for k in range(n)},
        **{(k, "b"): 1 for i in range(3) for k in range(n + 50 * i, n + 50 * i + 40)},
    }
