"""Adaptive placement on the spark engine (`engines.spark.placement`): a step's pushed DataFrames are
read into the driver when small (one Spark job for all of them) and stay on Spark when large, and the
two kinds of step interleave on the same state files. The oracle is the local engine's pipeline fed
the same changes (itself checked against DuckDB by the shared suite)."""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Iterator
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dbspark
from dbspark.columnar import ranked_fold
from dbspark.errors import DbsparkError, EngineError
from dbspark.testing.datalog import REACH_FROM_ROOTS

pytestmark = pytest.mark.spark

SQL = """
CREATE TABLE r(k BIGINT, g BIGINT);
CREATE TABLE s(k BIGINT, v BIGINT);
CREATE TABLE t(g BIGINT, x BIGINT, f DOUBLE, b BOOLEAN, s VARCHAR);
CREATE VIEW agg AS SELECT g, COUNT(*) AS n, SUM(v) AS sv, MIN(v) AS lo FROM r JOIN s USING (k) GROUP BY g;
CREATE VIEW big AS SELECT DISTINCT r.g, s.v * 2 AS v2 FROM r JOIN s ON r.k = s.k WHERE s.v > 1;
CREATE VIEW lin AS SELECT g, COUNT(*) AS n, COUNT(x) AS nx, SUM(x) AS sx, AVG(x) AS ax, VAR_SAMP(x) AS vx,
  STDDEV_POP(x) AS dx, SUM(f) AS sf, AVG(f) AS af, VAR_POP(f) AS vf, STDDEV_SAMP(f) AS df, COUNT(b) AS nb,
  SUM(b) AS sb
  FROM t GROUP BY g;
CREATE VIEW whole AS SELECT COUNT(*) AS n, SUM(x) AS sx, AVG(f) AS af, VAR_SAMP(x) AS vx FROM t;
CREATE VIEW ord AS SELECT g, MIN(x) AS lo, MAX(x) AS hi, MAX(b) AS mb, MIN(s) AS ls, MAX(s) AS hs,
  COUNT(*) AS n, SUM(x) AS sx, AVG(x) AS ax FROM t GROUP BY g;
CREATE VIEW med AS SELECT g, MEDIAN(x) AS md, MIN(x) AS lo, COUNT(*) AS n FROM t GROUP BY g;
CREATE VIEW ordall AS SELECT MIN(s) AS ls, MAX(x) AS hi, COUNT(s) AS ns FROM t;
CREATE VIEW gen AS SELECT g, MODE(x) AS mo, MIN(f) AS lf, MAX(f) AS hf, MEDIAN(f) AS mf, SUM(f) AS sf,
  MODE(s) AS ms, COUNT(*) AS n FROM t GROUP BY g;
CREATE VIEW top AS SELECT g, x, s FROM t ORDER BY x DESC NULLS LAST, g LIMIT 2;
CREATE TABLE m(g BIGINT, d DECIMAL(15,2), e DECIMAL(18,6));
CREATE VIEW dec AS SELECT g, SUM(d) AS sd, AVG(d) AS ad, COUNT(e) AS ce, SUM(e) AS se, AVG(e) AS ae,
  COUNT(*) AS n FROM m GROUP BY g;
CREATE VIEW decall AS SELECT SUM(d) AS sd, AVG(e) AS ae FROM m;
"""
VIEWS = ("agg", "big", "lin", "whole", "ord", "ordall", "med", "gen", "top", "dec", "decall")
COLUMNS = {"r": ("k", "g"), "s": ("k", "v"), "t": ("g", "x", "f", "b", "s"), "m": ("g", "d", "e")}
DTYPES = {
    "k": "int64",
    "g": "int64",
    "v": "int64",
    "x": "Int64",
    "f": "float64",
    "b": "boolean",
    "s": "object",
    "d": "object",
    "e": "object",
}


@pytest.fixture
def placement_conf(spark_session: Any) -> Iterator[Any]:
    """The shared session, its placement settings unset again after the test."""
    yield spark_session.conf
    for k in ("spark.dbspark.placement", "spark.dbspark.driver_rows"):
        spark_session.conf.unset(k)


def _frame(spark: Any, rows: list[tuple], cols: tuple[str, ...]) -> Any:
    df = pd.DataFrame(rows, columns=list(cols)).astype({c: DTYPES[c] for c in cols})
    return spark.createDataFrame(df)


pair = st.tuples(st.integers(0, 6), st.integers(0, 3))
# (floats are multiples of 1/4: their sums are exact in any order, so both engines' views are equal)
quad = st.tuples(
    st.integers(0, 2),
    st.none() | st.integers(-(10**12), 10**12),
    st.integers(-40, 40).map(lambda q: q / 4),
    st.none() | st.booleans(),
    st.none() | st.sampled_from(["", "a", "b", "ü", "B"]),
)
# DECIMALs near their types' bounds too: the driver's sums are exact, as Spark's
dec = st.tuples(
    st.integers(0, 2),
    st.none() | st.integers(-(10**13), 10**13).map(lambda u: decimal.Decimal(u).scaleb(-2)),
    st.none() | st.integers(-(10**18) + 1, 10**18 - 1).map(lambda u: decimal.Decimal(u).scaleb(-6)),
)
step = st.tuples(
    st.sampled_from(["auto", "driver", "cluster"]),
    st.integers(0, 4),  # driver_rows
    st.fixed_dictionaries(
        {
            "r": st.lists(pair, max_size=4),
            "s": st.lists(pair, max_size=4),
            "t": st.lists(quad, max_size=4),
            "m": st.lists(dec, max_size=4),
        }
    ),  # inserts
    st.fixed_dictionaries({t: st.lists(st.integers(0, 50), max_size=3) for t in COLUMNS}),  # deletes
)


@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
@given(steps=st.lists(step, min_size=2, max_size=4), big=st.sampled_from([1, ranked_fold.BIG]))
def test_steps_placed_either_way_interleave_and_equal_the_local_engine(
    spark_session: Any, placement_conf: Any, tmp_path_factory: Any, steps: list, big: int
) -> None:
    """Each step is placed by a random setting: joins, DISTINCT, MIN and linear aggregates (grouped and
    global, over integers with NULLs, doubles and booleans), MODE, MEDIAN and floating MIN / MAX beside
    a floating SUM step in the driver or on Spark on the same state, and a row emitted by one kind of
    step is retracted exactly by the other. With `big` 1, every
    MIN / MAX / MEDIAN group stepped in the driver is ranked over its runs (`ranked_fold`)."""
    default_big, ranked_fold.BIG = ranked_fold.BIG, big
    d = tmp_path_factory.mktemp("placement")
    sp = dbspark.Pipeline(d / "spark", engine="spark", spark=spark_session)
    lp = dbspark.Pipeline(d / "local", engine="local")
    cur: dict[str, list[tuple]] = {t: [] for t in COLUMNS}
    placed = []
    try:
        for p in (sp, lp):
            p.sql(SQL)
        for mode, limit, inserts, deletes in steps:
            placement_conf.set("spark.dbspark.placement", mode)
            placement_conf.set("spark.dbspark.driver_rows", str(limit))
            pushed = 0
            for t, cols in COLUMNS.items():
                ins = inserts[t]
                gone = sorted({i % len(cur[t]) for i in deletes[t]}) if cur[t] else []
                out = [cur[t][i] for i in gone]
                for p in (sp, lp):
                    if ins:
                        p.insert(t, _frame(spark_session, ins, cols) if p is sp else ins)
                    if out:
                        p.delete(t, _frame(spark_session, out, cols) if p is sp else out)
                pushed += bool(ins) + bool(out)
                cur[t] = [x for i, x in enumerate(cur[t]) if i not in gone] + list(ins)
            sp.step()
            lp.step()
            kernel = sp.runtime.kernel  # type: ignore[union-attr]
            placed.append((mode, pushed, kernel.placed_to_driver))
            for v in VIEWS:
                assert sp.view(v).to_dict() == lp.view(v).to_dict(), (v, mode, limit)
        for mode, pushed, to_driver in placed:
            if mode == "driver":
                assert to_driver == pushed
            if mode == "cluster":
                assert to_driver == 0
    finally:
        ranked_fold.BIG = default_big
        sp.close()
        lp.close()


def test_a_bad_value_rejects_the_step_in_the_placement_job(spark_session: Any, placement_conf: Any, tmp_path):
    """The placement job reads the frames as coerced and checked for their table: a NULL in a NOT NULL
    column rejects the step there, nothing is applied, and the next step runs normally."""
    placement_conf.set("spark.dbspark.placement", "driver")
    with dbspark.Pipeline(tmp_path / "p", engine="spark", spark=spark_session) as p:
        p.sql("CREATE TABLE t(k INT NOT NULL, v BIGINT); CREATE VIEW n AS SELECT COUNT(*) AS n FROM t")
        p.insert("t", spark_session.createDataFrame(pd.DataFrame({"k": [1, 2], "v": [5, 6]})))
        p.step()
        p.insert("t", spark_session.createDataFrame(pd.DataFrame({"k": [3.0, None], "v": [1, 2]})))
        with pytest.raises(DbsparkError, match="step 2 rejected"):
            p.step()
        assert p.steps == 1 and p.view("n").to_rows() == [((2,), 1)]
        p.insert("t", spark_session.createDataFrame(pd.DataFrame({"k": [3], "v": [1]})))
        p.step()
        assert p.view("n").to_rows() == [((3,), 1)]


def test_an_unknown_placement_is_refused_by_name_and_the_changes_stay_queued(
    spark_session: Any, placement_conf: Any, tmp_path
):
    placement_conf.set("spark.dbspark.placement", "executors")
    with dbspark.Pipeline(tmp_path / "p", engine="spark", spark=spark_session) as p:
        p.sql("CREATE TABLE t(k BIGINT); CREATE VIEW n AS SELECT COUNT(*) AS n FROM t")
        p.insert("t", spark_session.createDataFrame(pd.DataFrame({"k": [1]})))
        with pytest.raises(EngineError, match="spark.dbspark.placement is 'executors'"):
            p.step()
        placement_conf.set("spark.dbspark.placement", "auto")  # fixed: the queued change is applied
        p.step()
        assert p.view("n").to_rows() == [((1,), 1)]


@pytest.mark.parametrize("mode", ["driver", "cluster"])
def test_odd_names_and_types_read_into_the_driver_equal_the_cluster(
    spark_session: Any, placement_conf: Any, tmp_path, mode: str
):
    """The placement read is SQL text over the frames' columns: quoted names (a dot, a backtick,
    a space), DECIMAL, DATE, TIMESTAMP, strings and NULLs come through as the cluster path reads them
    (the cluster path groups, joins and reads by those names: each is one column, not a nested field)."""
    placement_conf.set("spark.dbspark.placement", mode)
    rows = pd.DataFrame(
        {
            "k.1": [1, 2, 2, None],
            "a`b c": ["x", None, "ü", "y"],
            "d": [decimal.Decimal("1.25"), None, decimal.Decimal("-7.50"), decimal.Decimal("0.01")],
            "day": [datetime.date(2020, 1, 1), datetime.date(1969, 12, 31), None, datetime.date(2000, 2, 29)],
            "ts": [datetime.datetime(2020, 1, 1, 12, 30), None, datetime.datetime(1999, 1, 1), None],
        }
    )
    with dbspark.Pipeline(tmp_path / "p", engine="spark", spark=spark_session) as p:
        p.sql(
            'CREATE TABLE t("k.1" INT, "a`b c" VARCHAR, d DECIMAL(10, 2), day DATE, ts TIMESTAMP);'
            'CREATE VIEW v AS SELECT "k.1" AS k, "a`b c" AS s, SUM(d) AS d, MIN(day) AS day, MAX(ts) AS ts '
            'FROM t GROUP BY "k.1", "a`b c"'
        )
        p.insert("t", spark_session.createDataFrame(rows))
        p.step()
        p.delete("t", spark_session.createDataFrame(rows.iloc[[1]]))
        p.step()
        got = p.view("v").to_dict()
    D, dt = decimal.Decimal, datetime
    assert got == {
        (1, "x", D("1.25"), dt.date(2020, 1, 1), dt.datetime(2020, 1, 1, 12, 30)): 1,
        (2, "ü", D("-7.50"), None, dt.datetime(1999, 1, 1)): 1,
        (None, "y", D("0.01"), dt.date(2000, 2, 29), None): 1,
    }


KEYED = """
CREATE TABLE c (id BIGINT PRIMARY KEY, region BIGINT, boss BIGINT);
CREATE TABLE o (oid BIGINT PRIMARY KEY, cid BIGINT, amount BIGINT);
CREATE VIEW per_region AS SELECT region, count(*) AS n, sum(amount) AS s FROM o JOIN c ON o.cid = c.id
  GROUP BY region;
CREATE VIEW chain AS WITH RECURSIVE up(id, top) AS (SELECT id, boss FROM c WHERE boss IS NOT NULL
  UNION SELECT up.id, c.boss FROM up JOIN c ON up.top = c.id WHERE c.boss IS NOT NULL) SELECT * FROM up;
"""


def test_small_steps_of_keyed_tables_and_recursive_views_run_in_the_driver(spark_session: Any, tmp_path):
    """Upserts and deletes by key pushed from Python (a primary-key table's step, `operators.keyed`) and a
    recursive view over them (its scope's iterations over the engine's bucketed nested traces) step
    with no Spark job, and equal the local engine after every step, a DataFrame push among them."""
    sp = dbspark.Pipeline(tmp_path / "s", engine="spark", spark=spark_session)
    lo = dbspark.Pipeline(engine="local")
    for p in (sp, lo):
        p.sql(KEYED)
    steps: list[tuple[dict, dict]] = [
        (
            {
                "c": [(i, i % 3, i - 1 if i % 4 else None) for i in range(12)],
                "o": [(i, i % 12, i) for i in range(30)],
            },
            {},
        ),
        ({"c": [(5, 9, 1), (12, 0, 11)], "o": [(30, 12, 7)]}, {"o": [(3,), (4,)], "c": [(8,)]}),
        ({"c": [(8, 1, 6)]}, {"c": [(12,)], "o": [(30,)]}),
        ({}, {}),
    ]
    for n, (ins, dels) in enumerate(steps):
        for p in (sp, lo):
            for t, rows in dels.items():
                p.delete(t, rows)
            for t, rows in ins.items():
                p.insert(t, rows)
        assert sp.runtime is not None or n == 0
        before = sp.runtime.kernel.actions if sp.runtime is not None else 0
        sp.step()
        lo.step()
        if n:
            assert sp.runtime is not None and sp.runtime.kernel.actions == before, f"step {n} ran Spark jobs"
        for v in ("per_region", "chain"):
            assert sp.view(v).to_dict() == lo.view(v).to_dict(), f"{v} after step {n}"
    # a pushed DataFrame deletes and upserts keys in one frame (placed in the driver: deletes first)
    frame = spark_session.createDataFrame(
        pd.DataFrame({"id": [2, 2], "region": [7, 7], "boss": [0, 0], "weight": [-1, 1]})
    )
    sp.push("c", frame)
    lo.delete("c", [(2,)])
    lo.insert("c", [(2, 7, 0)])
    sp.step()
    lo.step()
    for v in ("per_region", "chain"):
        assert sp.view(v).to_dict() == lo.view(v).to_dict(), f"{v} after the DataFrame push"
    sp.close()


def test_a_recursive_view_steps_on_the_cluster(
    spark_session: Any, placement_conf: Any, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A recursive view's iterations on Spark (placement `cluster`), equal to the local engine: its
    nested DISTINCT's weight, a sum of sums, stays one small expression (compiled with DuckDB's checked
    arithmetic, Catalyst's filter pushdown inlined it exponentially: the step ran the heap out). Each
    iteration's feedback is computed once where it is placed (`Kernel.place(loop=True)`), so no later
    iteration recomputes the plans of the ones before."""
    from dbspark.engines.spark import placement

    feedback: list[int] = []
    computed = placement._computed
    monkeypatch.setattr(placement, "_computed", lambda k, b: feedback.append(1) or computed(k, b))
    placement_conf.set("spark.dbspark.placement", "cluster")
    sql = KEYED.replace("id BIGINT PRIMARY KEY", "id BIGINT")
    sp = dbspark.Pipeline(tmp_path / "s", engine="spark", spark=spark_session)
    lo = dbspark.Pipeline(engine="local")
    try:
        for p in (sp, lo):
            p.sql(sql)
        steps = [
            ([(i, 0, i - 1 if i else None) for i in range(5)], []),
            ([(5, 1, 2), (6, 1, 5)], [(3, 0, 2)]),
        ]
        for n, (ins, dels) in enumerate(steps):
            for p in (sp, lo):
                p.insert("c", ins)
                if dels:
                    p.delete("c", dels)
            feedback.clear()
            sp.step()
            lo.step()
            assert sp.view("chain").to_dict() == lo.view("chain").to_dict(), f"after step {n}"
            assert feedback, f"step {n}: no feedback computed where it was placed"
    finally:
        sp.close()
        lo.close()


SUMSQ = dbspark.UserAggregate("sumsq", f=lambda x: x * x, g=lambda a, b: a + b, d=lambda a, b: a - b)
PRODMOD = dbspark.UserAggregate("prodmod", f=lambda x: x % 97, g=lambda a, b: a * b % 97, dtype="int64")


@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    steps=st.lists(
        st.tuples(
            st.sampled_from(["driver", "cluster"]),
            st.lists(st.tuples(st.integers(0, 2), st.none() | st.integers(-5, 5)), max_size=6),
            st.lists(st.integers(0, 50), max_size=3),
        ),
        min_size=2,
        max_size=4,
    )
)
def test_user_aggregates_and_mode_fold_in_spark_tasks_as_in_the_driver(
    spark_session: Any, spark_engine: Any, placement_conf: Any, steps: list
) -> None:
    """User aggregates (their Python folds shipped to Spark's tasks; with an inverse, folded into their
    accumulators) and MODE, each step placed in the driver or on the cluster at random, equal the
    local engine after every step."""

    def build() -> Any:
        c = dbspark.Circuit()
        t = c.input("t", {"g": "int64", "x": "int64"})
        c.output("v", t.aggregate(by="g", sq=(SUMSQ, "x"), pm=(PRODMOD, "x"), mo=("mode", "x"), n="count"))
        c.output("all", t.aggregate(pm=(PRODMOD, "x"), mo=("mode", "x")))
        # with an inverse only: folded from accumulators (`columnar/user_fold.py`)
        c.output("inv", t.aggregate(by="g", sq=(SUMSQ, "x"), n="count", s=("sum", "x")))
        c.output("inv_all", t.aggregate(sq=(SUMSQ, "x")))
        return c

    sr, lr = build().run(spark_engine), build().run("local")
    cur: list[tuple] = []
    for mode, ins, dels in steps:
        placement_conf.set("spark.dbspark.placement", mode)
        gone = sorted({i % len(cur) for i in dels}) if cur else []
        out = [cur[i] for i in gone]
        rows, ws = ins + out, [1] * len(ins) + [-1] * len(out)
        if rows:
            df = pd.DataFrame(rows, columns=["g", "x"]).astype({"g": "int64", "x": "Int64"})
            df["weight"] = ws
            sr.push("t", spark_session.createDataFrame(df))
            lr.push("t", rows, ws)
        cur = [x for i, x in enumerate(cur) if i not in gone] + ins
        sr.step()
        lr.step()
        for v in ("v", "all", "inv", "inv_all"):
            assert sr.view(v).to_dict() == lr.view(v).to_dict(), (v, mode)


def test_a_plan_past_its_lineage_is_computed_once_where_it_is_first_read(
    spark_session: Any, placement_conf: Any, tmp_path
) -> None:
    """A value whose plan holds more copies of its leaves than `max_lineage` is computed (a local
    checkpoint, one job) when a later plan first reads it, once however many read it; made and never
    read it costs nothing. A recursive scope's feedback past the limit is computed once where it is
    placed: it was computed where it was made and checkpointed again by its placement (a reachability
    load of 20k edges on the cluster: 76 Spark jobs, 62 since), and its rows are counted by the same job,
    so that the scope's check for an empty feedback runs no job of its own (41 jobs since)."""
    import polars as pl

    from dbspark.algebra.zset import ZSet
    from dbspark.engines.spark import placement
    from dbspark.engines.spark.kernel import SparkKernel
    from dbspark.ir.expr import col

    schema = pl.Schema({"k": pl.Int64(), "v": pl.String()})
    placement_conf.set("spark.dbspark.placement", "cluster")
    k = SparkKernel(spark=spark_session, directory=tmp_path)
    try:
        rows = ZSet.from_rows([(1, "a"), (2, "b")], schema, [1, 1])

        def long(consolidated: bool = False) -> Any:
            z = k.from_local(rows)
            if consolidated:  # (its plan stands for a long one: only its lineage says so)
                return k._z(z.schema, z.frame, consolidated=True, lineage=k.max_lineage + 1)
            return k._z(z.schema, z.frame.unionByName(z.frame), lineage=k.max_lineage + 1)

        before = k.actions
        a = long()
        assert k.actions == before, "a plan past its limit was computed where it was made"
        x, y = k.neg(a), k.plus(a, a)  # two later plans read it: one cut, shared
        assert k.actions == before + 1 and a.lineage == 1 and x.lineage == 1 and y.lineage == 2
        assert x.to_zset().to_dict() == {(1, "a"): -2, (2, "b"): -2}
        assert y.to_zset().to_dict() == {(1, "a"): 4, (2, "b"): 4}
        b = long(consolidated=True)  # (a scope's feedback is consolidated)
        before = k.actions
        (fed,) = placement.place(k, [b], loop=True)  # a scope's feedback past the limit
        assert k.actions == before + 1, "the feedback was computed twice"
        # its rows were counted by that job: the scope's emptiness check of its feedback runs none
        assert not k.is_empty(fed) and k.actions == before + 1
        none = k.filter(long(consolidated=True), col("k") > 5)  # consolidated, no rows
        (gone,) = placement.place(k, [none], loop=True)
        before = k.actions
        assert k.is_empty(gone) and k.actions == before
        assert fed.lineage == 1 and fed.to_zset().to_dict() == {(1, "a"): 1, (2, "b"): 1}
    finally:
        k.close()


REACH = """
.decl edge(x: number, y: number)
.input edge
.decl reach(x: number)
.output reach
reach(x) :- edge(0, x).
reach(y) :- reach(x), edge(x, y).
"""


@pytest.mark.parametrize("first", ["auto", "cluster"])
def test_auto_goes_nested_at_a_change_left_on_the_cluster(
    spark_session: Any, placement_conf: Any, tmp_path: Any, first: str
) -> None:
    """Under `recursion="auto"` (the default) a monotone scope runs delete-and-rederive while its
    changes are held in the driver, and goes nested at the first one left on the cluster (built there
    from the imports' integrals, or from the change itself at the first step; its step's change is the
    new fixpoint less the old); the views equal the local engine's after every step."""
    sp = dbspark.Pipeline(tmp_path / "s", engine="spark", spark=spark_session)
    lo = dbspark.Pipeline(engine="local")
    steps = [
        (first, [(0, 1), (1, 2), (2, 3), (3, 1)], []),
        ("cluster", [(2, 4), (4, 5)], [(1, 2)]),
        ("auto", [(5, 2), (0, 6)], [(0, 1)]),
    ]
    try:
        for p in (sp, lo):
            p.datalog(REACH)
        for n, (mode, ins, dels) in enumerate(steps):
            placement_conf.set("spark.dbspark.placement", mode)
            for p in (sp, lo):
                frame = (
                    (lambda rows: spark_session.createDataFrame(pd.DataFrame(rows, columns=["x", "y"])))
                    if p is sp
                    else list
                )
                p.insert("edge", frame(ins))
                if dels:
                    p.delete("edge", frame(dels))
            got, want = sp.step(), lo.step()
            assert got["reach"].to_dict() == want["reach"].to_dict(), f"step {n}"
            assert sp.view("reach").to_dict() == lo.view("reach").to_dict(), f"step {n}"
            (scope,) = [s for s in sp.runtime.states.values() if hasattr(s, "switched_at")]  # type: ignore[union-attr]
            switched = n >= 1 or first == "cluster"
            assert (scope.switched_at is not None) == switched, f"step {n}: switched at {scope.switched_at}"
    finally:
        sp.close()
        lo.close()


RING = [(i, (i + 1) % 12) for i in range(12)] + [(0, 6), (3, 9), (6, 0), (12, 13)]  # a cycle and a tail


def _reach_from_0(*pipes: Any) -> None:
    """Each pipeline with reachability from roots, the root 0 inserted."""
    for p in pipes:
        p.datalog(REACH_FROM_ROOTS)
        p.insert("root", [(0,)])


def _edges(pipes: Any, ins: list, dels: list) -> None:
    """A step's edge changes pushed into each pipeline."""
    for p in pipes:
        if dels:
            p.delete("edge", dels)
        if ins:
            p.insert("edge", ins)


@pytest.mark.parametrize("limit", [None, 3])
def test_auto_recomputes_in_the_driver_or_goes_nested_with_large_imports(
    spark_session: Any, placement_conf: Any, tmp_path: Any, limit: int | None
) -> None:
    """Under `recursion="auto"` a step chosen for a recompute (forced here) reads the imports'
    integrals through the placement: held in the driver, the scope is recomputed there; larger than the
    driver takes (`driver_rows` of 3 against 16 edges), the scope goes nested on the cluster instead.
    The views equal the local engine's after every step."""
    sp = dbspark.Pipeline(tmp_path / "s", engine="spark", spark=spark_session)
    lo = dbspark.Pipeline(engine="local")
    steps = [(RING, []), ([(13, 14)], [(0, 6), (2, 3)]), ([(2, 3)], [(6, 7)])]
    try:
        _reach_from_0(sp, lo)
        for n, (ins, dels) in enumerate(steps):
            _edges((sp, lo), ins, dels)
            if n == 1:
                assert sp.runtime is not None
                (scope,) = [s for s in sp.runtime.states.values() if hasattr(s, "recomputed")]
                scope.skip = 1  # (this step recomputes)
                if limit is not None:
                    placement_conf.set("spark.dbspark.driver_rows", str(limit))
            sp.step()
            lo.step()
            assert sp.view("reach").to_dict() == lo.view("reach").to_dict(), f"after step {n}"
            if n >= 1:
                assert (scope.switched_at is not None) == (limit is not None), f"step {n}"
                assert scope.recomputed == ([] if limit is not None else [1]), scope.recomputed
    finally:
        sp.close()
        lo.close()


def test_a_global_aggregate_over_a_change_spark_proves_empty_has_its_row(
    spark_session: Any, placement_conf: Any
) -> None:
    """On the cluster, a filter Spark folds to FALSE (`c IS DISTINCT FROM c`) leaves a plan without any
    partition; a GROUP BY () still has its one row (COUNT 0) at the first step, as on the local engine
    (a sentinel row keeps the one group's task: `engines/spark/cogroup.py`; found by the evolving-views
    oracle, whose backfills read the tables' contents on the cluster)."""
    placement_conf.set("spark.dbspark.placement", "cluster")
    ddl = """CREATE TABLE t (k BIGINT, c BOOLEAN);
    CREATE VIEW n AS SELECT count(*) AS n FROM t WHERE c IS DISTINCT FROM c;
    CREATE VIEW d AS SELECT count(DISTINCT c) AS n FROM t WHERE c IS DISTINCT FROM c;
    CREATE VIEW s AS SELECT sum(k) AS s, count(k) AS m FROM t WHERE k IS DISTINCT FROM k;"""
    p = dbspark.Pipeline(engine="spark", spark=spark_session)
    try:
        p.sql(ddl)
        p.insert("t", spark_session.createDataFrame([(3, None), (2, True)], "k BIGINT, c BOOLEAN"))
        p.step()
        got = {v: p.view(v).to_dict() for v in p.views}
        assert got == {"n": {(0,): 1}, "d": {(0,): 1}, "s": {(None, 0): 1}}
    finally:
        p.close()


@pytest.mark.parametrize(
    ("master", "local"),
    [
        ("local", True),
        ("local[2]", True),
        ("local[*]", True),
        ("local-cluster[2,1,1024]", False),
        ("spark://host:7077", False),
        ("yarn", False),
        (None, False),
    ],
)
def test_the_driver_threshold_follows_the_master(master: str | None, local: bool) -> None:
    """On a `local[n]` master (the cluster's tasks are the driver's threads) a step holds up to
    `LOCAL_DRIVER_ROWS` rows in the driver, on any other `DRIVER_ROWS`; the setting overrides both."""
    from types import SimpleNamespace

    from dbspark.engines.spark.placement import DRIVER_ROWS, LOCAL_DRIVER_ROWS, driver_rows
    from dbspark.engines.spark.session import SessionHandle

    conf: dict[str, str] = {} if master is None else {"spark.master": master}
    session = SimpleNamespace(conf=SimpleNamespace(get=lambda k, d=None: conf.get(k, d)))
    kernel: Any = SimpleNamespace(handle=SessionHandle(session, owned=False))
    assert kernel.handle.local_master is local
    assert driver_rows(kernel) == (LOCAL_DRIVER_ROWS if local else DRIVER_ROWS)
    conf["spark.dbspark.driver_rows"] = "7"
    assert driver_rows(kernel) == 7


def test_a_change_past_the_cluster_threshold_steps_in_the_driver_on_a_local_master(
    spark_session: Any, placement_conf: Any, tmp_path: Any
) -> None:
    """`auto` on the tests' `local[2]` session: a pushed DataFrame of more rows than a cluster's threshold
    is read into the driver (no job past the placement read's) and the view equals the local engine's;
    with the cluster's threshold set, the same step runs on Spark, with the same result."""
    from dbspark.engines.spark.placement import DRIVER_ROWS

    n = DRIVER_ROWS + 1_000
    rows = pd.DataFrame({"k": range(n), "g": [i % 97 for i in range(n)]})
    want = None
    for limit in (None, DRIVER_ROWS):
        if limit is not None:
            placement_conf.set("spark.dbspark.driver_rows", str(limit))
        p = dbspark.Pipeline(tmp_path / f"p{limit}", engine="spark", spark=spark_session)
        try:
            p.sql(
                "CREATE TABLE r(k BIGINT, g BIGINT); CREATE VIEW c AS SELECT g, COUNT(*) AS n, SUM(k) AS s FROM r GROUP BY g;"
            )
            p.insert("r", spark_session.createDataFrame(rows))
            p.step()
            assert p.runtime.kernel.placed_to_driver == (1 if limit is None else 0)  # type: ignore[union-attr]
            got = p.view("c").to_dict()
        finally:
            p.close()
        want = want or got
        assert got == want
    assert want is not None and len(want) == 97 and sum(r[1] for r in want) == n
    assert sum(r[2] for r in want) == n * (n - 1) // 2


@pytest.mark.parametrize("load", ["driver", "cluster"])
@pytest.mark.parametrize("recursion", ["dred", "nested", "auto"])
def test_small_steps_of_a_recursive_program_run_in_the_driver(
    spark_session: Any, placement_conf: Any, tmp_path, recursion: str, load: str
) -> None:
    """Reachability over a graph with cycles, under each strategy, loaded in the driver or on the
    cluster: after the load, steps that delete edges (the over-delete removes facts, some still derived
    another way, which the second run puts back) and insert others run no Spark job, and equal the local
    engine after every step. The facts a step's over-delete removed are read back in the driver, where
    they were written; the scope's feedback left by a load on the cluster (empty, but a plan) does not
    put the next step's iterations there."""
    sp = dbspark.Pipeline(tmp_path / "s", engine="spark", spark=spark_session, recursion=recursion)
    lo = dbspark.Pipeline(engine="local", recursion=recursion)
    steps: list[tuple[list, list]] = [
        (RING, []),
        ([(13, 14)], [(0, 6)]),  # 6..8 over-deleted (9 keeps 3 -> 9), put back through 5 -> 6
        ([(0, 6), (5, 12)], [(2, 3)]),  # 3..5 lose their only path; 6.. come back by 0 -> 6
        ([(2, 3)], [(6, 7), (9, 10)]),  # 3..5 and 12..14 in; 7, 8, 10, 11 out; 9 back by 3 -> 9
        ([], [(5, 12), (0, 1)]),
        ([(0, 1)], []),
    ]
    try:
        _reach_from_0(sp, lo)
        for n, (ins, dels) in enumerate(steps):
            _edges((sp, lo), ins, dels)
            before = sp.runtime.kernel.actions if sp.runtime is not None else 0
            placement_conf.set("spark.dbspark.placement", load if n == 0 else "auto")
            sp.step()
            lo.step()
            if n:
                assert sp.runtime is not None and sp.runtime.kernel.actions == before, (
                    f"step {n} ran Spark jobs"
                )
            assert sp.view("reach").to_dict() == lo.view("reach").to_dict(), f"after step {n}"
    finally:
        sp.close()
        lo.close()


TWO = (
    REACH_FROM_ROOTS
    + """
.decl path(x: number, y: number)
.output path
path(x, y) :- edge(x, y).
path(x, z) :- path(x, y), path(y, z).
"""
)
arc = st.tuples(st.integers(0, 7), st.integers(0, 7))


@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    recursion=st.sampled_from(["dred", "nested", "auto"]),
    load=st.sampled_from(["driver", "cluster"]),
    graph=st.lists(arc, min_size=1, max_size=24, unique=True),
    steps=st.lists(
        st.tuples(st.lists(arc, max_size=4), st.lists(st.integers(0, 99), max_size=4)), min_size=1, max_size=4
    ),
)
def test_small_steps_of_random_recursive_programs_run_in_the_driver(
    spark_session: Any,
    placement_conf: Any,
    tmp_path_factory: Any,
    recursion: str,
    load: str,
    graph: list,
    steps: list,
) -> None:
    """Random graphs and changes (inserts and deletes of edges in one step) through a linear recursion
    keyed by one column (reachability) and a non-linear one keyed by two (a closure by path ⋈ path), under a
    random strategy, loaded in the driver or on the cluster: the small steps after the load run no Spark
    job and equal the local engine after every step."""
    d = tmp_path_factory.mktemp("recursive")
    sp = dbspark.Pipeline(d / "s", engine="spark", spark=spark_session, recursion=recursion)
    lo = dbspark.Pipeline(engine="local", recursion=recursion)
    cur = list(graph)
    try:
        for p in (sp, lo):
            p.datalog(TWO)
            p.insert("root", [(0,), (5,)])
            p.insert("edge", graph)
        placement_conf.set("spark.dbspark.placement", load)
        sp.step()
        lo.step()
        placement_conf.set("spark.dbspark.placement", "auto")
        for n, (ins, dels) in enumerate(steps, start=1):
            gone = sorted({cur[i % len(cur)] for i in dels}) if cur else []
            new = [e for e in dict.fromkeys(ins) if e not in cur or e in gone]
            for p in (sp, lo):
                if gone:
                    p.delete("edge", gone)
                if new:
                    p.insert("edge", new)
            cur = [e for e in cur if e not in gone] + new
            assert sp.runtime is not None
            before = sp.runtime.kernel.actions
            sp.step()
            lo.step()
            assert sp.runtime.kernel.actions == before, f"step {n} ran Spark jobs"
            for v in ("reach", "path"):
                assert sp.view(v).to_dict() == lo.view(v).to_dict(), f"{v} after step {n}"
    finally:
        sp.close()
        lo.close()
