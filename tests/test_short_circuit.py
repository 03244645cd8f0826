"""Short-circuit evaluation of a maintained multiway join's projected variables
(`columnar/short_circuit.py`, `MaintainedJoin(project=...)`; `lftj-incremental-maintenance.txt` §2.2.1).

- Random change streams (deletes, duplicates, NULLs, negative and large weights, growth past the codes'
  bits) over every join shape and projection: after every step the sum of the changes is the set of the
  projected bindings of the current inputs' rows of positive weight, each once; under both kinds of
  regions.
- A head binding's search stops at its first witness (the intervals it records), survives the loss of
  other rows, moves to the next witness when its witness goes, and a change that cannot move an answer
  evaluates nothing.
- A step undone leaves the state (head set included) as before.
- Datalog rules with projection over cyclic bodies under joins="sensitivity" on both engines, against the
  naive evaluator and the delta join; the lifted operator against the distinct of the projected join.
"""

from __future__ import annotations

from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dbspark.algebra.zset import WEIGHT
from dbspark.columnar.leapfrog import leapfrog_join
from dbspark.columnar.sensitivity import MaintainedJoin
from dbspark.errors import SchemaError
from dbspark.testing.datalog import evaluate
from dbspark.testing.engines import engine_given, pipeline_on
from dbspark.testing.join_streams import QUERIES, change_streams, consolidated

CFG = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def projected_set(frames: list[pl.DataFrame], keep: list[str]) -> dict[tuple, int]:
    """The oracle: the distinct bindings of `keep` in the join of each input's rows of positive weight."""
    positive = []
    for f in frames:
        cols = [c for c in f.columns if c != WEIGHT]
        g = f.group_by(cols).agg(pl.col(WEIGHT).sum()) if f.height else f
        positive.append(g.filter(pl.col(WEIGHT) > 0).select([*cols, WEIGHT]))
    joined = leapfrog_join(positive)
    return {r: 1 for r in joined.select(keep).unique().iter_rows()}


@pytest.mark.parametrize("query", sorted(QUERIES))
@settings(CFG)
@given(st.booleans(), st.sampled_from(["points", "intervals"]), st.data())
def test_short_circuit_equals_the_distinct_projection(
    query: str, strings: bool, regions: str, data: st.DataObject
) -> None:
    atoms = QUERIES[query]
    columns = list(dict.fromkeys(c for a in atoms for c in a))
    keep = data.draw(st.lists(st.sampled_from(columns), min_size=1, max_size=len(columns), unique=True))
    steps = data.draw(change_streams(query, strings))
    t = pl.Utf8 if strings else pl.Int64
    schemas = [pl.Schema({**dict.fromkeys(a, t), WEIGHT: pl.Int64}) for a in atoms]
    j = MaintainedJoin(schemas, regions=regions, project=keep)
    assert list(j.out_schema) == [*(c for c in columns if c in keep), WEIGHT]
    current = [pl.DataFrame(schema=s) for s in schemas]
    total: dict[tuple, int] = {}
    for step in steps:
        change = j.step(step)
        assert change.schema == j.out_schema
        for k, w in consolidated(change).items():
            total[k] = total.get(k, 0) + w
        total = {k: w for k, w in total.items() if w}
        current = [c if d is None else pl.concat([c, d]) for c, d in zip(current, step, strict=True)]
        assert total == projected_set(current, [c for c in columns if c in keep])


def star(hub_rows: int) -> tuple[MaintainedJoin, list[pl.Schema]]:
    """R(a, b) with a = 0 and b in 0..hub_rows-1, S(b) holding every b: ∃b. R(a, b), S(b)."""
    schemas = [
        pl.Schema({"a": pl.Int64, "b": pl.Int64, WEIGHT: pl.Int64}),
        pl.Schema({"b": pl.Int64, WEIGHT: pl.Int64}),
    ]
    j = MaintainedJoin(schemas, project=["a"])
    r = pl.DataFrame(
        {"a": [0] * hub_rows, "b": list(range(hub_rows)), WEIGHT: [1] * hub_rows}, schema=schemas[0]
    )
    s = pl.DataFrame({"b": list(range(hub_rows)), WEIGHT: [1] * hub_rows}, schema=schemas[1])
    assert consolidated(j.step([r, s])) == {(0,): 1}
    return j, schemas


def test_a_head_binding_stops_at_its_first_witness() -> None:
    """A hub of 2,000 completions: the search records a few intervals (its first rounds), where the
    full evaluation records one or more per completion; losing a row that is not the witness evaluates
    nothing, losing the witness moves to the next one, and losing every completion removes the head."""
    j, schemas = star(2000)
    assert j.last["recorded"] < 50, j.last
    full = MaintainedJoin(schemas)
    r = pl.DataFrame({"a": [0] * 2000, "b": list(range(2000)), WEIGHT: [1] * 2000}, schema=schemas[0])
    full.step([r, pl.DataFrame({"b": list(range(2000)), WEIGHT: [1] * 2000}, schema=schemas[1])])
    assert full.last["recorded"] >= 2000

    s = schemas[1]
    got = j.step([None, pl.DataFrame({"b": [1500], WEIGHT: [-1]}, schema=s)])  # not the witness
    assert got.height == 0 and j.last["regions"] == 0
    got = j.step([None, pl.DataFrame({"b": [2500], WEIGHT: [1]}, schema=s)])  # more of what is there
    assert got.height == 0 and j.last["regions"] == 0
    got = j.step([None, pl.DataFrame({"b": [0], WEIGHT: [-1]}, schema=s)])  # the witness (b = 0)
    assert got.height == 0 and j.last["regions"] == 1
    assert [int(x) for x in j.heads.witness[0]] == [0, 1]  # the next one, as codes (a = 0, b = 1)
    rest = [b for b in range(1, 2000) if b != 1500]
    got = j.step([None, pl.DataFrame({"b": rest, WEIGHT: [-1] * len(rest)}, schema=s)])
    assert consolidated(got) == {(0,): -1}
    got = j.step([None, pl.DataFrame({"b": [7], WEIGHT: [1]}, schema=s)])  # back through a new node
    assert consolidated(got) == {(0,): 1}


@settings(CFG)
@given(st.data())
def test_a_step_undone_leaves_the_state_as_before(data: st.DataObject) -> None:
    steps = data.draw(change_streams("triangle", False))
    undone = data.draw(change_streams("triangle", False))[0]
    schemas = [pl.Schema({**dict.fromkeys(a, pl.Int64), WEIGHT: pl.Int64}) for a in QUERIES["triangle"]]
    j = MaintainedJoin(schemas, project=["a"])
    current = [pl.DataFrame(schema=s) for s in schemas]
    total: dict[tuple, int] = {}
    for k, step in enumerate(steps):
        if k == len(steps) - 1:
            undo: list = []
            j.step(undone, undo)
            for u in reversed(undo):
                u()
        for key, w in consolidated(j.step(step)).items():
            total[key] = total.get(key, 0) + w
        total = {key: w for key, w in total.items() if w}
        current = [c if d is None else pl.concat([c, d]) for c, d in zip(current, step, strict=True)]
        assert total == projected_set(current, ["a"])


def test_projection_errors_name_the_columns() -> None:
    schemas = [
        pl.Schema({"a": pl.Int64, "b": pl.Int64, WEIGHT: pl.Int64}),
        pl.Schema({"b": pl.Int64, WEIGHT: pl.Int64}),
    ]
    with pytest.raises(SchemaError, match="'zz'"):
        MaintainedJoin(schemas, project=["a", "zz"])
    import dbspark

    c = dbspark.Circuit()
    r = c.input("r", {"a": pl.Int64, "b": pl.Int64})
    s = c.input("s", {"b": pl.Int64})
    with pytest.raises(SchemaError, match="maintenance='sensitivity'"):
        r.stream_multijoin(s, project=["a"])


PROJECTED = """
.decl e(x: number, y: number)
.input e
.decl label(n: number, s: symbol)
.input label
.decl intri(a: number)
.output intri
intri(a) :- e(a, b), e(b, c), e(c, a).
.decl tedge(a: number, b: number)
.output tedge
tedge(a, b) :- e(a, b), e(b, c), e(c, a), a != b.
.decl sq(a: number)
.output sq
sq(a) :- e(a, b), e(b, c), e(c, d), e(d, a), !e(a, c).
.decl named(s: symbol)
.output named
named(s) :- label(a, s), e(a, b), e(b, c), e(c, a).
.decl loops(n: number)
.output loops
loops(count : { intri(_) }) :- e(_, _).
"""


def edit_steps(nodes: int, edges: int) -> st.SearchStrategy:
    edge = st.tuples(st.integers(0, nodes), st.integers(0, nodes))
    label = st.tuples(st.integers(0, nodes), st.sampled_from(["p", "q"]))
    step = st.tuples(st.lists(edge, max_size=edges), st.lists(label, max_size=3), st.floats(0, 1))
    return st.lists(step, min_size=1, max_size=5)


@engine_given(edit_steps(5, 12), local=25, spark=2, spark_strategies=(edit_steps(4, 8),))
def test_datalog_projected_rules_equal_the_evaluator(engine: Any, steps: list) -> None:
    """Rules whose heads drop some of a cyclic body's variables run as short-circuited joins under
    joins="sensitivity" (the plan says so); every view equals the evaluator's after every step, inserts
    and deletes, and the delta join's (joins="auto")."""
    pipelines = {}
    for joins in ("sensitivity", "auto"):
        p = pipeline_on(engine)
        p.datalog(PROJECTED, joins=joins)
        pipelines[joins] = p
    plan = pipelines["sensitivity"].start().circuit.explain()
    assert plan.count("exists over all but") == 4, plan
    state: dict[str, set] = {"e": set(), "label": set()}
    try:
        for edges, labels, drop in steps:
            gone = {r for r in sorted(state["e"]) if hash(r) % 97 < drop * 97}
            new_e, new_l = set(edges) - state["e"] - gone, set(labels) - state["label"]
            for p in pipelines.values():
                if gone:
                    p.delete("e", sorted(gone))
                if new_e:
                    p.insert("e", sorted(new_e))
                if new_l:
                    p.insert("label", sorted(new_l))
                p.step()
            state["e"] = (state["e"] - gone) | new_e
            state["label"] |= new_l
            want = evaluate(PROJECTED, state)
            for v in ("intri", "tedge", "sq", "named", "loops"):
                for joins, p in pipelines.items():
                    assert set(p.view(v).to_dict()) == set(want[v]), (joins, v)
    finally:
        for p in pipelines.values():
            p.close()


@engine_given(edit_steps(5, 14), local=15, spark=2)
def test_the_lifted_projected_join_is_the_distinct_projection(engine: Any, steps: list) -> None:
    """`stream_multijoin(..., project=)` run as a stream operator (each step's Z-sets joined, not
    maintained): the distinct of the projected join of each step's inputs (rows of positive weight)."""
    import dbspark

    c = dbspark.Circuit()
    e = c.input("e", {"x": pl.Int64, "y": pl.Int64})
    r, s, t = e.map(a="x", b="y"), e.map(b="x", c="y"), e.map(a="x", c="y")
    c.output("v", r.stream_multijoin(s, t, maintenance="sensitivity", project=["a", "c"]))
    rt = c.run(engine)
    for edges, _, _ in steps:
        if edges:
            rt.push("e", edges, [1 if (x + y) % 5 else -1 for x, y in edges])
        out = rt.step()["v"].to_dict()
        frame = pl.DataFrame(
            {
                "x": [x for x, _ in edges],
                "y": [y for _, y in edges],
                WEIGHT: [1 if (x + y) % 5 else -1 for x, y in edges],
            },
            schema={"x": pl.Int64, "y": pl.Int64, WEIGHT: pl.Int64},
        )
        frames = [frame.rename({"x": u, "y": v}) for u, v in (("a", "b"), ("b", "c"), ("a", "c"))]
        assert out == projected_set(frames, ["a", "c"])
