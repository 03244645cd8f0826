"""The bucketed trace against a model (a dict from row to its sums), and its file discipline."""

from __future__ import annotations

import datetime
import json
import os
import pathlib
import pickle
import subprocess
import sys
import tempfile
from decimal import Decimal
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dbspark.algebra.zset import WEIGHT
from dbspark.trace.bucketed import (
    SHARED,
    BucketedTrace,
    BucketEntry,
    BucketLayout,
    entries_from_frame,
    garbage,
    updated,
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# column type -> a small domain of values (small so that keys repeat and changes cancel)
TYPES: dict[str, tuple[pl.DataType, st.SearchStrategy[Any]]] = {
    "int": (pl.Int64(), st.integers(-3, 3)),
    "str": (pl.String(), st.sampled_from(["", "a", "b", "ü", "日本", "x" * 20])),
    "date": (pl.Date(), st.sampled_from([datetime.date(2020, 1, 1), datetime.date(1969, 12, 31)])),
    "dec": (pl.Decimal(10, 2), st.sampled_from([Decimal("0.00"), Decimal("1.25"), Decimal("-7.50")])),
    "i32": (pl.Int32(), st.integers(-3, 3)),
    "u8": (pl.UInt8(), st.integers(0, 3)),
    "f64": (pl.Float64(), st.sampled_from([0.5, 1.5, -2.25, 1e300, 5e-324])),
}
NOT_NULL = {"u8", "f64"}  # never NULL: with them alone a run's columns are NumPy views (`Run.arrays`)

Model = dict[tuple, tuple[int, ...]]


def value(kind: str) -> st.SearchStrategy[Any]:
    return TYPES[kind][1] if kind in NOT_NULL else st.one_of(st.none(), TYPES[kind][1])


@st.composite
def scenario(draw: st.DrawFn, among: tuple[str, ...] = tuple(sorted(TYPES))) -> dict[str, Any]:
    kinds = draw(st.lists(st.sampled_from(among), min_size=1, max_size=3))
    n_keys = draw(st.integers(1, len(kinds)))
    n_sums = draw(st.integers(1, 2))
    cols = [f"c{i}_{k}" for i, k in enumerate(kinds)]
    row = st.tuples(*[value(k) for k in kinds])
    sums = st.tuples(*[st.integers(-2, 2)] * n_sums)
    steps = draw(st.lists(st.lists(st.tuples(row, sums), max_size=12), min_size=1, max_size=6))
    cancel = draw(st.lists(st.booleans(), min_size=len(steps), max_size=len(steps)))
    probes = draw(st.lists(st.tuples(*[value(k) for k in kinds[:n_keys]]), max_size=6))
    return {
        "kinds": kinds,
        "cols": cols,
        "keys": cols[:n_keys],
        "n_sums": n_sums,
        "steps": steps,
        "cancel": cancel,
        "probes": probes,
        "n_buckets": draw(st.integers(1, 16)),
        "growth": draw(st.sampled_from([1, 2, 4])),
        "shared_rows": draw(st.sampled_from([0, 6, 30, 1000])),
    }


def make_layout(root: str, sc: dict[str, Any], name: str = "op") -> BucketLayout:
    schema = pl.Schema({c: TYPES[k][0] for c, k in zip(sc["cols"], sc["kinds"], strict=True)})
    sums = (WEIGHT,) if sc["n_sums"] == 1 else ("__cnt", "__sum")
    return BucketLayout(
        root,
        name,
        schema,
        tuple(sc["keys"]),
        sc["n_buckets"],
        sums=sums,
        growth=sc["growth"],
        shared_rows=sc["shared_rows"],
    )


def frame(layout: BucketLayout, rows: list[tuple[tuple, tuple]]) -> pl.DataFrame:
    data = [(*r, *s) for r, s in rows]
    return pl.DataFrame(data, schema=layout.frame_schema, orient="row")


def as_model(layout: BucketLayout, df: pl.DataFrame) -> Model:
    n = len(layout.schema)
    out: Model = {}
    for r in df.select(list(layout.frame_schema)).iter_rows():
        assert r[:n] not in out, f"row {r} twice: not consolidated"
        out[r[:n]] = r[n:]
    return out


def add(model: Model, rows: list[tuple[tuple, tuple]]) -> None:
    for r, s in rows:
        old = model.get(r, (0,) * len(s))
        new = tuple(a + b for a, b in zip(old, s, strict=True))
        if any(new):
            model[r] = new
        else:
            model.pop(r, None)


def expected_seek(layout: BucketLayout, model: Model, probes: list[tuple], exact: bool) -> Model:
    idx = [list(layout.schema).index(k) for k in layout.keys]
    keys = {p for p in probes if exact or None not in p}
    return {r: s for r, s in model.items() if tuple(r[i] for i in idx) in keys}


def check(layout: BucketLayout, files: Any, model: Model, probes: list[tuple]) -> None:
    assert as_model(layout, layout.scan(files)) == model
    present = [tuple(r[list(layout.schema).index(k)] for k in layout.keys) for r in list(model)[:4]]
    all_probes = probes + present
    probe = pl.DataFrame(all_probes, schema={k: layout.schema[k] for k in layout.keys}, orient="row")
    for exact in (True, False):
        got = layout.seek(files, probe, exact=exact)
        assert got.columns == list(layout.frame_schema)
        assert as_model(layout, got) == expected_seek(layout, model, all_probes, exact), exact


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario())
def test_model(sc: dict[str, Any]) -> None:
    run_model(sc)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario(among=("f64", "i32", "u8")))
def test_model_of_numbers(sc: dict[str, Any]) -> None:
    """Numbers only: where no column holds a NULL a seek gathers the runs' rows by NumPy, else by
    Arrow; both agree with the model."""
    run_model(sc)


def run_model(sc: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as root:
        layout = make_layout(root, sc)
        trace = BucketedTrace(layout)
        model: Model = {}
        for step, (rows, cancel) in enumerate(zip(sc["steps"], sc["cancel"], strict=True)):
            if cancel and model:  # delete some stored rows exactly (their sums cancel to zero)
                rows = rows + [(r, tuple(-x for x in s)) for r, s in list(model.items())[::2]]
            trace.insert(frame(layout, rows), step, [])
            add(model, rows)
            check(layout, trace.files, model, sc["probes"])
            assert all(not e.is_empty() for e in trace.files.values())
            assert set(layout.sweep([trace.files])) >= set()  # lists without failing
        # the files of the final version, and nothing it needs, survive a sweep of the rest
        layout.remove(layout.sweep([trace.files]))
        check(layout, trace.files, model, sc["probes"])
        assert layout.sweep([trace.files]) == []


def int_layout(
    root: str, n_buckets: int = 4, growth: int = 4, name: str = "op", shared_rows: int = 65_536
) -> BucketLayout:
    return BucketLayout(
        root,
        name,
        pl.Schema({"k": pl.Int64, "v": pl.String}),
        ("k",),
        n_buckets,
        growth=growth,
        shared_rows=shared_rows,
    )


def kv(ks: range | list[int], w: int = 1) -> pl.DataFrame:
    ks = list(ks)
    return pl.DataFrame({"k": ks, "v": [f"v{k}" for k in ks], WEIGHT: [w] * len(ks)})


def test_idempotent_writes(tmp_path: Any) -> None:
    """The same change at the same step writes the same names with the same bytes: in two directories,
    again in the same directory (a task retry), and in another process (a speculative task)."""
    a, b, c = (str(tmp_path / d) for d in "abc")
    la, lb, lc = int_layout(a), int_layout(b), int_layout(c)
    change = pl.DataFrame(
        {"k": [3, 1, 2, None, 1], "v": ["x", "é", None, "n", "é"], WEIGHT: [1, 2, -1, 1, 1]}
    )
    fa, fb = la.apply({}, change, 7), lb.apply({}, change, 7)
    assert fa == fb and fa
    files = sorted(f for e in fa.values() for f in e.runs())

    def read(layout: BucketLayout) -> list[bytes]:
        return [pathlib.Path(layout.path(f)).read_bytes() for f in files]

    assert read(la) == read(lb)
    before = read(la)
    assert la.apply({}, change, 7) == fa and read(la) == before
    code = (
        "import sys, pickle; sys.path.insert(0, sys.argv[1]); "
        "layout, change = pickle.loads(bytes.fromhex(sys.argv[2])); layout.apply({}, change, 7)"
    )
    subprocess.run(
        [sys.executable, "-c", code, ROOT, pickle.dumps((lc, change)).hex()],
        check=True,
        cwd=ROOT,
        env={**os.environ, "POLARS_MAX_THREADS": "1"},
    )
    assert read(lc) == before
    assert not [f for f in os.listdir(os.path.join(a, "op")) if ".tmp-" in f]


def test_rollback_and_rerun(tmp_path: Any) -> None:
    layout = int_layout(str(tmp_path), n_buckets=3, growth=1)
    trace = BucketedTrace(layout)
    trace.insert(kv(range(20)), 1, [])
    v1 = dict(trace.files)
    undo: list = []
    trace.insert(kv(range(5), -1), 2, undo)
    trace.insert(kv(range(100, 130)), 3, undo)
    assert len(trace.snapshot().scan()) == 45
    for u in reversed(undo):
        u()
    assert trace.files == v1
    assert trace.snapshot().scan().sort("k").equals(kv(range(20)))
    # step 2 again over another change: the same names, other contents; readers see the new ones
    snap = trace.insert(kv([7, 8]), 2, [])
    want = pl.concat([kv(range(20)), kv([7, 8])]).group_by("k", "v").agg(pl.col(WEIGHT).sum())
    assert snap.scan().sort("k").equals(want.sort("k").select(["k", "v", WEIGHT]))
    assert snap.seek(pl.DataFrame({"k": [7, 50]}))[WEIGHT].to_list() == [2]


def test_state_round_trip(tmp_path: Any) -> None:
    layout = int_layout(str(tmp_path), n_buckets=5)
    trace = BucketedTrace(layout)
    trace.insert(kv(range(50)), 0, [])
    trace.insert(kv(range(10), -1), 1, [])
    state = json.loads(json.dumps(trace.to_state()))
    other = BucketedTrace(pickle.loads(pickle.dumps(layout)))
    other.restore(state)
    assert other.files == trace.files
    assert other.snapshot().scan().sort("k").equals(kv(range(10, 50)))
    with pytest.raises(ValueError, match="'op'"):
        BucketedTrace(int_layout(str(tmp_path), n_buckets=6)).restore(state)


def test_merge_policy(tmp_path: Any) -> None:
    """A step's part is a new run, merged first with the newest runs of at most `growth` times its size:
    run sizes fall geometrically from oldest to newest, and a carry merges several runs at once."""
    layout = int_layout(str(tmp_path), n_buckets=1, growth=2, shared_rows=0)
    trace = BucketedTrace(layout)

    def run(step: int, level: int) -> str:
        return f"b00000/run-{step:012d}-{level:03d}.arrow"

    trace.insert(kv(range(160)), 0, [])
    assert trace.files[0] == BucketEntry((run(0, 0),), (160,))
    trace.insert(kv(range(1000, 1010)), 1, [])  # 160 > 2 * 10: a run of its own
    assert trace.files[0] == BucketEntry((run(0, 0), run(1, 1)), (160, 10))
    trace.insert(kv(range(1010, 1013)), 2, [])  # 10 > 2 * 3
    assert trace.files[0] == BucketEntry((run(0, 0), run(1, 1), run(2, 2)), (160, 10, 3))
    old = dict(trace.files)
    trace.insert(kv([1000, 1001, 1002, 1003, 1004], -1), 3, [])  # 3 <= 10: carries into run 1 (8 rows)
    assert trace.files[0] == BucketEntry((run(0, 0), run(3, 1)), (160, 8))
    assert garbage(old, trace.files) == [run(1, 1), run(2, 2)]
    for step in range(4, 40):  # the carries reach the oldest run once the newer ones add up to 1/2 of it
        trace.insert(kv(range(2000 + 10 * step, 2010 + 10 * step)), step, [])
        e = trace.files[0]
        assert all(a > layout.growth * b for a, b in zip(e.rows, e.rows[1:], strict=False)), e.rows
        assert e.rows[0] >= 160
    assert len(trace.files[0].runs()) < 6
    want = pl.concat(
        [
            kv(range(160)),
            kv(range(1005, 1013)),
            *(kv(range(2000 + 10 * s, 2010 + 10 * s)) for s in range(4, 40)),
        ]
    )
    assert trace.snapshot().scan().sort("k").equals(want.sort("k"))
    assert trace.snapshot().seek(pl.DataFrame({"k": [1000, 3, 1006, 2391, 5000]}))["k"].sort().to_list() == [
        3,
        1006,
        2391,
    ]


def test_shared_runs_spill_into_the_buckets(tmp_path: Any) -> None:
    """The driver writes a step's change as one run shared by all buckets; once the shared runs would
    pass `shared_rows`, they and the change go to their buckets and the shared entry empties."""
    layout = int_layout(str(tmp_path), n_buckets=4, growth=4, shared_rows=20)
    trace = BucketedTrace(layout)
    trace.insert(kv(range(10)), 0, [])
    assert list(trace.files) == [SHARED]
    assert trace.files[SHARED] == BucketEntry(("shared/run-000000000000-000.arrow",), (10,))
    trace.insert(kv(range(10, 18)), 1, [])  # 10 <= 4 * 8: carried into one run
    assert trace.files == {SHARED: BucketEntry(("shared/run-000000000001-000.arrow",), (18,))}
    probe = pl.DataFrame({"k": [3, 12, 99]})
    assert trace.snapshot().seek(probe)["k"].sort().to_list() == [3, 12]
    old = dict(trace.files)
    trace.insert(kv([3], -1).vstack(kv(range(18, 22))), 2, [])  # 18 + 5 > 20: spilled
    assert SHARED not in trace.files and len(trace.files) == 4
    assert "shared/run-000000000001-000.arrow" in garbage(old, trace.files)
    want = pl.concat([kv([0, 1, 2]), kv(range(4, 22))])
    assert trace.snapshot().scan().sort("k").equals(want)
    trace.insert(kv([0], -1), 3, [])  # shared again, cancelling a row of a bucket: seek and scan consolidate
    assert SHARED in trace.files
    assert trace.snapshot().seek(pl.DataFrame({"k": [0, 1]}))["k"].to_list() == [1]
    assert trace.snapshot().scan().sort("k").equals(want.filter(pl.col("k") != 0))


def test_old_checkpoint_entries_read_as_runs() -> None:
    """A checkpoint written before geometric levels stored [base, mid, base_rows, mid_rows]."""
    assert BucketEntry.from_json(["b/base.arrow", "b/mid.arrow", 10, 2]) == BucketEntry(
        ("b/base.arrow", "b/mid.arrow"), (10, 2)
    )
    assert BucketEntry.from_json(["b/base.arrow", None, 10, 0]) == BucketEntry(("b/base.arrow",), (10,))
    e = BucketEntry(("x", "y"), (5, 1))
    assert BucketEntry.from_json(json.loads(json.dumps(e.to_json()))) == e


def test_multi_column_sums(tmp_path: Any) -> None:
    layout = BucketLayout(
        str(tmp_path),
        "agg",
        pl.Schema({"g": pl.String}),
        ("g",),
        4,
        sums=("cnt", "total"),
        sum_types=(pl.Int64(), pl.Float64()),
    )
    trace = BucketedTrace(layout)
    trace.insert(pl.DataFrame({"g": ["a", "b", "a"], "cnt": [1, 1, 1], "total": [1.5, 2.0, 2.5]}), 0, [])
    # a's count cancels but its total does not: the row stays; b's both cancel: dropped
    trace.insert(pl.DataFrame({"g": ["a", "b"], "cnt": [-2, -1], "total": [-1.5, -2.0]}), 1, [])
    assert trace.snapshot().scan().rows() == [("a", 0, 2.5)]
    assert trace.snapshot().seek(pl.DataFrame({"g": ["a", "b"]})).rows() == [("a", 0, 2.5)]


def test_partitions_as_worker_tasks(tmp_path: Any) -> None:
    """Workers each apply their buckets' part of a change and return entries; the driver adopts them."""
    layout = int_layout(str(tmp_path / "w"), n_buckets=8, growth=2)
    whole = int_layout(str(tmp_path / "d"), n_buckets=8, growth=2)
    files: dict[int, BucketEntry] = {}
    wfiles: dict[int, BucketEntry] = {}
    for step, change in enumerate([kv(range(40)), kv(range(30, 45)), kv(range(0, 40, 3), -1)]):
        parts = layout.split(change)
        assert sum(p.height for p in parts.values()) == change.height
        shipped = pickle.loads(pickle.dumps(layout))
        tasks = [pl.concat([parts[b] for b in parts if b % 2 == t] or [change.clear()]) for t in (0, 1)]
        frames = [
            shipped.apply_partition({b: e for b, e in files.items() if b % 2 == t}, tasks[t], step)
            for t in (0, 1)
        ]
        trace = BucketedTrace(layout, files)
        trace.commit(entries_from_frame(pl.concat(frames)), [])
        files = trace.files
        wfiles = updated(wfiles, whole.apply(wfiles, change, step))
        assert files == wfiles
    assert layout.scan(files).sort("k").equals(whole.scan(wfiles).sort("k"))


def test_errors_name_the_state(tmp_path: Any) -> None:
    with pytest.raises(ValueError, match="'op'.*'z'"):
        BucketLayout(str(tmp_path), "op", pl.Schema({"k": pl.Int64}), ("z",), 4)
    layout = int_layout(str(tmp_path))
    with pytest.raises(ValueError, match="'op'.*'v'"):
        layout.apply({}, pl.DataFrame({"k": [1], WEIGHT: [1]}), 0)


def test_a_key_with_the_hash_of_null_is_told_from_null(tmp_path: Any) -> None:
    """One Int64 key column is sought by its hash alone (one-to-one on values), except where a NULL is
    found or probed: the value whose hash is NULL's fixed one (`test_keyhash.int_of_hash`) is then
    told from NULL by its key."""
    from dbspark.algebra.keyhash import stable_hash
    from tests.test_keyhash import int_of_hash

    null_hash = int(stable_hash(pl.DataFrame({"k": pl.Series([None], dtype=pl.Int64)}), ["k"])[0])
    x = int_of_hash(null_hash)
    assert int(stable_hash(pl.DataFrame({"k": [x]}), ["k"])[0]) == null_hash
    trace = BucketedTrace(int_layout(str(tmp_path), n_buckets=2, shared_rows=0))
    rows = pl.DataFrame({"k": [None, x, 1], "v": ["null", "x", "one"], WEIGHT: [1, 1, 1]})
    trace.insert(rows.cast({"k": pl.Int64}), 0, [])
    snap = trace.snapshot()
    for probe, exact, want in (
        ([x], True, ["x"]),
        ([None], True, ["null"]),
        ([None], False, []),
        ([x, None], False, ["x"]),
        ([x, 1], True, ["one", "x"]),
    ):
        got = snap.seek(pl.DataFrame({"k": pl.Series(probe, dtype=pl.Int64)}), exact=exact)
        assert sorted(got["v"].to_list()) == want, (probe, exact)
