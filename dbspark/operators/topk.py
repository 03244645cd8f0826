"""Top-k: ORDER BY ... LIMIT ... OFFSET as an operator on Z-sets.

`StreamTopK` is the lifted operator: each step's whole Z-set (a bag: a row of weight w counts w times)
ordered by the sort keys, then by every column as the tie-break so that the result is deterministic,
and rows [offset, offset + limit) of that order kept, with the weight of the part of each row that
falls in the window. It is not linear; incrementalization uses the definition D ∘ Q ∘ I
(`dbsp-paper.txt` Def 3.1) over the input's integral, which the engines read through the first
offset + limit rows of the order only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import polars as pl

from dbspark.algebra.zset import WEIGHT
from dbspark.errors import SchemaError
from dbspark.operators.base import NONLINEAR, Operator, Shape

if TYPE_CHECKING:
    from dbspark.engines.base import Kernel


@dataclass(frozen=True)
class SortKey:
    """One ORDER BY key: a column, descending or not, NULLs first or last."""

    column: str
    descending: bool = False
    nulls_first: bool = False


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


def topk_frame(df: pl.DataFrame, order: tuple[SortKey, ...], limit: int | None, offset: int) -> pl.DataFrame:
    """Top-k of a consolidated frame with a weight column (positive weights: a bag), vectorized."""
    data = [c for c in df.columns if c != WEIGHT]
    keys = full_order(order, data)
    df = df.filter(pl.col(WEIGHT) > 0)
    if df.height == 0:
        return df
    s = df.sort(
        [k.column for k in keys],
        descending=[k.descending for k in keys],
        nulls_last=[not k.nulls_first for k in keys],
        maintain_order=True,
    )
    end = pl.col(WEIGHT).cum_sum()
    start = end - pl.col(WEIGHT)
    hi = end if limit is None else pl.min_horizontal(end, pl.lit(offset + limit, pl.Int64))
    take = (hi - pl.max_horizontal(start, pl.lit(offset, pl.Int64))).clip(lower_bound=0)
    return s.with_columns(take.alias(WEIGHT)).filter(pl.col(WEIGHT) > 0)
