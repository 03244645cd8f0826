"""MEDIAN's value from a group's two middle values, as DuckDB computes it (vectorized Polars; the local
engine's and the spark engine's driver-side step's).

`lo` and `hi` are the values at positions (n-1)//2 and n//2 of the group's sorted multiset; with an odd n
they are the same position and the median is that value (exact, cast to the result type). With an even n
DuckDB interpolates in the type's storage (`quantile_sort_tree.hpp`, `CastInterpolation::Interpolate`):

- DECIMAL(p <= 18, s), stored in 16/32/64 bits: in units of 10^-s, lo + trunc(double(hi - lo) * 0.5): the
  floored midpoint, exact while hi - lo < 2^53;
- DECIMAL(p > 18, s), stored as a 128-bit integer: trunc(double(lo) * 0.5 + double(hi) * 0.5) in units,
  with DuckDB's 128-bit-to-double conversion (double(low 64 bits) + double(high 64 bits) * 2^64, which
  may round twice); the result keeps the type DECIMAL(p, s). Where that rounding passes the type's
  bounds (DuckDB then returns a value the type cannot hold) the bound is taken;
- DATE, TIMESTAMP: a TIMESTAMP, llround(lo * 0.5 + hi * 0.5) in microseconds (exact for DATE);
- other numbers: DOUBLE, lo * 0.5 + hi * 0.5.

No value goes through DOUBLE in units of 1 (the old path), which lost DECIMAL digits beyond 2^53.
"""

from __future__ import annotations

from decimal import Decimal

import polars as pl

from dbspark.ir.aggregate import median_dtype

TWO64 = 2**64


def median_expr(lo: pl.Expr, hi: pl.Expr, odd: pl.Expr, t: pl.DataType) -> pl.Expr:
    """The median of a group whose middle values are `lo` <= `hi` (of type `t`); `odd`: its count is odd."""
    rt = median_dtype(t)
    if isinstance(t, pl.Decimal):
        p, s = t.precision or 38, t.scale or 0
        ul, uh = lo.to_physical().cast(pl.Int128), hi.to_physical().cast(pl.Int128)
        if p <= 18:
            units = ul + ((uh - ul).cast(pl.Float64) * 0.5).cast(pl.Int128)
        else:
            units = (hugeint_to_double(ul) * 0.5 + hugeint_to_double(uh) * 0.5).cast(pl.Int128)
            top = pl.lit(10**p - 1, pl.Int128)  # DuckDB's double may round past the type's bounds (it
            units = units.clip(-top, top)  # returns 1E20 for DECIMAL(20,0)'s largest value twice)
        unit = pl.lit(Decimal(1).scaleb(-s), pl.Decimal(38, s))
        mid = (units.cast(pl.Decimal(38, 0)) * unit).cast(rt)
    elif isinstance(rt, pl.Datetime):
        ml, mh = (x.cast(rt).to_physical().cast(pl.Float64) for x in (lo, hi))
        mid = (ml * 0.5 + mh * 0.5).round(0, mode="half_away_from_zero").cast(pl.Int64).cast(rt)
    elif rt == pl.Float64() and t.is_numeric():
        mid = lo.cast(pl.Float64) * 0.5 + hi.cast(pl.Float64) * 0.5
    else:
        return lo
    return pl.when(odd).then(lo.cast(rt)).otherwise(mid)


def hugeint_to_double(u: pl.Expr) -> pl.Expr:
    """DuckDB's double of a 128-bit integer (Int128 `u`): -(double(2^64 - 1 - low) + 1) when the high word
    is -1, else double(low) + double(high) * 2^64, each conversion and the sum rounding to nearest."""
    two64 = pl.lit(TWO64, pl.Int128)
    high = u // two64
    low = u - high * two64  # in [0, 2^64)
    neg = -(pl.lit(TWO64 - 1, pl.Int128) - low).cast(pl.UInt64).cast(pl.Float64) - 1.0
    pos = low.cast(pl.UInt64).cast(pl.Float64) + high.cast(pl.Int64).cast(pl.Float64) * float(TWO64)
    return pl.when(high == -1).then(neg).otherwise(pos)


def median_frame(lo: list, hi: list, n: list[int | None], t: pl.DataType, name: str) -> pl.Series:
    """`median_expr` over per-group lists (the incremental path's middle values; n None: an empty group)."""
    df = pl.DataFrame(
        {"lo": pl.Series(lo, dtype=t), "hi": pl.Series(hi, dtype=t), "n": pl.Series(n, dtype=pl.Int64)}
    )
    e = median_expr(pl.col("lo"), pl.col("hi"), pl.col("n") % 2 == 1, t)
    return df.select(pl.when(pl.col("n") > 0).then(e).alias(name))[name]
