"""Views added to and dropped from a running pipeline, and a durable pipeline reopened with other views
(issue 18, item 3): each new view is backfilled from the tables' current contents, nothing else is
recomputed, and every view equals DuckDB after every change (`dbspark.testing.evolving`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dbspark
from dbspark.errors import CheckpointError, DataError, SchemaError, UnknownNameError, UnsupportedError
from dbspark.testing.evolving import Plan, run_evolving
from dbspark.testing.sql_oracle import SqlOracle
from dbspark.testing.sql_strategies import Case, cases

LOCAL = settings(
    max_examples=int(os.environ.get("EVOLVING_EXAMPLES", "30")),
    deadline=None,
    print_blob=True,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)
SPARK = settings(LOCAL, max_examples=3)


@st.composite
def evolving(draw: st.DrawFn, family: str, restarts: bool = False) -> tuple[Case, Plan]:
    """A case and when each of its views comes and goes (`Plan`): added at a random boundary k (often
    after steps ran), dropped at a later one or never; some boundaries reopen the pipeline."""
    case = draw(cases(family, max_views=3, max_steps=4))
    m = len(case.steps)
    adds = tuple(draw(st.integers(0, m)) for _ in case.views)
    drops = tuple(draw(st.one_of(st.none(), st.integers(a + 1, m))) if a < m else None for a in adds)
    again = frozenset(draw(st.sets(st.integers(1, m), max_size=2))) if restarts and m else frozenset()
    return case, Plan(adds, drops, again)


def _pipeline(engine: str, spark: Any) -> Any:
    def make(directory: Path | None) -> dbspark.Pipeline:
        if engine == "spark":
            return dbspark.Pipeline(directory, engine="spark", spark=spark)
        return dbspark.Pipeline(directory, engine="local")

    return make


@pytest.fixture(params=["local", pytest.param("spark", marks=pytest.mark.spark)])
def make(request: pytest.FixtureRequest) -> Any:
    spark = request.getfixturevalue("spark_session") if request.param == "spark" else None
    return request.param, _pipeline(request.param, spark)


@pytest.mark.parametrize("family", ["mix", "aggregates", "joins", "recursive"])
@LOCAL
@given(data=st.data())
def test_views_added_and_dropped_while_running_match_duckdb(make: Any, family: str, data: Any) -> None:
    engine, factory = make
    if engine == "spark" and family != "mix":
        pytest.skip("the Spark lane runs the mixed family (the local lane each)")
    case, plan = data.draw(evolving(family))
    run_evolving(case, plan, factory)


@LOCAL
@given(data=st.data())
def test_a_durable_pipeline_reopened_with_other_views_matches_duckdb(
    make: Any, tmp_path_factory: pytest.TempPathFactory, data: Any
) -> None:
    engine, factory = make
    case, plan = data.draw(evolving("mix", restarts=True))
    run_evolving(case, plan, factory, tmp_path_factory.mktemp("evolving"))


# ---- what carries over, what is freed ------------------------------------------------------------
DDL = """
CREATE TABLE t (k BIGINT, v BIGINT);
CREATE TABLE e (a BIGINT, b BIGINT);
CREATE VIEW agg AS SELECT k, SUM(v) AS s, COUNT(*) AS c FROM t GROUP BY k;
"""
JOIN = "CREATE VIEW j AS SELECT t.k, e.b FROM t JOIN e ON t.k = e.a WHERE t.v > 3;"
ROWS_T = [(1, 10), (1, 5), (2, 7), (3, 1)]
ROWS_E = [(1, 2), (2, 3), (3, 4), (3, 5)]


def _local(p: Any, v: Any) -> pl.DataFrame:
    z = p.runtime.kernel.to_local(v)
    return z.consolidate().df.sort(pl.all())


def _same_engine(p: Any) -> Any:
    spark = p.runtime.kernel.spark if p.engine == "spark" else None
    return dbspark.Pipeline(engine=p.engine, spark=spark)


TOP = "CREATE VIEW top AS SELECT k, s FROM agg WHERE s > 8;"


def _started(pipeline: Any, ddl: str = DDL, later: str = "") -> SqlOracle:
    """The pipeline of `ddl` after one step, and an oracle of `ddl` and the views `later` adds."""
    pipeline.sql(ddl)
    pipeline.insert("t", ROWS_T)
    pipeline.insert("e", ROWS_E)
    pipeline.step()
    o = SqlOracle(ddl + later)
    o.insert("t", ROWS_T)
    o.insert("e", ROWS_E)
    return o


def test_a_new_view_keeps_the_state_of_what_it_shares(pipeline: Any) -> None:
    """Adding views leaves every existing node's state object in place (nothing recomputed: the
    aggregate that `top` reads is not evaluated again, its state is the same object), and the new
    views' first change is their contents."""
    o = _started(pipeline, DDL, JOIN + TOP)
    before = pipeline.runtime.owned_states()
    pipeline.sql(JOIN + TOP)
    after = pipeline.runtime.owned_states()
    assert all(after[k] is st for k, st in before.items() if k in after)
    assert set(before) <= set(after)
    o.check(pipeline, ["agg", "j", "top"], "right after the views were added")
    changes = pipeline.step()
    assert _local(pipeline, changes["j"]).equals(_local(pipeline, pipeline.view("j")))
    assert _local(pipeline, changes["agg"]).height == 0  # no change to the tables: none to agg
    pipeline.insert("t", [(2, 9)])
    o.insert("t", [(2, 9)])
    pipeline.step()
    o.check(pipeline, ["agg", "j", "top"], "after a step")


def test_a_dropped_view_frees_its_state(pipeline: Any) -> None:
    o = _started(pipeline, DDL + JOIN)
    with_join = pipeline.state_rows()
    pipeline.sql("DROP VIEW j;")
    without = pipeline.state_rows()
    assert without < with_join
    assert pipeline.views == ["agg"]
    pipeline.insert("t", [(1, 1)])
    o.insert("t", [(1, 1)])
    changes = pipeline.step()
    assert set(changes) == {"agg"}
    o.check(pipeline, ["agg"])
    fresh = _same_engine(pipeline)
    fresh.sql(DDL)
    fresh.insert("t", [*ROWS_T, (1, 1)])
    fresh.insert("e", ROWS_E)
    fresh.step()
    assert pipeline.state_rows() == fresh.state_rows(), "the state of a pipeline that never had the view"
    fresh.close()
    with pytest.raises(UnknownNameError, match="unknown view 'j'"):
        pipeline.drop_view("j")
    pipeline.sql("DROP VIEW IF EXISTS j;")
    with pytest.raises(SchemaError, match="DROP VIEW t: t is a table"):
        pipeline.sql("DROP VIEW t;")
    with pytest.raises(UnsupportedError, match="CASCADE"):
        pipeline.sql("DROP VIEW agg CASCADE;")


def test_create_or_replace_keeps_the_state_of_the_same_definition(pipeline: Any) -> None:
    o = _started(pipeline, DDL + JOIN)
    states = pipeline.runtime.owned_states()
    pipeline.sql("CREATE OR REPLACE " + JOIN.removeprefix("CREATE "))
    assert pipeline.runtime.owned_states().keys() == states.keys()
    assert not pipeline.runtime.backfilled  # nothing new to report
    pipeline.sql("CREATE OR REPLACE VIEW j AS SELECT t.k, e.b FROM t JOIN e ON t.k = e.a WHERE t.v > 6;")
    o2 = SqlOracle(DDL + "CREATE VIEW j AS SELECT t.k, e.b FROM t JOIN e ON t.k = e.a WHERE t.v > 6;")
    o2.insert("t", ROWS_T)
    o2.insert("e", ROWS_E)
    o2.check(pipeline, ["agg", "j"])
    assert o.expected("agg").height > 0


def test_a_view_the_data_rejects_is_refused_whole(pipeline: Any) -> None:
    """A view whose backfill fails (a scalar subquery of several rows over the current tables) is
    refused, naming it; the pipeline goes on as before, with the other views declared with it refused
    too (one `sql` text is one declaration)."""
    o = _started(pipeline)
    states = pipeline.runtime.owned_states()
    rows = pipeline.state_rows()
    with pytest.raises(DataError, match="nothing declared: view 'bad': More than one row returned"):
        pipeline.sql(JOIN + "CREATE VIEW bad AS SELECT k, (SELECT b FROM e WHERE e.a = 3) AS x FROM t;")
    assert pipeline.views == ["agg"]
    assert pipeline.runtime.owned_states() == states and pipeline.state_rows() == rows
    pipeline.insert("t", [(5, 5)])
    o.insert("t", [(5, 5)])
    assert set(pipeline.step()) == {"agg"}
    o.check(pipeline, ["agg"])


def test_a_python_view_added_to_a_running_pipeline(pipeline: Any) -> None:
    from dbspark.ir.expr import col

    _started(pipeline)
    t = pipeline.relation("t")
    pipeline.create_view("big", t.filter(col("v") > 6).stream_aggregate("k", n="count"))
    o2 = SqlOracle(DDL + "CREATE VIEW big AS SELECT k, COUNT(*) AS n FROM t WHERE v > 6 GROUP BY k;")
    o2.insert("t", ROWS_T)
    o2.check(pipeline, ["big"])


def test_a_datalog_program_added_to_a_running_pipeline(pipeline: Any) -> None:
    """Rules over a table that already has rows: their relations are backfilled (a recursion too)."""
    pipeline.datalog(
        ".decl e(x: number, y: number)\n.input e\n.decl r(x: number)\nr(x) :- e(x, _).\n.output r"
    )
    pipeline.insert("e", [(1, 2), (2, 3), (3, 4)])
    pipeline.step()
    pipeline.datalog(  # (e declared without .input: the pipeline's relation e)
        ".decl e(x: number, y: number)\n.decl path(x: number, y: number)\n"
        "path(x, y) :- e(x, y).\npath(x, z) :- path(x, y), e(y, z).\n.output path"
    )
    got = set(_local(pipeline, pipeline.view("path")).select("x", "y").rows())
    assert got == {(1, 2), (1, 3), (1, 4), (2, 3), (2, 4), (3, 4)}
    pipeline.delete("e", [(2, 3)])
    pipeline.step()
    got = set(_local(pipeline, pipeline.view("path")).select("x", "y").rows())
    assert got == {(1, 2), (3, 4)}


def test_backfill_refusals_name_the_table() -> None:
    """A 'zset' table keeps no contents, and a table with a lateness drops rows below its waterline:
    a view added after steps cannot be backfilled from them (a clear error; nothing changes)."""
    from dbspark.ir.expr import col

    p = dbspark.Pipeline(engine="local")
    z = p.table("z", {"a": "int64"}, kind="zset")
    p.create_view("all", z.filter(col("a") > 0))
    p.insert("z", [(1,)])
    p.step()
    with pytest.raises(UnsupportedError, match="'z' is a 'zset' table, whose contents dbspark does not keep"):
        p.create_view("more", z.filter(col("a") > 1))
    assert p.views == ["all"]
    q = dbspark.Pipeline(engine="local")
    q.sql(
        "CREATE TABLE s (ts TIMESTAMP, x BIGINT) WITH (lateness_column = ts, lateness = INTERVAL '1 minute');"
        "CREATE VIEW n AS SELECT count(*) AS n FROM s;"
    )
    q.insert("s", [("2024-01-01 00:00:00", 1), ("2024-01-01 00:10:00", 2)])
    q.step()
    with pytest.raises(UnsupportedError, match="'s' has a lateness"):
        q.sql("CREATE VIEW m AS SELECT max(x) AS m FROM s;")


def test_reopened_with_a_table_declared_otherwise_is_refused(tmp_path: Path, make: Any) -> None:
    _, make = make
    p = make(tmp_path)
    p.sql(DDL)
    p.insert("t", ROWS_T)
    p.step()
    p.close()
    q = make(tmp_path)
    q.sql(DDL.replace("e (a BIGINT, b BIGINT)", "e (a BIGINT, b VARCHAR)"))
    with pytest.raises(CheckpointError, match="table 'e' was declared otherwise"):
        q.steps  # noqa: B018 (opening reads the checkpoint)
    q.close()
    with make(tmp_path) as again:  # as it was: opens where it was
        assert again.steps == 1


@pytest.mark.spark
def test_spark_files_of_dropped_views_go_once_a_step_commits(tmp_path: Path, spark_session: Any) -> None:
    """A dropped view's trace directories stay until the next step commits (the committed checkpoint
    names their files), then go; the same after a reopen without the view."""
    make = _pipeline("spark", spark_session)
    traces = tmp_path / "state" / "traces"
    p = make(tmp_path)
    p.sql(DDL + JOIN)
    p.insert("t", ROWS_T)
    p.insert("e", ROWS_E)
    p.step()
    both = set(os.listdir(traces))
    p.sql("DROP VIEW j;")
    assert set(os.listdir(traces)) == both
    p.step()
    after_drop = set(os.listdir(traces))
    assert after_drop < both
    p.sql(JOIN)
    p.step()
    p.close()
    q = make(tmp_path)
    q.sql(DDL)
    assert q.steps == 3
    assert len(os.listdir(traces)) > len(after_drop)
    q.insert("t", [(9, 9)])
    q.step()
    assert set(os.listdir(traces)) == after_drop
    q.close()


@pytest.mark.parametrize("engine", ["local", pytest.param("spark", marks=pytest.mark.spark)])
def test_a_distinct_view_added_after_a_load_takes_a_value_inserted_twice(request: Any, engine: str) -> None:
    """A DISTINCT view created after a load, then a step deleting a NULL row and another and inserting
    one new value twice: the view holds the new value (DuckDB's answer). On Spark the change's
    consolidated frame had an empty chunk between the deletions and the insertion, and PySpark's
    createDataFrame dropped what followed it (`tests/test_spark_convert.py`); found by
    test_views_added_and_dropped_while_running_match_duckdb[spark-mix]."""
    import datetime as dt

    utc, t = dt.UTC, dt.datetime
    spark = request.getfixturevalue("spark_session") if engine == "spark" else None
    with _pipeline(engine, spark)(None) as p:
        p.sql("CREATE TABLE t (k BIGINT, c0 TIMESTAMPTZ, c1 TIMESTAMP);")
        p.insert(
            "t",
            [
                (1, None, None),
                (3, None, t(2020, 2, 29, 12, 30, 15, 250000)),
                (3, None, t(2020, 1, 31, 23, 59, 59, 999999)),
                (2, None, t(2020, 2, 29, 0, 0)),
                (3, t(2020, 2, 28, 22, 0, tzinfo=utc), t(2023, 3, 1, 7, 5, 3, 1)),
            ],
        )
        p.step()
        p.sql("CREATE VIEW v AS SELECT DISTINCT c1 AS o FROM t;")
        p.delete("t", [(1, None, None), (3, None, t(2020, 2, 29, 12, 30, 15, 250000))])
        p.insert(
            "t",
            [
                (None, t(2020, 1, 31, 23, 59, 59, 999999, tzinfo=utc), t(2022, 6, 15, 10, 0)),
                (3, t(1970, 1, 1, 0, 0, 0, 1, tzinfo=utc), t(2022, 6, 15, 10, 0)),
            ],
        )
        p.step()
        got = set(p.view("v").to_dict())
    assert got == {
        (t(2020, 1, 31, 23, 59, 59, 999999),),
        (t(2020, 2, 29, 0, 0),),
        (t(2022, 6, 15, 10, 0),),
        (t(2023, 3, 1, 7, 5, 3, 1),),
    }
