"""`columnar.plans.semi_join` against Polars' own semi-join, on random keys with NULLs and duplicates, one
integer key or two (packed into one integer when their offsets fit 63 bits)."""

from __future__ import annotations

from typing import Any

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from dbspark.columnar.plans import semi_join

INT_TYPES = [pl.Int8(), pl.Int64(), pl.UInt32(), pl.UInt64()]


@st.composite
def frames(draw: st.DrawFn) -> dict[str, Any]:
    dtype = draw(st.sampled_from(INT_TYPES))
    lo, hi = (0, 6) if not dtype.is_signed_integer() else (-3, 3)
    if dtype == pl.UInt64():  # values past 2**63 (no int64 view of them)
        lo, hi = 2**64 - 4, 2**64 - 1
    value = st.integers(lo, hi)
    if draw(st.booleans()):
        value = st.one_of(st.none(), value)
    two = draw(st.booleans())  # a second key column: packed beside the first, or past 63 bits Polars'
    second = st.integers(0, 2)
    if draw(st.booleans()):  # offsets of up to 63 bits (packed) or wider (Polars' semi-join)
        span = draw(st.sampled_from([2**59, 2**61, 2**62]))
        second = st.one_of(st.integers(0, 2), st.just(-span), st.just(span))
    rows = draw(st.lists(st.tuples(value, second), max_size=12))
    probe = draw(st.lists(st.tuples(value, second), max_size=8))
    schema = {"k": dtype, "j": pl.Int64(), "v": pl.Int64()}
    df = pl.DataFrame([(k, j, i) for i, (k, j) in enumerate(rows)], schema=schema, orient="row")
    pk = pl.DataFrame(probe, schema={"k": dtype, "j": pl.Int64()}, orient="row")
    return {"df": df, "probe": pk if two else pk.select("k"), "keys": ["k", "j"] if two else ["k"]}


@settings(max_examples=300, deadline=None)
@given(frames(), st.booleans())
def test_semi_join_equals_polars(f: dict[str, Any], exact: bool) -> None:
    got = semi_join(f["df"], f["probe"], f["keys"], exact)
    want = f["df"].join(f["probe"], on=f["keys"], how="semi", nulls_equal=exact)
    assert got.schema == f["df"].schema
    assert got.sort("v").equals(want.sort("v"))


def test_semi_join_of_one_integer_key_keeps_the_rows_order() -> None:
    df = pl.DataFrame({"k": [5, 1, 5, 9, 2], "v": [0, 1, 2, 3, 4]})
    probe = pl.DataFrame({"k": [9, 5, 5]})
    assert semi_join(df, probe, ["k"], True)["v"].to_list() == [0, 2, 3]
    assert semi_join(df, probe.clear(), ["k"], True).height == 0
    assert semi_join(df.clear(), probe, ["k"], True).height == 0
