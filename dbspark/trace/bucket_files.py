"""Immutable sorted Arrow files: the runs of a bucketed trace (see `bucketed.py`).

A run is one Arrow IPC file (uncompressed, one record batch, so it can be memory-mapped) holding a
consolidated frame sorted by `__h` (the stable hash of the key columns, stored as a column) and then
by the data columns (a total order on distinct rows, so equal inputs give equal bytes). Files are
never modified once written: a writer writes a temporary name and renames it into place atomically,
and a reader may cache an opened file for the life of the process. A retried or speculative writer
of the same name writes the same bytes; the cache still checks the file's inode and mtime, so a name
rewritten with other contents (a rolled-back step run again over another change) is reopened.

Runs are merged like the spine's batches: rows whose key hash occurs in only one input are already
consolidated and keep their order; only the rows of shared hashes are grouped, and a stable argsort
of the concatenated hashes (a linear merge of sorted runs) interleaves the parts.
"""

from __future__ import annotations

import os
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.ipc as ipc

from dbspark.algebra.consolidate import consolidate_frame, take_columns

HASH = "__h"
CACHE_SIZE = 4096  # opened files per process (memory-mapped: pages, not copies)
SLICES = 8  # a seek whose matches are at most this many ranges of a run slices them instead of a take


class _FileCache:
    """Opened files by path, least recently used first out; keyed by (inode, mtime, size) too."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.files: OrderedDict[str, tuple[tuple[int, int, int], Run]] = OrderedDict()

    def get(self, path: str) -> Run:
        st = os.stat(path)
        key = (st.st_ino, st.st_mtime_ns, st.st_size)
        hit = self.files.get(path)
        if hit is not None and hit[0] == key:
            self.files.move_to_end(path)
            return hit[1]
        run = Run(ipc.open_file(pa.memory_map(path, "r")).read_all())
        self.files[path] = (key, run)
        self.files.move_to_end(path)
        while len(self.files) > self.size:
            self.files.popitem(last=False)
        return run

    def drop(self, path: str) -> None:
        self.files.pop(path, None)


class Run:
    """An opened run: its memory-mapped table, its `__h` column as a NumPy view, and its other columns
    as NumPy views too where every one of them is a number without NULLs (`arrays`, else None), so a
    seek gathers rows by NumPy indexing without an Arrow call per run."""

    __slots__ = ("table", "hashes", "arrays")

    def __init__(self, table: pa.Table) -> None:
        self.table = table
        self.hashes = _numpy(table.column(HASH))
        cols = {n: table.column(n) for n in table.column_names if n != HASH}
        plain = all(c.null_count == 0 and _plain(c.type) for c in cols.values())
        self.arrays = {n: _numpy(c) for n, c in cols.items()} if plain else None


def _plain(t: pa.DataType) -> bool:
    return bool(pa.types.is_integer(t) or t in (pa.float32(), pa.float64()))


def _numpy(col: pa.ChunkedArray) -> np.ndarray:
    return col.chunk(0).to_numpy() if col.num_chunks == 1 else col.to_numpy()


CACHE = _FileCache(CACHE_SIZE)


def open_run(path: str) -> tuple[pa.Table, np.ndarray]:
    """The memory-mapped table of a run and its `__h` column as a NumPy view (no copy)."""
    run = CACHE.get(path)
    return run.table, run.hashes


def read_run(path: str) -> pl.DataFrame:
    """A whole run as a Polars frame (for merges and scans)."""
    return pl.from_arrow(open_run(path)[0])  # type: ignore[return-value]


def seek_run(path: str, probe: np.ndarray) -> Found | None:
    """The rows of a run whose `__h` is in `probe` (sorted, unique uint64); None if there are none.

    Two binary searches per probe on the memory-mapped hashes: the pages read are O(|probe| log n +
    matches), never the whole file. The rows are taken by `gather`."""
    run = CACHE.get(path)
    h = run.hashes
    if len(h) == 0 or len(probe) == 0:
        return None
    lo = h.searchsorted(probe, side="left")
    counts = h.searchsorted(probe, side="right") - lo
    nz = counts > 0
    if not nz.any():
        return None
    return Found(run, lo[nz], counts[nz])


@dataclass(frozen=True)
class Found:
    """A run's rows found by a seek: `counts[i]` rows from `starts[i]`."""

    run: Run
    starts: np.ndarray
    counts: np.ndarray

    def index(self) -> np.ndarray:
        total = int(self.counts.sum())
        if total == len(self.starts):  # one row a key (a unique key's rows)
            return self.starts
        return np.repeat(self.starts - np.cumsum(self.counts) + self.counts, self.counts) + np.arange(total)

    def table(self) -> pa.Table:
        t = self.run.table
        if len(self.starts) <= SLICES:  # a few long ranges (a big group's rows): zero-copy slices
            return pa.concat_tables(
                [t.slice(int(a), int(n)) for a, n in zip(self.starts, self.counts, strict=True)]
            )
        return t.take(pa.array(self.index(), type=pa.int64()))


def gather(found: Sequence[Found], names: Sequence[str]) -> pl.DataFrame:
    """The rows found in several runs as one frame (the runs' columns but `__h`, which are `names`).

    Where every run's columns are NumPy views (numbers without NULLs) the rows are gathered column by
    column by NumPy indexing: a seek of a few keys over many runs (one per bucket) costs a few
    microseconds a run, where an Arrow take, concatenation and conversion per run cost tens."""
    arrays = [f.run.arrays for f in found]
    if all(a is not None and len(a) == len(names) and all(n in a for n in names) for a in arrays):
        schema = pl.Schema([(n, _polars_type(arrays[0][n].dtype)) for n in names])  # type: ignore[index]
        parts = [([a[n] for n in names], f.index()) for a, f in zip(arrays, found, strict=True)]  # type: ignore[index]
        return take_columns(schema, parts)
    # (one chunk before the conversion: Polars converts a table of many small chunks, one per run
    # and bucket, several times slower, about 1 ms for a 100-key probe over 17 runs)
    table = pa.concat_tables([f.table() for f in found]).drop_columns([HASH]).combine_chunks()
    df = pl.from_arrow(table)
    assert isinstance(df, pl.DataFrame)
    return df


_TYPES: dict[np.dtype, pl.DataType] = {}


def _polars_type(t: np.dtype) -> pl.DataType:
    """The Polars type of a NumPy number type (an empty Series built per column and seek cost ~35 us)."""
    got = _TYPES.get(t)
    if got is None:
        got = _TYPES[t] = pl.Series(np.zeros(0, dtype=t)).dtype
    return got


def write_run(df: pl.DataFrame, path: str) -> int:
    """Write a sorted consolidated frame (its last column `__h`) as an Arrow IPC file; returns its bytes.

    Written to a unique temporary name in the same directory, then renamed over `path` (atomic on
    POSIX and Windows): a concurrent reader sees the old file or the new one, never a partial one."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    table = df.to_arrow(compat_level=pl.CompatLevel.oldest()).combine_chunks()
    tmp = f"{path}.tmp-{os.getpid()}-{uuid.uuid4().hex}"
    try:
        with pa.OSFile(tmp, "wb") as sink, ipc.new_file(sink, table.schema) as writer:
            for batch in table.to_batches():
                writer.write_batch(batch)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    CACHE.drop(path)
    return os.path.getsize(path)


def with_hash(df: pl.DataFrame, hashes: np.ndarray) -> pl.DataFrame:
    return df.with_columns(pl.Series(HASH, hashes, dtype=pl.UInt64))


def sort_run(df: pl.DataFrame, data_cols: Sequence[str]) -> pl.DataFrame:
    """Sort a consolidated frame by `__h` then its data columns (distinct rows: a total order)."""
    if df.height <= 1:
        return df
    return df.sort([HASH, *data_cols], nulls_last=False, maintain_order=True)


def _in_sorted(x: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    """Which entries of `x` occur in the sorted array `sorted_set`."""
    if len(sorted_set) == 0:
        return np.zeros(len(x), dtype=bool)
    pos = np.searchsorted(sorted_set, x)
    return sorted_set[np.minimum(pos, len(sorted_set) - 1)] == x


def merge_runs(
    a: pl.DataFrame, b: pl.DataFrame, data_cols: Sequence[str], sums: Sequence[str]
) -> pl.DataFrame:
    """Merge two sorted consolidated runs (same columns, `__h` last) into one sorted consolidated run.

    Rows whose hash is in one input only pass through in order; the rows of hashes in both are
    consolidated (summed, zeros dropped) and sorted. The three parts have disjoint hash sets, so a
    stable argsort of their concatenated hashes gives the sorted run."""
    if a.height == 0:
        return b
    if b.height == 0:
        return a
    ha, hb = a[HASH].to_numpy(), b[HASH].to_numpy()
    a_in_b, b_in_a = _in_sorted(ha, hb), _in_sorted(hb, ha)
    if not a_in_b.any():
        parts = [a, b]
    else:
        both = pl.concat([a.filter(pl.Series(a_in_b)), b.filter(pl.Series(b_in_a))], how="vertical")
        overlap = sort_run(consolidate_frame(both, sums), data_cols)
        parts = [a.filter(pl.Series(~a_in_b)), b.filter(pl.Series(~b_in_a)), overlap]
    parts = [p for p in parts if p.height]
    if not parts:
        return a.clear()
    out = pl.concat(parts, how="vertical")
    order = np.argsort(out[HASH].to_numpy(), kind="stable")
    return out[order]
