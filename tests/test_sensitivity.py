"""The leapfrog join's maintenance by sensitivity indices and the change oracle
(`columnar/sensitivity.py`, `columnar/packed_trie.py`, `columnar/intervals.py`;
`lftj-incremental-maintenance.txt` §3-4).

- §4.1.1's worked example, exactly: the sensitivity intervals of A(x), B(x) after the first evaluation,
  each change's contributions to the change oracle, the oracle, and the maintained result.
- §4.2.1's example of tree surgery, exactly.
- The interval index (§3.2) and the scan tree (§3.1) against brute force, with removals.
- Maintained joins (triangle, 4-cycle, 4-clique, payload columns, unary atoms, strings, NULLs, duplicates,
  negative and large weights, values growing past the codes' bits) against evaluating the join again
  after every step.
"""

from __future__ import annotations

from typing import Any

import duckdb
import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dbspark
from dbspark.algebra.zset import WEIGHT
from dbspark.columnar import intervals, packed_trie
from dbspark.columnar.indexed_delta import IndexedDeltaJoin
from dbspark.columnar.intervals import IntervalIndex, ScanTree
from dbspark.columnar.leapfrog import leapfrog_join
from dbspark.columnar.packed_trie import PackedTrie, pack, unpack
from dbspark.columnar.sensitivity import MaintainedJoin
from dbspark.testing.engines import engine_given, pipeline_on
from dbspark.testing.join_streams import QUERIES, change_streams, consolidated
from dbspark.testing.sql_oracle import view_frame

CFG = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def zset(col: str, rows: dict[Any, int]) -> pl.DataFrame:
    return pl.DataFrame(
        {col: list(rows), WEIGHT: list(rows.values())}, schema={col: pl.Int64, WEIGHT: pl.Int64}
    )


# §4.1.1's table: A:(5,ERASE) ∅; A:(8,INSERT) {[6,end]}; B:(2,ERASE) {[2,2]}; B:(3,INSERT) ∅
CONTRIBUTIONS = [(0, (5,), []), (0, (8,), [(6, None)]), (1, (2,), [(2, 2)]), (1, (3,), [])]


def test_section_4_1_1_worked_example() -> None:
    """A = {0, 2, 4, 5, 6}, B = {1, 2, 6, 7} (§4.1), then δA = {(5, ERASE), (8, INSERT)} and
    δB = {(2, ERASE), (3, INSERT)} (§4.1.1). None is -∞ / +∞ ("end")."""
    a, b = zset("x", dict.fromkeys([0, 2, 4, 5, 6], 1)), zset("x", dict.fromkeys([1, 2, 6, 7], 1))
    j = MaintainedJoin([a.schema, b.schema], regions="intervals", discipline="leapfrog")  # the seed's own
    first = j.step([a, b])
    assert dict(zip(first["x"], first[WEIGHT], strict=True)) == {2: 1, 6: 1}
    # §4.1: A_sens = {[-∞,0], [1,2], [2,4], [6,6], [6,+∞]}, B_sens = {[-∞,1], [2,2], [4,6]}
    assert j.sensitivity(0, 0) == [(None, 0), (1, 2), (2, 4), (6, 6), (6, None)]
    assert j.sensitivity(1, 0) == [(None, 1), (2, 2), (4, 6)]
    change = j.step([zset("x", {5: -1, 8: 1}), zset("x", {2: -1, 3: 1})])
    assert sorted(j.contributions(), key=lambda c: (c[0], c[1])) == CONTRIBUTIONS
    assert j.oracle() == [((), 2, 2), ((), 6, None)]  # ChangeOracle(x) = [2,2] ∪ [6,+∞]
    assert dict(zip(change["x"], change[WEIGHT], strict=True)) == {2: -1}  # 2 is no longer in A ∩ B
    # the matched intervals were removed and the regions' evaluation recorded anew: the seek to 2 in A
    # lands on 2; in [6, +∞] A moves from 6 to 8 and B's seek to 8 ends
    assert (2, 2) in j.sensitivity(0, 0) and (6, 8) in j.sensitivity(0, 0)
    assert (6, None) not in j.sensitivity(0, 0) and (8, None) in j.sensitivity(1, 0)
    # regions="points" (the default): the same contributions; the oracle is the changed values within
    # them, and the matched intervals stay
    p = MaintainedJoin([a.schema, b.schema], discipline="leapfrog")
    p.step([a, b])
    change = p.step([zset("x", {5: -1, 8: 1}), zset("x", {2: -1, 3: 1})])
    assert sorted(p.contributions(), key=lambda c: (c[0], c[1])) == CONTRIBUTIONS
    assert p.oracle() == [((), 2, 2), ((), 8, 8)]
    assert dict(zip(change["x"], change[WEIGHT], strict=True)) == {2: -1}
    assert (6, None) in p.sensitivity(0, 0) and (2, 2) in p.sensitivity(1, 0)


def test_section_4_2_1_tree_surgery() -> None:
    """§4.2.1: the two versions of A(x, y, z) and the surgery operations between them."""
    v1 = [(0, 30, 80), (0, 30, 81), (1, 35, 60), (1, 35, 61), (3, 40, 90), (3, 50, 91), (3, 50, 92)]
    v2 = [(0, 30, 80), (1, 35, 60), (1, 35, 61), (3, 50, 91), (4, 60, 71)]
    bits = (8, 8, 8)

    def keys(rows: list[tuple[int, ...]]) -> np.ndarray:
        return pack([np.array(c, dtype=np.int64) for c in zip(*rows, strict=True)], bits)

    t1, _ = PackedTrie.empty(bits).apply(keys(v1), np.ones(len(v1), dtype=np.int64))
    change = {r: 1 for r in v2 if r not in v1} | {r: -1 for r in v1 if r not in v2}
    t2, ops = t1.apply(keys(list(change)), np.array(list(change.values()), dtype=np.int64))
    got = {
        tuple(int(c[k]) for c in unpack(op, bits[: d + 1]))
        for d, op in enumerate(ops)
        for k in range(len(op))
    }
    assert got == {(0, 30, 81), (3, 40, 90), (3, 40), (3, 50, 92), (4,), (4, 60), (4, 60, 71)}
    assert sorted(t2.rows()[0].tolist()) == sorted(keys(v2).tolist())
    assert t2.counts[0].tolist() == [1, 2, 1, 1]  # rows under 0, 1, 3, 4
    assert sorted(t1.rows()[0].tolist()) == sorted(keys(v1).tolist())  # the older version is intact


@pytest.mark.parametrize("splice", [0, packed_trie.SPLICE])
@settings(CFG)
@given(st.lists(st.integers(0, 40), unique=True).map(sorted), st.data())
def test_a_splice_equals_the_edits_one_by_one(splice: int, values: list[int], data: st.DataObject) -> None:
    """A trie level's next version (`packed_trie._splice`): elements removed at some positions, new ones
    inserted before others, piece by piece or (past `SPLICE` edits) by NumPy's delete and insert."""
    n = len(values)
    drop = data.draw(st.lists(st.integers(0, n - 1), unique=True).map(sorted)) if n else []
    into = data.draw(st.lists(st.integers(0, n), max_size=8).map(sorted))
    new = data.draw(st.lists(st.integers(-9, -1), min_size=len(into), max_size=len(into)))
    want: list[int] = []
    for k in range(n + 1):
        want += [v for p, v in zip(into, new, strict=True) if p == k]
        if k < n and k not in drop:
            want.append(values[k])
    saved, packed_trie.SPLICE = packed_trie.SPLICE, splice
    try:
        a = np.array(values, dtype=np.int64)
        got = packed_trie._splice(
            a, np.array(drop, np.int64), np.array(into, np.int64), np.array(new, np.int64)
        )
    finally:
        packed_trie.SPLICE = saved
    assert got.tolist() == want
    assert a.tolist() == values  # the old version is untouched


@pytest.mark.parametrize("scan", [0, 4, intervals.SCAN])
@settings(CFG)
@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(-1, 20), st.integers(0, 8)), max_size=60),
    st.lists(st.lists(st.tuples(st.integers(0, 3), st.integers(-1, 25)), min_size=1, max_size=6), max_size=4),
    st.integers(1, 4),
)
def test_interval_index_takes_what_brute_force_finds(
    scan: int, rows: list[tuple[int, int, int]], queries: list[list[tuple[int, int]]], chunks: int
) -> None:
    """Stabs read a key's intervals one by one (keys of at most `SCAN` intervals in a run) or search
    them by the scan tree (the others): each way, and mixed, against brute force."""
    saved, intervals.SCAN = intervals.SCAN, scan
    try:
        _takes_what_brute_force_finds(rows, queries, chunks)
    finally:
        intervals.SCAN = saved


def _takes_what_brute_force_finds(
    rows: list[tuple[int, int, int]], queries: list[list[tuple[int, int]]], chunks: int
) -> None:
    keys = np.array([r[0] for r in rows], dtype=np.int64)
    lo = np.array([r[1] for r in rows], dtype=np.int64)
    hi = lo + np.array([r[2] for r in rows], dtype=np.int64)
    ix = IntervalIndex(width=1, max_runs=2)
    for part in np.array_split(np.arange(len(rows)), chunks):
        ix.add(keys[part], lo[part], hi[part], part.reshape(-1, 1))
    alive = set(range(len(rows)))
    for batch in queries:
        qk = np.array([q[0] for q in batch], dtype=np.int64)
        qx = np.array([q[1] for q in batch], dtype=np.int64)
        q, _, _, pay = ix.take(qk, qx)
        want = {i for i in alive if any(keys[i] == k and lo[i] <= x <= hi[i] for k, x in batch)}
        assert sorted(pay[:, 0].tolist()) == sorted(want)
        for i, k in zip(pay[:, 0], q, strict=True):
            assert keys[i] == qk[k] and lo[i] <= qx[k] <= hi[i]
        alive -= want
        assert len(ix) == len(alive)


@settings(CFG)
@given(st.lists(st.integers(-5, 50), min_size=1, max_size=40), st.data())
def test_scan_tree_range_maxima(values: list[int], data: st.DataObject) -> None:
    t = ScanTree(np.array(values, dtype=np.int64))
    cur = list(values)
    for _ in range(3):
        at = data.draw(st.lists(st.integers(0, len(values) - 1), max_size=4, unique=True))
        new = data.draw(st.lists(st.integers(-5, 50), min_size=len(at), max_size=len(at)))
        t.set(np.array(at, dtype=np.int64), np.array(new, dtype=np.int64))
        for i, v in zip(at, new, strict=True):
            cur[i] = v
        s = data.draw(st.integers(0, len(values)))
        e = data.draw(st.integers(s, len(values)))
        x = data.draw(st.integers(-5, 50))
        _, leaves = t.reaching(np.array([s]), np.array([e]), np.array([x]))
        assert sorted(leaves.tolist()) == [i for i in range(s, e) if cur[i] >= x]


@pytest.mark.parametrize("query", sorted(QUERIES))
@settings(CFG)
@given(
    st.booleans(),
    st.sampled_from(["points", "intervals"]),
    st.sampled_from(["smallest", "leapfrog"]),
    st.data(),
)
def test_maintenance_equals_evaluating_again(
    query: str, strings: bool, regions: str, discipline: str, data: st.DataObject
) -> None:
    """After every step the sum of the maintained changes equals the join of the current inputs (the
    leapfrog join evaluated again), whatever changed, including the steps that rebuild the tries, under
    both kinds of regions and both disciplines of the intersection."""
    steps = data.draw(change_streams(query, strings))
    t = pl.Utf8 if strings else pl.Int64
    schemas = [pl.Schema({**dict.fromkeys(a, t), WEIGHT: pl.Int64}) for a in QUERIES[query]]
    j = MaintainedJoin(schemas, regions=regions, discipline=discipline)
    current = [pl.DataFrame(schema=s) for s in schemas]
    total: dict[tuple, int] = {}
    for step in steps:
        change = j.step(step)
        for k, w in consolidated(change).items():
            total[k] = total.get(k, 0) + w
        total = {k: w for k, w in total.items() if w}
        current = [c if d is None else pl.concat([c, d]) for c, d in zip(current, step, strict=True)]
        assert total == consolidated(leapfrog_join(current).select(change.columns))
        assert change.schema == leapfrog_join(current).schema


@st.composite
def undo_streams(draw: Any) -> tuple[list[list[pl.DataFrame | None]], int, str]:
    steps = draw(change_streams("triangle", False))
    return steps, draw(st.integers(0, len(steps) - 1)), draw(st.sampled_from(["points", "intervals"]))


@settings(CFG)
@given(undo_streams())
def test_a_step_undone_leaves_the_state_as_before(
    case: tuple[list[list[pl.DataFrame | None]], int, str],
) -> None:
    """A step rolled back (its undo run) and taken again gives the same change, and what follows is
    still the join's change: the tries, the dictionaries and the indices were put back."""
    steps, k, regions = case
    schemas = [pl.Schema({**dict.fromkeys(a, pl.Int64), WEIGHT: pl.Int64}) for a in QUERIES["triangle"]]
    j, ref = MaintainedJoin(schemas, regions=regions), MaintainedJoin(schemas, regions=regions)
    for t, step in enumerate(steps):
        if t == k:
            undo: list = []
            j.step(step, undo)
            for u in reversed(undo):
                u()
        got, want = j.step(step), ref.step(step)
        assert consolidated(got) == consolidated(want)
    assert [consolidated(f) for f in j.rows()] == [consolidated(f) for f in ref.rows()]


EDGE = {"x": pl.Int64, "y": pl.Int64}
SQL = {
    "triangle": "SELECT r.x AS a, r.y AS b, s.y AS c FROM e r, e s, e t WHERE r.y = s.x AND s.y = t.y AND t.x = r.x",
    "4-cycle": "SELECT r.x AS a, r.y AS b, s.y AS c, t.y AS d FROM e r, e s, e t, e u "
    "WHERE r.y = s.x AND s.y = t.x AND t.y = u.x AND u.y = r.x",
}


def edge_steps(edges: int, steps: int) -> st.SearchStrategy:
    edge = st.tuples(st.integers(0, 5), st.integers(0, 5), st.sampled_from([1, 1, 2, -1, -2]))
    return st.lists(st.lists(edge, max_size=edges), min_size=1, max_size=steps)


@pytest.mark.parametrize("query", sorted(SQL))
@engine_given(edge_steps(14, 5), local=20, spark=2, spark_strategies=(edge_steps(10, 3),))
def test_sensitivity_maintained_views_equal_duckdb_and_the_delta_join(
    engine: Any, query: str, steps: list
) -> None:
    """A cyclic SQL view under joins="sensitivity" (the operator `MaintainedMultiJoin`) and under the
    delta join: after every step both views equal DuckDB's query over the current edges."""
    pipelines = {}
    for joins in ("sensitivity", "auto"):
        p = pipeline_on(engine)
        p.sql(f"CREATE TABLE e (x BIGINT, y BIGINT); CREATE VIEW v AS {SQL[query]};", joins=joins)
        pipelines[joins] = p
    assert "maintained_multijoin" in pipelines["sensitivity"].start().circuit.explain()
    assert "maintained_multijoin" not in pipelines["auto"].start().circuit.explain()
    count: dict[tuple[int, int], int] = {}
    for ch in steps:
        rows, ws = [], []
        for x, y, w in ch:
            if w < 0:  # a delete of what is there
                w = -min(-w, count.get((x, y), 0))
            if w:
                count[(x, y)] = count.get((x, y), 0) + w
                rows.append((x, y))
                ws.append(w)
        con = duckdb.connect()
        con.execute("CREATE TABLE e (x BIGINT, y BIGINT)")
        bag = [e for e, k in count.items() for _ in range(k)]
        if bag:
            con.executemany("INSERT INTO e VALUES (?, ?)", bag)
        want: dict[tuple, int] = {}
        for row in con.execute(SQL[query]).fetchall():
            want[row] = want.get(row, 0) + 1
        for p in pipelines.values():
            if rows:
                p.push("e", rows, ws)
            p.step()
            assert consolidated(view_frame(p.view("v"))) == want


TRIANGLES = """
.decl e(x: number, y: number)
.input e
.decl tri(a: number, b: number, c: number)
.output tri
tri(a, b, c) :- e(a, b), e(b, c), e(a, c).
"""


# the two maintained joins held in this process: the operator's name in a plan, and the state's class
HELD = {
    "sensitivity": ("maintained_multijoin", MaintainedJoin),
    "indexed": ("indexed_multijoin", IndexedDeltaJoin),
}


@pytest.mark.parametrize("joins", sorted(HELD))
def test_a_durable_pipeline_resumes_the_maintained_join(tmp_path: Any, joins: str) -> None:
    """Datalog with joins="sensitivity" or "indexed": a pipeline reopened on its directory rebuilds the
    join's tries (and indices) from the checkpointed inputs and goes on maintaining it (against the
    naive evaluator)."""
    from dbspark.testing.datalog import evaluate

    edges = {(1, 2), (2, 3), (1, 3), (3, 4), (2, 4)}
    p = dbspark.Pipeline(tmp_path / "state", engine="local")
    p.datalog(TRIANGLES, joins=joins)
    assert HELD[joins][0] in p.start().circuit.explain()
    p.insert("e", sorted(edges))
    p.step()
    p.close()
    q = dbspark.Pipeline(tmp_path / "state", engine="local")
    q.datalog(TRIANGLES, joins=joins)
    q.delete("e", [(1, 3)])
    q.insert("e", [(1, 4), (4, 5), (3, 5)])
    q.step()
    edges = (edges - {(1, 3)}) | {(1, 4), (4, 5), (3, 5)}
    got = {tuple(r[:3]) for r in view_frame(q.view("tri")).iter_rows()}
    assert got == evaluate(TRIANGLES, {"e": edges})["tri"] and got
    q.close()


@pytest.mark.parametrize("joins", sorted(HELD))
def test_checkpoints_write_the_steps_changes_and_resume_from_them(
    tmp_path: Any, joins: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A durable pipeline's held join checkpoints a base of its inputs' rows and the steps' changes
    since, in segments each more than twice the next; the base is written again only once the log holds
    more rows than it (here at least 6). Reopened every few steps, the view equals the naive
    evaluator's; a step undone puts the log back."""
    from dbspark.operators import maintained_join
    from dbspark.operators.maintained_join import Held
    from dbspark.testing.datalog import evaluate

    monkeypatch.setattr(maintained_join, "MIN_BASE", 6)
    rng = np.random.default_rng(3)
    edges = {(int(a), int(b)) for a, b in rng.integers(0, 8, size=(14, 2)) if a != b}

    def opened() -> dbspark.Pipeline:
        p = dbspark.Pipeline(tmp_path / "state", engine="local")
        p.datalog(TRIANGLES, joins=joins)
        p.start()
        return p

    def held(p: dbspark.Pipeline) -> Held:
        (h,) = [s for s in p.runtime.states.values() if isinstance(s, Held)]
        return h

    p = opened()
    p.insert("e", sorted(edges))
    p.step()
    bases = 1
    for t in range(1, 25):
        base = held(p).base
        gone = sorted(edges)[: int(rng.integers(0, 2))]
        new = {(int(a), int(b)) for a, b in rng.integers(0, 8, size=(2, 2)) if a != b} - edges
        if gone:
            p.delete("e", gone)
        if new:
            p.insert("e", sorted(new))
        p.step()
        edges = (edges - set(gone)) | new
        h = held(p)
        sizes = [sum(f.height for f in seg if f is not None) for seg in h.log]
        assert all(2 * b < a for a, b in zip(sizes, sizes[1:], strict=False)), sizes
        assert h.base is not None and sum(sizes) <= max(sum(f.height for f in h.base), 6)
        bases += h.base is not base
        if t % 5 == 0:
            p.close()
            p = opened()
        got = {tuple(r[:3]) for r in view_frame(p.view("tri")).iter_rows()}
        assert got == evaluate(TRIANGLES, {"e": edges})["tri"]
    assert 1 < bases < 12  # written again now and then, not at every step
    q = dbspark.Pipeline(engine="local")  # without a directory: no checkpoint, so nothing logged
    q.datalog(TRIANGLES, joins=joins)
    q.insert("e", sorted(edges))
    q.step()
    q.delete("e", sorted(edges)[:2])
    q.step()
    assert held(q).base is None and held(q).log == []
    q.close()
    h = held(p)
    log = h.log
    undo: list = []
    op = next(n.op for n in p.runtime.circuit.nodes.values() if n.op.name == HELD[joins][0])
    k = p.runtime.kernel
    gone_rows = [f.head(1).with_columns(-pl.col(WEIGHT)) for f in h.join.rows()]
    ins = [k.from_local(dbspark.ZSet(f)) for f in gone_rows]
    op.eval(k, h, ins, undo)
    assert h.log is not log
    for u in reversed(undo):
        u()
    assert h.log is log
    p.close()


@pytest.mark.parametrize("joins", sorted(HELD))
def test_a_checkpoint_of_the_inputs_rows_alone_still_restores(joins: str) -> None:
    """Checkpoints before the log (2026-12-05) held the inputs' rows only: a restore from one steps
    them in, and its next checkpoint is a base of them with an empty log."""
    from dbspark.operators.maintained_join import Held

    schemas = [pl.Schema({**dict.fromkeys(a, pl.Int64), WEIGHT: pl.Int64}) for a in QUERIES["triangle"]]
    rows = [
        pl.DataFrame({a[0]: [1, 2], a[1]: [2, 3], WEIGHT: [1, 2]}, schema=sch)
        for a, sch in zip(QUERIES["triangle"], schemas, strict=True)
    ]
    h = Held(HELD[joins][1](schemas))
    h.restore(rows)
    assert [consolidated(f) for f in h.join.rows()] == [consolidated(f) for f in rows]
    saved = h.saved()
    assert saved["log"] == [] and [consolidated(f) for f in saved["base"]] == [consolidated(f) for f in rows]


@pytest.mark.parametrize("joins", sorted(HELD))
def test_columns_too_wide_to_pack_are_refused_by_name_and_the_step_rolled_back(joins: str) -> None:
    """Four join columns of 2^15 distinct values each need more than 62 bits: the step is refused
    naming the input's columns (as a front end calls them, where it gave names) and the maintenance to
    use, and the state is as before it."""
    from dbspark.errors import SchemaError

    schema = pl.Schema({"a": pl.Int64, "b": pl.Int64, "c": pl.Int64, "d": pl.Int64, WEIGHT: pl.Int64})
    ab = pl.Schema({"a": pl.Int64, "b": pl.Int64, WEIGHT: pl.Int64})
    cd = pl.Schema({"c": pl.Int64, "d": pl.Int64, WEIGHT: pl.Int64})
    small = pl.DataFrame({"a": [1], "b": [2], "c": [3], "d": [4], WEIGHT: [1]}, schema=schema)
    j = HELD[joins][1]([schema, ab, cd], names={"a": "t.a = u.a"})
    j.step(
        [
            small,
            pl.DataFrame({"a": [1], "b": [2], WEIGHT: [1]}),
            pl.DataFrame({"c": [3], "d": [4], WEIGHT: [1]}),
        ]
    )
    n = 1 << 15
    wide = pl.DataFrame(
        {c: np.arange(n) for c in "abcd"} | {WEIGHT: np.ones(n, dtype=np.int64)}, schema=schema
    )
    undo: list = []
    with pytest.raises(SchemaError, match=r"input 0's columns \(t\.a = u\.a, b, c, d\).*maintenance='delta'"):
        j.step([wide, None, None], undo)
    for u in reversed(undo):
        u()
    assert [consolidated(f) for f in j.rows()] == [{(1, 2, 3, 4): 1}, {(1, 2): 1}, {(3, 4): 1}]
    more = pl.DataFrame({"a": [1], "b": [2], WEIGHT: [2]}, schema=ab)
    assert consolidated(j.step([None, more, None])) == {(1, 2, 3, 4): 2}


@pytest.mark.parametrize("joins", sorted(HELD))
def test_weight_overflow_is_an_error_not_a_wrap(joins: str) -> None:
    """A product of weights past 64 bits (the join) and a sum past it (an input's row) raise."""
    from dbspark.errors import WeightError

    held = HELD[joins][1]
    schemas = [pl.Schema({**dict.fromkeys(a, pl.Int64), WEIGHT: pl.Int64}) for a in QUERIES["triangle"]]
    big = 1 << 40
    value = {"a": 1, "b": 2, "c": 3}
    rows = [
        pl.DataFrame({**{c: [value[c]] for c in a}, WEIGHT: [big]}, schema=s)
        for a, s in zip(QUERIES["triangle"], schemas, strict=True)
    ]
    with pytest.raises(WeightError, match="overflow"):
        held(schemas).step(rows)
    j = held(schemas)
    huge = pl.DataFrame({"a": [1], "b": [2], WEIGHT: [1 << 62]}, schema=schemas[0])
    j.step([huge, None, None])
    with pytest.raises(WeightError, match="overflow"):
        j.step([huge, None, None])
