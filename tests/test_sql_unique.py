"""The UNIQUE constraint in CREATE TABLE (`a INT UNIQUE`, `UNIQUE (b, c)`), as DuckDB enforces it: a step
after which two rows hold equal values in the unique column(s), none NULL, is rejected whole (DataError
naming the table, the columns and the duplicated values, in DuckDB's words "Duplicate key ... violates
unique constraint"); NULLs are distinct; a key deleted may be inserted again, in the same step or later.

Each step runs on both engines and on DuckDB (deletes, then inserts, as the oracle applies a step):
dbspark rejects a step exactly when DuckDB raises a ConstraintException, and keeps its views.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import duckdb
import pytest

import dbspark
from dbspark.errors import DataError, UnknownNameError
from dbspark.testing.sql_oracle import SqlOracle

DDL = """CREATE TABLE t (a INTEGER UNIQUE, b INTEGER, c VARCHAR, d INTEGER, UNIQUE (b, c));
CREATE TABLE s (k INTEGER, x INTEGER);
CREATE VIEW v AS SELECT * FROM t;
CREATE VIEW w AS SELECT b, count(*) AS n FROM t GROUP BY b;
CREATE VIEW z AS SELECT k, x FROM s;
"""

# (inserts, deletes) of table t per step; table s gets a row every step (the step's other table)
STEPS: list[tuple[list[tuple], list[tuple]]] = [
    ([(1, 1, "x", 0), (None, 1, None, 0), (None, 1, None, 0), (2, None, "x", 0), (3, None, "x", 0)], []),
    ([(1, 2, "y", 0)], []),  # a = 1 again
    ([(4, 1, "x", 0)], []),  # (b, c) = (1, 'x') again
    ([(5, 5, "a", 0), (5, 6, "a", 0)], []),  # a duplicate inside one insert
    ([(6, 1, "x", 0)], [(1, 1, "x", 0)]),  # delete and re-insert (b, c) in one step
    ([(1, 7, "q", 0)], []),  # a = 1 was deleted in the step before: free again
    ([(8, 1, "x", 1)], []),  # passes UNIQUE (a), fails UNIQUE (b, c): nothing of it applied
    ([(8, 8, "x", 1)], []),  # a = 8 is free (the rejected step left no trace in the a index)
    ([], [(None, 1, None, 0)]),
    ([(None, 8, "x", 0)], []),  # NULL in a: (b, c) = (8, 'x') is a duplicate
    ([(None, 8, None, 0), (None, 8, None, 0)], []),  # NULLs are distinct
]


def _pipeline(engine: str, request: Any) -> dbspark.Pipeline:
    if engine == "spark":
        return dbspark.Pipeline(engine="spark", spark=request.getfixturevalue("spark_session"))
    return dbspark.Pipeline(engine="local")


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_unique_rejects_a_step_that_duplicates_a_key_as_duckdb(engine: str, request: Any) -> None:
    o, p = SqlOracle(DDL), _pipeline(engine, request)
    present: Counter = Counter()
    rejected = []
    try:
        p.sql(DDL)
        for i, (ins, all_dels) in enumerate(STEPS, start=1):
            have = Counter(present)
            dels = [r for r in all_dels if have[r] > 0 and not have.subtract([r])]
            snap = {t: o.table(t) for t in o.tables}
            p.insert("s", [(i, i)])
            o.insert("s", [(i, i)])
            if dels:
                p.delete("t", dels)
                o.delete("t", dels)
            p.insert("t", ins)
            try:
                o.insert("t", ins)
                duck_error = None
            except duckdb.ConstraintException as e:
                duck_error = str(e)
            if duck_error is not None:
                with pytest.raises(DataError) as err:
                    p.step()
                msg = str(err.value)
                assert "table 't': Duplicate key" in msg and "violates unique constraint" in msg, msg
                # the duplicated key as DuckDB names it, e.g. "a: 1" or "b: 1, c: x"
                key = (
                    duck_error.split('Duplicate key "')[1].split('"')[0]
                    if "Duplicate key" in duck_error
                    else ""
                )
                assert key in msg, (msg, duck_error)
                assert "rejected, nothing applied" in msg
                for t, df in snap.items():  # DuckDB too: the whole step is undone
                    o.con.register("__s", df)
                    o.con.execute(f'DELETE FROM "{t}"; INSERT INTO "{t}" SELECT * FROM __s')
                    o.con.unregister("__s")
                rejected.append(i)
                o.check(p, what=f"after the rejected step {i}")
                continue
            p.step()
            present.subtract(dels)
            present.update(ins)
            o.check(p, what=f"after step {i}")
    finally:
        p.close()
    assert rejected == [2, 3, 4, 7, 10], rejected


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_unique_on_a_keyed_table_keeps_upserts_and_checks_the_other_columns(
    engine: str, request: Any
) -> None:
    """PRIMARY KEY tables here take an insert of an existing key as an update (dbspark's documented
    semantics); a UNIQUE column of such a table is checked on the rows after the step's updates."""
    p = _pipeline(engine, request)
    try:
        p.sql("CREATE TABLE k (id INTEGER PRIMARY KEY, e VARCHAR UNIQUE); CREATE VIEW v AS SELECT * FROM k;")
        p.insert("k", [(1, "a"), (2, "b")])
        p.step()
        p.insert("k", [(1, "a")])  # the same row again: an update that changes nothing
        p.insert("k", [(2, "c")])  # frees 'b'
        p.step()
        p.insert("k", [(3, "b")])
        p.step()
        p.insert("k", [(4, "a")])
        with pytest.raises(DataError, match="table 'k': Duplicate key \"e: a\" violates unique constraint"):
            p.step()
        p.insert("k", [(1, "z"), (4, "a")])  # 'a' moves from id 1 to id 4 in one step
        p.step()
        rows = sorted(p.view("v").to_zset().consolidate().df.rows())
        assert rows == [(1, "z", 1), (2, "c", 1), (3, "b", 1), (4, "a", 1)]
    finally:
        p.close()


def test_unique_survives_a_checkpoint(tmp_path: Any) -> None:
    """The constraint's index is part of the pipeline's durable state."""
    ddl = "CREATE TABLE t (a INTEGER UNIQUE, b INTEGER); CREATE VIEW v AS SELECT * FROM t;"
    with dbspark.Pipeline(tmp_path, engine="local") as p:
        p.sql(ddl)
        p.insert("t", [(1, 1)])
        p.step()
    with dbspark.Pipeline(tmp_path, engine="local") as p:
        p.sql(ddl)
        p.insert("t", [(1, 2)])
        with pytest.raises(DataError, match='Duplicate key "a: 1"'):
            p.step()
        assert p.steps == 1


def test_unique_names_unknown_columns() -> None:
    p = dbspark.Pipeline(engine="local")
    with pytest.raises(UnknownNameError, match="UNIQUE column z"):
        p.sql("CREATE TABLE t (a INTEGER, UNIQUE (a, z))")
