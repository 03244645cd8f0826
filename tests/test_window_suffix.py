"""A window's change folded from each partition's first changed row on (`columnar/window_suffix.py`) equals
the change folded over whole partitions (`columnar/window_fold.change`), on random partitions (NULL
partition and order keys, ties, duplicate rows with weights, deletes, changes that cancel) and random
calls and frames; and a window view keeps the rows before a change out of its change."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dbspark.algebra.zset import WEIGHT
from dbspark.columnar import window_fold, window_suffix
from dbspark.ir.order import SortKey
from dbspark.ir.window import RANKING, WindowCall, WindowSpec
from dbspark.testing.engines import engine_given, pipeline_on
from dbspark.testing.sql_oracle import SqlOracle, fifo_steps

SCHEMA = {"p": pl.Int64, "o": pl.Int64, "x": pl.Int64, "s": pl.String, WEIGHT: pl.Int64}
ROW = st.tuples(
    st.one_of(st.none(), st.integers(0, 1)),
    st.one_of(st.none(), st.integers(0, 12)),
    st.one_of(st.none(), st.integers(-5, 5)),
    st.sampled_from(["a", "b"]),
)
LATE = st.tuples(  # rows late in their partitions' order, most of the time
    st.one_of(st.none(), st.integers(0, 1)),
    st.one_of(st.integers(6, 14), st.none()),
    st.one_of(st.none(), st.integers(-5, 5)),
    st.sampled_from(["a", "b"]),
)
OFFSET = st.one_of(st.none(), st.integers(-3, 3))


@st.composite
def calls(draw: st.DrawFn) -> WindowCall:
    func = draw(
        st.sampled_from(
            ["row_number", "rank", "dense_rank", "lag", "lead", "first_value", "last_value"]
            + ["sum", "count", "count_star", "avg", "min", "max"]
        )
    )
    out = f"w{draw(st.integers(0, 10**6))}"
    dtype = {"avg": pl.Float64(), "first_value": pl.String(), "last_value": pl.String()}.get(func, pl.Int64())
    if func in ("row_number", "rank", "dense_rank"):
        return WindowCall(out, func, dtype)
    if func in ("lag", "lead"):
        return WindowCall(out, func, dtype, "x", draw(st.integers(0, 3)), draw(st.sampled_from([None, "o"])))
    arg = "s" if func in ("first_value", "last_value") else None if func == "count_star" else "x"
    if not draw(st.booleans()):
        return WindowCall(out, func, dtype, arg)  # the default frame
    start = None if func in ("min", "max") else draw(OFFSET)
    end = draw(st.integers(-3, 3))
    if start is not None and start > end:
        start, end = end, start
    return WindowCall(out, func, dtype, arg, rows=True, start=start, end=end)


@st.composite
def specs(draw: st.DrawFn) -> WindowSpec:
    order = draw(st.sampled_from([("o",), ("o", "x"), ("o", "s", "x")]))
    keys = tuple(SortKey(c, draw(st.booleans()), draw(st.booleans())) for c in order)
    cs = draw(st.lists(calls(), min_size=1, max_size=4, unique_by=lambda c: c.out))
    if draw(st.booleans()):  # calls whose cut is found by key (`window_suffix.reach` 0)
        cs = [c for c in cs if c.func not in ("lag", "lead") and not (c.rows and c.func not in RANKING)]
        extra = [  # the calls whose totals need the rows before the cut consolidated
            WindowCall("dr", "dense_rank", pl.Int64()),
            WindowCall("fv", "first_value", pl.String(), "s"),
            WindowCall("mn", "min", pl.Int64(), "x"),
            WindowCall("mx", "max", pl.Int64(), "x", rows=True, end=0),
        ]
        cs += draw(st.lists(st.sampled_from(extra), min_size=1, max_size=2, unique_by=lambda c: c.out))
    return WindowSpec(draw(st.sampled_from([("p",), ()])), keys, tuple(cs), ("p", "o", "x", "s"))


def frame(rows: list[tuple]) -> pl.DataFrame:
    return pl.DataFrame([r for r in rows], schema=SCHEMA, orient="row")


@settings(max_examples=300, deadline=None)
@given(
    specs(),
    st.lists(st.tuples(ROW, st.integers(1, 3)), min_size=12, max_size=40),
    st.lists(st.tuples(st.one_of(LATE, ROW), st.integers(1, 2)), max_size=3),
    st.lists(st.integers(0, 60), max_size=3),
    st.lists(ROW, max_size=4, unique=True),
)
def test_the_suffix_fold_equals_the_whole_fold(spec, state, inserts, deletes, ghosts):
    assert window_suffix.eligible(spec, pl.Schema(SCHEMA))
    live = {}
    for row, w in state:
        live[row] = live.get(row, 0) + w
    found = frame([(*row, w) for row, w in live.items()])
    change = [(*row, w) for row, w in inserts]
    for i in set(deletes):  # a delete of a live row (some of its weight), or of a row just inserted
        if live and i % 3:
            row = sorted(live, key=repr)[-1 - i % len(live) // (1 + i % 2)]  # a late row, most of the time
            change.append((*row, -min(live.pop(row), 1 + i % 2)))
        elif inserts:
            row, w = inserts.pop(i % len(inserts))
            change.append((*row, -w))
    # the state as a trace holds it: a row's weight in pieces
    pieces = [found.with_columns(pl.col(WEIGHT) - 1), found.with_columns(pl.lit(1, pl.Int64).alias(WEIGHT))]
    # and rows inserted and deleted in different steps, not yet merged
    gone = frame([(*row, 1) for row in ghosts if row not in live])
    pieces += [gone, gone.with_columns(-pl.col(WEIGHT))]
    found = pl.concat(pieces).filter(pl.col(WEIGHT) != 0)
    d = frame(change)
    theirs = window_fold.change(spec, [d, found])
    cols = list(theirs.columns)
    expected = theirs.sort(cols, nulls_last=True)
    assert window_suffix.change(spec, [d, found]).select(cols).sort(cols, nulls_last=True).equals(expected)
    # both ways of finding the cut: by position in the sorted partitions, and by key (`reach` 0)
    ours = window_suffix._sorted(spec, d, found)
    assert ours.select(cols).sort(cols, nulls_last=True).equals(expected)


DDL = """
CREATE TABLE t (p INTEGER, o INTEGER, x INTEGER, d DECIMAL(12, 2), s VARCHAR);
CREATE VIEW running AS SELECT p, o, x, d, s,
    SUM(x) OVER (PARTITION BY p ORDER BY o) AS rs,
    SUM(d) OVER (PARTITION BY p ORDER BY o DESC NULLS FIRST) AS rd,
    AVG(x) OVER (PARTITION BY p ORDER BY o) AS av,
    COUNT(x) OVER (PARTITION BY p ORDER BY o) AS cx,
    MIN(x) OVER (PARTITION BY p ORDER BY o) AS mn,
    RANK() OVER (PARTITION BY p ORDER BY o) AS rk,
    DENSE_RANK() OVER (PARTITION BY p ORDER BY o) AS dr FROM t;
CREATE VIEW ordered AS SELECT p, o, x, d, s,
    ROW_NUMBER() OVER (PARTITION BY p ORDER BY o, x, d, s) AS rn,
    FIRST_VALUE(s) OVER (PARTITION BY p ORDER BY o, x, d, s) AS fv,
    LAG(x, 2) OVER (PARTITION BY p ORDER BY o, x, d, s) AS lg,
    LEAD(d, 1, 0) OVER (PARTITION BY p ORDER BY o, x, d, s) AS ld,
    SUM(x) OVER (PARTITION BY p ORDER BY o, x, d, s ROWS BETWEEN 2 PRECEDING AND 1 FOLLOWING) AS s4 FROM t;
CREATE VIEW whole_table AS SELECT p, o, x, d, s,
    MAX(x) OVER (ORDER BY o, p, x, d, s ROWS BETWEEN UNBOUNDED PRECEDING AND 1 FOLLOWING) AS mx FROM t;
"""
WIDE = st.tuples(
    st.one_of(st.none(), st.integers(0, 2)),
    st.one_of(st.none(), st.integers(0, 20)),
    st.one_of(st.none(), st.integers(-5, 5)),
    st.one_of(st.none(), st.decimals(-(10**9), 10**9, places=2)),
    st.sampled_from(["a", "b", ""]),
)
STEPS = st.lists(st.tuples(st.lists(WIDE, max_size=12), st.integers(0, 5)), min_size=2, max_size=6)
SPARK_STEPS = [
    ([(1, o, o % 3, None, "a") for o in range(12)] + [(None, 3, 1, None, "b"), (2, None, None, None, "")], 0),
    ([(1, 20, 5, None, "a"), (1, 4, 2, None, "b"), (2, 1, 1, None, "c")], 3),
]


@engine_given(STEPS, local=20, spark=1, spark_strategies=(st.just(SPARK_STEPS),))
def test_views_match_duckdb(engine, steps):
    """Views of calls folded from the first changed row on, after every step of a change stream. (Calls
    over different windows are in views of their own: which of two equal rows gets which value of a
    ROW_NUMBER or a ROWS frame is the plan's choice, and DuckDB may pair two windows' values otherwise.)"""
    p = pipeline_on(engine)
    try:
        p.sql(DDL)
        o = SqlOracle(DDL)
        o.run(p, fifo_steps("t", steps))
    finally:
        p.close()


def test_eligible_calls():
    s = pl.Schema({"o": pl.Int64, "x": pl.Float64, "y": pl.Decimal(10, 2)})
    order = (SortKey("o"),)

    def spec(*cs: WindowCall, order: tuple[SortKey, ...] = order) -> WindowSpec:
        return WindowSpec((), order, cs, ("o", "x", "y"))

    assert window_suffix.eligible(spec(WindowCall("a", "sum", pl.Decimal(38, 2), "y")), s)
    assert window_suffix.eligible(spec(WindowCall("a", "lead", pl.Float64, "x", 2)), s)
    assert not window_suffix.eligible(spec(WindowCall("a", "sum", pl.Float64, "x")), s)
    assert not window_suffix.eligible(spec(WindowCall("a", "avg", pl.Float64, "x")), s)
    assert not window_suffix.eligible(spec(WindowCall("a", "ntile", pl.Int64, n=3)), s)
    assert not window_suffix.eligible(spec(WindowCall("a", "count_star", pl.Int64, rows=True, start=0)), s)
    assert not window_suffix.eligible(spec(WindowCall("a", "row_number", pl.Int64), order=()), s)


def test_a_change_at_the_end_moves_the_last_rows_only():
    """An insert after a partition's rows retracts and emits nothing before it but the rows LEAD reaches."""
    p = pipeline_on("local")
    try:
        p.sql(
            "CREATE TABLE t (p INTEGER, o INTEGER, x INTEGER);"
            "CREATE VIEW v AS SELECT p, o, x, SUM(x) OVER (PARTITION BY p ORDER BY o) AS rs,"
            " ROW_NUMBER() OVER (PARTITION BY p ORDER BY o) AS rn,"
            " LEAD(x) OVER (PARTITION BY p ORDER BY o) AS nx FROM t"
        )
        p.insert("t", [(1, o, o) for o in range(100)])
        p.step()
        p.insert("t", [(1, 100, 7)])
        ch = p.step()["v"].to_dict()
        assert ch == {
            (1, 99, 99, 4950, 100, 7): 1,
            (1, 99, 99, 4950, 100, None): -1,
            (1, 100, 7, 4957, 101, None): 1,
        }
    finally:
        p.close()


@pytest.mark.spark
def test_spark_frames_fold_in_the_tasks(spark_engine):
    """Changes pushed as Spark DataFrames: the partitions sought and folded in Spark's tasks."""
    import random

    rng = random.Random(7)
    ddl = DDL.split("CREATE VIEW ordered")[0]
    p = pipeline_on(spark_engine)
    o = SqlOracle(ddl)
    live: list[tuple] = []
    schema = {"p": pl.Int32, "o": pl.Int32, "x": pl.Int32, "d": pl.Decimal(12, 2), "s": pl.String}
    try:
        p.sql(ddl)
        for step in range(4):
            new = [
                (rng.choice([0, 1, None]), step * 10 + rng.randrange(12), rng.randrange(-5, 5), None, "a")
                for _ in range(30)
            ]
            gone = rng.sample(live, min(len(live), 8))
            for r in gone:
                live.remove(r)
            live += new
            for rows, push, oracle in ((new, p.insert, o.insert), (gone, p.delete, o.delete)):
                if rows:
                    df = pl.DataFrame(rows, schema=schema, orient="row")
                    push("t", spark_engine.spark.createDataFrame(df.to_pandas()))
                    oracle("t", df)
            p.step()
            o.check(p, what=f"after step {step}")
    finally:
        p.close()
