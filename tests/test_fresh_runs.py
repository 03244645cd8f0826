"""Which changes of a scope's body hold each row once over a fresh run (`operators/fresh.new_once`): the
sums of those changes are indexed as they are, unconsolidated. Hand-built bodies, each case one way a
sum could hold a row twice (the Datalog programs the oracle tests generate build only the safe ones;
`tests/test_datalog.py` checks every batch of their fresh runs' traces consolidated)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dbspark.algebra.zset import ZSet
from dbspark.ir.expr import col, lit
from dbspark.operators.base import Shape
from dbspark.operators.fresh import FreshRun, new_once
from dbspark.operators.join import StreamJoin
from dbspark.operators.linear import Filter, Map, Plus
from dbspark.operators.source import Input
from dbspark.operators.time import Delay, Integrate
from dbspark.testing.datalog import programs

A = pl.Schema({"x": pl.Int64, "y": pl.Int64})
B = pl.Schema({"y": pl.Int64, "z": pl.Int64})
AB = pl.Schema({"x": pl.Int64, "y": pl.Int64, "z": pl.Int64})


def body(*nodes: tuple[Any, tuple[int, ...], pl.Schema, bool]) -> Any:
    """Nodes numbered in order: (operator, inputs, schema, whether a trace)."""
    return SimpleNamespace(
        nodes={
            i: SimpleNamespace(op=op, inputs=ins, shape=Shape(schema, trace=trace))
            for i, (op, ins, schema, trace) in enumerate(nodes)
        }
    )


def join_body(
    join: StreamJoin, out: pl.Schema, a: pl.Schema = A, b: pl.Schema = B, second: StreamJoin | None = None
) -> Any:
    """a, b imports; their integrals; the incremental join Δa ⋈ I(b) + z⁻¹(I(a)) ⋈ Δb at node 7."""
    return body(
        (Input("a", a), (), a, False),  # 0
        (Input("b", b), (), b, False),  # 1
        (Integrate(), (0,), a, True),  # 2: I(a)
        (Integrate(), (1,), b, True),  # 3: I(b)
        (Delay(), (2,), a, True),  # 4: z⁻¹(I(a))
        (join, (0, 3), out, False),  # 5: Δa ⋈ I(b)
        (second or join, (4, 1), out, False),  # 6: z⁻¹(I(a)) ⋈ Δb
        (Plus(), (5, 6), out, False),  # 7
    )


JOIN = StreamJoin(("y",), ("y",), (("z", "z"),))


def test_an_incremental_join_keeping_every_column_holds_each_pair_once() -> None:
    assert 7 in new_once(join_body(JOIN, AB), list(range(8)), [], [])


@pytest.mark.parametrize(
    "why, make",
    [
        (
            "a right column dropped: two pairs give one row",
            lambda: join_body(StreamJoin(("y",), ("y",), ()), A),
        ),
        (
            "float keys: 0.0 and -0.0 join, two right rows name one pair",
            lambda: join_body(
                JOIN,
                pl.Schema({"x": pl.Int64, "y": pl.Float64, "z": pl.Int64}),
                pl.Schema({"x": pl.Int64, "y": pl.Float64}),
                pl.Schema({"y": pl.Float64, "z": pl.Int64}),
            ),
        ),
        (
            "two joins that are not one join's halves",
            lambda: join_body(JOIN, AB, second=StreamJoin(("x",), ("y",), (("z", "z"),))),
        ),
    ],
)
def test_a_join_that_may_give_a_row_twice_is_not_once(why: str, make: Any) -> None:
    assert 7 not in new_once(make(), list(range(8)), [], []), why


def test_linear_operators_keep_once_only_where_rows_stay_apart() -> None:
    b = body(
        (Input("a", A), (), A, False),  # 0: an import enters once, consolidated
        (Plus(), (0, 0), A, False),  # 1: each row twice
        (Map((("u", col("y")), ("v", col("x")))), (0,), pl.Schema({"u": pl.Int64, "v": pl.Int64}), False),
        (Map((("x", col("x")),)), (0,), pl.Schema({"x": pl.Int64}), False),  # 3: a column dropped
        (Filter(col("x") > lit(0)), (0,), A, False),  # 4
        (Map((("x", col("x") + lit(1)), ("y", col("y")))), (0,), A, False),  # 5: a computed column
    )
    assert new_once(b, list(range(6)), [], []) == {0, 2, 4}


@pytest.mark.parametrize("recursion", ["dred", "auto"])
def test_a_fresh_steps_view_is_its_facts_trace(recursion: str) -> None:
    """After the first step (a fresh run) the view's trace keeps the facts trace's own columns and key
    hashes (`DRedScopeState.settled`, the local kernel's `trace_keys`): no second copy, no second sort;
    the view and each later step's change (deletes, inserts, everything deleted) stay the closure's."""
    import random

    import dbspark

    rng = random.Random(7)
    edges = {(i, i + 1) for i in range(60)} | {(rng.randrange(60), rng.randrange(60)) for _ in range(40)}
    p = dbspark.Pipeline(engine="local", recursion=recursion)
    with p:
        p.datalog(TC, closure_operator=False)
        p.insert("edge", sorted(edges))
        out = p.step()
        facts = [s.facts for st in p.runtime.states.values() for s in _body_states(st) if hasattr(s, "facts")]
        ((fb,),) = [f.batches for f in facts if f.batches]  # (auto: its spare state is empty)
        (vb,) = p.runtime._views["path"].batches
        assert vb.hashes is fb.hashes and vb.df is out["path"].df
        assert all(
            vb.df[c].to_arrow().buffers()[1].address == fb.df[c].to_arrow().buffers()[1].address for c in "xy"
        )
        had = closure(edges)
        assert out["path"].to_dict() == dict.fromkeys(had, 1)
        for dels, ins in [(sorted(edges)[::7], [(5, 50), (61, 0)]), (sorted(edges | {(5, 50), (61, 0)}), [])]:
            p.delete("edge", [e for e in dels if e in edges])
            p.insert("edge", ins)
            edges = (edges - set(dels)) | set(ins)
            now = closure(edges)
            assert p.step()["path"].to_dict() == {
                **dict.fromkeys(now - had, 1),
                **dict.fromkeys(had - now, -1),
            }
            assert p.view("path").to_dict() == dict.fromkeys(now, 1)
            had = now


TC = ".decl edge(x: number, y: number)\n.input edge\n.decl path(x: number, y: number)\n.output path\n" + (
    "path(x, y) :- edge(x, y).\npath(x, y) :- path(x, z), edge(z, y)."
)


def _body_states(st: Any) -> list[Any]:
    """The states of a scope's body under dred (its `it`) or auto (its delete-and-rederive states')."""
    dreds = getattr(st, "dreds", None) or ([st] if hasattr(st, "it") else [])
    return [s for d in dreds for s in d.it.states.values()]


def closure(edges: set[tuple[int, int]]) -> set[tuple[int, int]]:
    out = set(edges)
    while True:
        more = {(x, w) for x, y in out for z, w in edges if y == z} - out
        if not more:
            return out
        out |= more


PROJECTING = (  # a recursive body whose joins drop columns: derivations repeat within an iteration
    ".decl e(x: number, y: number)\n.input e\n.decl p(x: number)\n.output p\n"
    "p(x) :- e(0, x).\np(y) :- p(x), e(x, y).\n"
    ".decl q(x: number, y: number)\n.output q\nq(x, y) :- e(x, y).\nq(x, y) :- q(x, z), e(z, w), e(w, y)."
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(programs(3).map(lambda g: (g.text, list(g.inputs))), st.just((PROJECTING, ["e"]))),
    st.lists(st.lists(st.integers(0, 5), min_size=3, max_size=3), min_size=1, max_size=40),
)
def test_a_fresh_iteration_marks_consolidated_only_what_is(
    program: tuple[str, list[str]], rows: list
) -> None:
    """Every value of a fresh iteration's body marked consolidated (a change of a node `new_once` names,
    marked so that a join does not consolidate it again) holds each row once, none of weight 0; and the
    program's views are the oracle's."""
    import dbspark
    from dbspark.testing.datalog import as_set, evaluate

    text, inputs = program
    marked = 0
    real = FreshRun._iteration

    def iteration(self: FreshRun, *args: Any) -> dict[int, Any]:
        nonlocal marked
        values = real(self, *args)
        for v in values.values():
            if isinstance(v, ZSet) and v.consolidated and len(v):
                marked += 1
                assert not v.data().is_duplicated().any(), (
                    f"a row twice in a value marked consolidated\n{text}"
                )
                assert (v.weights() != 0).all()
        return values

    p = dbspark.Pipeline(engine="local", recursion="auto")  # (a scope with a negation: nested)
    with p, pytest.MonkeyPatch.context() as mp:
        mp.setattr(FreshRun, "_iteration", iteration)
        declared = p.datalog(text)
        facts = {name: sorted({tuple(r[: _arity(text, name)]) for r in rows}) for name in inputs}
        for name, fs in facts.items():
            p.insert(name, fs)
        got = p.step()
        want = evaluate(text, {name: set(fs) for name, fs in facts.items()})
        for name in declared:
            if name not in inputs:
                assert as_set(got[name]) == want[name], f"{name}\n{text}"
    assert marked or text != PROJECTING


def _arity(text: str, name: str) -> int:
    """The number of columns `name` is declared with in the program `text`."""
    decl = next(line for line in text.splitlines() if line.startswith(f".decl {name}("))
    return decl.count(":")


def test_under_a_memory_limit_traces_are_released_one_at_a_time() -> None:
    """Two traces' sorts at once hold twice the scratch memory: a pipeline with a memory limit releases
    its traces one after another, whatever their size."""
    import dbspark
    from dbspark.engines.local import kernel as local

    for limit, parallel in ((None, True), ("8GiB", False)):
        calls: list[int] = []
        flags: list[bool] = []
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(local, "_release", _counting(local._release, calls, flags))
            with dbspark.Pipeline(engine="local", recursion="dred", memory_limit=limit) as p:
                p.datalog(TC, closure_operator=False)
                p.insert("edge", [(1, 2), (2, 3)])
                assert p.step()["path"].to_dict() == {(1, 2): 1, (2, 3): 1, (1, 3): 1}
        assert flags and all(f == parallel for f in flags)


@pytest.mark.parametrize("recursion", ["dred", "auto"])
def test_traces_released_two_at_a_time_hold_what_one_at_a_time_do(recursion: str) -> None:
    """A step's traces released in threads (`engines/local/kernel._release`, here from any size): the
    same views and the same traces' rows as released one after another, over a load and later steps."""
    import random

    import dbspark
    from dbspark.engines.local import kernel as local

    rng = random.Random(3)
    edges = sorted({(rng.randrange(40), rng.randrange(40)) for _ in range(90)})
    runs = []
    for threshold in (local._RELEASE_PARALLEL, 0):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(local, "_RELEASE_PARALLEL", threshold)
            released: list[int] = []
            mp.setattr(local, "_release", _counting(local._release, released))
            p = dbspark.Pipeline(engine="local", recursion=recursion)
            with p:
                p.datalog(TC, closure_operator=False)
                p.insert("edge", edges)
                seen = [p.step()["path"].to_dict()]
                p.delete("edge", edges[::5])
                p.insert("edge", [(41, 0), (7, 41)])
                seen.append(p.step()["path"].to_dict())
                assert not any(t.holding or t.pending for t in p.runtime.kernel.traces)  # (all released)
                traces = sorted(str(sorted(t.snapshot().to_frame().rows())) for t in p.runtime.kernel.traces)
                runs.append((seen, traces))
            assert any(n > 1 for n in released)  # (several traces released at once)
    assert runs[0] == runs[1]
    assert runs[0][0][0] == dict.fromkeys(closure(set(edges)), 1)


def _counting(release: Any, counts: list[int], flags: list[bool] | None = None) -> Any:
    """`release`, noting how many traces each call releases (and whether two at a time, in `flags`)."""

    def counted(traces: list[Any], parallel: bool = True) -> None:
        counts.append(len(traces))
        if flags is not None:
            flags.append(parallel)
        release(traces, parallel)

    return counted
