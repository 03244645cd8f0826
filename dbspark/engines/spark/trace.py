"""Traces on Spark: an LSM of consolidated Parquet batches on disk, appended each step, merged geometrically.

A step appends its change as a new level-0 batch (one Spark write, never a rewrite of the state); when
`FANOUT` batches of one level accumulate they are merged (read, consolidated, written) into one batch
of the next level, so a row is rewritten O(log_FANOUT(steps)) times and a snapshot has at most
FANOUT·levels batches. Batches are immutable files, so a snapshot (the integral at one step) is just
the tuple of its batches: z^-1 of a trace is the previous snapshot, free. Files replaced by a merge
are deleted when the step that merged them commits (`Storage.collect`), not before: a step that fails
is undone by restoring the batch list, and the old files are still there.

Lookups go through the keys of a change (a join of the batches with the change's keys); the batches
are written sorted by key within their partitions.
"""

from __future__ import annotations

import math
import re
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from dbspark.algebra.zset import WEIGHT

if TYPE_CHECKING:
    from dbspark.engines.spark.kernel import SparkKernel

FANOUT = 8


@dataclass(frozen=True)
class Batch:
    path: str
    level: int  # merges it went through
    owned: bool = True  # False: the file belongs to someone else (an output log); a merge leaves it be
    rows: int | None = None  # from the Parquet footers, when the file is local

    @property
    def tier(self) -> int:
        """Its size class: log_FANOUT(rows) when known (size-tiered), else its merge level."""
        return self.level if self.rows is None else int(math.log(max(self.rows, 1), FANOUT))


def parquet_rows(path: str) -> int | None:
    """The rows of a Spark-written Parquet directory, from its footers (no Spark job); None if remote."""
    from dbspark.engines.spark.convert import _local_dir

    d = _local_dir(path)
    if d is None:
        return None
    import pyarrow.parquet as pq

    return sum(pq.read_metadata(f).num_rows for f in Path(d).glob("*.parquet"))


class Storage:
    """Where an engine's state files live, with the step number that names new files."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        (self.root / "traces").mkdir(parents=True, exist_ok=True)
        self.step = 0
        self.garbage: list[str] = []

    def new_path(self, kind: str = "traces") -> str:
        return str(self.root / kind / f"s{self.step:08d}-{uuid.uuid4().hex[:12]}")

    def collect(self) -> None:
        """Delete the files a committed step replaced."""
        for p in self.garbage:
            shutil.rmtree(p, ignore_errors=True)
        self.garbage = []

    def sweep_uncommitted(self, committed_steps: int) -> None:
        """After a restart: delete files written by steps that never committed (step >= committed), the
        state files (`s<step>-...`) and the outputs' change logs (`outputs/<view>/step-<step>`)."""
        dirs = [self.root / "traces", self.root / "held"]
        if (self.root / "outputs").exists():
            dirs += [d for d in (self.root / "outputs").iterdir() if d.is_dir()]
        for d in dirs:
            if not d.exists():
                continue
            for p in d.iterdir():
                m = re.match(r"(?:s|step-)(\d{8})", p.name)
                if m and int(m.group(1)) >= committed_steps:
                    shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)


@dataclass(frozen=True)
class SparkSnapshot:
    """The integral at one step: immutable batches. `sums` are the columns added on consolidation."""

    batches: tuple[Batch, ...]
    keys: tuple[str, ...]
    schema: pl.Schema  # data columns (without the sum columns)
    sums: tuple[str, ...] = (WEIGHT,)

    def __len__(self) -> int:  # the number of batches; emptiness without a Spark action
        return len(self.batches)

    def frame(self, spark: Any, sum_types: dict[str, Any] | None = None) -> Any:
        """All batches as one DataFrame (not consolidated across batches)."""
        from pyspark.sql import types as T

        from dbspark.engines.spark.convert import spark_schema

        schema = spark_schema(self.schema, weight=False)
        for s in self.sums:
            schema.add(T.StructField(s, (sum_types or {}).get(s, T.LongType()), True))
        if not self.batches:
            return spark.createDataFrame([], schema)
        return spark.read.schema(schema).parquet(*[b.path for b in self.batches])


class SparkTrace:
    """The mutable trace behind one integral (an operator's state)."""

    def __init__(
        self,
        kernel: SparkKernel,
        schema: pl.Schema,
        keys: tuple[str, ...],
        sums: tuple[str, ...] = (WEIGHT,),
        sum_types: dict[str, Any] | None = None,
    ) -> None:
        self.kernel = kernel
        self.schema = schema
        self.keys = tuple(keys)
        self.sums = sums
        self.sum_types = sum_types or {}
        self.batches: list[Batch] = []

    def snapshot(self) -> SparkSnapshot:
        return SparkSnapshot(tuple(self.batches), self.keys, self.schema, self.sums)

    def append(self, df: Any, undo: list, consolidated: bool = False) -> str:
        """Write `df` (a change of this trace) as a level-0 batch; merge full levels. Returns its path."""
        path = self.kernel.storage.new_path()
        if not consolidated:
            df = self.consolidate(df)
        self.kernel.write(self.sort(df), path)
        return self.add(Batch(path, 0, rows=parquet_rows(path)), undo).path

    def add(self, batch: Batch, undo: list) -> Batch:
        saved = list(self.batches)
        undo.append(lambda: setattr(self, "batches", saved))
        self.batches.append(batch)
        self._merge(undo)
        return batch

    def consolidate(self, df: Any) -> Any:
        from pyspark.sql import functions as F

        data = [c for c in df.columns if c not in self.sums]
        out = df.groupBy(*data).agg(*[F.sum(s).alias(s) for s in self.sums])
        nonzero = F.lit(False)
        for s in self.sums:
            nonzero = nonzero | (F.col(s) != 0)
        return out.filter(nonzero)

    def sort(self, df: Any) -> Any:
        return df.sortWithinPartitions(*self.keys) if self.keys else df

    def _merge(self, undo: list) -> None:
        """Size-tiered merges: while the trailing FANOUT batches are all of the last one's size class
        or smaller, merge them into one. A large batch (e.g. an initial load) is thus rewritten only
        when FANOUT batches of its size have accumulated, and a snapshot has O(FANOUT·log(rows))
        batches."""
        storage = self.kernel.storage
        while len(self.batches) >= FANOUT:
            run = self.batches[-FANOUT:]
            top = run[-1].tier
            if any(b.tier > top for b in run) and len(self.batches) < 4 * FANOUT:
                return
            merged = SparkSnapshot(tuple(run), self.keys, self.schema, self.sums).frame(
                self.kernel.spark, self.sum_types
            )
            path = storage.new_path()
            sizes = [b.rows for b in run]
            rows = None if None in sizes else sum(b or 0 for b in sizes)  # its shuffle's partitions
            self.kernel.write(self.sort(self.consolidate(merged)), path, rows)
            n = len(storage.garbage)
            undo.append(lambda n=n: storage.garbage.__delitem__(slice(n, None)))
            storage.garbage.extend(b.path for b in run if b.owned)
            level = max(b.level for b in run) + 1
            self.batches = [*self.batches[:-FANOUT], Batch(path, level, rows=parquet_rows(path))]

    # ---- checkpoints: the state is the list of files ----------------------------------------------
    def to_state(self) -> Any:
        return [(b.path, b.level, b.owned, b.rows) for b in self.batches]

    def restore(self, saved: Any) -> None:
        self.batches = [Batch(*b) for b in saved]
