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
the next step then names the committed files), and rolled back with it. See `docs/engine-state.md`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import polars as pl
import pyarrow as pa

from dbspark.algebra.zset import WEIGHT, ZSet
from dbspark.trace.bucketed import (
    BucketEntry,
    BucketLayout,
    entries_frame,
    entries_from_frame,
    garbage,
    updated,
)

if TYPE_CHECKING:
    from dbspark.engines.spark.kernel import SparkKernel
    from dbspark.engines.spark.values import SparkZSet

BUCKET = "__b"


class BucketSnap:
    """A trace at one point of a step: committed `files` plus this step's `pending` changes."""

    __slots__ = ("layout", "files", "pending", "schema", "keys")

    def __init__(
        self,
        layout: BucketLayout | None,
        files: dict[int, BucketEntry],
        pending: tuple[SparkZSet, ...],
        schema: pl.Schema,
        keys: tuple[str, ...],
    ) -> None:
        self.layout = layout
        self.files = files
        self.pending = pending
        self.schema = schema  # the data columns
        self.keys = keys

    @property
    def batches(self) -> tuple[Any, ...]:
        """Non-empty parts (truthy when the trace may hold rows): committed files, pending changes."""
        return (*self.files.values(), *[p for p in self.pending if not p.known_empty])

    def __len__(self) -> int:
        return len(self.batches)

    def pending_local(self) -> pl.DataFrame | None:
        """The pending changes as one Polars frame, or None if one of them is on Spark."""
        frames = []
        for p in self.pending:
            if p.known_empty:
                continue
            if p._df is not None or p.local is None:
                return None
            frames.append(p.local.df)
        cols = [*self.schema, WEIGHT]
        if not frames:
            return pl.DataFrame(schema=pl.Schema([*self.schema.items(), (WEIGHT, pl.Int64())]))
        return pl.concat([f.select(cols) for f in frames], how="vertical")

    def seek_local(self, probe: pl.DataFrame, exact: bool) -> pl.DataFrame | None:
        """The rows (with weights, not consolidated across parts) whose key is one of the probe's, in the
        driver; None when a pending change is on Spark."""
        pend = self.pending_local()
        if pend is None:
            return None
        parts = []
        if self.layout is not None and self.files:
            parts.append(self.layout.seek(self.files, probe, exact))
        if pend.height:
            keys = list(self.keys)
            pk = probe.select(keys)
            if not exact:
                pk = pk.drop_nulls()
            parts.append(
                pend.join(
                    pk.unique().cast({k: pend.schema[k] for k in keys}, strict=False),
                    on=keys,
                    how="semi",
                    nulls_equal=exact,
                )
            )
        cols = [*self.schema, WEIGHT]
        if not parts:
            return pend.clear()
        return pl.concat([p.select(cols) for p in parts], how="vertical")

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

    def __init__(self, kernel: SparkKernel, layout: BucketLayout) -> None:
        self.kernel = kernel
        self.layout = layout
        self.schema = layout.schema
        self.keys = layout.keys
        self.files: dict[int, BucketEntry] = {}
        self.pending: list[SparkZSet] = []
        self.issued: list[BucketSnap] = []
        self.replaced: list[str] = []  # runs the last flush replaced: deleted when the step commits

    @property
    def batches(self) -> tuple[Any, ...]:
        return self.snapshot().batches

    def snapshot(self) -> BucketSnap:
        s = BucketSnap(self.layout, self.files, tuple(self.pending), self.schema, self.keys)
        if self.pending:
            self.issued.append(s)
        return s

    def add(self, z: SparkZSet, undo: list) -> None:
        if z.known_empty:
            return
        self.pending.append(z)
        undo.append(lambda: self.pending.pop())

    # ---- the end of a step ------------------------------------------------------------------------
    def flush(self, step: int, undo: list) -> None:
        """Write this step's pending changes as new runs (in the driver when all are local)."""
        if not self.pending:
            return
        snap = BucketSnap(self.layout, self.files, tuple(self.pending), self.schema, self.keys)
        local = snap.pending_local()
        if local is not None:
            new = self.layout.apply(self.files, local, step)
        else:
            new = self.kernel.act(lambda: self._apply_on_spark(step))
        old_files, old_pending, issued = self.files, self.pending, self.issued
        self.files = updated(old_files, new)
        self.replaced = garbage(old_files, self.files)
        self.pending, self.issued = [], []
        for s in issued:
            s.files, s.pending = self.files, ()

        def back() -> None:
            self.files, self.pending, self.issued, self.replaced = old_files, old_pending, issued, []
            for s in issued:
                s.files, s.pending = old_files, tuple(old_pending)

        undo.append(back)

    def _apply_on_spark(self, step: int) -> dict[int, BucketEntry]:
        from dbspark.engines.spark.convert import spark_schema

        k = self.kernel
        cols = [*self.schema, WEIGHT]
        df = None
        for p in self.pending:
            if p.known_empty:
                continue
            f = p.frame.select(*cols)
            df = f if df is None else df.unionByName(f)
        if df is None:
            return {}
        layout, files = self.layout, dict(self.files)
        with_bucket = spark_schema(self.schema)
        from pyspark.sql import types as T

        with_bucket.add(T.StructField(BUCKET, T.IntegerType(), False))
        parts = max(1, min(layout.n_buckets, k.write_partitions))
        entries_schema = T.StructType(
            [
                T.StructField("bucket", T.IntegerType()),
                T.StructField("base", T.StringType()),
                T.StructField("mid", T.StringType()),
                T.StructField("base_rows", T.LongType()),
                T.StructField("mid_rows", T.LongType()),
            ]
        )
        written = (
            df.mapInArrow(lambda it: _bucketed(it, layout), with_bucket)
            .repartition(parts, BUCKET)
            .mapInArrow(lambda it: _apply(it, layout, files, step), entries_schema)
        )
        return entries_from_frame(pl.from_arrow(written.toArrow()))  # type: ignore[arg-type]

    def collect(self) -> None:
        """The step committed: delete the runs its flush replaced."""
        self.layout.remove(self.replaced)
        self.replaced = []

    def sweep(self) -> None:
        """After a restart: delete runs that no committed version refers to (uncommitted steps)."""
        self.layout.remove(self.layout.sweep([self.files]))

    # ---- checkpoints ------------------------------------------------------------------------------
    def to_state(self) -> Any:
        assert not self.pending, "a trace is saved after its step's flush"
        return {
            "name": self.layout.name,
            "n_buckets": self.layout.n_buckets,
            "files": {str(b): e.to_json() for b, e in sorted(self.files.items())},
        }

    def restore(self, saved: Any) -> None:
        if saved.get("n_buckets") != self.layout.n_buckets or saved.get("name") != self.layout.name:
            raise ValueError(
                f"state {self.layout.name!r}: the checkpoint holds {saved.get('name')!r} with "
                f"{saved.get('n_buckets')} buckets"
            )
        self.files = {int(b): BucketEntry.from_json(v) for b, v in saved["files"].items()}
        self.pending, self.issued = [], []


# ---- what runs in Spark's Python workers -----------------------------------------------------------
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
    it: Iterator[pa.RecordBatch], layout: BucketLayout, files: dict[int, BucketEntry], step: int
) -> Iterator[pa.RecordBatch]:
    frames = [df.drop(BUCKET) for df in _frames(it)]
    if frames:
        change = pl.concat(frames, how="vertical")
        yield from entries_frame(layout.apply(files, change, step)).to_arrow().to_batches()


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
            yield from to_arrow(rows.select([*layout.schema, WEIGHT])).to_batches()


def read_runs(it: Iterator[pa.RecordBatch], schema: pl.Schema) -> Iterator[pa.RecordBatch]:
    """The rows of the run files named in the batches' `path` column (data columns and the weight)."""
    from dbspark.engines.spark.convert import to_arrow
    from dbspark.trace.bucket_files import HASH, read_run

    for b in it:
        for path in b.column("path").to_pylist():
            df = read_run(path).drop(HASH)
            if df.height:
                yield from to_arrow(df.select([*schema, WEIGHT])).to_batches()
