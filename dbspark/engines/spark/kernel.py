"""The spark kernel: Z-sets as lazy Spark DataFrames, traces as Parquet LSMs (`engines.spark.trace`).

A step composes its work lazily; Spark runs only at state boundaries (a trace append is one write),
at outputs, and where Python must see a value (an emptiness test inside a recursive scope, a kind
check of a bag input). Every such action goes through `SparkKernel.act`, which counts it and turns
Spark's errors into dbspark's: checks inside a plan use `raise_error` with a `DBSPARK[Class]` tag, and
ANSI arithmetic overflow becomes a `WeightError`. A value that is known to be empty (no change pushed,
or an operator over empty inputs) carries no plan, and operators on it short-circuit.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, ExitStack
from pathlib import Path
from typing import Any

import polars as pl

from dbspark import errors
from dbspark.algebra.zset import WEIGHT, ZSet
from dbspark.columnar.rows import check_kind, input_frame
from dbspark.engines.base import Kernel
from dbspark.engines.spark import aggregate as agg
from dbspark.engines.spark.convert import from_spark, spark_type
from dbspark.engines.spark.exprs import py_tuple, with_spark_columns
from dbspark.engines.spark.session import SessionHandle, get_session
from dbspark.engines.spark.settings import SessionSettings
from dbspark.engines.spark.trace import Batch, SparkSnapshot, SparkTrace, Storage, parquet_rows
from dbspark.engines.spark.values import SparkZSet
from dbspark.ir.aggregate import AggSpec
from dbspark.ir.expr import Expr

Value = SparkZSet | SparkSnapshot
_WR = "__w_r"
_TAG = re.compile(r"DBSPARK\[(\w+)\] (.*?)(?: SQLSTATE|$)", re.S)
_PY_RAISED = re.compile(r"^dbspark\.errors\.(\w+): (.*)$", re.M)


def F() -> Any:
    from pyspark.sql import functions

    return functions


def fail(cls: type[errors.DbsparkError], message: Any) -> Any:
    """A Column that raises `cls(message)` when evaluated (`message` is a Column or a string)."""
    m = message if not isinstance(message, str) else F().lit(message)
    return F().raise_error(F().concat(F().lit(f"DBSPARK[{cls.__name__}] "), m))


def ns_join(
    left: Any, right: Any, keys: Sequence[str], how: str = "inner", rkeys: Sequence[str] | None = None
) -> Any:
    """Join on keys with NULL = NULL (rows of a Z-set are values: a NULL group is a group)."""
    rk = list(rkeys or keys)
    r = right.select(
        *[F().col(c).alias(f"__r{i}") for i, c in enumerate(rk)], *[c for c in right.columns if c not in rk]
    )
    cond = [F().col(k).eqNullSafe(F().col(f"__r{i}")) for i, k in enumerate(keys)]
    out = left.join(r, cond, how)
    return out.drop(*[f"__r{i}" for i in range(len(rk))])


class SparkKernel:
    """Implements `engines.base.Kernel` on Spark DataFrames."""

    name = "spark"

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
        self._cached: list[Any] = []
        self._scope_kernel: Kernel | None = None
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
        rows, self._pushed_rows = self._pushed_rows, 0
        self._step_settings.close()  # a step that was begun and never ended
        self._step_settings.enter_context(self.session_settings(rows))

    def end_step(self, t: int) -> None:
        """The step committed: delete the files it replaced, drop its cached changes, put back the
        session's own settings."""
        try:
            self.storage.collect()
            self._uncache()
        finally:
            self._step_settings.close()

    def abort_step(self) -> None:
        """The step was rolled back: what it wrote stays unreferenced (swept on reopen)."""
        try:
            self.storage.garbage = []
            self._uncache()
        finally:
            self._step_settings.close()

    def sweep_uncommitted(self, committed_steps: int) -> None:
        """After a restart: delete the files of steps that never committed."""
        self.storage.sweep_uncommitted(committed_steps)

    def _uncache(self) -> None:
        for df in self._cached:
            df.unpersist()
        self._cached = []

    # ---- group and conversions ---------------------------------------------------------------
    def _z(
        self, schema: pl.Schema, df: Any = None, keys: Any = None, consolidated: bool = False
    ) -> SparkZSet:
        return SparkZSet(
            self.spark, schema, df, keys=tuple(keys) if keys else None, consolidated=consolidated
        )

    def empty(self, schema: pl.Schema, keys: Sequence[str] | None = None) -> SparkZSet:
        return self._z(
            pl.Schema([(c, t) for c, t in schema.items() if c != WEIGHT]), keys=keys, consolidated=True
        )

    def as_zset(self, a: Value) -> SparkZSet:
        if isinstance(a, SparkSnapshot):
            if not a.batches:
                return self.empty(a.schema, a.keys)
            z = self._z(a.schema, a.frame(self.spark), a.keys, consolidated=len(a.batches) == 1)
            if a.sums == (WEIGHT,):
                z.files = tuple(b.path for b in a.batches)
            return z
        return a

    def to_local(self, a: Value) -> ZSet:
        z = self.as_zset(a)
        return z.to_zset() if z._df is None else self.act(z.to_zset)

    def from_local(self, z: ZSet) -> SparkZSet:
        return SparkZSet(self.spark, z.schema, local=z)

    def scope_kernel(self) -> Kernel:
        """Recursive scopes iterate in the driver on the local kernel (taken from the engine registry,
        not imported): an iteration costs no Spark action, and the scope's nested traces are kept (and
        checkpointed) in the driver. The engine issue moves scopes onto the executors."""
        if self._scope_kernel is None:
            from dbspark.engines import get_kernel

            self._scope_kernel = get_kernel("local")
        return self._scope_kernel

    def plus(self, a: Value, b: Value) -> SparkZSet:
        a, b = self.as_zset(a), self.as_zset(b)
        if b.known_empty:
            return a
        if a.known_empty:
            return b if a.keys is None else self._z(b.schema, b.frame, a.keys)
        if a.local is not None and b.local is not None and a._df is None and b._df is None:
            return SparkZSet(
                self.spark, a.schema, local=ZSet(pl.concat([a.local.df, b.local.df])), keys=a.keys
            )
        cols = [*a.schema, WEIGHT]
        return self._z(a.schema, a.frame.select(cols).unionByName(b.frame.select(cols)), a.keys)

    def neg(self, a: Value) -> SparkZSet:
        z = self.as_zset(a)
        if z.known_empty:
            return z
        if z._df is None and z.local is not None:
            return SparkZSet(self.spark, z.schema, local=-z.local, keys=z.keys)
        return self._z(z.schema, z.frame.withColumn(WEIGHT, -F().col(WEIGHT)), z.keys, z.consolidated)

    def consolidate(self, a: Value) -> SparkZSet:
        z = self.as_zset(a)
        if z.consolidated or z.known_empty:
            return z
        if z._df is None and z.local is not None:
            return SparkZSet(
                self.spark, z.schema, local=z.local.consolidate(), keys=z.keys, consolidated=True
            )
        df = z.frame.groupBy(*z.schema).agg(F().sum(WEIGHT).alias(WEIGHT)).filter(F().col(WEIGHT) != 0)
        return self._z(z.schema, df, z.keys, consolidated=True)

    def is_empty(self, a: Value) -> bool:
        if isinstance(a, SparkSnapshot):
            return not a.batches
        if a.known_empty:
            return True
        if a._df is None and a.local is not None:
            return a.local.consolidate().df.height == 0
        z = self.consolidate(a)
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

    def check_input(self, trace: SparkTrace | None, z: SparkZSet, kind: str, where: str) -> None:
        """Reject a change that would make a bag negative or a set exceed 1 (one Spark action)."""
        local = z.to_zset() if z._df is None else None
        if trace is None or not trace.batches:
            cur = None
        else:
            keys = z.frame.select(*z.schema).distinct()
            old = self.consolidate(self.as_zset(trace.snapshot())).frame
            found = ns_join(old, keys, list(z.schema), "left_semi")
            cur = self.act(lambda: from_spark(found, z.schema)).df
        if local is None:
            local = self.act(lambda: z.to_zset())
        check_kind(local, cur, kind, where)

    def insert_checked(self, trace: SparkTrace, z: SparkZSet, kind: str, where: str, undo: list) -> None:
        """Add a change to an input's integral, checking its kind inside the write (no extra action):
        a row whose count would turn negative (or exceed 1 in a set) fails the write, naming the row."""
        if z.known_empty:
            return
        z = self.consolidate(z)
        cols = list(z.schema)
        if trace.batches:  # one GROUP BY over the change and the integral's rows with the change's keys
            snap = self.as_zset(trace.snapshot()).frame
            old = ns_join(snap, F().broadcast(z.frame.select(*cols)), cols, "left_semi")
            zero = F().lit(0).cast("long")
            rows = z.frame.select(*cols, F().col(WEIGHT).alias("__d"), zero.alias("__old")).unionByName(
                old.select(*cols, zero.alias("__d"), F().col(WEIGHT).alias("__old"))
            )
            j = (
                rows.groupBy(*cols)
                .agg(F().sum("__d").alias(WEIGHT), F().sum("__old").alias("__old"))
                .filter(F().col(WEIGHT) != 0)
            )
        else:
            j = z.frame.withColumn("__old", F().lit(0).cast("long"))
        old, w = F().col("__old"), F().col(WEIGHT)
        new = old + w
        row = py_tuple([F().col(c) for c in cols], [z.schema[c] for c in cols])
        neg = fail(
            errors.NegativeStateError,
            F().concat(
                F().lit(f"{where}: delete of row "),
                row,
                F().lit(" that is not there (present "),
                old.cast("string"),
                F().lit(" time(s), change "),
                w.cast("string"),
                F().lit(")"),
            ),
        )
        checked = F().when(new < 0, neg)
        if kind == "set":
            checked = checked.when(
                new > 1,
                fail(
                    errors.NegativeStateError,
                    F().concat(
                        F().lit(f"{where} is a set: row "),
                        row,
                        F().lit(" would occur "),
                        new.cast("string"),
                        F().lit(" times"),
                    ),
                ),
            )
        trace.append(j.select(*cols, checked.otherwise(w).alias(WEIGHT)), undo, consolidated=True)

    def unique_checked(
        self, trace: SparkTrace, z: SparkZSet, cols: Sequence[str], where: str, undo: list
    ) -> None:
        """Check a table's change against a UNIQUE constraint on `cols`, inside the write of the change
        to the constraint's index `trace` (`engines.spark.unique`)."""
        from dbspark.engines.spark.unique import unique_change

        if z.known_empty:
            return
        snap = self.as_zset(trace.snapshot()).frame if trace.batches else None
        trace.append(unique_change(snap, z.frame, cols, where), undo, consolidated=True)

    def keyed_change(
        self, trace: SparkTrace, batches: Sequence[SparkZSet], key: Sequence[str], where: str, undo: list
    ) -> SparkZSet:
        """One step's pushes to a table with a primary `key` as a change of the table, appended to its
        integral `trace` in one write that also checks it (`engines.spark.keyed`)."""
        from dbspark.engines.spark.keyed import keyed_change

        schema = trace.schema
        if all(b.known_empty for b in batches):
            return self.empty(schema)
        snap = self.as_zset(trace.snapshot()).frame if trace.batches else None
        df = keyed_change(self.spark, snap, batches, schema, key, where)
        z = self._z(schema, df, consolidated=True)
        self.trace_insert(trace, z, undo)
        return z

    # ---- linear operators ---------------------------------------------------------------------
    def filter(self, a: Value, pred: Expr) -> SparkZSet:
        z = self.as_zset(a)
        if z.known_empty:
            return z
        frame, (cond,) = with_spark_columns(z.frame, [pred], z.schema)
        out = frame.filter(cond)
        if frame is not z.frame:  # drop the bound columns
            out = out.select(*z.frame.columns)
        return self._z(z.schema, out, None, z.consolidated)

    def map(self, a: Value, exprs: Sequence[tuple[str, Expr]], schema: pl.Schema) -> SparkZSet:
        z = self.as_zset(a)
        if z.known_empty:
            return self.empty(schema)
        frame, cols = with_spark_columns(z.frame, [e for _, e in exprs], z.schema)
        sel = [c.cast(spark_type(schema[n])).alias(n) for (n, _), c in zip(exprs, cols, strict=True)]
        return self._z(schema, frame.select(*sel, F().col(WEIGHT)))

    def flat_map(self, a: Value, fn: Callable[[dict], Any], schema: pl.Schema) -> SparkZSet:
        """A user callback per row, run by Spark's Python workers (mapInArrow)."""
        z = self.as_zset(a)
        if z.known_empty:
            return self.empty(schema)
        from dbspark.engines.spark.convert import spark_schema
        from dbspark.engines.spark.udf import flat_map_batches

        in_schema, out_schema = z.schema, schema
        return self._z(
            schema,
            z.frame.mapInArrow(
                lambda it: flat_map_batches(it, fn, in_schema, out_schema), spark_schema(schema)
            ),
        )

    def index(self, a: Value, keys: Sequence[str]) -> SparkZSet:
        z = self.as_zset(a)
        return SparkZSet(self.spark, z.schema, z._df, z.local, tuple(keys), z.consolidated)

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

        A change joined with a trace is broadcast, so the trace is scanned once and never shuffled."""
        schema = pl.Schema([*_data(a).items(), *[(d, _data(b)[s]) for s, d in right_out]])
        if self._empty(a) or self._empty(b):
            return self.empty(schema)
        x, y = self.as_zset(a), self.as_zset(b)
        left, right = x.frame, y.frame
        if isinstance(b, SparkSnapshot) and not isinstance(a, SparkSnapshot):
            left = F().broadcast(left)
        elif isinstance(a, SparkSnapshot) and not isinstance(b, SparkSnapshot):
            right = F().broadcast(right)
        rsel = [F().col(r).alias(f"__k{i}") for i, r in enumerate(right_keys)]
        rsel += [F().col(s).alias(d) for s, d in right_out] + [F().col(WEIGHT).alias(_WR)]
        r = right.select(*rsel)
        cond = [F().col(k) == F().col(f"__k{i}") for i, k in enumerate(left_keys)]
        j = left.join(r, cond, "inner")
        return self._weigh(j, schema)

    def product(self, a: Value, b: Value, right_out: Sequence[tuple[str, str]]) -> SparkZSet:
        schema = pl.Schema([*_data(a).items(), *[(d, _data(b)[s]) for s, d in right_out]])
        if self._empty(a) or self._empty(b):
            return self.empty(schema)
        r = self.as_zset(b).frame.select(
            *[F().col(s).alias(d) for s, d in right_out], F().col(WEIGHT).alias(_WR)
        )
        return self._weigh(self.as_zset(a).frame.crossJoin(r), schema)

    def _weigh(self, j: Any, schema: pl.Schema) -> SparkZSet:
        return self._z(schema, j.select(*schema, (F().col(WEIGHT) * F().col(_WR)).alias(WEIGHT)))

    def _empty(self, a: Value) -> bool:
        return not a.batches if isinstance(a, SparkSnapshot) else a.known_empty

    # ---- non-linear operators -----------------------------------------------------------------
    def distinct(self, a: Value) -> SparkZSet:
        z = self.consolidate(a)
        if z.known_empty:
            return z
        return self._z(
            z.schema,
            z.frame.filter(F().col(WEIGHT) > 0).withColumn(WEIGHT, F().lit(1).cast("long")),
            consolidated=True,
        )

    def distinct_delta(self, prev: SparkSnapshot, delta: Value) -> SparkZSet:
        """H(i, d) of `dbsp-paper.txt` Prop 4.7, looking up only the rows of d in the trace of i."""
        d = self.as_zset(delta)
        if d.known_empty:
            return d
        cols = list(d.schema)
        if not prev.batches:
            return self.distinct(d)
        # one GROUP BY over the change's rows and the trace's rows with the change's keys: per row, the
        # change (consolidated here) and the integral i before it
        old = ns_join(self.as_zset(prev).frame, F().broadcast(d.frame.select(*cols)), cols, "left_semi")
        zero = F().lit(0).cast("long")
        rows = d.frame.select(*cols, F().col(WEIGHT).alias("__d"), zero.alias("__i")).unionByName(
            old.select(*cols, zero.alias("__d"), F().col(WEIGHT).alias("__i"))
        )
        j = (
            rows.groupBy(*cols)
            .agg(F().sum("__d").alias(WEIGHT), F().sum("__i").alias("__i"))
            .filter(F().col(WEIGHT) != 0)
        )
        i, new = F().col("__i"), F().col("__i") + F().col(WEIGHT)
        w = F().when((i > 0) & (new <= 0), -1).when((i <= 0) & (new > 0), 1).otherwise(0).cast("long")
        out = j.select(*cols, w.alias(WEIGHT)).filter(F().col(WEIGHT) != 0)
        return self._z(d.schema, out, consolidated=True)

    def aggregate(self, a: Value, spec: AggSpec) -> SparkZSet:
        z = self.as_zset(a)  # one GROUP BY over the rows as they are: no consolidation first
        return self._z(spec.output_schema(), agg.aggregate_full(self, z, spec), consolidated=True)

    def aggregate_state(self, spec: AggSpec) -> agg.AggregateState:
        return agg.AggregateState(self, spec)

    def aggregate_step(self, state: agg.AggregateState, delta: Value, undo: list) -> SparkZSet:
        return state.step(self.as_zset(delta), undo)

    # ---- traces -------------------------------------------------------------------------------
    def new_trace(self, schema: pl.Schema, keys: Sequence[str]) -> SparkTrace:
        return SparkTrace(self, pl.Schema([(c, t) for c, t in schema.items() if c != WEIGHT]), tuple(keys))

    def trace_insert(self, trace: SparkTrace, delta: Value, undo: list) -> SparkSnapshot:
        z = self.as_zset(delta)
        if not z.known_empty:
            if z.local is None and z.path is None:
                # computed once, by this write: the step's later actions over plans that contain this
                # change (e.g. an output downstream of it) read Spark's cache instead of recomputing it
                self._cached.append(z.frame.cache())
            trace.append(z.frame.select(*trace.schema, WEIGHT), undo, consolidated=z.consolidated)
        return trace.snapshot()

    def empty_snapshot(self, schema: pl.Schema, keys: Sequence[str]) -> SparkSnapshot:
        return SparkSnapshot((), tuple(keys), pl.Schema([(c, t) for c, t in schema.items() if c != WEIGHT]))

    def commit_output(self, trace: SparkTrace, delta: Value, name: str, undo: list) -> SparkZSet:
        """Write an output's change to its change log (`outputs/<name>/step-N`, replaced if the step is
        re-run after a crash) and add that file to the view's trace; the returned value reads it."""
        z = self.consolidate(delta)
        if z.known_empty:
            return z
        path = str(self.storage.root / "outputs" / name / f"step-{self.step_no:08d}")
        self.write(z.frame.select(*trace.schema, WEIGHT), path)
        trace.add(Batch(path, 0, owned=False, rows=parquet_rows(path)), undo)
        return self.read(path, z.schema)

    def weigh(self, a: Value, column: str) -> SparkZSet:
        """Each row's weight times its value in `column` (dropped); ANSI: overflow is an error."""
        z = self.as_zset(a)
        schema = pl.Schema([(c, t) for c, t in z.schema.items() if c != column])
        if z.known_empty:
            return self.empty(schema)
        c = F().col(column)
        df = z.frame.filter(c.isNotNull() & (c != 0))
        return self._z(schema, df.select(*schema, (F().col(WEIGHT) * c.cast("long")).alias(WEIGHT)))

    # ---- top-k ----------------------------------------------------------------------------------
    def closure(self, a: Value, src: str, dst: str) -> SparkZSet:
        """↑TC of `a`'s edges: the edge set is collected and closed in the driver (`closure_step`)."""
        from dbspark.trace.closure import closure_of

        return self.from_local(closure_of(self.to_local(a), src, dst))

    def closure_state(self, src: str, dst: str, dtype: pl.DataType) -> Any:
        """The transitive closure's graph index lives in the driver, like a recursive scope's traces: it
        holds the edges (O(|E|)) and the component reachability, never the closure itself."""
        from dbspark.trace.closure import ClosureState

        return ClosureState(src, dst, dtype)

    def closure_step(self, state: Any, delta: Value, undo: list) -> SparkZSet:
        return self.from_local(ZSet(state.step(self.to_local(delta).df, undo), True))

    def topk(self, a: Value, order: Any, limit: int | None, offset: int) -> SparkZSet:
        """Rows [offset, offset + limit) of `a` in `order` (see `operators.topk`): the first
        offset + limit rows by Spark's take-ordered (no full sort), weights resolved in the driver."""
        from dbspark.operators.topk import full_order, topk_frame

        z = self.consolidate(a)
        if z.known_empty:
            return z
        cols = []
        for k in full_order(tuple(order), list(z.schema)):
            c = F().col(k.column)
            if k.descending:
                cols.append(c.desc_nulls_first() if k.nulls_first else c.desc_nulls_last())
            else:
                cols.append(c.asc_nulls_first() if k.nulls_first else c.asc_nulls_last())
        df = z.frame.filter(F().col(WEIGHT) > 0).orderBy(*cols)
        if limit is not None:
            df = df.limit(offset + limit)
        local = self.act(lambda: from_spark(df, z.schema))
        return self.from_local(ZSet(topk_frame(local.df, tuple(order), limit, offset), True))


def _data(a: Value) -> pl.Schema:
    return a.schema


def _is_spark_frame(x: Any) -> bool:
    mod = type(x).__module__
    return mod.startswith("pyspark.sql") and type(x).__name__ == "DataFrame"
