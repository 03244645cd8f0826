"""The change between two sets of rows by their packed keys (`columnar/set_change.py`), against Python
sets: integer, string and date columns, NULLs, values too wide to pack, rows repeated in the old set
or (refused) in the new one, by a bool per key and by sorting."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from typing import Any

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dbspark.algebra.consolidate import WEIGHT
from dbspark.columnar import set_change as sc

SCHEMAS = {
    "ints": pl.Schema({"x": pl.Int64(), "y": pl.Int64()}),
    "strings": pl.Schema({"x": pl.Int64(), "s": pl.String()}),
    "dates": pl.Schema({"d": pl.Date(), "x": pl.Int32()}),
}


def values(t: pl.DataType, wide: bool) -> st.SearchStrategy:
    if t == pl.String():
        return st.one_of(st.none(), st.sampled_from(["a", "b", "ca", ""]))
    if t == pl.Date():
        return st.dates(dt.date(1999, 12, 25), dt.date(2000, 1, 5))
    if t == pl.Int32():
        return st.integers(-3, 6)
    big = st.sampled_from([-(2**62), 2**62]) if wide else st.integers(-4, 9)
    return st.one_of(st.integers(-4, 9), big, st.none()) if wide else st.integers(-4, 9)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
@pytest.mark.parametrize("way", ["bools", "sort"])
@settings(max_examples=60, deadline=None)
@given(data=st.data(), wide=st.booleans())
def test_the_change_is_the_sets_difference(name: str, way: str, data: Any, wide: bool) -> None:
    schema = SCHEMAS[name]
    row = st.tuples(*(values(t, wide) for t in schema.values()))
    new_rows = data.draw(st.lists(row, max_size=30))
    old_rows = data.draw(
        st.lists(st.one_of(row, st.sampled_from(new_rows) if new_rows else row), max_size=30)
    )
    new = pl.DataFrame(new_rows, schema=schema, orient="row")
    old = pl.DataFrame(old_rows, schema=schema, orient="row")
    with pytest.MonkeyPatch.context() as mp:
        if way == "sort":
            mp.setattr(sc, "BOOL_BITS", 0)
        got = sc.set_change(new, old, list(schema))
    rows = new_rows + old_rows
    nulls = any(v is None for r in rows for v, t in zip(r, schema.values(), strict=True) if t != pl.String())
    wide_values = any(isinstance(v, int) and abs(v) >= 2**62 for r in rows for v in r)
    if len(set(new_rows)) != len(new_rows):
        assert got is None  # (a row twice in the new set: the caller groups)
        return
    if got is None:  # (only a NULL in an integer column, or values past 62 bits, leave the keys)
        assert nulls or wide_values
        return
    assert got.columns == [*schema, WEIGHT] and got.schema[WEIGHT] == pl.Int64
    assert all(got.schema[c] == t for c, t in schema.items())
    want = Counter({r: 1 for r in set(new_rows) - set(old_rows)}) + Counter()
    want.subtract({r: 1 for r in set(old_rows) - set(new_rows)})
    assert Counter({tuple(r[:-1]): r[-1] for r in got.iter_rows()}) == want
    assert got.height == len(want)  # (each row once)
