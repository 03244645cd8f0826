"""Numbering: each unit of a Z-set (a row of weight w is w units) given its place 0, 1, ... in the order
of its columns, a new BIGINT column — Soufflé's `autoinc()` made a function of the relation's contents
(`frontends/datalog/lower.py`), so that a program's result does not depend on the order of its changes.

The operator is not linear and has no incremental form of its own: maintained by its definition
D ∘ N ∘ I (`incremental/definition.py`), a step numbers the whole integral again, and an insert or a
delete renumbers every unit after it. Its work per step is the size of the relation, not of the change.
The numbering is one group's fold written in Polars (`Kernel.cogroup` without keys): on Spark it runs
inside one task on the executors.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import polars as pl

from dbspark.algebra.zset import WEIGHT
from dbspark.errors import NegativeStateError, SchemaError
from dbspark.operators.base import NONLINEAR, Operator, Shape

if TYPE_CHECKING:
    from dbspark.engines.base import Kernel


def number_units(
    columns: tuple[str, ...], shown: tuple[str, ...], column: str, frames: list[pl.DataFrame]
) -> pl.DataFrame:
    """`cogroup` function: the rows of `frames[0]` in the order of `columns`, each unit of positive
    weight one row of weight 1 with its place in `column`; the columns in the order `shown`."""
    (df,) = frames
    rows = df.group_by(list(columns)).agg(pl.col(WEIGHT).sum()).filter(pl.col(WEIGHT) != 0)
    if rows.height and rows[WEIGHT].min() < 0:  # type: ignore[operator]
        bad = rows.filter(pl.col(WEIGHT) < 0).row(0)
        raise NegativeStateError(f"numbering a relation with a negative weight: {bad}")
    rows = rows.sort(list(columns), nulls_last=True)
    units = rows.select(pl.all().repeat_by(pl.col(WEIGHT))).explode(rows.columns) if rows.height else rows
    return units.drop(WEIGHT).select(
        *shown, pl.int_range(pl.len(), dtype=pl.Int64).alias(column), pl.lit(1, pl.Int64).alias(WEIGHT)
    )


@dataclass(frozen=True)
class StreamNumber(Operator):
    """↑number: each step's Z-set, every unit a row with its place in the order of all its columns
    (`order` first, in that order) in the new column `column`."""

    order: tuple[str, ...]
    column: str
    name = "stream_number"
    kind = NONLINEAR

    def shape(self, ins: list[Shape]) -> Shape:
        s = ins[0].schema
        if self.column in s:
            raise SchemaError(f"number: column {self.column!r} is already in the stream")
        for c in self.order:
            if c not in s:
                raise SchemaError(f"number: unknown column {c!r}; the stream has {list(s)}")
        return Shape(pl.Schema([*s.items(), (self.column, pl.Int64())]))

    def label(self) -> str:
        return f"number[{self.column} by {', '.join(self.order)}]"

    def init(self, kernel: Kernel, shape: Shape, in_shapes: list[Shape]) -> Any:
        return shape.schema  # (not state: the output's schema, which `cogroup` needs)

    def checkpoint(self, kernel: Kernel, state: Any) -> Any:
        return None

    def restore(self, kernel: Kernel, state: Any, saved: Any) -> Any:
        return state

    def eval(self, kernel: Kernel, state: Any, inputs: list[Any], undo: list) -> Any:
        schema: pl.Schema = state
        data = tuple(c for c in schema if c != self.column)
        cols = (*self.order, *[c for c in data if c not in self.order])
        fn = partial(number_units, cols, data, self.column)
        return kernel.cogroup(inputs, [], fn, schema, None, True)
