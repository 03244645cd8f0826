"""The spark engine's driver-side MIN / MAX / MEDIAN step (`engines.spark.aggfold.ordered_step`) against a plain
Python reference, on hypothesis-generated states whose rows are not consolidated (a value inserted in
one run and deleted in a later one, duplicates, NULLs) and changes with deletes. The step reads a
group's rows without consolidating them, so these are the cases where a shortcut would go wrong."""

from __future__ import annotations

from collections import Counter

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dbspark.algebra.zset import WEIGHT
from dbspark.engines.spark.aggfold import ordered_step
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
