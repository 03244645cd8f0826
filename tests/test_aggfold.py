"""The spark engine's driver-side MIN / MAX / MEDIAN step (`columnar.ordered_fold.ordered_step`) against a plain
Python reference, on hypothesis-generated states whose rows are not consolidated (a value inserted in
one run and deleted in a later one, duplicates, NULLs) and changes with deletes. The step reads a
group's rows without consolidating them, so these are the cases where a shortcut would go wrong."""

from __future__ import annotations

from collections import Counter

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dbspark.algebra.zset import WEIGHT, ZSet
from dbspark.columnar import ordered_fold, ranked_fold
from dbspark.columnar.ordered_fold import ordered_step
from dbspark.columnar.ranked_fold import SortedRuns
from dbspark.errors import NegativeStateError
from dbspark.ir.aggregate import AggCall, AggSpec

SCHEMA = pl.Schema({"g": pl.Int64(), "x": pl.Int64(), "y": pl.Int64()})
SPEC = AggSpec(
    ("g",),
    (
        AggCall("lo", "min", "x"),
        AggCall("hi", "max", "x"),
        AggCall("n", "count_star", None),
        AggCall("s", "sum", "y"),
        AggCall("md", "median", "x"),
    ),
    SCHEMA,
)
row = st.tuples(st.integers(0, 2), st.one_of(st.none(), st.integers(0, 4)), st.integers(-3, 3))
entries = st.lists(st.tuples(row, st.integers(-2, 3).filter(bool)), max_size=14)


def frame(es: list) -> pl.DataFrame:
    return pl.DataFrame(
        [(*r, w) for r, w in es], schema=pl.Schema([*SCHEMA.items(), (WEIGHT, pl.Int64())]), orient="row"
    )


def reference(rows: Counter, group: int) -> tuple | None:
    """(min x, max x, count, sum y, median x) of a group's multiset, or None if it has no row."""
    n = sum(w for (g, _, _), w in rows.items() if g == group)
    if n == 0:
        return None
    xs: Counter = Counter()
    for (g, x, _), w in rows.items():
        if g == group and x is not None:
            xs[x] += w
    present = [x for x, w in xs.items() if w > 0]
    s = sum(y * w for (g, _, y), w in rows.items() if g == group)
    values = sorted(x for x, w in xs.items() for _ in range(max(w, 0)))
    m = len(values)
    med = None if not m else float(values[(m - 1) // 2]) * 0.5 + float(values[m // 2]) * 0.5
    return (min(present, default=None), max(present, default=None), n, s, med)


@settings(max_examples=300, deadline=None)
@given(entries, entries, st.data())
def test_ordered_step_equals_recomputing_the_groups(old: list, change: list, data: st.DataObject) -> None:
    # deletes of rows of the state too (then a value can have a positive and a negative entry)
    change = change + [(r, -1) for r, w in old if w > 0 and data.draw(st.booleans())]
    before: Counter = Counter()
    for r, w in old:
        before[r] += w
    after = before.copy()
    for r, w in change:
        after[r] += w
    if any(w < 0 for w in before.values()) or not change:
        return  # not a state (every row's multiplicity is >= 0), or no change (the step is skipped)
    groups = sorted({r[0] for r, _ in change})
    # what the aggregate checks (as on Spark): a group's row count, and each value's multiplicity
    counts: Counter = Counter()
    values: Counter = Counter()
    for (g, x, _), w in after.items():
        counts[g] += w
        if x is not None:
            values[(g, x)] += w
    if any(counts[g] < 0 for g in groups) or any(w < 0 for (g, _), w in values.items() if g in groups):
        with pytest.raises(NegativeStateError):
            ordered_step(SPEC, frame(change), frame([e for e in old if e[0][0] in groups]), ["g"], True)
        return
    got = ordered_step(SPEC, frame(change), frame([e for e in old if e[0][0] in groups]), ["g"], True)
    want: Counter = Counter()
    for g in groups:
        o, n = reference(before, g), reference(after, g)
        if o != n:
            if o is not None:
                want[(g, *o)] -= 1
            if n is not None:
                want[(g, *n)] += 1
    assert dict(got.to_dict()) == {k: v for k, v in want.items() if v}


@settings(max_examples=200, deadline=None)
@given(entries, entries, st.data())
def test_the_general_fold_equals_the_one_pass_fold(old: list, change: list, data: st.DataObject) -> None:
    """`ordered_fold._general` (the values' multiplicities per group, every call) and `ordered_step`
    (one pass that never consolidates a group) give the same output change, or both raise."""
    change = change + [(r, -1) for r, w in old if w > 0 and data.draw(st.booleans())]
    before: Counter = Counter()
    for r, w in old:
        before[r] += w
    if any(w < 0 for w in before.values()) or not change:
        return
    groups = sorted({r[0] for r, _ in change})
    d, found = frame(change), frame([e for e in old if e[0][0] in groups])
    try:
        want = ordered_step(SPEC, d, found, ["g"], True)
    except NegativeStateError:
        with pytest.raises(NegativeStateError):
            ordered_fold._general(SPEC, d, found, ["g"], True)
        return
    got = ZSet(ordered_fold._general(SPEC, d, found, ["g"], True))
    assert dict(got.to_dict()) == dict(want.to_dict())


SPECS = {
    "with sums": SPEC,
    "count only": AggSpec(
        ("g",),
        (AggCall("n", "count_star", None), AggCall("md", "median", "x"), AggCall("lo", "min", "x")),
        SCHEMA,
    ),
}


def _slices(runs: list[list], group: int, pending: list) -> list[pl.DataFrame]:
    """A group's entries in each run (consolidated within the run), sorted as a run sorts them, and its
    pending entries (not consolidated) sorted by the aggregated column, as `key_runs` hands them over."""
    out = []
    for run in runs:
        f = frame([e for e in run if e[0][0] == group])
        f = f.group_by(list(SCHEMA)).agg(pl.col(WEIGHT).sum()).filter(pl.col(WEIGHT) != 0)
        if f.height:
            out.append(pl.from_arrow(f.sort(list(SCHEMA), nulls_last=False).to_arrow()))
    mine = frame([e for e in pending if e[0][0] == group]).sort("x", nulls_last=False)
    return out + [mine] if mine.height and out else out


# values far apart too: the ranking searches the value domain
wide = st.tuples(
    st.integers(0, 1),
    st.one_of(st.none(), st.integers(0, 4), st.sampled_from([-(2**62), -7, 10**9, 2**62])),
    st.integers(-3, 3),
)
wide_entries = st.lists(st.tuples(wide, st.integers(-2, 3).filter(bool)), max_size=8)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(wide, st.integers(1, 3)), min_size=1, max_size=16),
    st.lists(wide, max_size=4),
    wide_entries,
    st.sampled_from(sorted(SPECS)),
    st.data(),
)
def test_ranking_big_groups_over_their_runs_equals_reading_them(
    state: list, ghosts: list, change: list, which: str, data: st.DataObject
) -> None:
    """`ranked_fold.step` (order statistics over a group's sorted run slices, the pending rows and the
    change) gives `ordered_step`'s result (which reads the same entries), or the same error. The state
    is spread over up to three runs and the pending rows, with rows inserted in one run and deleted in
    a later one (`ghosts`); the change deletes rows of the state and may delete rows that are not there."""
    spec = SPECS[which]
    n_runs = data.draw(st.integers(1, 3))
    runs: list[list] = [[] for _ in range(n_runs + 1)]  # the last one: the pending rows
    for e in state:
        runs[data.draw(st.integers(0, n_runs))].append(e)
    for r in ghosts:
        a = data.draw(st.integers(0, n_runs - 1))
        runs[a].append((r, 2))
        runs[data.draw(st.integers(a + 1, n_runs))].append((r, -2))
    runs, pending = runs[:-1], runs[-1]
    change = change + [(r, -1) for r, _ in state if data.draw(st.booleans())]
    groups = sorted({r[0] for r, _ in change} & {r[0] for run in runs for r, _ in run})
    slices = [_slices(runs, g, pending) for g in groups]
    keep = [i for i, s in enumerate(slices) if s]
    groups, slices = [groups[i] for i in keep], [slices[i] for i in keep]
    if not groups:
        return
    d = frame([e for e in change if e[0][0] in groups])
    found = frame([e for run in [*runs, pending] for e in run if e[0][0] in groups])
    g = pl.DataFrame({"g": groups}, schema={"g": pl.Int64()})
    try:
        want = ordered_step(spec, d, found, ["g"], True)
    except NegativeStateError:
        with pytest.raises(NegativeStateError):
            ranked_fold.step(spec, ["g"], g, slices, d, True)
        return
    got = ranked_fold.step(spec, ["g"], g, slices, d, True)
    assert got is not None
    assert dict(got.to_dict()) == dict(want.to_dict())


def test_sorted_runs_rank_across_cancelling_runs() -> None:
    """A value inserted in one run and deleted in another is not counted; kth and count_le agree with
    the consolidated multiset."""
    a = (np.array([1, 3, 5, 7]), np.array([1, 2, 1, 1]))
    b = (np.array([3, 5, 9]), np.array([-2, 1, 4]))
    r = SortedRuns([a, b])
    values = [1, 5, 5, 7, 9, 9, 9, 9]
    assert r.total() == len(values)
    assert [r.kth(k) for k in range(len(values))] == values
    assert r.count_le(4) == 1 and r.negative() is None
    assert SortedRuns([a, (np.array([7]), np.array([-2]))]).negative() == (7, -1)
