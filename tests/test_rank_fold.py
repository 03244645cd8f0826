"""The ranked distinct's fold (`columnar/rank_fold.py`) against a Python reading of its rules, on rows as
a trace's seek gives them: not consolidated across the trace's runs."""

from __future__ import annotations

from contextlib import nullcontext
from unittest.mock import patch

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from dbspark.algebra.consolidate import WEIGHT
from dbspark.columnar import rank_fold
from dbspark.columnar.rank_fold import KEPT, RANK, RankFold

FACTS = st.integers(0, 5)
RANKS = st.integers(-1, 6)


def _frame(rows: list[tuple[int, int, int]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema={"x": pl.Int64, RANK: pl.Int64, WEIGHT: pl.Int64}, orient="row")


def _unconsolidated(rows: list[tuple[int, int, int]], noise: list[tuple[int, int, int]]) -> pl.DataFrame:
    """The rows, each weight split in two, with pairs that cancel: what a seek of several runs gives."""
    out = []
    for x, r, w in rows:
        out += [(x, r, w - 1), (x, r, 1)]
    for x, r, w in noise:
        out += [(x, r, w), (x, r, -w)]
    return _frame([row for row in out if row[2] != 0])


def _sums(rows: list[tuple[int, int, int]]) -> dict[tuple[int, int], int]:
    out: dict[tuple[int, int], int] = {}
    for x, r, w in rows:
        out[x, r] = out.get((x, r), 0) + w
    return {k: v for k, v in out.items() if v}


def _result(df: pl.DataFrame) -> set[tuple[int, int, int]]:
    return {(x, r, w) for x, r, w in df.select("x", RANK, WEIGHT).iter_rows()}


# how the fold runs: by NumPy on packed facts (from 0, or from a negative offset), or by the Polars plans
# (asked for, or because the facts span more than 62 bits)
WAYS = {"packed": (0, 1), "shifted": (-1000, 1), "wide": (-2, 2**61), "plans": (0, 1)}  # x -> (x + a) * b


def _fold(way: str, overdelete: bool, parts: list[pl.DataFrame], count: bool = False) -> pl.DataFrame:
    """RankFold(("x",), ...) run `way`, its facts mapped there and back."""
    shift, scale = WAYS[way]
    there = [p.with_columns((pl.col("x") + shift) * scale) for p in parts]
    with (
        patch.object(rank_fold._Packed, "of", staticmethod(lambda cols, parts: None))
        if way == "plans"
        else nullcontext()
    ):
        distinct = {x for p in parts for x in p["x"].to_list()}
        plans = way == "plans" or (way == "wide" and len(distinct) > 1)
        assert (rank_fold._Packed.of(("x",), there) is None) == plans
        out = RankFold(("x",), overdelete, count)(there)
    return out.with_columns(pl.col("x") // scale - shift)


@settings(max_examples=150, deadline=None)
@given(
    st.dictionaries(FACTS, RANKS, max_size=5),
    st.lists(st.tuples(FACTS, RANKS, st.integers(1, 3)), max_size=8),
    st.lists(st.tuples(FACTS, RANKS, st.integers(-2, 2)), max_size=8),
    st.lists(st.tuples(FACTS, RANKS, st.integers(1, 3)), max_size=4),
    st.lists(FACTS, max_size=3),
    st.sampled_from(sorted(WAYS)),
)
def test_the_fold_reads_its_rows_by_their_sums(held, integral, change, noise, removed, way):
    """Over-delete: a held fact of the change goes (-1 at its rank) when its derivations left below its
    rank sum to at most 0. Otherwise (H by facts): a fact is held when its derivations' count is
    positive and the over-delete did not remove it; one whose count becomes positive and is not held
    comes in at 1 + the least rank of its positive derivations; one held whose count drops to 0 goes.
    Counting, each removal also says whether some derivation of its fact is left (`KEPT`). Each `way`
    the fold runs (`WAYS`)."""
    facts = [(x, r, 1) for x, r in held.items()]
    change = [c for c in change if c[2]]
    at = {x for x, _, _ in change}
    here = [f for f in facts if f[0] in at]  # (sought at the change's facts)
    ins = [_unconsolidated(change, []), _unconsolidated(integral, noise), _unconsolidated(here, noise)]
    left = _sums(change + integral)
    want = set()
    for x, r in held.items():
        if x in at and sum(w for (y, q), w in left.items() if y == x and q < r) <= 0:
            want.add((x, r, -1))
    got = _fold(way, True, ins)
    assert _result(got) == want
    counted = _fold(way, True, ins, count=True)
    kept = {(x, r, w, k) for x, r, w, k in counted.select("x", RANK, WEIGHT, KEPT).iter_rows()}
    assert kept == {(x, r, w, sum(v for (y, _), v in left.items() if y == x) > 0) for x, r, w in want}

    gone = _frame([(x, 0, -1) for x in removed])
    old = _sums(integral)
    probe = at | set(removed)
    want = set()
    for x in probe:
        was = sum(w for (y, _), w in old.items() if y == x) > 0 and x not in removed
        now = sum(w for (y, _), w in left.items() if y == x)
        if now > 0 and not was:
            want.add((x, 1 + min(q for (y, q), w in left.items() if y == x and w > 0), 1))
        if was and now <= 0 and x in held and x in at:
            want.add((x, held[x], -1))
    seen = [(x, r, w) for x, r, w in integral if x in probe]
    got = _fold(way, False, [ins[0], _unconsolidated(seen, noise), ins[2], gone])
    assert _result(got) == want
