"""The correctness statement of DBSP (`dbsp-paper.txt` §3, Def 3.1, Algorithm 4.8; §4, §7).

For a circuit Q of lifted operators, Q^Δ = D ∘ Q ∘ I: fed the changes of the inputs, the integral of
its output (`view`) equals Q evaluated on the integrated inputs, at every step. The property tests
draw random circuits and change streams (`dbspark.testing.queries`); the deterministic tests check one
operator family at a time against the same oracle *and* against hand-computed contents, so that a
failure names the operator.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dbspark
from dbspark import col, lit
from dbspark.errors import SchemaError
from dbspark.testing.engines import engine_given
from dbspark.testing.oracle import assert_streams_equal, differentiate_stream, integrate_stream, run_stream
from dbspark.testing.queries import (
    LARGE_WEIGHT,
    LINEAR_FAMILIES,
    ChangeStream,
    TableSpec,
    assert_zsets_close,
    change_streams,
    derived_columns,
    expr_code,
    predicates,
    queries,
    queries_with_changes,
    run_against_oracle,
    zset_diff,
)

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ---- the property: random circuits, random change streams ------------------------------------------------
# on the spark engine with few examples (each step is a few Spark jobs)
@engine_given(queries_with_changes(), local=SETTINGS, spark=5)
def test_random_circuit_incremental_view_equals_query_on_integrated_inputs(engine, qc):
    q, changes = qc
    run_against_oracle(q.circuit, q.outputs, changes, engine=engine)


@engine_given(
    queries_with_changes(families=("aggregate", "join", "filter", "map", "distinct"), max_ops=3),
    local=30,
    spark=3,
)
def test_random_aggregate_circuits(engine, qc):
    q, changes = qc
    run_against_oracle(q.circuit, q.outputs, changes, engine=engine)


@engine_given(
    queries(families=tuple(LINEAR_FAMILIES), max_ops=4).flatmap(
        lambda q: change_streams(q.tables, large_weights=True).map(lambda ch: (q, ch))
    ),
    local=25,
    spark=3,
)
def test_random_linear_circuits_with_large_weights(engine, qc):
    q, changes = qc
    assert q.linear
    run_against_oracle(q.circuit, q.outputs, changes, engine=engine)


EXPR_SCHEMA = pl.Schema(
    {"k": pl.Int64, "a": pl.Int64, "b": pl.Int32, "s": pl.String, "f": pl.Float64, "t": pl.Boolean}
)
EXPR_ROWS = [
    (k, a, b, s, f, t)
    for k, a, b, s, f, t in zip(
        [0, 1, 2, 3, None, 1, 2, 0],
        [-3, -1, 0, 5, 2, None, 1, 0],
        [0, 1, 2, 3, 0, 2, None, 1],
        ["p", "", None, "q", "r", "p", "q", "r"],
        [-1.5, 0.0, 2.5, None, 0.25, -0.5, 1.0, 0.0],
        [True, False, None, True, False, True, None, False],
        strict=True,
    )
]
C = {n: col(n) for n in EXPR_SCHEMA}
EDGE_EXPRS = [
    C["a"] // C["b"],
    C["a"] % C["b"],
    C["a"] / C["b"],
    C["f"] // C["f"],
    C["f"] % C["f"],
    C["f"] / C["f"],
    C["f"] // lit(0.0),
    C["f"] % lit(0.0),
    C["a"] // lit(0),
    C["a"] % lit(0),
    C["b"] // C["a"],
    C["b"] % C["a"],
    C["f"] // C["b"],
    C["f"] % C["b"],
    -C["f"],
    C["a"].abs(),
    C["a"] * C["f"],
    C["a"].eq(C["f"]),
    C["a"] < C["f"],
    ~C["t"],
    C["t"] & C["a"].is_null(),
    C["t"] | (C["f"] > 0),
]


@pytest.mark.spark
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(derived_columns(EXPR_SCHEMA), predicates(EXPR_SCHEMA)), min_size=20, max_size=40))
def test_expressions_agree_with_the_local_engine(spark_engine, exprs):
    # one map of many columns: the spark engine's compiled expressions equal the local ones row by row
    # (three-valued logic, NULL propagation, floor division and modulo by zero, NaN and infinities)
    from dbspark.engines.local.kernel import LocalKernel

    named = [(f"e{i}", e) for i, e in enumerate([*EDGE_EXPRS, *exprs])]
    out = pl.Schema(
        [(n, e.dtype(EXPR_SCHEMA) if e.dtype(EXPR_SCHEMA) != pl.Null() else pl.Int64()) for n, e in named]
    )
    sk, lk = spark_engine(), LocalKernel()
    weights = list(range(1, len(EXPR_ROWS) + 1))  # distinct weights: rows stay apart in the comparison
    local = lk.map(lk.input_batch(EXPR_ROWS, EXPR_SCHEMA, weights, "t"), named, out)
    spark = sk.map(sk.input_batch(EXPR_ROWS, EXPR_SCHEMA, weights, "t"), named, out)
    assert_zsets_close(sk.to_local(spark), local, f"expressions {[expr_code(e) for _, e in named]}")


# ---- the comparison helper itself ------------------------------------------------------------------------
def test_zset_comparison_tolerates_float_rounding_only():
    assert zset_diff({(1, 0.1 + 0.2): 1}, {(1, 0.3): 1}) == ([], [])
    assert zset_diff({(1, 0.3): 2}, {(1, 0.3): 1}) != ([], [])  # weights are exact
    assert zset_diff({(1, 0.31): 1}, {(1, 0.3): 1}) != ([], [])
    assert zset_diff({(2, 0.3): 1}, {(1, 0.3): 1}) != ([], [])  # non-float values are exact
    assert zset_diff({(1, None): 1}, {(1, 0.0): 1}) != ([], [])
    assert zset_diff({(True,): 1}, {(1,): 1}) != ([], [])
    assert zset_diff({(1.0, 2.0): 1, (1.0, 2.0 + 1e-12): 1}, {(1.0, 2.0): 1, (1.0 + 1e-13, 2.0): 1}) == (
        [],
        [],
    )


# ---- one operator family at a time -------------------------------------------------------------------------
T = TableSpec("t", (("k", "int64"), ("a", "int64"), ("s", "str")), "bag")
U = TableSpec("u", (("k", "int64"), ("b", "int64")), "bag")

# t after the steps:  0: {(1,10,x):2, (2,20,y), (None,5,None)}  1: {(1,10,x):2, (None,5,None), (3,None,z)}
# 2: unchanged  3: {(1,10,x), (None,5,None), (3,None,z)}  4: {}
# u: 0: {(1,100), (3,300), (None,0)}  1: {(1,100), (None,0), (2,200)}  3: + (1,101)  4: unchanged
FIXED = ChangeStream(
    (T, U),
    [
        {
            "t": [((1, 10, "x"), 1), ((2, 20, "y"), 1), ((None, 5, None), 1), ((1, 10, "x"), 1)],
            "u": [((1, 100), 1), ((3, 300), 1), ((None, 0), 1)],
        },
        {"t": [((2, 20, "y"), -1), ((3, None, "z"), 1)], "u": [((3, 300), -1), ((2, 200), 1)]},
        {},
        {"t": [((1, 10, "x"), -1)], "u": [((1, 101), 1)]},
        {"t": [((1, 10, "x"), -1), ((None, 5, None), -1), ((3, None, "z"), -1)]},
    ],
)


def views(
    engine: Any,
    build: Callable[[dbspark.Stream, dbspark.Stream], dbspark.Stream],
    changes: ChangeStream = FIXED,
) -> list[dict[tuple, int]]:
    """Check Q^Δ (on `engine`) against the oracle Q (on the local engine: the engines must agree) at
    every step; return the view of 'out' after each step. (Q's lifted operators on the spark engine
    are checked against the local ones by `test_lifted_operators_agree_with_the_local_engine` and by
    the random circuits above.)"""
    c = dbspark.Circuit()
    t = c.input("t", T.schema, kind=T.kind)
    u = c.input("u", U.schema, kind=U.kind)
    c.output("out", build(t, u))
    return [
        v.to_dict()
        for v in run_against_oracle(c, ["out"], changes, engine=engine, oracle_engine="local")["out"]
    ]


def test_filter_comparison_and_null(engine):
    v = views(engine, lambda t, u: t.filter((col("a") > 5) | col("s").is_null()))
    assert v[1] == {(1, 10, "x"): 2, (None, 5, None): 1}
    assert v[4] == {}


def test_filter_three_valued_logic_drops_null(engine):
    # a > 5 is NULL for a = NULL: the row is dropped, and NOT(NULL) is NULL too
    v = views(engine, lambda t, u: t.filter(~(col("a") > 5)))
    assert v[1] == {(None, 5, None): 1}
    v = views(engine, lambda t, u: t.filter(col("k").ne(lit(1)) & col("s").is_not_null()))
    assert v[1] == {(3, None, "z"): 1}
    assert v[3] == {(3, None, "z"): 1}


def test_map_arithmetic_propagates_null(engine):
    v = views(engine, lambda t, u: t.map("k", x=col("a") * 2 + col("k"), h=col("a") / 4, m=col("a") % 3))
    assert v[1] == {(1, 21, 2.5, 1): 2, (None, None, 1.25, 2): 1, (3, None, None, None): 1}


def test_projection_keeps_bag_multiplicities(engine):
    v = views(engine, lambda t, u: t.map("k"))
    assert v[1] == {(1,): 2, (None,): 1, (3,): 1}
    assert v[3] == {(1,): 1, (None,): 1, (3,): 1}


def test_flat_map(engine):
    def repeat(row):  # a row twice when a > 6, once otherwise (a NULL a too); as a tuple or as a dict
        return (
            [(row["k"], row["s"])] * 2
            if row["a"] is not None and row["a"] > 6
            else [{"s": row["s"], "k": row["k"]}]
        )

    v = views(engine, lambda t, u: t.flat_map(repeat, {"k": "int64", "s": "str"}))
    assert v[0] == {(1, "x"): 4, (2, "y"): 2, (None, None): 1}
    assert v[1] == {(1, "x"): 4, (None, None): 1, (3, "z"): 1}
    assert v[4] == {}


def test_flat_map_producing_rows_of_the_wrong_width_is_rejected(engine):
    def bad(row):
        return [(row["k"],)]

    c = dbspark.Circuit()
    c.output("out", c.input("t", T.schema).flat_map(bad, {"k": "int64", "s": "str"}))
    r = c.run(engine)
    r.insert("t", [(1, 10, "x")])
    with pytest.raises(SchemaError, match=r"flat_map produced \(1,\), expected 2 values"):
        r.step()
    assert r.time == 0


def test_plus_and_minus(engine):
    v = views(engine, lambda t, u: t.map("k") + u.map("k"))
    assert v[1] == {(1,): 3, (None,): 2, (3,): 1, (2,): 1}
    v = views(engine, lambda t, u: t.map("k") - u.map("k"))
    assert v[1] == {(1,): 1, (3,): 1, (2,): -1}
    v = views(engine, lambda t, u: -t.filter(col("k").eq(1)))
    assert v[1] == {(1, 10, "x"): -2}


def test_join_on_key_multiplies_weights_and_skips_null_keys(engine):
    v = views(engine, lambda t, u: t.stream_join(u, on="k"))
    assert v[0] == {(1, 10, "x", 100): 2}
    assert v[1] == {(1, 10, "x", 100): 2}
    assert v[3] == {(1, 10, "x", 100): 1, (1, 10, "x", 101): 1}
    assert v[4] == {}


def test_join_left_on_right_on_suffixes_clashing_names(engine):
    v = views(engine, lambda t, u: t.stream_join(u, left_on="a", right_on="b"))
    assert v[0] == {}
    v = views(engine, lambda t, u: u.stream_join(t, left_on="b", right_on="a"))
    assert v[0] == {}
    v = views(engine, lambda t, u: t.map("k", "a").stream_join(u.map("k", "b"), left_on="k", right_on="k"))
    assert v[3] == {(1, 10, 1, 100): 1, (1, 10, 1, 101): 1}


def test_self_join(engine):
    v = views(engine, lambda t, u: t.map("k", "s").stream_join(t.map("k", "a"), on="k"))
    assert v[1] == {(1, "x", 10): 4, (3, "z", None): 1}


def test_product(engine):
    v = views(engine, lambda t, u: t.map("k").stream_product(u.map("b")))
    assert v[0] == {
        (1, 100): 2,
        (1, 300): 2,
        (1, 0): 2,
        (2, 100): 1,
        (2, 300): 1,
        (2, 0): 1,
        (None, 100): 1,
        (None, 300): 1,
        (None, 0): 1,
    }
    assert v[4] == {}


def test_distinct(engine):
    v = views(engine, lambda t, u: t.map("k").stream_distinct())
    assert v[1] == {(1,): 1, (None,): 1, (3,): 1}
    v = views(
        engine, lambda t, u: (t.map("k") - u.map("k")).stream_distinct()
    )  # negative weights are dropped
    assert v[1] == {(1,): 1, (3,): 1}


def test_semijoin_and_antijoin(engine):
    v = views(engine, lambda t, u: t.stream_semijoin(u, on="k"))
    assert v[1] == {(1, 10, "x"): 2}
    v = views(engine, lambda t, u: t.stream_antijoin(u, on="k"))
    assert v[1] == {(None, 5, None): 1, (3, None, "z"): 1}
    v = views(engine, lambda t, u: u.stream_semijoin(t, on="k"))  # a key matched twice counts once
    assert v[3] == {(1, 100): 1, (1, 101): 1}


@pytest.mark.parametrize(
    "func, step1",
    [
        ("count", {(1, 2): 1, (None, 1): 1, (3, 0): 1}),
        ("sum", {(1, 20): 1, (None, 5): 1, (3, None): 1}),
        ("avg", {(1, 10.0): 1, (None, 5.0): 1, (3, None): 1}),
        ("min", {(1, 10): 1, (None, 5): 1, (3, None): 1}),
        ("max", {(1, 10): 1, (None, 5): 1, (3, None): 1}),
        ("median", {(1, 10.0): 1, (None, 5.0): 1, (3, None): 1}),
        ("mode", {(1, 10): 1, (None, 5): 1, (3, None): 1}),
        ("var_samp", {(1, 0.0): 1, (None, None): 1, (3, None): 1}),
        ("var_pop", {(1, 0.0): 1, (None, 0.0): 1, (3, None): 1}),
        ("stddev_samp", {(1, 0.0): 1, (None, None): 1, (3, None): 1}),
        ("stddev_pop", {(1, 0.0): 1, (None, 0.0): 1, (3, None): 1}),
    ],
)
def test_grouped_aggregate(func, step1, engine):
    v = views(engine, lambda t, u: t.stream_aggregate(by="k", r=(func, "a")))
    assert v[1] == step1
    assert v[4] == {}


def test_count_star_and_global_aggregate_on_empty_input(engine):
    v = views(
        engine,
        lambda t, u: t.stream_aggregate(
            n="count", c=("count", "a"), s=("sum", "a"), lo=("min", "s"), md=("median", "a")
        ),
    )
    assert v[0] == {(4, 4, 45, "x", 10.0): 1}
    assert v[1] == {(4, 3, 25, "x", 10.0): 1}
    assert v[4] == {(0, 0, None, None, None): 1}


def test_aggregate_of_joined_and_filtered_stream(engine):
    def q(t, u):
        j = t.stream_join(u, on="k").filter(col("b") > 0)
        return j.stream_aggregate(
            by="s", n="count", total=("sum", "b"), md=("median", "b"), sd=("stddev", "b")
        )

    v = views(engine, q)
    assert v[1] == {("x", 2, 200, 100.0, 0.0): 1}
    got = v[3]
    assert list(got) and got[next(iter(got))] == 1
    (row,) = got
    assert row[:4] == ("x", 2, 201, 100.5)
    assert abs(row[4] - 0.7071067811865476) < 1e-12


def test_aggregate_on_string_and_bool_columns(engine):
    v = views(
        engine,
        lambda t, u: t.map("s", pos=col("a") > 6).stream_aggregate(
            by="pos", lo=("min", "s"), hi=("max", "s"), md=("median", "s"), mo=("mode", "s")
        ),
    )
    assert v[1] == {
        (True, "x", "x", "x", "x"): 1,
        (False, None, None, None, None): 1,
        (None, "z", "z", "z", "z"): 1,
    }


def test_nested_distinct_chain_is_consolidated_and_correct(engine):
    # the §4.4 shape: distinct of a join of distincts (Prop 4.5 / 4.6 drop the inner ones for bags)
    def q(t, u):
        return (
            t.map("k")
            .stream_distinct()
            .stream_join(u.map("k", "b").stream_distinct(), on="k")
            .stream_distinct()
        )

    v = views(engine, q)
    assert v[1] == {(1, 100): 1}
    assert v[3] == {(1, 100): 1, (1, 101): 1}


def test_aggregate_feeding_a_join(engine):
    def q(t, u):
        counts = t.stream_aggregate(by="k", n="count")
        return counts.stream_join(u, on="k")

    v = views(engine, q)
    assert v[1] == {(1, 2, 100): 1}
    assert v[3] == {(1, 1, 100): 1, (1, 1, 101): 1}


def test_delay_integrate_differentiate_and_a_feedback_loop(engine):
    # the time operators on a raw stream of Z-sets (inputs of kind zset, so weights may go negative):
    # z^-1 shifts by one step, I sums, D takes differences, and fix α. s + z^-1(α) is I (Def 2.19)
    c = dbspark.Circuit()
    t = c.input("t", T.schema)
    fb = c.feedback(t.schema)
    alpha = t + fb.stream
    fb.connect(alpha)
    c.output("z", t.delay())
    c.output("i", t.integrate())
    c.output("d", t.differentiate())
    c.output("di", t.differentiate().integrate())
    c.output("zi", t.integrate().delay())
    c.output("loop", alpha)
    stream = [
        dbspark.ZSet.from_rows([r for r, _ in st.get("t", [])], t.schema, [w for _, w in st.get("t", [])])
        for st in FIXED.steps
    ]
    stream[2] = -stream[1]  # a step whose change undoes the previous one
    out = run_stream(c, {"t": stream}, engine=engine)
    empty = dbspark.ZSet.empty(stream[0].schema)
    assert_streams_equal(out["z"], [empty, *[z.consolidate() for z in stream[:-1]]], "z^-1")
    assert_streams_equal(out["i"], integrate_stream(stream), "I")
    assert_streams_equal(out["d"], differentiate_stream(stream), "D")
    assert_streams_equal(out["di"], [z.consolidate() for z in stream], "I(D(s))")
    assert_streams_equal(out["zi"], [empty, *integrate_stream(stream)[:-1]], "z^-1(I(s))")
    assert_streams_equal(out["loop"], integrate_stream(stream), "fix α. s + z^-1(α)")
    assert out["i"][1].to_dict() == {(1, 10, "x"): 2, (None, 5, None): 1, (3, None, "z"): 1}


@pytest.mark.spark
def test_lifted_operators_agree_with_the_local_engine(spark_engine):
    # Q's lifted operators (each step's whole relations in, no state) on the spark engine equal the
    # local engine's, at steps 1 and 3 of FIXED; `views` runs these as the oracle on the local engine
    c = dbspark.Circuit()
    t = c.input("t", T.schema, kind=T.kind)
    u = c.input("u", U.schema, kind=U.kind)
    c.output("join", t.stream_join(u, on="k"))
    c.output("join_lr", t.map("k", "a").stream_join(u, left_on="a", right_on="b"))
    c.output("product", t.map("k").stream_product(u.map("b")))
    c.output("distinct", (t.map("k") - u.map("k")).stream_distinct())
    c.output("semi", t.stream_semijoin(u, on="k"))
    c.output("anti", t.stream_antijoin(u, on="k"))
    c.output(
        "agg",
        t.stream_aggregate(
            by="k",
            n="count",
            s=("sum", "a"),
            lo=("min", "s"),
            md=("median", "a"),
            mo=("mode", "a"),
            sd=("stddev", "a"),
        ),
    )
    c.output("global", t.stream_aggregate(n="count", av=("avg", "a"), hi=("max", "s")))
    contents = FIXED.contents()
    spark, local = c.run(spark_engine, snapshots=True), c.run(snapshots=True)
    for step in (1, 3):
        for r in (spark, local):
            for name, cur in contents[step].items():
                if cur:
                    r.push(name, list(cur), list(cur.values()))
        got, expected = spark.step(), local.step()
        for o in c.outputs:
            assert_zsets_close(spark.kernel.to_local(got[o]), expected[o], f"step {step}, output {o!r}")
    assert expected["agg"].to_dict() == {
        (1, 1, 10, "x", 10.0, 10, None): 1,
        (None, 1, 5, None, 5.0, 5, None): 1,
        (3, 1, None, "z", None, None, None): 1,
    }  # step 3: (1, 10, 'x') once


def test_views_with_large_weights_on_linear_circuit(engine):
    ch = ChangeStream(
        (T, U),
        [
            {"t": [((1, 10, "x"), LARGE_WEIGHT), ((1, 10, "x"), LARGE_WEIGHT)]},
            {"t": [((1, 10, "x"), -LARGE_WEIGHT + 1)]},
        ],
    )
    v = views(engine, lambda t, u: t.filter(col("a") > 0).map("k", y=col("a") + 1) - u.map("k", y="b"), ch)
    assert v[0] == {(1, 11): 2 * LARGE_WEIGHT}
    assert v[1] == {(1, 11): LARGE_WEIGHT + 1}


def test_assert_zsets_close_reports_differences():
    a = dbspark.ZSet.from_dict({(1, 0.5): 1}, {"k": pl.Int64, "x": pl.Float64})
    b = dbspark.ZSet.from_dict({(1, 0.5 + 1e-15): 1}, a.schema)
    assert_zsets_close(a, b)
    c = dbspark.ZSet.from_dict({(1, 0.6): 1}, a.schema)
    with pytest.raises(AssertionError, match="missing"):
        assert_zsets_close(a, c)
