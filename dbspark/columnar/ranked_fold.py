"""MIN / MAX / MEDIAN of groups too large to read, ranked over the sorted runs of the input's integral.

`ordered_fold.fold` reads a changed group's rows and computes its values in vectorized passes: a step
costs O(group). For a changed group with at least `BIG` entries in the integral, the kernel hands the
group over as slices of its trace's runs (`TraceKernel.key_runs`: zero-copy where the engine can), each
sorted by the aggregated column, and MIN, MAX and the two middle values of MEDIAN are order statistics
found by binary search over the value domain, counting the values at or below a candidate in every run
(`SortedRuns`): O(runs · log n) probes per statistic after one prefix sum of each slice's weights
(NumPy, about a millisecond per 10^6 entries), and the linear calls' sums beside them (COUNT(*) is the
weights' sum; COUNT, SUM, ... of other columns one vectorized pass), where reading would gather, group
and select 10^6 rows (`incremental-aggregation-monotonic-programs.txt` §2.4, Table 2: MIN / MAX are not
invertible, so a delete needs the group's order).

Entries are consolidated within a run but not across runs: a value's multiplicity is the sum of its
entries' weights in every run (a delete stored in a newer run is a negative entry), so counting by
prefix sums is exact, and a value whose multiplicity is negative (a delete of a value that is not
there) is found among the values that have a negative entry (`SortedRuns.negative`).

Applies (`order_column`) when every ordered call aggregates one column, of an integer, DATE,
TIMESTAMP, TIME or INTERVAL type (ranked on its storage integers), that is not a group key; the
results are those of `ordered_fold`, and the two are checked against each other
(`tests/test_aggfold.py`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from dbspark.algebra.consolidate import sorted_unique
from dbspark.algebra.zset import WEIGHT, ZSet
from dbspark.columnar.aggfold import CNT, accumulator_exprs, guard, mode_of, results
from dbspark.columnar.median import median_frame
from dbspark.columnar.ordered_fold import finish
from dbspark.errors import NegativeStateError
from dbspark.ir.aggregate import AggSpec, result_dtype

BIG = 4_096  # a changed group with at least this many entries in the integral is ranked, not read
_SAFE = 2**62  # a group whose weights could sum past this is not ranked here (no overflow checks)


def _rank_type(t: pl.DataType) -> bool:
    return (
        (t.is_integer() and t != pl.UInt64())
        or t == pl.Date()
        or isinstance(t, pl.Datetime | pl.Duration | pl.Time)
    )


def order_column(spec: AggSpec) -> str | None:
    """The column whose order ranks the spec's ordered calls over sorted runs, or None when they cannot
    be ranked: they must all be MIN, MAX, MEDIAN or MODE of one column of a rankable type that is not a group
    key, beside no user aggregate and no floating sum (`ordered_fold` sums a group's rows exactly, as a
    multiset)."""
    if not spec.by:
        return None
    args = {c.arg for c in spec.calls if c.kind == "ordered"}
    if len(args) != 1:
        return None
    (arg,) = args
    if arg is None or arg in spec.by or not _rank_type(spec.input_schema[arg]):
        return None
    for c in spec.calls:
        if c.kind == "user" or (
            c.kind == "linear" and c.arg and c.func != "count" and mode_of(spec, c) == "float"
        ):
            return None
        if c.kind == "ordered" and c.func not in ("min", "max", "median", "mode"):
            return None
    return arg


def sorted_values(df: pl.DataFrame, arg: str) -> tuple[np.ndarray, np.ndarray]:
    """A frame sorted by `arg` (NULLs first) as (values, weights) of its non-NULL `arg`, the values
    as their storage integers (days, microseconds, ...); without copying where Polars can."""
    nulls = df[arg].null_count()
    xs = df[arg].slice(nulls).to_physical().to_numpy()
    return xs, df[WEIGHT].slice(nulls).to_numpy().astype(np.int64, copy=False)


def _change_run(df: pl.DataFrame, arg: str) -> tuple[np.ndarray, np.ndarray]:
    return sorted_values(df.filter(pl.col(arg).is_not_null()).sort(arg), arg)


class SortedRuns:
    """A multiset of integers given as sorted runs of (value, weight) entries, a value's multiplicity
    being the sum of its entries' weights across the runs."""

    def __init__(self, runs: Sequence[tuple[np.ndarray, np.ndarray]] = ()) -> None:
        self.xs: list[np.ndarray] = []
        self.cws: list[np.ndarray] = []
        self.negs: list[np.ndarray] = []
        self.distinct: list[tuple[np.ndarray, np.ndarray] | None] = []  # per run, `_distinct` once read
        self.safe = True  # no prefix sum can leave int64
        for x, w in runs:
            self._add(x, w)

    def _add(self, x: np.ndarray, w: np.ndarray) -> None:
        if not len(x):
            return
        lo, hi = int(w.min()), int(w.max())
        self.safe &= max(hi, -lo) * len(w) < _SAFE
        self.xs.append(x)
        self.cws.append(np.cumsum(w, dtype=np.int64))
        self.distinct.append(None)
        if lo < 0:
            self.negs.append(x[w < 0])

    def with_run(self, x: np.ndarray, w: np.ndarray) -> SortedRuns:
        """These runs and one more (the prefix sums already computed are shared)."""
        out = SortedRuns()
        out.xs, out.cws, out.negs, out.safe = list(self.xs), list(self.cws), list(self.negs), self.safe
        out.distinct = self.distinct  # shared: a run's distinct values are read once for both sides
        out._add(x, w)
        return out

    def _distinct(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Run i's distinct values and the sums of their entries' weights (one pass over the run)."""
        got = self.distinct[i]
        if got is None:
            x, cw = self.xs[i], self.cws[i]
            step = x[1:] != x[:-1]
            if step.all():  # distinct already: the weights are the prefix sums' differences
                got = (x, np.diff(cw, prepend=np.int64(0)))
            else:
                last = np.flatnonzero(np.r_[step, True])  # each value's last entry
                sums = cw[last].copy()
                sums[1:] -= cw[last[:-1]]
                got = (x[last], sums)
            self.distinct[i] = got
        return got

    def mode(self) -> int | None:
        """The most frequent value (ties to the least), None when no value is present. The largest
        run's distinct values carry the other runs' weights added at their positions (one pass over
        it, then O(other entries · log n)); values only in the other runs are counted apart."""
        if not self.xs:
            return None
        runs = [self._distinct(i) for i in range(len(self.xs))]
        big = max(range(len(runs)), key=lambda i: len(runs[i][0]))
        bx, bm = runs[big][0], runs[big][1].copy()
        rest = [r for i, r in enumerate(runs) if i != big]
        cands = []
        if rest:
            ox = np.concatenate([r[0] for r in rest])
            om = np.concatenate([r[1] for r in rest])
            pos = np.minimum(np.searchsorted(bx, ox), len(bx) - 1)
            hit = bx[pos] == ox
            np.add.at(bm, pos[hit], om[hit])
            ex, inv = np.unique(ox[~hit], return_inverse=True)
            em = np.zeros(len(ex), dtype=np.int64)
            np.add.at(em, inv, om[~hit])
            if len(ex):
                j = int(np.argmax(em))
                cands.append((int(em[j]), int(ex[j])))
        j = int(np.argmax(bm))
        cands.append((int(bm[j]), int(bx[j])))
        count, value = max(cands, key=lambda c: (c[0], -c[1]))
        return value if count > 0 else None

    def total(self) -> int:
        """The number of values (with multiplicity)."""
        return sum(int(cw[-1]) for cw in self.cws)

    def count_le(self, v: int) -> int:
        """How many values are at most `v`."""
        n = 0
        for x, cw in zip(self.xs, self.cws, strict=True):
            i = int(np.searchsorted(x, v, side="right"))
            if i:
                n += int(cw[i - 1])
        return n

    def multiplicity(self, vs: np.ndarray) -> np.ndarray:
        """The multiplicity of each of the values `vs`."""
        out = np.zeros(len(vs), dtype=np.int64)
        for x, cw in zip(self.xs, self.cws, strict=True):
            hi, lo = np.searchsorted(x, vs, side="right"), np.searchsorted(x, vs, side="left")
            out += np.where(hi > 0, cw[np.maximum(hi - 1, 0)], 0) - np.where(
                lo > 0, cw[np.maximum(lo - 1, 0)], 0
            )
        return out

    def negative(self) -> tuple[int, int] | None:
        """A value whose multiplicity is negative, with it; None if there is none."""
        cand = sorted_unique(np.concatenate(self.negs)) if self.negs else np.zeros(0, dtype=np.int64)
        if not len(cand):
            return None
        m = self.multiplicity(cand)
        bad = np.flatnonzero(m < 0)
        return (int(cand[bad[0]]), int(m[bad[0]])) if len(bad) else None

    def kth(self, k: int) -> int:
        """The k-th smallest value (0-based; 0 <= k < total()): the least v with count_le(v) > k,
        by binary search over [least value, greatest value]."""
        lo = min(int(x[0]) for x in self.xs)
        hi = max(int(x[-1]) for x in self.xs)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.count_le(mid) > k:
                hi = mid
            else:
                lo = mid + 1
        return lo


def step(
    spec: AggSpec,
    keys: list[str],
    groups: pl.DataFrame,
    slices: Sequence[list[pl.DataFrame]],
    d: pl.DataFrame,
    was: bool,
) -> ZSet | None:
    """-old and +new rows of the big groups (row i of `groups`: its entries `slices[i]`, frames of the
    input's columns and the weight, each sorted by the `order_column`, NULLs first), given the change
    `d` (the same columns, any groups). None when a group's weights are too large to rank without
    overflow checks (the caller reads it instead)."""
    arg = order_column(spec)
    assert arg is not None
    t = spec.input_schema[arg]
    phys = pl.Series([], dtype=t).to_physical().dtype
    linear_args = any(c.kind == "linear" and c.arg is not None for c in spec.calls)
    olds, news = [], []
    # per ordered call and side (old, new): per group the least and the greatest middle value (MIN,
    # MAX: both the value) and the count of non-NULL values
    vals: dict[str, tuple[list, list]] = {c.name: ([], []) for c in spec.calls if c.kind == "ordered"}
    first = next(c for c in spec.calls if c.kind == "ordered")
    for i, parts in enumerate(slices):
        key = groups.slice(i, 1)
        dg = d.join(key, on=keys, how="semi", nulls_equal=True)
        old_runs = SortedRuns([sorted_values(s, arg) for s in parts])
        new_runs = old_runs.with_run(*_change_run(dg, arg))
        if linear_args:
            whole = pl.concat([p.select(dg.columns) for p in parts], how="vertical", rechunk=False)
            guard(spec, whole)
            acc = whole.select(accumulator_exprs(spec))
        else:
            n_rows = sum(int(p[WEIGHT].sum()) for p in parts)
            acc = pl.DataFrame({CNT: pl.Series([n_rows], dtype=pl.Int128)})
        dacc = dg.select(accumulator_exprs(spec))
        olds.append(pl.concat([key, acc], how="horizontal"))
        news.append(
            pl.concat([key, acc.select([pl.col(c) + dacc[c] for c in acc.columns])], how="horizontal")
        )
        for side, sr in enumerate((old_runs, new_runs)):
            if not sr.safe:
                return None
            bad = sr.negative() if side else None
            if bad is not None:
                v = pl.Series([bad[0]], dtype=phys).cast(t)[0]
                raise NegativeStateError(
                    f"aggregate {first.name!r}, group {tuple(key[k][0] for k in spec.by)}: multiplicity "
                    f"of {v!r} would become {bad[1]} (below zero); a delete of a value not there"
                )
            m = sr.total()
            for c in spec.calls:
                if c.kind != "ordered":
                    continue
                if m <= 0:
                    vals[c.name][side].append((None, None, None))
                elif c.func == "mode":
                    v = sr.mode()
                    vals[c.name][side].append((v, v, m))
                elif c.func == "median":
                    vals[c.name][side].append((sr.kth((m - 1) // 2), sr.kth(m // 2), m))
                else:
                    v = sr.kth(0 if c.func == "min" else m - 1)
                    vals[c.name][side].append((v, v, m))
    o, n = pl.concat(olds, how="vertical"), pl.concat(news, how="vertical")
    ro, rn = results(spec, o), results(spec, n)
    for c in spec.calls:
        if c.kind != "ordered":
            continue
        rt = result_dtype(c, spec.input_schema)
        for side, out in enumerate((ro, rn)):
            lo, hi, cnt = zip(*vals[c.name][side], strict=True)
            los = pl.Series(list(lo), dtype=phys).cast(t)
            if c.func == "median":
                his = pl.Series(list(hi), dtype=phys).cast(t)
                out[c.name] = median_frame(los.to_list(), his.to_list(), list(cnt), t, c.name).cast(rt)
            else:
                out[c.name] = los.cast(rt).alias(c.name)
    return ZSet(finish(spec, o, n, ro, rn, was), True)
