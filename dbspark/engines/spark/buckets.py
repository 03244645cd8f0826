"""The spark engine's traces as hash buckets of sorted Arrow runs (`trace/bucketed.py`), read by seeks.

A trace (an integral: a join side, an input's kind check, a view) is a `BucketLayout` under the state
directory and the version of its files. A step does not write it as it goes: `add` records the step's
change as *pending*, and a snapshot taken during the step is the committed files plus the pending
changes. Readers look up only the keys of their change: a change held in the driver (rows pushed
from Python, or anything computed from them) seeks the files in the driver, a change on Spark seeks
them inside its own tasks (`mapInArrow`, narrow: no shuffle, no scan of the state), and the pending
part is joined as a small Spark or Polars frame. At the end of the step `flush` writes the pending
changes: in the driver when they are all local, else as one Spark job whose tasks each write the
buckets of their partition (`BucketLayout.apply_partition`) and return the new entries.

Snapshots issued during a step are updated in place by the flush (the same object a delay holds for
the next step then names the committed files). A trace may be written more than once in a step (a large
change is written as it arrives, `add`); each write names its runs apart. See `docs/engine-state.md`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import polars as pl
import pyarrow as pa

from dbspark import faults
from dbspark.algebra.zset import WEIGHT, ZSet
from dbspark.columnar.plans import drop_null_rows, pick, semi_join
from dbspark.errors import CheckpointError
from dbspark.trace.bucketed import (
    BucketEntry,
    BucketLayout,
    entries_frame,
    garbage,
    updated,
)

if TYPE_CHECKING:
    from dbspark.engines.spark.kernel import SparkKernel
    from dbspark.engines.spark.values import SparkZSet

BUCKET = "__b"


def _entries_schema() -> Any:
    from pyspark.sql import types as T

    return T.StructType(
        [
            T.StructField("bucket", T.IntegerType()),
            T.StructField("entry", T.StringType()),
        ]
    )


class BucketSnap:
    """A trace at one point of a step: committed `files` plus this step's `pending` changes."""

    __slots__ = ("layout", "files", "pending", "schema", "keys", "sums", "memo")

    def __init__(
        self,
        layout: BucketLayout | None,
        files: dict[int, BucketEntry],
        pending: tuple[SparkZSet, ...],
        schema: pl.Schema,
        keys: tuple[str, ...],
        memo: list[Any] | None = None,
    ) -> None:
        self.layout = layout
        self.files = files
        self.pending = pending
        self.schema = schema  # the data columns
        self.keys = keys
        # the trace's last concatenation of its pending parts in the driver, [(parts, frame)]: a step
        # adds a part at a time (a recursive scope's iteration) and its seeks read them all
        self.memo = memo
        # the summed columns (a Z-set's weight, or an aggregate's accumulators) with their types
        self.sums = layout.frame_schema if layout is not None else pl.Schema([(WEIGHT, pl.Int64())])
        self.sums = pl.Schema([(c, t) for c, t in self.sums.items() if c not in schema])

    @property
    def batches(self) -> tuple[Any, ...]:
        """Non-empty parts (truthy when the trace may hold rows): committed files, pending changes."""
        return (*self.files.values(), *[p for p in self.pending if not p.known_empty])

    def __len__(self) -> int:
        return len(self.batches)

    def pending_local(self) -> pl.DataFrame | None:
        """The pending changes as one Polars frame, or None if one of them is on Spark."""
        pending, done = self.pending, None
        memo = self.memo[0] if self.memo else None
        if (
            memo is not None
            and len(memo[0]) <= len(pending)
            and all(a is b for a, b in zip(memo[0], pending, strict=False))
        ):
            done, pending = memo[1], pending[len(memo[0]) :]
            if not pending:
                return done
        frames = [] if done is None else [done]
        for p in pending:
            if p.known_empty:
                continue
            if p._df is not None or p.local is None:
                return None
            frames.append(p.local.df)
        cols = [*self.schema, *self.sums]
        if not frames:
            out = pl.DataFrame(schema=pl.Schema([*self.schema.items(), *self.sums.items()]))
        elif len(frames) == 1 and frames[0].columns == cols:
            out = frames[0]
        else:
            out = pl.concat([pick(f, cols) for f in frames], how="vertical")
        if self.memo is not None:
            self.memo[:] = [(self.pending, out)]
        return out

    def seek_local(self, probe: pl.DataFrame, exact: bool) -> pl.DataFrame | None:
        """The rows (with weights, not consolidated across parts) whose key is one of the probe's, in the
        driver; None when a pending change is on Spark."""
        pend = self.pending_local()
        if pend is None:
            return None
        parts = []
        if self.layout is not None and self.files:
            parts.append(self.layout.seek(self.files, probe, exact, consolidate=False))
        if pend.height:
            keys = list(self.keys)
            pk = pick(probe, keys)
            if not exact:
                pk = drop_null_rows(pk)
            have, want = pk.schema, pend.schema
            if any(have[k] != want[k] for k in keys):  # (a semi-join needs no unique probe)
                pk = pk.cast({k: want[k] for k in keys}, strict=False)
            parts.append(semi_join(pend, pk, keys, exact))
        cols = [*self.schema, *self.sums]
        if not parts:
            return pend.clear()
        if len(parts) == 1:
            return pick(parts[0], cols)
        return pl.concat([pick(p, cols) for p in parts], how="vertical")

    def scan_local(self) -> ZSet | None:
        """The whole trace read in the driver (a view's contents), or None if not possible here."""
        pend = self.pending_local()
        if pend is None:
            return None
        parts = [pend]
        if self.layout is not None and self.files:
            parts.insert(0, self.layout.scan(self.files).select([*self.schema, WEIGHT]))
        return ZSet(pl.concat(parts, how="vertical")).consolidate()

    def run_paths(self) -> list[str]:
        if self.layout is None:
            return []
        layout = self.layout
        return [layout.path(r) for _, e in sorted(self.files.items()) for r in e.runs()]


class SparkBucketTrace:
    """The mutable trace behind an integral on the spark engine (the `Trace` protocol)."""

    def __init__(self, kernel: SparkKernel, layout: BucketLayout, scratch: bool = False) -> None:
        self.kernel = kernel
        self.layout = layout
        # a scratch trace (`SparkKernel.scratch`) holds one step's changes as pending parts, read by the
        # same seeks; it is never flushed, written or checkpointed
        self.scratch = scratch
        self.schema = layout.schema
        self.keys = layout.keys
        self.files: dict[int, BucketEntry] = {}
        self.pending: list[SparkZSet] = []
        self.issued: list[BucketSnap] = []
        self.replaced: list[str] = []  # runs this step's writes replaced
        self.writes = 0  # writes of this trace in this step so far (they name their runs apart)
        # runs replaced by the previous committed step: deleted when the next one commits, so a value
        # read from the trace between two steps (a view, `.frame`) stays readable through one more step
        self.retired: list[str] = []
        self.pinned: set[str] = set()  # the runs of the last checkpointed version: never deleted here
        self.memo: list[Any] = []  # `BucketSnap.memo`

    @property
    def batches(self) -> tuple[Any, ...]:
        return self.snapshot().batches

    def snapshot(self) -> BucketSnap:
        s = BucketSnap(self.layout, self.files, tuple(self.pending), self.schema, self.keys, self.memo)
        if self.pending:
            self.issued.append(s)
        return s

    def add(self, z: SparkZSet, undo: list) -> None:
        """Record a change of this step (written by the step's flush). Written at once instead:
        - a change on Spark, when the step already has `kernel.fused_traces` traces pending on Spark:
          one action per step over many traces would be one plan holding every one of their lineages;
        - a change held in the driver of at least `kernel.write_rows` rows (with the trace's other
          pending changes, if they are all in the driver): a load would otherwise hold every trace's
          rows in the driver's memory until the step's end (the TPC-H SF 0.1 load of 22 views, 2.5 GB
          of state, peaked at 3.5 GB of the driver's memory)."""
        if z.known_empty:
            return
        if self.scratch and self._compact(z, undo):
            return
        n = len(self.pending)
        self.pending.append(z)
        undo.append(lambda: self.pending.__delitem__(slice(n, None)))
        self._checkpoint_spark_parts(undo)  # (the parts on Spark: unchanged by a change in the driver)
        if self.scratch:
            return
        if z._df is not None:
            if self.kernel.spark_pending() > self.kernel.fused_traces:
                self.kernel.flush_traces([self.kernel.traces.index(self)], undo)
        elif z.local is not None and len(z.local) >= self.kernel.write_rows:
            self.flush_local(self.kernel.step_no, undo)

    def _compact(self, z: SparkZSet, undo: list) -> bool:
        """A scratch trace whose changes are all held in the driver keeps them as one part (a recursive
        scope adds one per iteration, and each seek would otherwise concatenate them all anew)."""
        if z._df is not None or z.local is None or not self.pending or self.layout.sums != (WEIGHT,):
            return False
        if any(p._df is not None or p.local is None for p in self.pending):
            return False
        cols = [*self.schema, *self.layout.sums]
        frames = [pick(p.local.df, cols) for p in self.pending if p.local is not None]
        merged = ZSet(pl.concat([*frames, pick(z.local.df, cols)], how="vertical"))
        before = list(self.pending)
        self.pending[:] = [type(z)(z._session, z.schema, local=merged, keys=z.keys)]
        undo.append(lambda: self.pending.__setitem__(slice(None), before))
        return True

    def _checkpoint_spark_parts(self, undo: list) -> None:
        """A trace whose pending parts on Spark hold more than half the kernel's `max_lineage` copies
        of their leaves keeps them as one computed part (one job): a recursive scope on the cluster
        adds a part per iteration, and each seek of the union would otherwise cut (compute) a plan
        holding every iteration's so far, again at every later iteration. Scratch traces and the
        state's traces alike: delete-and-rederive's integrals on the cluster took 4, 5, 6, ... Spark
        jobs an iteration to seek when their parts were held apart (reachability's 1,000 edges loaded
        in 53 s then, 30 s now; a step of 300 changes at 3,000 edges 92 s then, 49 s now; 18k edges
        ran the driver out of memory then and load in 41 s now)."""
        on_spark = [p for p in self.pending if p._df is not None]
        if len(on_spark) < 2 or sum(p.lineage for p in on_spark) <= self.kernel.max_lineage // 2:
            return
        df = parts_frame(on_spark, [*self.schema, *self.layout.sums])
        z = on_spark[-1]
        merged = type(z)(z._session, z.schema, df=self.kernel.computed(df), keys=z.keys)
        before = list(self.pending)
        self.pending[:] = [p for p in self.pending if p._df is None] + [merged]
        undo.append(lambda: self.pending.__setitem__(slice(None), before))

    # ---- the end of a step ------------------------------------------------------------------------
    def flush_local(self, step: int, undo: list) -> bool:
        """Write the pending changes in the driver if they are all held there; True if done (or none)."""
        if not self.pending:
            return True
        local = BucketSnap(
            self.layout, self.files, tuple(self.pending), self.schema, self.keys
        ).pending_local()
        if local is None:
            return False
        written = self.layout.apply_shared(self.files, local, step, self.writes)
        faults.point("merge")  # (the driver only: a point in `apply_bucket` would kill Spark's workers)
        self.adopt(written, undo)
        return True

    def write_plan(self, step: int, tag: int, output: str | None) -> Any:
        """The Spark plan that writes the pending changes: rows exchanged by bucket, each task applying
        its buckets' part (`BucketLayout.apply`) and returning the new entries, tagged `tag`. With
        `output` (a view's change log directory) each task also writes the rows it received there as
        `part-<partition>.parquet` and returns its name as an entry of bucket -1."""
        from pyspark.sql import functions as F
        from pyspark.sql import types as T

        from dbspark.engines.spark.convert import map_in_arrow, spark_schema

        df = parts_frame(self.pending, [*self.schema, *self.layout.sums])
        assert df is not None
        layout, files, write = self.layout, dict(self.files), self.writes
        with_bucket = spark_schema(self.layout.frame_schema, weight=False)
        with_bucket.add(T.StructField(BUCKET, T.IntegerType(), False))
        parts = max(1, min(layout.n_buckets, self.kernel.write_partitions))
        bucketed = map_in_arrow(df, lambda it: _bucketed(it, layout), with_bucket).repartition(parts, BUCKET)
        return map_in_arrow(
            bucketed, lambda it: _apply(it, layout, files, step, write, output), _entries_schema()
        ).withColumn("trace", F.lit(tag))

    def adopt(self, new: dict[int, BucketEntry], undo: list) -> None:
        """Make the runs written for this step the trace's files (snapshots of the step follow).

        Rolled back, the trace gets its files back and no pending change: a step starts with none, and
        each `add` of the step rolls its own entry back. The changes themselves are not kept for the
        rollback (they may be large: `add` writes large ones early to free them), so a snapshot issued
        during a rolled-back step is dropped with the step's values, not restored."""
        old_files, old_replaced, issued = self.files, self.replaced, self.issued
        written = tuple(self.pending)
        self.files = updated(old_files, new)
        self.replaced = [*old_replaced, *garbage(old_files, self.files)]
        self.pending, self.issued = [], []
        self.memo.clear()
        self.writes += 1
        for s in issued:
            # only a snapshot of all that was written now names the new files; one issued before the
            # last changes (a recursive scope's z^-1 of an integral, taken an iteration earlier) keeps
            # its files and pending parts, which stay readable until the next step commits
            if len(s.pending) == len(written) and all(
                a is b for a, b in zip(s.pending, written, strict=True)
            ):
                s.files, s.pending = self.files, ()

        def back() -> None:
            self.files, self.pending, self.issued, self.replaced = old_files, [], [], old_replaced
            self.writes -= 1

        undo.append(back)

    def clear(self, undo: list) -> None:
        """Hold nothing: the runs are deleted when the step after this one commits (`collect`)."""
        old = self.files, self.pending, self.issued, self.replaced
        self.replaced = [*self.replaced, *garbage(self.files, {})]
        self.files, self.pending, self.issued = {}, [], []
        self.memo.clear()

        def back() -> None:
            self.files, self.pending, self.issued, self.replaced = old
            self.memo.clear()

        undo.append(back)

    def dropped(self, below: Sequence[tuple[str, Any]], step: int) -> dict[int, BucketEntry]:
        """The entries of the buckets that change when the rows below `below` are dropped, written in
        this process (`BucketLayout.drop_bucket`)."""
        assert not self.pending, "state is collected after its step's flush"
        new = {b: self.layout.drop_bucket(e, below, b, step, self.writes) for b, e in self.files.items()}
        return {b: e for b, e in new.items() if e != self.files[b]}

    def rows(self) -> int:
        """The entries in the trace's files and pending changes held in the driver."""
        pending = sum(len(p.local) for p in self.pending if p._df is None and p.local is not None)
        return sum(e.n_rows for e in self.files.values()) + pending

    def nbytes(self) -> int | None:
        """The bytes of the trace's files (None when they are not on this machine's file system) and of
        the pending changes held in the driver."""
        root = self.layout.root
        if "://" in root:
            return None
        held = sum(p.local.df.estimated_size() for p in self.pending if p._df is None and p.local is not None)
        files = (self.layout.path(r) for e in self.files.values() for r in e.runs())
        return int(held) + sum(os.path.getsize(f) for f in files if os.path.exists(f))

    def collect(self) -> None:
        """The step committed: delete the runs the previous step replaced; retire this step's."""
        self.layout.remove([r for r in self.retired if r not in self.pinned])
        self.retired, self.replaced, self.writes = self.replaced, [], 0

    def sweep(self) -> None:
        """After a restart: delete runs that no committed version refers to (uncommitted steps)."""
        self.layout.remove(self.layout.sweep([self.files]))

    # ---- checkpoints ------------------------------------------------------------------------------
    def to_state(self) -> Any:
        if self.scratch:
            raise TypeError("a scratch trace holds one step's changes and is never checkpointed")
        assert not self.pending, "a trace is saved after its step's flush"
        self.pinned = {r for e in self.files.values() for r in e.runs()}  # restorable while it is the last
        return {
            "name": self.layout.name,
            "root": self.layout.root,
            "n_buckets": self.layout.n_buckets,
            "files": {str(b): e.to_json() for b, e in sorted(self.files.items())},
        }

    def restore(self, saved: Any) -> None:
        """Take the saved version of this trace: its files, and its name (a trace is named by its owner
        and a suffix of its own, `SparkKernel.bucket_trace`: the saved one must be of the same owner)."""
        name = str(saved.get("name"))
        if saved.get("n_buckets") != self.layout.n_buckets or owner_of(name) != owner_of(self.layout.name):
            raise ValueError(
                f"state {self.layout.name!r}: the checkpoint holds {saved.get('name')!r} with "
                f"{saved.get('n_buckets')} buckets"
            )
        if name != self.layout.name:
            self.layout = dataclasses.replace(self.layout, name=name)
        self.files = {int(b): BucketEntry.from_json(v) for b, v in saved["files"].items()}
        self.pending, self.issued, self.writes = [], [], 0
        self.memo.clear()
        # runs retired by steps after the checkpoint may be the restored version's: none is deleted
        # (unreferenced runs are swept when a pipeline reopens its directory)
        self.replaced, self.retired = [], []
        root = saved.get("root", self.layout.root)
        if root != self.layout.root:  # a checkpoint of another runtime's state: its files stay there
            self.layout = dataclasses.replace(self.layout, root=root)
        for r in (r for e in self.files.values() for r in e.runs()):
            path = self.layout.path(r)
            if "://" not in path and not os.path.exists(path):
                raise CheckpointError(f"state {self.layout.name!r}: its file {path} is missing")


def owner_of(name: str) -> str:
    """The owner part of a trace's name (`SparkKernel.bucket_trace`: owner, a dot, a unique suffix)."""
    return name.rsplit(".", 1)[0] if "." in name else ""


# ---- what runs in Spark's Python workers -----------------------------------------------------------
def parts_frame(parts: Sequence[SparkZSet], cols: Sequence[str]) -> Any:
    """The union on Spark of the parts' `cols` (parts known empty left out), or None if none is left."""
    from dbspark.engines.spark.convert import col_list

    df = None
    for p in parts:
        if not p.known_empty:
            f = p.frame.select(*col_list(cols))
            df = f if df is None else df.unionByName(f)
    return df


def _frames(it: Iterator[pa.RecordBatch]) -> Iterator[pl.DataFrame]:
    for b in it:
        if b.num_rows:
            df = pl.from_arrow(b)
            assert isinstance(df, pl.DataFrame)
            yield df


def _bucketed(it: Iterator[pa.RecordBatch], layout: BucketLayout) -> Iterator[pa.RecordBatch]:
    import numpy as np

    for df in _frames(it):
        b = layout.bucket_ids(df.select([pl.col(k).cast(layout.schema[k]) for k in layout.keys]))
        t = df.to_arrow().append_column(BUCKET, pa.array(np.asarray(b, dtype=np.int32)))
        yield from t.to_batches()


def _apply(
    it: Iterator[pa.RecordBatch],
    layout: BucketLayout,
    files: dict[int, BucketEntry],
    step: int,
    write: int,
    output: str | None,
) -> Iterator[pa.RecordBatch]:
    frames = [df.drop(BUCKET) for df in _frames(it)]
    if not frames:
        return
    change = pl.concat(frames, how="vertical")
    out = entries_frame(layout.apply(files, change, step, write))
    _fault_point(layout.root)
    if output is not None:
        import os
        import uuid

        from pyspark import TaskContext

        from dbspark.engines.spark.convert import to_arrow

        ctx = TaskContext.get()
        pid = ctx.partitionId() if ctx is not None else 0
        os.makedirs(output, exist_ok=True)
        path = os.path.join(output, f"part-{pid:05d}.parquet")
        tmp = f"{path}.{uuid.uuid4().hex}.tmp"
        import pyarrow.parquet as pq

        pq.write_table(to_arrow(change), tmp)
        os.replace(tmp, path)
        out = pl.concat([out, entries_frame({-1: BucketEntry((path,), (change.height,))})], how="vertical")
    yield from out.to_arrow().to_batches()


def drop_plan(
    drops: Sequence[tuple[SparkBucketTrace, list[tuple[str, Any]]]], step: int, partitions: int
) -> Any:
    """The Spark plan that drops rows below bounds from several traces (after the step's flush: no
    change pending): a task per group of (trace, bucket) pairs rewrites their runs that hold such rows
    (`BucketLayout.drop_bucket`) and returns the new entries, tagged with the trace's index in `drops`;
    None if no trace has files."""
    from pyspark.sql import types as T

    from dbspark.engines.spark.convert import map_in_arrow

    assert all(not t.pending for t, _ in drops), "state is collected after its step's flush"
    work = [(i, b) for i, (t, _) in enumerate(drops) for b in sorted(t.files)]
    if not work:
        return None
    what = [(t.layout, dict(t.files), below, t.writes) for t, below in drops]
    spark = drops[0][0].kernel.spark
    ids = spark.createDataFrame(work, "trace int, bucket int").repartition(max(1, min(len(work), partitions)))
    schema = _entries_schema().add("trace", T.IntegerType())
    return map_in_arrow(ids, lambda it: _drop(it, what, step), schema)


def _drop(
    it: Iterator[pa.RecordBatch],
    what: list[tuple[BucketLayout, dict[int, BucketEntry], list[tuple[str, Any]], int]],
    step: int,
) -> Iterator[pa.RecordBatch]:
    for df in _frames(it):
        for i, b in df.select(["trace", "bucket"]).iter_rows():
            layout, files, below, write = what[i]
            entry = layout.drop_bucket(files[b], below, b, step, write)
            if entry != files[b]:
                out = entries_frame({b: entry}).with_columns(pl.lit(i, pl.Int32).alias("trace"))
                yield from out.to_arrow().to_batches()


KILL_TASK_ONCE = "kill-task-once"
KILL_EXECUTOR_ONCE = "kill-executor-once"


def _fault_point(root: str) -> None:
    """Fault injection for tests: if `<state>/kill-task-once` exists, the first task to claim it (an
    atomic rename) kills its Python worker after writing its runs and before returning them, as a
    crashed executor would; Spark retries the task, which writes the same files again. With
    `kill-executor-once` it SIGKILLs its executor's JVM too (on a cluster: the executor is lost, and
    its tasks run again on another)."""
    import os
    import signal

    for name in (KILL_TASK_ONCE, KILL_EXECUTOR_ONCE):
        trigger = os.path.join(root, name)
        if not os.path.exists(trigger):
            continue
        try:
            os.rename(trigger, trigger + ".taken")
        except OSError:
            return  # another task claimed it
        if name == KILL_EXECUTOR_ONCE:
            executor = _executor_pid()
            if executor is not None:
                os.kill(executor, signal.SIGKILL)
        os._exit(1)


def _executor_pid() -> int | None:
    """The pid of the executor JVM this Python worker runs under (an ancestor), if it is one."""
    pid = os.getppid()
    while pid > 1:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"CoarseGrainedExecutorBackend" in f.read():
                    return pid
            with open(f"/proc/{pid}/status") as f:
                pid = next(int(line.split()[1]) for line in f if line.startswith("PPid:"))
        except (OSError, StopIteration, ValueError):
            return None
    return None


def seek_rows(
    it: Iterator[pa.RecordBatch],
    layout: BucketLayout,
    files: dict[int, BucketEntry],
    probe_cols: Sequence[tuple[str, str]],
    exact: bool,
) -> Iterator[pa.RecordBatch]:
    """The trace's committed rows at the keys of each batch (`probe_cols`: (batch column, key)), with
    their weights, in the trace's columns (a task's seek: reads only those keys' pages)."""
    from dbspark.engines.spark.convert import to_arrow

    for df in _frames(it):
        probe = df.select([pl.col(c).alias(k) for c, k in probe_cols]).unique()
        rows = layout.seek(files, probe, exact)
        if rows.height:
            yield from to_arrow(rows.select(list(layout.frame_schema))).to_batches()


def read_runs(it: Iterator[pa.RecordBatch], schema: pl.Schema) -> Iterator[pa.RecordBatch]:
    """The rows of the run files named in the batches' `path` column (data columns and the weight)."""
    from dbspark.engines.spark.convert import to_arrow
    from dbspark.trace.bucket_files import HASH, read_run

    for b in it:
        for path in b.column("path").to_pylist():
            df = read_run(path).drop(HASH)
            if df.height:
                yield from to_arrow(df.select([*schema, WEIGHT])).to_batches()
