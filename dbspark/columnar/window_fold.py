"""SQL window functions over whole partitions, in Polars: the fold `operators/window.py` runs per partition
(`Kernel.cogroup`), for a whole Z-set and for a change (the changed partitions before and after it).

A partition's rows (a row of weight w counted w times) are sorted by the window's ORDER BY, then by every
other column so that ties are broken the same way every time (DuckDB leaves the order of ties to its
plan: ROW_NUMBER, LAG, LEAD, FIRST_VALUE and LAST_VALUE of tied rows may differ from it). Every call
reads the frame of each row as an interval [a, b] of the partition's positions:

- the default frame: with ORDER BY, RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW (up to the last
  peer: the rows that tie with the current one); without, the whole partition;
- ROWS BETWEEN x AND y, each bound UNBOUNDED, n PRECEDING / FOLLOWING or CURRENT ROW.

SUM / COUNT / AVG are differences of prefix sums at the interval's ends, MIN / MAX running extremes at
its end (frames from the partition's first row) or a sparse table's two blocks (frames from an offset),
FIRST_VALUE / LAST_VALUE the values at its
ends; ROW_NUMBER, RANK, DENSE_RANK, PERCENT_RANK, CUME_DIST, NTILE, LAG and LEAD ignore the frame, as SQL.
Two calls serve other operators: `asof` (the last right-side row so far: ASOF joins) and
`session_start` / `session_end` (session windows). The calls are described in `ir/window.py`.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from dbspark.algebra.zset import WEIGHT
from dbspark.errors import NegativeStateError
from dbspark.ir.functions import supertype2
from dbspark.ir.window import ASOF, PEERS, SESSIONS, SHIFTS, WindowCall, WindowSpec

IX, N, S, PEER, RN = "__wi", "__wn", "__ws", "__wpeer", "__wrn"
# a fold of a partition's last rows (`window_suffix.py`): the units and peer groups before them, and per
# call (`based(call, kind)`) the sum, count, extreme and first value of the rows before them
BU, BG = "__wbu", "__wbg"


def based(c: WindowCall, kind: str) -> str:
    return f"__wb_{c.out}_{kind}"


def compute(spec: WindowSpec, df: pl.DataFrame) -> pl.DataFrame:
    """The rows of `df` (whole partitions; its columns and weight), one per unit, each with the calls'
    values; weight 1."""
    df = df.group_by(list(spec.columns)).agg(pl.col(WEIGHT).sum()).filter(pl.col(WEIGHT) != 0)
    return fold(spec, df)


def order_of(spec: WindowSpec) -> tuple[list[str], list[bool], list[bool]]:
    """A partition's rows' order: the ORDER BY, then every other column (columns, descending, NULLs last)."""
    order = [k.column for k in spec.order]
    rest = [c for c in spec.columns if c not in spec.partition and c not in order]
    return (
        [*order, *rest],
        [k.descending for k in spec.order] + [False] * len(rest),
        [not k.nulls_first for k in spec.order] + [True] * len(rest),
    )


def sort_rows(spec: WindowSpec, df: pl.DataFrame) -> pl.DataFrame:
    """`df` in the order of its partitions' rows: by partition, then `order_of`."""
    part = list(spec.partition)
    by, desc, nulls_last = order_of(spec)
    return df.sort(
        [*part, *by],
        descending=[False] * len(part) + desc,
        nulls_last=[True] * len(part) + nulls_last,
        maintain_order=True,
    )


def peer_starts(spec: WindowSpec, first: pl.Expr) -> pl.Expr:
    """True at the first row of each peer group (rows tied by the ORDER BY) of sorted rows."""
    new_peer = pl.col(IX) == first
    for k in spec.order:
        new_peer = new_peer | ~pl.col(k.column).eq_missing(pl.col(k.column).shift(1))
    return new_peer


def fold(spec: WindowSpec, df: pl.DataFrame, base: bool = False, carry: tuple[str, ...] = ()) -> pl.DataFrame:
    """The rows of `df` (consolidated: distinct rows, positive weights), one per unit, each with the calls'
    values and the columns `carry`; weight 1. With `base`, `df`'s rows are the last rows of their
    partitions and carry the columns `BU`, `BG` and `based(...)` describing the rows before them."""
    if df.height and df[WEIGHT].min() < 0:  # type: ignore[operator]
        raise NegativeStateError(f"a window over a negative weight: {df.filter(pl.col(WEIGHT) < 0).row(0)}")
    if df.height:
        df = df.select(pl.all().repeat_by(pl.col(WEIGHT))).explode(df.columns)
    df = sort_rows(spec, df.drop(WEIGHT)).with_row_index(IX)
    over = list(spec.partition) or None
    first = pl.col(IX).min().over(over) if over else pl.lit(0, pl.UInt32)
    size = pl.len().over(over) if over else pl.len()
    df = df.with_columns(
        first.cast(pl.Int64).alias(S),
        size.cast(pl.Int64).alias(N),
        peer_starts(spec, first).cum_sum().alias(PEER),
    )
    df = df.with_columns((pl.col(IX).cast(pl.Int64) - pl.col(S)).alias(RN))  # 0-based place in the partition
    last_peer = pl.col(RN).max().over(PEER)
    out = [_call(c, spec, last_peer, df, base) for c in spec.calls]
    return df.select(*spec.columns, *carry, *out, pl.lit(1, pl.Int64).alias(WEIGHT))


def _call(c: WindowCall, spec: WindowSpec, last_peer: pl.Expr, df: pl.DataFrame, base: bool) -> pl.Expr:
    rn, n = pl.col(RN), pl.col(N)
    over = list(spec.partition) or None
    before = pl.col(BU) if base else pl.lit(0, pl.Int64)  # units of the partition before these rows
    if c.func == "row_number":
        e = rn + 1 + before
    elif c.func == "rank":
        e = rn.min().over(PEER) + 1 + before
    elif c.func == "dense_rank":
        e = (
            pl.col(PEER) - pl.col(PEER).min().over(over) + 1
            if over
            else pl.col(PEER) - pl.col(PEER).min() + 1
        ) + (pl.col(BG) if base else 0)
    elif c.func == "percent_rank":
        e = pl.when(n > 1).then((rn.min().over(PEER)).cast(pl.Float64) / (n - 1)).otherwise(0.0)
    elif c.func == "cume_dist":
        e = (last_peer + 1).cast(pl.Float64) / n
    elif c.func == "ntile":
        q, r = n // c.n, n % c.n
        big = r * (q + 1)
        e = (
            pl.when(q == 0)
            .then(rn + 1)
            .when(rn < big)
            .then(rn // (q + 1) + 1)
            .otherwise((rn - big) // q.clip(1) + r + 1)
        )
    elif c.func in SESSIONS:  # (`frontends/sql/timewindows.py`): rows closer than the gap, chained
        assert c.arg is not None
        t = pl.col(c.arg)
        prev = t.shift(1).over(over) if over else t.shift(1)
        new = (rn == 0) | prev.is_null() | ((t - prev) > c.n)
        sid = new.cast(pl.Int64).cum_sum()
        e = t.min().over(sid) if c.func == "session_start" else t.max().over(sid) + c.n
    elif c.func == ASOF:  # (`frontends/sql/asof.py`): the last right-side row so far in the order
        assert c.arg is not None and c.default is not None
        at = pl.when(pl.col(c.default) == 0).then(pl.col(IX).cast(pl.Int64))
        last = at.forward_fill().over(over) if over else at.forward_fill()
        e = pl.when(last.is_not_null()).then(
            pl.col(c.arg).gather(last.fill_null(0).clip(0, max(df.height - 1, 0)))
        )
    elif c.func in SHIFTS:
        k = c.n if c.func == "lag" else -c.n
        assert c.arg is not None
        shifted = pl.col(c.arg).shift(k).over(over) if over else pl.col(c.arg).shift(k)
        inside = (rn - k >= 0) & (rn - k < n)
        e = pl.when(inside).then(shifted).otherwise(pl.col(c.default) if c.default else None)
    else:
        e = _framed(c, spec, last_peer, df, base and (c.start is None or not c.rows))
    return e.cast(c.dtype).alias(c.out)


def _framed(c: WindowCall, spec: WindowSpec, last_peer: pl.Expr, df: pl.DataFrame, base: bool) -> pl.Expr:
    """A frame's aggregate or end value: over positions [a, b] of the partition (global rows S+a..S+b).
    With `base` the frame starts at the partition's first row, which is before these rows: the rows
    before them add their `based` sums, counts, extremes and first value."""
    rn, n, s = pl.col(RN), pl.col(N), pl.col(S)
    if c.rows:
        a = pl.lit(0, pl.Int64) if c.start is None else (rn + c.start).clip(0)
        b = n - 1 if c.end is None else (rn + c.end).clip(upper_bound=n - 1)
    elif c.bounds is not None:
        a, b = _range_ends(c, spec, df, last_peer)
    else:
        a = pl.lit(0, pl.Int64)
        b = last_peer if spec.order else n - 1
    empty = (a > b) | (a >= n) | (b < 0)
    lo, hi = s + a, s + b
    over = list(spec.partition) or None
    if c.func in ("first_value", "last_value"):
        assert c.arg is not None
        at = lo if c.func == "first_value" else hi
        v = pl.when(empty).then(None).otherwise(pl.col(c.arg).gather(at.clip(0, df.height - 1)))
        if base and c.func == "first_value":
            v = pl.when(pl.col(BU) > 0).then(pl.col(based(c, "first"))).otherwise(v)
        return v
    if c.func in ("min", "max") and (c.start if c.rows else c.bounds and c.bounds[0]) is not None:
        assert c.arg is not None
        to_end = (c.end if c.rows else c.bounds and c.bounds[1]) is None
        return _sliding_extreme(c, df, lo, hi, empty, over, to_end)
    if c.func in ("min", "max"):
        assert c.arg is not None
        x = pl.col(c.arg)
        run = x.cum_min() if c.func == "min" else x.cum_max()
        run = run.over(over).forward_fill().over(over) if over else run.forward_fill()
        v = pl.when(empty).then(None).otherwise(run.gather(hi.clip(0, df.height - 1)))
        if base:
            both = [v, pl.col(based(c, "extreme"))]
            v = pl.min_horizontal(both) if c.func == "min" else pl.max_horizontal(both)
        return v
    ones = pl.col(c.arg or IX).is_not_null().cast(pl.Int64)  # COUNT(*): every row
    count = pl.when(empty).then(0).otherwise(_between(ones, lo, hi, df.height))
    if base:
        count = count + (pl.col(BU) if c.func == "count_star" else pl.col(based(c, "count")))
    if c.func in ("count", "count_star"):
        return count
    assert c.arg is not None
    x = pl.col(c.arg)
    vals = x.cast(sum_type(c, df.schema[c.arg]) if base else pl.Float64 if c.func == "avg" else c.dtype)
    total = _between(vals.fill_null(0), lo, hi, df.height)
    if base:
        total = pl.when(empty).then(0).otherwise(total) + pl.col(based(c, "sum"))
    if c.func == "avg":
        total = total.cast(pl.Float64) / count
    return pl.when(count == 0).then(None).otherwise(total)


def _sliding_extreme(
    c: WindowCall,
    df: pl.DataFrame,
    lo: pl.Expr,
    hi: pl.Expr,
    empty: pl.Expr,
    over: list[str] | None,
    to_end: bool,
) -> pl.Expr:
    """MIN / MAX over the global rows lo..hi of a frame that does not start at the partition's first row
    (NULLs skipped). To UNBOUNDED FOLLOWING: the partition's extreme of the rows from lo on (a reversed
    running extreme). Else a sparse table answers it: level j holds the extreme of the 2^j rows from each
    row; a frame of length L is the extreme of the two blocks of level floor(log2 L) at its ends (they
    overlap, which an extreme allows), levels up to the longest frame's (a ROWS frame's width, a RANGE
    frame's longest). Blocks may run past a partition's end (levels are over all rows), but a frame's two
    blocks lie inside it."""
    assert c.arg is not None
    ext = pl.min_horizontal if c.func == "min" else pl.max_horizontal
    top = max(df.height - 1, 0)
    if to_end:
        x = pl.col(c.arg)
        run = x.cum_min(reverse=True) if c.func == "min" else x.cum_max(reverse=True)
        run = run.over(over).backward_fill().over(over) if over else run.backward_fill()
        return pl.when(empty).then(None).otherwise(run.gather(lo.clip(0, top)))
    if c.rows:
        assert c.start is not None and c.end is not None
        width = c.end - c.start + 1
    else:
        width = df.select((hi - lo + 1).max()).item() if df.height else 0
    if width is None or width <= 0 or not df.height:
        return pl.lit(None, df.schema[c.arg])
    levels = [df.get_column(c.arg).rename("a")]
    while 1 << len(levels) <= width:
        prev, half = levels[-1], 1 << (len(levels) - 1)
        pair = pl.DataFrame([prev, prev.shift(-half).rename("b")])
        levels.append(pair.select(ext("a", "b")).to_series().rename("a"))
    length = hi - lo + 1
    e: pl.Expr = pl.lit(None, df.schema[c.arg])
    for j in range(len(levels)):  # (the largest block that fits the frame's length is applied last)
        lv = pl.lit(levels[j])
        block = ext(lv.gather(lo.clip(0, top)), lv.gather((hi - (1 << j) + 1).clip(0, top)))
        e = pl.when(length >= 1 << j).then(block).otherwise(e)
    return pl.when(empty).then(None).otherwise(e)


def _range_ends(
    c: WindowCall, spec: WindowSpec, df: pl.DataFrame, last_peer: pl.Expr
) -> tuple[pl.Expr, pl.Expr]:
    """The positions (in the partition) of the first and last rows of each row's RANGE frame
    (`WindowCall.bounds`): UNBOUNDED the partition's ends, CURRENT ROW the row's peers' ends, a bound
    value the first row at or past it (start) or the last row at or before it (end) in the window's
    order, among rows whose ORDER BY value is not NULL (a row whose value is NULL: its peers' ends)."""
    assert c.bounds is not None
    ends = []
    for bound, first, peer, whole in (
        (c.bounds[0], True, pl.col(RN).min().over(PEER), pl.lit(0, pl.Int64)),
        (c.bounds[1], False, last_peer, pl.col(N) - 1),
    ):
        if bound is None:
            ends.append(whole)
        else:  # evaluated once here: the frame's ends are read several times by the call
            at = peer if bound == PEERS else pl.lit(_range_end(spec, df, bound, first)).fill_null(peer)
            ends.append(pl.lit(df.select(at.cast(pl.Int64)).to_series()))
    return ends[0], ends[1]


def _range_end(spec: WindowSpec, df: pl.DataFrame, bound: str, first: bool) -> pl.Series:
    """A RANGE frame's start (`first`) or end for every row of `df` whose bound value is not NULL (NULL
    for the others): searched per partition (`S`) by an as-of join of the rows' bound values against the
    partition's distinct ORDER BY values, each with its first and last position. Ascending, a start is
    the first row of the smallest value at or above the bound, an end the last row of the largest at or
    below it; descending, the reverse."""
    (key,) = spec.order
    t = supertype2(df.schema[key.column], df.schema[bound], "a RANGE frame's bound")
    # `df` is in the window's order, so each partition's peer groups (its distinct values) are runs in
    # order, and so are the bounds (the value moved by a constant): no sort, reversed when descending
    g = df.select(S, pl.col(key.column).cast(t).alias("v"), RN, PEER)
    head = g.filter((pl.col(PEER) != pl.col(PEER).shift(1)).fill_null(True))
    tail = g.filter((pl.col(PEER) != pl.col(PEER).shift(-1)).fill_null(True))
    values = head.select(S, "v", pl.col(RN).alias("first"), tail.get_column(RN).alias("last")).drop_nulls("v")
    targets = df.select(IX, S, pl.col(bound).cast(t).alias("t")).drop_nulls("t")
    if key.descending:
        values, targets = values.reverse(), targets.reverse()
    found = targets.join_asof(
        values,
        left_on="t",
        right_on="v",
        by=S,
        strategy="forward" if first != key.descending else "backward",
        check_sortedness=False,
    )
    # no row at the bound: a start past every non-NULL row, an end before every one (NULLS LAST, a
    # frame to UNBOUNDED FOLLOWING then holds the NULLs, as DuckDB's)
    placed = pl.when(pl.col(key.column).is_not_null()).then(pl.col(RN))
    edge = df.select((placed.max() + 1 if first else placed.min() - 1).over(S)).to_series().to_numpy()
    at = found.get_column(IX).to_numpy()
    pos = found.get_column("first" if first else "last")
    out = np.full(df.height, np.nan)
    out[at] = np.where(pos.is_null().to_numpy(), edge[at], pos.fill_null(0).to_numpy())
    return pl.Series(out, nan_to_null=True).cast(pl.Int64)


def sum_type(c: WindowCall, arg: pl.DataType) -> pl.DataType:
    """The type a fold of a partition's last rows sums `c`'s argument in: an AVG's the argument's decimal,
    64-bit integers for integers (exact: `window_suffix.eligible`), else floats."""
    if c.func != "avg":
        return c.dtype
    return arg if isinstance(arg, pl.Decimal) else pl.Int64() if arg.is_integer() else pl.Float64()


def _between(x: pl.Expr, lo: pl.Expr, hi: pl.Expr, height: int) -> pl.Expr:
    """The sum of x over the rows lo..hi (global positions), by prefix sums."""
    run = x.cum_sum()
    top = max(height - 1, 0)
    below = pl.when(lo > 0).then(run.gather((lo - 1).clip(0, top))).otherwise(0)
    return run.gather(hi.clip(0, top)) - below


def expected_schema(spec: WindowSpec, schema: pl.Schema) -> pl.Schema:
    return pl.Schema([*((c, schema[c]) for c in spec.columns), *((c.out, c.dtype) for c in spec.calls)])


def whole(spec: WindowSpec, frames: list[pl.DataFrame]) -> pl.DataFrame:
    """`cogroup` function: the window over whole partitions."""
    (df,) = frames
    return compute(spec, df)


def change(spec: WindowSpec, frames: list[pl.DataFrame]) -> pl.DataFrame:
    """`cogroup` function: -old +new rows of the partitions of the change `frames[0]`, whose rows before it
    are `frames[1]`."""
    d, found = frames
    cols = list(spec.columns)
    old = compute(spec, found.select(*cols, WEIGHT))
    new = compute(
        spec, pl.concat([found.select(*cols, WEIGHT), d.select(*cols, WEIGHT)], how="vertical_relaxed")
    )
    both = pl.concat([new, old.with_columns(-pl.col(WEIGHT))], how="vertical_relaxed")
    keys = [c for c in both.columns if c != WEIGHT]
    return both.group_by(keys).agg(pl.col(WEIGHT).sum()).filter(pl.col(WEIGHT) != 0)
