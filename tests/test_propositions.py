"""The propositions of `dbsp-paper.txt` §2-§4 as property tests on random streams of Z-sets.

Each test names the statement it checks. Streams are lists of Z-sets (one per step) drawn by
`dbspark.testing.strategies`; `dbspark.testing.oracle` runs circuits on them and computes I and D
numerically, so the identities are checked on values, not only on how circuits are rewritten (the
circuit cache cancels D∘I at build time, so a circuit-only check of Thm 2.22 would be vacuous).

Every test that runs a circuit takes the `engine` fixture (tests/conftest.py) and runs on both engines,
the Spark engine with one example each (`engine_given`: a Spark step is a few Spark jobs).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dbspark
from dbspark import ZSet, col, lit
from dbspark.circuit.circuit import Circuit
from dbspark.incremental.rewrite import is_feedback
from dbspark.ir.expr import Binary, Cast, Col, Expr, Lit, Unary
from dbspark.operators.distinct import DistinctH, StreamDistinct
from dbspark.operators.time import Delay, Differentiate, Integrate
from dbspark.testing.engines import engine_given
from dbspark.testing.oracle import (
    assert_incremental_matches,
    assert_streams_equal,
    differentiate_stream,
    differentiate_streams,
    evaluate,
    integrate_stream,
    integrate_streams,
    run_stream,
)
from dbspark.testing.strategies import (
    TableSpec,
    change_streams,
    join_specs,
    map_columns,
    predicates,
    row_pools,
    streams,
    table_specs,
    zsets,
)

SETTINGS = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

Builder = Callable[[dbspark.Stream, dbspark.Stream], dbspark.Stream]

# Two fixed tables for the query catalog: a nullable join key k, a nullable string, a float.
A = TableSpec.of({"k": "int64", "x": "str"}, nullable=["k", "x"], domains={"k": [0, 1, 2]})
B = TableSpec.of({"k": "int64", "y": "float64"}, nullable=["y"], domains={"k": [0, 1, 2, 2**62]})


# ---- helpers ------------------------------------------------------------------------------------------
def substitute(e: Expr, env: dict[str, Expr]) -> Expr:
    """e with every column reference replaced by its definition in env (composition of scalar maps)."""
    if isinstance(e, Col):
        return env[e.name]
    if isinstance(e, Lit):
        return e
    if isinstance(e, Binary):
        return Binary(e.op, substitute(e.left, env), substitute(e.right, env))
    if isinstance(e, Unary):
        return Unary(e.op, substitute(e.arg, env))
    if isinstance(e, Cast):
        return Cast(substitute(e.arg, env), e.to)
    raise TypeError(f"unknown expression {e!r}")


def term(c: Circuit, nid: int) -> str:
    """A circuit node as a term, e.g. 'map[a](filter[(a > 1)](input t(...)))'; feedback delays are cut."""
    n = c.nodes[nid]
    if is_feedback(n):
        return n.op.label()
    args = ", ".join(term(c, i) for i in n.inputs)
    return n.op.label() + (f"({args})" if n.inputs else "")


def terms(c: Circuit) -> dict[str, str]:
    """Every output, and the source of every feedback edge, as a term: equal iff the circuits are equal."""
    out = {f"output {name}": term(c, nid) for name, nid in c.outputs.items()}
    fbs = sorted(term(c, n.inputs[0]) for n in c.nodes.values() if is_feedback(n))
    out.update({f"feedback {i}": t for i, t in enumerate(fbs)})
    return out


def count_ops(c: Circuit, kind: type) -> int:
    return sum(isinstance(n.op, kind) for n in c.nodes.values())


def single(build: Callable[[dbspark.Stream], dbspark.Stream], spec: TableSpec, kind: str = "zset") -> Circuit:
    """A circuit with one input 's' and one output 'o' = build(s)."""
    c = dbspark.Circuit()
    c.output("o", build(c.input("s", spec.schema, kind=kind)))
    return c


def double(
    build: Builder, a: TableSpec = A, b: TableSpec = B, kinds: tuple[str, str] = ("zset", "zset")
) -> Circuit:
    """A circuit with inputs 'a', 'b' and one output 'o' = build(a, b)."""
    c = dbspark.Circuit()
    c.output("o", build(c.input("a", a.schema, kind=kinds[0]), c.input("b", b.schema, kind=kinds[1])))
    return c


def add_streams(x: list[ZSet], y: list[ZSet]) -> list[ZSet]:
    return [(p + q).consolidate() for p, q in zip(x, y, strict=True)]


# A catalog of non-linear queries Q(a, b) over the tables A and B (bilinear, distinct, time, negation).
CATALOG: dict[str, Builder] = {
    "distinct": lambda a, b: a.stream_distinct(),
    "join_project_distinct": lambda a, b: a.stream_join(b, on="k").map("x", "y").stream_distinct(),
    "self_join": lambda a, b: a.stream_join(a, on="k"),
    "filter_product_distinct": lambda a, b: a.filter(col("k") > 0).stream_product(b.stream_distinct()),
    "except": lambda a, b: (a.map("k") - b.map("k")).stream_distinct(),
    "distinct_minus_bag": lambda a, b: a.map("k").stream_distinct() - b.map("k"),
    "delayed_join": lambda a, b: a.delay().stream_join(b, on="k").map("k", "x"),
    "join_of_distincts": lambda a, b: a.stream_distinct().stream_join(b.stream_distinct(), on="k"),
}
catalog = st.sampled_from(sorted(CATALOG))


@st.composite
def ab_streams(
    draw: st.DrawFn, kind: str | None = None, big: bool = False, max_len: int = 5, positive: bool = False
) -> dict[str, list[ZSet]]:
    """Streams for inputs 'a' (table A) and 'b' (table B) of one length.

    kind None: arbitrary Z-sets per step (snapshots or changes alike); otherwise change streams whose
    integral is of that kind ('set', 'bag', 'zset')."""
    pa, pb = draw(row_pools(A)), draw(row_pools(B))
    n = draw(st.integers(2, max_len))
    if kind is None:
        return {
            "a": draw(streams(A, pa, min_len=n, max_len=n, big=big, positive=positive)),
            "b": draw(streams(B, pb, min_len=n, max_len=n, big=big, positive=positive)),
        }
    return {
        "a": draw(change_streams(A, pa, kind=kind, min_len=n, max_len=n, big=big)),
        "b": draw(change_streams(B, pb, kind=kind, min_len=n, max_len=n, big=big)),
    }


@st.composite
def spec_and_stream(
    draw: st.DrawFn, big: bool = True, positive: bool = False, kind: str | None = None, max_len: int = 5
) -> tuple[TableSpec, list[ZSet]]:
    """A random table and one stream over it (arbitrary Z-sets, or changes of the given kind)."""
    spec = draw(table_specs())
    pool = draw(row_pools(spec))
    if kind is None:
        return spec, draw(streams(spec, pool, max_len=max_len, big=big, positive=positive))
    return spec, draw(change_streams(spec, pool, kind=kind, max_len=max_len, big=big))


# ---- Prop 2.4: lifting distributes over composition ---------------------------------------------------------
@engine_given(spec_and_stream(), st.data(), local=SETTINGS, spark=1)
def test_prop_2_4_map_after_map_equals_fused_map(
    engine: Any, ss: tuple[TableSpec, list[ZSet]], data: st.DataObject
) -> None:
    """↑f ∘ ↑g = ↑(f∘g) for two maps g, f; f∘g is one map whose expressions are f's with g's substituted."""
    spec, s = ss
    g = data.draw(map_columns(spec.schema, prefix="g"))
    composed = dbspark.Circuit()
    mid = composed.input("s", spec.schema).map(*g)
    f = data.draw(map_columns(mid.schema, prefix="f"))
    composed.output("o", mid.map(*f))
    env = dict(g)
    fused = single(lambda x: x.map(*[(n, substitute(e, env)) for n, e in f]), spec)
    assert count_ops(fused, type(composed.nodes[mid.node_id].op)) == 1
    assert_streams_equal(
        run_stream(composed, {"s": s}, engine=engine),
        run_stream(fused, {"s": s}, engine=engine),
        "↑f∘↑g vs ↑(f∘g)",
    )


@engine_given(spec_and_stream(), st.data(), local=SETTINGS, spark=1)
def test_prop_2_4_filter_after_filter_equals_conjunction(
    engine: Any, ss: tuple[TableSpec, list[ZSet]], data: st.DataObject
) -> None:
    """↑σ_q ∘ ↑σ_p = ↑σ_{p∧q} (SQL three-valued logic: a row passes iff both predicates are TRUE)."""
    spec, s = ss
    p, q = data.draw(predicates(spec.schema)), data.draw(predicates(spec.schema))
    composed = single(lambda x: x.filter(p).filter(q), spec)
    fused = single(lambda x: x.filter(p & q), spec)
    assert_streams_equal(
        run_stream(composed, {"s": s}, engine=engine),
        run_stream(fused, {"s": s}, engine=engine),
        "σ_q∘σ_p vs σ_{p∧q}",
    )


@engine_given(spec_and_stream(), st.data(), local=SETTINGS, spark=1)
def test_prop_2_4_filter_after_map(
    engine: Any, ss: tuple[TableSpec, list[ZSet]], data: st.DataObject
) -> None:
    """↑σ_p ∘ ↑map_m = ↑(σ_p ∘ map_m) = ↑map_m ∘ ↑σ_{p∘m}: the predicate pushed below the map."""
    spec, s = ss
    m = data.draw(map_columns(spec.schema))
    composed = dbspark.Circuit()
    mid = composed.input("s", spec.schema).map(*m)
    p = data.draw(predicates(mid.schema))
    composed.output("o", mid.filter(p))
    pushed = single(lambda x: x.filter(substitute(p, dict(m))).map(*m), spec)
    assert_streams_equal(
        run_stream(composed, {"s": s}, engine=engine),
        run_stream(pushed, {"s": s}, engine=engine),
        "σ∘map vs map∘σ'",
    )


ROW_FNS: dict[str, Callable[[dict], list[tuple]]] = {
    "id": lambda r: [tuple(r.values())],
    "twice": lambda r: [tuple(r.values())] * 2,
    "none": lambda r: [],
    "no_nulls": lambda r: [tuple(r.values())] if None not in r.values() else [],
    "nulls_only": lambda r: [tuple(r.values())] if None in r.values() else [],
}


@engine_given(
    spec_and_stream(),
    st.sampled_from(sorted(ROW_FNS)),
    st.sampled_from(sorted(ROW_FNS)),
    local=SETTINGS,
    spark=1,
)
def test_prop_2_4_flat_map_composition(
    engine: Any, ss: tuple[TableSpec, list[ZSet]], fname: str, gname: str
) -> None:
    """↑flat_map(f) ∘ ↑flat_map(g) = ↑flat_map(f∘g) for Python row functions f, g."""
    spec, s = ss
    f, g, cols = ROW_FNS[fname], ROW_FNS[gname], spec.columns

    def fg(r: dict) -> list[tuple]:
        return [y for x in g(r) for y in f(dict(zip(cols, x, strict=True)))]

    composed = single(lambda x: x.flat_map(g, spec.schema).flat_map(f, spec.schema), spec)
    fused = single(lambda x: x.flat_map(fg, spec.schema), spec)
    assert_streams_equal(
        run_stream(composed, {"s": s}, engine=engine),
        run_stream(fused, {"s": s}, engine=engine),
        f"{fname}∘{gname}",
    )


@engine_given(ab_streams(), st.sampled_from(sorted(set(CATALOG) - {"delayed_join"})), local=SETTINGS, spark=1)
def test_prop_2_4_lifted_composite_is_pointwise(engine: Any, s: dict[str, list[ZSet]], name: str) -> None:
    """(↑Q)(s)[t] = Q(s[t]) for a composite of lifted operators (Def 2.3, Prop 2.4): a circuit run over
    the whole stream equals the scalar function applied at each step by a fresh runtime — no state leaks
    between steps. (The catalog's delayed_join has a z^-1, so it is not lifted and left out.)"""
    q = double(CATALOG[name])
    whole = run_stream(q, s, engine=engine)["o"]
    for t in range(len(s["a"])):
        assert whole[t] == evaluate(q, {"a": s["a"][t], "b": s["b"][t]}, engine=engine)["o"], f"step {t}"


@engine_given(ab_streams(), local=SETTINGS, spark=1)
def test_prop_2_4_distinct_after_join_composed_numerically(engine: Any, s: dict[str, list[ZSet]]) -> None:
    """↑distinct ∘ ↑⋈ equals distinct(⋈(a[t], b[t])) computed by two separate one-step evaluations."""
    composed = double(lambda a, b: a.stream_join(b, on="k").stream_distinct())
    join = double(lambda a, b: a.stream_join(b, on="k"))
    schema = join.nodes[join.outputs["o"]].shape.schema
    dist = single(lambda x: x.stream_distinct(), TableSpec(schema))
    whole = run_stream(composed, s, engine=engine)["o"]
    for t in range(len(s["a"])):
        j = evaluate(join, {"a": s["a"][t], "b": s["b"][t]}, engine=engine)["o"]
        assert whole[t] == evaluate(dist, {"s": j}, engine=engine)["o"] == j.distinct(), f"step {t}"


# ---- Thm 2.22: I(D(s)) = D(I(s)) = s --------------------------------------------------------------------------
@SETTINGS
@given(table_specs())
def test_thm_2_22_circuit_cache_cancels_inverse_pairs(spec: TableSpec) -> None:
    """The cache applies Thm 2.22 while building: D(I(s)) and I(D(s)) are the node s itself. (Building a
    circuit, no engine: one run.)"""
    c = dbspark.Circuit()
    s = c.input("s", spec.schema)
    assert s.integrate().differentiate().node_id == s.node_id
    assert s.differentiate().integrate().node_id == s.node_id


@engine_given(spec_and_stream(), local=SETTINGS, spark=1)
def test_thm_2_22_explicit_circuits(engine: Any, ss: tuple[TableSpec, list[ZSet]]) -> None:
    """I and D as real nodes (an identity filter between them defeats the cache): D(I(s)) = I(D(s)) = s,
    and I(s)[t] = Σ_{i<=t} s[i] (Prop 2.20), D(s)[t] = s[t] - s[t-1] (Def 2.17)."""
    spec, s = ss
    c = dbspark.Circuit()
    x = c.input("s", spec.schema)
    keep = lit(True)
    c.output("DI", x.integrate().filter(keep).differentiate())
    c.output("ID", x.differentiate().filter(keep).integrate())
    c.output("I", x.integrate())
    c.output("D", x.differentiate())
    assert count_ops(c, Integrate) == 2 and count_ops(c, Differentiate) == 2, c.explain()
    out = run_stream(c, {"s": s}, engine=engine)
    plain = [z.consolidate() for z in s]
    assert_streams_equal(out["DI"], plain, "D(I(s))")
    assert_streams_equal(out["ID"], plain, "I(D(s))")
    assert_streams_equal(out["I"], integrate_stream(s), "I(s)")
    assert_streams_equal(out["D"], differentiate_stream(s), "D(s)")


@engine_given(spec_and_stream(), local=SETTINGS, spark=1)
def test_thm_2_22_separate_circuits_numerically(engine: Any, ss: tuple[TableSpec, list[ZSet]]) -> None:
    """I and D in separate circuits, the output stream of one fed into the other: both orders give s."""
    spec, s = ss
    integ = single(lambda x: x.integrate(), spec)
    diff = single(lambda x: x.differentiate(), spec)
    i_s = run_stream(integ, {"s": s}, engine=engine)["o"]
    d_s = run_stream(diff, {"s": s}, engine=engine)["o"]
    plain = [z.consolidate() for z in s]
    assert_streams_equal(run_stream(diff, {"s": i_s}, engine=engine)["o"], plain, "D(I(s))")
    assert_streams_equal(run_stream(integ, {"s": d_s}, engine=engine)["o"], plain, "I(D(s))")
    assert_streams_equal(differentiate_stream(integrate_stream(s)), plain, "numeric D(I(s))")
    assert_streams_equal(integrate_stream(differentiate_stream(s)), plain, "numeric I(D(s))")


@engine_given(spec_and_stream(), local=SETTINGS, spark=1)
def test_thm_2_22_integration_as_a_feedback_loop(engine: Any, ss: tuple[TableSpec, list[ZSet]]) -> None:
    """Def 2.19: I(s) = fix α. s + z^-1(α). The loop built with a feedback edge equals the I operator and
    the numeric integral, D of it (a separate circuit) gives s back, and being LTI (Prop 2.16) it is
    its own incremental version."""
    spec, s = ss
    c = dbspark.Circuit()
    x = c.input("s", spec.schema)
    fb = c.feedback(spec.schema)
    alpha = x + fb.stream
    fb.connect(alpha)
    c.output("loop", alpha)
    c.output("I", x.integrate())
    out = run_stream(c, {"s": s}, engine=engine)
    assert_streams_equal(out["loop"], integrate_stream(s), "fix α. s + z^-1(α)")
    assert_streams_equal(out["I"], out["loop"], "I vs the loop")
    diff = single(lambda y: y.differentiate(), spec)
    assert_streams_equal(
        run_stream(diff, {"s": out["loop"]}, engine=engine)["o"], [z.consolidate() for z in s], "D(loop)"
    )
    qd = c.incrementalize()
    assert terms(qd) == terms(c)
    assert_incremental_matches(c, {"s": s}, qd, engine=engine)


# ---- Prop 3.2: properties of Q ↦ Q^Δ -------------------------------------------------------------------------
@engine_given(ab_streams(), catalog, local=SETTINGS, spark=1)
def test_prop_3_2_inversion_I_QDelta_D_is_Q(engine: Any, s: dict[str, list[ZSet]], name: str) -> None:
    """inversion: the inverse of Q ↦ Q^Δ is Q ↦ I∘Q∘D, so I(Q^Δ(D(s))) = Q(s) (D and I numerically)."""
    q = double(CATALOG[name])
    qd = q.incrementalize()
    got = integrate_stream(run_stream(qd, differentiate_streams(s), engine=engine)["o"])
    assert_streams_equal(got, run_stream(q, s, engine=engine)["o"], f"I∘{name}^Δ∘D vs {name}")


@engine_given(ab_streams(), catalog, local=SETTINGS, spark=1)
def test_prop_3_2_inversion_incrementalize_I_Q_D_is_Q(
    engine: Any, s: dict[str, list[ZSet]], name: str
) -> None:
    """inversion, the other way round: P = I∘Q∘D built as a circuit has P^Δ = Q."""
    p = double(lambda a, b: CATALOG[name](a.differentiate(), b.differentiate()).integrate())
    q = double(CATALOG[name])
    assert_streams_equal(
        run_stream(p.incrementalize(), s, engine=engine)["o"],
        run_stream(q, s, engine=engine)["o"],
        f"(I∘{name}∘D)^Δ vs {name}",
    )


INVARIANT: dict[str, Builder] = {
    "plus": lambda a, b: a + b,
    "minus": lambda a, b: a - b,
    "neg": lambda a, b: -a,
    "delay": lambda a, b: a.delay(),
    "integrate": lambda a, b: a.integrate(),
    "differentiate": lambda a, b: a.differentiate(),
}


@pytest.mark.parametrize("op", sorted(INVARIANT))
@engine_given(data=st.data(), local=settings(SETTINGS, max_examples=10), spark=1)
def test_prop_3_2_invariance(engine: Any, op: str, data: st.DataObject) -> None:
    """invariance: +^Δ = +, (z^-1)^Δ = z^-1, -^Δ = -, I^Δ = I, D^Δ = D — the same circuit, and numerically
    Q^Δ = D∘Q∘I; also Q^Δ fed any stream gives what Q gives."""
    spec = data.draw(table_specs())
    pool = data.draw(row_pools(spec))
    n = data.draw(st.integers(2, 5))
    ch = {k: data.draw(change_streams(spec, pool, kind="zset", min_len=n, max_len=n, big=True)) for k in "ab"}
    q = double(INVARIANT[op], spec, spec)
    qd = q.incrementalize()
    assert terms(qd) == terms(q)
    assert_incremental_matches(q, ch, qd, engine=engine)
    assert_streams_equal(
        run_stream(qd, ch, engine=engine), run_stream(q, ch, engine=engine), f"{op}^Δ vs {op}"
    )


@engine_given(ab_streams(), catalog, local=SETTINGS, spark=1)
def test_prop_3_2_push_pull(engine: Any, s: dict[str, list[ZSet]], name: str) -> None:
    """push/pull: Q∘I = I∘Q^Δ and D∘Q = Q^Δ∘D, on streams (I and D applied numerically)."""
    q = double(CATALOG[name])
    qd = q.incrementalize()
    assert_streams_equal(
        run_stream(q, integrate_streams(s), engine=engine)["o"],
        integrate_stream(run_stream(qd, s, engine=engine)["o"]),
        "Q∘I vs I∘Q^Δ",
    )
    assert_streams_equal(
        differentiate_stream(run_stream(q, s, engine=engine)["o"]),
        run_stream(qd, differentiate_streams(s), engine=engine)["o"],
        "D∘Q vs Q^Δ∘D",
    )


UNARY: dict[str, Callable[[dbspark.Stream], dbspark.Stream]] = {
    "distinct": lambda m: m.stream_distinct(),
    "project_distinct": lambda m: m.map(m.columns[0]).stream_distinct(),
    "minus_distinct": lambda m: m - m.stream_distinct(),
    "delay_plus_distinct": lambda m: (m + m.delay()).stream_distinct(),
    "self_join": lambda m: m.stream_join(m, on=m.columns[0]),
    "filter": lambda m: m.filter(col(m.columns[0]).is_not_null()),
}


@engine_given(ab_streams(kind="zset"), catalog, st.sampled_from(sorted(UNARY)), local=SETTINGS, spark=1)
def test_prop_3_2_chain(engine: Any, ch: dict[str, list[ZSet]], inner: str, outer: str) -> None:
    """chain: (Q1∘Q2)^Δ = Q1^Δ∘Q2^Δ (Q2 with two inputs): Q2^Δ's output stream fed into Q1^Δ (a separate
    circuit) equals the incrementalized composite, and both equal D∘(Q1∘Q2)∘I."""
    composite = double(lambda a, b: UNARY[outer](CATALOG[inner](a, b)))
    q2 = double(CATALOG[inner])
    q1 = single(UNARY[outer], TableSpec(q2.nodes[q2.outputs["o"]].shape.schema))
    mid = run_stream(q2.incrementalize(), ch, engine=engine)["o"]
    chained = run_stream(q1.incrementalize(), {"s": mid}, engine=engine)["o"]
    direct = assert_incremental_matches(composite, ch, engine=engine)["o"]
    assert_streams_equal(chained, direct, "Q1^Δ∘Q2^Δ vs (Q1∘Q2)^Δ")


K_QUERIES: dict[str, Builder] = {  # queries producing one int64 column k, to be added
    "distinct_k": lambda a, b: a.map("k").stream_distinct(),
    "join_k": lambda a, b: a.stream_join(b, on="k").map("k"),
    "minus_k": lambda a, b: b.map("k") - a.map("k").stream_distinct(),
    "delayed_k": lambda a, b: a.delay().map("k").stream_distinct(),
    "product_k": lambda a, b: a.stream_product(b).map("k"),
}


@engine_given(
    ab_streams(kind="zset"),
    st.sampled_from(sorted(K_QUERIES)),
    st.sampled_from(sorted(K_QUERIES)),
    local=SETTINGS,
    spark=1,
)
def test_prop_3_2_add(engine: Any, ch: dict[str, list[ZSet]], n1: str, n2: str) -> None:
    """add: (Q1 + Q2)^Δ = Q1^Δ + Q2^Δ, the right side from two separate circuits summed numerically."""
    total = double(lambda a, b: K_QUERIES[n1](a, b) + K_QUERIES[n2](a, b))
    d1 = run_stream(double(K_QUERIES[n1]).incrementalize(), ch, engine=engine)["o"]
    d2 = run_stream(double(K_QUERIES[n2]).incrementalize(), ch, engine=engine)["o"]
    direct = assert_incremental_matches(total, ch, engine=engine)["o"]
    assert_streams_equal(add_streams(d1, d2), direct, "Q1^Δ + Q2^Δ vs (Q1+Q2)^Δ")


def _distinct_loop(spec: TableSpec) -> Circuit:
    """o = distinct(s + z^-1(o)): T(s, α) = distinct(s + α) is not linear."""
    c = dbspark.Circuit()
    s = c.input("s", spec.schema)
    fb = c.feedback(spec.schema)
    o = (s + fb.stream).stream_distinct()
    fb.connect(o)
    c.output("o", o)
    return c


EDGES = TableSpec.of({"src": "int64", "dst": "int64"}, domains={"src": [0, 1, 2, 3], "dst": [0, 1, 2, 3]})


def _reach_loop() -> Circuit:
    """o = distinct(e + π(z^-1(o) ⋈_{o.dst = e.src} e)): one more hop of reachability per step."""
    c = dbspark.Circuit()
    e = c.input("e", {"src": "int64", "dst": "int64"})
    fb = c.feedback(e.schema)
    hop = fb.stream.stream_join(e, left_on="dst", right_on="src").map("src", dst=col("dst_right"))
    o = (e + hop).stream_distinct()
    fb.connect(o)
    c.output("o", o)
    return c


@engine_given(spec_and_stream(kind="zset"), local=SETTINGS, spark=1)
def test_prop_3_2_cycle_distinct_loop(engine: Any, ss: tuple[TableSpec, list[ZSet]]) -> None:
    """cycle: (λs. fix α. T(s, z^-1 α))^Δ = λs. fix α. T^Δ(s, z^-1 α): c.incrementalize() keeps the
    feedback edge and equals D∘c∘I numerically, with T = distinct(s + α)."""
    spec, ch = ss
    c = _distinct_loop(spec)
    qd = c.incrementalize()
    assert sum(is_feedback(n) for n in qd.nodes.values()) == 1
    assert count_ops(qd, DistinctH) == 1 and count_ops(qd, StreamDistinct) == 0
    assert_incremental_matches(c, {"s": ch}, qd, engine=engine)


@engine_given(change_streams(EDGES, kind="zset", min_len=2, max_len=6), local=SETTINGS, spark=1)
def test_prop_3_2_cycle_reachability_loop(engine: Any, ch: list[ZSet]) -> None:
    """cycle, with a join and a distinct in the loop body (a streaming transitive closure)."""
    c = _reach_loop()
    assert_incremental_matches(c, {"e": ch}, engine=engine)


@engine_given(spec_and_stream(kind="zset"), local=SETTINGS, spark=1)
def test_prop_3_2_cycle_linear_loop_is_its_own_incremental(
    engine: Any, ss: tuple[TableSpec, list[ZSet]]
) -> None:
    """cycle + Prop 2.16: a loop around an LTI body, o = s + map(filter(z^-1 o)), is LTI, hence equal to
    its incremental version (Thm 3.3): the same circuit, and D∘c∘I numerically."""
    spec, ch = ss
    first = spec.columns[0]
    t = spec.schema[first]
    c = dbspark.Circuit()
    s = c.input("s", spec.schema)
    fb = c.feedback(spec.schema)
    if t.is_integer():
        step = fb.stream.filter(col(first) < 3).map((first, col(first) + 1), *spec.columns[1:])
    else:
        step = fb.stream.filter(col(first).is_not_null())
        step = step - step.filter(lit(False))
    o = s + step
    fb.connect(o)
    c.output("o", o)
    qd = c.incrementalize()
    assert terms(qd) == terms(c)
    assert_incremental_matches(c, {"s": ch}, qd, engine=engine)


@engine_given(ab_streams(kind="zset", max_len=4), local=settings(SETTINGS, max_examples=12), spark=1)
def test_prop_3_2_incrementalizing_incremental_operators(engine: Any, ch: dict[str, list[ZSet]]) -> None:
    """Def 3.1 for a Q that already consumes changes (the incremental join and distinct are operators on
    streams like any other): Q^Δ = D∘Q∘I, via the bilinear rule on ⋈ with an integrated input and the
    definition rule on H."""
    q = double(lambda a, b: a.join(b, on="k").map("k", "x").distinct() + a.map("k", "x").distinct())
    assert_incremental_matches(q, ch, engine=engine)


# ---- Thm 3.3 and 3.4: linear and bilinear operators ------------------------------------------------------------------
def _no_time_ops(c: Circuit) -> bool:
    return not any(isinstance(n.op, (Integrate, Differentiate, Delay)) for n in c.nodes.values())


@engine_given(spec_and_stream(kind="zset"), st.data(), local=SETTINGS, spark=1)
def test_thm_3_3_linear_circuit_is_its_own_incremental(
    engine: Any, ss: tuple[TableSpec, list[ZSet]], data: st.DataObject
) -> None:
    """Thm 3.3: a circuit of filter, map, flat_map, index, plus and neg has Q^Δ = Q: the incrementalized
    circuit has no I, D or z^-1, is term-for-term the same, gives the same outputs on any stream, and
    equals D∘Q∘I numerically."""
    spec, ch = ss
    p = data.draw(predicates(spec.schema))
    m = data.draw(map_columns(spec.schema))
    q_ = data.draw(predicates(spec.schema))

    c = dbspark.Circuit()
    s = c.input("s", spec.schema)
    c.output("o", (s.filter(p).map(*m) - s.filter(q_).map(*m)).index(m[0][0]))
    c.output("twice", s.flat_map(ROW_FNS["twice"], spec.schema) + -s.filter(p))
    qd = c.incrementalize()
    assert _no_time_ops(qd), qd.explain()
    assert terms(qd) == terms(c)
    assert_streams_equal(
        run_stream(qd, {"s": ch}, engine=engine), run_stream(c, {"s": ch}, engine=engine), "Q^Δ vs Q"
    )
    assert_incremental_matches(c, {"s": ch}, qd, engine=engine)


@st.composite
def join_case(draw: st.DrawFn) -> tuple[TableSpec, TableSpec, str, dict[str, list[ZSet]]]:
    left, right, key = draw(join_specs())
    n = draw(st.integers(2, 5))
    ch = {
        "a": draw(change_streams(left, kind="zset", min_len=n, max_len=n)),
        "b": draw(change_streams(right, kind="zset", min_len=n, max_len=n)),
    }
    return left, right, key, ch


@engine_given(join_case(), local=SETTINGS, spark=1)
def test_thm_3_4_join(engine: Any, case: tuple[TableSpec, TableSpec, str, dict[str, list[ZSet]]]) -> None:
    """Thm 3.4 for ⋈: Q^Δ = D∘Q∘I numerically, and equals the three-term formula
    a⋈b + z^-1(I(a))⋈b + a⋈z^-1(I(b)) built from lifted operators."""
    left, right, key, ch = case
    q = double(lambda a, b: a.stream_join(b, on=key), left, right)
    got = assert_incremental_matches(q, ch, engine=engine)["o"]
    formula = double(
        lambda a, b: (
            a.stream_join(b, on=key)
            + a.integrate().delay().stream_join(b, on=key)
            + a.stream_join(b.integrate().delay(), on=key)
        ),
        left,
        right,
    )
    assert_streams_equal(
        got, run_stream(formula, ch, engine=engine)["o"], "(a⋈b)^Δ vs the three-term formula"
    )


# values each key type can hold, shared values first, so that a wider type meets out-of-range values
KEY_VALUES: dict[str, list] = {
    "int64": [-2, 0, 1, 100, 2**40],
    "int32": [-2, 0, 1, 100, 2**31 - 1],
    "int16": [-2, 0, 1, 100],
    "float64": [-2.0, 0.0, 1.0, 100.0, 0.1, 2.0**40],
    "float32": [-2.0, 0.0, 1.0, 100.0, 0.1],
    "decimal(10,2)": [-2, 0, 1, 100],
    "decimal(12,2)": [-2, 0, 1, 100, 10**9],
}
KEY_TYPE_PAIRS = [
    ("int64", "int32"),
    ("int32", "int64"),
    ("int64", "int16"),
    ("float64", "float64"),
    ("float32", "float64"),
    ("float64", "float32"),
    ("int64", "float64"),
    ("float64", "int32"),
    ("decimal(10,2)", "decimal(12,2)"),
]


@pytest.mark.parametrize(("left_type", "right_type"), KEY_TYPE_PAIRS)
@engine_given(data=st.data(), local=settings(SETTINGS, max_examples=6), spark=1)
def test_thm_3_4_join_keys_of_different_types(
    engine: Any, left_type: str, right_type: str, data: st.DataObject
) -> None:
    """Thm 3.4 for every join dbspark accepts: keys of two numeric types either make the join a
    SchemaError when it is built, or (↑⋈)^Δ = D∘↑⋈∘I — never a crash at run time, never a trace probe
    that misses matches the non-incremental join finds."""
    left = TableSpec.of(
        {"k": left_type, "a": "str"}, nullable=["k"], domains={"k": KEY_VALUES[left_type], "a": ["x", "y"]}
    )
    right = TableSpec.of({"j": right_type, "b": "int64"}, domains={"j": KEY_VALUES[right_type], "b": [0, 1]})
    try:
        q = double(lambda a, b: a.stream_join(b, left_on="k", right_on="j"), left, right)
    except dbspark.SchemaError:
        return
    n = data.draw(st.integers(2, 4))
    ch = {
        "a": data.draw(change_streams(left, kind="zset", min_len=n, max_len=n)),
        "b": data.draw(change_streams(right, kind="zset", min_len=n, max_len=n)),
    }
    assert_incremental_matches(q, ch, engine=engine)


@engine_given(st.data(), local=SETTINGS, spark=1)
def test_thm_3_4_product(engine: Any, data: st.DataObject) -> None:
    """Thm 3.4 for ×: Q^Δ = D∘Q∘I numerically, and equals the three-term formula."""
    left = data.draw(table_specs(max_cols=2))
    right = data.draw(table_specs(max_cols=2, names=("a", "e")))
    n = data.draw(st.integers(2, 4))
    ch = {
        "a": data.draw(change_streams(left, kind="zset", min_len=n, max_len=n)),
        "b": data.draw(change_streams(right, kind="zset", min_len=n, max_len=n)),
    }
    q = double(lambda a, b: a.stream_product(b), left, right)
    got = assert_incremental_matches(q, ch, engine=engine)["o"]
    formula = double(
        lambda a, b: (
            a.stream_product(b)
            + a.integrate().delay().stream_product(b)
            + a.stream_product(b.integrate().delay())
        ),
        left,
        right,
    )
    assert_streams_equal(
        got, run_stream(formula, ch, engine=engine)["o"], "(a×b)^Δ vs the three-term formula"
    )


# ---- Prop 4.5 and 4.6: moving and consolidating distinct on positive Z-sets -----------------------------------------
def _both(
    build1: Builder,
    build2: Builder,
    a: TableSpec,
    b: TableSpec,
    s: dict[str, list[ZSet]],
    what: str,
    engine: Any,
) -> None:
    """The two circuits built on the same inputs give the same stream (on `engine`)."""
    assert_streams_equal(
        run_stream(double(build1, a, b), s, engine=engine)["o"],
        run_stream(double(build2, a, b), s, engine=engine)["o"],
        what,
    )


@st.composite
def positive_pair(
    draw: st.DrawFn, join: bool = False, big: bool = False
) -> tuple[TableSpec, TableSpec, str, dict]:
    """Two tables (joinable on 'k' if `join`) and positive streams (bags) over them, of one length."""
    if join:
        left, right, key = draw(join_specs())
    else:
        left = draw(table_specs(max_cols=2))
        right = draw(table_specs(max_cols=2, names=("a", "e")))
        key = ""
    n = draw(st.integers(2, 4))
    s = {
        "a": draw(streams(left, draw(row_pools(left)), min_len=n, max_len=n, big=big, positive=True)),
        "b": draw(streams(right, draw(row_pools(right)), min_len=n, max_len=n, big=big, positive=True)),
    }
    return left, right, key, s


@engine_given(spec_and_stream(positive=True), st.data(), local=SETTINGS, spark=1)
def test_prop_4_5_filter(engine: Any, ss: tuple[TableSpec, list[ZSet]], data: st.DataObject) -> None:
    """Prop 4.5, σ: σ(distinct(i)) = distinct(σ(i)) for positive i."""
    spec, s = ss
    p = data.draw(predicates(spec.schema))
    _both(
        lambda a, b: a.stream_distinct().filter(p),
        lambda a, b: a.filter(p).stream_distinct(),
        spec,
        spec,
        {"a": s},
        "σ∘distinct vs distinct∘σ",
        engine=engine,
    )


@engine_given(positive_pair(join=True), local=SETTINGS, spark=1)
def test_prop_4_5_join(engine: Any, case: tuple) -> None:
    """Prop 4.5, ⋈: distinct(a) ⋈ distinct(b) = distinct(a ⋈ b) for positive a, b (NULL keys included)."""
    left, right, key, s = case
    _both(
        lambda a, b: a.stream_distinct().stream_join(b.stream_distinct(), on=key),
        lambda a, b: a.stream_join(b, on=key).stream_distinct(),
        left,
        right,
        s,
        "⋈∘distinct vs distinct∘⋈",
        engine=engine,
    )


@engine_given(positive_pair(), local=SETTINGS, spark=1)
def test_prop_4_5_product(engine: Any, case: tuple) -> None:
    """Prop 4.5, ×: distinct(a) × distinct(b) = distinct(a × b) for positive a, b."""
    left, right, _, s = case
    _both(
        lambda a, b: a.stream_distinct().stream_product(b.stream_distinct()),
        lambda a, b: a.stream_product(b).stream_distinct(),
        left,
        right,
        s,
        "×∘distinct vs distinct∘×",
        engine=engine,
    )


def test_prop_4_5_needs_positive_inputs(engine: Any) -> None:
    """The hypothesis of Prop 4.5 matters: with a = -x, b = -y, distinct(a) ⋈ distinct(b) = 0 but
    distinct(a ⋈ b) = {(x, y)}; so dbspark must not consolidate distincts over Z-set ('zset') inputs."""
    a_spec, b_spec = TableSpec.of({"k": "int64"}), TableSpec.of({"k": "int64", "v": "int64"})
    s = {
        "a": [ZSet.from_rows([(1,)], a_spec.schema, [-1])],
        "b": [ZSet.from_rows([(1, 2)], b_spec.schema, [-1])],
    }
    moved = run_stream(
        double(lambda a, b: a.stream_distinct().stream_join(b.stream_distinct(), on="k"), a_spec, b_spec),
        s,
        engine=engine,
    )["o"]
    direct = run_stream(
        double(lambda a, b: a.stream_join(b, on="k").stream_distinct(), a_spec, b_spec), s, engine=engine
    )["o"]
    assert moved[0].to_dict() == {} and direct[0].to_dict() == {(1, 2): 1}


@engine_given(spec_and_stream(positive=True), st.data(), local=SETTINGS, spark=1)
def test_prop_4_6_filter_and_map(engine: Any, ss: tuple[TableSpec, list[ZSet]], data: st.DataObject) -> None:
    """Prop 4.6, σ and map/π: distinct(Q(distinct(i))) = distinct(Q(i)) for positive i."""
    spec, s = ss
    p = data.draw(predicates(spec.schema))
    m = data.draw(map_columns(spec.schema))
    proj = data.draw(st.lists(st.sampled_from(spec.columns), min_size=1, unique=True))
    ops: list[tuple[str, Callable[[dbspark.Stream], dbspark.Stream]]] = [
        ("σ", lambda x: x.filter(p)),
        ("map", lambda x: x.map(*m)),
        ("π", lambda x: x.map(*proj)),
    ]
    for name, q in ops:
        _both(_distinct_q_distinct(q), _distinct_q(q), spec, spec, {"a": s}, name, engine=engine)


def _distinct_q_distinct(q: Callable[[dbspark.Stream], dbspark.Stream]) -> Builder:
    return lambda a, b: q(a.stream_distinct()).stream_distinct()


def _distinct_q(q: Callable[[dbspark.Stream], dbspark.Stream]) -> Builder:
    return lambda a, b: q(a).stream_distinct()


@engine_given(st.data(), local=SETTINGS, spark=1)
def test_prop_4_6_plus(engine: Any, data: st.DataObject) -> None:
    """Prop 4.6, +: distinct(distinct(a) + distinct(b)) = distinct(distinct(a) + b) = distinct(a + b)."""
    spec = data.draw(table_specs())
    pool = data.draw(row_pools(spec))
    n = data.draw(st.integers(2, 4))
    s = {k: data.draw(streams(spec, pool, min_len=n, max_len=n, positive=True)) for k in "ab"}
    want = run_stream(double(lambda a, b: (a + b).stream_distinct(), spec, spec), s, engine=engine)["o"]
    for name, build in (
        ("both", lambda a, b: (a.stream_distinct() + b.stream_distinct()).stream_distinct()),
        ("left", lambda a, b: (a.stream_distinct() + b).stream_distinct()),
    ):
        assert_streams_equal(run_stream(double(build, spec, spec), s, engine=engine)["o"], want, name)


@engine_given(positive_pair(join=True), local=SETTINGS, spark=1)
def test_prop_4_6_join(engine: Any, case: tuple) -> None:
    """Prop 4.6, ⋈: distinct(distinct(a) ⋈ distinct(b)) = distinct(a ⋈ b); one side only too."""
    left, right, key, s = case
    want = run_stream(
        double(lambda a, b: a.stream_join(b, on=key).stream_distinct(), left, right), s, engine=engine
    )["o"]
    for name, build in (
        ("both", lambda a, b: a.stream_distinct().stream_join(b.stream_distinct(), on=key).stream_distinct()),
        ("left", lambda a, b: a.stream_distinct().stream_join(b, on=key).stream_distinct()),
    ):
        assert_streams_equal(run_stream(double(build, left, right), s, engine=engine)["o"], want, name)


@engine_given(positive_pair(), local=SETTINGS, spark=1)
def test_prop_4_6_product(engine: Any, case: tuple) -> None:
    """Prop 4.6, ×: distinct(distinct(a) × distinct(b)) = distinct(a × b)."""
    left, right, _, s = case
    want = run_stream(
        double(lambda a, b: a.stream_product(b).stream_distinct(), left, right), s, engine=engine
    )["o"]
    got = run_stream(
        double(
            lambda a, b: a.stream_distinct().stream_product(b.stream_distinct()).stream_distinct(),
            left,
            right,
        ),
        s,
        engine=engine,
    )["o"]
    assert_streams_equal(got, want, "distinct∘×∘distinct vs distinct∘×")


T44 = TableSpec.of(
    {"a": "int64", "x": "int64", "id": "int64"},
    nullable=["x"],
    domains={"a": [-1, 1, 3], "x": [0, 1], "id": [0, 1, 2]},
)
R44 = TableSpec.of(
    {"s": "int64", "id": "int64", "y": "str"},
    nullable=["y", "id"],
    domains={"s": [0, 1, 6], "id": [0, 1, 2], "y": ["p", "q"]},
)


def _query_4_4(kind_t: str, kind_r: str) -> Circuit:
    """The §4.4 view: SELECT DISTINCT t1.x, t2.y FROM (SELECT x, id FROM t WHERE a > 0) t1 JOIN
    (SELECT id, y FROM r WHERE s > 0) t2 ON t1.id = t2.id, as step 1 of Algorithm 4.8 builds it: three
    distincts. (The paper's thresholds 2 and 5 are lowered to 0 so that random rows pass the filters.)"""
    c = dbspark.Circuit()
    t = c.input("t", T44.schema, kind=kind_t)
    r = c.input("r", R44.schema, kind=kind_r)
    t1 = t.filter(col("a") > 0).map("x", "id").stream_distinct()
    t2 = r.filter(col("s") > 0).map("id", "y").stream_distinct()
    c.output("v", t1.stream_join(t2, on="id").map("x", "y").stream_distinct())
    return c


@pytest.mark.parametrize(
    ("kind_t", "kind_r", "n_distinct"),
    [
        ("bag", "bag", 1),
        ("set", "set", 1),
        ("set", "bag", 1),
        ("bag", "zset", 2),
        ("zset", "zset", 3),
    ],
)
@engine_given(data=st.data(), local=settings(SETTINGS, max_examples=12), spark=1)
def test_prop_4_5_4_6_section_4_4_query(
    engine: Any, kind_t: str, kind_r: str, n_distinct: int, data: st.DataObject
) -> None:
    """Algorithm 4.8 step 2 on the §4.4 query: with bag/set inputs the three distincts consolidate into
    one H node (Prop 4.5, 4.6); a distinct over a 'zset' input must stay. Numerically Q^Δ = D∘Q∘I."""
    c = _query_4_4(kind_t, kind_r)
    qd = c.incrementalize()
    assert count_ops(qd, DistinctH) == n_distinct, qd.explain()
    assert count_ops(qd, StreamDistinct) == 0, qd.explain()
    n = data.draw(st.integers(2, 6))
    pt, pr = data.draw(row_pools(T44, 3, 8)), data.draw(row_pools(R44, 3, 8))
    ch = {
        "t": data.draw(change_streams(T44, pt, kind=kind_t, min_len=n, max_len=n)),
        "r": data.draw(change_streams(R44, pr, kind=kind_r, min_len=n, max_len=n)),
    }
    assert_incremental_matches(c, ch, qd, engine=engine)


# ---- Prop 4.7: the incremental distinct via H ------------------------------------------------------------------------
@engine_given(spec_and_stream(kind="zset", max_len=6), local=SETTINGS, spark=1)
def test_prop_4_7_H_circuit_equals_D_distinct_I(engine: Any, ss: tuple[TableSpec, list[ZSet]]) -> None:
    """Prop 4.7: (↑distinct)^Δ = ↑H(z^-1(I(d)), d); on changes with deletions, over-deletions and negative
    integrals, the H circuit equals D∘distinct∘I numerically (values compared at ZSet level too)."""
    spec, ch = ss
    c = single(lambda s: s.stream_distinct(), spec)
    qd = c.incrementalize()
    assert count_ops(qd, DistinctH) == 1 and count_ops(qd, StreamDistinct) == 0, qd.explain()
    got = assert_incremental_matches(c, {"s": ch}, qd, engine=engine)["o"]
    assert_streams_equal(
        got, differentiate_stream([z.distinct() for z in integrate_stream(ch)]), "H vs D∘distinct∘I"
    )


@engine_given(spec_and_stream(kind="zset", max_len=6), local=SETTINGS, spark=1)
def test_prop_4_7_incremental_distinct_operator(engine: Any, ss: tuple[TableSpec, list[ZSet]]) -> None:
    """The incremental operator `s.distinct()` built directly equals D∘distinct∘I computed on Z-sets."""
    spec, ch = ss
    got = run_stream(single(lambda s: s.distinct(), spec), {"s": ch}, engine=engine)["o"]
    assert_streams_equal(
        got, differentiate_stream([z.distinct() for z in integrate_stream(ch)]), "distinct()"
    )


@engine_given(st.data(), local=SETTINGS, spark=1)
def test_prop_4_7_H_definition(engine: Any, data: st.DataObject) -> None:
    """H(i, d)[x] = -1 if i[x] > 0 and (i+d)[x] <= 0; 1 if i[x] <= 0 and (i+d)[x] > 0; 0 otherwise —
    read off the second step of `distinct()` with i pushed first and d second."""
    spec = data.draw(table_specs())
    pool = data.draw(row_pools(spec))
    i = data.draw(zsets(spec, pool))
    d = data.draw(zsets(spec, pool))
    h = run_stream(single(lambda s: s.distinct(), spec), {"s": [i, d]}, engine=engine)["o"][1].to_dict()
    iw, nw = i.to_dict(), (i + d).to_dict()
    want = {}
    for x in set(iw) | set(nw):
        before, after = iw.get(x, 0), nw.get(x, 0)
        if before > 0 >= after:
            want[x] = -1
        elif before <= 0 < after:
            want[x] = 1
    assert h == want
