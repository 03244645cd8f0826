"""Regions of a leapfrog join's tuple space, the change oracle's answers (`lftj-incremental-maintenance.txt`
§4.1-4.2; used by `columnar/sensitivity.py`): at a level ℓ, the codes of the ℓ variables before and an
interval of the ℓ-th; `normalize` makes a set of them disjoint without changing what they cover.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from dbspark.columnar.intervals import Run


@dataclass
class Regions:
    """Regions of one level ℓ: rows of the codes of the ℓ variables before, and an interval [lo, hi]
    of the ℓ-th (lo = -1: from the start; hi = the end marker: to the end)."""

    prefix: np.ndarray  # (m, ℓ)
    lo: np.ndarray
    hi: np.ndarray


def normalize(regions: dict[int, Regions]) -> dict[int, Regions]:
    """Disjoint regions covering the same tuples: a region inside a shallower one dropped (its prefix
    extends the shallower prefix by a value inside the shallower interval: an interval index's stab),
    then a prefix's points deduplicated or its overlapping intervals united."""
    out: dict[int, Regions] = {}
    for lv in sorted(regions):
        r = regions[lv]
        keep = np.ones(len(r.lo), dtype=bool)
        for up, u in out.items():
            g_u, g_r = _group_ids(u.prefix, r.prefix[:, :up])
            shallow = Run.build(g_u, u.lo, u.hi, np.zeros((len(g_u), 0), dtype=np.int64))
            inside, _ = shallow.stab(g_r, r.prefix[:, up])
            keep[inside] = False
        prefix, lo, hi = r.prefix[keep], r.lo[keep], r.hi[keep]
        if not len(lo):
            continue
        if np.array_equal(lo, hi):  # points
            rows = _distinct_rows(np.concatenate([prefix, lo[:, None]], axis=1))
            out[lv] = Regions(rows[:, :lv], rows[:, lv], rows[:, lv])
        else:
            out[lv] = _united(prefix, lo, hi)
    return out


def _group_ids(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ids of the rows of a and of b, equal where the rows are."""
    if a.shape[1] == 0:
        return np.zeros(len(a), dtype=np.int64), np.zeros(len(b), dtype=np.int64)
    both = np.concatenate([a, b])
    order = np.lexsort(both.T[::-1])
    srt = both[order]
    new = np.ones(len(srt), dtype=bool)
    new[1:] = np.any(srt[1:] != srt[:-1], axis=1)
    ids = np.empty(len(srt), dtype=np.int64)
    ids[order] = np.cumsum(new) - 1
    return ids[: len(a)], ids[len(a) :]


def _distinct_rows(m: np.ndarray) -> np.ndarray:
    """The distinct rows of an int64 matrix, sorted."""
    srt = m[np.lexsort(m.T[::-1])]
    new = np.ones(len(srt), dtype=bool)
    new[1:] = np.any(srt[1:] != srt[:-1], axis=1)
    return srt[new]


def _united(prefix: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> Regions:
    """Each prefix's overlapping intervals united (closed intervals: [1, 2] and [2, 4] overlap)."""
    lv = prefix.shape[1]
    keys = [f"p{j}" for j in range(lv)]
    f = pl.DataFrame(
        {**{k: prefix[:, j] for j, k in enumerate(keys)}, "lo": lo, "hi": hi},
        schema={**dict.fromkeys(keys, pl.Int64), "lo": pl.Int64, "hi": pl.Int64},
    ).sort([*keys, "lo"])
    reach = pl.col("hi").cum_max().over(keys) if keys else pl.col("hi").cum_max()
    prev = reach.shift(1).over(keys) if keys else reach.shift(1)
    f = f.with_columns(prev.alias("_reach"))
    f = f.with_columns((pl.col("_reach").is_null() | (pl.col("lo") > pl.col("_reach"))).cum_sum().alias("_g"))
    f = f.group_by([*keys, "_g"], maintain_order=True).agg(pl.col("lo").min(), pl.col("hi").max())
    rows = np.stack([f[k].to_numpy() for k in keys], axis=1) if keys else np.zeros((f.height, 0), np.int64)
    return Regions(
        rows.astype(np.int64), f["lo"].to_numpy().astype(np.int64), f["hi"].to_numpy().astype(np.int64)
    )
