"""dbspark as a Spark Connect client (issue 22): pipelines on a `pyspark.sql.connect` session, served by
a local Spark Connect server in its own process (the `connect_session` fixture), each step checked
against DuckDB (`SqlOracle`). The client process has no JVM, so an RDD, `sparkContext` or `_jvm` use
anywhere on these paths fails here."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest

import dbspark
from dbspark.testing.sql_oracle import SqlOracle

pytestmark = pytest.mark.spark

DDL = """
CREATE TABLE emp (id BIGINT, name VARCHAR, dept BIGINT, boss BIGINT, salary DECIMAL(10,2), hired DATE);
CREATE TABLE dept (id BIGINT PRIMARY KEY, title VARCHAR);
CREATE VIEW per_dept AS SELECT d.title, count(*) AS n, sum(e.salary) AS total, min(e.salary) AS lo,
  max(e.hired) AS last_hired FROM emp e JOIN dept d ON e.dept = d.id GROUP BY d.title;
CREATE VIEW depts_used AS SELECT DISTINCT dept FROM emp;
CREATE VIEW chain AS WITH RECURSIVE up(id, top) AS (
    SELECT id, boss FROM emp WHERE boss IS NOT NULL
    UNION SELECT up.id, emp.boss FROM up JOIN emp ON up.top = emp.id WHERE emp.boss IS NOT NULL)
  SELECT * FROM up;
"""

D = dt.date
E1 = (1, "ann", 10, None, Decimal("120.00"), D(2020, 1, 5))
E2 = (2, "bob", 10, 1, Decimal("80.50"), D(2021, 3, 1))
E3 = (3, "cy", 20, 2, Decimal("95.25"), D(2022, 7, 9))
E4 = (4, "dee", 30, 3, None, None)
E5 = (5, "eve", 20, 3, Decimal("60.00"), D(2023, 2, 2))

# (inserts, deletes) per step: keyed upserts (an insert of an existing key replaces its row), deletes by
# key and of bag rows, duplicates, NULLs, an edge that extends and then cuts the recursive chain
STEPS: list[tuple[dict[str, Any], dict[str, Any]]] = [
    ({"emp": [E1, E2, E3, E3], "dept": [(10, "eng"), (20, "ops")]}, {}),
    ({"emp": [E4, E5], "dept": [(20, "ops2"), (30, "eng")]}, {"emp": [E3]}),
    ({"dept": [(10, "research")]}, {"emp": [E2, E3], "dept": [(30, "eng")]}),
]


def spark_frame(spark: Any, table: str, rows: list[tuple]) -> Any:
    schema = {
        "emp": "id BIGINT, name STRING, dept BIGINT, boss BIGINT, salary DECIMAL(10,2), hired DATE",
        "dept": "id BIGINT, title STRING",
    }[table]
    return spark.createDataFrame(rows, schema)


def test_the_session_is_a_connect_session(connect_session):
    assert type(connect_session).__module__ == "pyspark.sql.connect.session"


def test_pipeline_on_spark_connect(connect_session, tmp_path):
    """Join + GROUP BY with MIN/MAX, DISTINCT, WITH RECURSIVE and a keyed table (upserts, deletes by key)
    with a durable state directory: two steps pushing Spark (Connect) DataFrames, the pipeline closed and
    reopened from its directory, two more steps pushing tuples; every view checked after every step."""
    frames = [
        tuple({t: spark_frame(connect_session, t, rows) for t, rows in side.items()} for side in step)
        for step in STEPS[:2]
    ]
    oracle = SqlOracle(DDL)
    p = dbspark.Pipeline(tmp_path / "state", engine="spark", spark=connect_session)
    p.sql(DDL)
    try:
        oracle.run(p, frames)
    finally:
        p.close()
    q = dbspark.Pipeline(tmp_path / "state", engine="spark", spark=connect_session)
    q.sql(DDL)
    try:
        assert q.steps == 2
        oracle.check(q, what="after reopening")
        oracle.run(q, STEPS[2:])
    finally:
        q.close()
