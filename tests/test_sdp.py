"""Spark Declarative Pipelines projects refreshed incrementally (issue 18, item 2): `dbspark run
spark-pipeline.yml` reads an SDP project as `spark-pipelines` does, applies only what is new in its
sources at each run and writes its materialized views as tables; after every run each table equals what
`spark-pipelines run` itself (pip's pyspark, a full recompute) produces on the same sources.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from typer.testing import CliRunner

from dbspark.cli.main import app
from dbspark.cli.sdp import refresh
from dbspark.errors import SchemaError, UnknownNameError, UnsupportedError
from dbspark.testing.sdp import assert_same_tables, oracle_copy, read_published, run_sdp

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "sdp"
sys.path.insert(0, str(EXAMPLE))
import data  # noqa: E402  (the example's generator)


def _shop(tmp: Path, orders: int = 2_000) -> Path:
    """A copy of the example project with its first sources."""
    shop = tmp / "shop"
    shop.mkdir()
    shutil.copy(EXAMPLE / "spark-pipeline.yml", shop)
    shutil.copytree(EXAMPLE / "transformations", shop / "transformations")
    data.initial(shop, orders)
    return shop


def _run(spec: Path, *args: str) -> str:
    r = CliRunner().invoke(app, ["run", str(spec), *args])
    assert r.exit_code == 0, r.output
    return r.output


@pytest.mark.spark
def test_two_runs_equal_spark_pipelines(tmp_path: Path, spark_session: Any) -> None:
    """The example run twice by `dbspark run` (the Spark engine, on the test session), with a new
    orders file and customer inserts, updates and deletes (Delta commits) in between; after each run
    every published table equals `spark-pipelines run`'s (a fresh `spark-pipelines` process per run:
    the test's longest part)."""
    shop = _shop(tmp_path)
    for k in range(2):
        if k:
            data.batch(shop, k)
        out = _run(shop / "spark-pipeline.yml")
        assert f"refresh {k + 1}" in out
        sdp = run_sdp(oracle_copy(shop, tmp_path / "sdp"))
        assert_same_tables(read_published(shop), sdp, f"after run {k + 1}")


def _full(shop: Path, tmp: Path) -> dict[str, pl.DataFrame]:
    """The tables a from-scratch refresh of the same project over the same sources writes."""
    again = tmp / "again"
    shutil.rmtree(again, ignore_errors=True)
    again.mkdir()
    shutil.copy(shop / "spark-pipeline.yml", again)
    shutil.copytree(shop / "transformations", again / "transformations")
    (again / "data").symlink_to(shop / "data", target_is_directory=True)
    refresh(again / "spark-pipeline.yml", engine="local", full_refresh_all=True)
    return read_published(again)


def test_runs_equal_a_refresh_from_scratch(tmp_path: Path) -> None:
    """Incremental runs (local engine) against a full refresh after each: the same tables; a run with
    nothing new changes nothing."""
    shop = _shop(tmp_path)
    spec = shop / "spark-pipeline.yml"
    for k in range(4):
        if k:
            data.batch(shop, k)
        r = refresh(spec, engine="local")
        assert r.step == k + 1 and r.read["orders"] > 0
        assert_same_tables(read_published(shop), _full(shop, tmp_path), f"after run {k + 1}")
    r = refresh(spec, engine="local")
    assert not r.read and all(changed == 0 for _, changed, _ in r.datasets.values())


def test_a_dataset_added_between_runs_is_backfilled_and_the_rest_kept(tmp_path: Path) -> None:
    shop = _shop(tmp_path)
    spec = shop / "spark-pipeline.yml"
    refresh(spec, engine="local")
    (shop / "transformations" / "more.sql").write_text(
        "CREATE MATERIALIZED VIEW per_region_day AS\n"
        "SELECT c.region, o.order_date, count(*) AS n FROM orders_clean o JOIN active_customers c ON o.cust = c.id\n"
        "GROUP BY c.region, o.order_date;\n"
    )
    r = refresh(spec, engine="local")
    assert r.datasets["per_region_day"][1] == r.datasets["per_region_day"][0] > 0  # backfilled: all of it new
    assert all(changed == 0 for n, (_, changed, _) in r.datasets.items() if n != "per_region_day")
    assert_same_tables(read_published(shop), _full(shop, tmp_path), "after a dataset was added")
    (shop / "transformations" / "more.sql").unlink()
    r = refresh(spec, engine="local")
    assert "per_region_day" not in r.datasets


def test_a_dataset_whose_definition_changed_is_rewritten_not_appended(tmp_path: Path) -> None:
    """A streaming table's new rows are appended to its table (a Parquet file per run); its contents
    after a changed definition are its table's, not an append to the old one."""
    shop = _shop(tmp_path)
    spec = shop / "spark-pipeline.yml"
    refresh(spec, engine="local")
    data.batch(shop, 1)
    refresh(spec, engine="local")
    big = shop / "storage" / "tables" / "big_orders"
    assert len(list(big.glob("*.parquet"))) == 2  # the first run's file and the batch's rows
    assert_same_tables(read_published(shop), _full(shop, tmp_path), "after an appended run")
    py = shop / "transformations" / "customers.py"
    py.write_text(py.read_text().replace('F.col("amount") >= 900', 'F.col("amount") >= 990'))
    r = refresh(spec, engine="local")
    assert r.datasets["big_orders"][1] == r.datasets["big_orders"][0] > 0  # its contents anew
    assert len(list(big.glob("*.parquet"))) == 1
    assert_same_tables(read_published(shop), _full(shop, tmp_path), "after a changed definition")


def test_full_refresh_of_a_dataset_and_of_all(tmp_path: Path) -> None:
    shop = _shop(tmp_path)
    spec = shop / "spark-pipeline.yml"
    refresh(spec, engine="local")
    data.batch(shop, 1)
    r = refresh(spec, engine="local", full_refresh=["daily"])
    assert r.datasets["daily"][1] >= r.datasets["daily"][0]  # its contents again, plus the batch's change
    assert_same_tables(read_published(shop), _full(shop, tmp_path), "after --full-refresh daily")
    out = _run(spec, "--engine", "local", "--full-refresh-all")
    assert "refresh 1" in out  # started over
    assert_same_tables(read_published(shop), _full(shop, tmp_path), "after --full-refresh-all")
    with pytest.raises(UnknownNameError, match="--full-refresh nope"):
        refresh(spec, engine="local", full_refresh=["nope"])


def test_flows_into_a_streaming_table_and_a_delta_table(tmp_path: Path) -> None:
    """`CREATE STREAMING TABLE t; CREATE FLOW ... INSERT INTO t BY NAME ...` twice is the union of the
    flows; a view declared USING delta is written as a Delta table."""
    shop = _shop(tmp_path)
    (shop / "transformations" / "flows.sql").write_text(
        "CREATE STREAMING TABLE notable;\n"
        "CREATE FLOW big AS INSERT INTO notable BY NAME SELECT order_id, 'big' AS why FROM STREAM(orders_clean) "
        "WHERE amount >= 990;\n"
        "CREATE FLOW odd AS INSERT INTO notable BY NAME SELECT 'no customer' AS why, order_id FROM STREAM orders_clean "
        "WHERE cust IS NULL;\n"
        "CREATE MATERIALIZED VIEW regions USING delta AS SELECT DISTINCT region FROM active_customers;\n"
    )
    spec = shop / "spark-pipeline.yml"
    refresh(spec, engine="local")
    data.batch(shop, 1)
    refresh(spec, engine="local")
    got = read_published(shop)
    assert (shop / "storage" / "tables" / "regions" / "_delta_log").is_dir()
    assert_same_tables(got, _full(shop, tmp_path), "with flows")
    assert set(got["notable"]["why"]) == {"big", "no customer"}


# ---- faults, named ------------------------------------------------------------------------------------
def _project(tmp: Path, spec: str, files: dict[str, str]) -> Path:
    p = tmp / "proj"
    (p / "t").mkdir(parents=True)
    (p / "spark-pipeline.yml").write_text(spec)
    for name, text in files.items():
        (p / "t" / name).write_text(text)
    return p / "spark-pipeline.yml"


SPEC = "name: x\nstorage: st\nlibraries:\n  - glob:\n      include: t/**\n"


@pytest.mark.parametrize(
    ("spec", "files", "error", "message"),
    [
        ("name: x\nlibraries: []\n", {}, SchemaError, "the required field 'storage' is missing"),
        (SPEC + "colour: red\n", {}, SchemaError, "unexpected field 'colour'"),
        (
            "name: x\nstorage: s\nlibraries:\n  - glob:\n      include: t/**/*.sql\n",
            {},
            SchemaError,
            "library glob",
        ),
        (SPEC, {"a.txt": "x"}, SchemaError, "neither a .py nor a .sql file"),
        (
            SPEC,
            {"a.sql": "CREATE MATERIALIZED VIEW m AS SELECT * FROM nowhere;"},
            UnknownNameError,
            r"a.sql:1: m: .*nowhere is neither a dataset",
        ),
        (
            SPEC,
            {
                "a.sql": "CREATE MATERIALIZED VIEW m AS SELECT 1 AS x;\nCREATE MATERIALIZED VIEW m AS SELECT 2 AS x;"
            },
            SchemaError,
            "a.sql:2: m is already defined",
        ),
        (
            SPEC,
            {
                "a.sql": "CREATE MATERIALIZED VIEW a AS SELECT * FROM b;\nCREATE MATERIALIZED VIEW b AS SELECT * FROM a;"
            },
            SchemaError,
            "cycle: a -> b -> a|cycle: b -> a -> b",
        ),
        (SPEC, {"a.sql": "DELETE FROM t;"}, UnsupportedError, "a.sql:1: the statement"),
        (
            SPEC,
            {
                "a.py": "from pyspark import pipelines as dp\n@dp.materialized_view\ndef r():\n    return spark.range(10)\n"
            },
            UnsupportedError,
            r"a.py:2: r: spark.range",
        ),
        (
            SPEC,
            {
                "a.py": "from pyspark import pipelines as dp\n@dp.materialized_view\ndef r():\n    return spark.sql('SELECT 1 AS x').toPandas()\n"
            },
            UnsupportedError,
            r"r: DataFrame.toPandas",
        ),
        (
            SPEC,
            {"a.py": "from pyspark import pipelines as dp\n@dp.materialized_view\ndef r():\n    return 5\n"},
            UnsupportedError,
            "r returns int, not a DataFrame",
        ),
        (
            SPEC,
            {"a.sql": "CREATE MATERIALIZED VIEW m AS SELECT * FROM parquet.`missing`;"},
            SchemaError,
            "no such file or folder",
        ),
    ],
)
def test_faults_are_errors_naming_the_file_and_definition(
    tmp_path: Path, spec: str, files: dict[str, str], error: type, message: str
) -> None:
    path = _project(tmp_path, spec, files)
    with pytest.raises(error, match=message):
        refresh(path, engine="local")
    r = CliRunner().invoke(app, ["run", str(path), "--engine", "local"])
    assert r.exit_code == 1 and "Traceback" not in r.output and "error:" in r.output


def test_a_file_source_only_grows(tmp_path: Path) -> None:
    shop = _shop(tmp_path)
    spec = shop / "spark-pipeline.yml"
    data.batch(shop, 1)
    refresh(spec, engine="local")
    (shop / "data" / "orders" / "batch-0000.parquet").unlink()
    with pytest.raises(
        UnsupportedError, match="the file batch-0000.parquet was read by an earlier run and is gone"
    ):
        refresh(spec, engine="local")
