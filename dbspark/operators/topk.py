"""Top-k: ORDER BY ... LIMIT ... OFFSET as an operator on Z-sets.

`StreamTopK` is the lifted operator: each step's whole Z-set (a bag: a row of weight w counts w times)
ordered by the sort keys, then by every column as the tie-break so that the result is deterministic,
and rows [offset, offset + limit) of that order kept, with the weight of the part of each row that
falls in the window. It is not linear. Its incremental form `TopKWindow` (`incremental/topk.py`) keeps a *window*: the
first units of the input's integral in the order (at least offset + limit of them, at most
`window_capacity`), with the weight of each row. A change whose rows are held in this process updates
the window alone: the integral's rows up to the window's last row B are exactly the window's plus the
change's rows up to B, so while those still hold offset + limit units, the top-k of the new integral is
the top-k of them (`window_step`); a change that drains the window below that, or one on the cluster,
refills it from the integral (the definition D ∘ Q ∘ I, `dbsp-paper.txt` Def 3.1: the engine reads the
first rows of the whole integral's order). A step's work is O(window + change) instead of O(state).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import polars as pl

from dbspark.algebra.zset import WEIGHT, ZSet
from dbspark.errors import SchemaError
from dbspark.ir.order import SortKey
from dbspark.operators.base import NONLINEAR, Operator, Shape

if TYPE_CHECKING:
    from dbspark.engines.base import Kernel


@dataclass(frozen=True)
class StreamTopK(Operator):
    """↑top-k: rows [offset, offset + limit) of each step's Z-set in `order` (None: no limit)."""

    order: tuple[SortKey, ...]
    limit: int | None
    offset: int = 0

    name = "stream_topk"
    kind = NONLINEAR

    def shape(self, ins: list[Shape]) -> Shape:
        for k in self.order:
            if k.column not in ins[0].schema:
                raise SchemaError(f"top-k orders by unknown column {k.column!r}")
        return Shape(ins[0].schema)

    def label(self) -> str:
        keys = ", ".join(f"{k.column}{' DESC' if k.descending else ''}" for k in self.order)
        return f"top-k [{keys}] limit {self.limit} offset {self.offset}"

    def eval(self, kernel: Kernel, state: Any, inputs: list[Any], undo: list) -> Any:
        return kernel.topk(inputs[0], self.order, self.limit, self.offset)


def full_order(order: tuple[SortKey, ...], columns: list[str]) -> tuple[SortKey, ...]:
    """The sort keys followed by every other column (ascending, NULLs last): a total order of rows."""
    used = {k.column for k in order}
    return order + tuple(SortKey(c) for c in columns if c not in used)


def _sorted(df: pl.DataFrame, order: tuple[SortKey, ...], extra: tuple[str, ...] = ()) -> pl.DataFrame:
    """`df` in the full order of `order` (`full_order` over its data columns), then by `extra`."""
    keys = full_order(order, [c for c in df.columns if c != WEIGHT and c not in extra])
    return df.sort(
        [k.column for k in keys] + list(extra),
        descending=[k.descending for k in keys] + [False] * len(extra),
        nulls_last=[not k.nulls_first for k in keys] + [False] * len(extra),
        maintain_order=True,
    )


def topk_frame(df: pl.DataFrame, order: tuple[SortKey, ...], limit: int | None, offset: int) -> pl.DataFrame:
    """Top-k of a consolidated frame with a weight column (positive weights: a bag), vectorized."""
    df = df.filter(pl.col(WEIGHT) > 0)
    if df.height == 0:
        return df
    s = _sorted(df, order)
    end = pl.col(WEIGHT).cum_sum()
    start = end - pl.col(WEIGHT)
    hi = end if limit is None else pl.min_horizontal(end, pl.lit(offset + limit, pl.Int64))
    take = (hi - pl.max_horizontal(start, pl.lit(offset, pl.Int64))).clip(lower_bound=0)
    return s.with_columns(take.alias(WEIGHT)).filter(pl.col(WEIGHT) > 0)


WINDOW_SLACK = 64  # window rows kept beyond offset + limit (deletes a window absorbs before a refill)
WINDOW_LIMIT = 100_000  # offset + limit above which no window is kept (every step reads the integral)


def window_capacity(k: int) -> int:
    """The units a window holds after a refill: twice offset + limit, and some."""
    return 2 * k + WINDOW_SLACK


def window_step(
    window: pl.DataFrame, complete: bool, d: pl.DataFrame, order: tuple[SortKey, ...], k: int
) -> tuple[pl.DataFrame, bool] | None:
    """The window after the change `d`: (rows in order with their weights, whether they are the whole
    integral), or None when the window cannot tell the first `k` units of the new integral (refill).

    `window` holds the integral's first units in order (every row before its last row B with its full
    weight, B with part of it or all), or the whole integral when `complete`. The integral's rows before
    B after the change are the window's plus the change's; B's units are at least the window's plus the
    change's. So when those rows, B included, hold k units, the first k units of the new integral are
    among them; the new window is those rows (at most `window_capacity(k)` units)."""
    data = [c for c in window.columns if c != WEIGHT]
    both = pl.concat([window, d.select(window.columns)], how="vertical")
    c = both.group_by(data).agg(pl.col(WEIGHT).sum()).filter(pl.col(WEIGHT) != 0)
    cap = window_capacity(k)
    if not complete:
        if window.height == 0:
            return None
        flag = "__topk_b"
        b = window.tail(1).with_columns(pl.lit(0, pl.Int64).alias(WEIGHT))
        marked = pl.concat(
            [c.with_columns(pl.lit(0, pl.Int8).alias(flag)), b.with_columns(pl.lit(1, pl.Int8).alias(flag))],
            how="vertical",
        )
        s = _sorted(marked, order, (flag,))
        at = int(s[flag].arg_max())  # type: ignore[arg-type]
        c = s.head(at).drop(flag)
    if c.height and c[WEIGHT].min() < 0:  # type: ignore[operator]
        return None  # a delete before B of a row the window does not hold: not a valid integral
    units = int(c[WEIGHT].sum()) if c.height else 0
    if not complete and units < k:
        return None
    return topk_frame(c, order, cap, 0), complete and units <= cap


class TopKState:
    """The top-k's last output, and its window (None: refill at the next step)."""

    __slots__ = ("complete", "out", "window")

    def __init__(self, out: Any) -> None:
        self.out = out
        self.window: pl.DataFrame | None = None
        self.complete = False


@dataclass(frozen=True)
class TopKWindow(Operator):
    """(↑top-k)^Δ over a window of the integral's first rows. Inputs: the change and its integral."""

    order: tuple[SortKey, ...]
    limit: int | None
    offset: int = 0

    name = "topk"
    kind = NONLINEAR
    arity = 2
    stateful = True

    def shape(self, ins: list[Shape]) -> Shape:
        return Shape(ins[0].schema)

    def label(self) -> str:
        return StreamTopK(self.order, self.limit, self.offset).label() + " (window)"

    def init(self, kernel: Kernel, shape: Shape, in_shapes: list[Shape]) -> Any:
        return TopKState(kernel.empty(shape.schema))

    def checkpoint(self, kernel: Kernel, state: TopKState) -> Any:
        return (kernel.save_value(state.out), state.window, state.complete)

    def restore(self, kernel: Kernel, state: TopKState, saved: Any) -> Any:
        state.out = kernel.load_value(saved[0])
        state.window, state.complete = saved[1], saved[2]
        return state

    def eval(self, kernel: Kernel, state: TopKState, inputs: list[Any], undo: list) -> Any:
        d, integral = inputs
        k = None if self.limit is None else self.offset + self.limit
        if k is None or k > WINDOW_LIMIT:  # no window: the definition, over the whole integral
            window, complete = None, False
            out = kernel.topk(integral, self.order, self.limit, self.offset)
        else:
            step = None
            if state.window is not None and kernel.is_local(d):
                step = window_step(state.window, state.complete, kernel.to_local(d).df, self.order, k)
            if step is None:  # refill: the integral's first rows in the order
                top = kernel.to_local(kernel.topk(integral, self.order, window_capacity(k), 0)).df
                step = top, int(top[WEIGHT].sum() if top.height else 0) < window_capacity(k)
            window, complete = step
            out = kernel.from_local(ZSet(topk_frame(window, self.order, self.limit, self.offset), True))
        prev = (state.out, state.window, state.complete)

        def back() -> None:
            state.out, state.window, state.complete = prev

        undo.append(back)
        state.out, state.window, state.complete = kernel.hold(out), window, complete
        return kernel.plus(out, kernel.neg(prev[0]))
