"""A growing set of rows that tells which rows of a batch are new: the `distinct` of semi-naive
evaluation from empty state (`operators/fresh.py`), where a fact is derived once and then only looked
up.

Each row is packed into one int64 key, exactly (no hashing, so no collisions to check): an integer-like
column (integers, booleans, dates, times) by its offset from the smallest value seen, any other column
by a stable code (`packed_trie.Dictionary`), the columns' codes side by side in `bits` each. Keys of at
most DENSE_BITS are held as a bitmap, a bool a key up to BOOL_BITS and a bit a key past them (a test is
one read); longer ones in sorted runs of geometrically
decreasing length (a log-structured set: a batch's new keys are a run, merged into the one before while
that is less than twice as long), so that a batch costs a few binary searches per run and each key is
merged O(log n) times. A value outside a column's current range (or a dictionary past its bits)
repacks every key; rows whose columns need more than 62 bits together, or a NULL in an integer column,
make the set a frame, and a batch an anti-join against it. `new` also tallies its rows' weights by the
same keys (a recursive distinct's derivations), summed whenever they pass COMPACT rows (a count per key,
or one sort of the keys), or once and apart when the caller knows they meet no key tallied before
(`count(apart=True)`); `counts` gives them as a consolidated frame. `fresh_round` keeps a batch's
weights as a *round* instead: its distinct keys with their weights summed and which of them were new,
what a fresh run's supports are read from (`packed_rank_fold.round_supports`) without packing the
derivations' rank beside the fact and tallying the pairs.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from dbspark.algebra.consolidate import INTEGER_LIKE, WEIGHT, sorted_member, sorted_unique, weight_sum_checked
from dbspark.algebra.weights import magnitude
from dbspark.columnar.packed_trie import MAX_BITS, Dictionary, bits_for, pack, pack_offsets, unpack
from dbspark.errors import WeightError

DENSE_BITS = 28  # keys of at most this many bits are held as a bitmap (at most 32 MB)
BOOL_BITS = 25  # and of at most this many, a bool each (a test one gather, no shifts: 32 MB at most)
COUNT_BITS = 24  # and tallied by a count per key (at most 128 MB, for the moment of a sum)
COMPACT = 4_000_000  # tallied rows kept before they are summed (then twice what that left)


class _Offsets:
    """An integer-like column's codes: value - lo, in [0, 2**bits)."""

    def __init__(self, dtype: pl.DataType) -> None:
        self.dtype = dtype
        self.physical = pl.Series([], dtype=dtype).to_physical().dtype
        self.lo, self.hi = 0, -1  # the range seen (empty)
        # an Int64 column's values are its codes' source as they are (`to_physical` is a query: ~24 µs)
        self.plain = dtype == pl.Int64

    def _ints(self, s: pl.Series) -> np.ndarray:
        return s.to_numpy() if self.plain else s.to_physical().cast(pl.Int64).to_numpy()

    def fits(self, s: pl.Series) -> bool:
        return s.null_count() == 0

    def grow(self, s: pl.Series) -> None:
        """Take in the values of `s` (the range widened: `RowSet._pack` repacks on a new layout)."""
        if len(s) == 0:
            return
        p = s if self.plain else s.to_physical()
        lo, hi = int(p.min()), int(p.max())  # type: ignore[arg-type]
        self.lo, self.hi = (lo, hi) if self.hi < self.lo else (min(lo, self.lo), max(hi, self.hi))

    @property
    def bits(self) -> int:
        return bits_for(self.hi - self.lo + 1) if self.hi >= self.lo else 1

    def raw(self, s: pl.Series) -> tuple[np.ndarray, int]:
        """The values as int64 (an Int64 column's own buffer) and the offset that makes them codes
        (`pack_offsets` subtracts it in the key)."""
        return self._ints(s), self.lo

    def decode(self, codes: np.ndarray, name: str, lo: int | None = None) -> pl.Series:
        base = np.int64(self.lo if lo is None else lo)
        if self.plain:  # (the casts are queries, ~15 µs each: a fresh run decodes every iteration)
            return pl.Series(name, codes + base)
        return pl.Series(name, codes + base).cast(self.physical).cast(self.dtype)


class _Codes:
    """Any other column's codes: a stable dictionary of its values (NULL one of them)."""

    def __init__(self, dtype: pl.DataType) -> None:
        self.dtype = dtype
        self.dictionary = Dictionary(dtype)
        self.pending: np.ndarray | None = None

    def fits(self, s: pl.Series) -> bool:
        return True

    def grow(self, s: pl.Series) -> None:
        """Take in the values of `s` (new ones get codes), keeping their codes for `raw`."""
        (self.pending,) = self.dictionary.encode([s])

    @property
    def bits(self) -> int:
        return bits_for(len(self.dictionary))

    def raw(self, s: pl.Series) -> tuple[np.ndarray, int]:
        """The values' codes, and 0 (no offset)."""
        codes, self.pending = self.pending, None  # (the batch just taken in by `grow`)
        return codes if codes is not None else self.dictionary.encode([s])[0], 0

    def decode(self, codes: np.ndarray, name: str, lo: int | None = None) -> pl.Series:
        return self.dictionary.decode(codes).rename(name)


class Bools:
    """A set of integer keys in [0, 2**bits) as a bool per key: a test is one gather (`Bits` does
    five passes more; for small layouts the bools' memory is the smaller cost)."""

    def __init__(self, bits: int) -> None:
        self.bools = np.zeros(1 << bits, dtype=bool)

    def has(self, keys: np.ndarray) -> np.ndarray:
        """Which of `keys` are in the set."""
        return self.bools[keys]

    def add(self, keys: np.ndarray) -> None:
        """Add `keys` (any order)."""
        self.bools[keys] = True

    def keys(self) -> np.ndarray:
        """The keys in the set, sorted."""
        return np.flatnonzero(self.bools).astype(np.int64, copy=False)


class Bits:
    """A set of integer keys in [0, 2**bits) as a bitmap, a bit a key: a test is one read of a byte, and
    the map an eighth of a bool's (26-bit keys, transitive closure of 5,000 nodes: 8 MB, read at random
    by every round's tens of millions of derivations; sorted runs searched instead took 2.3 s of its
    first step's 15)."""

    def __init__(self, bits: int) -> None:
        self.bytes = np.zeros(max(1, (1 << bits) >> 3), dtype=np.uint8)

    def has(self, keys: np.ndarray) -> np.ndarray:
        """Which of `keys` are in the set."""
        return ((self.bytes[keys >> 3] >> (keys & 7).astype(np.uint8)) & np.uint8(1)).astype(bool)

    def add(self, keys: np.ndarray) -> None:
        """Add `keys`, sorted (their bits or-ed into their bytes, a byte's at once)."""
        if not len(keys):
            return
        at = keys >> 3
        first = np.flatnonzero(np.concatenate(([True], at[1:] != at[:-1])))
        bit = np.left_shift(np.uint8(1), (keys & 7).astype(np.uint8))
        self.bytes[at[first]] |= np.bitwise_or.reduceat(bit, first)

    def keys(self) -> np.ndarray:
        """The keys in the set, sorted."""
        nz = np.flatnonzero(self.bytes != 0)  # (a bool a byte: 5x faster than nonzero of the bytes)
        byte, bit = np.nonzero(np.unpackbits(self.bytes[nz, None], axis=1, bitorder="little"))
        return nz[byte].astype(np.int64) * 8 + bit


def _unique(keys: np.ndarray, dense: Bits | Bools) -> np.ndarray:
    """`keys` once each: sorted for a `Bits` (its `add` reads them so), else by a hash set (no sort)."""
    return sorted_unique(keys) if isinstance(dense, Bits) else pl.Series(keys).unique().to_numpy()


class RowSet:
    """The rows of `schema` seen so far; `new(batch)` returns the batch's distinct rows not seen yet, and
    adds them."""

    def __init__(self, schema: pl.Schema) -> None:
        self.schema = schema
        self.cols = list(schema)
        self.columns = [_Offsets(t) if isinstance(t, INTEGER_LIKE) else _Codes(t) for t in schema.values()]
        self.runs: list[np.ndarray] = []  # sorted keys, each run at least twice the next one's length
        self.dense: Bits | Bools | None = None  # instead of runs, keys of at most DENSE_BITS: a bitmap
        self.frame: pl.DataFrame | None = (
            None  # instead of keys: past MAX_BITS, or a NULL in an offset column
        )
        self.size = 0
        # the weights of the rows `new` was given (a recursive distinct's derivations): (keys, weights)
        # pairs, summed into one whenever they pass `compact` rows; frames once the set is a frame
        self.tally: list[tuple[np.ndarray, np.ndarray]] = []
        # tallies summed apart (`count(apart=True)`): keys once each, none among another part's
        self.apart: list[tuple[np.ndarray, np.ndarray]] = []
        self.tally_frames: list[pl.DataFrame] = []
        self.compact = COMPACT
        # `fresh_round`'s batches: (their distinct keys, sorted; the weights summed by key; which keys were
        # new), in order; decoded into frames (the set's columns and WEIGHT) once the set is a frame
        self.rounds: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.round_frames: list[pl.DataFrame] = []
        self._place(np.zeros(0, dtype=np.int64))

    def __len__(self) -> int:
        return self.size

    def new(self, batch: pl.DataFrame, weights: np.ndarray | None = None) -> pl.DataFrame:
        """The distinct rows of `batch` (its columns `schema`'s, in that order) not in the set; they are
        added to it. `weights`: the rows' weights, tallied by row (`counts`)."""
        batch = batch.select(self.cols)
        keys = self._pack(batch)
        if keys is None:
            assert self.frame is not None
            if weights is not None:
                self.tally_frames.append(batch.with_columns(pl.Series(WEIGHT, weights, dtype=pl.Int64)))
            fresh = batch.unique().join(self.frame, on=self.cols, how="anti", nulls_equal=True)
            self.frame = pl.concat([self.frame, fresh], how="vertical")
            self.size += fresh.height
            return fresh
        if weights is not None:
            self._count(keys, weights)
        if self.dense is not None:
            keys = _unique(keys[~self.dense.has(keys)], self.dense)
            self.dense.add(keys)
        else:
            keys = sorted_unique(keys)  # (sorted: the searches run in order)
            keys = keys[~self._contains(keys)]
            self._add(keys)
        self.size += len(keys)
        return self._decode(keys)

    def packed(self, batch: pl.DataFrame) -> np.ndarray | None:
        """The rows' keys in this set's layout, widened to take them in (the keys held are repacked);
        None where they do not pack (a NULL in an integer column, more than 62 bits: the set is then a
        frame)."""
        return self._pack(batch.select(self.cols))

    def unpacked(self, keys: np.ndarray) -> pl.DataFrame:
        """Keys of the current layout (`packed`) as rows of the set's columns."""
        return self._decode(keys)

    def new_rows(self, batch: pl.DataFrame) -> np.ndarray | None:
        """Which rows of `batch` are rows not in the set (a mask; their rows are added to it); None once
        the set is kept as a frame (then `new` serves)."""
        got = self._new_keys(batch)
        return None if got is None else got[0]

    def fresh_rows(self, batch: pl.DataFrame) -> tuple[np.ndarray, pl.DataFrame] | None:
        """`new_rows`, and the rows not in the set themselves, each once (the set's columns); None once
        the set is kept as a frame."""
        got = self._new_keys(batch)
        return None if got is None else (got[0], self._decode(got[1]))

    def fresh_round(self, batch: pl.DataFrame, weights: np.ndarray) -> pl.DataFrame | None:
        """The distinct rows of `batch` not in the set (added to it, in the order of their keys), the batch
        kept as a round (`rounds`): its distinct rows' keys, their `weights` summed (each positive) and
        which were new. None once the set is kept as a frame (the rounds so far then as frames: `take_rounds`).

        The sum is the tally's (`_summed`: a count per key over a small layout, else one sort), and the
        keys it leaves sorted and once each are what the test against the set reads: tallying a fresh
        run's derivations by fact costs no second pack and sort (2,000-node transitive closure: 15M
        derivations, 0.86 s of packing the fact and rank together and summing the pairs)."""
        keys = self._pack(batch)
        if keys is None:
            return None
        u, w = self._summed(keys, weights, own=True)
        new = ~self.dense.has(u) if self.dense is not None else ~self._contains(u)
        fresh = u[new]
        if self.dense is not None:
            self.dense.add(fresh)
        else:
            self._add(fresh)
        self.size += len(fresh)
        self.rounds.append((u, w, new))
        return self._decode(fresh)

    def take_rounds(self) -> list[pl.DataFrame]:
        """The rounds' distinct rows with their summed weights (the set's columns, then WEIGHT), in
        order; the set keeps them no longer."""
        out = self.round_frames + [self._weighed(k, w) for k, w, _ in self.rounds]
        self.rounds, self.round_frames = [], []
        return out

    def _new_keys(self, batch: pl.DataFrame) -> tuple[np.ndarray, np.ndarray] | None:
        """(the mask of `new_rows`, the new rows' keys once each), the rows added to the set."""
        keys = self._pack(batch)  # (it reads the set's columns by name)
        if keys is None:
            return None
        if self.dense is not None:
            mask = ~self.dense.has(keys)
            fresh = _unique(keys[mask], self.dense)
            self.dense.add(fresh)
        else:  # (NumPy's unique, sorted, with each row's place among them: 1M keys in 98 ms, against 450
            # for Polars' unique and NumPy's `isin`)
            uk, at = np.unique(keys, return_inverse=True)
            new = ~self._contains(uk)
            fresh = uk[new]
            self._add(fresh)
            mask = new[at]
        self.size += len(fresh)
        return mask, fresh

    def count(self, batch: pl.DataFrame, weights: np.ndarray, apart: bool = False) -> None:
        """Tally the rows' weights (`counts`) without adding them to the set. `apart`: no row of `batch`
        equals a row tallied before (a fresh run's derivations of one iteration, whose rank no earlier
        iteration's had: `operators/fresh.py`), so they are summed among themselves once and kept
        apart, never summed again with the others (2,000-node transitive closure: 15M derivations,
        whose sums with those before took 3 of the fresh run's 8 s)."""
        keys = self._pack(batch)
        if keys is None:
            rows = pl.DataFrame(
                [*(batch.get_column(c) for c in self.cols), pl.Series(WEIGHT, weights, dtype=pl.Int64)]
            )
            self.tally_frames.append(rows)
        elif apart:
            self.apart.append(self._summed(keys, weights))
        else:
            self._count(keys, weights)

    def counts(self) -> pl.DataFrame:
        """The rows tallied by `new` and `count`, each once with its weights summed (0 dropped): the
        set's columns, then WEIGHT."""
        parts = list(self.tally_frames)
        if self.tally or self.apart:
            u, w = self._counted()
            parts.insert(0, self._weighed(u, w))
        if not parts:
            return pl.DataFrame(schema={**self.schema, WEIGHT: pl.Int64})
        if len(parts) == 1 and not self.tally_frames:
            return parts[0]
        out = weight_sum_checked(pl.concat(parts, how="vertical_relaxed"), self.cols)
        return out.filter(pl.col(WEIGHT) != 0).select([*self.cols, WEIGHT])

    def packed_counts(self) -> tuple[np.ndarray, np.ndarray, list[tuple[int, int]]] | None:
        """`counts` as packed keys, their weights and the layout (each column's bits and least value), or
        None unless every column is an integer-like one kept by offset and the set is not a frame. A
        caller that reads the columns from the keys (a fresh run's derivations by fact and rank: 13M
        rows at 2,000-node transitive closure) skips the decode into a frame."""
        if (
            self.frame is not None
            or self.tally_frames
            or not all(isinstance(c, _Offsets) for c in self.columns)
        ):
            return None
        if not (self.tally or self.apart):
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), self._layout()
        return (*self._counted(), self._layout())

    def _counted(self) -> tuple[np.ndarray, np.ndarray]:
        """The tallied keys once each, their weights summed (0 dropped)."""
        if self.tally:  # (summed with the parts kept apart, whose rows they may share)
            keys, weights = (np.concatenate(x) for x in zip(*self.tally, *self.apart, strict=True))
            return self._summed(keys, weights, own=True)
        return tuple(np.concatenate(x) for x in zip(*self.apart, strict=True))  # type: ignore[return-value]

    def _count(self, keys: np.ndarray, weights: np.ndarray) -> None:
        self.tally.append((keys, weights))
        if sum(len(k) for k, _ in self.tally) > self.compact:
            keys, weights = (np.concatenate(x) for x in zip(*self.tally, strict=True))
            u, w = self._summed(keys, weights, own=True)
            self.tally = [(u, w)]
            self.compact = max(self.compact, 2 * len(u))

    def _summed(self, keys: np.ndarray, w: np.ndarray, own: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """The keys once each, with their weights summed (0 dropped): a count per key for a small
        layout, else one sort (of `keys` themselves when the caller `own`s them and every weight is 1:
        no copy of them); a sum that could leave int64 raises `WeightError`."""
        if not len(w):
            return keys, w
        bound = magnitude(w) * len(w)
        if bound >= 2**63 - 1:
            raise WeightError("weight overflow while counting a recursive distinct's derivations")
        ones = bool((w == 1).all())
        space = 1 << sum(self.bits)
        if sum(self.bits) <= COUNT_BITS and bound < 2**53 and len(keys) >= space >> 4:  # (float sums exact)
            sums = np.bincount(keys, weights=None if ones else w, minlength=space)
            # (the keys found by a bool a key: NumPy's nonzero of int64 counts reads them 5x slower,
            # 21 against 4 ms over 4M; `at` is already int64, the counts too when every weight is 1)
            at = np.flatnonzero(sums != 0).astype(np.int64, copy=False)
            return at, sums[at].astype(np.int64, copy=False)
        if ones:  # (NumPy's sort of the keys alone: 4M keys in 50 ms, against 160 ms by Polars)
            if not own:
                u, n = np.unique(keys, return_counts=True)
                return u, n.astype(np.int64)
            keys.sort()
            edge = np.empty(len(keys), dtype=bool)
            edge[0] = True
            np.not_equal(keys[1:], keys[:-1], out=edge[1:])
            starts = np.flatnonzero(edge)
            del edge
            n = np.empty(len(starts), dtype=np.int64)
            np.subtract(starts[1:], starts[:-1], out=n[:-1])
            n[-1] = len(keys) - starts[-1]
            return keys[starts], n
        o = np.argsort(keys)
        k, ws = keys[o], w[o]
        starts = np.flatnonzero(np.concatenate(([True], k[1:] != k[:-1])))
        u, total = k[starts], np.add.reduceat(ws, starts)
        return u[total != 0], total[total != 0]

    @property
    def bits(self) -> list[int]:
        return [c.bits for c in self.columns]

    def _layout(self) -> list[tuple[int, int]]:
        """Each column's bits and offset (0 for a dictionary's codes): what a key's decoding needs."""
        return [(c.bits, c.lo if isinstance(c, _Offsets) else 0) for c in self.columns]

    def _pack(self, batch: pl.DataFrame) -> np.ndarray | None:
        """The rows' keys, the columns' codes taking in their values first (every key repacked when the
        layout changes); None once the set is kept as a frame."""
        if self.frame is None and not all(
            c.fits(batch[n]) for c, n in zip(self.columns, self.cols, strict=True)
        ):
            self._to_frame()
        if self.frame is not None:
            return None
        before = self._layout()
        for c, n in zip(self.columns, self.cols, strict=True):
            c.grow(batch[n])
        if sum(self.bits) > MAX_BITS:
            self._to_frame(before)
            return None
        if before != self._layout():
            self._place(np.sort(self._repacked(self._keys(), before)))
            self.tally = [(self._repacked(k, before), w) for k, w in self.tally]
            self.apart = [(self._repacked(k, before), w) for k, w in self.apart]
            self.rounds = [(self._repacked(k, before), w, n) for k, w, n in self.rounds]
        return pack_offsets(
            [c.raw(batch[n]) for c, n in zip(self.columns, self.cols, strict=True)], self.bits
        )

    def _repacked(self, keys: np.ndarray, old: list[tuple[int, int]]) -> np.ndarray:
        """Keys of the layout `old` in the current one (an offset column's codes shifted by the old
        offset less the new)."""
        codes = unpack(keys, [b for b, _ in old])
        for i, (c, (_, lo)) in enumerate(zip(self.columns, old, strict=True)):
            if isinstance(c, _Offsets):
                codes[i] = codes[i] + np.int64(lo - c.lo)
        return pack(codes, self.bits)

    def _place(self, keys: np.ndarray) -> None:
        """Hold `keys` (sorted, unique) as a bitmap when the layout is small enough, else as one run."""
        if sum(self.bits) <= DENSE_BITS:
            self.dense = Bools(sum(self.bits)) if sum(self.bits) <= BOOL_BITS else Bits(sum(self.bits))
            self.dense.add(keys)
            self.runs = []
        else:
            self.dense, self.runs = None, [keys] if len(keys) else []

    def _contains(self, keys: np.ndarray) -> np.ndarray:
        found = np.zeros(len(keys), dtype=bool)
        for run in self.runs:
            found |= sorted_member(keys, run)
        return found

    def _add(self, keys: np.ndarray) -> None:
        if not len(keys):
            return
        self.runs.append(keys)
        while len(self.runs) > 1 and len(self.runs[-2]) < 2 * len(self.runs[-1]):
            b, a = self.runs.pop(), self.runs.pop()
            self.runs.append(np.sort(np.concatenate([a, b]), kind="stable"))  # (two runs: a linear merge)

    def _keys(self) -> np.ndarray:
        if self.dense is not None:
            return self.dense.keys()
        return np.concatenate(self.runs) if self.runs else np.zeros(0, dtype=np.int64)

    def _decode(self, keys: np.ndarray, layout: list[tuple[int, int]] | None = None) -> pl.DataFrame:
        layout = layout or self._layout()
        codes = unpack(keys, [b for b, _ in layout])
        return pl.DataFrame(
            [
                c.decode(k, n, lo)
                for c, k, n, (_, lo) in zip(self.columns, codes, self.cols, layout, strict=True)
            ]
        )

    def _weighed(
        self, keys: np.ndarray, w: np.ndarray, layout: list[tuple[int, int]] | None = None
    ) -> pl.DataFrame:
        """Keys decoded into the set's columns (in `layout`, else the current one), with the weights `w`."""
        return self._decode(keys, layout).with_columns(pl.Series(WEIGHT, w, dtype=pl.Int64))

    def _to_frame(self, old: list[tuple[int, int]] | None = None) -> None:
        self.tally_frames += [self._weighed(k, w, old) for k, w in [*self.tally, *self.apart]]
        self.round_frames += [self._weighed(k, w, old) for k, w, _ in self.rounds]
        self.tally, self.apart, self.rounds = [], [], []
        keys = self._keys()
        self.frame = self._decode(keys, old) if len(keys) else pl.DataFrame(schema=self.schema)
        self.runs, self.dense = [], None
