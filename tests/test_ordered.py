"""OrderedMultiset against a naive oracle (a dict of counts): order statistics, mode, atomic updates.

Local engine only, on purpose: `dbspark.trace.ordered.OrderedMultiset` is a data structure of the
local engine's ordered aggregates (MEDIAN, MODE, ...), tested here directly, without a circuit. The
aggregates themselves run on both engines in tests/test_aggregates_duckdb.py and tests/test_median_exact.py."""

from __future__ import annotations

import pickle
import random
from bisect import bisect_right
from datetime import date, timedelta
from decimal import Decimal
from itertools import accumulate

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dbspark.errors import NegativeStateError
from dbspark.trace.ordered import NegativeMultiplicityError, OrderedMultiset


class Tiny(OrderedMultiset):
    """Nodes of at most 4 entries: a few dozen values already make a tree of several levels."""

    _LEAF_MAX = 4
    _LEAF_MIN = 2
    _NODE_MAX = 4
    _NODE_MIN = 2


class Thin(OrderedMultiset):
    """The smallest legal nodes: leaves of 1-3 values, internal nodes of 2-3 children."""

    _LEAF_MAX = 3
    _LEAF_MIN = 1
    _NODE_MAX = 3
    _NODE_MIN = 2


CLASSES = [OrderedMultiset, Tiny, Thin]
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class Oracle:
    """The specification: a dict of positive counts, everything else computed by sorting."""

    def __init__(self) -> None:
        self.counts: dict = {}

    def add(self, value, weight: int) -> None:
        c = self.counts.get(value, 0) + weight
        if c < 0:
            raise NegativeMultiplicityError(value, c)
        if c:
            self.counts[value] = c
        else:
            self.counts.pop(value, None)

    def items(self) -> list:
        return sorted(self.counts.items())

    def total(self) -> int:
        return sum(self.counts.values())

    def mode(self):
        top = max(self.counts.values())
        return min(v for v, c in self.counts.items() if c == top)


def assert_same(ms: OrderedMultiset, oracle: Oracle, probes=()) -> None:
    ms._check_invariants()
    items = oracle.items()
    prefix = list(accumulate(c for _, c in items))

    def kth(k: int):
        return items[bisect_right(prefix, k)][0]

    assert list(ms.items()) == items
    assert ms.to_state() == ([v for v, _ in items], [c for _, c in items])
    n = oracle.total()
    assert len(ms) == n
    assert bool(ms) == (n > 0)
    assert ms.distinct_count() == len(items)
    for v in probes:
        assert ms.count(v) == oracle.counts.get(v, 0)
        assert (v in ms) == (v in oracle.counts)
    if not n:
        assert ms.min() is ms.max() is ms.median_low() is ms.median_high() is ms.mode() is None
        return
    assert ms.min() == items[0][0]
    assert ms.max() == items[-1][0]
    assert ms.median_low() == kth((n - 1) // 2)
    assert ms.median_high() == kth(n // 2)
    assert ms.mode() == oracle.mode()
    if n <= 100:  # small: every k against the sorted expansion
        expanded = [v for v, c in items for _ in range(c)]
        assert [ms.kth(k) for k in range(n)] == expanded
    else:
        for k in {0, 1, n // 3, n // 2, n - 2, n - 1}:
            assert ms.kth(k) == kth(k)
    with pytest.raises(IndexError):
        ms.kth(n)
    with pytest.raises(IndexError):
        ms.kth(-1)


# A weight: small, or huge, or a delete resolved against the current count ("all" of it, or more than
# there is by 1 or by 10**12).
WEIGHTS = st.one_of(
    st.integers(-3, 3),
    st.sampled_from([10**12, -(10**12), "all", "all", "all+1", "all+huge"]),
)


def entries(values: st.SearchStrategy) -> st.SearchStrategy:
    """One change, drawn independently of the state and resolved against it by `resolve`."""
    reuse = st.one_of(st.none(), st.integers(0, 63))  # an index into the values seen so far
    return st.tuples(values, reuse, WEIGHTS)


def ops(values: st.SearchStrategy, max_steps: int) -> st.SearchStrategy:
    """Steps of one `add` or one `update` batch of 0-12 changes (the same value may repeat in it)."""
    return st.lists(
        st.one_of(
            st.tuples(st.just("add"), st.lists(entries(values), min_size=1, max_size=1)),
            st.tuples(st.just("update"), st.lists(entries(values), max_size=12)),
        ),
        min_size=max_steps // 2,  # long enough runs for trees of several levels to grow and shrink
        max_size=max_steps,
    )


def resolve(entry, seen: list, counts: dict) -> tuple:
    """The (value, weight) of an entry, given the values seen so far and the current counts."""
    value, reuse, weight = entry
    if reuse is not None and seen:
        value = seen[reuse % len(seen)]
    current = counts.get(value, 0)
    if isinstance(weight, str):
        weight = {"all": -current, "all+1": -current - 1, "all+huge": -current - 10**12}[weight]
    return value, weight


def run_ops(cls, steps) -> None:
    ms, oracle = cls(), Oracle()
    seen: list = []
    for op, batch in steps:
        changes = []
        for entry in batch:  # `seen` grows as we go, so a batch can repeat its own values
            value, weight = resolve(entry, seen, oracle.counts)
            changes.append((value, weight))
            seen.append(value)
        net: dict = {}
        for v, w in changes:
            net[v] = net.get(v, 0) + w
        ok = all(oracle.counts.get(v, 0) + w >= 0 for v, w in net.items())
        before = list(ms.items())
        if not ok:
            with pytest.raises(NegativeMultiplicityError) as err:
                if op == "add":
                    ms.add(*changes[0])
                else:
                    ms.update([v for v, _ in changes], [w for _, w in changes])
            assert oracle.counts.get(err.value.value, 0) + net[err.value.value] == err.value.count < 0
            assert list(ms.items()) == before  # atomic: nothing applied
        else:
            if op == "add":
                ms.add(*changes[0])
            else:
                ms.update([v for v, _ in changes], [w for _, w in changes])
            for v, w in net.items():
                oracle.add(v, w)
        assert_same(ms, oracle, probes=seen[-5:])


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
@SETTINGS
@given(steps=ops(st.integers(-20, 20), max_steps=60))
def test_ints_against_oracle(cls, steps):
    run_ops(cls, steps)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
@SETTINGS
@given(steps=ops(st.text(alphabet="abcd", max_size=3), max_steps=40))
def test_strings_against_oracle(cls, steps):
    run_ops(cls, steps)


@pytest.mark.parametrize("cls", [Tiny, Thin], ids=lambda c: c.__name__)
@SETTINGS
@given(steps=ops(st.integers(-(10**6), 10**6), max_steps=60))
def test_wide_value_range_in_small_nodes(cls, steps):
    run_ops(cls, steps)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_random_churn_against_oracle(cls):
    """Long random runs: values go to zero and come back, the tree grows and shrinks."""
    rng = random.Random(42)
    ms, oracle = cls(), Oracle()
    for step in range(3000):
        v = rng.randrange(400 if step < 2000 else 40)  # later steps drain most values
        cur = oracle.counts.get(v, 0)
        w = -cur if cur and rng.random() < 0.6 else rng.choice([1, 2, 3, 10**12])
        ms.add(v, w)
        oracle.add(v, w)
        if step % 100 == 0:
            assert_same(ms, oracle, probes=[v, v + 1])
    for v in list(oracle.counts):
        ms.add(v, -oracle.counts[v])
        oracle.add(v, -oracle.counts[v])
    assert_same(ms, oracle)
    ms.add(7, 3)  # usable again after being emptied
    oracle.add(7, 3)
    assert_same(ms, oracle, probes=[7])


def test_empty():
    ms = OrderedMultiset()
    assert len(ms) == 0 and ms.distinct_count() == 0 and not ms
    assert ms.min() is None and ms.max() is None and ms.mode() is None
    assert ms.median_low() is None and ms.median_high() is None
    assert list(ms.items()) == [] and ms.to_state() == ([], [])
    assert ms.count(3) == 0
    with pytest.raises(IndexError):
        ms.kth(0)


def test_weight_zero_is_a_noop():
    ms = OrderedMultiset()
    ms.add(5, 0)
    ms.update([6, 6], [2, -2])
    assert list(ms.items()) == [] and ms.distinct_count() == 0
    ms.add(5, 2)
    ms.add(5, 0)
    assert list(ms.items()) == [(5, 2)]


def test_none_is_refused():
    ms = OrderedMultiset()
    with pytest.raises(TypeError, match="None"):
        ms.add(None, 1)
    with pytest.raises(TypeError):
        ms.update([1, None], [1, 1])
    assert list(ms.items()) == []


def test_weights_must_be_integers():
    ms = OrderedMultiset()
    with pytest.raises(TypeError):
        ms.add(1, 1.5)
    with pytest.raises(TypeError):
        ms.update([1, 2], [1, 0.5])
    assert list(ms.items()) == []
    with pytest.raises(ValueError):
        ms.update([1, 2], [1])


def test_medians_and_kth_with_huge_multiplicities():
    ms = OrderedMultiset()
    ms.update(["b", "a", "c"], [10**12, 10**12, 1])
    assert len(ms) == 2 * 10**12 + 1
    assert ms.median_low() == ms.median_high() == "b"
    assert ms.kth(10**12 - 1) == "a" and ms.kth(10**12) == "b" and ms.kth(2 * 10**12) == "c"
    ms.add("c", 1)  # n even: both middle positions are still copies of b
    assert ms.median_low() == "b" and ms.median_high() == "b"
    ms.add("a", -1)
    assert (ms.median_low(), ms.median_high()) == ("b", "b")
    ms2 = OrderedMultiset()
    ms2.update([1, 2], [10**12, 10**12])
    assert (ms2.median_low(), ms2.median_high()) == (1, 2)
    assert ms2.mode() == 1


def test_mode_ties_go_to_the_smallest_value():
    ms = Tiny()
    for v in range(30, 0, -1):
        ms.add(v, 2)
    assert ms.mode() == 1
    ms.add(17, 1)
    assert ms.mode() == 17
    ms.add(23, 1)
    assert ms.mode() == 17
    ms.add(17, -1)
    assert ms.mode() == 23
    ms.add(23, -1)
    assert ms.mode() == 1
    ms.add(1, -2)
    assert ms.mode() == 2
    ms.add(40, 10**12)
    assert ms.mode() == 40
    ms.add(40, -(10**12))
    assert ms.mode() == 2
    ms._check_invariants()


def test_negative_add_is_rejected_and_changes_nothing():
    ms = Tiny()
    ms.update(list(range(20)), [1] * 20)
    before = list(ms.items())
    with pytest.raises(NegativeMultiplicityError) as err:
        ms.add(5, -2)
    assert "5" in str(err.value) and "-1" in str(err.value)
    assert isinstance(err.value, ValueError) and isinstance(err.value, NegativeStateError)
    with pytest.raises(NegativeMultiplicityError, match="100"):
        ms.add(100, -1)  # absent value
    with pytest.raises(NegativeMultiplicityError):
        ms.add(-100, -1)  # below the minimum
    assert list(ms.items()) == before
    ms._check_invariants()
    copy = pickle.loads(pickle.dumps(err.value))
    assert (copy.value, copy.count, str(copy)) == (err.value.value, err.value.count, str(err.value))


def test_negative_update_is_atomic():
    ms = Tiny()
    ms.update(list(range(0, 40, 2)), [3] * 20)
    before = list(ms.items())
    state = ms.to_state()
    # many valid changes (inserts that split leaves, deletes that merge them), then one invalid
    values = list(range(1, 40, 2)) + list(range(0, 20, 2)) + [38]
    weights = [5] * 20 + [-3] * 10 + [-4]
    with pytest.raises(NegativeMultiplicityError, match="38"):
        ms.update(values, weights)
    assert list(ms.items()) == before and ms.to_state() == state
    assert len(ms) == 60 and ms.distinct_count() == 20
    ms._check_invariants()
    # the same value several times: summed first, so +2 then -3 on an absent value fails...
    with pytest.raises(NegativeMultiplicityError):
        ms.update([1, 1], [2, -3])
    # ...while -3 then +4 on a value of count 0 is fine
    ms.update([1, 1], [-3, 4])
    assert ms.count(1) == 1
    # an incomparable value fails after others were applied: rolled back too
    with pytest.raises(TypeError):
        ms.update([5, 7, "x"], [1, 1, 1])
    assert ms.count(5) == 0 and ms.count(7) == 0
    ms._check_invariants()


def test_to_state_from_state_round_trip():
    rng = random.Random(3)
    for cls in CLASSES:
        for n in (0, 1, 2, 3, 4, 5, 17, 64, 65, 500, 3000):
            values = sorted(rng.sample(range(10**6), n))
            counts = [rng.choice([1, 2, 10**12]) for _ in values]
            ms = cls.from_state(values, counts)
            assert type(ms) is cls
            ms._check_invariants()
            assert ms.to_state() == (values, counts)
            again = cls.from_state(*ms.to_state())
            assert list(again.items()) == list(ms.items())
            # the rebuilt tree keeps working under changes
            oracle = Oracle()
            for v, c in zip(values, counts, strict=True):
                oracle.add(v, c)
            for v in values[::2]:
                again.add(v, -oracle.counts[v])
                oracle.add(v, -oracle.counts[v])
            for v in range(0, 10**6, 10**6 // 50):
                again.add(v, 1)
                oracle.add(v, 1)
            assert_same(again, oracle)


def test_from_state_accepts_unsorted_duplicate_and_zero_entries():
    ms = OrderedMultiset.from_state([3, 1, 3, 2], [1, 2, 4, 0])
    assert list(ms.items()) == [(1, 2), (3, 5)]
    ms = OrderedMultiset.from_state([1, 2, 2, 3], [1, 1, 1, 1])  # sorted, but not strictly
    assert list(ms.items()) == [(1, 1), (2, 2), (3, 1)]
    ms._check_invariants()
    with pytest.raises(NegativeMultiplicityError):
        OrderedMultiset.from_state([1, 2], [1, -1])
    with pytest.raises(ValueError):
        OrderedMultiset.from_state([1, 2], [1])


def test_other_comparable_types():
    ms = Tiny()
    days = [date(2024, 1, 1) + timedelta(days=d) for d in range(10)]
    ms.update(days[::-1], list(range(1, 11)))
    assert ms.min() == days[0] and ms.max() == days[-1] and ms.mode() == days[0]
    assert ms.median_low() == days[3]  # counts 10, 9, 8 cover positions 0..26; k = (55 - 1) // 2 = 27
    dec = OrderedMultiset()
    dec.update([Decimal("1.5"), Decimal("0.1"), Decimal("2")], [1, 1, 1])
    assert dec.median_low() == Decimal("1.5")
    mixed = OrderedMultiset()  # numbers that compare equal are one value
    mixed.add(1, 2)
    mixed.add(1.0, -1)
    mixed.add(0.5, 1)
    assert list(mixed.items()) == [(0.5, 1), (1, 1)]


def test_big_blocks_insert_then_delete_half():
    """50k distinct values in the default node sizes, then half of them deleted."""
    rng = random.Random(7)
    values = rng.sample(range(10**7), 50_000)
    ms, oracle = OrderedMultiset(), Oracle()
    for i, v in enumerate(values):
        w = rng.choice([1, 1, 2, 5, 10**12])
        ms.add(v, w)
        oracle.add(v, w)
        if i in (1_000, 25_000):
            assert_same(ms, oracle, probes=values[:20])
    assert_same(ms, oracle, probes=values[:20] + [-1, 10**7])
    assert ms._height >= 2
    doomed = values[: len(values) // 2]
    rng.shuffle(doomed)
    for i, v in enumerate(doomed):
        ms.add(v, -oracle.counts[v])
        oracle.add(v, -oracle.counts[v])
        if i == 12_000:
            assert_same(ms, oracle, probes=doomed[i - 10 : i + 10])
    assert_same(ms, oracle, probes=doomed[:20] + values[-20:])
    assert ms.distinct_count() == 25_000
    ms.update(doomed, [1] * len(doomed))  # bring them all back in one update
    for v in doomed:
        oracle.add(v, 1)
    assert_same(ms, oracle, probes=doomed[:20])
