"""The SparkSession dbspark runs on, obtained the way a PySpark user expects.

A session passed in is used as is; otherwise the active session (`SparkSession.getActiveSession()`),
otherwise a new `local[*]` one (a master URL may be given instead). dbspark stops only a session it
started. Its own settings live under `spark.dbspark.*` in the session's configuration. No RDD or
`_jvm` access, so that Spark Connect sessions work too. Before starting a JVM, the Java runtime is
checked so that a missing or old Java is a clear error naming the fix rather than a gateway crash.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from dbspark.errors import DbsparkError

MIN_JAVA = 17
DEFAULTS = {  # settings of a session dbspark starts itself (a given session is left as configured)
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.ansi.enabled": "true",  # integer overflow is an error, never a silent wrap
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.log.level": "ERROR",
    "spark.ui.showConsoleProgress": "false",
    "spark.python.sql.dataFrameDebugging.enabled": "false",  # halves the py4j round trips of plan building
}


class SparkSetupError(DbsparkError):
    """Spark cannot start here (no Java, an old Java, pyspark missing); the message names the fix."""


def java_version(java: str | None = None) -> int | None:
    """The major version of the Java runtime Spark would use (JAVA_HOME first, then PATH), or None."""
    if java is None:
        home = os.environ.get("JAVA_HOME")
        java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java or not os.path.exists(java):
        return None
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except OSError:
        return None
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not m:
        return None
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major  # "1.8.0" is Java 8


def check_java() -> None:
    v = java_version()
    if v is None:
        raise SparkSetupError(
            "the spark engine needs a Java runtime (17 or newer) and none was found on PATH or in JAVA_HOME; "
            "install one (e.g. `apt-get install -y openjdk-17-jre-headless`) or use engine='local'"
        )
    if v < MIN_JAVA:
        raise SparkSetupError(
            f"the spark engine needs Java {MIN_JAVA} or newer, found Java {v}; install a newer one "
            "(e.g. `apt-get install -y openjdk-17-jre-headless`) and point JAVA_HOME at it, or use engine='local'"
        )


@dataclass
class SessionHandle:
    """The session in use and whether dbspark started it (then `close()` stops it)."""

    spark: Any
    owned: bool
    conf: dict[str, str] = field(default_factory=dict)

    # within a step (`frozen`): each setting read once (a read is a round trip to the JVM or the Connect
    # server, and a recursive scope places its values at every iteration)
    _frozen: dict[str, str | None] | None = field(default=None, repr=False)

    def setting(self, name: str, default: str) -> str:
        """`spark.dbspark.<name>` from the session's configuration, else `default`."""
        if self._frozen is not None and name in self._frozen:
            v = self._frozen[name]
        else:
            try:
                v = self.spark.conf.get(f"spark.dbspark.{name}", None)
            except Exception:  # a Connect server that refuses unknown keys
                v = None
            if self._frozen is not None:
                self._frozen[name] = v
        return default if v is None else str(v)

    @contextlib.contextmanager
    def frozen(self) -> Iterator[None]:
        """dbspark's settings read once for the duration (a step: a setting changed during a step takes
        effect at the next one)."""
        self._frozen = {}
        try:
            yield
        finally:
            self._frozen = None

    _local: bool | None = field(default=None, repr=False)

    @property
    def local_master(self) -> bool:
        """Whether the session runs on a `local` / `local[n]` master: its executors are threads of the
        driver's JVM on the driver's machine (not `local-cluster`, whose executors are processes of
        their own, nor a Connect server whose master is not known here)."""
        if self._local is None:
            try:
                master = str(self.spark.conf.get("spark.master", "") or "")
            except Exception:  # (Spark Connect may refuse the key)
                master = ""
            self._local = master == "local" or master.startswith("local[")
        return self._local

    def close(self) -> None:
        if self.owned:
            self.spark.stop()
            self.owned = False


def get_session(
    spark: Any = None, master: str | None = None, conf: dict[str, str] | None = None
) -> SessionHandle:
    """The session to run on: `spark` if given, else the active one, else a new one on `master`."""
    if spark is not None:
        return SessionHandle(spark, owned=False)
    try:
        from pyspark.sql import SparkSession
    except ImportError as e:  # pragma: no cover - pyspark is a dependency
        raise SparkSetupError(
            "the spark engine needs pyspark: `pip install pyspark`, or use engine='local'"
        ) from e
    if master is None:
        active = SparkSession.getActiveSession()
        if active is not None:
            return SessionHandle(active, owned=False)
    if not os.environ.get("SPARK_REMOTE"):
        check_java()
    b = SparkSession.builder.master(master or os.environ.get("DBSPARK_SPARK_MASTER", "local[*]"))
    b = b.appName("dbspark")
    for k, v in {**DEFAULTS, **(conf or {})}.items():
        b = b.config(k, v)
    try:
        s = b.getOrCreate()
    except Exception as e:
        raise SparkSetupError(
            f"could not start Spark ({type(e).__name__}: {e}); check Java and pyspark"
        ) from e
    return SessionHandle(s, owned=True)
