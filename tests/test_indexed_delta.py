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


@settings(CFG)
@given(st.data())
def test_a_step_undone_leaves_the_state_as_before(data: st.DataObject) -> None:
    """A step rolled back (its undo run) and taken again gives the same change, and what follows is
    still the join's change: the tries, the bits and the dictionaries were put back."""
    steps = data.draw(change_streams("triangle", False))
    k = data.draw(st.integers(0, len(steps) - 1))
    j, ref = IndexedDeltaJoin(schemas_of("triangle")), IndexedDeltaJoin(schemas_of("triangle"))
    for t, step in enumerate(steps):
        if t == k:
            undo: list = []
            j.step(step, undo)
            for u in reversed(undo):
                u()
        assert consolidated(j.step(step)) == consolidated(ref.step(step))
    assert [consolidated(f) for f in j.rows()] == [consolidated(f) for f in ref.rows()]


def test_an_unknown_maintenance_is_refused_by_name() -> None:
    c = dbspark.Circuit()
    r = c.input("r", {"a": pl.Int64, "b": pl.Int64})
    s = c.input("s", {"b": pl.Int64, "c": pl.Int64})
    t = c.input("t", {"a": pl.Int64, "c": pl.Int64})
    with pytest.raises(SchemaError, match="unknown maintenance 'tries'.*indexed"):
        r.multijoin(s, t, maintenance="tries")
