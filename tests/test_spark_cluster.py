"""dbspark on a cluster (issue 22): a pipeline on `local-cluster[2,1,1024]` (the `cluster_session`
fixture: a Spark Connect server whose two executors are separate processes), so work that silently
relied on the driver's process (its memory, its Python modules) fails here. The executors' Python does
not see the installed dbspark; it gets dbspark the way a user ships it, `spark.addArtifacts(<zip>,
pyfile=True)`, and a Python callback (`flat_map`, run by the executors' Python workers) needs it.
Every view after every step is checked against DuckDB (`SqlOracle`)."""

from __future__ import annotations

from typing import Any

import pytest

import dbspark
from dbspark.testing.sql_oracle import SqlOracle

pytestmark = pytest.mark.spark

DDL = """
CREATE TABLE edge (src BIGINT, dst BIGINT, w BIGINT);
CREATE TABLE node (id BIGINT PRIMARY KEY, label VARCHAR);
CREATE VIEW out_weight AS SELECT n.label, count(*) AS n, sum(e.w) AS total, max(e.w) AS hi
  FROM edge e JOIN node n ON e.src = n.id GROUP BY n.label;
CREATE VIEW reach AS WITH RECURSIVE r(a, b) AS (
    SELECT src, dst FROM edge UNION SELECT r.a, edge.dst FROM r JOIN edge ON r.b = edge.src)
  SELECT * FROM r;
"""
# what the Python view computes, for DuckDB
LABELS = "CREATE VIEW labels AS SELECT id, upper(label) AS u FROM node WHERE label IS NOT NULL;"

STEPS: list[tuple[dict[str, Any], dict[str, Any]]] = [
    ({"edge": [(1, 2, 5), (2, 3, 7), (2, 3, 7)], "node": [(1, "a"), (2, "b"), (3, None)]}, {}),
    ({"edge": [(3, 1, 1), (4, 4, 2)], "node": [(2, "bb"), (4, "a")]}, {"edge": [(2, 3, 7)]}),
    ({}, {"edge": [(1, 2, 5)], "node": [(1, "a")]}),
]


def labels_view(p: Any) -> None:
    """`labels` as a Python callback: runs in the executors' Python workers, which import dbspark."""

    def upper(row: dict) -> Any:
        if row["label"] is not None:
            yield (row["id"], row["label"].upper())

    p.create_view("labels", p.relation("node").flat_map(upper, {"id": "int64", "u": "str"}))


def test_the_executors_are_other_processes_without_the_installed_dbspark(cluster_session):
    import os

    import pyarrow as pa

    def where(batches: Any) -> Any:
        import importlib.util
        import os

        for b in batches:
            spec = importlib.util.find_spec("dbspark")
            origin = "" if spec is None or spec.origin is None else spec.origin
            yield pa.RecordBatch.from_pydict(
                {"pid": [os.getppid()] * b.num_rows, "at": [origin] * b.num_rows}
            )

    rows = cluster_session.range(8).repartition(4).mapInArrow(where, "pid long, at string").collect()
    assert os.getpid() not in {r.pid for r in rows}
    assert rows and all("dbspark.zip" in r.at or "/artifacts/" in r.at for r in rows), rows


def test_pipeline_on_a_local_cluster(cluster_session, tmp_path):
    """A SQL join + GROUP BY, a recursive view and a Python view over a state directory, steps with
    deletes, the pipeline closed after step 2 and reopened from its directory for step 3."""
    oracle = SqlOracle(DDL + LABELS)
    p = dbspark.Pipeline(tmp_path / "state", engine="spark", spark=cluster_session)
    p.sql(DDL)
    labels_view(p)
    try:
        oracle.run(p, STEPS[:2])
    finally:
        p.close()
    q = dbspark.Pipeline(tmp_path / "state", engine="spark", spark=cluster_session)
    q.sql(DDL)
    labels_view(q)
    try:
        assert q.steps == 2
        oracle.check(q, what="after reopening")
        oracle.run(q, STEPS[2:])
    finally:
        q.close()


@pytest.mark.parametrize("kill", ["kill-task-once", "kill-executor-once"])
def test_an_executor_task_killed_mid_step_is_retried_and_the_step_is_unchanged(
    cluster_session, tmp_path, kill
):
    """A step whose change is on Spark writes its state in executor tasks; one of them is killed after
    writing its files and before returning them (`engines/spark/buckets.py` `_fault_point`): its Python
    worker exits, as a crashed executor's would, or its executor's JVM is SIGKILLed (the executor is
    lost; the cluster starts another). Spark runs the task again, which writes the same files; the step
    commits once and every view equals DuckDB's."""

    edge = "src long, dst long, w long"
    node = "id long, label string"
    oracle = SqlOracle(DDL)
    p = dbspark.Pipeline(tmp_path / "state", engine="spark", spark=cluster_session)
    p.sql(DDL)
    try:
        oracle.run(p, STEPS[:1])
        trigger = tmp_path / "state" / "state" / "traces" / kill  # (the kernel's traces)
        trigger.write_text("")
        cluster_session.conf.set("spark.dbspark.placement", "cluster")  # (small: it would run in the driver)
        ins, dels = STEPS[1]
        frames = (
            {
                "edge": cluster_session.createDataFrame(ins["edge"], edge),
                "node": cluster_session.createDataFrame(ins["node"], node),
            },
            {"edge": cluster_session.createDataFrame(dels["edge"], edge)},
        )
        oracle.run(p, [frames])
        assert not trigger.exists() and trigger.with_name(kill + ".taken").exists()
        assert p.steps == 2
        cluster_session.conf.unset("spark.dbspark.placement")
        oracle.run(p, STEPS[2:])
    finally:
        cluster_session.conf.unset("spark.dbspark.placement")
        p.close()
