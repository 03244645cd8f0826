"""Consolidation: the weights of equal rows summed, the rows whose weights are all zero dropped.

A Z-set's canonical form (`dbsp-paper.txt` §4.1). A step consolidates every change several times
(before its join, into its integral, in the merges of a trace's batches), and a Polars group-by of a
few thousand rows costs 0.4-0.8 ms on this machine however few of them repeat, while the frames a step
consolidates mostly repeat few rows or none. So the rows are hashed first (`key_hash` of every data
column) and sorted by hash: a frame of distinct rows costs that alone. With integer-like columns
without NULLs, equal rows are adjacent in hash order and NumPy sums them (`_summed_runs`, a hash shared
by different rows detected); otherwise only the rows whose hash occurs more than once are grouped by
Polars. Polars' hash is equal for values its group-by takes as equal (-0.0 as 0.0, every NaN as one
NaN, NULL as NULL); the fast path is taken only for column types where that is plain (`_HASHED`), the
rest are grouped whole.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from dbspark.algebra.weights import magnitude
from dbspark.errors import WeightError

WEIGHT = "__w"
SEED = 0x5EED
_OVERFLOW = 9.2e18
PHYSICAL_INT = (  # types whose physical values are integers (compared by NumPy)
    pl.Int8,
    pl.Int16,
    pl.Int32,
    pl.Int64,
    pl.UInt8,
    pl.UInt16,
    pl.UInt32,
    pl.UInt64,
    pl.Boolean,
    pl.Date,
    pl.Datetime,
    pl.Duration,
    pl.Time,
)
# integer-like types whose values have an int64 offset (UInt64: a value past 2**63 has none)
INTEGER_LIKE = tuple(t for t in PHYSICAL_INT if t is not pl.UInt64)
# column types whose Polars hash is equal exactly for the values a group-by takes as equal
_HASHED = (*PHYSICAL_INT, pl.Float32, pl.Float64, pl.String, pl.Binary, pl.Decimal, pl.Null)


_INDEX = np.uint32 if pl.get_index_type() == pl.UInt32 else np.uint64


_GATHER = hasattr(pl.DataFrame, "gather")  # (Polars 2; before it, a frame indexed by a Series)
_FEW = 4096
_BY_COLUMN = 1 << 20


def take(df: pl.DataFrame, positions: np.ndarray) -> pl.DataFrame:
    """The rows of `df` at `positions` (non-negative integers), in that order. A few by
    `DataFrame.gather` where Polars has it: in a recursive step's seeks and merges (hundreds of takes
    of a few rows a batch) it took 32-40 µs a call against 55-95 µs for `df[Series]` (whose item lookup
    checks the key's type and range first), measured inside reachability's batches; alone, both take
    ~20 µs. Many by a Series of Polars' index type, which gathers in parallel (300k rows: 1.7 against
    2.9 ms).

    A frame of several chunks (a concatenation: a merge's two batches, a step's deferred inserts) is
    made one first when an eighth of its rows or more are taken: Polars gathers rows in no order across
    chunks 3-16x slower than from one (3.3M rows of five int64 columns in 200 chunks: 0.40-0.47 s, one
    copy and the gather 0.04-0.11 s; a tenth of them 0.044 against 0.012 s; with two chunks the break-even
    is about a tenth). From `_BY_COLUMN` rows on, a column at a time (0.06 s there), so that the copy
    held beside the frame and the result is one column's, not the frame's (a recursive step's largest
    merges hold the step's facts twice already)."""
    if _GATHER and len(positions) <= _FEW:
        return df.gather(positions)
    if len(positions) * 8 >= df.height and df.n_chunks() > 1:
        idx = index(positions)
        if df.height >= _BY_COLUMN:
            return pl.DataFrame([df.get_column(c).rechunk().gather(idx) for c in df.columns])
        return df.rechunk()[idx]
    return df[index(positions)]


def index(positions: np.ndarray) -> pl.Series:
    """Positions as a Series of Polars' index type (`take`; a Series' `gather`)."""
    return pl.Series(positions.astype(_INDEX, copy=False))


_POLARS_SORT = 1 << 15  # from this many hashes on, Polars sorts them (2.6x NumPy at 2M on two cores)
_PACKED = 1 << 11  # from this many uint64 hashes on, they are sorted with their positions packed in


def hash_order(h: np.ndarray) -> np.ndarray:
    """The positions that sort the hashes `h`, equal hashes in the order of their positions: many
    uint64 hashes by `_packed_order`, a few by NumPy's stable argsort (many of another type by Polars':
    equal ones in any order)."""
    if h.dtype == np.uint64 and len(h) >= _PACKED:
        return _packed_order(h)[0]
    if len(h) < _POLARS_SORT:
        return np.argsort(h, kind="stable")
    return pl.Series(h).arg_sort().to_numpy()


def _packed_order(h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the positions that sort the uint64 hashes `h`, equal ones in the order of their positions; the
    hashes sorted). Each hash's low k bits replaced by its position (n <= 2^k), the values are sorted
    by NumPy's sort, which sorts numbers alone, vectorized, 5x faster than any argsort here (4.4M: 25
    against 131 ms by NumPy's argsort, 120 ms by Polars' on two cores); the positions are the low
    bits. Hashes equal in their high bits are then in the order of their positions: where that puts
    two out of order (a few pairs among millions of well-mixed hashes), the rows of those runs of
    equal high bits are sorted again. With the gather of a frame's rows it took 107 against 180 ms
    for a Polars sort of the frame with its hashes (4M rows of four int64 columns), 19 against 40 ms
    at 1M, 5 against 16 ms at 300k."""
    n = len(h)
    k = (n - 1).bit_length()
    low = np.uint64((1 << k) - 1)
    v = np.arange(n, dtype=np.uint64)  # (in place from here: each array of n fresh costs its pages)
    v |= h & ~low
    v.sort()
    v &= low
    idx = v.view(np.int64)
    hs = h[idx]
    bad = np.flatnonzero(hs[1:] < hs[:-1])
    if len(bad):
        # the runs of equal high bits holding them, found by binary search: the hashes are in the
        # order of their high bits, so those below a run's are less than its least possible hash and
        # those above greater than its greatest (10M distinct hashes hold a few dozen such pairs: a
        # pass over all of them to number the runs took 0.5 s)
        high = hs[bad] & ~low
        lo = sorted_unique(np.searchsorted(hs, high, "left"))  # (one start a run)
        n_run = np.searchsorted(hs, hs[lo] | low, "right") - lo
        pos = np.repeat(lo - np.cumsum(n_run) + n_run, n_run) + np.arange(n_run.sum())
        o = pos[np.argsort(hs[pos], kind="stable")]
        idx[pos], hs[pos] = idx[o], hs[o]
    return idx, hs


def sorted_by_hash(df: pl.DataFrame, h: np.ndarray) -> tuple[pl.DataFrame, np.ndarray]:
    """The rows of `df` in the order of their hashes `h` (equal uint64 hashes in the order of their
    rows), and the hashes sorted (`hash_order`, then one gather)."""
    if h.dtype == np.uint64 and len(h) >= _PACKED:
        idx, hs = _packed_order(h)
        return take(df, idx), hs
    idx = hash_order(h)
    return take(df, idx), h[idx]


def key_hash(df: pl.DataFrame, keys: Sequence[str]) -> np.ndarray:
    """A uint64 hash of the key columns of each row, independent of the columns' names.

    Stable within a process (checkpoints store rows, not hashes). Equal values of different dtypes
    hash differently: callers cast probe keys to the trace's key types first."""
    if not keys:
        return np.zeros(df.height, dtype=np.uint64)
    h = column_hash(df[keys[0]])
    for k in keys[1:]:
        h = (h * _GOLDEN) ^ column_hash(df[k])
    return h


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_NULL_HASH = np.uint64(0x6A09E667F3BCC908)  # an integer column's NULL
_SLICE = 1 << 14
_SEED64, _M1, _M2 = np.uint64(SEED), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_S27, _S30, _S31 = np.uint64(27), np.uint64(30), np.uint64(31)


def column_hash(s: pl.Series) -> np.ndarray:
    """A uint64 hash of each value of `s`, a function of the value alone (and of the column's type for
    anything but integers): an integer by NumPy (splitmix64's finalizer of the value as 64 bits, a NULL
    one constant), any other type by Polars' `hash`. Inside a recursive step's seeks an integer key's
    hash took 15-40 µs a call against Polars' 55-60 µs; on large columns about Polars' time (2M values:
    3.4 against 3.7 ms), computed in slices that stay in the CPU's cache."""
    if not s.dtype.is_integer():
        return s.hash(seed=SEED).to_numpy()
    nulls = s.null_count()
    v = (s.fill_null(0) if nulls else s).to_numpy()
    u = v.view(np.uint64) if v.dtype.itemsize == 8 else v.astype(np.int64).view(np.uint64)
    z = np.empty(len(u), dtype=np.uint64)
    tmp = np.empty(min(len(u), _SLICE), dtype=np.uint64)
    for i in range(0, len(u), _SLICE):
        x, t = z[i : i + _SLICE], tmp[: min(_SLICE, len(u) - i)]
        np.add(u[i : i + _SLICE], _SEED64, out=x)
        np.right_shift(x, _S30, out=t)
        x ^= t
        x *= _M1
        np.right_shift(x, _S27, out=t)
        x ^= t
        x *= _M2
        np.right_shift(x, _S31, out=t)
        x ^= t
    if nulls:
        z[s.is_null().to_numpy()] = _NULL_HASH
    return z


def sorted_unique(a: np.ndarray) -> np.ndarray:
    """`np.unique(a)` of a 1-D array, by sorting for integers: NumPy 2.4's unique of integers without
    `return_*` hashes them, 100x slower than a sort (2M distinct int64: 1.1-1.3 s against 11 ms; 20,000:
    1.4 against 0.05 ms; measured 2026-12-06). Other types go to `np.unique` (a sort; NaNs once)."""
    if a.dtype.kind not in "iub":
        return np.unique(a)
    a = np.sort(a)
    if len(a) > 1:
        a = a[np.concatenate(([True], a[1:] != a[:-1]))]
    return a


def sorted_member(keys: np.ndarray, among: np.ndarray) -> np.ndarray:
    """Which of `keys` are in the sorted array `among` (a binary search each; in order when `keys` are
    sorted)."""
    if not len(among):
        return np.zeros(len(keys), dtype=bool)
    at = np.minimum(np.searchsorted(among, keys), len(among) - 1)
    return among[at] == keys


def take_columns(schema: pl.Schema, parts: Sequence[tuple[Sequence[np.ndarray], np.ndarray]]) -> pl.DataFrame:
    """A frame of `schema` from the rows at `positions` of several parts' columns (`parts`: each part's
    NumPy arrays, in the schema's order, and its positions), one part after another: a NumPy gather per
    part and column and one Series per column, where a few rows from several frames would cost a Polars
    gather each and a concatenation (a seek of a few keys over many batches or runs)."""
    cols = []
    for i, (name, dtype) in enumerate(schema.items()):
        got = [arrays[i][pos] for arrays, pos in parts]
        cols.append(pl.Series(name, got[0] if len(got) == 1 else np.concatenate(got), dtype=dtype))
    return pl.DataFrame(cols)


def nonzero(weight_cols: Sequence[str]) -> pl.Expr:
    """A row is zero only when every weight column is (a group can lose rows yet keep a sum change)."""
    e = pl.col(weight_cols[0]) != 0
    for c in weight_cols[1:]:
        e = e | (pl.col(c) != 0)
    return e


def max_abs(weights: pl.Series) -> int:
    """The largest |w| of a non-empty integer column, exact (by NumPy: a Polars reduction is a query of
    its own, ~0.1 ms on a step's small frames)."""
    return magnitude(weights.to_numpy())


def weight_sum_checked(df: pl.DataFrame, by: Sequence[str], extra: Sequence[str] = ()) -> pl.DataFrame:
    """Group `df` by `by`, summing WEIGHT (and `extra` columns), raising WeightError if a sum leaves int64.

    The exact check runs only when the weights are large enough that a sum could overflow."""
    if by and df.height and max_abs(df[WEIGHT]) * df.height < _OVERFLOW:
        return df.group_by(list(by)).agg(pl.col(WEIGHT).sum(), *[pl.col(c).sum() for c in extra])
    if not by:
        total = df[WEIGHT].sum()
        fl = float(df[WEIGHT].cast(pl.Float64).sum())
        if abs(fl) > _OVERFLOW:
            raise WeightError("weight overflow while consolidating a Z-set")
        return pl.DataFrame({WEIGHT: [total]}, schema={WEIGHT: pl.Int64})
    out = df.group_by(list(by)).agg(
        pl.col(WEIGHT).sum(),
        pl.col(WEIGHT).cast(pl.Float64).sum().alias("__wf"),
        *[pl.col(c).sum() for c in extra],
    )
    if out.height and out["__wf"].abs().max() > _OVERFLOW:  # type: ignore[operator]
        raise WeightError("weight overflow while consolidating a Z-set: a row's weight left int64")
    return out.drop("__wf")


def consolidate_frame(
    df: pl.DataFrame, weight_cols: Sequence[str] = (WEIGHT,), few_repeats: bool = True
) -> pl.DataFrame:
    """Group by every non-weight column, sum the weight columns, drop rows whose weights are all 0.

    The result has `df`'s columns in their order; its rows are in no particular order. A caller that
    expects most rows to repeat (a state concatenated with its change) says `few_repeats=False`: the
    rows are then grouped whole, without hashing them first, unless NumPy sums them (`_summed_runs`,
    faster than a group-by however many rows repeat)."""
    return consolidate_sorted(df, weight_cols, few_repeats)[0]


def consolidate_sorted(
    df: pl.DataFrame, weight_cols: Sequence[str] = (WEIGHT,), few_repeats: bool = True, ordered: bool = False
) -> tuple[pl.DataFrame, np.ndarray | None]:
    """`consolidate_frame`, and the `key_hash` of each row's data columns, sorted, when the rows come
    out in that order (when NumPy summed them, or when they were distinct and `ordered` asks for that
    order at the cost of a gather; else None): a trace indexed by every column takes the frame as a
    batch as it is, and a seek of it by the frame's rows needs no hashing (`trace/spine.py`)."""
    if df.height == 0:
        return df, None
    data_cols = [c for c in df.columns if c not in weight_cols]
    schema = df.schema  # (a property that builds the schema on each read: ~6 us)
    can_sum = summable(df, data_cols, weight_cols)
    if (
        (few_repeats or can_sum)
        and df.height > 1
        and data_cols
        and all(isinstance(schema[c], _HASHED) for c in data_cols)
    ):
        h = key_hash(df, data_cols)
        order = hash_order(h)
        s = h[order]
        dup = s[1:] == s[:-1]
        if not dup.any():  # distinct rows: put in hash order (one gather), their hashes kept
            if not ordered or len(weight_cols) != 1:
                return _drop_zero(df, weight_cols), None
            keep = df[weight_cols[0]].to_numpy()[order] != 0
            if not keep.all():
                order, s = order[keep], s[keep]
            return take(df, order), s
        summed = _summed_runs(df, data_cols, order, s, dup) if can_sum else None
        if summed is not None:
            return summed
        run = np.zeros(df.height, dtype=bool)  # in hash order: a row whose hash another row has too
        run[1:] = dup
        run[:-1] |= dup
        if not run.all():
            repeated = np.empty(df.height, dtype=bool)
            repeated[order] = run
            mask = pl.Series(repeated)
            grouped = _grouped(df.filter(mask), data_cols, weight_cols)
            return pl.concat([_drop_zero(df.filter(~mask), weight_cols), grouped], how="vertical"), None
    return _grouped(df, data_cols, weight_cols), None


def _summed_runs(
    df: pl.DataFrame, data_cols: list[str], order: np.ndarray, s: np.ndarray, dup: np.ndarray
) -> tuple[pl.DataFrame, np.ndarray] | None:
    """The consolidated frame by NumPy, for a frame `summable` says it can sum: in hash order
    (`order`, the sorted hashes `s`, `dup`: s[i + 1] == s[i]), equal rows are adjacent unless two
    different rows share a hash, which is checked (None then, as when a sum could overflow)."""
    w = df[WEIGHT].to_numpy()
    if magnitude(w) * df.height >= _OVERFLOW:  # (sums checked when they could overflow)
        return None
    same = dup.copy()
    for c in data_cols:
        v = df[c].to_physical().to_numpy()[order]
        same &= v[1:] == v[:-1]
    starts = np.flatnonzero(np.concatenate(([True], ~same)))
    first = s[starts]
    if (first[1:] == first[:-1]).any():  # two different rows with one hash: not adjacent-grouped
        return None
    sums = np.add.reduceat(w[order], starts)
    keep = sums != 0
    out = take(df, order[starts[keep]])
    return out.with_columns(pl.Series(WEIGHT, sums[keep], dtype=pl.Int64)), first[keep]


def summable(df: pl.DataFrame, data_cols: list[str], weight_cols: Sequence[str]) -> bool:
    """Whether `_summed_runs` applies: an int64 weight alone, integer-like data columns without NULLs
    (each column's type read from the column: `df.schema` is built anew at each read, ~6 us)."""
    if list(weight_cols) != [WEIGHT] or df[WEIGHT].dtype != pl.Int64:
        return False
    return all(isinstance((s := df[c]).dtype, PHYSICAL_INT) and s.null_count() == 0 for c in data_cols)


def _grouped(df: pl.DataFrame, data_cols: list[str], weight_cols: Sequence[str]) -> pl.DataFrame:
    if WEIGHT in weight_cols and data_cols:
        out = weight_sum_checked(df, data_cols, [c for c in weight_cols if c != WEIGHT])
    elif not data_cols:
        out = df.select([pl.col(c).sum() for c in weight_cols])
    else:
        out = df.group_by(data_cols).agg([pl.col(c).sum() for c in weight_cols])
    out = _drop_zero(out, weight_cols)
    return out if out.columns == df.columns else out[df.columns]


def _drop_zero(df: pl.DataFrame, weight_cols: Sequence[str]) -> pl.DataFrame:
    """`df` without the rows whose weight columns are all zero (by NumPy for an int64 weight)."""
    if list(weight_cols) == [WEIGHT] and df[WEIGHT].dtype == pl.Int64:
        w = df[WEIGHT].to_numpy()
        keep = w != 0
        return df if keep.all() else df.filter(pl.Series(keep))
    return df.filter(nonzero(weight_cols))
