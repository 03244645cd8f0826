"""A trace stored as hash buckets of sorted Arrow runs in a directory: executor-side state.

A stateful operator's state (a join side's integral by its key, an aggregate's accumulators by group)
is split into `n_buckets` buckets by a stable hash of its key columns (`algebra/keyhash.py`), so the
same bucket holds the same keys in every process. A bucket at a version is a list of immutable runs
(`bucket_files.py`), oldest and largest first, each consolidated and sorted by the key hash. The
version itself is a small JSON-able map `BucketFiles` (bucket → `BucketEntry`); the files are named by
(operator, bucket, step, level).

- `seek` reads only the buckets of the probe's keys, and in them only the pages of the matching rows
  (binary search on the memory-mapped hash column of each run): O(runs · |probe| log n + matches).
- `apply` adds, for each bucket the change touches, the change's part as a new run, first merged with
  the bucket's newest runs while they are at most `growth` times its size (a log-structured merge with
  geometric levels, as a binary counter carries): the runs' sizes grow geometrically from newest to
  oldest, so a bucket has O(log_growth(n / |change|)) runs, a step writes O(|change|) rows amortized,
  and each row is rewritten O(log n) times over its life. No step rewrites the state, but the step
  whose carry reaches a bucket's oldest run merges into it (rare: after as many changed rows as it
  holds).
- Names are a function of (operator, bucket, step, write of the step, level) and contents a function
  of the inputs, so a retried or speculative task writes the same files; nothing is modified or
  deleted in place. The caller (the driver) commits a step by recording the new `BucketFiles` (one
  manifest), and deletes afterwards what no committed version refers to (`garbage`, `sweep`).

The same code runs in a worker process (a Spark Python UDF over a partition holding several
buckets: `split`, `apply_partition`) or in the driver (`BucketedTrace`), over the same files.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from dbspark.algebra.consolidate import consolidate_frame, sorted_unique
from dbspark.algebra.keyhash import bucket_of, one_to_one, stable_hash
from dbspark.algebra.zset import WEIGHT
from dbspark.columnar.plans import all_below, drop_null_rows, pick, semi_join
from dbspark.trace.bucket_files import (
    CACHE,
    HASH,
    Found,
    gather,
    merge_runs,
    read_run,
    seek_run,
    sort_run,
    with_hash,
    write_run,
)

GROWTH = 4
SHARED_ROWS = 65_536
SHARED = -2  # the entry of the runs shared by every bucket (a step's change written by the driver)
SUFFIX = ".arrow"


@dataclass(frozen=True)
class BucketEntry:
    """One bucket at one version: its runs (paths relative to the layout's directory), oldest first,
    and their row counts."""

    paths: tuple[str, ...] = ()
    rows: tuple[int, ...] = ()

    def runs(self) -> tuple[str, ...]:
        return self.paths

    def is_empty(self) -> bool:
        return not self.paths

    @property
    def n_rows(self) -> int:
        return sum(self.rows)

    def to_json(self) -> dict[str, Any]:
        return {"runs": list(self.paths), "rows": list(self.rows)}

    @classmethod
    def from_json(cls, v: Any) -> BucketEntry:
        if isinstance(v, dict):
            return cls(tuple(v["runs"]), tuple(int(n) for n in v["rows"]))
        # a checkpoint written before geometric levels: [base, mid, base_rows, mid_rows]
        pairs = [(v[0], int(v[2])), (v[1], int(v[3]))]
        return cls(tuple(p for p, _ in pairs if p is not None), tuple(n for p, n in pairs if p is not None))


BucketFiles = Mapping[int, BucketEntry]
EMPTY = BucketEntry()


def updated(files: BucketFiles, new: Mapping[int, BucketEntry]) -> dict[int, BucketEntry]:
    """The version after `apply`: `files` with the new entries (empty buckets dropped)."""
    out = {**files, **new}
    return {b: e for b, e in sorted(out.items()) if not e.is_empty()}


def _file_list(files: BucketFiles) -> set[str]:
    return {f for e in files.values() for f in e.runs()}


def garbage(old: BucketFiles, new: BucketFiles) -> list[str]:
    """The runs of `old` that `new` does not refer to: deletable once `new` is committed (or, with the
    roles swapped, what an uncommitted version wrote)."""
    return sorted(_file_list(old) - _file_list(new))


@dataclass(frozen=True)
class BucketLayout:
    """Where and how one operator's state is stored (picklable: ships to worker processes).

    `schema` has the data columns (keys among them), `sums` the summed columns (a Z-set's weight,
    or several accumulators) with `sum_types` (default Int64). A row whose sums are all zero is
    dropped, as in the in-memory spine."""

    root: str
    name: str
    schema: pl.Schema
    keys: tuple[str, ...]
    n_buckets: int
    sums: tuple[str, ...] = (WEIGHT,)
    sum_types: tuple[pl.DataType, ...] = field(default=())
    growth: int = GROWTH
    shared_rows: int = SHARED_ROWS

    def __post_init__(self) -> None:
        object.__setattr__(self, "keys", tuple(self.keys))
        object.__setattr__(self, "sums", tuple(self.sums))
        object.__setattr__(self, "schema", pl.Schema(self.schema))
        if not self.sum_types:
            object.__setattr__(self, "sum_types", tuple(pl.Int64() for _ in self.sums))
        if len(self.sum_types) != len(self.sums):
            raise ValueError(
                f"state {self.name!r}: {len(self.sums)} sums but {len(self.sum_types)} sum types"
            )
        for k in self.keys:
            if k not in self.schema:
                raise ValueError(
                    f"state {self.name!r}: key column {k!r} is not in its schema {list(self.schema)}"
                )
        for c in (*self.schema, *self.sums):
            if c == HASH or (c in self.sums and c in self.schema):
                raise ValueError(f"state {self.name!r}: column {c!r} is reserved or both data and sum")
        for c, t in self.schema.items():
            if isinstance(t, pl.Categorical):
                raise TypeError(
                    f"state {self.name!r}: column {c!r} is Categorical, whose files would depend "
                    "on the process's categories; store it as String"
                )
        if self.shared_rows < 0:
            raise ValueError(f"state {self.name!r}: shared_rows {self.shared_rows} is negative")
        if self.growth < 1:
            raise ValueError(f"state {self.name!r}: growth {self.growth} is not positive")
        if not 0 < self.n_buckets < (1 << 31):
            raise ValueError(f"state {self.name!r}: bucket count {self.n_buckets} out of range")

    # ---- names and shapes -----------------------------------------------------------------------
    @property
    def directory(self) -> str:
        return os.path.join(self.root, self.name)

    @property
    def data_cols(self) -> list[str]:
        return list(self.schema)

    @property
    def frame_schema(self) -> pl.Schema:
        """The columns of a change and of results: data columns, then the sums."""
        return pl.Schema([*self.schema.items(), *zip(self.sums, self.sum_types, strict=True)])

    def run_name(self, bucket: int, step: int, level: int, flush: int = 0) -> str:
        """The deterministic name of the run a step writes for a bucket at `level` (its index in the
        bucket's runs) in its `flush`-th write of this trace (a trace written twice in a step names its
        second write's runs apart: a name is never rewritten with other contents within a step, where
        a plan built earlier in the step may still read it, or a retried task re-read it)."""
        where = "shared" if bucket == SHARED else f"b{bucket:05d}"
        again = f"-w{flush:03d}" if flush else ""
        return f"{where}/run-{step:012d}{again}-{level:03d}{SUFFIX}"

    def path(self, rel: str) -> str:
        return self.directory + os.sep + rel

    def empty(self) -> pl.DataFrame:
        return pl.DataFrame(schema=self.frame_schema)

    # ---- partitioning ---------------------------------------------------------------------------
    def bucket_ids(self, df: pl.DataFrame) -> np.ndarray:
        """The bucket (int32) of each row of a frame holding the key columns (of the key types)."""
        return bucket_of(stable_hash(df, self.keys), self.n_buckets)

    def split(self, change: pl.DataFrame) -> dict[int, pl.DataFrame]:
        """A change's rows by bucket (unconsolidated, in the layout's columns)."""
        change = self._conform(change)
        if change.height == 0:
            return {}
        b = pl.Series("__b", self.bucket_ids(change), dtype=pl.Int32)
        parts = change.with_columns(b).partition_by("__b", as_dict=True, include_key=False)
        return {int(k[0]): v for k, v in sorted(parts.items())}

    def _conform(self, df: pl.DataFrame) -> pl.DataFrame:
        """The frame's layout columns, cast to the layout's types (an error names a missing column)."""
        fs = self.frame_schema
        missing = [c for c in fs if c not in df.columns]
        if missing:
            raise ValueError(f"state {self.name!r}: change lacks columns {missing}")
        have = df.schema  # (a property that builds the schema on each read)
        return df.select([pl.col(c) if have[c] == t else pl.col(c).cast(t) for c, t in fs.items()])

    def _hashed_whole(self, change: pl.DataFrame) -> pl.DataFrame:
        """A change consolidated, with `__h`, sorted as a run (every bucket's rows in one)."""
        df = consolidate_frame(self._conform(change), self.sums)
        return sort_run(with_hash(df, stable_hash(df, self.keys)), self.data_cols)

    def _hashed_parts(self, change: pl.DataFrame) -> dict[int, pl.DataFrame]:
        """A change consolidated, with `__h`, split by bucket, each part sorted as a run."""
        df = consolidate_frame(self._conform(change), self.sums)
        if df.height == 0:
            return {}
        h = stable_hash(df, self.keys)
        df = with_hash(df, h)
        b = bucket_of(h, self.n_buckets)
        order = np.argsort(b, kind="stable")
        bs = b[order]
        df = df[order]
        starts = np.flatnonzero(np.concatenate(([True], bs[1:] != bs[:-1])))
        ends = np.append(starts[1:], len(bs))
        return {
            int(bs[s]): sort_run(df.slice(int(s), int(e - s)), self.data_cols)
            for s, e in zip(starts, ends, strict=True)
        }

    # ---- writing --------------------------------------------------------------------------------
    def _read(self, rel: str | None) -> pl.DataFrame:
        if rel is None:
            return with_hash(self.empty(), np.zeros(0, dtype=np.uint64))
        return read_run(self.path(rel))

    def apply_bucket(
        self, entry: BucketEntry, part: pl.DataFrame, bucket: int, step: int, flush: int = 0
    ) -> BucketEntry:
        """A bucket's entry after adding `part` (a sorted consolidated run with `__h`): the part as a new
        run, merged first with the newest runs while each is at most `growth` times the run so far (a
        carry). A run that consolidates to nothing is dropped."""
        paths, rows = list(entry.paths), list(entry.rows)
        run = part
        while paths and rows[-1] <= self.growth * max(run.height, 1):
            run = merge_runs(self._read(paths.pop()), run, self.data_cols, self.sums)
            rows.pop()
        if run.height:
            rel = self.run_name(bucket, step, len(paths), flush)
            write_run(run, self.path(rel))
            paths.append(rel)
            rows.append(run.height)
        return BucketEntry(tuple(paths), tuple(rows))

    def apply(
        self, files: BucketFiles, change: pl.DataFrame, step: int, flush: int = 0
    ) -> dict[int, BucketEntry]:
        """Write the new runs of every bucket the change touches; returns their new entries only (the
        shared runs are left as they are).

        A bucket whose part of the change consolidates to nothing is not touched. An entry may come
        back empty (the bucket's rows all cancelled): `updated` drops it from the version."""
        return {
            b: self.apply_bucket(files.get(b, EMPTY), part, b, step, flush)
            for b, part in self._hashed_parts(change).items()
        }

    def apply_shared(
        self, files: BucketFiles, change: pl.DataFrame, step: int, flush: int = 0
    ) -> dict[int, BucketEntry]:
        """`apply` for the driver: the change becomes a run shared by every bucket (one file, not one
        per bucket: a small step's cost is a few files whatever the bucket count), carried into the
        shared runs as a bucket's are; once the shared runs would pass `shared_rows`, they and the
        change are spilled into their buckets (`apply`) and the shared entry empties. Returns the new
        entries only, as `apply`."""
        shared = files.get(SHARED, EMPTY)
        if shared.n_rows + change.height > self.shared_rows and not shared.paths:
            return self.apply(files, change, step, flush)  # large: straight into the buckets
        part = self._hashed_whole(change)
        if shared.n_rows + part.height <= self.shared_rows:
            if part.height == 0:
                return {}
            return {SHARED: self.apply_bucket(shared, part, SHARED, step, flush)}
        for r in reversed(shared.paths):
            part = merge_runs(self._read(r), part, self.data_cols, self.sums)
        new = self.apply(files, part.drop(HASH), step, flush)
        return {**new, SHARED: EMPTY} if shared.paths else new

    def apply_partition(
        self, files: BucketFiles, change: pl.DataFrame, step: int, flush: int = 0
    ) -> pl.DataFrame:
        """`apply` for a worker holding several buckets' change, with the new entries as a frame (what a
        task returns to the driver: its columns are `entries_frame`'s)."""
        return entries_frame(self.apply(files, change, step, flush))

    def drop_bucket(
        self, entry: BucketEntry, below: Sequence[tuple[str, Any]], bucket: int, step: int, flush: int
    ) -> BucketEntry:
        """A bucket's entry without the rows whose every column of `below` is below its bound (a NULL
        is not): each run holding such rows is written again without them (a run stays consolidated and
        sorted), under a name of this step's `flush`-th write; an emptied run is dropped."""
        dead = all_below(below).alias("__dead")
        paths, rows = [], []
        for level, (rel, n) in enumerate(zip(entry.paths, entry.rows, strict=True)):
            run = self._read(rel)
            mask = run.select(dead)["__dead"]
            k = int(mask.sum())
            if k == 0:
                paths.append(rel)
                rows.append(n)
            elif k < run.height:
                new = self.run_name(bucket, step, level, flush)
                write_run(run.filter(~mask), self.path(new))
                paths.append(new)
                rows.append(run.height - k)
        return BucketEntry(tuple(paths), tuple(rows))

    # ---- reading --------------------------------------------------------------------------------
    def cast_probe(self, probe: pl.DataFrame) -> pl.DataFrame:
        """The probe's key columns in the key types (not strict: a value the key type cannot hold
        becomes NULL, and matches no stored key under SQL semantics)."""
        missing = [k for k in self.keys if k not in probe.columns]
        if missing:
            raise ValueError(f"state {self.name!r}: probe lacks key columns {missing}")
        have = probe.schema  # (built on each read)
        if all(have[k] == self.schema[k] for k in self.keys):
            return pick(probe, list(self.keys))
        return probe.select(
            [
                pl.col(k) if have[k] == self.schema[k] else pl.col(k).cast(self.schema[k], strict=False)
                for k in self.keys
            ]
        )

    def seek(
        self, files: BucketFiles, probe: pl.DataFrame, exact: bool = True, consolidate: bool = True
    ) -> pl.DataFrame:
        """The consolidated rows (with their sums) whose key equals a key of `probe` (with
        `consolidate=False`, the runs' rows as they are: a row may come from several runs).

        `exact=True`: NULL keys equal NULL keys (a Z-set's rows); `exact=False`: SQL semantics, a NULL
        in a key matches nothing. Reads the probe's buckets only, and in them the matching pages."""
        probe = self.cast_probe(probe)
        if not exact:
            probe = drop_null_rows(probe)
        if probe.height == 0 or not files:
            return self.empty()
        hs = sorted_unique(stable_hash(probe, self.keys))
        bs = bucket_of(hs, self.n_buckets)  # non-decreasing in the hash: contiguous per bucket
        starts = np.flatnonzero(np.concatenate(([True], bs[1:] != bs[:-1])))
        ends = np.append(starts[1:], len(bs))
        parts: list[Found] = []
        where = self.directory + os.sep
        shared = files.get(SHARED)
        if shared is not None:
            parts.extend(f for f in (seek_run(where + r, hs) for r in shared.paths) if f is not None)
        several = bool(parts)
        for s, e in zip(starts, ends, strict=True):
            entry = files.get(int(bs[s]))
            if entry is None:
                continue
            found = [f for f in (seek_run(where + r, hs[s:e]) for r in entry.paths) if f is not None]
            several |= len(found) > 1
            parts.extend(found)
        if not parts:
            return self.empty()
        df = gather(parts, list(self.frame_schema))
        keys = list(self.keys)
        # a hash found is the probe's key where the hash is one-to-one and no NULL is on either side;
        # else drop the rows whose key only shares a probe key's hash
        one = one_to_one([self.schema[k] for k in keys])
        if not (one and not df[keys[0]].has_nulls() and not probe[keys[0]].has_nulls()):
            df = semi_join(df, probe, keys, exact)
        return consolidate_frame(df, self.sums) if several and consolidate else df

    def scan(self, files: BucketFiles) -> pl.DataFrame:
        """The whole state, consolidated (O(size): a view's contents, checks)."""
        frames: list[pl.DataFrame] = []
        shared = [self._read(r) for r in files[SHARED].paths] if SHARED in files else []
        for b in sorted(files):
            if b == SHARED:
                continue
            runs = [self._read(r) for r in files[b].runs()]
            if len(runs) == 1:
                frames.append(runs[0])
            elif runs:
                merged = runs[0]
                for r in runs[1:]:
                    merged = merge_runs(merged, r, self.data_cols, self.sums)
                frames.append(merged)
        frames = [f for f in [*frames, *shared] if f.height]
        if not frames:
            return self.empty()
        out = pl.concat(frames, how="vertical").drop(HASH)
        return consolidate_frame(out, self.sums) if shared else out

    def sweep(self, keep: Iterable[BucketFiles]) -> list[str]:
        """Files under the layout's directory that none of the versions `keep` refers to (runs of
        uncommitted or replaced steps, and temporaries of crashed writers): deletable when no task of
        this operator is writing."""
        live = set().union(*(_file_list(f) for f in keep))
        out: list[str] = []
        if not os.path.isdir(self.directory):
            return out
        for d in sorted(os.listdir(self.directory)):
            sub = os.path.join(self.directory, d)
            if os.path.isdir(sub):
                out.extend(rel for f in sorted(os.listdir(sub)) if (rel := f"{d}/{f}") not in live)
        return out

    def remove(self, rels: Iterable[str]) -> None:
        """Delete runs (relative names, e.g. from `garbage` or `sweep`); missing ones are ignored."""
        for rel in rels:
            p = self.path(rel)
            CACHE.drop(p)
            try:
                os.remove(p)
            except FileNotFoundError:
                pass


ENTRIES_SCHEMA = pl.Schema({"bucket": pl.Int32(), "entry": pl.String()})


def entries_frame(entries: Mapping[int, BucketEntry]) -> pl.DataFrame:
    """Entries as a frame (bucket, entry as JSON): what a worker task emits."""
    items = sorted(entries.items())
    return pl.DataFrame(
        {"bucket": [b for b, _ in items], "entry": [json.dumps(e.to_json()) for _, e in items]},
        schema=ENTRIES_SCHEMA,
    )


def entries_from_frame(df: pl.DataFrame) -> dict[int, BucketEntry]:
    """The inverse of `entries_frame` (the driver collecting its tasks' results)."""
    return {
        int(b): BucketEntry.from_json(json.loads(e)) for b, e in df.select(["bucket", "entry"]).iter_rows()
    }


@dataclass(frozen=True)
class BucketSnapshot:
    """A trace at one version: immutable (its runs never change), valid after the trace moves on."""

    layout: BucketLayout
    files: Mapping[int, BucketEntry]

    def seek(self, probe: pl.DataFrame, exact: bool = True) -> pl.DataFrame:
        return self.layout.seek(self.files, probe, exact)

    def scan(self) -> pl.DataFrame:
        return self.layout.scan(self.files)

    def __len__(self) -> int:
        """Stored entries (an upper bound on distinct rows until a bucket's runs merge into one)."""
        return sum(e.n_rows for e in self.files.values())


class BucketedTrace:
    """The driver's handle on an operator's bucketed state: the current version of its files."""

    def __init__(self, layout: BucketLayout, files: BucketFiles | None = None) -> None:
        self.layout = layout
        self.files: dict[int, BucketEntry] = dict(files or {})

    def insert(self, change: pl.DataFrame, step: int, undo: list[Callable[[], None]]) -> BucketSnapshot:
        """Add a change at `step` and return the new snapshot; `undo` gets the rollback (the runs the
        step wrote stay on disk until a sweep: they are the same files a rerun of the step writes)."""
        saved = self.files
        self.files = updated(saved, self.layout.apply_shared(saved, change, step))
        undo.append(lambda: setattr(self, "files", saved))
        return self.snapshot()

    def commit(self, new: Mapping[int, BucketEntry], undo: list[Callable[[], None]]) -> BucketSnapshot:
        """Adopt entries written elsewhere (by worker tasks: `entries_from_frame`)."""
        saved = self.files
        self.files = updated(saved, new)
        undo.append(lambda: setattr(self, "files", saved))
        return self.snapshot()

    def snapshot(self) -> BucketSnapshot:
        return BucketSnapshot(self.layout, self.files)

    def __len__(self) -> int:
        return len(self.snapshot())

    # ---- checkpoint: JSON-able data -----------------------------------------------------------
    def to_state(self) -> dict[str, Any]:
        return {
            "name": self.layout.name,
            "n_buckets": self.layout.n_buckets,
            "files": {str(b): e.to_json() for b, e in sorted(self.files.items())},
        }

    def restore(self, state: Mapping[str, Any]) -> None:
        if state.get("n_buckets") != self.layout.n_buckets:
            raise ValueError(
                f"state {self.layout.name!r}: checkpoint has {state.get('n_buckets')} buckets, "
                f"the layout {self.layout.n_buckets}"
            )
        self.files = {int(b): BucketEntry.from_json(v) for b, v in state["files"].items()}
