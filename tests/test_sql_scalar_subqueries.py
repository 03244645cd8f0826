"""Scalar subqueries that are not single-row by construction (issue "SQL that users write runs, and runs
right"): `(SELECT DISTINCT d_month_seq FROM date_dim WHERE ...)` is maintained like any relation; its
value is its one row (NULL when it has none), and a step in which it holds several rows is rejected,
naming the view, as DuckDB raises "More than one row returned by a subquery used as an expression".
Correlated ones without an aggregate: per outer row, its one matching row; several reject the step.

Every step is run on both engines and on DuckDB (`SqlOracle`): when DuckDB raises, the step must be
rejected whole (DataError naming the view) and every view keep its previous contents.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import duckdb
import pytest

import dbspark
from dbspark.errors import DataError, UnsupportedError
from dbspark.testing.sql_oracle import SqlOracle

TABLES = "CREATE TABLE t (a INTEGER, b INTEGER);\nCREATE TABLE u (a INTEGER, c INTEGER);\n"

VIEWS = {
    # uncorrelated, in WHERE and in SELECT, over an empty outer table too
    "w": "SELECT a FROM t WHERE b = (SELECT DISTINCT b FROM t WHERE a = 1)",
    "s": "SELECT a, (SELECT c FROM u WHERE a = 1) AS sc FROM t",
    "o": "SELECT a, (SELECT c FROM u ORDER BY c LIMIT 1) AS sc FROM t",
    # correlated by an equality, by a non-equality, with DISTINCT and an outer column in the item
    "e": "SELECT a, (SELECT u.c FROM u WHERE u.a = t.a) AS sc FROM t",
    "f": "SELECT a, b FROM t WHERE b = (SELECT u.c FROM u WHERE u.a = t.a)",
    "g": "SELECT a, (SELECT u.c FROM u WHERE u.a > t.a) AS sc FROM t",
    "h": "SELECT a, (SELECT DISTINCT u.c + t.b FROM u WHERE u.a = t.a) AS sc FROM t",
    "n": "SELECT a, (SELECT u.c FROM u WHERE u.a IS NOT DISTINCT FROM t.a) AS sc FROM t",
}

# (inserts, deletes) per step
STEPS: list[tuple[dict[str, list[tuple]], dict[str, list[tuple]]]] = [
    ({"t": [(1, 1), (2, 2), (None, 3)], "u": [(1, 1), (3, 5), (None, 7)]}, {}),
    ({"u": [(1, 2)]}, {}),  # u.a = 1 twice
    ({"t": [(1, 2)]}, {}),  # t.a = 1 twice: `w`'s subquery has two rows
    ({}, {"t": [(1, 2)]}),
    ({"t": [(3, 5)]}, {"u": [(3, 5)]}),
    ({"u": [(2, 4), (2, 4)]}, {}),  # a duplicate row: several rows unless DISTINCT
    ({}, {"u": [(1, 1)]}),
    ({}, {"t": [(1, 1)], "u": [(None, 7)]}),  # `w`'s subquery empty: NULL
]


def _pipeline(engine: str, spark: Any) -> dbspark.Pipeline:
    return (
        dbspark.Pipeline(engine="spark", spark=spark)
        if engine == "spark"
        else dbspark.Pipeline(engine="local")
    )


def _snapshot(o: SqlOracle) -> dict[str, Any]:
    return {t: o.table(t) for t in o.tables}


def _restore(o: SqlOracle, snap: dict[str, Any]) -> None:
    for t, df in snap.items():
        o.con.register("__s", df)
        o.con.execute(f'DELETE FROM "{t}"; INSERT INTO "{t}" SELECT * FROM __s')
        o.con.unregister("__s")


@pytest.mark.parametrize("view", sorted(VIEWS))
@pytest.mark.parametrize("engine", ["local", "spark"])
def test_scalar_subquery_several_rows_reject_the_step(engine: str, view: str, request: Any) -> None:
    spark = request.getfixturevalue("spark_session") if engine == "spark" else None
    ddl = TABLES + f"CREATE VIEW {view} AS {VIEWS[view]};"
    o, p = SqlOracle(ddl), _pipeline(engine, spark)
    rejected = 0
    present: dict[str, Counter] = {"t": Counter(), "u": Counter()}
    try:
        p.sql(ddl)
        for i, (ins, all_dels) in enumerate(STEPS, start=1):
            # deletes of rows present (a rejected step leaves out rows the stream inserted)
            dels = {t: [r for r in rows if present[t][r] > 0] for t, rows in all_dels.items()}
            snap = _snapshot(o)
            for t, rows in dels.items():
                p.delete(t, rows)
                o.delete(t, rows)
            for t, rows in ins.items():
                p.insert(t, rows)
                o.insert(t, rows)
            try:
                o.expected(view)
                duck_error = None
            except duckdb.InvalidInputException as e:
                duck_error = str(e)
            if duck_error is not None:
                assert "More than one row returned by a subquery" in duck_error
                with pytest.raises(DataError) as err:
                    p.step()
                msg = str(err.value)
                assert f"view {view!r}" in msg, msg
                assert "More than one row returned by a subquery used as an expression" in msg, msg
                assert "rejected, nothing applied" in msg, msg
                _restore(o, snap)
                rejected += 1
                o.check(p, what=f"after the rejected step {i}")
                continue
            p.step()
            for t, rows in dels.items():
                present[t].subtract(rows)
            for t, rows in ins.items():
                present[t].update(rows)
            o.check(p, what=f"after step {i}")
        # a later step on the previous contents still works
        p.insert("t", [(7, 7)])
        o.insert("t", [(7, 7)])
        p.step()
        o.check(p, what="after the last step")
    finally:
        p.close()
    if view != "o":  # ORDER BY ... LIMIT 1 is one row by construction: never rejected
        assert rejected, f"no step of the stream rejects view {view}"


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_several_rows_on_an_empty_outer_table_reject_the_step(engine: str, request: Any) -> None:
    """DuckDB raises for an uncorrelated subquery of several rows even when no outer row reads it."""
    spark = request.getfixturevalue("spark_session") if engine == "spark" else None
    p = _pipeline(engine, spark)
    try:
        p.sql(
            TABLES
            + "CREATE VIEW x AS SELECT a FROM t WHERE b = (SELECT c FROM u WHERE a = 1);"
            + "CREATE VIEW y AS SELECT count(*) AS n FROM u;"
        )
        p.insert("u", [(1, 1)])
        p.step()
        p.insert("u", [(1, 2)])
        with pytest.raises(DataError, match=r"view 'x': More than one row returned by a subquery"):
            p.step()
        assert p.steps == 1
        assert p.view("y").to_zset().consolidate().df.rows() == [(1, 1)]  # y kept its contents too
        p.delete("u", [(1, 1)])
        p.insert("u", [(1, 2)])  # delete then re-insert in one step: one row
        p.step()
        assert p.view("y").to_zset().consolidate().df.rows() == [(1, 1)]
    finally:
        p.close()


def test_the_error_function_raises_where_evaluated() -> None:
    """DuckDB's error(message), which the check is built on, raises only on rows it is evaluated for."""
    p = dbspark.Pipeline(engine="local")
    p.sql(
        "CREATE TABLE t (a INTEGER); CREATE VIEW v AS SELECT a FROM t WHERE a > 5 OR error('small ' || a) IS NULL;"
    )
    p.insert("t", [(7,)])
    p.step()
    p.insert("t", [(2,)])
    with pytest.raises(DataError, match="small 2"):
        p.step()
    with pytest.raises(duckdb.InvalidInputException, match="small 2"):
        duckdb.sql(
            "SELECT a FROM (VALUES (7), (2)) t(a) WHERE a > 5 OR error('small ' || a) IS NULL"
        ).fetchall()


def test_correlated_subquery_with_group_by_is_still_refused() -> None:
    p = dbspark.Pipeline(engine="local")
    with pytest.raises(UnsupportedError, match="GROUP"):
        p.sql(
            TABLES
            + "CREATE VIEW v AS SELECT a, (SELECT u.c FROM u WHERE u.a = t.a GROUP BY u.c) AS s FROM t;"
        )
