"""BOOL_AND, BOOL_OR, BIT_AND, BIT_OR, BIT_XOR in SQL (`frontends/sql/bit_aggregates.py`: counts per bit,
exact under deletes) against DuckDB after every step, on both engines: every integer width (the top bit
of a signed type is its sign), unsigned types, NULLs, groups emptied and refilled, duplicates, DISTINCT,
a global aggregate over an emptied table; and the errors that name the call."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import strategies as st

from dbspark.errors import SchemaError, UnsupportedError
from dbspark.testing.engines import engine_given, pipeline_on
from dbspark.testing.sql_oracle import SqlOracle

DDL = "CREATE TABLE t (g BIGINT, i8 TINYINT, i16 SMALLINT, i32 INTEGER, i64 BIGINT, u32 UINTEGER, b BOOLEAN);"
# every function, and every width with the sign bit (each call is one COUNT per bit: 120 here)
BITS = "bit_or(i8) AS o8, bit_and(i16) AS a16, bit_xor(i32) AS x32, bit_or(i64) AS o64"
VIEWS = f"""
CREATE VIEW grouped AS SELECT g, bool_and(b) AS band, bool_or(b) AS bor, {BITS} FROM t GROUP BY g;
CREATE VIEW whole AS SELECT bool_or(b) AS bor, bit_or(i64) AS o, bit_and(DISTINCT i32) AS a, count(*) AS n FROM t;
CREATE VIEW mixed AS SELECT g, bit_or(i16) + sum(i16) AS s, bool_and(i32 > 0) AS pos FROM t
  WHERE i8 IS NOT NULL OR b GROUP BY g HAVING bool_or(b) OR count(*) > 1;
"""


def _value(lo: int, hi: int) -> st.SearchStrategy:
    return st.one_of(st.none(), st.integers(lo, hi), st.sampled_from([lo, hi, -1 if lo < 0 else 0, 0]))


ROW = st.tuples(
    st.integers(0, 3),
    _value(-(2**7), 2**7 - 1),
    _value(-(2**15), 2**15 - 1),
    _value(-(2**31), 2**31 - 1),
    _value(-(2**63), 2**63 - 1),
    _value(0, 2**32 - 1),
    st.one_of(st.none(), st.booleans()),
)


def streams(steps: int) -> st.SearchStrategy:
    """Steps of (rows to insert, share of the present rows to delete), duplicates allowed."""
    return st.lists(st.tuples(st.lists(ROW, max_size=8), st.floats(0, 1)), min_size=1, max_size=steps)


@engine_given(streams(5), local=12, spark=2, spark_strategies=(streams(2),))
def test_bit_and_bool_aggregates_match_duckdb(engine: Any, steps: list) -> None:
    p = pipeline_on(engine)
    oracle = SqlOracle(DDL + VIEWS)
    p.sql(DDL + VIEWS)
    present: list[tuple] = []
    try:
        for k, (rows, share) in enumerate(steps):
            gone = present[: int(len(present) * share)]
            present = present[len(gone) :] + rows
            oracle.run(p, [({"t": rows} if rows else {}, {"t": gone} if gone else {})])
            if k == len(steps) - 1 and present:  # empty the table: groups go, the global row is NULLs
                oracle.run(p, [({}, {"t": present})])
    finally:
        p.close()


def test_errors_name_the_call() -> None:
    from dbspark import Pipeline

    p = Pipeline(engine="local")
    p.sql("CREATE TABLE t (s VARCHAR, x BIGINT);")
    with pytest.raises(SchemaError, match=r"BIT_OR\(s\) AS v.*takes an integer"):
        p.sql("CREATE VIEW bad AS SELECT bit_or(s) AS v FROM t;")
    with pytest.raises(SchemaError, match=r"BOOL_AND takes a BOOLEAN"):
        p.sql("CREATE VIEW bad AS SELECT bool_and(x) AS v FROM t;")
    with pytest.raises(UnsupportedError, match=r"BIT_XOR\(DISTINCT"):
        p.sql("CREATE VIEW bad AS SELECT bit_xor(DISTINCT x) AS v FROM t;")
