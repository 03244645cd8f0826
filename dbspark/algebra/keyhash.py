"""A stable 64-bit hash of key columns: the same across processes, machines and library versions.

Polars' `Series.hash` is only stable within one Polars version, so it cannot name the bucket of a
key in files that outlive a process (state shared by executors, checkpoints). This hash is defined
here from the values alone, computed with NumPy on the columns' Arrow buffers (no per-row Python):

- every column gives a 64-bit value `v` per row, already passed through a strong finalizer
  (MurmurHash3's fmix64); the row's hash folds the columns in order:
  `h = fmix64(h * K + v)` from `h = SEED`, so (a, b) and (b, a) differ;
- integers of every width, signed or unsigned (and Boolean as 0/1) hash by their mathematical value
  as a 128-bit two's complement integer (low and high 64-bit limbs), so Int32 5 == Int64 5 == UInt8 5;
- Decimal hashes by its unscaled 128-bit integer (both limbs): the scale is part of the type, so
  Decimal(10, 2) 1.23 hashes as the integer 123 (callers hash keys of one type);
- Float32 and Float64 hash by the bits of the float64 value, with -0.0 as 0.0 and every NaN as one NaN;
- Date by its days since the epoch; Datetime, Duration and Time by their int64 physical value in the
  column's unit: the unit (and time zone) is part of the type;
- String, Binary, Categorical and Enum (as their strings) by their bytes: the sum over bytes of
  `(byte + 1) * T[position]` (T a fixed table of odd 64-bit constants, wrapping arithmetic, summed per
  string by a cumulative sum over the Arrow data buffer), mixed with the length, then finalized;
- NULL (in any type, and the Null dtype) is one fixed value.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl
import pyarrow as pa

SEED = 0x5EED_0F_DB5A4C
_M = (1 << 64) - 1
_K_ROW = 0x9E3779B97F4A7C15
_K_LEN = 0xC2B2AE3D27D4EB4F
_C_HI = 0x165667B19E3779F9
_C_STR = 0x27D4EB2F165667C5
_NULL = 0x6E756C6C_6B657921  # "nullkey!"
_CANON_NAN = np.array([np.nan], dtype=np.float64).view(np.uint64)[0]
_CHUNK_BYTES = 1 << 22  # string bytes hashed per NumPy pass (bounds the temporaries)

_INTS = (pl.Int8, pl.Int16, pl.Int32, pl.Int64, pl.UInt8, pl.UInt16, pl.UInt32, pl.UInt64)


def _u64(x: int) -> np.uint64:
    return np.uint64(x & _M)


def fmix64(x: np.ndarray) -> np.ndarray:
    """MurmurHash3's 64-bit finalizer (a bijection with full avalanche), on a new uint64 array."""
    x = x.astype(np.uint64, copy=True)
    x ^= x >> np.uint64(33)
    x *= _u64(0xFF51AFD7ED558CCD)
    x ^= x >> np.uint64(33)
    x *= _u64(0xC4CEB9FE1A85EC53)
    x ^= x >> np.uint64(33)
    return x


_HI_ZERO, _HI_ONES = fmix64(np.array([_C_HI, _C_HI ^ _M], dtype=np.uint64))


def _mix128(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The value of a 128-bit integer given as uint64 limbs (hi as the uint64 bits of the high limb)."""
    return fmix64(lo ^ fmix64(hi ^ _u64(_C_HI)))


def _mix_int64(x: np.ndarray) -> np.ndarray:
    """Int64 values as 128-bit integers (the high limb is the sign extension): `_mix128` without its
    second finalizer, since the high limb is 0 or all ones."""
    x = x.astype(np.int64, copy=False)
    return fmix64(x.view(np.uint64) ^ np.where(x < 0, _HI_ONES, _HI_ZERO))


_POS_TABLE = np.zeros(0, dtype=np.uint64)


def _pos_table(n: int) -> np.ndarray:
    """T[0..n): odd 64-bit constants, a function of the position only (grown on demand, cached)."""
    global _POS_TABLE
    if len(_POS_TABLE) < n:
        m = max(n, 2 * len(_POS_TABLE), 64)
        pos = np.arange(m, dtype=np.uint64)
        _POS_TABLE = fmix64(pos * _u64(_K_ROW) + _u64(SEED)) | np.uint64(1)
    return _POS_TABLE


def _bytes_hash(arr: pa.Array) -> np.ndarray:
    """The finalized hash of each value's bytes, from the offsets and data buffers of a large_binary."""
    n = len(arr)
    bufs = arr.buffers()
    offs = np.frombuffer(bufs[1], dtype=np.int64, count=n + 1, offset=arr.offset * 8)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    lens = np.diff(offs)
    out = np.empty(n, dtype=np.uint64)
    table = _pos_table(int(lens.max()) if n else 0)
    i = 0
    while i < n:  # row ranges of about _CHUNK_BYTES bytes (one pass when the column is small)
        j = int(np.searchsorted(offs, offs[i] + _CHUNK_BYTES, side="right")) - 1
        j = min(max(j, i + 1), n)
        o = offs[i : j + 1]
        base = int(o[0])
        d = data[base : int(o[-1])]
        ln = lens[i:j]
        pos = np.arange(len(d), dtype=np.int64) - np.repeat(o[:-1] - base, ln)
        terms = (d.astype(np.uint64) + np.uint64(1)) * table[pos]
        cs = np.zeros(len(d) + 1, dtype=np.uint64)
        np.cumsum(terms, out=cs[1:])
        sums = cs[o[1:] - base] - cs[o[:-1] - base]  # wraps mod 2**64, like the sum itself
        out[i:j] = fmix64(sums ^ (ln.astype(np.uint64) * _u64(_K_LEN) + _u64(_C_STR)))
        i = j
    return out


def _arrow(s: pl.Series) -> pa.Array:
    a = s.to_arrow(compat_level=pl.CompatLevel.oldest())
    if isinstance(a, pa.ChunkedArray):
        a = a.combine_chunks()
    return a


def _decimal_hash(s: pl.Series, name: str) -> np.ndarray:
    a = _arrow(s)
    if not pa.types.is_decimal128(a.type):
        raise TypeError(f"cannot hash key column {name!r} of type {s.dtype}: only 128-bit decimals")
    limbs = np.frombuffer(a.buffers()[1], dtype=np.uint64, count=2 * len(a), offset=a.offset * 16)
    return _mix128(limbs[0::2], limbs[1::2])


def _int128_hash(s: pl.Series) -> np.ndarray:
    f = s.fill_null(0).to_frame("v")
    lo = f.select((pl.col("v") & ((1 << 64) - 1)).cast(pl.UInt64)).to_series().to_numpy()
    hi_t = pl.Int64 if s.dtype == pl.Int128 else pl.UInt64
    hi = f.select((pl.col("v") // (1 << 64)).cast(hi_t)).to_series().to_numpy()
    return _mix128(lo.astype(np.uint64), hi.view(np.uint64))


def column_hash(s: pl.Series, name: str | None = None) -> np.ndarray:
    """The finalized 64-bit value of each entry of one column (NULL a fixed value)."""
    name = s.name if name is None else name
    dt = s.dtype
    n = s.len()
    if dt == pl.Null:
        return np.full(n, _NULL, dtype=np.uint64)
    if isinstance(dt, pl.Categorical | pl.Enum):
        s = s.cast(pl.String)
        dt = s.dtype
    nulls = s.null_count()  # (metadata: no pass over the data)
    if dt in _INTS or dt == pl.Boolean:
        x = (s.fill_null(0) if nulls else s).to_numpy()
        if dt == pl.UInt64:  # values >= 2**63 have high limb 0, not the sign extension
            v = fmix64(x.astype(np.uint64) ^ _HI_ZERO)
        else:
            v = _mix_int64(x.astype(np.int64))
    elif dt in (pl.Int128, pl.UInt128):
        v = _int128_hash(s)
    elif dt.is_float():
        x = s.cast(pl.Float64).fill_null(0.0).to_numpy().astype(np.float64, copy=True)
        x[x == 0.0] = 0.0  # -0.0 == 0.0
        bits = x.view(np.uint64)
        bits[np.isnan(x)] = _CANON_NAN
        v = fmix64(bits)
    elif isinstance(dt, pl.Decimal):
        v = _decimal_hash(s, name)
    elif dt == pl.Date or isinstance(dt, pl.Datetime | pl.Duration) or dt == pl.Time:
        phys = s.to_physical()
        v = _mix_int64((phys.fill_null(0) if nulls else phys).to_numpy().astype(np.int64, copy=False))
    elif dt in (pl.String, pl.Binary):
        a = _arrow(s)
        v = _bytes_hash(a.cast(pa.large_binary()))
    else:
        raise TypeError(f"cannot hash key column {name!r} of type {dt}")
    if nulls:
        v[s.is_null().to_numpy()] = _NULL
    return v


def stable_hash(df: pl.DataFrame, cols: Sequence[str]) -> np.ndarray:
    """A uint64 hash per row of the columns `cols` (in order): stable across processes and versions."""
    h = np.full(df.height, SEED, dtype=np.uint64)
    for c in cols:
        h *= _u64(_K_ROW)
        h += column_hash(df[c], c)
        h = fmix64(h)
    return h


def one_to_one(dtypes: Sequence[pl.DataType]) -> bool:
    """Whether `stable_hash` of a key of these column types is one-to-one on its non-NULL values: one
    column of an integer type of at most 64 bits, Boolean or a temporal type. Such a value's 64 bits are
    XORed with a constant (`_mix_int64`: one per sign, both with the top bit set, so values of either
    sign stay apart; UInt64: one constant), then go through fmix64 twice with an addition between
    (`stable_hash`), each step a bijection of 64-bit words. Rows of such keys with equal hashes have
    equal keys unless one of them is NULL (its fixed value may equal a value's hash)."""
    if len(dtypes) != 1:
        return False
    dt = dtypes[0]
    return dt in _INTS or dt in (pl.Boolean, pl.Date, pl.Time) or isinstance(dt, pl.Datetime | pl.Duration)


def bucket_of(h: np.ndarray, n: int) -> np.ndarray:
    """The bucket in [0, n) of each hash, by a multiply-shift of its high 32 bits (n < 2**32)."""
    if not 0 < n < (1 << 32):
        raise ValueError(f"bucket count must be in [1, 2**32): {n}")
    hi = h.astype(np.uint64, copy=False) >> np.uint64(32)
    return ((hi * np.uint64(n)) >> np.uint64(32)).astype(np.int32)
