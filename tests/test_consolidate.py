"""Consolidation (`algebra/consolidate.py`) against a plain Polars group-by, on generated frames.

The fast paths (rows hashed first; equal integer rows summed in hash order by NumPy) must give exactly
the group-by's rows and weights: with repeats and without, NULLs, -0.0 and NaN, strings, dates, large
weights, several weight columns, and hashes forced to collide (a weak hash stands in for `key_hash`,
so that different rows share a hash and the exact fallbacks run)."""

from __future__ import annotations

import datetime as dt

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dbspark.algebra import consolidate as cons
from dbspark.algebra.consolidate import WEIGHT, consolidate_frame
from dbspark.algebra.weights import checked_mul
from dbspark.errors import WeightError

_COLUMNS = {
    "i": (pl.Int64, st.one_of(st.none(), st.integers(-3, 3))),
    "u": (pl.UInt8, st.integers(0, 3)),
    "f": (pl.Float64, st.sampled_from([0.0, -0.0, float("nan"), 1.5, None])),
    "s": (pl.String, st.sampled_from(["", "a", "b", None])),
    "d": (pl.Date, st.sampled_from([dt.date(2020, 1, 1), dt.date(1969, 12, 31)])),
    "b": (pl.Boolean, st.booleans()),
    "m": (pl.Decimal(38, 2), st.sampled_from([None, 1, 2])),
}


def _norm(v: object) -> object:
    if isinstance(v, float):
        return "nan" if v != v else v + 0.0  # -0.0 + 0.0 is 0.0
    return v


def _as_dict(df: pl.DataFrame, weight_cols: list[str], exact: bool = True) -> dict:
    """{row: weight sums}, summed in Python (exact); `exact` asserts every row is there once."""
    data = [c for c in df.columns if c not in weight_cols]
    out: dict = {}
    for row in df.iter_rows(named=True):
        key = tuple(_norm(row[c]) for c in data)
        assert not exact or key not in out, f"a row left twice: {key}"
        assert not exact or any(row[c] for c in weight_cols), f"a row of weight 0 left: {key}"
        old = out.get(key, (0,) * len(weight_cols))
        out[key] = tuple(o + row[c] for o, c in zip(old, weight_cols, strict=True))
    return {k: v for k, v in out.items() if any(v)}


@st.composite
def frames(draw: st.DrawFn) -> tuple[pl.DataFrame, list[str]]:
    names = draw(st.lists(st.sampled_from(sorted(_COLUMNS)), min_size=1, max_size=3, unique=True))
    n = draw(st.integers(0, 40))
    cols = {c: draw(st.lists(_COLUMNS[c][1], min_size=n, max_size=n)) for c in names}
    big = draw(st.booleans())
    weights = st.integers(-(2**61), 2**61) if big else st.integers(-2, 2)
    cols[WEIGHT] = draw(st.lists(weights, min_size=n, max_size=n))
    schema = {c: _COLUMNS[c][0] for c in names} | {WEIGHT: pl.Int64}
    weight_cols = [WEIGHT]
    if draw(st.booleans()):  # a second summed column (an accumulator trace's shape)
        cols["__c"] = draw(st.lists(st.integers(-2, 2), min_size=n, max_size=n))
        schema["__c"] = pl.Int64
        weight_cols.append("__c")
    return pl.DataFrame(cols, schema=schema), weight_cols


def _check(df: pl.DataFrame, weight_cols: list[str], few_repeats: bool = True) -> None:
    want = _as_dict(df, weight_cols, exact=False)
    if any(not -(2**63) <= w[0] < 2**63 for w in want.values()):
        with pytest.raises(WeightError):
            consolidate_frame(df, weight_cols, few_repeats)
        return
    got = consolidate_frame(df, weight_cols, few_repeats)
    assert got.columns == df.columns and got.schema == df.schema
    assert _as_dict(got, weight_cols) == want


@settings(max_examples=300, deadline=None)
@given(frames(), st.booleans())
def test_consolidation_equals_a_group_by(frame: tuple[pl.DataFrame, list[str]], few: bool) -> None:
    df, weight_cols = frame
    _check(df, weight_cols, few)


@settings(max_examples=200, deadline=None)
@given(frames())
def test_consolidation_with_colliding_hashes(frame: tuple[pl.DataFrame, list[str]]) -> None:
    """Every row hashes into 3 values: different rows share hashes, interleaved in hash order."""
    df, weight_cols = frame
    real = cons.key_hash
    mp = pytest.MonkeyPatch()
    mp.setattr(cons, "key_hash", lambda d, k: real(d, k) % np.uint64(3))
    try:
        _check(df, weight_cols)
    finally:
        mp.undo()


def test_a_row_cancelled_and_an_overflow() -> None:
    df = pl.DataFrame({"k": [1, 1, 2, 3], WEIGHT: [1, -1, 5, 2**62]})
    assert consolidate_frame(df).sort("k").rows() == [(2, 5), (3, 2**62)]
    over = pl.DataFrame({"k": [1, 1], WEIGHT: [2**62, 2**62]})
    with pytest.raises(WeightError):
        consolidate_frame(over)


_INTS = [pl.Int8, pl.Int16, pl.Int32, pl.Int64, pl.UInt8, pl.UInt16, pl.UInt32, pl.UInt64]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.one_of(st.none(), st.integers(-(2**63), 2**64 - 1)), max_size=40),
    st.sampled_from(_INTS),
)
def test_an_integer_hash_is_a_function_of_the_value_alone(values: list, dtype: pl.DataType) -> None:
    """`column_hash` of an integer column by NumPy: a value hashes the same in a column with NULLs or
    without, alone or among others, and in every integer type that holds it (a trace's batches and the
    probes that seek them are hashed apart, some with NULLs, some without); distinct values of a column
    hash apart (splitmix64's finalizer is a bijection of 64 bits)."""
    info = np.iinfo(_np_type(dtype))
    vals = [v for v in values if v is None or info.min <= v <= info.max]
    s = pl.Series(vals, dtype=dtype)
    h = cons.column_hash(s)
    assert h.dtype == np.uint64 and len(h) == len(vals)
    for v, hv in zip(vals, h, strict=True):
        alone = cons.column_hash(pl.Series([v], dtype=dtype))[0]
        assert hv == alone
        if v is not None:
            for other in _INTS:
                o = np.iinfo(_np_type(other))
                if o.min <= v <= o.max and (v >= 0 or other != pl.UInt64):
                    assert cons.column_hash(pl.Series([v], dtype=other))[0] == hv
    distinct = {v for v in vals if v is not None}
    assert len({int(x) for v, x in zip(vals, h, strict=True) if v is not None}) == len(distinct)


def _np_type(dtype: pl.DataType) -> type:
    return {
        pl.Int8: np.int8,
        pl.Int16: np.int16,
        pl.Int32: np.int32,
        pl.Int64: np.int64,
        pl.UInt8: np.uint8,
        pl.UInt16: np.uint16,
        pl.UInt32: np.uint32,
        pl.UInt64: np.uint64,
    }[dtype]


def test_a_long_integer_column_hashes_as_its_values_alone() -> None:
    """A column longer than `column_hash`'s slices (hashed slice by slice) gives each value the hash it
    has alone, NULLs too."""
    rng = np.random.default_rng(5)
    vals = rng.integers(-(2**40), 2**40, 3 * cons._SLICE + 7).tolist()
    vals[5] = vals[-1] = None
    s = pl.Series(vals, dtype=pl.Int64)
    h = cons.column_hash(s)
    for i in [0, 5, cons._SLICE - 1, cons._SLICE, 2 * cons._SLICE + 3, len(vals) - 2, len(vals) - 1]:
        assert h[i] == cons.column_hash(s.slice(i, 1))[0]


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 3 * cons._PACKED),
    st.sampled_from(["mixed", "repeated", "high bits shared", "a few sharing high bits", "descending"]),
    st.integers(0, 2**32),
)
def test_hashes_are_ordered_as_a_stable_sort_orders_them(n: int, kind: str, seed: int) -> None:
    """`hash_order` and `sorted_by_hash` (positions packed into the hashes' low bits past `_PACKED`):
    the order of NumPy's stable argsort, for well-mixed hashes, many repeated ones, hashes equal in
    their high bits and different below (the packed sort leaves those in the order of their
    positions, to be sorted again: many, or a few among well-mixed ones), and hashes in descending
    order."""
    rng = np.random.default_rng(seed)
    if kind == "mixed":
        h = rng.integers(0, 2**64 - 1, n, dtype=np.uint64)
    elif kind == "repeated":
        h = rng.integers(0, 7, n).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    elif kind == "a few sharing high bits":  # well-mixed, a few hashes given another's high bits
        h = rng.integers(0, 2**64 - 1, n, dtype=np.uint64)
        src, dst = rng.integers(0, n, max(1, n // 50)), rng.integers(0, n, max(1, n // 50))
        h[dst] = (h[src] & ~np.uint64(0xFFFFFF)) | rng.integers(0, 1 << 24, len(dst)).astype(np.uint64)
    elif kind == "high bits shared":
        h = (rng.integers(0, 5, n).astype(np.uint64) << np.uint64(50)) | rng.integers(0, 1 << 16, n).astype(
            np.uint64
        )
    else:
        h = np.sort(rng.integers(0, 2**64 - 1, n, dtype=np.uint64))[::-1].copy()
    want = np.argsort(h, kind="stable")
    assert cons.hash_order(h).tolist() == want.tolist()
    df = pl.DataFrame({"i": np.arange(n)})
    rows, hs = cons.sorted_by_hash(df, h)
    assert rows["i"].to_list() == want.tolist()
    assert hs.tolist() == h[want].tolist()


_WEIGHTS = st.one_of(
    st.integers(-3, 3),
    st.sampled_from([2**31, -(2**31), 2**32 + 1, 3037000499, 3037000500, 2**62, -(2**63), 2**63 - 1]),
)


@given(st.lists(st.tuples(_WEIGHTS, _WEIGHTS), min_size=1, max_size=8))
def test_a_product_of_weights_is_exact_or_refused(pairs: list[tuple[int, int]]) -> None:
    """`checked_mul` (a join's weights): every product exact when it returns; refused (WeightError)
    when one leaves int64, and only near that (its float check's margin, 9.2e18); the magnitudes'
    shortcut must not let a wrapped product through."""
    a = np.array([x for x, _ in pairs], dtype=np.int64)
    b = np.array([y for _, y in pairs], dtype=np.int64)
    exact = [x * y for x, y in pairs]
    try:
        got = checked_mul(a, b)
    except WeightError:
        assert max(abs(p) for p in exact) > 9.2e18
    else:
        assert got.tolist() == exact


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(["int64", "uint64", "int32", "bool", "float64"]),
    st.lists(st.integers(-(2**63), 2**64 - 1), max_size=60),
    st.integers(1, 5),
)
def test_sorted_unique_is_numpy_s_unique(dtype: str, values: list[int], spread: int) -> None:
    """`sorted_unique` (a sort for integers, in place of NumPy 2.4's hashing unique): NumPy's unique,
    for signed, unsigned, narrow and bool arrays with repeats, and floats with NaNs (once)."""
    info = np.iinfo(dtype) if dtype not in ("bool", "float64") else None
    vals = [v % spread if info is None else min(max(v // spread, info.min), info.max) for v in values]
    a = np.array(vals, dtype=np.float64 if dtype == "float64" else dtype)
    if dtype == "float64" and len(a):
        a[:: max(1, len(a) // 3)] = np.nan
    got, want = cons.sorted_unique(a), np.unique(a)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)  # (NaN equal to NaN)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-5, 5), max_size=20), st.lists(st.integers(-5, 5), max_size=20))
def test_sorted_member_is_set_membership(keys: list[int], among: list[int]) -> None:
    """`sorted_member`: which keys (in any order, repeated) are in a sorted array (repeated, or empty)."""
    got = cons.sorted_member(np.array(keys, dtype=np.int64), np.sort(np.array(among, dtype=np.int64)))
    assert got.tolist() == [k in set(among) for k in keys]
