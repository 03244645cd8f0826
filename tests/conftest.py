"""Shared fixtures: one `local[2]` SparkSession for the whole run, and the `engine` the shared tests run on.

`engine` is parametrized over "local" and "spark"; a test that takes it runs once per engine, and its
spark instance carries the `spark` marker, so `pytest -m "not spark"` runs the local engine only and
`pytest -m spark` the spark engine only. What the fixture yields goes to `circuit.run(engine)`: the
name "local", or for spark a factory that builds a `SparkKernel` on the shared session (every runtime
gets its own kernel, hence its own state directory, removed at the end of the session).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

ENGINES = ("local", "spark")

SPARK_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.ansi.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # tiny data: planning adaptive stages and compiling generated code cost more than they save (the
    # interpreted and generated evaluation of an expression agree; Spark tests both)
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.log.level": "ERROR",
    # local mode runs everything in the driver JVM: the 1 GiB default heap ran out in the TPC-H test
    # (22 views), late in a full run that shares one session with every other Spark test
    "spark.driver.memory": "3g",
    # no Python call-site capture per Column call (several py4j round trips each)
    "spark.python.sql.dataFrameDebugging.enabled": "false",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test instance parametrized to run on the spark engine with `spark` (a parameter, of
    `engine` or of another engine fixture, whose value is "spark")."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and any(
            isinstance(v, str) and v == "spark" for v in callspec.params.values()
        ):
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def spark_session() -> Iterator[Any]:
    """The one SparkSession of the test run (`local[2]`, two shuffle partitions)."""
    from dbspark.engines.spark.session import check_java

    check_java()
    from pyspark.sql import SparkSession

    b = SparkSession.builder.master("local[2]").appName("dbspark-tests")
    for k, v in SPARK_CONF.items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    yield spark
    spark.stop()


class SparkEngine:
    """A kernel factory for `circuit.run(engine)`: a new `SparkKernel` on the shared session per runtime."""

    name = "spark"

    def __init__(self, spark: Any) -> None:
        self.spark = spark
        self.kernels: list[Any] = []

    def __call__(self, **options: Any) -> Any:
        from dbspark.engines.spark.kernel import SparkKernel

        k = SparkKernel(spark=self.spark, **options)
        self.kernels.append(k)
        return k

    def actions(self) -> int:
        """Spark actions run by every kernel made so far."""
        return sum(k.actions for k in self.kernels)

    def close(self) -> None:
        for k in self.kernels:
            k.close()  # removes the kernel's state directory; the shared session stays up
        self.kernels = []

    def __repr__(self) -> str:
        return "spark"


@pytest.fixture(scope="session")
def spark_engine(spark_session: Any) -> Iterator[SparkEngine]:
    e = SparkEngine(spark_session)
    yield e
    e.close()


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> Any:
    """What to pass to `circuit.run(engine)`: "local", or a spark kernel factory on the shared session."""
    if request.param == "local":
        return "local"
    return request.getfixturevalue("spark_engine")


@pytest.fixture(params=ENGINES)
def pipeline(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A fresh `dbspark.Pipeline` on each engine (spark: on the shared session), closed after the test."""
    import dbspark

    if request.param == "spark":
        p = dbspark.Pipeline(engine="spark", spark=request.getfixturevalue("spark_session"))
    else:
        p = dbspark.Pipeline(engine="local")
    yield p
    p.close()
