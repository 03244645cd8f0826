"""ASOF joins (`frontends/sql/asof.py`) against DuckDB: after every step of random inserts and deletes on
both sides (NULL keys and values, equal values on both sides, duplicate left rows), the four comparisons,
inner and LEFT, with and without keys, equal DuckDB's answer, on both engines. The right side never holds
two rows of one value (DuckDB picks either of them)."""

from __future__ import annotations

import pytest
from hypothesis import strategies as st

from dbspark.errors import UnsupportedError
from dbspark.testing.engines import engine_given, pipeline_on
from dbspark.testing.sql_oracle import SqlOracle

DDL = """
CREATE TABLE trades (k VARCHAR, ts INTEGER, qty INTEGER);
CREATE TABLE quotes (k VARCHAR, ts INTEGER, px INTEGER);
CREATE VIEW ge AS SELECT t.k, t.ts, t.qty, q.px, q.ts AS qts FROM trades t
    ASOF JOIN quotes q ON t.k = q.k AND t.ts >= q.ts;
CREATE VIEW gt_left AS SELECT t.k, t.ts, q.px FROM trades t ASOF LEFT JOIN quotes q ON t.k = q.k AND t.ts > q.ts;
CREATE VIEW le AS SELECT t.k, t.ts, q.px FROM trades t ASOF JOIN quotes q ON q.k = t.k AND q.ts >= t.ts;
CREATE VIEW lt_nokey AS SELECT t.ts, t.qty, q.px FROM trades t ASOF LEFT JOIN quotes q ON t.ts < q.ts;
CREATE VIEW per_key AS SELECT t.k, SUM(t.qty * q.px) AS notional, COUNT(*) AS n FROM trades t
    ASOF JOIN quotes q ON t.k = q.k AND t.ts >= q.ts GROUP BY t.k;
"""

K = st.sampled_from(["a", "a", "b", None])
TS = st.sampled_from([0, 1, 2, 3, 3, None])  # (small: values tied across the sides are the boundary cases)
TRADE = st.tuples(K, TS, st.integers(1, 3))
QUOTE = st.tuples(K, TS, st.integers(100, 110))
STEPS = st.lists(
    st.tuples(st.lists(TRADE, max_size=4), st.lists(QUOTE, max_size=4), st.integers(0, 2), st.integers(0, 2)),
    min_size=1,
    max_size=4,
)
SPARK_STEPS = [
    (
        [("a", 5, 1), ("a", 10, 2), ("b", 3, 3), (None, 4, 4)],
        [("a", 1, 100), ("a", 5, 105), ("b", 7, 107)],
        0,
        0,
    ),
    ([("a", 5, 1)], [("a", 9, 109)], 1, 1),
]


@engine_given(STEPS, local=25, spark=1, spark_strategies=(st.just(SPARK_STEPS),))
def test_asof_joins_match_duckdb(engine, steps):
    p = pipeline_on(engine)
    try:
        p.sql(DDL)
        o = SqlOracle(DDL)
        trades: list[tuple] = []
        quotes: list[tuple] = []
        for tins, qins, tdel, qdel in steps:
            seen = {ts for _, ts, _ in quotes}  # (lt_nokey has no key: no two quotes of one time)
            qins = [q for i, q in enumerate(qins) if q[1] not in seen | {ts for _, ts, _ in qins[:i]}]
            tgone, trades = trades[:tdel], trades[tdel:] + tins
            qgone, quotes = quotes[:qdel], quotes[qdel:] + qins
            for fn, table, rows in (
                ("insert", "trades", tins),
                ("insert", "quotes", qins),
                ("delete", "trades", tgone),
                ("delete", "quotes", qgone),
            ):
                if rows:
                    getattr(o, fn)(table, rows)
                    getattr(p, fn)(table, rows)
            p.step()
            o.check(p)
    finally:
        p.close()


def test_asof_by_hand():
    """Ties between the sides: `>=` takes the quote at the trade's own time, `>` the one before it."""
    p = pipeline_on("local")
    try:
        p.sql(DDL)
        p.insert("trades", [("a", 5, 1), ("a", 10, 2), ("b", 3, 3), (None, 4, 4)])
        p.insert("quotes", [("a", 1, 100), ("a", 5, 105), ("b", 7, 107), (None, 1, 999)])
        p.step()
        assert set(p.view("ge").to_dict()) == {("a", 5, 1, 105, 5), ("a", 10, 2, 105, 5)}
        assert set(p.view("gt_left").to_dict()) == {
            ("a", 5, 100),
            ("a", 10, 105),
            ("b", 3, None),
            (None, 4, None),
        }
        p.delete("quotes", [("a", 5, 105)])
        p.step()
        assert set(p.view("ge").to_dict()) == {("a", 5, 1, 100, 1), ("a", 10, 2, 100, 1)}
    finally:
        p.close()


@pytest.mark.parametrize(
    "join, message",
    [
        ("ASOF RIGHT JOIN quotes q ON t.k = q.k AND t.ts >= q.ts", "ASOF RIGHT JOIN"),
        ("ASOF JOIN quotes q ON t.k = q.k", "one >=, >, <= or < comparison"),
        ("ASOF JOIN quotes q ON t.ts >= q.ts AND t.qty <= q.px", "one >=, >, <= or < comparison"),
        ("ASOF JOIN quotes q ON t.ts + q.ts >= 3", "does not compare the left side with the right"),
    ],
)
def test_asof_errors(join, message):
    p = pipeline_on("local")
    try:
        with pytest.raises(UnsupportedError, match=message):
            p.sql(DDL.split("CREATE VIEW")[0] + f"CREATE VIEW v AS SELECT t.k FROM trades t {join};")
    finally:
        p.close()
