"""Joins through a key index (`columnar/key_index.py`): a Z-set joined again and again by the same keys
is indexed at its `BUILD_AT`-th join and probed after; every join equals Polars' (weights multiplied,
NULL keys never matching, keys past the indexed range, both sides, several key columns, ranges too wide
to pack)."""

from __future__ import annotations

from typing import Any

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from dbspark.algebra.zset import WEIGHT, ZSet
from dbspark.columnar import key_index
from dbspark.columnar.key_index import BUILD_AT, KeyIndex
from dbspark.engines.local.kernel import LocalKernel

SPANS = st.sampled_from([1, 3, 40, 1 << 20, 1 << 40])
BASES = st.sampled_from([0, -7, 1 << 50])


@st.composite
def frames(draw: Any, prefix: str, keys: int, span: int, base: int, max_rows: int) -> pl.DataFrame:
    n = draw(st.integers(0, max_rows))
    value = (
        st.one_of(st.none(), st.integers(base - 2, base + span + 1))
        if draw(st.booleans())
        else (st.integers(base, base + span - 1))
    )
    cols: dict[str, Any] = {
        f"{prefix}{i}": draw(st.lists(value, min_size=n, max_size=n)) for i in range(keys)
    }
    cols[f"{prefix}v"] = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    w = st.sampled_from([1, 1, 1, -1, 2, 1 << 30]) if draw(st.booleans()) else st.just(1)
    cols[WEIGHT] = draw(st.lists(w, min_size=n, max_size=n))
    schema = {c: pl.Int64 for c in cols}
    if draw(st.booleans()) and span < (1 << 30) and base == 0:
        schema[f"{prefix}0"] = pl.Int32  # (a probe of another integer type)
    return pl.DataFrame(cols, schema=schema)


def bag(z: ZSet) -> dict[tuple, int]:
    out: dict[tuple, int] = {}
    for *row, w in z.df.iter_rows():
        out[tuple(row)] = out.get(tuple(row), 0) + w
    return {r: w for r, w in out.items() if w}


@settings(max_examples=60, deadline=None)
@given(st.data(), st.integers(1, 2), SPANS, BASES, st.booleans(), st.booleans())
def test_joins_through_an_index_equal_polars_joins(
    data: Any, keys: int, span: int, base: int, on_left: bool, keep_right: bool
) -> None:
    static = ZSet(data.draw(frames("s", keys, span, base, 300)), consolidated=True)
    k = LocalKernel()
    sk, pk = [f"s{i}" for i in range(keys)], [f"p{i}" for i in range(keys)]
    hits = 0
    for _ in range(BUILD_AT + 2):
        probe = ZSet(data.draw(frames("p", keys, span, base, 40)), consolidated=True)
        if on_left:  # (no right column kept: a semi-join's shape)
            args: tuple = (static, probe, sk, pk, [("pv", "pv"), ("p0", "key")] if keep_right else [])
        else:
            args = (probe, static, pk, sk, [("sv", "sv"), ("s0", "key")] if keep_right else [])
        want = _polars_join(*args)
        joined = key_index.indexed_join(*args)
        if joined is not None:
            hits += 1
            assert joined.df.columns == want.df.columns
            assert bag(joined) == bag(want)
        assert bag(k.join(*args)) == bag(want)
    built = (static.probes or {}).get(tuple(sk))
    if built is not None and not isinstance(built, int) and len(static) > 40:
        assert hits  # (an index built is probed by every change smaller than the indexed side)


def _polars_join(a: ZSet, b: ZSet, lk: list[str], rk: list[str], right_out: list[tuple[str, str]]) -> ZSet:
    r = b.df.select(
        [pl.col(k).alias(f"__k{i}") for i, k in enumerate(rk)]
        + [pl.col(s).alias(d) for s, d in right_out]
        + [pl.col(WEIGHT).alias("__wr")]
    )
    j = a.df.join(r, left_on=lk, right_on=[f"__k{i}" for i in range(len(rk))], how="inner")
    data = [c for c in a.df.columns if c != WEIGHT] + [d for _, d in right_out]
    return ZSet(j.select([*data, (pl.col(WEIGHT) * pl.col("__wr")).alias(WEIGHT)]))


def test_keys_that_cannot_be_indexed_are_left_to_polars() -> None:
    wide = pl.DataFrame({"a": [0, 1 << 40], "b": [0, 1 << 40]})
    assert KeyIndex.build(wide, ["a", "b"]) is None  # (80 bits)
    assert KeyIndex.build(pl.DataFrame({"a": [1, None]}), ["a"]) is None
    assert KeyIndex.build(pl.DataFrame({"a": ["x", "y"]}), ["a"]) is None
    index = KeyIndex.build(pl.DataFrame({"a": [3, 5, 3]}), ["a"])
    assert index is not None
    assert index.probe(pl.DataFrame({"a": ["x"]}), ["a"]) is None
    left, right = index.probe(pl.DataFrame({"a": [5, 3, 4, 9, -1]}), ["a"])  # type: ignore[misc]
    assert sorted(zip(left.tolist(), right.tolist(), strict=True)) == [(0, 1), (1, 0), (1, 2)]
