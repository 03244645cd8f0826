"""The spark kernel: Z-sets as lazy Spark DataFrames or rows held in the driver; traces as hash buckets
of sorted Arrow runs read by seeks at a change's keys (`engines.spark.buckets`).

A step composes its work lazily. A change held in the driver (rows pushed from Python) stays there
through kind checks, seeks, joins and distinct (the local kernel's code over the same files); the
aggregates still move it to Spark. A change on Spark (a pushed DataFrame) seeks the state inside its own tasks, and the
step's trace writes and output logs run as one Spark action at its end (`flush_step`); Spark also runs
where Python must see a value (an emptiness test inside a recursive scope, a kind check). Every such action goes through `SparkKernel.act`, which counts it and turns
Spark's errors into dbspark's: checks inside a plan use `raise_error` with a `DBSPARK[Class]` tag, and
ANSI arithmetic overflow becomes a `WeightError`. A value that is known to be empty (no change pushed,
or an operator over empty inputs) carries no plan, and operators on it short-circuit.
"""

from __future__ import annotations

import contextlib
import functools
import operator
import re
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack
from pathlib import Path
from typing import Any

import polars as pl

from dbspark import errors
from dbspark.algebra.zset import WEIGHT, ZSet
from dbspark.columnar.aggfold import Accumulators
from dbspark.columnar.plans import pick
from dbspark.columnar.rows import input_frame
from dbspark.engines.base import GroupFn, Kernel
from dbspark.engines.spark.buckets import (
    BucketSnap,
    SparkBucketTrace,
    drop_plan,
    owner_of,
    parts_frame,
    seek_rows,
)
from dbspark.engines.spark.convert import col, col_list, from_spark, map_in_arrow, spark_type
from dbspark.engines.spark.convert import to_spark as to_spark_frame
from dbspark.engines.spark.exprs import with_spark_columns
from dbspark.engines.spark.session import SessionHandle, get_session
from dbspark.engines.spark.settings import SessionSettings
from dbspark.engines.spark.storage import Storage
from dbspark.engines.spark.values import SparkZSet
from dbspark.ir.expr import Expr
from dbspark.trace.bucketed import BucketLayout, entries_from_frame
from dbspark.trace.ranks import group_slices

Value = SparkZSet | BucketSnap
_WR = "__w_r"
# the strategy of a semi-join with a change's keys: sort-merge, shuffled and never broadcast (a broadcast
# is a job of its own), and it spills where a shuffled hash join built on a large change's keys ran the
# executors out of memory (a recursive view loaded from a 1M-edge DataFrame on the cluster path)
SEMI_JOIN = "merge"
_TAG = re.compile(r"DBSPARK\[(\w+)\] (.*?)(?: SQLSTATE|$)", re.S)
_PY_RAISED = re.compile(r"^dbspark\.errors\.(\w+): (.*)$", re.M)


def F() -> Any:
    from pyspark.sql import functions

    return functions


def ns_join(
    left: Any, right: Any, keys: Sequence[str], how: str = "inner", rkeys: Sequence[str] | None = None
) -> Any:
    """Join on keys with NULL = NULL (rows of a Z-set are values: a NULL group is a group)."""
    rk = list(rkeys or keys)
    r = right.select(
        *[col(c).alias(f"__r{i}") for i, c in enumerate(rk)],
        *col_list(c for c in right.columns if c not in rk),
    )
    cond = [col(k).eqNullSafe(col(f"__r{i}")) for i, k in enumerate(keys)]
    out = left.join(r, cond, how)
    return out.drop(*[f"__r{i}" for i in range(len(rk))])


# what Spark says when a step's work was lost with an executor (its local checkpoints, its shuffle files)
EXECUTOR_LOST = ("CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND", "ExecutorLostFailure", "FetchFailed")


class SparkKernel:
    """Implements `engines.base.Kernel` on Spark DataFrames."""

    name = "spark"
    state_in_process = False

    def __init__(
        self,
        spark: Any = None,
        master: str | None = None,
        directory: str | Path | None = None,
        conf: dict[str, str] | None = None,
    ) -> None:
        self.handle: SessionHandle = get_session(spark, master, conf)
        self.spark = self.handle.spark
        self._tmp = None
        if directory is None:
            base = self.handle.setting("dir", "")
            self._tmp = tempfile.mkdtemp(prefix="dbspark-", dir=base or None)
            directory = self._tmp
        self.storage = Storage(directory)
        self.actions = 0
        self.step_no = 0
        self._driver: Kernel | None = None
        self._scratch = 0  # > 0: `new_trace` makes scratch traces (`scratch`)
        self.traces: list[SparkBucketTrace] = []  # flushed at the end of each step, in creation order
        self._owner = ""  # whose traces `new_trace` makes (`owned`): their names start with it
        self._released: list[str] = []  # directories of released traces: deleted when a step commits
        self._outputs: dict[int, tuple[str, SparkZSet]] = {}  # trace index -> (change log, output value)
        self.n_buckets = int(self.handle.setting("buckets", "16"))
        self.write_partitions = int(self.handle.setting("write_partitions", "2"))
        # collected state (`trace_drop`) is rewritten in the driver when its files are on this machine
        self.drops_in_driver = True
        # traces a step writes in its one closing action; past that, a change on Spark is written as
        # it arrives (`SparkBucketTrace.add`)
        self.fused_traces = int(self.handle.setting("fused_traces", "8"))
        # a change held in the driver of this many rows is written to its trace as it arrives, not at
        # the step's end (`SparkBucketTrace.add`): the driver then holds a step's values, not its state
        self.write_rows = int(self.handle.setting("write_rows", "65536"))
        # a change whose plan holds more copies of its leaves than this is computed once, there (an
        # eager local checkpoint: one Spark job), so that plans stay small (`SparkZSet.lineage`)
        self.max_lineage = int(self.handle.setting("max_lineage", "8"))
        self.cuts = 0  # lineage cuts so far (each one a Spark job)
        self.placed_to_driver = 0  # values on Spark the last step read into the driver (`place`)
        self.settings = SessionSettings(self.handle)
        self._pushed_rows: int | None = 0  # rows pushed since the last step (None: some of unknown size)
        self._step_settings = ExitStack()

    def session_settings(self, rows: int | None = None) -> AbstractContextManager[None]:
        """dbspark's SQL settings on the session while the block runs (`engines.spark.settings`): a
        step holds them from `begin_step` to `end_step` / `abort_step`; outside a step, each action and
        the planning of a pushed Spark DataFrame. `rows`: the size of the work, for the partitions."""
        return self.settings.applied(rows)

    def close(self) -> None:
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
        self.handle.close()

    # ---- actions: counted, errors translated ----------------------------------------------------
    def act(self, fn: Callable[[], Any]) -> Any:
        self.actions += 1
        try:
            with self.session_settings():
                return fn()
        except errors.DbsparkError:
            raise
        except Exception as e:
            msg = str(e)
            m = _TAG.search(msg)
            if m:
                cls = getattr(errors, m.group(1), errors.DbsparkError)
                raise cls(m.group(2).strip()) from None
            raised = _PY_RAISED.findall(msg)  # a dbspark error raised by user code in a Python worker
            if raised:
                name, text = raised[-1]
                raise getattr(errors, name, errors.DbsparkError)(text.strip()) from None
            if "ARITHMETIC_OVERFLOW" in msg or "CAST_OVERFLOW" in msg or "NUMERIC_VALUE_OUT_OF_RANGE" in msg:
                raise errors.WeightError(
                    f"integer overflow on the spark engine: {msg.splitlines()[0]}"
                ) from None
            if "CAST_INVALID_INPUT" in msg:
                raise errors.SchemaError(
                    f"a value of the wrong type on the spark engine: {msg.splitlines()[0]}"
                ) from None
            user_code = "PythonException" in msg and "exited unexpectedly" not in msg
            if not user_code and ("Job aborted" in msg or "SparkException" in msg):
                lines = [ln for ln in msg.splitlines() if ln.strip()]
                lost = any(sign in msg for sign in EXECUTOR_LOST)
                raise (errors.ExecutorLostError if lost else errors.EngineError)(
                    lines[0] if lines else type(e).__name__
                ) from e
            raise

    def write(self, df: Any, path: str, rows: int | None = None) -> None:
        """Write `df` as Parquet; `rows`, if known, sizes the write's shuffle (e.g. a trace merge)."""
        with self.session_settings(rows):
            self.act(lambda: df.write.mode("overwrite").parquet(path))

    def read(self, path: str, schema: pl.Schema) -> SparkZSet:
        from dbspark.engines.spark.convert import spark_schema

        df = self.spark.read.schema(spark_schema(schema)).parquet(path)
        z = SparkZSet(self.spark, schema, df, consolidated=True)
        z.path = path
        z.files = (path,)
        return z

    def begin_step(self, t: int) -> None:
        """dbspark's session settings from here to `end_step` / `abort_step`, sized by the rows pushed."""
        self.step_no = self.storage.step = t
        self.placed_to_driver = 0
        rows, self._pushed_rows = self._pushed_rows, 0
        self._step_settings.close()  # a step that was begun and never ended
        self._step_settings.enter_context(self.handle.frozen())
        self._step_settings.enter_context(self.session_settings(rows))

    def place(self, batches: Sequence[Value], loop: bool = False) -> list[Value]:
        """The values in the driver or on Spark (`engines.spark.placement`): those on Spark read into
        the driver together, in one job, each kept there if it is small; with `loop`, those left on
        Spark are checkpointed."""
        from dbspark.engines.spark.placement import place

        values = [self.as_zset(b) for b in batches]
        return list(place(self, values, loop)) if values else []

    # settings for the step's action, restored after it: with adaptive query execution each shuffle
    # stage of the step becomes a Spark job of its own (measured: 48 jobs instead of 1)
    STEP_SETTINGS = {"spark.sql.adaptive.enabled": "false"}

    @contextlib.contextmanager
    def step_settings(self) -> Iterator[None]:
        """`STEP_SETTINGS` on the session for the duration of a step's action (a session passed in
        gets its own values back afterwards)."""
        conf = self.spark.conf
        saved = {k: conf.get(k, None) for k in self.STEP_SETTINGS}
        for k, v in self.STEP_SETTINGS.items():
            conf.set(k, v)
        try:
            yield
        finally:
            for k, v in saved.items():
                if v is None:
                    conf.unset(k)
                else:
                    conf.set(k, v)

    def flush_step(self, undo: list) -> None:
        """Write the traces' pending changes of this step (`engines.spark.buckets`): those held in the
        driver there, all others in ONE Spark job (a union of every trace's write plan), which also
        writes the views' change logs; the outputs of the step then read those logs."""
        self.flush_traces(
            [i for i, t in enumerate(self.traces) if not t.flush_local(self.step_no, undo)], undo
        )
        self._outputs = {}

    def spark_pending(self) -> int:
        """The number of traces with a change on Spark pending in this step."""
        return sum(1 for t in self.traces if any(p._df is not None for p in t.pending))

    def flush_traces(self, planned: list[int], undo: list) -> None:
        """Write the pending changes of the traces `planned` (indices) in one Spark action."""
        plans = []
        for i in planned:
            out = self._outputs.get(i)
            plans.append(self.traces[i].write_plan(self.step_no, i, out[0] if out else None))
        if plans:
            df = plans[0]
            for p in plans[1:]:
                df = df.unionByName(p)
            with self.step_settings():
                got = pl.from_arrow(self.act(lambda: df.toArrow()))
            assert isinstance(got, pl.DataFrame)
            for i in planned:  # (a trace whose change cancelled out has no rows: adopted as unchanged)
                mine = got.filter(pl.col("trace") == i)
                self.traces[i].adopt(entries_from_frame(mine.filter(pl.col("bucket") >= 0)), undo)
                if i in self._outputs:  # the output on Spark reads the change log its tasks wrote
                    path, z = self._outputs[i]
                    if mine.filter(pl.col("bucket") == -1).height:
                        r = self.read(path, z.schema)
                        z._df, z.path, z.files, z.consolidated = r._df, r.path, r.files, True
                        z._cut, z.lineage = None, 1  # (a read of files: no plan to cut)
                    else:
                        z._df, z.local = None, ZSet.empty(z.schema)
                    del self._outputs[i]

    def end_step(self, t: int) -> None:
        """The step committed: delete the files it replaced and the released traces' directories, put
        back the session's own settings."""
        try:
            self.storage.collect()
            for tr in self.traces:
                tr.collect()
            for d in self._released:
                shutil.rmtree(d, ignore_errors=True)
            self._released = []
        finally:
            self._step_settings.close()

    def abort_step(self) -> None:
        """The step was rolled back: what it wrote stays unreferenced (swept on reopen)."""
        try:
            self.storage.garbage = []
        finally:
            self._step_settings.close()

    def sweep_uncommitted(self, committed_steps: int) -> None:
        """After a restart: delete the files of steps that never committed. The directories of traces
        the circuit no longer has (a view dropped from the definitions) are deleted when the next step
        commits: the committed checkpoint names their files until then."""
        self.storage.sweep_uncommitted(committed_steps)
        for t in self.traces:
            t.sweep()
        root = self.storage.root / "traces"
        live = {t.layout.directory for t in self.traces}
        if root.is_dir():
            self._released += [str(d) for d in sorted(root.iterdir()) if d.is_dir() and str(d) not in live]

    # ---- group and conversions ---------------------------------------------------------------
    def _z(
        self,
        schema: pl.Schema,
        df: Any = None,
        keys: Any = None,
        consolidated: bool = False,
        lineage: int = 1,
    ) -> SparkZSet:
        """A value over the frame `df`, whose plan holds `lineage` copies of its leaves. Past
        `max_lineage` the frame is computed, and its plan starts over, when a later plan first reads it
        (`SparkZSet.frame`; a value no plan reads, such as a scope's feedback that its placement
        computes anyway, is not computed twice): Spark plans are trees, so
        each join or H of a change against the state sought at its keys doubles the plan of the change
        downstream, and the 22 TPC-H views' plans outgrew the driver's memory (a 4 GiB heap spent
        printing one plan)."""
        z = SparkZSet(
            self.spark,
            schema,
            df,
            keys=tuple(keys) if keys else None,
            consolidated=consolidated,
            lineage=lineage,
        )
        if df is not None and lineage > self.max_lineage:
            z._cut = self._cut  # (when a later plan first reads it: `SparkZSet.frame`)
        return z

    def _cut(self, df: Any) -> Any:
        self.cuts += 1
        return self.computed(df)

    def computed(self, df: Any) -> Any:
        """`df` computed on the cluster once (a local checkpoint: one job), its plan starting over."""
        return self.act(lambda: df.localCheckpoint(eager=True))

    def computed_counted(self, df: Any) -> tuple[Any, int | None]:
        """`computed(df)` and its number of rows, observed by the same job (a Spark `Observation`);
        None for the count on Spark Connect (whether a checkpoint there reports observed metrics is
        not established, and reading them waits for them) or where the session cannot observe."""
        from pyspark.sql import Observation

        if type(df).__module__.startswith("pyspark.sql.connect"):
            return self.computed(df), None
        try:
            seen = Observation("dbspark_rows")
            observed = df.observe(seen, F().count(F().lit(1)).alias("rows"))
        except Exception:  # (a session without observations)
            return self.computed(df), None
        out = self.computed(observed)
        try:
            return out, int(seen.get["rows"])
        except Exception:
            return out, None

    def empty(self, schema: pl.Schema, keys: Sequence[str] | None = None) -> SparkZSet:
        return self._z(
            pl.Schema([(c, t) for c, t in schema.items() if c != WEIGHT]), keys=keys, consolidated=True
        )

    def as_zset(self, a: Value) -> SparkZSet:
        if isinstance(a, BucketSnap):
            return self._snap_zset(a)
        return a

    def _snap_zset(self, a: BucketSnap) -> SparkZSet:
        """A bucketed trace's contents: a lazy frame over its runs and pending changes, read in the
        driver without Spark when its files are on this machine."""
        if not a.batches:
            return self.empty(a.schema, a.keys)
        if not a.files and list(a.sums) == [WEIGHT]:  # nothing stored yet: rows in the driver stay there
            pend = a.pending_local()
            if pend is not None:
                return SparkZSet(self.spark, a.schema, local=ZSet(pend), keys=a.keys)
        from dbspark.engines.spark.convert import spark_schema

        df = parts_frame(a.pending, [*a.schema, WEIGHT])
        lineage = 1 + sum(p.lineage for p in a.pending if not p.known_empty)
        paths = a.run_paths()
        if paths:
            from dbspark.engines.spark.buckets import read_runs

            schema = a.schema
            files = self.spark.createDataFrame([(p,) for p in paths], "path string")
            runs = files.mapInArrow(lambda it: read_runs(it, schema), spark_schema(schema))
            df = runs if df is None else runs.unionByName(df)
        z = self._z(a.schema, df, a.keys, lineage=lineage)
        z.reader = a.scan_local
        return z

    def to_local(self, a: Value) -> ZSet:
        z = self.as_zset(a)
        return z.to_zset() if z._df is None else self.act(z.to_zset)

    def from_local(self, z: ZSet) -> SparkZSet:
        return SparkZSet(self.spark, z.schema, local=z)

    def is_local(self, a: Value) -> bool:
        return isinstance(a, SparkZSet) and (a.known_empty or _local(a))

    def driver_kernel(self) -> Kernel:
        """The kernel that computes on rows held in the driver: the local engine's (taken from the
        engine registry, not imported), so a value in the driver is computed by the same code as on
        the local engine, with the same results."""
        if self._driver is None:
            from dbspark.engines import get_kernel

            self._driver = get_kernel("local")
        return self._driver

    def plus(self, a: Value, b: Value) -> SparkZSet:
        a, b = self.as_zset(a), self.as_zset(b)
        if b.known_empty:
            return a
        if a.known_empty:
            return b if a.keys is None else self._z(b.schema, b.frame, a.keys, lineage=b.lineage)
        if a.local is not None and b.local is not None and a._df is None and b._df is None:
            return SparkZSet(
                self.spark, a.schema, local=ZSet(pl.concat([a.local.df, b.local.df])), keys=a.keys
            )
        cols = [*a.schema, WEIGHT]
        return self._z(
            a.schema,
            a.frame.select(*col_list(cols)).unionByName(b.frame.select(*col_list(cols))),
            a.keys,
            lineage=a.lineage + b.lineage,
        )

    def neg(self, a: Value) -> SparkZSet:
        z = self.as_zset(a)
        if z.known_empty:
            return z
        if z._df is None and z.local is not None:
            return SparkZSet(self.spark, z.schema, local=-z.local, keys=z.keys)
        return self._z(z.schema, z.frame.withColumn(WEIGHT, -col(WEIGHT)), z.keys, z.consolidated, z.lineage)

    def consolidate(self, a: Value, by_rows: bool = False) -> SparkZSet:
        z = self.as_zset(a)
        if z.consolidated or z.known_empty:
            return z
        if z._df is None and z.local is not None:
            return SparkZSet(
                self.spark, z.schema, local=z.local.consolidate(by_rows), keys=z.keys, consolidated=True
            )
        df = (
            z.frame.groupBy(*col_list(z.schema))
            .agg(F().sum(col(WEIGHT)).alias(WEIGHT))
            .filter(col(WEIGHT) != 0)
        )
        return self._z(z.schema, df, z.keys, consolidated=True, lineage=z.lineage)

    def is_empty(self, a: Value) -> bool:
        if isinstance(a, BucketSnap):
            return not a.batches
        if a.known_empty:
            return True
        if a._df is None and a.local is not None:
            return a.local.consolidate().df.height == 0
        z = self.consolidate(a)
        if z.rows is not None:  # counted where it was computed (a scope's feedback, `place`)
            return z.rows == 0
        return bool(self.act(lambda: z.frame.isEmpty()))

    def hold(self, a: Any) -> Any:
        """A value kept across steps (a delay's state): materialized, so it outlives the files it read."""
        if not isinstance(a, SparkZSet) or a._df is None or a.path is not None:
            return a
        path = self.storage.new_path("held")
        self.write(self.consolidate(a).frame, path)
        return self.read(path, a.schema)

    def save_value(self, a: Any) -> Any:
        """A picklable form of a value kept across steps (snapshots are; Z-sets are held files)."""
        if isinstance(a, SparkZSet):
            if a._df is None:
                return ("local", a.schema, a.local)
            return ("held", a.schema, self.hold(a).path)
        return ("value", a)

    def load_value(self, saved: Any) -> Any:
        kind, *rest = saved
        if kind == "local":
            return SparkZSet(self.spark, rest[0], local=rest[1])
        if kind == "held":
            return self.read(rest[1], rest[0])
        return rest[0]

    def input_batch(
        self,
        rows: Any,
        schema: pl.Schema,
        weights: Any,
        where: str,
        not_null: Sequence[str] = (),
        key: Sequence[str] | None = None,
    ) -> SparkZSet:
        """Checked rows coerced to `schema`, with weights; a Spark DataFrame stays on Spark, coerced and
        checked inside the plan (`engines.spark.coerce`), other rows as on the local engine."""
        if _is_spark_frame(rows):
            from dbspark.engines.spark.coerce import coerce_frame

            self._pushed_rows = None
            with self.session_settings():  # its casts are planned now (classic Spark)
                return self._z(schema, coerce_frame(rows, schema, weights, where, not_null, key))
        z = ZSet(input_frame(rows, schema, weights, where, not_null, key))
        if self._pushed_rows is not None:
            self._pushed_rows += z.df.height
        return SparkZSet(self.spark, schema, local=z)

    # ---- linear operators ---------------------------------------------------------------------
    def filter(self, a: Value, pred: Expr) -> SparkZSet:
        z = self.as_zset(a)
        if z.known_empty:
            return z
        if _local(z):  # rows held in the driver: the local kernel's filter, no Spark job
            return self._in_driver(z, lambda k, v: k.filter(v, pred))
        frame, (cond,) = with_spark_columns(z.frame, [pred], z.schema)
        out = frame.filter(cond)
        if frame is not z.frame:  # drop the bound columns
            out = out.select(*col_list(z.frame.columns))
        return self._z(z.schema, out, None, z.consolidated, z.lineage)

    def map(self, a: Value, exprs: Sequence[tuple[str, Expr]], schema: pl.Schema) -> SparkZSet:
        z = self.as_zset(a)
        if z.known_empty:
            return self.empty(schema)
        if _local(z):
            return self._in_driver(z, lambda k, v: k.map(v, exprs, schema))
        frame, cols = with_spark_columns(z.frame, [e for _, e in exprs], z.schema)
        sel = [c.cast(spark_type(schema[n])).alias(n) for (n, _), c in zip(exprs, cols, strict=True)]
        return self._z(schema, frame.select(*sel, col(WEIGHT)), lineage=z.lineage)

    def flat_map(self, a: Value, fn: Callable[[dict], Any], schema: pl.Schema) -> SparkZSet:
        """A user callback per row, run by Spark's Python workers (mapInArrow)."""
        z = self.as_zset(a)
        if z.known_empty:
            return self.empty(schema)
        if _local(z):
            return self._in_driver(z, lambda k, v: k.flat_map(v, fn, schema))
        from dbspark.engines.spark.convert import spark_schema
        from dbspark.engines.spark.udf import flat_map_batches

        in_schema, out_schema = z.schema, schema
        return self._z(
            schema,
            map_in_arrow(
                z.frame, lambda it: flat_map_batches(it, fn, in_schema, out_schema), spark_schema(schema)
            ),
            lineage=z.lineage,
        )

    def _in_driver(self, z: SparkZSet, op: Callable[[Kernel, Any], Any]) -> SparkZSet:
        """A linear or per-step operator on rows held in the driver, by the local kernel (taken from
        the engine registry): the same semantics as its Spark form (both are checked against DuckDB
        by the shared suite), no Spark job."""
        assert z.local is not None
        out = self.driver_kernel().as_zset(op(self.driver_kernel(), z.local))
        return SparkZSet(self.spark, out.schema, local=out, keys=z.keys)

    def index(self, a: Value, keys: Sequence[str]) -> SparkZSet:
        z = self.as_zset(a)
        df = z.frame if z._df is not None else None  # (cut first if it is due: one cut for both values)
        return SparkZSet(self.spark, z.schema, df, z.local, tuple(keys), z.consolidated, lineage=z.lineage)

    # ---- keys and selections ------------------------------------------------------------------
    def support(self, a: Value, cols: Sequence[str]) -> SparkZSet:
        z = self.as_zset(a)
        schema = pl.Schema([(c, z.schema[c]) for c in cols])
        if z.known_empty:
            return self.empty(schema)
        if _local(z):
            return self._in_driver(z, lambda k, v: k.support(v, cols))
        one = F().lit(1).cast("long").alias(WEIGHT)
        df = z.frame.select(*col_list(cols)).distinct().select(*col_list(cols), one)
        return self._z(schema, df, consolidated=True, lineage=z.lineage)

    def semijoin(self, a: Value, b: Value, on: Sequence[tuple[str, str]], exact: bool) -> SparkZSet:
        x, y = self.as_zset(a), self.as_zset(b)
        if x.known_empty or y.known_empty:
            return self.empty(x.schema)
        if _local(x) and _local(y):
            assert x.local is not None and y.local is not None
            return self.from_local(self.driver_kernel().semijoin(x.local, y.local, on, exact))
        keys = y.frame.select(*[col(r).alias(f"__s{i}") for i, (_, r) in enumerate(on)]).distinct()
        if exact:
            cond = [col(c).eqNullSafe(col(f"__s{i}")) for i, (c, _) in enumerate(on)]
        else:
            cond = [col(c) == col(f"__s{i}") for i, (c, _) in enumerate(on)]
        df = x.frame.join(keys.hint(SEMI_JOIN), cond, "left_semi")
        return self._z(x.schema, df, consolidated=x.consolidated, lineage=x.lineage + y.lineage)

    def cogroup(
        self,
        parts: Sequence[Value],
        by: Sequence[str],
        fn: GroupFn,
        schema: pl.Schema,
        sums: pl.Schema | None = None,
        consolidated: bool = False,
    ) -> SparkZSet:
        """In the driver when every part is held there (one call); else inside Spark's tasks, the
        parts exchanged by `by` (`engines.spark.cogroup`)."""
        zs = [self.as_zset(p) for p in parts]
        out = pl.Schema([*schema.items(), *(sums or {WEIGHT: pl.Int64()}).items()])
        if all(z.known_empty for z in zs) and by:
            return self.empty(schema)
        if all(z.known_empty or _local(z) for z in zs):
            frames = [_local_frame(z) for z in zs]
            rows = fn(frames)
            local = Accumulators(rows) if sums is not None else ZSet(rows, consolidated)
            return SparkZSet(self.spark, schema, local=local, consolidated=consolidated)
        from dbspark.engines.spark.cogroup import cogroup_frames, frame_schema

        on_spark = [None if z.known_empty else z.frame for z in zs]  # (one is on Spark)
        schemas = [_schema_of(z) if f is None else frame_schema(f) for z, f in zip(zs, on_spark, strict=True)]
        df = cogroup_frames(on_spark, schemas, by, fn, out)
        lineage = sum(z.lineage for z in zs if not z.known_empty)
        return self._z(schema, df, consolidated=consolidated, lineage=lineage)

    def combine(self, parts: Sequence[Value], by: Sequence[str], weight: Expr) -> SparkZSet:
        """In the driver when every part is held there (the local engine's code); else one GROUP BY of
        the parts' union on Spark."""
        zs = [self.as_zset(p) for p in parts]
        by = list(by)
        schema = pl.Schema([(c, zs[0].schema[c]) for c in by])
        if all(z.known_empty for z in zs):
            return self.empty(schema)
        if all(z.known_empty or _local(z) for z in zs):
            local = [z.local if z.local is not None else ZSet.empty(z.schema) for z in zs]
            return self.from_local(self.driver_kernel().combine(local, by, weight))
        sums = [f"__w{i}" for i in range(len(zs))]
        zero = F().lit(0).cast("long")
        df = None
        for i, z in enumerate(zs):
            if z.known_empty:
                continue
            f = z.frame.select(
                *col_list(by), *[(col(WEIGHT) if j == i else zero).alias(c) for j, c in enumerate(sums)]
            )
            df = f if df is None else df.unionByName(f)
        assert df is not None
        g = df.groupBy(*col_list(by)).agg(*[F().sum(col(c)).alias(c) for c in sums])
        gschema = pl.Schema([*schema.items(), *[(c, pl.Int64()) for c in sums]])
        frame, (w,) = with_spark_columns(g, [weight], gschema, ansi_ints=True)
        out = frame.select(*col_list(by), w.cast("long").alias(WEIGHT)).filter(col(WEIGHT) != 0)
        return self._z(
            schema, out, consolidated=True, lineage=sum(z.lineage for z in zs if not z.known_empty)
        )

    def ordinal(self, a: Value, column: str) -> SparkZSet:
        """Rows pushed from Python keep their order, held in the driver or moved to Spark (placement
        `cluster` keeps them known); a Spark DataFrame (also one read into the driver: `unordered`)
        has none."""
        z = self.as_zset(a)
        schema = pl.Schema([*z.schema.items(), (column, pl.Int64())])
        if z.known_empty:
            return self.empty(schema)
        if z.local is not None and (_local(z) or not z.unordered):
            place = (
                pl.when(pl.col(WEIGHT) < 0).then(0).otherwise(1) if z.unordered else pl.int_range(pl.len())
            )
            df = z.local.df.select(*z.schema, place.cast(pl.Int64).alias(column), WEIGHT)
            if _local(z):
                return SparkZSet(self.spark, schema, local=ZSet(df))
            return self._z(schema, to_spark_frame(self.spark, df), lineage=z.lineage)
        place = F().when(col(WEIGHT) < 0, 0).otherwise(1).cast("long").alias(column)
        return self._z(schema, z.frame.select(*col_list(z.schema), place, col(WEIGHT)), lineage=z.lineage)

    def shifted(
        self, a: Value, by: Sequence[str], order: Sequence[str], outs: Sequence[tuple[str, str, int]]
    ) -> SparkZSet:
        """In the driver for rows held there; else one window (one sort) over a's rows."""
        from pyspark.sql import Window

        z = self.as_zset(a)
        types = {**z.schema, WEIGHT: pl.Int64()}
        schema = pl.Schema([*z.schema.items(), *((n, types[c]) for n, c, _ in outs)])
        if z.known_empty:
            return self.empty(schema)
        if _local(z):
            return self._in_driver(z, lambda k, v: k.shifted(v, by, order, outs))
        w = Window.partitionBy(*col_list(by)).orderBy(*col_list(order))
        new = [
            (col(c) if k == 0 else (F().lag(col(c), k) if k > 0 else F().lead(col(c), -k)).over(w)).alias(n)
            for n, c, k in outs
        ]
        # a window is a shuffle and a sort whose plan a keyed table's change nests in several others
        # (its checks, the change's -old + final): counted as WINDOW_LINEAGE copies of its input's plan,
        # so that a consumer computes it once (`_z`) before the plan outgrows Spark Connect's message
        # depth (a local-cluster Connect step failed with "Exceeded upb_DecodeOptions_MaxDepth")
        out = z.frame.select(*col_list(z.schema), *new, col(WEIGHT))
        return self._z(schema, out, lineage=z.lineage * WINDOW_LINEAGE)

    def split(self, a: Value, column: str) -> list[tuple[Any, SparkZSet]]:
        """In the driver for rows held there; else one action for the column's values, then a
        filter of the plan per value."""
        z = self.as_zset(a)
        if z.known_empty:
            return []
        if _local(z):
            assert z.local is not None
            return [(v, self.from_local(part)) for v, part in self.driver_kernel().split(z.local, column)]
        values = z.frame.select(col(column)).where(col(column).isNotNull()).distinct()
        rest = pl.Schema([(c, t) for c, t in z.schema.items() if c != column])
        out = []
        for (v,) in sorted(tuple(r) for r in self.act(lambda: values.collect())):
            part = z.frame.filter(col(column) == F().lit(v)).select(*col_list([*rest, WEIGHT]))
            out.append((v, self._z(rest, part, lineage=z.lineage)))
        return out

    # ---- bilinear operators -------------------------------------------------------------------
    def join(
        self,
        a: Value,
        b: Value,
        left_keys: Sequence[str],
        right_keys: Sequence[str],
        right_out: Sequence[tuple[str, str]],
    ) -> SparkZSet:
        """Equi-join, weights multiplied (ANSI: overflow is an error); NULL keys never match (SQL).

        A trace side is read by a seek at the other side's keys (`seek`), never scanned."""
        schema = pl.Schema([*_data(a).items(), *[(d, _data(b)[s]) for s, d in right_out]])
        if self.known_empty(a) or self.known_empty(b):
            return self.empty(schema)
        # a trace side is read only at the keys of the other side's change
        sought = -1
        if isinstance(b, BucketSnap) and not isinstance(a, BucketSnap):
            b = self.seek(b, self.as_zset(a), list(zip(left_keys, right_keys, strict=True)), exact=False)
            sought = 1
        elif isinstance(a, BucketSnap) and not isinstance(b, BucketSnap):
            a = self.seek(a, self.as_zset(b), list(zip(right_keys, left_keys, strict=True)), exact=False)
            sought = 0
        x, y = self.as_zset(a), self.as_zset(b)
        if _local(x) and _local(y):  # both in the driver: the local kernel's join, no Spark job
            assert x.local is not None and y.local is not None
            sides = [x.local, y.local]
            if sought >= 0 and not isinstance(sides[sought], Accumulators):
                # the trace's rows as found (a row may be in several runs, with weights that cancel):
                # joined as they are, since a join is bilinear; the local kernel would consolidate a
                # side first, which only a change needs (terms of a chain of joins that cancel)
                sides[sought] = ZSet(sides[sought].df, consolidated=True)
            return self.from_local(
                self.driver_kernel().join(sides[0], sides[1], left_keys, right_keys, right_out)
            )
        left, right = x.frame, y.frame
        rsel = [col(r).alias(f"__k{i}") for i, r in enumerate(right_keys)]
        rsel += [col(s).alias(d) for s, d in right_out] + [col(WEIGHT).alias(_WR)]
        r = right.select(*rsel)
        cond = [col(k) == col(f"__k{i}") for i, k in enumerate(left_keys)]
        j = left.join(r, cond, "inner")
        return self._weigh(j, schema, x.lineage + y.lineage)

    def product(self, a: Value, b: Value, right_out: Sequence[tuple[str, str]]) -> SparkZSet:
        """Cross product; in the driver when one side is held there and the other is too, or is a
        trace of at most `driver_rows` stored entries (read there: a product reads its whole other
        side anyway)."""
        schema = pl.Schema([*_data(a).items(), *[(d, _data(b)[s]) for s, d in right_out]])
        if self.known_empty(a) or self.known_empty(b):
            return self.empty(schema)
        x, y = self.as_zset(a), self.as_zset(b)
        if _local(x) or _local(y):
            x, y = self._small_in_driver(a, x), self._small_in_driver(b, y)
        if _local(x) and _local(y):
            assert x.local is not None and y.local is not None
            return self.from_local(self.driver_kernel().product(x.local, y.local, right_out))
        r = y.frame.select(*[col(s).alias(d) for s, d in right_out], col(WEIGHT).alias(_WR))
        return self._weigh(x.frame.crossJoin(r), schema, x.lineage + y.lineage)

    def _small_in_driver(self, a: Value, z: SparkZSet) -> SparkZSet:
        """`z` (the value `a` as a Z-set), read into the driver without a Spark job if `a` is a trace
        snapshot of at most `driver_rows` stored entries whose pending changes are held there."""
        if not isinstance(a, BucketSnap) or _local(z):
            return z
        from dbspark.engines.spark.placement import driver_rows

        if sum(e.n_rows for e in a.files.values()) > driver_rows(self):
            return z
        rows = a.scan_local()
        return z if rows is None else SparkZSet(self.spark, a.schema, local=rows)

    def seek(self, snap: Value, probe: Value, on: Sequence[tuple[str, str]], exact: bool) -> SparkZSet:
        """The trace's rows (with weights) whose key equals (`on`: z's column, the trace's key) a row of
        z's. In the driver when z and the pending changes are local; else committed rows by a seek in
        each task over z's distinct keys (no shuffle of the state, no scan) and pending rows by a
        semi-join. `exact=False`: a NULL key matches nothing (SQL); True: NULL equals NULL (rows)."""
        assert isinstance(snap, BucketSnap)
        z = self.as_zset(probe)
        if not snap.batches or z.known_empty:
            if list(snap.sums) != [WEIGHT]:  # accumulators: none, with their columns
                empty = pl.DataFrame(schema=pl.Schema([*snap.schema.items(), *snap.sums.items()]))
                return SparkZSet(self.spark, snap.schema, local=Accumulators(empty), consolidated=True)
            return self.empty(snap.schema)
        if _local(z):
            assert z.local is not None
            keys = pick(z.local.df, [c for c, _ in on], [k for _, k in on])
            rows = snap.seek_local(keys, exact)
            if rows is not None:
                if list(snap.sums) != [WEIGHT]:  # accumulators: their keys and sums
                    return SparkZSet(self.spark, snap.schema, local=Accumulators(rows), consolidated=True)
                return SparkZSet(self.spark, snap.schema, local=ZSet(rows))
        from dbspark.engines.spark.convert import spark_schema

        keys = z.frame.select(*[col(c).alias(k) for c, k in on])
        if not exact:  # (not `dropna()`: it names the columns as strings, which Spark parses)
            keys = keys.filter(functools.reduce(operator.and_, [col(k).isNotNull() for _, k in on]))
        keys = keys.distinct()
        parts = []
        lineage = 0
        if snap.files:
            lineage += z.lineage
            probe_cols = [(k, k) for _, k in on]
            layout, files = snap.layout, dict(snap.files)  # (what the tasks need: no session, no frames)
            assert layout is not None
            parts.append(
                map_in_arrow(
                    keys,
                    lambda it: seek_rows(it, layout, files, probe_cols, exact),
                    spark_schema(layout.frame_schema, weight=False),
                )
            )
        df = parts_frame(snap.pending, [*snap.schema, *snap.sums])
        if df is not None:
            lineage += z.lineage + sum(p.lineage for p in snap.pending if not p.known_empty)
            ks = [k for _, k in on]
            if exact:
                parts.append(ns_join(df, keys.hint(SEMI_JOIN), ks, "left_semi"))
            else:
                kk = keys.select(*[col(k).alias(f"__p{i}") for i, k in enumerate(ks)])
                cond = [col(k) == col(f"__p{i}") for i, k in enumerate(ks)]
                parts.append(df.join(kk.hint(SEMI_JOIN), cond, "left_semi"))
        if not parts:
            return self.empty(snap.schema)
        out = parts[0]
        for f in parts[1:]:
            out = out.unionByName(f)
        return self._z(snap.schema, out, lineage=lineage)

    def _weigh(self, j: Any, schema: pl.Schema, lineage: int) -> SparkZSet:
        return self._z(
            schema, j.select(*col_list(schema), (col(WEIGHT) * col(_WR)).alias(WEIGHT)), lineage=lineage
        )

    def known_empty(self, a: Value) -> bool:
        return not a.batches if isinstance(a, BucketSnap) else a.known_empty

    # ---- non-linear operators -----------------------------------------------------------------
    def distinct(self, a: Value) -> SparkZSet:
        z = self.consolidate(a)
        if z.known_empty:
            return z
        if _local(z):
            return self._in_driver(z, lambda k, v: k.distinct(v))
        return self._z(
            z.schema,
            z.frame.filter(col(WEIGHT) > 0).withColumn(WEIGHT, F().lit(1).cast("long")),
            consolidated=True,
            lineage=z.lineage,
        )

    # ---- traces -------------------------------------------------------------------------------
    def new_trace(
        self, schema: pl.Schema, keys: Sequence[str], sums: pl.Schema | None = None, order: str | None = None
    ) -> SparkBucketTrace:
        """A bucketed trace under the state directory, named by its creation order (the runtime
        creates its traces in a fixed order, so a restarted pipeline finds its files). A run is sorted
        by the key hash, then by its data columns in order: with an `order`, the keys come first and
        then that column, so that a key's entries in a run are one range sorted by it (`key_runs`)."""
        data = pl.Schema([(c, t) for c, t in schema.items() if c != WEIGHT])
        if order is not None:
            first = [*keys, order]
            data = pl.Schema(
                [(c, data[c]) for c in first] + [(c, t) for c, t in data.items() if c not in first]
            )
        return self.bucket_trace(
            data, tuple(keys) or tuple(data), sums if sums is not None else pl.Schema([(WEIGHT, pl.Int64())])
        )

    def key_runs(self, snap: Value, probe: pl.DataFrame, min_rows: int) -> dict[int, list[pl.DataFrame]]:
        """Zero-copy slices of the memory-mapped runs (`trace.ranks.group_slices`), and the key's pending
        rows held in the driver as one more frame; nothing when a pending change is on Spark."""
        assert isinstance(snap, BucketSnap)
        layout, keys = snap.layout, list(snap.keys)
        rest = [c for c in snap.schema if c not in keys]
        pend = snap.pending_local() if layout is not None and snap.files and rest else None
        if pend is None or layout is None:
            return {}
        order, cols = rest[0], [*snap.schema, *snap.sums]
        out: dict[int, list[pl.DataFrame]] = {}
        for i, tables in group_slices(layout, snap.files, probe, min_rows).items():
            frames = [pick(pl.DataFrame(pl.from_arrow(t)), cols) for t in tables]
            if pend.height:
                key = probe.slice(i, 1).cast({k: pend.schema[k] for k in keys}, strict=False)
                mine = pend.join(key, on=keys, how="semi", nulls_equal=True)
                if mine.height:
                    frames.append(pick(mine, cols).sort(order, nulls_last=False))
            out[i] = frames
        return out

    @contextlib.contextmanager
    def scratch(self) -> Iterator[None]:
        self._scratch += 1
        try:
            yield
        finally:
            self._scratch -= 1

    def deferring(self) -> contextlib.AbstractContextManager[None]:
        """A trace's inserts are pending parts until the step's flush already (`SparkBucketTrace`)."""
        return contextlib.nullcontext()

    @contextlib.contextmanager
    def owned(self, owner: str) -> Iterator[None]:
        before, self._owner = self._owner, owner
        try:
            yield
        finally:
            self._owner = before

    def release(self, owners: Iterable[str]) -> None:
        """The traces stop being flushed and counted at once; their directories are deleted when the
        next step commits (until then the committed checkpoint still names their files)."""
        gone = set(owners)
        keep = []
        for t in self.traces:
            if owner_of(t.layout.name) in gone:
                self._released.append(t.layout.directory)
            else:
                keep.append(t)
        self.traces = keep

    def bucket_trace(self, data: pl.Schema, keys: tuple[str, ...], sums: pl.Schema) -> SparkBucketTrace:
        """A trace of `data` columns indexed by `keys`, with summed columns `sums` (a weight, or an
        aggregate's accumulators), registered to be flushed at the end of each step; inside `scratch`,
        a trace of this step's changes only (pending parts, never written). Its name (its directory)
        is its owner's (`owned`: a node's key) and a suffix of its own; a restored trace takes the
        saved name (`SparkBucketTrace.restore`), so names need not repeat across runs."""
        if self._scratch:
            layout = BucketLayout(
                str(self.storage.root / "scratch"),
                "scratch",
                data,
                keys,
                1,
                tuple(sums),
                tuple(sums.values()),
            )
            return SparkBucketTrace(self, layout, scratch=True)
        layout = BucketLayout(
            str(self.storage.root / "traces"),
            f"{self._owner}.{uuid.uuid4().hex[:8]}",
            data,
            keys,
            self.n_buckets,
            tuple(sums),
            tuple(sums.values()),
        )
        trace = SparkBucketTrace(self, layout)
        self.traces.append(trace)
        return trace

    def trace_insert(self, trace: SparkBucketTrace, delta: Value, undo: list) -> BucketSnap:
        z = self.as_zset(delta)
        if not z.known_empty:
            # (not cached for the step's later actions: Spark's substitution of a cached plan into a
            # larger one failed with "key not found: <column>" in the 22 TPC-H views with adaptive
            # execution off, InMemoryRelation.withOutput; the lineage cut bounds the recomputation)
            trace.add(z, undo)
        return trace.snapshot()

    def trace_drop(
        self, drops: Sequence[tuple[SparkBucketTrace, Sequence[tuple[str, Any]]]], undo: list
    ) -> None:
        """In the driver when the state's files are on this machine's file system, else in one Spark job:
        each task rewrites the runs of its (trace, bucket) pairs that hold rows to drop
        (`BucketLayout.drop_bucket`) and returns their new entries, which the traces then adopt."""
        work = [(t, list(b)) for t, b in drops if t.files]
        if self.drops_in_driver and all("://" not in t.layout.root for t, _ in work):  # files here: no job
            for t, below in work:
                t.adopt(t.dropped(below, self.step_no), undo)
            return
        got = drop_plan(work, self.step_no, self.write_partitions)
        if got is None:
            return
        with self.step_settings():
            entries = pl.from_arrow(self.act(lambda: got.toArrow()))
        assert isinstance(entries, pl.DataFrame)
        for i, (t, _) in enumerate(work):
            t.adopt(entries_from_frame(entries.filter(pl.col("trace") == i)), undo)

    def state_rows(self) -> int:
        return sum(t.rows() for t in self.traces if not t.scratch)

    def known_rows(self, a: Value) -> int | None:
        """Rows held in the driver (a count of a Spark plan would be a job)."""
        if isinstance(a, SparkZSet) and _local(a):
            assert a.local is not None
            return len(a.local)
        return None

    def trace_clear(self, trace: SparkBucketTrace, undo: list) -> None:
        trace.clear(undo)

    def trace_stats(self, trace: SparkBucketTrace) -> tuple[int, int | None]:
        return trace.rows(), trace.nbytes()

    def trace_keys(self, trace: SparkBucketTrace, names: Sequence[str]) -> None:
        return None  # (its rows are in files: a view's trace writes its own)

    def empty_snapshot(self, schema: pl.Schema, keys: Sequence[str]) -> BucketSnap:
        data = pl.Schema([(c, t) for c, t in schema.items() if c != WEIGHT])
        return BucketSnap(None, {}, (), data, tuple(keys))

    def commit_output(self, trace: SparkBucketTrace, delta: Value, name: str, undo: list) -> SparkZSet:
        """Add an output's change to the view's trace. A change on Spark is first written to its change
        log (`outputs/<name>/step-N`, replaced if the step is re-run after a crash) and read from there,
        so it is computed once; a change held in the driver stays there."""
        z = self.consolidate(delta)
        if z.known_empty:
            return z
        if z._df is None:
            trace.add(z, undo)
            return z
        # the write of the view's trace (the step's flush, or at once) also writes the change log; the
        # value returned here reads the log once written
        path = str(self.storage.root / "outputs" / name / f"step-{self.step_no:08d}")
        shutil.rmtree(path, ignore_errors=True)  # (a re-run of a step that crashed after writing it)
        out = SparkZSet(self.spark, z.schema)
        self._outputs[self.traces.index(trace)] = (path, out)
        undo.append(lambda: self._outputs.clear())
        trace.add(z, undo)
        return out

    def ranges(self, a: Value, lo: str, hi: str, step: str, column: str) -> SparkZSet:
        """As the local kernel (`columnar/ranges.py`): n values lo + i * k, i < n, exploded in Spark."""
        z = self.as_zset(a)
        keep = [c for c in z.schema if c not in (lo, hi, step)]
        schema = pl.Schema([*[(c, z.schema[c]) for c in keep], (column, pl.Int64())])
        if z.known_empty:
            return self.empty(schema)
        if _local(z):
            return self._in_driver(z, lambda k, v: k.ranges(v, lo, hi, step, column))
        f = F()
        # (the span in DECIMAL(20, 0): bounds 2^64 apart do not overflow a BIGINT subtraction)
        a_, b_, s_ = (f"CAST(`{c}` AS DECIMAL(20, 0))" for c in (lo, hi, step))
        n = f.expr(
            f"CASE WHEN {s_} > 0 THEN IF({b_} > {a_}, ({b_} - {a_} - 1) div {s_} + 1, 0) "
            f"WHEN {s_} < 0 THEN IF({a_} > {b_}, ({a_} - {b_} - 1) div (0 - {s_}) + 1, 0) "
            f"ELSE IF({a_} != {b_}, 1, 0) END"
        ).cast("long")
        k = f.expr(f"CAST(IF({s_} = 0, 1, {s_}) AS BIGINT)")
        df = z.frame.select("*", n.alias("__n"), k.alias("__k")).filter(col("__n") > 0)
        df = df.select("*", f.explode(f.sequence(f.lit(0).cast("long"), col("__n") - 1)).alias("__i"))
        d = "decimal(38, 0)"  # (i * k may pass a BIGINT where lo + i * k does not)
        value = (col(lo).cast(d) + col("__i").cast(d) * col("__k").cast(d)).cast("long").alias(column)
        return self._z(schema, df.select(*col_list(keep), value, col(WEIGHT)), lineage=z.lineage)

    def weigh(self, a: Value, column: str) -> SparkZSet:
        """Each row's weight times its value in `column` (dropped); ANSI: overflow is an error."""
        z = self.as_zset(a)
        schema = pl.Schema([(c, t) for c, t in z.schema.items() if c != column])
        if z.known_empty:
            return self.empty(schema)
        if _local(z):
            return self._in_driver(z, lambda k, v: k.weigh(v, column))
        c = col(column)
        df = z.frame.filter(c.isNotNull() & (c != 0))
        return self._z(
            schema,
            df.select(*col_list(schema), (col(WEIGHT) * c.cast("long")).alias(WEIGHT)),
            lineage=z.lineage,
        )

    # ---- top-k ----------------------------------------------------------------------------------
    def topk(self, a: Value, order: Any, limit: int | None, offset: int) -> SparkZSet:
        """Rows [offset, offset + limit) of `a` in `order` (see `operators.topk`): the first
        offset + limit rows by Spark's take-ordered (no full sort), weights resolved in the driver."""
        from dbspark.operators.topk import full_order, topk_frame

        z = self.consolidate(a)
        if z.known_empty:
            return z
        if _local(z):  # rows held in the driver: the local kernel's top-k, no Spark job
            return self._in_driver(z, lambda k, v: k.topk(v, order, limit, offset))
        cols = []
        for k in full_order(tuple(order), list(z.schema)):
            c = col(k.column)
            if k.descending:
                cols.append(c.desc_nulls_first() if k.nulls_first else c.desc_nulls_last())
            else:
                cols.append(c.asc_nulls_first() if k.nulls_first else c.asc_nulls_last())
        df = z.frame.filter(col(WEIGHT) > 0).orderBy(*cols)
        if limit is not None:
            df = df.limit(offset + limit)
        local = self.act(lambda: from_spark(df, z.schema))
        return self.from_local(ZSet(topk_frame(local.df, tuple(order), limit, offset), True))


WINDOW_LINEAGE = 4


def _data(a: Value) -> pl.Schema:
    return a.schema


def _local(z: SparkZSet) -> bool:
    """The value is rows held in the driver (no Spark plan)."""
    return z._df is None and z.local is not None


def _schema_of(z: SparkZSet) -> pl.Schema:
    """The columns of a value's rows: its data and weight (accumulators: their frame's own)."""
    if z.local is not None:
        return z.local.df.schema
    return pl.Schema([*z.schema.items(), (WEIGHT, pl.Int64())])


def _local_frame(z: SparkZSet) -> pl.DataFrame:
    """The rows of a value held in the driver (or known empty) as one Polars frame."""
    if z.local is not None:
        return z.local.df
    return pl.DataFrame(schema=_schema_of(z))


def _is_spark_frame(x: Any) -> bool:
    mod = type(x).__module__
    return mod.startswith("pyspark.sql") and type(x).__name__ == "DataFrame"
