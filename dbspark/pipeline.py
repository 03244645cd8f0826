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

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from dbspark import faults
from dbspark.circuit.checkpoint import DirectoryLock
from dbspark.circuit.circuit import Circuit
from dbspark.circuit.runtime import POLARS_CONTEXT, Runtime
from dbspark.circuit.stream import Stream
from dbspark.errors import (
    CheckpointError,
    CircuitError,
    DbsparkError,
    EngineError,
    ExecutorLostError,
    UnknownNameError,
    UnsupportedError,
)
from dbspark.operators.source import Lateness

CHECKPOINT = "checkpoint.json"
PICKLED = "checkpoint.pkl"  # the format before 2026-11-28: no longer read


class Pipeline:
    """Tables, views and the runtime that keeps the views up to date."""

    def __init__(
        self,
        directory: str | Path | None = None,
        *,
        engine: str = "spark",
        spark: Any = None,
        master: str | None = None,
        recursion_limit: int = 10_000,
        recursion: str | None = None,
        metrics: bool = False,
        **options: Any,
    ) -> None:
        if engine not in ("spark", "local"):
            raise UnknownNameError(f"unknown engine {engine!r}; the engines are 'spark' and 'local'")
        self.engine = engine
        self.recursion_limit = recursion_limit  # iterations of a recursive view per step (SQL and Datalog)
        # how recursive views are maintained: "auto", "nested" or "dred" (`incremental/fixpoint.py`);
        # None: each scope's own choice ("auto" unless built with another; `docs/recursion-strategies.md`)
        if recursion not in (None, "auto", "nested", "dred"):
            raise UnknownNameError(
                f"unknown recursion strategy {recursion!r}; the strategies are 'auto', 'nested' and 'dred'"
            )
        self.recursion = recursion
        self._metrics = metrics  # per operator and step (`metrics()`)
        self.directory = Path(directory) if directory is not None else None
        self._lock: DirectoryLock | None = None  # held from the start to close (`DirectoryLock`)
        self._options = dict(options)
        memory_limit = self._options.pop("memory_limit", None)  # (`engines/local/memory.py`)
        if memory_limit is not None:
            if engine == "spark":
                raise UnsupportedError(
                    "memory_limit is the local engine's; on Spark, memory is Spark's to set "
                    "(spark.driver.memory, spark.executor.memory)"
                )
            self._options["memory_limit"] = memory_limit
        if engine == "spark":
            self._options.update(spark=spark, master=master)
            if self.directory is not None:
                self._options["directory"] = self.directory / "state"
        self.circuit = Circuit()
        self.relations: dict[
            str, Stream
        ] = {}  # the catalog: tables and views by name (SQL and Datalog share it)
        self.runtime: Runtime | None = None
        self._pending: list[tuple[str, Any, Any]] = []
        # held by a step run from a streaming query's thread (`follow_stream`)
        self.step_lock = threading.Lock()
        # the .output directives' parameters of Datalog programs, per view (`dbspark.io.souffle_outputs`)
        self.datalog_outputs: dict[str, dict[str, Any]] = {}
        self._declaring_now = False  # inside `_declaring`

    # ---- declaring ----------------------------------------------------------------------------
    def table(
        self,
        name: str,
        schema: Mapping[str, Any],
        kind: str = "bag",
        primary_key: str | Sequence[str] | None = None,
        not_null: Sequence[str] = (),
        unique: Sequence[str | Sequence[str]] = (),
        lateness: tuple[str, Any] | None = None,
        late: str = "drop",
    ) -> Stream:
        """A base table: a bag by default (deletes must match rows that are there), or 'set' / 'zset'.

        Pushed rows are coerced to the column types as a SQL INSERT does (`columnar.coerce`);
        `not_null` columns reject NULLs. With a `primary_key` (a column or columns) an insert of a key
        that is there replaces its row (within a step, the last write of a key wins) and a delete is by
        key: give full rows (only their key is used) or just the key columns; a delete of an absent key
        rejects the step. Each of `unique` (a column or columns) is a UNIQUE constraint, as DuckDB's: a
        step after which two rows hold equal values in them, none NULL, is rejected (DataError naming
        the table, the columns and the values); a key deleted in one step may be inserted again.

        `lateness=(column, delay)` declares that rows arrive at most `delay` (a `timedelta` for a
        TIMESTAMP or DATE column, a number for a numeric one) behind the largest `column` seen: a later
        row is dropped and counted (`late="drop"`, see `late_rows`) or rejects its step
        (`late="error"`), and the views' state below the waterline is collected, so that state stays
        bounded on an unbounded stream (`docs/lateness.md`)."""
        self._new_name(name)
        late_decl = None
        if lateness is not None:
            if not isinstance(lateness, tuple) or len(lateness) != 2:
                raise CircuitError(f"table {name!r}: lateness is (column, delay), not {lateness!r}")
            late_decl = Lateness(lateness[0], lateness[1], late)
        with self._declaring():
            s = self.circuit.input(
                name,
                schema,
                kind=kind,
                primary_key=primary_key,
                not_null=not_null,
                unique=unique,
                lateness=late_decl,
            )
            self.relations[name] = s
        return s

    def create_view(self, name: str, stream: Stream) -> None:
        """Maintain `stream` (built from tables with the non-incremental operators) as view `name`.

        On a pipeline that has run steps, the view is backfilled from the tables' current contents at
        once (`circuit/backfill.py`; `view(name)` gives them) and maintained from the next step on,
        whose change for it starts with its contents; nothing else is recomputed (the state of what it
        shares with other views is theirs)."""
        _check_snapshot_operators(name, stream)
        self._new_name(name)
        with self._declaring():
            self.circuit.output(name, stream)
            self.relations[name] = stream

    def drop_view(self, name: str) -> None:
        """Stop maintaining view `name` and free its state (what it shares with other views stays
        theirs). Views declared on it keep their definitions. Allowed before or after steps."""
        if name not in self.circuit.outputs:
            raise UnknownNameError(f"unknown view {name!r}; the views are {self.views}")
        with self._declaring():
            del self.circuit.outputs[name]
            if name not in self.circuit.inputs:  # (a Datalog input relation that was also an output)
                del self.relations[name]
            self.datalog_outputs.pop(name, None)

    def refresh_view(self, name: str) -> None:
        """Recompute view `name` from the tables' current contents: its own state is dropped and
        backfilled again (what it shares with other views is theirs, and kept); its next change starts
        with its contents, as a new view's does."""
        stream = self.relation(name)
        if name not in self.circuit.outputs:
            raise UnknownNameError(f"unknown view {name!r}; the views are {self.views}")
        self.drop_view(name)
        self.create_view(name, stream)

    @contextlib.contextmanager
    def _declaring(self) -> Iterator[None]:
        """Declarations made inside, as one: on a running pipeline, its circuit is incrementalized anew
        and its runtime replaced by one that keeps the state of everything both circuits have and
        backfills what is new (`circuit/backfill.py`). If anything fails, the catalog is as before and
        the pipeline runs on as it did."""
        if self.runtime is None or self._declaring_now:
            yield
            return
        saved = dict(self.relations), dict(self.circuit.inputs), dict(self.circuit.outputs)
        outputs = dict(self.datalog_outputs)
        self._declaring_now = True
        try:
            yield
            self._evolve()
        except BaseException:
            self.relations, self.circuit.inputs, self.circuit.outputs = saved
            self.datalog_outputs = outputs
            raise
        finally:
            self._declaring_now = False

    def _evolve(self) -> None:
        """Replace the running runtime by one of the circuit as declared now (see `_declaring`)."""
        from dbspark.circuit.backfill import backfill

        old = self.runtime
        assert old is not None
        rt = Runtime(self.circuit.incrementalize(self.recursion), old.kernel, adopt=old)
        rt.input_noun = old.input_noun
        undo: list = []
        try:
            backfill(rt, undo)
        except BaseException as e:
            for fn in reversed(undo):
                fn()
            old.kernel.release(rt.owners() - old.owners())
            if isinstance(e, DbsparkError) and not isinstance(e, EngineError):
                msg = str(e.args[0] if e.args else e).split(POLARS_CONTEXT)[0].rstrip()
                e.args = (f"the new views' backfill failed, nothing declared: {msg}",)
            raise
        old.kernel.release(old.owners() - rt.owners())
        if old.metrics is not None:
            from dbspark.circuit.metrics import Metrics

            rt.metrics = Metrics(rt)
            rt.metrics.rows = old.metrics.rows
        self.runtime = rt

    def output_table(self, name: str, stream: Stream) -> None:
        """A Datalog input relation that is also an `.output`: view `name`, named like its table, holds
        the relation (the table's facts and any the rules derive into it). The catalog then gives
        `stream` for `name`, so what reads it later reads the whole relation; `insert` / `delete` still
        go to the table. (Inputs and outputs are apart in the circuit; only here do they share a name.)"""
        if name not in self.circuit.inputs or name in self.circuit.outputs:
            raise CircuitError(f"output_table {name!r}: no table of that name, or it is already a view")
        _check_snapshot_operators(name, stream)
        with self._declaring():
            self.circuit.output(name, stream)
            self.relations[name] = stream

    def relation(self, name: str) -> Stream:
        """The stream of a table or view (to build further views on it)."""
        if name not in self.relations:
            raise UnknownNameError(
                f"unknown table or view {name!r}; the pipeline has {sorted(self.relations)}"
            )
        return self.relations[name]

    def _new_name(self, name: str) -> None:
        if name in self.relations:
            what = "table" if name in self.circuit.inputs else "view"
            raise CircuitError(f"{name!r} is already declared (as a {what})")

    def picture(self, format: str = "svg") -> str | bytes:
        """The circuit and its incremental form drawn (`circuit/picture.py`): 'svg' (text), 'png'
        (bytes), 'dot' or 'mermaid' (text). svg and png need Graphviz's `dot` program."""
        from dbspark.circuit import picture

        both = [("circuit", self.circuit), ("incremental circuit", self.circuit.incrementalize())]
        return picture.render(both, format)

    def _repr_svg_(self) -> str | None:
        """A notebook shows a pipeline as its picture (when Graphviz's `dot` is installed)."""
        try:
            out = self.picture("svg")
        except UnsupportedError:
            return None
        return out if isinstance(out, str) else None

    def sql(self, text: str, dialect: str = "duckdb", joins: str = "auto") -> list[str]:
        """Declare tables and views in SQL (CREATE TABLE / CREATE VIEW statements); returns the names
        declared. `dialect`: "duckdb" (the default) or "spark" (Spark SQL with Spark 4's ANSI
        semantics: `frontends/sql/spark.py`). `joins`: "auto" joins a FROM clause's inner joins whose
        equalities form a cycle (three or more tables) at once by the leapfrog join, the others by
        binary joins; "leapfrog" or "binary" force one plan (same result); "sensitivity" is "auto" with
        the multiway joins maintained by sensitivity indices instead of delta joins
        (`operators/maintained_join.py`; same result); "indexed" is "auto" with the delta joins run
        over the inputs kept as tries, each change's term in its own variable order
        (`columnar/indexed_delta.py`; same result). See `dbspark.frontends.sql`."""
        from dbspark.frontends.sql import load

        with self._declaring():
            return load(self, text, dialect, joins)

    def datalog(
        self,
        text: str,
        closure_operator: bool = True,
        magic_sets: bool = True,
        functors: Mapping[str, Callable[..., Any]] | None = None,
        joins: str = "auto",
    ) -> list[str]:
        """Add a Datalog program: its input relations become tables, its output relations views;
        returns the names declared. See `dbspark.frontends.datalog`. With `closure_operator`, a
        component that is the transitive closure of one relation is maintained by the transitive
        closure operator instead of a recursive scope (same result). With `magic_sets`, a call with
        bound arguments (`reach1(y) :- path(1, y).`) derives only the facts it needs
        (`frontends/datalog/magic.py`; same result). `functors` binds the program's user-defined
        functors (`.functor f(...)`, called `@f(...)`) to Python functions (`dbspark.functors`).
        `joins`: "auto" joins the atoms of a rule body whose variables form a cycle (a triangle, a
        4-cycle) at once by the leapfrog join, worst-case optimal, and other bodies by binary joins;
        "leapfrog" or "binary" force one plan for every body outside recursion (same result);
        "sensitivity" is "auto" with the multiway joins maintained by sensitivity indices
        (`operators/maintained_join.py`; same result); "indexed" is "auto" with the delta joins over
        indexed tries (`columnar/indexed_delta.py`; same result)."""
        from dbspark.frontends.datalog import load

        with self._declaring():
            return load(
                self,
                text,
                max_iterations=self.recursion_limit,
                closure_operator=closure_operator,
                magic_sets=magic_sets,
                functors=functors,
                joins=joins,
            )

    @property
    def tables(self) -> list[str]:
        """The names of the tables, in declaration order."""
        return list(self.circuit.inputs)

    @property
    def views(self) -> list[str]:
        """The names of the views, in declaration order."""
        return list(self.circuit.outputs)

    # ---- running ------------------------------------------------------------------------------
    def start(self) -> Runtime:
        """Incrementalize the views and start the runtime (resuming from the directory's checkpoint)."""
        if self.runtime is not None:
            return self.runtime
        rt = self.circuit.incrementalize(self.recursion).run(self.engine, **self._options)
        rt.input_noun = "table"
        if self.directory is not None:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._lock = DirectoryLock(self.directory)
            try:
                self._resume(rt, self.directory)
            except BaseException:
                self._lock.release()
                raise
        if rt.time == 0:  # initial loads (Datalog facts and fact files) go into the first step
            for table, rows, weights in self._pending:
                rt.push(table, rows, weights)
        self._pending.clear()
        if rt.fresh or rt.fresh_views:  # reopened with views (or their parts) the checkpoint lacks
            from dbspark.circuit.backfill import backfill

            try:
                backfill(rt, [])
            except BaseException:
                if self._lock is not None:
                    self._lock.release()
                    self._lock = None
                raise
        if self._metrics:
            from dbspark.circuit.metrics import Metrics

            rt.metrics = Metrics(rt)
        self.runtime = rt
        return rt

    def metrics(self) -> Any:
        """Per operator and step run (with `Pipeline(metrics=True)`), a Polars frame: step, node (as
        `explain` numbers the incremental circuit), operator, family, ms, rows_in, rows_out (NULL where
        counting would cost a Spark job), state_rows, state_bytes (the operator's traces after the step);
        the latest 10,000 steps (`circuit/metrics.py`)."""
        rt = self.start()
        if rt.metrics is None:
            raise UnsupportedError("metrics are off: build the pipeline with Pipeline(..., metrics=True)")
        return rt.metrics.frame()

    @staticmethod
    def _resume(rt: Runtime, directory: Path) -> None:
        """Restore the directory's last committed step, and sweep the files of steps after it."""
        ckpt = directory / CHECKPOINT
        if ckpt.exists():
            rt.restore(ckpt)
        elif (directory / PICKLED).exists():
            raise CheckpointError(
                f"{directory / PICKLED} is the checkpoint of an earlier version of dbspark (pickle), which "
                "this version does not read (reading it would run code the file names); build the "
                "pipeline again in an empty directory"
            )
        rt.kernel.sweep_uncommitted(rt.time)

    @property
    def steps(self) -> int:
        """The number of committed steps."""
        return self.start().time

    def push(self, table: str, rows: Any, weights: Any = None) -> None:
        """Queue rows with weights (an int for all, one per row, or None: a `weight` column of a frame)
        for the next step. Rows are coerced and checked first: a bad push raises and queues nothing."""
        self.start().push(table, rows, weights)

    def insert(self, table: str, rows: Any) -> None:
        """Queue rows to insert (tuples in column order, dicts, or pandas / Arrow / Polars / Spark
        DataFrames); into a table with a primary key, an existing key's row is replaced."""
        self.push(table, rows, 1)

    def delete(self, table: str, rows: Any) -> None:
        """Queue rows to delete (as `insert` takes them); from a keyed table the key columns suffice. A
        delete of a row (or key) that is not there rejects the step."""
        self.push(table, rows, -1)

    def step(
        self,
        sink: Callable[[int, dict[str, Any]], None] | None = None,
        offsets: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Apply the queued changes; {view: its change}. Atomic: on an error nothing is applied.

        `sink(step, changes)` writes the changes somewhere before the step commits; it must replace what
        an earlier, uncommitted run of the same step wrote (the step is re-run after a crash). Steps are
        numbered from 1 everywhere (the CLI, errors, outputs): step n commits as the n-th, and
        `steps` is the number of the last committed one.

        A step that failed because the cluster lost an executor (`ExecutorLostError`: nothing applied,
        its changes still queued) is run again once; Spark retries the lost tasks it can, but not
        those reading blocks that only the lost executor held.

        `offsets`: how far this step's changes were read from their sources (a Delta feed's versions,
        `dbspark.io.feeds`), recorded with its commit: `offsets` after a restart."""
        rt = self.start()

        def commit(out: dict[str, Any]) -> None:
            if sink is not None:
                sink(rt.time, out)
            if self.directory is not None:
                _fault_point(rt.time)
                rt.checkpoint(self.directory / CHECKPOINT)

        before = dict(rt.offsets)
        rt.offsets.update(offsets or {})
        try:
            try:
                return rt.step(commit=commit)
            except ExecutorLostError:
                return rt.step(commit=commit)
        except BaseException:
            rt.offsets.clear()
            rt.offsets.update(before)
            raise

    def follow_stream(
        self,
        table: str,
        stream: Any,
        checkpoint: str | Path | None = None,
        trigger: dict[str, Any] | None = None,
        sink: Callable[[int, dict[str, Any]], None] | None = None,
    ) -> Any:
        """Feed a Spark streaming DataFrame into `table`, one step per micro-batch, each applied once
        (`dbspark.io.streams`); returns the `StreamingQuery`."""
        from dbspark.io.streams import follow_stream

        return follow_stream(self, table, stream, checkpoint, trigger, sink)

    @property
    def offsets(self) -> dict[str, Any]:
        """How far the committed steps read their sources (`step(offsets=...)`), by source."""
        return dict(self.start().offsets)

    @property
    def late_rows(self) -> dict[str, int]:
        """The late rows dropped so far, by table (tables declared with a lateness, `late="drop"`)."""
        return dict(self.start().late_rows)

    def waterline(self, name: str) -> dict[str, Any]:
        """A table's or view's waterlines after the last step, {column: value}: every later change of it
        holds at least these values, and a view's contents keep only its rows at or above them (the
        rows below were final; each was in the change of the step that made it). Empty for a relation
        that no lateness reaches (`docs/lateness.md`)."""
        return self.start().waterline(name)

    def state_rows(self) -> int:
        """The rows the pipeline holds as state: every operator's, the views', the tables' checks."""
        return self.start().state_rows()

    def view(self, name: str) -> Any:
        """A view's current contents (rows with weights; on Spark, `.frame` is the DataFrame). Before
        the first step commits it is the view over empty tables (a global aggregate's one row)."""
        rt = self.start()
        if rt.time > 0 or name not in self.circuit.outputs:
            return rt.view(name)
        from dbspark.circuit.runtime import Runtime

        empty = Runtime(self.circuit, rt.kernel, snapshots=True)
        empty.step()
        return rt.kernel.consolidate(empty.output(name))

    def close(self) -> None:
        """Release the engine (a SparkSession dbspark started is stopped; one passed in is left alone).
        Committed steps stay in the directory; a later Pipeline on it resumes after them."""
        if self.runtime is not None:
            self.runtime.kernel.close()
            self.runtime = None
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _check_snapshot_operators(name: str, stream: Stream) -> None:
    """A view is a query over the tables' current contents; the pipeline incrementalizes it as a whole.
    An operator that already consumes changes (`distinct`, `join`, `aggregate`, `transitive_closure`, I,
    D, z^-1) would be incrementalized a second time and give wrong answers, so it is refused by name."""
    from dbspark.operators.aggregate import Aggregate
    from dbspark.operators.base import TIME
    from dbspark.operators.closure import Closure
    from dbspark.operators.distinct import DistinctH

    c, seen, todo = stream.circuit, set(), [stream.node_id]
    while todo:
        nid = todo.pop()
        if nid in seen:
            continue
        seen.add(nid)
        op = c.nodes[nid].op
        if op.kind == TIME or isinstance(op, (Aggregate, Closure, DistinctH)):
            raise CircuitError(
                f"view {name!r} uses the incremental operator {op.label()!r}; a pipeline's views are written "
                "with the per-snapshot operators (stream_join, stream_distinct, stream_aggregate, "
                "stream_transitive_closure, ...) and the pipeline incrementalizes them"
            )
        todo.extend(c.nodes[nid].inputs)


def _fault_point(step: int) -> None:
    """Tests kill the process here, mid-step (state and outputs written, not committed)."""
    at = os.environ.get("DBSPARK_KILL_BEFORE_COMMIT")
    if at is not None and int(at) == step:
        os.kill(os.getpid(), signal.SIGKILL)
    faults.point("commit")
