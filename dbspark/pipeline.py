"""A pipeline: tables and views maintained incrementally, on Spark by default, durable in a directory.

    p = dbspark.Pipeline("state/")                    # engine="spark" (default) | "local"; spark=<session>
    orders = p.table("orders", {"id": "int64", "cust": "int64", "total": "float64"})
    p.create_view("big", orders.filter(col("total") > 100).stream_aggregate("cust", n="count"))
    p.insert("orders", rows); changes = p.step(); p.view("big")

The views are declared as ordinary (non-incremental) circuits; the pipeline incrementalizes them once
(`dbsp-paper.txt` Algorithm 4.8) and runs Q^Δ. With a directory, every step commits atomically: the
engine's state files and the views' change logs of step N are written first, then a checkpoint naming
them replaces the previous one in one rename (the commit); files of a step that never committed are
swept when the pipeline is reopened, so a pipeline killed mid-step resumes after its last committed
step with the same views, and the step's outputs are not duplicated when it is re-run.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from dbspark.circuit.circuit import Circuit
from dbspark.circuit.runtime import Runtime
from dbspark.circuit.stream import Stream
from dbspark.errors import CircuitError, UnknownNameError

CHECKPOINT = "checkpoint.pkl"


class Pipeline:
    """Tables, views and the runtime that keeps the views up to date."""

    def __init__(self, directory: str | Path | None = None, *, engine: str = "spark", spark: Any = None,
                 master: str | None = None, **options: Any) -> None:
        if engine not in ("spark", "local"):
            raise UnknownNameError(f"unknown engine {engine!r}; the engines are 'spark' and 'local'")
        self.engine = engine
        self.directory = Path(directory) if directory is not None else None
        self._options = dict(options)
        if engine == "spark":
            self._options.update(spark=spark, master=master)
            if self.directory is not None:
                self._options["directory"] = self.directory / "state"
        self.circuit = Circuit()
        self.runtime: Runtime | None = None
        self._pending: list[tuple[str, Any, Any]] = []

    # ---- declaring ----------------------------------------------------------------------------
    def table(self, name: str, schema: Mapping[str, Any], kind: str = "bag") -> Stream:
        """A base table: a bag by default (deletes must match rows that are there), or 'set' / 'zset'."""
        self._not_started("declare a table")
        return self.circuit.input(name, schema, kind=kind)

    def create_view(self, name: str, stream: Stream) -> None:
        """Maintain `stream` (built from tables with the non-incremental operators) as view `name`."""
        self._not_started("declare a view")
        self.circuit.output(name, stream)

    @property
    def tables(self) -> list[str]:
        return list(self.circuit.inputs)

    @property
    def views(self) -> list[str]:
        return list(self.circuit.outputs)

    def _not_started(self, what: str) -> None:
        if self.runtime is not None:
            raise CircuitError(f"cannot {what}: the pipeline is running (declare everything before the first step)")

    # ---- running ------------------------------------------------------------------------------
    def start(self) -> Runtime:
        """Incrementalize the views and start the runtime (resuming from the directory's checkpoint)."""
        if self.runtime is not None:
            return self.runtime
        if not self.circuit.outputs:
            raise CircuitError("the pipeline has no views; declare one with create_view (or sql/datalog)")
        rt = self.circuit.incrementalize().run(self.engine, **self._options)
        if self.directory is not None:
            self.directory.mkdir(parents=True, exist_ok=True)
            ckpt = self.directory / CHECKPOINT
            if ckpt.exists():
                rt.restore(ckpt)
            sweep = getattr(rt.kernel, "storage", None)
            if sweep is not None:
                sweep.sweep_uncommitted(rt.time)
        self.runtime = rt
        return rt

    @property
    def steps(self) -> int:
        """The number of committed steps."""
        return self.start().time

    def push(self, table: str, rows: Any, weights: Any = None) -> None:
        self.start().push(table, rows, weights)

    def insert(self, table: str, rows: Any) -> None:
        self.push(table, rows, 1)

    def delete(self, table: str, rows: Any) -> None:
        self.push(table, rows, -1)

    def step(self, sink: Callable[[int, dict[str, Any]], None] | None = None) -> dict[str, Any]:
        """Apply the queued changes; {view: its change}. Atomic: on an error nothing is applied.

        `sink(step, changes)` writes the changes somewhere before the step commits; it must replace what
        an earlier, uncommitted run of the same step wrote (the step is re-run after a crash)."""
        rt = self.start()

        def commit(out: dict[str, Any]) -> None:
            if sink is not None:
                sink(rt.time - 1, out)
            if self.directory is not None:
                _fault_point(rt.time - 1)
                rt.checkpoint(self.directory / CHECKPOINT)

        return rt.step(commit=commit)

    def view(self, name: str) -> Any:
        """A view's current contents (rows with weights; on Spark, `.frame` is the DataFrame)."""
        return self.start().view(name)

    def close(self) -> None:
        if self.runtime is not None:
            self.runtime.kernel.close()
            self.runtime = None

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _fault_point(step: int) -> None:
    """Tests kill the process here, mid-step (state and outputs written, not committed)."""
    at = os.environ.get("DBSPARK_KILL_BEFORE_COMMIT")
    if at is not None and int(at) == step:
        os.kill(os.getpid(), signal.SIGKILL)
