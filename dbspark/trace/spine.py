"""Traces: the integral of a stream as an LSM spine of sorted, consolidated batches.

Each batch is consolidated and sorted by a 64-bit hash of the key columns, so that `seek` finds the
rows of a set of keys by binary search in every batch (`rhizome-dbsp-implementation-notes.txt` §2:
traces, arrangements; the spine of differential dataflow). Batches are merged geometrically: a new
batch merges with the newest one while that one is at most `MERGE_FACTOR` times larger, which keeps
O(log n) batches and amortized O(log n) merge work per row. A join or aggregate therefore touches
state only through the keys of its change: O(|change| · log n) lookups plus the matching rows. Within a
recursive scope's step the batches the step makes merge among themselves only, by tiers, and into the
older ones once at its end (`Spine.hold`): what an iteration inserts, a later one often deletes again.

Weights are a vector of `weight_cols` summed on consolidation: `[WEIGHT]` for a Z-set, or aggregate
accumulators (count, sum, ...) for the linear aggregates — another abelian group (weights.py).
A row whose weight columns are all zero is dropped.

Batches are immutable, so a `TraceSnapshot` (the list of batches at one step) stays valid after the
trace moves on; `z^-1(I(s))` is the previous step's snapshot.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import polars as pl

from dbspark import faults
from dbspark.algebra.consolidate import (
    WEIGHT,
    consolidate_frame,
    consolidate_sorted,
    hash_order,
    key_hash,
    sorted_by_hash,
    sorted_member,
    sorted_unique,
    summable,
    take,
    take_columns,
)
from dbspark.algebra.weights import magnitude
from dbspark.algebra.zset import IndexedZSet, ZSet
from dbspark.columnar.plans import all_below, pick, semi_join

MERGE_FACTOR = 2
HELD_TIER = 8  # held batches (`Spine.hold`) of one tier merged into one of the next, this many at once
SMALL = 16_384  # a trace of at most this many entries is one batch, consolidated again on each insert
HASH = "__h"


_SCAN = 16  # a probe whose directory bucket holds more rows is found by binary search instead
SEEK_FEW = 1024  # a seek of at most this many keys and rows gathers them by NumPy (`Batch.arrays`)
_NUMPY_TYPES = (pl.Int64, pl.Int32, pl.Int16, pl.Int8, pl.UInt32, pl.UInt16, pl.UInt8, pl.Float64, pl.Float32)


class Batch:
    """A consolidated frame sorted by the hash of its key columns, with the hashes as a NumPy array;
    with an `order` column, the rows of a hash sorted by it too (NULLs first), so that a key's rows are
    a slice sorted by it (`TraceSnapshot.key_runs`).

    A seek finds a key's rows through a directory of the hashes' top bits (`starts`, built on the first
    seek: about one row per bucket), so a probe costs two lookups instead of a binary search."""

    __slots__ = ("_arrays", "_dir", "clash", "df", "hashes", "keys", "level", "order")

    def __init__(
        self,
        df: pl.DataFrame,
        keys: Sequence[str],
        hashes: np.ndarray | None = None,
        order: str | None = None,
    ) -> None:
        self._dir: tuple[np.ndarray, np.uint64] | None = None
        self._arrays: list[np.ndarray] | bool | None = None  # (`arrays`: False where there are none)
        self.level = 0  # held batches (`Spine.hold`) merged into it, as tiers: 0 for an insert
        self.keys = tuple(keys)
        self.order = order
        self.clash: np.ndarray | None = None  # with an order: the hashes two different keys share
        if hashes is not None and order is None:  # already sorted by these hashes
            self.df, self.hashes = df, hashes
            return
        h = key_hash(df, keys) if hashes is None else hashes
        if order is None:
            self.df, self.hashes = sorted_by_hash(df, h) if df.height else (df, h)
        else:
            x = df[order]
            idx = np.lexsort((x.to_physical().fill_null(0).to_numpy(), x.is_not_null().to_numpy(), h))
            self.hashes = h[idx]
            self.df = take(df, idx) if df.height else df
        if order is not None:
            self.clash = _clashes(self.df, keys, self.hashes)

    def __len__(self) -> int:
        return self.df.height

    # ---- in a checkpoint (`codec`): the frame alone; its hashes are computed again when read -------
    def _stored_state(self) -> dict[str, object]:
        return {"df": self.df, "keys": self.keys, "order": self.order}

    @classmethod
    def _from_stored(cls, state: dict) -> Batch:
        df, keys, order = state["df"], state["keys"], state["order"]
        if order is not None:
            return cls(df, keys, None, order)
        h = key_hash(df, keys)  # (a checkpoint of an older version may hold its rows in another order)
        return cls(df, keys, h if bool((h[1:] >= h[:-1]).all()) else None, order)

    def _directory(self) -> tuple[np.ndarray, np.uint64]:
        """(starts, shift): the rows whose hash has top bits t are starts[t]:starts[t + 1]."""
        if self._dir is None:
            bits = max(1, (len(self.hashes) - 1).bit_length())
            shift = np.uint64(64 - bits)
            counts = np.bincount((self.hashes >> shift).view(np.intp), minlength=1 << bits)
            # (int32 where the rows fit: the directory is kept with the batch, up to two slots a row;
            # transitive closure of 5,000 nodes, 24M facts: 134 MB against 268 MB a trace)
            starts = np.zeros(len(counts) + 1, dtype=np.int32 if len(self.hashes) < 2**31 else np.intp)
            np.cumsum(counts, out=starts[1:])
            self._dir = (starts, shift)
        return self._dir

    def seek(self, probe: np.ndarray) -> pl.DataFrame:
        """Rows whose key hash is in `probe` (sorted, unique uint64); hash collisions are filtered later."""
        if self.df.height == 0 or len(probe) == 0:
            return self.df.clear()
        pos = self.positions(probe)
        return take(self.df, pos) if len(pos) else self.df.clear()

    def arrays(self) -> list[np.ndarray] | None:
        """The frame's columns as NumPy arrays sharing its memory, when every one is a number column of
        one chunk without NULLs (else None): a seek of a few rows gathers them by NumPy (`seek_few`)."""
        if self._arrays is None:
            cols = self.df.get_columns()
            ok = all(s.dtype in _NUMPY_TYPES and s.n_chunks() == 1 and not s.null_count() for s in cols)
            self._arrays = [s.to_numpy() for s in cols] if ok else False
        return self._arrays if isinstance(self._arrays, list) else None

    def positions(self, probe: np.ndarray) -> np.ndarray:
        """The row positions whose key hash is in `probe` (sorted, unique uint64)."""
        h = self.hashes
        starts, shift = self._directory()
        top = (probe >> shift).view(np.intp)
        lo, n = starts[top], starts[top + 1] - starts[top]
        scan = n <= _SCAN
        if not scan.all():  # a crowded bucket (a key with many rows): binary search
            far = probe[~scan]
            a, b = np.searchsorted(h, far, side="left"), np.searchsorted(h, far, side="right")
            lo, n, probe = lo[scan], n[scan], probe[scan]
            found = [_ranges(a, b - a)]
        else:
            found = []
        idx = _ranges(lo, n)
        found.append(idx[h[idx] == np.repeat(probe, n)])
        return np.concatenate(found) if len(found) > 1 else found[0]


def _clashes(df: pl.DataFrame, keys: Sequence[str], h: np.ndarray) -> np.ndarray:
    """The hashes (sorted, unique) that rows of different keys share in `df`, sorted by hash `h`."""
    same = h[1:] == h[:-1]
    if not same.any():
        return h[:0]
    differ = np.zeros(len(same), dtype=bool)
    for k in keys:
        c = df[k]
        differ |= c.slice(1).ne_missing(c.slice(0, len(c) - 1)).to_numpy()
    return sorted_unique(h[1:][same & differ])


def _ranges(lo: np.ndarray, n: np.ndarray) -> np.ndarray:
    """The positions lo[i] .. lo[i] + n[i] - 1 of every i, in order."""
    total = int(n.sum())
    if total == 0:
        return np.zeros(0, dtype=np.intp)
    nz = n > 0
    lo, n = lo[nz], n[nz]
    return np.repeat(lo - np.cumsum(n) + n, n) + np.arange(total)


def _runs_in(h: np.ndarray, probe: np.ndarray) -> np.ndarray:
    """A mask of the positions of sorted `h` whose value is in sorted unique `probe`."""
    lo = np.searchsorted(h, probe, side="left")
    mask = np.zeros(len(h), dtype=bool)
    mask[_ranges(lo, np.searchsorted(h, probe, side="right") - lo)] = True
    return mask


def merge_batches(a: Batch, b: Batch, keys: Sequence[str], weight_cols: Sequence[str]) -> Batch:
    """Merge two sorted consolidated batches into one.

    Each batch is consolidated, so equal rows can only be a row of `a` and a row of `b` with the
    same key hash: only the rows whose key hash occurs in both batches are consolidated (grouped),
    found by binary search of the smaller batch's hashes in the larger one. The result is one gather
    of the other rows and the consolidated ones in hash order (a stable sort of sorted runs); by NumPy
    alone when it can compare the rows (`_merge_summed`)."""
    ha, hb = a.hashes, b.hashes
    if len(ha) == 0 or len(hb) == 0:
        return a if len(hb) == 0 else b
    both = pl.concat([a.df, b.df], how="vertical", rechunk=False)
    data = [c for c in both.columns if c not in weight_cols]
    if a.order is None and summable(a.df, data, weight_cols) and summable(b.df, data, weight_cols):
        merged = _merge_summed((a, b), both, keys, data)
        if merged is not None:
            return merged
    common = _common(ha, hb)
    if a.order is not None:  # the rows of a hash sorted by the order column: one sort of both
        if len(common) == 0:
            return Batch(both, keys, np.concatenate([ha, hb]), a.order)
        cand = np.concatenate([_runs_in(ha, common), _runs_in(hb, common)])
        cons = consolidate_frame(take(both, np.flatnonzero(cand)), weight_cols)
        rest = np.flatnonzero(~cand)
        h = np.concatenate([np.concatenate([ha, hb])[rest], key_hash(cons, keys)])
        return Batch(pl.concat([take(both, rest), cons], how="vertical", rechunk=False), keys, h, a.order)
    if len(common) == 0:
        h = np.concatenate([ha, hb])
        order = np.argsort(h, kind="stable")
        return Batch(take(both, order), keys, h[order])
    cand = np.concatenate([_runs_in(ha, common), _runs_in(hb, common)])
    cons = consolidate_frame(take(both, np.flatnonzero(cand)), weight_cols)
    hc = key_hash(cons, keys)
    rest = np.flatnonzero(~cand)
    h = np.concatenate([np.concatenate([ha, hb])[rest], hc])
    order = np.argsort(h, kind="stable")  # two sorted runs and the consolidated rows
    src = np.concatenate([rest, np.arange(len(both), len(both) + cons.height)])[order]
    return Batch(take(pl.concat([both, cons], how="vertical", rechunk=False), src), keys, h[order])


def _common(ha: np.ndarray, hb: np.ndarray) -> np.ndarray:
    """The hashes in both sorted arrays, once each: the smaller's searched in the larger (not
    `np.intersect1d`, whose unique of each side hashes them in NumPy 2.4: 1.5 s for 2M and 1M)."""
    small, large = (ha, hb) if len(ha) <= len(hb) else (hb, ha)
    common = small[sorted_member(small, large)]
    return common[np.concatenate(([True], common[1:] != common[:-1]))] if len(common) > 1 else common


def merge_many(batches: Sequence[Batch], keys: Sequence[str], weight_cols: Sequence[str]) -> Batch:
    """Merge sorted consolidated batches into one: by NumPy in one pass over all of them when it can
    compare their rows (`_merge_summed`), else two at a time."""
    bs = [b for b in batches if len(b)] or list(batches[:1])
    if len(bs) > 2 and all(b.order is None for b in bs):
        both = pl.concat([b.df for b in bs], how="vertical", rechunk=False)
        data = [c for c in both.columns if c not in weight_cols]
        if all(summable(b.df, data, weight_cols) for b in bs):
            merged = _merge_summed(bs, both, keys, data)
            if merged is not None:
                return merged
    while len(bs) > 1:  # two at a time, neighbours, so that each row is merged O(log k) times
        bs = [
            merge_batches(bs[i], bs[i + 1], keys, weight_cols) if i + 1 < len(bs) else bs[i]
            for i in range(0, len(bs), 2)
        ]
    return bs[0]


def _merge_summed(
    parts: Sequence[Batch], both: pl.DataFrame, keys: Sequence[str], data: list[str]
) -> Batch | None:
    """`merge_batches` of batches (`parts`, `both` their frames concatenated) of integer-like columns
    without NULLs and an int64 weight, by NumPy: their sorted hashes merged (a stable sort of sorted
    runs), then, within each run of rows sharing a key hash (rows of one key: a batch of changes holds a
    row's old and new version, as a ranked trace's rank change), the rows sorted by a hash of all their
    columns, so that equal rows, at most one of each batch, are adjacent and summed. None when it
    cannot tell (two rows of a run share their sort key, or a sum could overflow): the caller groups the
    rows instead.

    The sort key is the run's number in the high bits and the row hash's high bits below it, one
    uint64; a run keeps its positions, so the result stays in key-hash order without another sort.
    Measured on a tc trace's merge (2.4M + 1.5M rows of (x, y, rank), 1.4M pairs cancelling): 0.9 s,
    against 2.3 s by grouping."""
    h = np.concatenate([p.hashes for p in parts])
    merged = np.argsort(h, kind="stable")  # sorted runs: timsort merges them
    mh = h[merged]
    eq = mh[1:] == mh[:-1]
    if not eq.any():
        return Batch(take(both, merged), keys, mh)
    w = both[WEIGHT].to_numpy()
    if magnitude(w) >= (1 << 63) // len(parts):  # (a row once per part)
        return None  # the sum of a row's weights could overflow
    n = len(mh)
    inrun = np.zeros(n, dtype=bool)  # in merged order: a row whose key hash another row has too
    inrun[1:] = eq
    inrun[:-1] |= eq
    pos = np.flatnonzero(inrun)
    run = (np.cumsum(np.concatenate(([True], ~eq))) - 1)[pos]
    rows = merged[pos]
    hr = mh[pos] if list(keys) == data else key_hash(both, data)[rows]
    k = np.uint64(int(run[-1]).bit_length())
    sk = (run.astype(np.uint64) << (np.uint64(64) - k)) | (hr >> k) if k else hr
    o = hash_order(sk)
    rows, sk = rows[o], sk[o]
    same = sk[1:] == sk[:-1]
    for c in data:
        v = both[c].to_physical().to_numpy()[rows]
        same &= v[1:] == v[:-1]
    first = np.flatnonzero(np.concatenate(([True], ~same)))
    fk = sk[first]
    if (fk[1:] == fk[:-1]).any():  # different rows with one sort key: equal ones may not be adjacent
        return None
    sums = np.add.reduceat(w[rows], first)
    merged[pos] = rows  # each run's rows in its own positions, equal ones adjacent
    wm = w[merged]
    keep = np.ones(n, dtype=bool)
    keep[pos] = False
    keep[pos[first]] = sums != 0
    wm[pos[first]] = sums
    out = take(both, merged[keep]).with_columns(pl.Series(WEIGHT, wm[keep], dtype=pl.Int64))
    return Batch(out, keys, mh[keep])


def _same(a: Sequence[object], b: Sequence[object]) -> bool:
    """The same objects in the same order."""
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


class Deferred(NamedTuple):
    """A deferred insert: a consolidated frame, with its rows' sorted hashes over its data columns when
    known (`hashes` of `consolidate_sorted`: they index a spine indexed by those, `Spine._insert`)."""

    df: pl.DataFrame
    hashes: np.ndarray | None


def _consolidated(pending: Sequence[Deferred], weight_cols: Sequence[str]) -> Deferred:
    """Deferred inserts (each consolidated) as one."""
    if len(pending) == 1:
        return pending[0]
    return Deferred(*consolidate_sorted(pl.concat([p.df for p in pending], how="vertical"), weight_cols))


class TraceSnapshot:
    """The integral of a stream at one step: an immutable tuple of batches indexed by `keys`."""

    __slots__ = ("_batches", "_owner", "_pending", "keys", "schema", "weight_cols")

    def __init__(
        self,
        batches: tuple[Batch, ...],
        keys: Sequence[str],
        schema: pl.Schema,
        weight_cols: Sequence[str] = (WEIGHT,),
        pending: tuple[Deferred, ...] = (),
        owner: Spine | None = None,
    ) -> None:
        self._batches = batches
        self._pending = pending  # deferred inserts (`Spine.insert(defer=True)`), batched on first read
        self._owner = owner
        self.keys = tuple(keys)
        self.schema = schema  # every column, weights included
        self.weight_cols = tuple(weight_cols)

    @property
    def batches(self) -> tuple[Batch, ...]:
        """The batches, the deferred inserts batched first: by the spine, when it still holds them as
        this snapshot does (it then keeps the work), else here."""
        if self._pending:
            owner, pending = self._owner, self._pending
            got = owner.batched(self._batches, pending) if owner is not None else None
            if got is None:
                df = _consolidated(pending, self.weight_cols).df
                order = owner.order if owner is not None else None
                got = self._batches + ((Batch(df, self.keys, order=order),) if df.height else ())
            self._batches, self._pending = got, ()
        return self._batches

    def __len__(self) -> int:
        """Stored entries (an upper bound on distinct rows until the batches merge)."""
        return sum(len(b) for b in self._batches) + sum(p.df.height for p in self._pending)

    def empty_frame(self) -> pl.DataFrame:
        return pl.DataFrame(schema=self.schema)

    def seek_frame(
        self, probe_keys: pl.DataFrame, exact: bool = True, hashes: np.ndarray | None = None
    ) -> pl.DataFrame:
        """Every stored entry whose key equals a row of `probe_keys` (columns named as `keys`).

        Unconsolidated across batches: the same row may come from several batches. With
        `exact=False` rows of colliding hashes may be included (a caller that joins on the keys
        afterwards filters them anyway). `hashes`: the probe rows' key hashes, sorted, if known."""
        if not self.batches or probe_keys.height == 0:
            return self.empty_frame()
        cast = self.cast_probe(probe_keys)
        if hashes is None or cast is not probe_keys and cast.schema != probe_keys.schema:
            hashes = sorted_unique(key_hash(cast, self.keys))
        elif len(hashes) > 1:  # (sorted; two rows may share a hash)
            hashes = hashes[np.concatenate(([True], hashes[1:] != hashes[:-1]))]
        probe_keys = cast
        found = self.seek_hashes(hashes)
        if not exact or found.height == 0:
            return found
        # drop hash collisions: keep only exact key matches (NULL keys match NULL keys here)
        return semi_join(found, probe_keys, list(self.keys), exact=True)

    def seek_rows(
        self, probe_keys: pl.DataFrame, hashes: np.ndarray
    ) -> tuple[pl.DataFrame, np.ndarray] | None:
        """`seek_frame(probe_keys, exact=True)` for probe rows in the order of their key hashes `hashes`
        (sorted, unique: a consolidated change's, `consolidate_sorted`), with, per entry found, the
        probe row it equals: a hash collision is dropped by comparing the rows at those positions, not
        by a join. None when the probe's types are not the keys' (its hashes are not theirs) or two of
        its rows share a hash."""
        probe_keys = pick(probe_keys, list(self.keys))
        if any(probe_keys.schema[k] != self.schema[k] for k in self.keys):
            return None
        if len(hashes) > 1 and not (hashes[1:] != hashes[:-1]).all():
            return None  # (two probe rows share a hash: a position would not name one row)
        parts, at = [], []
        for b in self.batches:
            pos = b.positions(hashes)
            if not len(pos):
                continue
            j = np.searchsorted(hashes, b.hashes[pos])
            rows = take(b.df, pos)
            same = np.ones(len(pos), dtype=bool)
            for k in self.keys:
                same &= rows[k].eq_missing(probe_keys[k].gather(j)).to_numpy()
            if not same.all():
                rows, j = rows.filter(pl.Series(same)), j[same]
            parts.append(rows)
            at.append(j)
        if not parts:
            return self.empty_frame(), np.zeros(0, dtype=np.intp)
        if len(parts) == 1:
            return parts[0], at[0]
        return pl.concat(parts, how="vertical"), np.concatenate(at)

    def cast_probe(self, probe_keys: pl.DataFrame) -> pl.DataFrame:
        """The probe's key columns with this trace's key types (hashes depend on the type).

        Not strict: a probe value the key type cannot hold (an int64 2**40 probing an int32 key) becomes
        NULL instead of raising; no stored key can equal it anyway (callers joining on the keys afterwards
        drop the NULL-key rows such a probe may find)."""
        have = probe_keys.schema  # (built on each read)
        if all(have[k] == self.schema[k] for k in self.keys):
            return pick(probe_keys, list(self.keys))
        return probe_keys.select(
            [
                pl.col(k).cast(self.schema[k], strict=False) if have[k] != self.schema[k] else pl.col(k)
                for k in self.keys
            ]
        )

    def seek_hashes(self, probe: np.ndarray) -> pl.DataFrame:
        """Every stored entry whose key hash is in `probe` (sorted, unique): may include collisions."""
        if len(probe) <= SEEK_FEW:  # (a few keys: their rows of every batch gathered at once, by NumPy)
            found = [(b, b.positions(probe)) for b in self.batches if len(b)]
            found = [(b, pos) for b, pos in found if len(pos)]
            if not found:
                return self.empty_frame()
            if sum(len(pos) for _, pos in found) <= SEEK_FEW:
                arrays = [b.arrays() for b, _ in found]
                if all(a is not None for a in arrays):
                    # (a seek of a few rows into a trace of five batches: ~5 Polars gathers of ~70 µs
                    # each and a concatenation otherwise)
                    cols = [(a, pos) for a, (_, pos) in zip(arrays, found, strict=True)]
                    return take_columns(found[0][0].df.schema, cols)  # type: ignore[arg-type]
            parts = [take(b.df, pos) for b, pos in found]
        else:
            parts = [p for p in (b.seek(probe) for b in self.batches) if p.height]
        if not parts:
            return self.empty_frame()
        return pl.concat(parts, how="vertical") if len(parts) > 1 else parts[0]

    def seek(self, probe_keys: pl.DataFrame) -> ZSet:
        """The consolidated rows of the given keys, as a Z-set (indexed by `keys`)."""
        df = consolidate_frame(self.seek_frame(probe_keys), self.weight_cols)
        return IndexedZSet(df, self.keys, consolidated=True)

    def key_runs(self, probe_keys: pl.DataFrame, min_rows: int) -> dict[int, list[pl.DataFrame]]:
        """The entries of each probe key (row i) with at least `min_rows` of them, one zero-copy slice
        per batch, sorted by the batches' order column (the spine must have one); a key whose hash
        another key shares in some batch is left out (`TraceKernel.key_runs`)."""
        if not self.batches or probe_keys.height == 0 or self.batches[0].order is None:
            return {}
        hs = key_hash(self.cast_probe(probe_keys), self.keys)
        los, ns = [], []
        for b in self.batches:
            lo = np.searchsorted(b.hashes, hs, side="left")
            los.append(lo)
            ns.append(np.searchsorted(b.hashes, hs, side="right") - lo)
        sizes = np.sum(ns, axis=0)
        out: dict[int, list[pl.DataFrame]] = {}
        keys = list(self.keys)
        for i in np.flatnonzero(sizes >= max(min_rows, 1)):
            if any(b.clash is not None and hs[i] in b.clash for b in self.batches):
                continue
            want = probe_keys.row(int(i))
            parts = [
                b.df.slice(int(lo[i]), int(n[i]))
                for b, lo, n in zip(self.batches, los, ns, strict=True)
                if n[i]
            ]
            # no two keys share a hash within a batch: a slice's first row tells its key
            if all(p.select(keys).row(0) == want for p in parts):
                out[int(i)] = parts
        return out

    def to_frame(self) -> pl.DataFrame:
        """All rows, consolidated (O(size): for non-incremental use and checks)."""
        if not self.batches:
            return self.empty_frame()
        if len(self.batches) == 1:  # (a batch is consolidated: a fresh run's trace, read by a recompute)
            return self.batches[0].df
        df = pl.concat([b.df for b in self.batches], how="vertical")
        return consolidate_frame(df, self.weight_cols)

    def to_zset(self) -> ZSet:
        return IndexedZSet(self.to_frame(), self.keys, consolidated=True)

    def raw_frame(self) -> pl.DataFrame:
        """All stored entries, not consolidated across batches (enough for a bilinear operator)."""
        if not self.batches:
            return self.empty_frame()
        return (
            pl.concat([b.df for b in self.batches], how="vertical")
            if len(self.batches) > 1
            else self.batches[0].df
        )


class Spine:
    """A mutable trace: append consolidated batches, merge geometrically, hand out snapshots."""

    def __init__(
        self,
        keys: Sequence[str],
        schema: pl.Schema,
        weight_cols: Sequence[str] = (WEIGHT,),
        order: str | None = None,
    ) -> None:
        self.keys = tuple(keys)
        self.schema = schema
        self.weight_cols = tuple(weight_cols)
        self.order = order  # a column each key's rows are sorted by within a batch (`Batch`)
        self.batches: list[Batch] = []
        # inserts deferred until the trace is read (`insert(defer=True)`), and the last batching of
        # them: (the batches and the frames it started from, the batches it made)
        self.pending: list[Deferred] = []
        self._last: tuple[tuple[object, ...], tuple[Batch, ...]] | None = None
        # during a recursive scope's step (`hold`): the batches older than the step, which the step's
        # batches do not merge into until it ends (`release`)
        self.floor = 0
        self.holding = False

    def insert(
        self,
        df: pl.DataFrame,
        consolidated: bool = False,
        defer: bool = False,
        hashes: np.ndarray | None = None,
    ) -> None:
        """Add a change (a frame with this trace's columns) to the integral. `hashes`: of a consolidated
        frame, its rows' sorted hashes over its data columns (`consolidate_sorted`), which are its key
        hashes when this trace is indexed by every column, in order: the change is then a batch as it is.

        `defer`: keep it as it is until the trace is read (a seek of a snapshot taken since, or
        `settle`); the changes deferred until then are consolidated and batched at once. A recursive
        scope's iterations write traces that only the next outer step reads (a join's side whose
        other side changes no more): one batching per step instead of one insert and merge per
        iteration."""
        if df.height == 0:
            return
        if df.columns != list(self.schema):  # (the hashes are of the rows in the given order)
            df, hashes = pick(df, list(self.schema)), None
        if not consolidated:
            df, hashes = consolidate_sorted(df, self.weight_cols, ordered=self.by_rows(df.columns))
        if defer:  # kept consolidated: one deferred insert is batched as it is
            self.pending.append(Deferred(df, hashes))
            return
        self.settle()  # (in order: the batches hold every insert before the first deferred one)
        self._insert(df, hashes)

    def by_rows(self, columns: Sequence[str]) -> bool:
        """The trace is indexed by every data column of a frame of these `columns`, in their order (its
        rows' hashes are their key hashes)."""
        return self.order is None and [c for c in columns if c not in self.weight_cols] == list(self.keys)

    def settle(self) -> None:
        """Batch every deferred insert."""
        if self.pending:
            self._batch(len(self.pending))

    def hold(self) -> None:
        """From now until `release`, the batches made merge among themselves only, not into the older
        ones. A recursive scope's step writes a trace many times (an iteration's insert, batched when
        the next one reads it), and under delete-and-rederive most of what it inserts it deletes again
        (or the reverse): merged into the trace's largest batches at once, each such change costs a
        merge of the whole trace (tc at 1,000 nodes: a 2.4M-row batch merged with 1.5M rows of the
        step's, which then cancelled); held apart, they cancel among themselves and what is left
        joins the older batches once, at the step's end.

        The held batches merge by tiers: an insert is a batch of tier 0, and `HELD_TIER` batches of one
        tier are merged into one of the next, in one pass (`merge_many`). A row is merged once per tier
        (log_8 of the step's inserts) instead of once per doubling, and the step holds at most
        `HELD_TIER - 1` batches per tier for a seek to search. (tc at 1,000 nodes: a step writes ~1.2M
        rows of facts' counts into ~20 held batches; by tiers its batch took 1.03-1.09 s against
        1.15-1.48 s with the held batches merged geometrically, same generation and points-to ~10%
        less; merging none until the release was as fast on tc and slower on same generation's 200
        iterations, whose seeks then searched every batch.)"""
        self.settle()
        self.floor = len(self.batches)
        self.holding = True

    def release(self) -> None:
        """End a `hold`: the deferred inserts batched, the step's batches merged into one (in one pass,
        `merge_many`), and that one into the older batches geometrically."""
        self.settle()
        self._merge(whole=True)
        if self.batches and len(self.batches[-1]) == 0:
            self.batches.pop()
        self.floor, self.holding = 0, False
        self._merge()
        # the last batching's key holds the step's batches and deferred inserts, merged away now: kept,
        # they outlived the step (transitive closure of 2,000 nodes under dred: 450 MB of old batches
        # held between steps, against 0.57 GiB of traces); a snapshot taken before batches itself
        self._last = None

    def held_rows(self) -> int:
        """The rows a `hold` keeps apart: its deferred inserts and the batches made since."""
        return sum(p.df.height for p in self.pending) + sum(len(b) for b in self.batches[self.floor :])

    def batched(self, batches: tuple[Batch, ...], pending: tuple[Deferred, ...]) -> tuple[Batch, ...] | None:
        """The batches of a snapshot taken with `batches` and deferred inserts `pending`, made by
        batching here those of them this spine still holds (the last ones, its first), or by the last
        batching when that started from them; None when neither (the snapshot batches them)."""
        key = (*batches, *pending)
        if self._last is not None and _same(self._last[0], key):
            return self._last[1]
        # the spine batches its deferred inserts in order, and only those (`insert`): when its first is
        # the snapshot's i-th, its batches are the snapshot's and its first i deferred inserts (as when
        # a recursive distinct reads the snapshot before the last, taken before the last batching)
        first = self.pending[0] if self.pending else None
        i = next((j for j, p in enumerate(pending) if p is first), None)
        if i is None or not _same(self.pending[: len(pending) - i], pending[i:]):
            return None
        self._batch(len(pending) - i)
        out = tuple(self.batches)
        self._last = (key, out)
        return out

    def _batch(self, n: int) -> None:
        """Batch the first `n` deferred inserts, as one."""
        mine, self.pending = self.pending[:n], self.pending[n:]
        d = _consolidated(mine, self.weight_cols)
        self._insert(d.df, d.hashes)

    def _insert(self, df: pl.DataFrame, hashes: np.ndarray | None) -> None:
        """Add a consolidated change in this trace's column order; `hashes`: its rows' sorted hashes
        over its data columns, if known (they index it only when those are the keys)."""
        if hashes is not None and not self.by_rows(df.columns):
            hashes = None
        if df.height == 0:
            return
        bs = self.batches
        if len(bs) == 1 and len(bs[0]) + df.height <= SMALL:  # a small trace stays one batch, rebuilt
            both = pl.concat([bs[0].df, df], how="vertical")
            cons = consolidate_frame(both, self.weight_cols, few_repeats=False)
            faults.point("merge")
            self.batches = [Batch(cons, self.keys, order=self.order)]
            return
        bs.append(Batch(df, self.keys, hashes, order=self.order))
        self._merge()

    def _merge(self, whole: bool = False) -> None:
        """Merge the newest batches, none below `floor`: geometrically, or while held (`hold`) by tiers;
        `whole`: all of those into one."""
        bs = self.batches
        if whole:
            if len(bs) - self.floor >= 2:
                held = bs[self.floor :]
                del bs[self.floor :]
                faults.point("merge")
                bs.append(merge_many(held, self.keys, self.weight_cols))
            return
        if self.holding:
            while len(bs) - self.floor >= HELD_TIER and len({b.level for b in bs[-HELD_TIER:]}) == 1:
                level = bs[-1].level
                held = bs[-HELD_TIER:]
                del bs[-HELD_TIER:]
                faults.point("merge")
                merged = merge_many(held, self.keys, self.weight_cols)
                if len(merged):
                    merged.level = level + 1
                    bs.append(merged)
            return
        while len(bs) - self.floor >= 2 and len(bs[-2]) <= MERGE_FACTOR * len(bs[-1]):
            b = bs.pop()
            a = bs.pop()
            faults.point("merge")
            bs.append(merge_batches(a, b, self.keys, self.weight_cols))

    def drop(self, below: Sequence[tuple[str, Any]]) -> int:
        """Drop the rows whose every column of `below` is below its bound (a NULL is not): state no
        change will reach again (`circuit/waterline.py`). Returns the number of rows dropped."""
        self.settle()
        dead = all_below(below)
        kept, dropped, old = [], 0, 0  # old: the kept batches of the `floor` older ones
        for i, b in enumerate(self.batches):
            mask = b.df.select(dead.alias("d"))["d"].to_numpy()
            n = int(mask.sum())
            dropped += n
            if n == len(b):
                continue
            if n:
                keep = ~mask
                hashes = b.hashes[keep] if b.order is None else None
                level, b = b.level, Batch(b.df.filter(pl.Series(keep)), self.keys, hashes, order=b.order)
                b.level = level
            kept.append(b)
            old += i < self.floor
        self.batches, self._last, self.floor = kept, None, old
        return dropped

    def snapshot(self) -> TraceSnapshot:
        return TraceSnapshot(
            tuple(self.batches), self.keys, self.schema, self.weight_cols, tuple(self.pending), self
        )

    def __len__(self) -> int:
        return sum(len(b) for b in self.batches) + sum(p.df.height for p in self.pending)

    def nbytes(self) -> int:
        """The bytes the trace holds, about: its frames as Polars estimates them, and their hashes."""
        held = sum(b.df.estimated_size() + b.hashes.nbytes for b in self.batches)
        return int(held + sum(p.df.estimated_size() for p in self.pending))

    # ---- checkpoint ---------------------------------------------------------------------------
    def to_state(self) -> list[pl.DataFrame]:
        self.settle()
        return [b.df for b in self.batches]

    def restore(self, frames: list[pl.DataFrame]) -> None:
        self.batches = [Batch(f, self.keys, order=self.order) for f in frames]
        self.pending, self._last = [], None
