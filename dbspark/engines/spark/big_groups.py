"""MIN / MAX / MEDIAN of groups too large to read, stepped in the driver by ranking their sorted runs.

`columnar.ordered_fold.ordered_step` reads a changed group's rows and computes its values in vectorized passes: a
step costs O(group). For a group of at least `BIG` entries in the input's integral, this module reads
no rows: the group is a few zero-copy slices of the memory-mapped runs, sorted by the aggregated column
(`trace.ranks.group_slices`), and MIN, MAX and the two middle values of MEDIAN are order statistics
found by binary search (`trace.ranks.SortedRuns`). What remains O(group) is one prefix sum of each
slice's weights (NumPy, about a millisecond per 10^6 entries), and the linear calls' sums beside them
(COUNT(*) is the weights' sum; COUNT, SUM, ... of other columns one vectorized pass).

Applies (`rankable`) when every ordered call aggregates the trace's first data column after the group
keys (the runs are sorted by it within a group), of an integer, DATE, TIMESTAMP, TIME or INTERVAL type
(ranked on its storage integers); the results are those of `ordered_step`, and the two are checked
against each other (`tests/test_aggfold.py`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl
import pyarrow as pa

from dbspark.algebra.zset import WEIGHT, ZSet
from dbspark.columnar.aggfold import CNT, accumulator_exprs, guard, mode_of, results
from dbspark.columnar.median import median_frame
from dbspark.columnar.ordered_fold import finish
from dbspark.engines.spark.buckets import BucketSnap
from dbspark.errors import NegativeStateError
from dbspark.ir.aggregate import AggSpec, result_dtype
from dbspark.trace.ranks import SortedRuns, group_slices, sorted_slice, values_of

BIG = 32_768  # a changed group with at least this many entries in the runs is ranked, not read


def _rank_type(t: pl.DataType) -> bool:
    return (
        (t.is_integer() and t != pl.UInt64())
        or t == pl.Date()
        or isinstance(t, pl.Datetime | pl.Duration | pl.Time)
    )


def rankable(spec: AggSpec, data_cols: Sequence[str], keys: Sequence[str]) -> bool:
    """Whether the spec's ordered calls can be ranked over runs whose data columns are `data_cols`."""
    rest = [c for c in data_cols if c not in keys]
    if not rest or not any(c.kind == "ordered" for c in spec.calls):
        return False
    for c in spec.calls:
        if c.kind == "user" or (
            c.kind == "linear" and c.arg and c.func != "count" and mode_of(spec, c) == "float"
        ):
            return False  # (floating sums: `ordered_fold` sums a group's rows exactly, as a multiset)
        if c.kind == "ordered":
            if c.arg != rest[0] or c.func not in ("min", "max", "median"):
                return False
            if not _rank_type(spec.input_schema[c.arg]):
                return False
    return True


def _frame_run(df: pl.DataFrame, arg: str) -> tuple[np.ndarray, np.ndarray]:
    """Rows held in the driver (a change, pending rows) as a sorted run of their non-NULL values."""
    df = df.filter(pl.col(arg).is_not_null()).sort(arg)
    return df[arg].to_physical().to_numpy(), df[WEIGHT].to_numpy().astype(np.int64, copy=False)


def step(
    spec: AggSpec,
    keys: list[str],
    groups: pl.DataFrame,
    slices: Sequence[list[pa.Table]],
    d: pl.DataFrame,
    pend: pl.DataFrame,
    was: bool,
) -> ZSet | None:
    """-old and +new rows of the big groups (row i of `groups`: its runs' `slices[i]`), given the change
    `d` and the trace's pending rows `pend` (both: data columns and weights, any groups). None when a
    group's weights are too large to rank without overflow checks (the caller reads it instead)."""
    arg = next(str(c.arg) for c in spec.calls if c.kind == "ordered")
    t = spec.input_schema[arg]
    phys = pl.Series([], dtype=t).to_physical().dtype
    linear_args = any(c.kind == "linear" and c.arg is not None for c in spec.calls)
    olds, news = [], []
    # per ordered call and side (old, new): per group the least and the greatest middle value (MIN,
    # MAX: both the value) and the count of non-NULL values
    vals: dict[str, tuple[list, list]] = {c.name: ([], []) for c in spec.calls if c.kind == "ordered"}
    for i, parts in enumerate(slices):
        key = groups.slice(i, 1)
        on = pl.all_horizontal([pl.col(k).eq_missing(key[k][0]) for k in keys])
        dg, pg = d.filter(on), pend.filter(on)
        old_runs = SortedRuns([*(sorted_slice(s, arg, WEIGHT) for s in parts), _frame_run(pg, arg)])
        new_runs = old_runs.with_run(*_frame_run(dg, arg))
        if linear_args:
            runs = pl.from_arrow(pa.concat_tables(parts))
            assert isinstance(runs, pl.DataFrame)
            whole = pl.concat([runs, pg.select(runs.columns)], how="vertical")
            guard(spec, whole)
            acc = whole.select(accumulator_exprs(spec))
        else:
            n_rows = sum(int(values_of(s.column(WEIGHT)).sum()) for s in parts) + int(pg[WEIGHT].sum())
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
                c = next(c for c in spec.calls if c.kind == "ordered")
                raise NegativeStateError(
                    f"aggregate {c.name!r}, group {tuple(key[k][0] for k in spec.by)}: multiplicity of "
                    f"{v!r} would become {bad[1]} (below zero); a delete of a value not there"
                )
            m = sr.total()
            for c in spec.calls:
                if c.kind != "ordered":
                    continue
                if m <= 0:
                    vals[c.name][side].append((None, None, None))
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


def ranked(
    spec: AggSpec,
    keys: list[str],
    groups: pl.DataFrame,
    d: pl.DataFrame,
    snap: BucketSnap,
    pend: pl.DataFrame,
    was: bool,
) -> tuple[ZSet, pl.DataFrame] | None:
    """The output change of the changed `groups` that hold at least `BIG` entries in the trace's runs
    (`step`), and the other groups (to be read); None when no group is ranked."""
    layout = snap.layout
    if layout is None or not snap.files or not rankable(spec, layout.data_cols, keys):
        return None
    found = group_slices(layout, snap.files, groups, BIG)
    if not found:
        return None
    idx = sorted(found)
    out = step(spec, keys, groups[idx], [found[i] for i in idx], d, pend, was)
    if out is None:
        return None
    rest = np.ones(groups.height, dtype=bool)
    rest[idx] = False
    return out, groups.filter(pl.Series(rest))
