"""The DuckDB oracle of SQL pipelines (`dbspark.testing.sql_oracle`) checked on its own.

The oracle must accept what is right and reject what is wrong: bag and keyed-table semantics against a
Python model, multiset comparison (duplicates, NULLs, DECIMAL vs DOUBLE), a dbspark pipeline declared
with the Python API agreeing with the oracle over random change streams, and wrong views, wrong weights
and absent deletes detected, with messages that show the rows.
"""

from __future__ import annotations

from collections import Counter
from decimal import Decimal

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dbspark
from dbspark.errors import DataError
from dbspark.testing.sql_oracle import WEIGHT, SqlOracle, assert_view_equals_duckdb, compare_frames

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])

DDL = """
CREATE TABLE t (g BIGINT, x DECIMAL(15,2));
CREATE TABLE k (id BIGINT PRIMARY KEY, v VARCHAR);
CREATE VIEW agg AS SELECT g, count(*) AS n, sum(x) AS s FROM t GROUP BY g;
CREATE VIEW rows_t AS SELECT g, x FROM t;
CREATE VIEW top2 AS SELECT g, x FROM t ORDER BY x DESC LIMIT 2;
"""

ROWS = st.tuples(
    st.one_of(st.none(), st.integers(0, 2)),
    st.one_of(st.none(), st.integers(-300, 300).map(lambda i: Decimal(i) / 100)),
)


def frame(rows: list[tuple], weights: list[int] | None = None) -> pl.DataFrame:
    df = pl.DataFrame(rows, schema={"g": pl.Int64, "x": pl.Decimal(15, 2)}, orient="row")
    return df.with_columns(pl.Series(WEIGHT, weights or [1] * len(rows), dtype=pl.Int64))


def bag(c: Counter) -> list[tuple]:
    return sorted((r for r, n in c.items() for _ in range(n)), key=repr)


# ---- table semantics -----------------------------------------------------------------------------------
@SETTINGS
@given(st.lists(st.tuples(st.booleans(), st.lists(ROWS, max_size=4)), max_size=8), st.randoms())
def test_bag_semantics_match_a_python_multiset(ops: list, rnd) -> None:
    o = SqlOracle(DDL)
    model: Counter = Counter()
    for is_delete, rows in ops:
        if is_delete:  # delete present rows (one copy per row)
            present = bag(model)
            rows = rnd.sample(present, min(len(present), len(rows)))
            o.delete("t", rows)
            model.subtract(rows)
            model = +model
        else:
            o.insert("t", rows)
            model.update(rows)
        got = Counter(o.table("t").rows())
        assert got == model


def test_delete_of_absent_row_is_an_error_and_changes_nothing() -> None:
    o = SqlOracle(DDL)
    o.insert("t", [(1, Decimal("2.50")), (1, Decimal("2.50")), (None, None)])
    with pytest.raises(DataError, match="not in the table"):
        o.delete("t", [(1, Decimal("2.50")), (1, Decimal("2.50")), (1, Decimal("2.50"))])
    assert o.table("t").height == 3
    o.delete("t", [(None, None), (1, Decimal("2.50"))])
    assert o.table("t").rows() == [(1, Decimal("2.50"))]


def test_keyed_table_insert_replaces_and_delete_is_by_key() -> None:
    o = SqlOracle(DDL)
    o.insert("k", [(1, "a"), (2, "b")])
    o.insert("k", pl.DataFrame({"id": [2, 3], "v": ["B", "c"]}))
    assert sorted(o.table("k").rows()) == [(1, "a"), (2, "B"), (3, "c")]
    o.delete("k", [(2, "whatever")])
    assert sorted(o.table("k").rows()) == [(1, "a"), (3, "c")]
    with pytest.raises(DataError, match="absent key"):
        o.delete("k", [(2, "B")])


# ---- comparison ----------------------------------------------------------------------------------------
def test_compare_multisets_nulls_and_tolerance() -> None:
    exp = pl.DataFrame(
        {"g": [1, 1, None], "s": [Decimal("0.10"), Decimal("0.10"), None]},
        schema={"g": pl.Int64, "s": pl.Decimal(38, 2)},
    )
    same = pl.DataFrame({"g": [None, 1], "s": [None, 0.1 + 1e-15], WEIGHT: [1, 2]})
    assert compare_frames(same, exp) is None
    assert compare_frames(same.with_columns(pl.Series(WEIGHT, [1, 1])), exp) is not None  # multiplicity
    off = same.with_columns(pl.Series("s", [None, 0.1000001]))
    msg = compare_frames(off, exp, "view v")
    assert msg is not None and "view v" in msg and "0.1000001" in msg
    assert compare_frames(same.rename({"s": "t"}), exp) is not None  # an aliased column's name counts
    with pytest.raises(AssertionError, match="non-positive weight"):
        compare_frames(same.with_columns(pl.Series(WEIGHT, [1, -2])), exp)


def test_top_k_ties_at_the_boundary_accept_any_correct_top_k() -> None:
    o = SqlOracle(DDL)
    o.insert("t", [(1, Decimal("5")), (2, Decimal("3")), (3, Decimal("3")), (4, Decimal("1"))])
    ok1 = frame([(1, Decimal("5")), (2, Decimal("3"))])
    ok2 = frame([(1, Decimal("5")), (3, Decimal("3"))])
    o.assert_view(ok1, "top2")
    o.assert_view(ok2, "top2")
    for wrong in (
        frame([(1, Decimal("5")), (4, Decimal("1"))]),
        frame([(2, Decimal("3")), (3, Decimal("3"))]),
        frame([(1, Decimal("5")), (9, Decimal("3"))]),
        frame([(1, Decimal("5"))]),
    ):
        with pytest.raises(AssertionError):
            o.assert_view(wrong, "top2")


# ---- against a real dbspark pipeline (Python API) ------------------------------------------------------
def pipeline() -> dbspark.Pipeline:
    p = dbspark.Pipeline(engine="local")
    t = p.table("t", {"g": "int64", "x": "decimal(15,2)"})
    p.create_view("agg", t.stream_aggregate("g", n="count", s=("sum", "x")))
    p.create_view("rows_t", t)
    return p


@SETTINGS
@given(
    st.lists(st.tuples(st.lists(ROWS, max_size=4), st.integers(0, 3)), min_size=1, max_size=5), st.randoms()
)
def test_oracle_agrees_with_a_dbspark_pipeline(steps: list, rnd) -> None:
    p, o = pipeline(), SqlOracle(DDL)
    model: Counter = Counter()
    for ins, n_del in steps:
        dels = rnd.sample(bag(model), min(n_del, sum(model.values())))
        if dels:
            p.delete("t", dels)
            o.delete("t", dels)
        if ins:
            p.insert("t", ins)
            o.insert("t", ins)
        model.subtract(dels)
        model.update(ins)
        p.step()
        o.check(p, ["agg", "rows_t"])
    p.close()


def test_oracle_detects_a_wrong_view() -> None:
    p = pipeline()
    wrong = SqlOracle(
        DDL.replace("count(*) AS n", "count(x) AS n").replace(
            "SELECT g, x FROM t;", "SELECT DISTINCT g, x FROM t;"
        )
    )
    rows = [(1, Decimal("1.00")), (1, Decimal("1.00")), (1, None)]
    p.insert("t", rows)
    wrong.insert("t", rows)
    p.step()
    with pytest.raises(AssertionError) as e:
        wrong.check(p, ["agg", "rows_t"])
    assert "2 of 2 view(s) differ" in str(e.value) and "view agg" in str(e.value)
    # the right SQL on the same connection passes
    assert_view_equals_duckdb(
        p.view("agg"), wrong.con, "SELECT g, count(*) AS n, sum(x) AS s FROM t GROUP BY g"
    )
    p.close()


def test_is_distinct_from_on_an_all_null_column_is_answered_as_sql_says() -> None:
    """DuckDB 1.5.5 returns no row for `c = 5 OR 5 IS DISTINCT FROM c` when the column is all NULL (the
    disjunction pushed into the scan; the test of the generated queries found it); the oracle spells
    IS [NOT] DISTINCT FROM as a CASE (`without_distinct_from`), and agrees with dbspark."""
    ddl = (
        "CREATE TABLE t (k BIGINT, c DATE); "
        "CREATE VIEW v AS SELECT k FROM t WHERE (c = '2020-01-31') OR (DATE '2020-01-31' IS DISTINCT FROM c); "
        "CREATE VIEW w AS SELECT k FROM t WHERE (c = '2020-01-31') OR NOT (c IS NOT DISTINCT FROM NULL)"
    )
    oracle = SqlOracle(ddl)
    p = dbspark.Pipeline(engine="local")
    p.sql(ddl)
    rows = [(None, None), (0, None)]
    p.insert("t", rows)
    oracle.insert("t", rows)
    p.step()
    assert sorted(r[0] is None for r in oracle.con.execute("SELECT k FROM v").fetchall()) == [False, True]
    oracle.check(p)
