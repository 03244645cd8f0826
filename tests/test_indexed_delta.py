"""The delta join over indexed tries, a variable order per change (`columnar/indexed_delta.py`,
`maintenance="indexed"`; `lftj-incremental-maintenance.txt` §4.1's leapfrog, run per term).

- Each term's variable order starts with its change's columns, and every input is indexed in the orders
  the other terms read it in.
- Maintained joins (triangle, 4-cycle, 4-clique, payload columns, unary atoms, strings, NULLs, duplicates,
  negative and large weights, values growing past the codes' bits) against evaluating the join again
  after every step; a step undone. A durable pipeline reopened, columns too wide to pack and weight
  overflow are `test_sensitivity.py`'s, for both maintained joins; the views over SQL, Datalog and
  circuits on both engines are in `test_leapfrog.py`.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dbspark
from dbspark.algebra.zset import WEIGHT
from dbspark.columnar.indexed_delta import IndexedDeltaJoin, term_orders
from dbspark.columnar.leapfrog import leapfrog_join
from dbspark.errors import SchemaError
from dbspark.testing.join_streams import QUERIES, change_streams, consolidated

CFG = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def schemas_of(query: str, t: pl.DataType | None = None) -> list[pl.Schema]:
    t = pl.Int64() if t is None else t
    return [pl.Schema({**dict.fromkeys(a, t), WEIGHT: pl.Int64}) for a in QUERIES[query]]


def test_each_term_starts_with_its_change_and_each_input_is_indexed_as_read() -> None:
    """A triangle's terms: the change of T(a, c) binds a and c, then b is R's children of a met with S's
    parents of c; so R and S are indexed both ways, and a 4-clique's inputs in the orders its terms read."""
    atoms = QUERIES["triangle"]
    assert term_orders(atoms) == [["a", "b", "c"], ["b", "c", "a"], ["a", "c", "b"]]
    j = IndexedDeltaJoin(schemas_of("triangle"))
    assert j.layouts == [[(0, 1), (1, 0)]] * 3  # (positions of each input's columns)
    payload = term_orders(QUERIES["payload"])
    assert payload[0][:3] == ["a", "b", "p"] and payload[0][-1] == "q"  # the others' own columns last
    clique = IndexedDeltaJoin(schemas_of("4-clique"))
    for k, order in enumerate(clique.orders):
        assert order[:2] == list(QUERIES["4-clique"][k])
        for j, a in enumerate(QUERIES["4-clique"]):
            names = [tuple(a[p] for p in lv) for lv in clique.layouts[j]]
            assert tuple(v for v in order if v in a) in names


def test_a_self_join_shares_its_tries_until_its_inputs_differ() -> None:
    """Three inputs that are one edge relation (a triangle over `e`) get the same changes: they share
    one class of tries (two orders, not six); a change to one alone splits it off, and the join's
    changes stay right."""
    schemas = schemas_of("triangle")
    edges = pl.DataFrame({"x": [1, 2, 1, 3], "y": [2, 3, 3, 4], WEIGHT: [1, 1, 1, 1]})
    ins = [edges.rename(dict(zip(["x", "y"], a, strict=True))) for a in QUERIES["triangle"]]
    j = IndexedDeltaJoin(schemas)
    assert consolidated(j.step(ins)) == {(1, 2, 3): 1}
    assert j.classes == [(0, 1, 2)] and [len(t) for t in j.tries] == [2]
    more = pl.DataFrame({"x": [2, 1], "y": [4, 4], WEIGHT: [1, 1]}, schema=edges.schema)
    moved = [more.rename(dict(zip(["x", "y"], a, strict=True))) for a in QUERIES["triangle"]]
    assert consolidated(j.step(moved)) == {(1, 2, 4): 1, (1, 3, 4): 1, (2, 3, 4): 1}
    assert j.classes == [(0, 1, 2)]
    only_t = pl.DataFrame({"a": [2], "c": [4], WEIGHT: [-1]}, schema=schemas[2])
    assert consolidated(j.step([None, None, only_t])) == {(2, 3, 4): -1}
    assert sorted(j.classes) == [(0, 1), (2,)]
    current = [pl.concat([i, m]) for i, m in zip(ins, moved, strict=True)]
    current[2] = pl.concat([current[2], only_t])
    assert [consolidated(f) for f in j.rows()] == [consolidated(f) for f in current]


@pytest.mark.parametrize("query", sorted(QUERIES))
@settings(CFG)
@given(st.booleans(), st.data())
def test_maintenance_equals_evaluating_again(query: str, strings: bool, data: st.DataObject) -> None:
    """After every step the sum of the changes equals the join of the current inputs (the leapfrog join
    evaluated again), whatever changed, including the steps that repack the tries, and the inputs' rows
    kept equal the inputs."""
    steps = data.draw(change_streams(query, strings))
    schemas = schemas_of(query, pl.Utf8() if strings else pl.Int64())
    j = IndexedDeltaJoin(schemas)
    current = [pl.DataFrame(schema=s) for s in schemas]
    total: dict[tuple, int] = {}
    for step in steps:
        change = j.step(step)
        for k, w in consolidated(change).items():
            total[k] = total.get(k, 0) + w
        total = {k: w for k, w in total.items() if w}
        current = [c if d is None else pl.concat([c, d]) for c, d in zip(current, step, strict=True)]
        joined = leapfrog_join(current)
        assert total == consolidated(joined.select(change.columns))
        assert change.schema == joined.schema
    atoms = QUERIES[query]
    for i, (kept, c) in enumerate(zip(j.rows(), current, strict=True)):  # a NULL join column matches nothing
        at = [k for k, v in enumerate(atoms[i]) if sum(v in a for a in atoms) > 1]
        want = {r: w for r, w in consolidated(c).items() if all(r[k] is not None for k in at)}
        assert consolidated(kept) == want


@pytest.mark.parametrize("query", ["triangle", "payload"])
@settings(CFG)
@given(st.booleans(), st.data())
def test_a_step_undone_leaves_the_state_as_before(query: str, strings: bool, data: st.DataObject) -> None:
    """A step rolled back (its undo run) and taken again gives the same change, and what follows is
    still the join's change: the tries, the bits, the dictionaries and the own columns' codes were put
    back."""
    steps = data.draw(change_streams(query, strings))
    k = data.draw(st.integers(0, len(steps) - 1))
    schemas = schemas_of(query, pl.Utf8() if strings else pl.Int64())
    j, ref = IndexedDeltaJoin(schemas), IndexedDeltaJoin(schemas)
    for t, step in enumerate(steps):
        if t == k:
            undo: list = []
            j.step(step, undo)
            for u in reversed(undo):
                u()
        assert consolidated(j.step(step)) == consolidated(ref.step(step))
    assert [consolidated(f) for f in j.rows()] == [consolidated(f) for f in ref.rows()]


def test_own_columns_are_one_level_under_the_join_key() -> None:
    """Columns no other input reads are not levels of the tries: their tuples under one join key are
    numbered, so four columns of 2^15 distinct values each (68 bits as levels) take the join column's
    bits and two; several tuples under one key, deletes, NULLs and strings among them, against the
    leapfrog join evaluated again."""
    n = 1 << 15
    wide = pl.Schema({"a": pl.Int64, "b": pl.Int64, "c": pl.Utf8, "d": pl.Float64, WEIGHT: pl.Int64})
    unary = pl.Schema({"a": pl.Int64, WEIGHT: pl.Int64})
    rows = pl.DataFrame(
        {"a": np.arange(n), "b": np.arange(n) * 7, "c": [f"s{i}" for i in range(n)], "d": np.arange(n) / 3}
        | {WEIGHT: np.ones(n, dtype=np.int64)},
        schema=wide,
    )
    keys = pl.DataFrame({"a": np.arange(0, n, 2), WEIGHT: 2}, schema=unary)
    j = IndexedDeltaJoin([wide, unary])
    current = [rows, keys]
    total = consolidated(j.step(current))
    assert total == consolidated(leapfrog_join(current).select(list(j.out_schema)))
    assert j.vatoms == [["a", "__own0"], ["a"]] and j.bits["__own0"] == 2
    more = pl.DataFrame(  # a second and third tuple under keys 0 and 2, a NULL, one row deleted
        {"a": [0, 0, 2, 4], "b": [1, None, 5, 28], "c": ["x", "y", None, "s4"], "d": [0.5, None, 1.0, 4 / 3]}
        | {WEIGHT: [1, 3, 1, -1]},
        schema=wide,
    )
    fewer = pl.DataFrame({"a": [0, 6], WEIGHT: [-1, 1]}, schema=unary)
    for step in ([more, None], [None, fewer], [more.with_columns(pl.col(WEIGHT) * -1), fewer]):
        for k, w in consolidated(j.step(step)).items():
            total[k] = total.get(k, 0) + w
        total = {k: w for k, w in total.items() if w}
        current = [c if d is None else pl.concat([c, d]) for c, d in zip(current, step, strict=True)]
        assert total == consolidated(leapfrog_join(current).select(list(j.out_schema)))
        assert [consolidated(f) for f in j.rows()] == [consolidated(f) for f in current]
    assert len(j.coders["__own0"]) == 3  # three tuples were numbered under key 0


@settings(CFG)
@given(st.booleans(), st.data())
def test_own_columns_are_coded_exactly_when_their_hashes_collide(strings: bool, data: st.DataObject) -> None:
    """The own columns' codes are found by hashes checked against the entries: with a hash of two bits
    (every lookup meets colliding entries, a change's new rows collide among themselves) the payload
    join is still maintained exactly."""
    from dbspark.columnar import payloads

    real = payloads.stable_hash
    steps = data.draw(change_streams("payload", strings))
    schemas = schemas_of("payload", pl.Utf8() if strings else pl.Int64())
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(payloads, "stable_hash", lambda df, cols: real(df, cols) & np.uint64(3))
        j = IndexedDeltaJoin(schemas)
        current = [pl.DataFrame(schema=s) for s in schemas]
        total: dict[tuple, int] = {}
        for step in steps:
            for k, w in consolidated(j.step(step)).items():
                total[k] = total.get(k, 0) + w
            total = {k: w for k, w in total.items() if w}
            current = [c if d is None else pl.concat([c, d]) for c, d in zip(current, step, strict=True)]
            assert total == consolidated(leapfrog_join(current).select(list(j.out_schema)))
        for coder in j.coders.values():  # each tuple under a key coded once
            entries = pl.DataFrame(coder.codes[: coder.n, :-1]).hstack(coder.values)
            assert entries.unique().height == coder.n == len(coder.values)


def test_own_columns_of_nested_types() -> None:
    """Own columns with no stable hash of their own (a list, a struct) are coded under the join key as
    others are: inserts, a second tuple under a key, a NULL list, deletes, against the rows expected."""
    r_schema = pl.Schema(
        {
            "a": pl.Int64,
            "b": pl.Int64,
            "l": pl.List(pl.Int64),
            "st": pl.Struct({"u": pl.Utf8}),
            WEIGHT: pl.Int64,
        }
    )
    s_schema = pl.Schema({"b": pl.Int64, "c": pl.Int64, WEIGHT: pl.Int64})
    j = IndexedDeltaJoin([r_schema, s_schema])

    def frame(rows: list[tuple], schema: pl.Schema) -> pl.DataFrame:
        return pl.DataFrame(rows, schema=schema, orient="row")

    def key(row: dict) -> tuple:
        return (row["a"], row["b"], None if row["l"] is None else tuple(row["l"]), str(row["st"]), row["c"])

    steps = [
        ([(1, 2, [1, 2], {"u": "x"}, 1), (2, 3, [3], {"u": None}, 2)], [(2, 5, 1), (3, 6, 1)]),
        ([(1, 2, None, {"u": "y"}, 1), (1, 2, [1, 2], {"u": "x"}, -1)], []),
        ([(2, 3, [3], {"u": None}, -2), (1, 2, [4], None, 3)], [(3, 6, -1)]),
    ]
    r_rows: dict[tuple, int] = {}
    s_rows: dict[tuple, int] = {}
    total: dict[tuple, int] = {}
    for rs, ss in steps:
        out = j.step([frame(rs, r_schema) if rs else None, frame(ss, s_schema) if ss else None])
        for row in out.iter_rows(named=True):
            k = key(row)
            total[k] = total.get(k, 0) + row[WEIGHT]
        for r in rs:
            k = (r[0], r[1], None if r[2] is None else tuple(r[2]), str(r[3]))
            r_rows[k] = r_rows.get(k, 0) + r[4]
        for r in ss:
            s_rows[r[:2]] = s_rows.get(r[:2], 0) + r[2]
        want: dict[tuple, int] = {}
        for (a, b, lst, st_), w in r_rows.items():
            for (b2, c), v in s_rows.items():
                if b == b2 and w * v:
                    want[(a, b, lst, st_, c)] = want.get((a, b, lst, st_, c), 0) + w * v
        assert {k: w for k, w in total.items() if w} == {k: w for k, w in want.items() if w}


def test_an_unknown_maintenance_is_refused_by_name() -> None:
    c = dbspark.Circuit()
    r = c.input("r", {"a": pl.Int64, "b": pl.Int64})
    s = c.input("s", {"b": pl.Int64, "c": pl.Int64})
    t = c.input("t", {"a": pl.Int64, "c": pl.Int64})
    with pytest.raises(SchemaError, match="unknown maintenance 'tries'.*indexed"):
        r.multijoin(s, t, maintenance="tries")
