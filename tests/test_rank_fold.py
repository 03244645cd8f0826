"""The ranked distinct's fold (`columnar/rank_fold.py`) against a Python reading of its rules, on rows as
a trace's seek gives them: a fact's row of an earlier version and its removal may both be there."""

from __future__ import annotations

import itertools
from contextlib import nullcontext
from unittest.mock import patch

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from dbspark.algebra.consolidate import WEIGHT
from dbspark.columnar import packed_rank_fold, rank_fold
from dbspark.columnar.rank_fold import (
    COUNTS,
    FACTS,
    KEPT,
    OUT,
    RANK,
    REMOVED,
    TO,
    RankFold,
    supports,
    tallied_supports,
)
from dbspark.columnar.row_set import RowSet

FACTS_X = st.integers(0, 5)
RANKS = st.integers(-1, 6)
Row = tuple[int, int, int, int, int]  # x, rank, below, above, top
STATE = st.tuples(RANKS, st.integers(0, 3), st.integers(0, 3), st.integers(0, 4))


def _state(x: int, r: int, b: int, a: int, dt: int) -> Row:
    return (x, r, b, a, r - 1 + dt)  # (top >= rank - 1)


def _rows(rows: list[Row], weights: list[int], stale: list[Row]) -> pl.DataFrame:
    """The rows of facts, each with its weight, and earlier versions with their removals, in the order of
    a seek of two runs: the earlier versions, the rows, then the removals."""
    out = [(*s, 1) for s in stale] + [(*r, w) for r, w in zip(rows, weights, strict=True)]
    out += [(*s, -1) for s in stale]
    cols = ["x", RANK, *COUNTS, WEIGHT]
    return pl.DataFrame(out, schema={c: pl.Int64 for c in cols}, orient="row")


def _change(rows: list[tuple[int, int, int]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema={"x": pl.Int64, RANK: pl.Int64, WEIGHT: pl.Int64}, orient="row")


def _result(df: pl.DataFrame) -> dict[int, set[tuple]]:
    """The fold's rows by where they go, weights summed (a fact's old row and new one cancel if equal)."""
    sums: dict[tuple, int] = {}
    for row in df.select("x", RANK, *COUNTS, TO, WEIGHT).iter_rows():
        key = (row[5], *(row[:2] if row[5] == OUT else row[:5]))
        sums[key] = sums.get(key, 0) + row[6]
    out: dict[int, set[tuple]] = {OUT: set(), FACTS: set(), REMOVED: set()}
    for (to, *row), w in sums.items():
        if w:
            out[to].add((*row, w))
    return out


# how the fold runs: by NumPy on packed facts (from 0, or from a negative offset; "spread": too sparse
# for a table, found by binary search), or by the Polars plans (asked for, or because the facts span more
# than 62 bits: two facts 2 apart, 2^62 once scaled)
WAYS = {  # x -> (x + a) * b
    "packed": (0, 1),
    "shifted": (-1000, 1),
    "spread": (0, 2**20),
    "wide": (-2, 2**61),
    "plans": (0, 1),
}


def _fold(way: str, overdelete: bool, parts: list[pl.DataFrame], count: bool = False) -> pl.DataFrame:
    """RankFold(("x",), ...) run `way`, its facts mapped there and back."""
    shift, scale = WAYS[way]
    there = [p.with_columns((pl.col("x") + shift) * scale) for p in parts]
    with (
        patch.object(packed_rank_fold.PackedFold, "of", staticmethod(lambda cols, parts, count: None))
        if way == "plans"
        else nullcontext()
    ):
        distinct = {x for p in parts for x in p["x"].to_list()}
        plans = way == "plans" or (way == "wide" and max(distinct, default=0) - min(distinct, default=0) >= 2)
        assert (packed_rank_fold.PackedFold.of(("x",), there, count) is None) == plans
        out = RankFold(("x",), overdelete, count)(there)
    return out.with_columns(pl.col("x") // scale - shift)


def _applied(row: Row, changes: list[tuple[int, int]]) -> Row:
    """A fact's counts after changes of its derivations (rank, weight): below its rank to b, else to a
    (t raised by an insert), a loss b cannot take from a."""
    x, r, b, a, t = row
    for s, w in changes:
        if s < r:
            b += w
        else:
            a += w
            t = max(t, s) if w > 0 else t
    return (x, r, max(b, 0), a + min(b, 0), t)


def _coming(lumps: list[tuple[int, int]]) -> tuple[int, int, int, int] | None:
    """A fact not held, from its derivations by rank (summed): (rank, b, a, t) if its count is positive,
    at 1 + the least rank where its count so far is positive."""
    by: dict[int, int] = {}
    for s, w in lumps:
        by[s] = by.get(s, 0) + w
    total = sum(by.values())
    if total <= 0:
        return None
    so_far = 0
    for s in sorted(by):
        so_far += by[s]
        if so_far > 0:
            top = max(q for q, w in by.items() if w > 0)
            return (s + 1, so_far, total - so_far, max(s, top))
    raise AssertionError("a positive count has a positive prefix")


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(FACTS_X, STATE, max_size=5),
    st.dictionaries(FACTS_X, STATE, max_size=3),
    st.lists(st.tuples(FACTS_X, RANKS, st.integers(-3, 3)), max_size=10),
    st.lists(STATE, max_size=3),
    st.sampled_from([0, 2**60]),
)
def test_the_fold_keeps_each_facts_supports_counted(held, removed, change, stale, big):
    """Over-delete: a held fact of the change goes (out -1 at its rank, from the facts, into the removed
    ones) when no derivation counted below its rank is left; a kept one's counts change in place, and so
    do those of a fact removed earlier in the step; counting, each removal says whether a derivation of
    its fact is left (`KEPT`). Otherwise (H by facts): a held fact's counts change, and it goes when its
    count drops to 0; a fact not held, or removed by the over-delete (its a counted at its t), comes in
    when its count is positive, at 1 + the least rank where its count so far is positive. Every way
    the fold runs (`WAYS`), on rows with stale versions and their removals; with counts too large to pack
    beside the fact (`big` added to the a of the facts held and removed, not to the stale rows'), the stale
    rows are told apart by all their columns."""
    removed = {x: v for x, v in removed.items() if x not in held}
    change = [c for c in change if c[2]]
    at = {x for x, _, _ in change}
    rows = {x: _state(x, r, b, a + big, t) for x, (r, b, a, t) in held.items()}
    gone_rows = {x: _state(x, r, 0, a + big, t) for x, (r, _, a, t) in removed.items()}
    # earlier versions of facts held or removed (with their removals: they cancel)
    old = [_state(x, *v) for x, v in zip([*sorted(rows), *sorted(gone_rows)] * 3, stale, strict=False)]
    by_fact: dict[int, list[tuple[int, int]]] = {}
    for x, s, w in change:
        by_fact.setdefault(x, []).append((s, w))

    # the over-delete: the facts held and the removed ones at the change's facts
    here = [rows[x] for x in sorted(rows) if x in at]
    there = [gone_rows[x] for x in sorted(gone_rows) if x in at]
    parts = [_change(change), _rows(here, [1] * len(here), old), _rows(there, [1] * len(there), old)]
    want: dict[int, set[tuple]] = {OUT: set(), FACTS: set(), REMOVED: set()}
    kept = set()
    for row in here + there:
        new = _applied(row, by_fact[row[0]])
        if row[0] in gone_rows:
            if new != row:
                want[REMOVED] |= {(*row, -1), (*new, 1)}
        elif new[2] <= 0:
            want[OUT].add((row[0], row[1], -1))
            kept.add((row[0], row[1], -1, new[3] > 0))
            want[FACTS].add((*row, -1))
            want[REMOVED].add((*new, 1))
        elif new != row:
            want[FACTS] |= {(*row, -1), (*new, 1)}
    for way in WAYS:
        assert _result(_fold(way, True, parts)) == want, way
        counted = _fold(way, True, parts, count=True).filter(pl.col(TO) == OUT)
        assert set(counted.select("x", RANK, WEIGHT, KEPT).iter_rows()) == kept, way

    # H by facts, in the first evaluation after it: the held facts at the change's, every removed one
    every = list(gone_rows.values())
    parts = [_change(change), _rows(here, [1] * len(here), old), _rows(every, [1] * len(every), old)]
    want = {OUT: set(), FACTS: set(), REMOVED: set()}
    for row in here:
        new = _applied(row, by_fact[row[0]])
        if new[2] + new[3] <= 0:
            want[OUT].add((row[0], row[1], -1))
            want[FACTS].add((*row, -1))
        elif new != row:
            want[FACTS] |= {(*row, -1), (*new, 1)}
    for x in (at | set(gone_rows)) - set(rows):
        lumps = list(by_fact.get(x, []))
        if x in gone_rows and gone_rows[x][3] > 0:
            lumps.append((gone_rows[x][4], gone_rows[x][3]))
        came = _coming(lumps)
        if came is not None:
            want[OUT].add((x, came[0], 1))
            want[FACTS].add((x, *came, 1))
    for way in WAYS:
        assert _result(_fold(way, False, parts)) == want, way


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(
        FACTS_X, st.lists(st.tuples(RANKS, st.integers(1, 3)), min_size=1, max_size=4), max_size=5
    ),
    st.lists(FACTS_X, max_size=2),
    st.booleans(),
)
def test_a_fresh_runs_counts_are_the_folds(derived, left_out, extra):
    """From empty state (`operators/fresh.py`): a fact's counts from all its derivations (at its rank,
    1 + the least of theirs) are what the fold keeps taking them in one change and adding none later.
    The derivations of a fact not given (`left_out`) count for none. By NumPy, by the Polars plans, and
    from a `RowSet`'s tally of them (in two parts), read from its packed keys (`tallied_supports`; with
    a fact outside their layout given too (`extra`), from the tally's frame). A derivation finds its fact
    by a table of the packed facts and by binary search."""
    facts = {x: min(s for s, _ in ds) + 1 for x, ds in derived.items() if x not in left_out}
    counts = _change([(x, s, w) for x, ds in derived.items() for s, w in ds])
    given = _change([(x, r, 1) for x, r in facts.items()])
    want = {(x, *_coming(ds), 1) for x, ds in derived.items() if x in facts}  # type: ignore[misc]
    for way, table in itertools.product(["packed", "plans", "tally"], [True, False]):
        with patch.object(packed_rank_fold, "_DENSE", packed_rank_fold._DENSE if table else 0):
            got, also = _fresh_counts(way, given, counts, extra)
        assert set(got.select("x", RANK, *COUNTS, WEIGHT).iter_rows()) == want | also, (way, table)


def _fresh_counts(
    way: str, given: pl.DataFrame, counts: pl.DataFrame, extra: bool
) -> tuple[pl.DataFrame, set]:
    """The fresh counts of `given` from `counts` (`test_a_fresh_runs_counts_are_the_folds`), `way`, and
    the rows expected beside those of `given` (an `extra` fact's)."""
    also: set[tuple] = set()
    if way == "tally":
        tally = RowSet(pl.Schema({"x": pl.Int64, RANK: pl.Int64}))
        half = counts.height // 2
        for part in (counts.head(half), counts.tail(counts.height - half)):
            tally.count(part.select("x", RANK), part[WEIGHT].to_numpy())
        assert tally.packed_counts() is not None
        if extra:  # a fact outside the tally's layout: read from the counts' frame instead
            given = pl.concat([given, _change([(40, 3, 1)])])
            also.add((40, 3, 0, 0, 2, 1))
        with patch.object(rank_fold, "supports", wraps=supports) as by_frame:
            got = tallied_supports(given, tally, ["x"])
        assert by_frame.call_count == extra
    else:
        off = patch.object(packed_rank_fold.PackedFold, "of", staticmethod(lambda cols, parts, count: None))
        with off if way == "plans" else nullcontext():
            got = supports(given, counts, ["x"])
    return got, also


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(
        st.integers(0, 40), st.lists(st.tuples(RANKS, st.integers(1, 3)), min_size=1, max_size=4), max_size=8
    ),
    st.booleans(),
    st.booleans(),
)
def test_a_fresh_runs_rounds_give_the_folds_counts(derived, table, split):
    """From empty state, a round per rank in rising order (`RowSet.fresh_round`: the round's facts
    sorted and once each, their weights summed, which are new), the facts in the order the rounds made
    them new: `round_supports` gives each fact's counts as the fold would keep them (`_coming`), a
    derivation of an earlier fact found by a table of the packed facts and by binary search. `split`:
    each rank's derivations in two rounds (even facts, then odd), so that ranks do not rise from every
    round to the next and a later round's derivations may rank below its fact."""
    import numpy as np

    from dbspark.columnar.packed_rank_fold import round_supports

    ranks = sorted({s for ds in derived.values() for s, _ in ds})
    first = {x: min(s for s, _ in ds) for x, ds in derived.items()}
    rounds, order, round_ranks, seen = [], [], [], set()
    for r in ranks:
        for part in (0, 1) if split else (None,):
            sums: dict[int, int] = {}
            for x, ds in derived.items():
                for i, (s, w) in enumerate(ds):
                    if s == r and (part is None or i % 2 == part):
                        sums[x] = sums.get(x, 0) + w
            keys = np.array(sorted(sums), dtype=np.int64)
            new = np.array([x not in seen for x in keys.tolist()], dtype=bool)
            seen |= set(keys.tolist())
            rounds.append((keys, np.array([sums[x] for x in keys.tolist()], dtype=np.int64), new))
            round_ranks.append(r)
            order += keys[new].tolist()
    given = _change([(x, first[x] + 1, 1) for x in order])
    with patch.object(packed_rank_fold, "_DENSE", packed_rank_fold._DENSE if table else 0):
        got = round_supports(given, ["x"], rounds, round_ranks)
    want = {(x, *_coming(ds), 1) for x, ds in derived.items()}  # type: ignore[misc]
    rows = got.select("x", RANK, *COUNTS, WEIGHT).rows()
    assert len(rows) == len(want) and set(rows) == want
