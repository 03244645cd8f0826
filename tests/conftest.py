"""Shared fixtures: one `local[2]` SparkSession for the whole run, and the `engine` the shared tests run on.

`engine` is parametrized over "local" and "spark"; a test that takes it runs once per engine, and its
spark instance carries the `spark` marker, so `pytest -m "not spark"` runs the local engine only and
`pytest -m spark` the spark engine only. What the fixture yields goes to `circuit.run(engine)`: the
name "local", or for spark a factory that builds a `SparkKernel` on the shared session (every runtime
gets its own kernel, hence its own state directory, removed at the end of the session).
"""

from __future__ import annotations

import os
import site
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dbspark.testing.engines import scale_examples

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
    `engine` or of another engine fixture, whose value is "spark"), and every test that uses a Spark
    session fixture: the local lane (`-m "not spark"`) starts no JVM. Every property test runs its
    share of examples (`dbspark.testing.engines.EXAMPLES`)."""
    sessions = {"spark_session", "connect_session", "cluster_session"}
    for item in items:
        scale_examples(getattr(item, "obj", None))
        callspec = getattr(item, "callspec", None)
        if callspec is not None and any(
            isinstance(v, str) and v == "spark" for v in callspec.params.values()
        ):
            item.add_marker(pytest.mark.spark)
        elif sessions & set(getattr(item, "fixturenames", ())):
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


# a Spark Connect server's settings: the shared session's, less what a Connect server runs without
CONNECT_CONF = {k: v for k, v in SPARK_CONF.items() if k not in ("spark.driver.memory", "spark.log.level")}
CONNECT_CONF["spark.driver.memory"] = "1g"


@pytest.fixture(scope="module")
def connect_session() -> Iterator[Any]:
    """A Spark Connect session (`pyspark.sql.connect`) on a local Spark Connect server started in its own
    process (`dbspark.testing.connect_server`) for the module, stopped after it. Skipped, saying why,
    when pyspark's connect extra is not installed or the server does not start."""
    from dbspark.engines.spark.session import check_java

    check_java()
    try:
        from dbspark.testing.connect_server import ConnectServer, ConnectServerError

        server = ConnectServer("local[2]", CONNECT_CONF)
    except ImportError as e:
        pytest.skip(f"Spark Connect needs pyspark's connect extra (pip install 'pyspark[connect]'): {e}")
    except ConnectServerError as e:
        pytest.skip(f"no local Spark Connect server: {e}")
    with server:
        yield server.session()


def dbspark_zip(directory: Path) -> Path:
    """This checkout's `dbspark` package as a zip for `--py-files` / `addArtifacts(..., pyfile=True)`."""
    import dbspark

    pkg = Path(dbspark.__file__).parent
    out = directory / "dbspark.zip"
    with zipfile.ZipFile(out, "w") as z:
        for f in pkg.rglob("*.py"):
            z.write(f, f.relative_to(pkg.parent))
    return out


def python_without_dbspark(directory: Path) -> Path:
    """A Python for Spark's workers that sees site-packages but not an installed dbspark: `python -S`
    (no .pth files, so no editable install) with site-packages on PYTHONPATH (`spark.executorEnv`)."""
    script = directory / "python-without-dbspark"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
    script.chmod(0o755)
    return script


@pytest.fixture(scope="module")
def cluster_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A Spark Connect session on a `local-cluster[2,1,1024]` master: a Spark Connect server whose two
    executors are separate processes, whose Python workers do not see the installed dbspark; dbspark is
    shipped to them as a user would, `spark.addArtifacts(<zip>, pyfile=True)`. Skipped, saying why, when
    the cluster does not start."""
    from dbspark.engines.spark.session import check_java

    check_java()
    tmp = tmp_path_factory.mktemp("cluster")
    python = str(python_without_dbspark(tmp))
    conf = {
        **CONNECT_CONF,
        "spark.pyspark.python": python,
        "spark.executorEnv.PYTHONPATH": os.pathsep.join(site.getsitepackages()),
    }
    env = {"PYSPARK_PYTHON": python, "SPARK_WORKER_DIR": str(tmp / "work"), "PYTHONPATH": ""}
    try:
        from dbspark.testing.connect_server import ConnectServer, ConnectServerError

        server = ConnectServer("local-cluster[2,1,1024]", conf, env=env)
    except ImportError as e:
        pytest.skip(f"Spark Connect needs pyspark's connect extra (pip install 'pyspark[connect]'): {e}")
    except ConnectServerError as e:
        pytest.skip(f"no local-cluster[2,1,1024] Spark Connect server: {e}")
    with server:
        spark = server.session()
        if os.environ.get("DBSPARK_TEST_NO_SHIP") != "1":  # (set: see the test fail without it)
            spark.addArtifacts(str(dbspark_zip(tmp)), pyfile=True)
        yield spark


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
