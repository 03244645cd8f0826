"""`columnar/row_set.py`: the growing set of rows behind a fresh step's recursive distincts, against a
Python set (and its tally of the rows' weights against a dict), on generated batches whose values move
the columns' ranges, grow their dictionaries, cross the bitmap's size and the 62 bits of a key, and
carry NULLs."""

from __future__ import annotations

import datetime as dt
from collections import Counter

import numpy as np
import polars as pl
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dbspark.algebra.consolidate import WEIGHT
from dbspark.columnar import row_set
from dbspark.columnar.row_set import RowSet

SCHEMAS = {
    "ints": pl.Schema({"x": pl.Int64, "y": pl.Int64}),
    "mixed": pl.Schema({"s": pl.String, "d": pl.Date, "n": pl.Int32}),
    "one": pl.Schema({"v": pl.UInt16}),
}


def values(dtype: pl.DataType) -> st.SearchStrategy:
    small = st.integers(-20, 20)
    if dtype == pl.Int64:  # mostly small; sometimes far apart, past 62 bits for two columns
        return st.one_of(small, small, small, st.integers(-(2**40), 2**40), st.integers(-(2**62), 2**62))
    if dtype == pl.Int32:
        return st.one_of(small, small, st.none(), st.integers(-(2**31), 2**31 - 1))
    if dtype == pl.UInt16:
        return st.integers(0, 2**16 - 1)
    if dtype == pl.Date:
        return st.dates(dt.date(1990, 1, 1), dt.date(2030, 1, 1))
    return st.one_of(st.sampled_from(["a", "b", "", "é"]), st.none(), st.text(max_size=3))


def batches(schema: pl.Schema) -> st.SearchStrategy:
    row = st.tuples(*(values(t) for t in schema.values()))
    return st.lists(st.lists(st.tuples(row, st.integers(-3, 5)), max_size=25), min_size=1, max_size=6)


def frame(schema: pl.Schema, rows: list[tuple]) -> pl.DataFrame:
    return pl.DataFrame([r for r, _ in rows], schema=schema, orient="row")


@pytest.mark.parametrize("name", sorted(SCHEMAS))
@pytest.mark.parametrize("bitmap", ["default", "never", "always", "bits"])
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_new_rows_and_sums_against_python(name, bitmap, data):
    """Every batch's new rows are exactly its rows not seen before (each once), and the tally of all
    the batches' weights is their sum by row, zeros dropped."""
    with pytest.MonkeyPatch.context() as mp:
        if bitmap != "default":  # sorted runs only, the tally summed every few rows; or a bitmap when it can
            mp.setattr(row_set, "DENSE_BITS", 0 if bitmap == "never" else 28)
            mp.setattr(row_set, "COUNT_BITS", 0 if bitmap == "never" else 25)
            mp.setattr(row_set, "COMPACT", 4 if bitmap == "never" else 10**6)
            mp.setattr(row_set, "BOOL_BITS", 0 if bitmap == "bits" else row_set.BOOL_BITS)  # (a bit a key)
        check_against_python(SCHEMAS[name], data)


def check_against_python(schema: pl.Schema, data: st.DataObject) -> None:
    s, seen, tally = RowSet(schema), set(), Counter()
    m = RowSet(schema)  # the same batches through `new_rows`: a mask of the rows not seen before
    c = RowSet(schema)  # the same weights through `count`, apart where no row was tallied before
    for rows in data.draw(batches(schema)):
        weights = np.array([w for _, w in rows], dtype=np.int64)
        apart = data.draw(st.booleans()) and not {r for r, _ in rows} & set(tally)
        c.count(frame(schema, rows), weights, apart=apart)
        mask = m.new_rows(frame(schema, rows))
        if mask is not None:
            assert mask.tolist() == [r not in seen for r, _ in rows]
        else:
            m.new(frame(schema, rows))
        assert len(m) == len(seen | {r for r, _ in rows})
        got = s.new(frame(schema, rows), weights)
        assert got.schema == schema
        new = list(got.iter_rows())
        assert len(new) == len(set(new)), "a new row twice"
        assert set(new) == {r for r, _ in rows} - seen
        seen |= set(new)
        assert len(s) == len(seen)
        for r, w in rows:
            tally[r] += w
        want = {r: w for r, w in tally.items() if w}
        for counts in (s.counts(), c.counts()):
            assert counts.columns == [*schema, WEIGHT]
            assert counts.height == len(want), "a row twice, or a zero kept"
            assert {r[:-1]: r[-1] for r in counts.iter_rows()} == want


def test_a_key_past_62_bits_keeps_the_rows_as_a_frame():
    s = RowSet(SCHEMAS["ints"])
    assert s.new(pl.DataFrame({"x": [1, 2], "y": [3, 3]})).height == 2
    assert s.frame is None and s.dense is not None
    got = s.new(pl.DataFrame({"x": [1, -(2**62), 2], "y": [3, 2**62, 4]}))
    assert s.frame is not None
    assert sorted(got.iter_rows()) == [(-(2**62), 2**62), (2, 4)]
    assert s.new(pl.DataFrame({"x": [1, 2], "y": [3, 4]})).height == 0


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(st.tuples(st.integers(-3, 40), st.integers(0, 5)), max_size=20),
            st.booleans(),
        ),
        max_size=8,
    ),
    st.booleans(),
)
@example(
    [([(1, 0)], True), ([(1, 3)], True), ([(1, 2)], True)], False
)  # (t: the largest above, not the last)
@example(
    [([(1, 2)], True), ([(1, 0), (2, 0)], True), ([(3, 0), (3, 1)], False)], False
)  # (rounds, then tally)
def test_a_fresh_ranked_distinct_gives_each_new_fact_one_more_than_its_least_rank(batches, wide) -> None:
    """A fresh run's ranked distinct (`operators/fresh._Ranked`): each call's new facts (not given
    before), once each, at 1 + the least rank among that call's derivations of them, whether the
    call's ranks are one value (the set's new rows as they are) or several (grouped by fact); a set past
    62 bits (`wide`: a column far apart) answers as a frame; and at the end, each fact's counts of its
    derivations below its rank and the others (the supports `finish` writes), whether the calls were
    kept as rounds throughout or tallied by fact and rank from a call of several ranks or the frame on.
    Checked against Python."""
    from types import SimpleNamespace

    from dbspark.algebra.zset import ZSet
    from dbspark.columnar.rank_fold import COUNTS, RANK
    from dbspark.operators.fresh import _Ranked

    schema = pl.Schema({"x": pl.Int64, "y": pl.Int64, RANK: pl.Int64})
    state = SimpleNamespace(cols=("x", "y"), schema=schema, out=schema, facts=None)
    ranked = _Ranked(state)
    seen: set = set()
    derivations: Counter = Counter()
    rank: dict = {}  # each fact's, at its first call
    for rows, same in batches:
        if same and rows:
            rows = [(x, rows[0][1]) for x, _ in rows]
        far = 2**56 if wide else 7
        data = [(x, x * far, r) for x, r in rows]
        weights = pl.Series(WEIGHT, [1 + x % 3 for x, _ in rows], dtype=pl.Int64)  # (some above 1)
        z = ZSet(pl.DataFrame(data, schema=schema, orient="row").with_columns(weights))
        got = ranked.new(z).df
        want: dict = {}
        for x, y, r in data:
            if (x, y) not in seen:
                want[(x, y)] = min(want.get((x, y), r), r)
        seen.update(want)
        assert sorted(got.select("x", "y", RANK).rows()) == sorted(
            (x, y, r + 1) for (x, y), r in want.items()
        )
        assert got[WEIGHT].to_list() == [1] * got.height
        for d, w in zip(data, weights, strict=True):
            derivations[d] += w
        for f, r in zip(got.select("x", "y").rows(), got[RANK], strict=True):
            rank[f] = r
    # the facts' counts from their derivations (kept as rounds while the calls' ranks were one value,
    # then tallied by fact and rank): b those below the fact's rank, a the others, t the largest of theirs
    inserted: list = []
    k = SimpleNamespace(from_local=lambda z: z, trace_insert=lambda _, z, __: inserted.append(z.df))
    ranked.finish(k, [])
    by: dict = {}
    for (x, y, s), w in derivations.items():
        by.setdefault((x, y), []).append((s, w))
    want = set()
    for f, ds in by.items():
        r = rank[f]
        b, a = sum(w for s, w in ds if s < r), sum(w for s, w in ds if s >= r)
        want.add((*f, r, b, a, max([r - 1] + [s for s, _ in ds if s >= r]), 1))
    rows = inserted[0].select("x", "y", RANK, *COUNTS, WEIGHT).rows() if inserted else []
    assert len(rows) == len(want) and set(rows) == want


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 20), st.lists(st.lists(st.integers(0, 2**20 - 1), max_size=40), max_size=6), st.data())
def test_a_bitmap_against_python(bits, batches, data):
    """`Bits`: keys added in sorted batches (repeats, neighbours in one byte) are in it, no other is, and
    its keys are the set's, sorted."""
    b, want = row_set.Bits(bits), set()
    for keys in batches:
        keys = [k % (1 << bits) for k in keys]
        probe = np.array(
            keys + data.draw(st.lists(st.integers(0, (1 << bits) - 1), max_size=10)), dtype=np.int64
        )
        assert b.has(probe).tolist() == [k in want for k in probe.tolist()]
        b.add(np.unique(np.array(keys, dtype=np.int64)))
        want |= set(keys)
        assert b.keys().tolist() == sorted(want)
