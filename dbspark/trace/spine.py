"""Traces: the integral of a stream as an LSM spine of sorted, consolidated batches.

Each batch is consolidated and sorted by a 64-bit hash of the key columns, so that `seek` finds the
rows of a set of keys by binary search in every batch (`rhizome-dbsp-implementation-notes.txt` §2:
traces, arrangements; the spine of differential dataflow). Batches are merged geometrically: a new
batch merges with the newest one while that one is at most `MERGE_FACTOR` times larger, which keeps
O(log n) batches and amortized O(log n) merge work per row. A join or aggregate therefore touches
state only through the keys of its change: O(|change| · log n) lookups plus the matching rows.

Weights are a vector of `weight_cols` summed on consolidation: `[WEIGHT]` for a Z-set, or aggregate
accumulators (count, sum, ...) for the linear aggregates — another abelian group (weights.py).
A row whose first weight column is zero is dropped.

Batches are immutable, so a `TraceSnapshot` (the list of batches at one step) stays valid after the
trace moves on; `z^-1(I(s))` is the previous step's snapshot.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from dbspark.algebra.zset import WEIGHT, IndexedZSet, ZSet

MERGE_FACTOR = 2
HASH = "__h"
SEED = 0x5EED


def key_hash(df: pl.DataFrame, keys: Sequence[str]) -> np.ndarray:
    """A uint64 hash of the key columns of each row (stable within a process)."""
    if not keys:
        return np.zeros(df.height, dtype=np.uint64)
    if len(keys) == 1:
        return df[keys[0]].hash(seed=SEED).to_numpy()
    return df.select(pl.struct(list(keys)).hash(seed=SEED)).to_series().to_numpy()


def consolidate_frame(df: pl.DataFrame, weight_cols: Sequence[str]) -> pl.DataFrame:
    """Group by every non-weight column, sum the weight columns, drop rows whose first weight is 0."""
    data_cols = [c for c in df.columns if c not in weight_cols]
    if df.height == 0:
        return df
    if not data_cols:
        out = df.select([pl.col(c).sum() for c in weight_cols])
    else:
        out = df.group_by(data_cols).agg([pl.col(c).sum() for c in weight_cols])
        if WEIGHT in weight_cols:
            f = df.group_by(data_cols).agg(pl.col(WEIGHT).cast(pl.Float64).sum().alias("__wf"))
            if f.height and f["__wf"].abs().max() > 9.2e18:  # type: ignore[operator]
                from dbspark.errors import WeightError

                raise WeightError("weight overflow while merging trace batches")
    out = out.filter(pl.col(weight_cols[0]) != 0)
    return out.select(df.columns)


class Batch:
    """A consolidated frame sorted by the hash of its key columns, with the hashes as a NumPy array."""

    __slots__ = ("df", "hashes")

    def __init__(self, df: pl.DataFrame, keys: Sequence[str]) -> None:
        h = key_hash(df, keys)
        order = np.argsort(h, kind="stable")
        self.hashes = h[order]
        self.df = df[order] if df.height else df

    def __len__(self) -> int:
        return self.df.height

    def seek(self, probe: np.ndarray) -> pl.DataFrame:
        """Rows whose key hash is in `probe` (sorted, unique uint64); hash collisions are filtered later."""
        if self.df.height == 0 or len(probe) == 0:
            return self.df.clear()
        lo = np.searchsorted(self.hashes, probe, side="left")
        hi = np.searchsorted(self.hashes, probe, side="right")
        counts = hi - lo
        total = int(counts.sum())
        if total == 0:
            return self.df.clear()
        nz = counts > 0
        lo, counts = lo[nz], counts[nz]
        starts = np.repeat(lo - np.cumsum(counts) + counts, counts) + np.arange(total)
        return self.df[starts]


class TraceSnapshot:
    """The integral of a stream at one step: an immutable tuple of batches indexed by `keys`."""

    __slots__ = ("batches", "keys", "schema", "weight_cols")

    def __init__(
        self,
        batches: tuple[Batch, ...],
        keys: Sequence[str],
        schema: pl.Schema,
        weight_cols: Sequence[str] = (WEIGHT,),
    ) -> None:
        self.batches = batches
        self.keys = tuple(keys)
        self.schema = schema  # every column, weights included
        self.weight_cols = tuple(weight_cols)

    def __len__(self) -> int:
        """Stored entries (an upper bound on distinct rows until the batches merge)."""
        return sum(len(b) for b in self.batches)

    def empty_frame(self) -> pl.DataFrame:
        return pl.DataFrame(schema=self.schema)

    def seek_frame(self, probe_keys: pl.DataFrame) -> pl.DataFrame:
        """Every stored entry whose key equals a row of `probe_keys` (columns named as `keys`).

        Unconsolidated across batches: the same row may come from several batches."""
        if not self.batches or probe_keys.height == 0:
            return self.empty_frame()
        probe = np.unique(key_hash(probe_keys, self.keys))
        parts = [b.seek(probe) for b in self.batches]
        parts = [p for p in parts if p.height]
        if not parts:
            return self.empty_frame()
        found = pl.concat(parts, how="vertical") if len(parts) > 1 else parts[0]
        # drop hash collisions: keep only exact key matches (NULL keys match NULL keys here)
        return found.join(probe_keys.unique(), on=list(self.keys), how="semi", nulls_equal=True)

    def seek(self, probe_keys: pl.DataFrame) -> ZSet:
        """The consolidated rows of the given keys, as a Z-set (indexed by `keys`)."""
        df = consolidate_frame(self.seek_frame(probe_keys), self.weight_cols)
        return IndexedZSet(df, self.keys, consolidated=True)

    def to_frame(self) -> pl.DataFrame:
        """All rows, consolidated (O(size): for non-incremental use and checks)."""
        if not self.batches:
            return self.empty_frame()
        df = pl.concat([b.df for b in self.batches], how="vertical")
        return consolidate_frame(df, self.weight_cols)

    def to_zset(self) -> ZSet:
        return IndexedZSet(self.to_frame(), self.keys, consolidated=True)


class Spine:
    """A mutable trace: append consolidated batches, merge geometrically, hand out snapshots."""

    def __init__(self, keys: Sequence[str], schema: pl.Schema, weight_cols: Sequence[str] = (WEIGHT,)) -> None:
        self.keys = tuple(keys)
        self.schema = schema
        self.weight_cols = tuple(weight_cols)
        self.batches: list[Batch] = []

    def insert(self, df: pl.DataFrame) -> None:
        """Add a change (a frame with this trace's columns) to the integral."""
        if df.height == 0:
            return
        df = consolidate_frame(df.select(list(self.schema)), self.weight_cols)
        if df.height == 0:
            return
        self.batches.append(Batch(df, self.keys))
        self._merge()

    def _merge(self) -> None:
        bs = self.batches
        while len(bs) >= 2 and len(bs[-2]) <= MERGE_FACTOR * len(bs[-1]):
            b = bs.pop()
            a = bs.pop()
            merged = consolidate_frame(pl.concat([a.df, b.df], how="vertical"), self.weight_cols)
            bs.append(Batch(merged, self.keys))

    def snapshot(self) -> TraceSnapshot:
        return TraceSnapshot(tuple(self.batches), self.keys, self.schema, self.weight_cols)

    def __len__(self) -> int:
        return sum(len(b) for b in self.batches)

    # ---- checkpoint ---------------------------------------------------------------------------
    def to_state(self) -> list[pl.DataFrame]:
        return [b.df for b in self.batches]

    def restore(self, frames: list[pl.DataFrame]) -> None:
        self.batches = [Batch(f, self.keys) for f in frames]
