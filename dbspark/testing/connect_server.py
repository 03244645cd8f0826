"""A Spark Connect server in its own process, for tests that run dbspark as a Spark Connect client.

    with ConnectServer("local[2]", {"spark.sql.ansi.enabled": "true"}) as server:
        spark = server.session()          # a pyspark.sql.connect.session.SparkSession
        ...

The server is pip's pyspark's own (`bin/spark-submit --class ...SparkConnectServer`, what
`sbin/start-connect-server.sh` runs, with the `spark-connect` jar pyspark ships), started in the
foreground on a free loopback port and stopped by its process id. The client process has no JVM: what
dbspark does through the session goes over gRPC, as for a user of a remote cluster. The master may be
`local-cluster[N,cores,memory]`: then executors are separate processes started by Spark's scripts.

pyspark chooses between its classic and its Connect implementation of `pyspark.sql.functions` by a
process-wide environment variable (`SPARK_CONNECT_MODE_ENABLED`, set when a remote session is built):
a process is either a Connect client or a classic driver. `session()` sets it, and `close()` restores
it, so that a test process can use a classic session before and after (never at the same time).
"""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

MODE = "SPARK_CONNECT_MODE_ENABLED"


class ConnectServerError(RuntimeError):
    """The server did not start; the message has its log's last lines."""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spark_home() -> str:
    from pyspark.find_spark_home import _find_spark_home

    return os.environ.get("SPARK_HOME") or _find_spark_home()


class ConnectServer:
    """A Spark Connect server on `master` with `conf` (static settings too), in a child process."""

    def __init__(
        self,
        master: str,
        conf: dict[str, str] | None = None,
        env: dict[str, str] | None = None,
        timeout: float = 180,
    ) -> None:
        import pyspark.sql.connect  # noqa: F401  (the connect extra: grpcio, ...; ImportError if missing)

        self.port = _free_port()
        self.dir = tempfile.mkdtemp(prefix="dbspark-connect-")
        self.log = Path(self.dir) / "server.log"
        home = spark_home()
        settings = {
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            **(conf or {}),
        }
        cmd = [os.path.join(home, "bin", "spark-submit"), "--master", master]
        for k, v in settings.items():
            cmd += ["--conf", f"{k}={v}"]
        cmd += ["--class", "org.apache.spark.sql.connect.service.SparkConnectServer", "spark-internal"]
        child_env = {k: v for k, v in os.environ.items() if k not in (MODE, "SPARK_REMOTE")}
        child_env.update({"SPARK_HOME": home, "SPARK_CONNECT_MODE": "0", **(env or {})})
        child_env.pop("SPARK_CONNECT_AUTHENTICATE_TOKEN", None)
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                cmd,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=child_env,
                cwd=self.dir,
            )
        self._saved_mode: str | None = None
        self._session: Any = None
        self._wait(timeout)

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    def _tail(self, n: int = 15) -> str:
        try:
            lines = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-n:])

    def _wait(self, timeout: float) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise ConnectServerError(
                    f"the Spark Connect server exited with code {self.proc.returncode}:\n{self._tail()}"
                )
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                time.sleep(0.5)
        self.stop()
        raise ConnectServerError(
            f"the Spark Connect server did not listen within {timeout} s:\n{self._tail()}"
        )

    def session(self) -> Any:
        """A Spark Connect session on this server (this process becomes a Connect client)."""
        from pyspark.sql.connect.session import SparkSession

        if self._session is None:
            self._saved_mode = os.environ.get(MODE)
            os.environ[MODE] = "1"
            self._session = SparkSession.builder.remote(self.url).getOrCreate()
        return self._session

    def stop(self) -> None:
        if self._session is not None:
            try:
                self._session.stop()
            except Exception:
                pass
            self._session = None
            if self._saved_mode is None:
                os.environ.pop(MODE, None)
            else:
                os.environ[MODE] = self._saved_mode
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> ConnectServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
