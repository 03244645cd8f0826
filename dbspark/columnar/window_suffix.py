"""A window's change folded from each partition's first changed row on (`operators/window.py`).

With an ORDER BY, a row's window values depend on the rows before it (ranks, running aggregates, LAG, a
ROWS frame's preceding rows) and on a bounded number of rows after it (LEAD, a ROWS frame's following
rows, its peers). So a change moves the values of the rows from its first changed position on only:
rows before `cut` keep theirs. Per partition, with `R` the calls' largest offset (`reach`):

- `i0`, the first row whose weight the change moves (in the order of `window_fold.sort_rows`, the fold's
  own: partition, ORDER BY, every other column);
- `cut`, the first row of the peer group holding the row `R` rows before `i0` (the rows between are
  unchanged, so at least `R` units in the partition before and after the change): the rows before `cut`
  keep their values (their following rows and their peers are unchanged);
- `lb = cut - R`: the rows from `lb` to `cut` are read again for LAG and the preceding rows of ROWS
  frames; the rows before `lb` (the *base*) enter only through their totals: units (ROW_NUMBER, RANK),
  peer groups (DENSE_RANK), and for frames from UNBOUNDED PRECEDING their sums, counts, extremes and
  first value (`window_fold.fold` with `base`).

The rows from `lb` on are folded before and after the change; the rows from `cut` on are emitted as
-old +new. Sums are exact (integers, decimals: `eligible`), so a value folded now with one base equals
the value an earlier step emitted with another, and the retraction cancels it. Functions over the whole
partition (NTILE, PERCENT_RANK, CUME_DIST, frames to UNBOUNDED FOLLOWING, windows without ORDER BY), RANGE
frames other than the default (they reach by value),
floating-point sums and the ASOF and session calls refold whole partitions (`window_fold.change`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import polars as pl

from dbspark.algebra.zset import WEIGHT
from dbspark.columnar.window_fold import (
    BG,
    BU,
    IX,
    PEER,
    S,
    based,
    expected_schema,
    fold,
    order_of,
    peer_starts,
    sort_rows,
    sum_type,
)
from dbspark.errors import NegativeStateError
from dbspark.ir.window import RANKING, SHIFTS, VALUES, WindowCall, WindowSpec

VERSION = "__wv"  # -1: a row before the change, 1: after it
OLD, NEW, CHANGED, FIRST_PEER, I0, CUT, LB, KEEP = (
    "__wold",
    "__wnew",
    "__wchg",
    "__wpf",
    "__wi0",
    "__wcut",
    "__wlb",
    "__wkeep",
)
WHOLE = ("ntile", "percent_rank", "cume_dist")


def eligible(spec: WindowSpec, schema: pl.Schema) -> bool:
    """Whether `spec`'s calls can be folded from a partition's first changed row on (see the module)."""
    if not spec.order:
        return False
    for c in spec.calls:
        if c.func in WHOLE or c.func not in (
            *RANKING,
            *SHIFTS,
            *VALUES,
            "sum",
            "count",
            "count_star",
            "avg",
            "min",
            "max",
        ):
            return False
        if c.rows and c.end is None and c.func not in RANKING and c.func not in SHIFTS:
            return False
        if c.bounds is not None and c.func not in RANKING and c.func not in SHIFTS:
            return False  # a RANGE frame reaches by value, not by a number of rows
        if c.func in ("sum", "avg") and not _exact(sum_type(c, schema[c.arg or ""])):
            return False
    return True


def _exact(t: pl.DataType) -> bool:
    return t.is_integer() or isinstance(t, pl.Decimal)


def reach(spec: WindowSpec) -> int:
    """The most rows a call looks before or after the current one."""
    r = 0
    for c in spec.calls:
        if c.func in SHIFTS:
            r = max(r, abs(c.n))
        elif c.rows and c.func not in RANKING:
            r = max(r, *(abs(b) for b in (c.start, c.end) if b is not None))
    return r


def change(spec: WindowSpec, frames: list[pl.DataFrame]) -> pl.DataFrame:
    """`cogroup` function: -old +new rows of the partitions of the change `frames[0]` whose values it moves,
    `frames[1]` the partitions' rows before it."""
    d, found = frames[:2]
    finished = frames[2] if len(frames) > 2 else None
    if reach(spec) == 0 and not any(d.schema[k.column].is_float() for k in spec.order):
        return _from_key(spec, d, found, finished)
    assert finished is None or finished.height == 0, "finished rows' totals for a window with a reach"
    return _sorted(spec, d, found)


def finishes(spec: WindowSpec, schema: pl.Schema) -> bool:
    """Whether rows below a waterline of the first ORDER BY column can leave the window's state for their
    partitions' totals (`finish`): calls folded by key (`reach` 0) over an ascending order, NULLs last,
    so that those rows are a prefix of their partitions no change reaches again."""
    if not (spec.order and eligible(spec, schema) and reach(spec) == 0):
        return False
    first = spec.order[0]
    return not (first.descending or first.nulls_first) and not any(
        schema[k.column].is_float() for k in spec.order
    )


def totals_schema(spec: WindowSpec, schema: pl.Schema) -> pl.Schema:
    """The columns of a partition's totals (`_totals_by_key`)."""
    out = [(c, schema[c]) for c in spec.partition] + [(BU, pl.Int64()), (BG, pl.Int64())]
    for c in spec.calls:
        for name in _names(c):
            kind = name.rsplit("_", 1)[1]
            t = schema[c.arg or ""] if kind in ("first", "extreme") else pl.Int64()
            out.append((name, sum_type(c, schema[c.arg or ""]) if kind == "sum" else t))
    return pl.Schema(out)


def finish(spec: WindowSpec, frames: list[pl.DataFrame]) -> pl.DataFrame:
    """`cogroup` function: -old +new totals of the partitions of `frames[0]`, rows that leave the window's
    state (below a waterline: before every row a later change holds), `frames[1]` their totals so far."""
    rows, old = frames
    was = _consolidated(old)
    now = merge_totals(spec, was, _totals_by_key(spec, rows.select(*spec.columns, WEIGHT)))
    cols = list(now.columns)
    return pl.concat(
        [
            was.select(cols).with_columns(pl.lit(-1, pl.Int64).alias(WEIGHT)),
            now.with_columns(pl.lit(1, pl.Int64).alias(WEIGHT)),
        ],
        how="vertical_relaxed",
    )


def _consolidated(totals: pl.DataFrame) -> pl.DataFrame:
    """Totals rows as a trace holds them (-old +new pieces): each partition's one row, no weight."""
    cols = [c for c in totals.columns if c != WEIGHT]
    got = totals.group_by(cols).agg(pl.col(WEIGHT).sum()).filter(pl.col(WEIGHT) != 0)
    if got.height and (got[WEIGHT] != 1).any():
        raise NegativeStateError(f"a window's totals with a weight other than 1: {got.row(0)}")
    return got.drop(WEIGHT)


def merge_totals(spec: WindowSpec, a: pl.DataFrame, b: pl.DataFrame) -> pl.DataFrame:
    """Per partition, the totals of rows `a` then rows `b` (every row of `a` before every row of `b`)."""
    part = list(spec.partition)
    assert part, "totals are by partition (a window without one: by a constant)"
    lowest = {based(c, "extreme") for c in spec.calls if c.func == "min"}
    cols = [c for c in b.columns if c not in part]
    j = a.select(*part, *cols).join(b, on=part, how="full", nulls_equal=True, coalesce=True, suffix=":b")
    seen = pl.col(BU).fill_null(0) > 0
    out = []
    for c in cols:
        x, y = pl.col(c), pl.col(f"{c}:b")
        if c.endswith("_first"):
            e = pl.when(seen).then(x).otherwise(y)
        elif c.endswith("_extreme"):
            e = pl.min_horizontal(x, y) if c in lowest else pl.max_horizontal(x, y)
        else:
            e = x.fill_null(0) + y.fill_null(0)
        out.append(e.cast(b.schema[c]).alias(c))
    return j.select(*part, *out)


def _from_key(
    spec: WindowSpec, d: pl.DataFrame, found: pl.DataFrame, finished: pl.DataFrame | None = None
) -> pl.DataFrame:
    """The change for calls that look at no row after the current one's peers nor a bounded number of rows
    before it (`reach` 0): `cut` is the first changed ORDER BY key of each partition, found by comparing
    keys (no sort of the partitions' rows); the rows before it enter through their totals only."""
    cols, part = list(spec.columns), list(spec.partition)
    keys = [k.column for k in spec.order]
    dc = d.group_by(cols).agg(pl.col(WEIGHT).sum()).filter(pl.col(WEIGHT) != 0)
    if dc.height == 0:
        return _empty(spec, d.schema)
    marks = [f"__wc{i}" for i in range(len(keys))]
    cut = (
        sort_rows(spec, dc)
        .unique(subset=part or None, keep="first", maintain_order=True)
        .select(*part, *(pl.col(k).alias(m) for k, m in zip(keys, marks, strict=True)))
    )
    if not part:
        cut = cut.head(1)
    cut = cut.cast({c: found.schema[c] for c in part})
    at = found.join(cut, on=part, nulls_equal=True) if part else found.join(cut, how="cross")
    before = _before(spec, marks)
    base = at.filter(before).select(*cols, WEIGHT)
    after = at.filter(~before).select(*cols, WEIGHT)
    rows = (
        pl.concat(
            [
                after.with_columns(pl.col(WEIGHT).alias(OLD)),
                dc.with_columns(pl.lit(0, pl.Int64).alias(OLD)),
            ],
            how="vertical_relaxed",
        )
        .group_by(cols)
        .agg(pl.col(WEIGHT).sum().alias(NEW), pl.col(OLD).sum())
        .filter((pl.col(NEW) != 0) | (pl.col(OLD) != 0))
    )
    _check(rows)
    totals = _totals_by_key(spec, base)
    if finished is not None and finished.height:  # the rows that left the state precede every other
        totals = merge_totals(spec, _consolidated(finished.select(*totals.columns, WEIGHT)), totals)
    if part:
        rows = rows.join(totals, on=part, how="left", nulls_equal=True)
    else:
        rows = rows.join(totals, how="cross")
    fill = [BU, BG, *(n for c in spec.calls for n in _names(c) if n.endswith(("_sum", "_count")))]
    rows = rows.with_columns(pl.col(f).fill_null(0) for f in fill).with_columns(pl.lit(True).alias(KEEP))
    return _difference(spec, rows, [*cols, *totals.columns[len(part) :]])


def _before(spec: WindowSpec, marks: list[str]) -> pl.Expr:
    """A row's ORDER BY key strictly before the key in the columns `marks` (as `sort_rows` orders)."""
    out, same = pl.lit(False), pl.lit(True)
    for k, m in zip(spec.order, marks, strict=True):
        a, b = pl.col(k.column), pl.col(m)
        less = (a > b) if k.descending else (a < b)
        nulls = (a.is_null() & b.is_not_null()) if k.nulls_first else (a.is_not_null() & b.is_null())
        out = out | (same & (less.fill_null(False) | nulls))
        same = same & a.eq_missing(b)
    return out


def _totals_by_key(spec: WindowSpec, base: pl.DataFrame) -> pl.DataFrame:
    """Per partition, the totals of its rows before the cut (`window_fold.fold`'s `base` columns)."""
    part = list(spec.partition)
    if any(c.func in ("dense_rank", "min", "max", "first_value") for c in spec.calls):
        base = base.group_by(list(spec.columns)).agg(pl.col(WEIGHT).sum()).filter(pl.col(WEIGHT) != 0)
    w = pl.col(WEIGHT)
    aggs = [
        w.sum().cast(pl.Int64).alias(BU),
        pl.struct([k.column for k in spec.order]).n_unique().cast(pl.Int64).alias(BG),
    ]
    for c in spec.calls:
        if c.arg is None:
            continue
        x = pl.col(c.arg)
        for name in _names(c):
            kind = name.rsplit("_", 1)[1]
            if kind == "first":  # the partition's first row in `sort_rows`'s order
                by, desc, nulls_last = order_of(spec)
                e = x.sort_by(by, descending=desc, nulls_last=nulls_last, maintain_order=True).first()
            elif kind == "extreme":
                e = x.min() if c.func == "min" else x.max()
            elif kind == "count":
                e = (x.is_not_null().cast(pl.Int64) * w).sum()
            else:
                t = sum_type(c, base.schema[c.arg])
                e = (x.cast(t) * w).sum().cast(t)
            aggs.append(e.alias(name))
    return base.group_by(part).agg(aggs) if part else base.select(aggs)


def _sorted(spec: WindowSpec, d: pl.DataFrame, found: pl.DataFrame) -> pl.DataFrame:
    """The change for any eligible calls: the partitions' rows sorted, `cut` and `lb` found by position."""
    cols = list(spec.columns)
    part = list(spec.partition)

    def per_partition(e: pl.Expr) -> pl.Expr:
        return e.over(part) if part else e

    m = (
        pl.concat(
            [
                found.select(*cols, WEIGHT).with_columns(pl.col(WEIGHT).alias(OLD)),
                d.select(*cols, WEIGHT).with_columns(pl.lit(0, pl.Int64).alias(OLD)),
            ],
            how="vertical_relaxed",
        )
        .group_by(cols)
        .agg(pl.col(WEIGHT).sum().alias(NEW), pl.col(OLD).sum())
        .filter((pl.col(NEW) != 0) | (pl.col(OLD) != 0))
    )
    _check(m)
    m = sort_rows(spec, m).with_columns((pl.col(NEW) != pl.col(OLD)).alias(CHANGED))
    m = m.filter(per_partition(pl.col(CHANGED).any())).with_row_index(IX)
    m = m.with_columns(pl.col(IX).cast(pl.Int64))
    first = per_partition(pl.col(IX).min())
    r = reach(spec)
    m = m.with_columns(
        first.alias(S),
        peer_starts(spec, first).cum_sum().alias(PEER),
        per_partition(pl.when(pl.col(CHANGED)).then(pl.col(IX)).min()).alias(I0),
    )
    m = m.with_columns(pl.col(IX).min().over(PEER).alias(FIRST_PEER))
    at = pl.max_horizontal(pl.col(I0) - r, pl.col(S))
    m = m.with_columns(pl.col(FIRST_PEER).gather(at).alias(CUT))
    m = m.with_columns(pl.max_horizontal(pl.col(CUT) - r, pl.col(S)).alias(LB))
    base = pl.col(IX) < pl.col(LB)  # unchanged rows: their weights before and after are one
    totals = [
        per_partition(pl.when(base).then(pl.col(NEW)).sum()).cast(pl.Int64).alias(BU),
        (pl.col(PEER).gather(pl.col(LB)) - pl.col(PEER).gather(pl.col(S))).cast(pl.Int64).alias(BG),
    ]
    for c in spec.calls:
        totals.extend(_totals(c, base, per_partition, m.schema))
    m = m.with_columns(totals).filter(pl.col(IX) >= pl.col(LB))
    m = m.with_columns((pl.col(IX) >= pl.col(CUT)).alias(KEEP))
    return _difference(spec, m, [*cols, BU, BG, *(name for c in spec.calls for name in _names(c))])


def _check(m: pl.DataFrame) -> None:
    bad = m.filter((pl.col(NEW) < 0) | (pl.col(OLD) < 0))
    if bad.height:
        raise NegativeStateError(f"a window over a negative weight: {bad.row(0)}")


def _difference(spec: WindowSpec, m: pl.DataFrame, columns: list[str]) -> pl.DataFrame:
    """-old +new values of the rows of `m` marked `KEEP`: `m`'s rows (the last ones of their partitions,
    from `lb` on) folded with their weights `OLD` and `NEW`, `columns` kept for the folds. One fold: the
    rows before and after the change are partitions of their own (`VERSION` 0 and 1)."""
    both = pl.concat(
        [
            m.filter(pl.col(w) > 0).select(*columns, KEEP, pl.col(w).alias(WEIGHT), pl.lit(v).alias(VERSION))
            for v, w in ((-1, OLD), (1, NEW))
        ]
    )
    versions = replace(spec, partition=(VERSION, *spec.partition))
    out = fold(versions, both, base=True, carry=(KEEP, VERSION)).filter(pl.col(KEEP))
    out = out.with_columns(pl.col(VERSION).cast(pl.Int64).alias(WEIGHT)).drop(KEEP, VERSION)
    return (
        out.group_by([c for c in out.columns if c != WEIGHT])
        .agg(pl.col(WEIGHT).sum())
        .filter(pl.col(WEIGHT) != 0)
    )


def _empty(spec: WindowSpec, schema: pl.Schema) -> pl.DataFrame:
    return pl.DataFrame(schema={**expected_schema(spec, schema), WEIGHT: pl.Int64()})


def _names(c: WindowCall) -> list[str]:
    kinds = {"first_value": ["first"], "min": ["extreme"], "max": ["extreme"], "count": ["count"]}
    kinds.update(sum=["sum", "count"], avg=["sum", "count"])
    return [based(c, k) for k in kinds.get(c.func, [])]


def _totals(
    c: WindowCall, base: pl.Expr, per_partition: Callable[[pl.Expr], pl.Expr], schema: pl.Schema
) -> list[pl.Expr]:
    """The base's totals `c` reads (`window_fold._framed`), on every row of its partition."""
    out: list[pl.Expr] = []
    if c.arg is None:
        return out
    x, w = pl.col(c.arg), pl.col(NEW)
    for name in _names(c):
        kind = name.rsplit("_", 1)[1]
        e: pl.Expr
        if kind == "first":
            e = pl.when(pl.col(LB) > pl.col(S)).then(x.gather(pl.col(S)))
        elif kind == "extreme":
            inside = pl.when(base).then(x)
            e = per_partition(inside.min() if c.func == "min" else inside.max())
        elif kind == "count":
            e = per_partition(pl.when(base).then(x.is_not_null().cast(pl.Int64) * w).sum())
        else:
            t = sum_type(c, schema[c.arg])
            e = per_partition(pl.when(base).then(x.cast(t) * w).sum()).cast(t)
        out.append(e.alias(name))
    return out
