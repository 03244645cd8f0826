"""Polars calls that cost a fixed overhead per call, made cheaper on the small frames of a step.

`collect`: a lazy plan run with the engine that suits its size; `semi_join`: the rows whose key is
a probe's, by NumPy for one integer key. (Also small frame helpers: `pick`, `drop_null_rows`,
`all_below`.)

Polars 2 collects a lazy plan with its streaming engine by default. On the small frames of an
incremental step (a change of a few hundred rows, a recursive scope's iteration) the streaming engine's
fixed cost dominates: a GROUP BY with a weight expression and a filter measured about 1.0 ms against
0.6 ms in the in-memory engine, the same plan, 600 rows (this machine, 2026-11-27); a recursive
distinct's rank fold of a few hundred facts, 5-15 ms against 2-4 ms (2026-12-03). Eager DataFrame
methods already run in memory. Large plans (a load, a from-scratch step) keep the default, which may
stream them in bounded memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl

from dbspark.algebra.consolidate import take

SMALL_PLAN_ROWS = 1_000_000  # input rows below which a plan runs in the in-memory engine


def collect(plan: pl.LazyFrame, rows: int) -> pl.DataFrame:
    """`plan` collected; `rows` is the number of input rows it reads (an estimate is enough)."""
    return plan.collect(engine="in-memory") if rows < SMALL_PLAN_ROWS else plan.collect()


def drop_null_rows(df: pl.DataFrame, cols: list[str] | None = None) -> pl.DataFrame:
    """`df` without the rows that have a NULL in `cols` (all columns if None); `df` itself when there
    is none (a column's null count is known without a pass: the filter's ~0.1 ms is skipped)."""
    names = df.columns if cols is None else cols
    if all(df[c].null_count() == 0 for c in names):
        return df
    return df.drop_nulls(cols)


def all_ones(w: pl.Series) -> bool:
    """Whether every weight is 1 (two reductions of the column): a join with such a side keeps the other
    side's weights as they are."""
    return bool(w.min() == 1 and w.max() == 1)


def pick(df: pl.DataFrame, cols: list[str], names: list[str] | None = None) -> pl.DataFrame:
    """The columns `cols` of `df` in that order, renamed to `names`: `df` itself when it is already
    that (a frame built of its columns, not a query: ~5 µs against ~20 µs for `df[cols]` and ~33-90 µs
    for `select`)."""
    if len(set(cols)) < len(cols):  # a column taken twice (under two names): a query after all
        return df.select([pl.col(c).alias(n) for c, n in zip(cols, names or cols, strict=True)])
    out = df if df.columns == cols else pl.DataFrame([df.get_column(c) for c in cols])
    if names is not None and names != cols:
        out = out.rename(dict(zip(cols, names, strict=True)))
    return out


def all_below(bounds: Sequence[tuple[str, Any]]) -> pl.Expr:
    """True for a row whose every column of `bounds` is below its bound (a NULL is not): the rows a
    trace drops below waterlines (`Kernel.trace_drop`)."""
    return pl.all_horizontal([pl.col(c).lt(v).fill_null(False) for c, v in bounds])


def semi_join(df: pl.DataFrame, probe: pl.DataFrame, keys: list[str], exact: bool) -> pl.DataFrame:
    """The rows of `df` whose `keys` equal a row of `probe` (same key types); `exact`: NULL equals NULL.

    A few rows whose keys are integers without NULLs on either side (a recursive scope's facts, a
    graph's nodes and pairs of them) are looked up by a binary search of the probe's sorted keys, two
    or more columns packed into one integer (`_packed`): 60-75 us for 200-2,000 rows and a probe of 350
    keys, where Polars' semi-join took 140-190 us, most of it fixed overhead (this machine,
    2026-12-04); more rows by Polars (`_NUMPY_ROWS`)."""
    if df.height == 0 or probe.height == 0:
        return df.clear()
    packed = _packed(df, probe, keys) if df.height + probe.height <= _NUMPY_ROWS else None
    if packed is not None:
        have, want = packed
        want = np.sort(want)
        found = want[np.minimum(np.searchsorted(want, have), len(want) - 1)] == have
        return df if found.all() else take(df, np.flatnonzero(found))
    return df.join(probe, on=keys, how="semi", nulls_equal=exact)


_NUMPY_ROWS = 2048  # more rows on the two sides: Polars' hash semi-join is the faster (3k + 1k rows of one
# integer key: 0.14 against 0.22 ms; 300k + 100k: 4.5 against 36 ms; two keys 300k + 100k: 12 against 39)


def _packed(df: pl.DataFrame, probe: pl.DataFrame, keys: list[str]) -> tuple[np.ndarray, np.ndarray] | None:
    """Each side's rows as one integer of their key columns: one integer key as it is; several side by
    side, each as its offset from the least value on either side, when together they fit 63 bits (a
    recursive scope's pair of nodes: a 2-column semi-join of transitive closure's seeks, ~4.6 ms by
    Polars, is a few NumPy passes). None when a key is not an integer of one type on both sides
    without NULLs, or the offsets need more bits."""
    a = [df[k] for k in keys]
    b = [probe[k] for k in keys]
    for x, y in zip(a, b, strict=True):
        if not x.dtype.is_integer() or x.dtype != y.dtype or x.has_nulls() or y.has_nulls():
            return None
    if len(keys) == 1:
        return a[0].to_numpy(), b[0].to_numpy()
    have, want = np.zeros(df.height, dtype=np.uint64), np.zeros(probe.height, dtype=np.uint64)
    shift = 0
    for x, y in zip(a, b, strict=True):
        xa, ya = x.to_numpy(), y.to_numpy()
        lo, hi = min(int(xa.min()), int(ya.min())), max(int(xa.max()), int(ya.max()))
        bits = (hi - lo).bit_length()
        if shift + bits > 63:
            return None
        for side, v in ((have, xa), (want, ya)):
            if v.dtype == np.uint64:
                code = v - np.uint64(lo)
            else:
                code = (v.astype(np.int64) - np.int64(lo)).view(np.uint64)
            side |= code << np.uint64(shift)
        shift += bits
    return have, want
