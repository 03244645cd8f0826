"""Bilinear operators: Cartesian product and equi-join (`dbsp-paper.txt` Table 1; Thm 3.4).

Output columns: the left columns, then the right ones; a right key column whose name equals its left
key (`on=`) is dropped, and a right column whose name is taken gets the suffix `_right`. Either input
may be a trace (an integral): the kernel then probes it with the keys of the other side only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import polars as pl

from dbspark.errors import SchemaError
from dbspark.operators.base import BILINEAR, Operator, Shape

if TYPE_CHECKING:
    from dbspark.engines.base import Kernel


def right_columns(
    left: pl.Schema, right: pl.Schema, drop: tuple[str, ...] = ()
) -> tuple[tuple[str, str], ...]:
    """(source, output name) of each right column kept by a join or product."""
    taken = set(left)
    out = []
    for c in right:
        if c in drop:
            continue
        name = c
        while name in taken:
            name = f"{name}_right"
        taken.add(name)
        out.append((c, name))
    return tuple(out)


@dataclass(frozen=True)
class StreamJoin(Operator):
    """The lifted equi-join ↑⋈ on left_keys = right_keys; weights multiply; NULL keys never match."""

    left_keys: tuple[str, ...]
    right_keys: tuple[str, ...]
    right_out: tuple[tuple[str, str], ...]
    name = "stream_join"
    kind = BILINEAR
    arity = 2

    def shape(self, ins: list[Shape]) -> Shape:
        a, b = ins
        for k, r in zip(self.left_keys, self.right_keys, strict=True):
            ta, tb = a.schema[k], b.schema[r]
            # keys of different types join when both are integers or both floats (the kernels compare
            # them after a widening cast); int = float or decimals of other precisions need a Cast first
            if ta != tb and not ((ta.is_integer() and tb.is_integer()) or (ta.is_float() and tb.is_float())):
                raise SchemaError(
                    f"join key {k} ({ta}) = {r} ({tb}): incompatible types; cast one side to the other's type "
                    f"first, e.g. map(..., {k}=Cast(col({k!r}), ...))"
                )
        cols = list(a.schema.items()) + [(d, b.schema[s]) for s, d in self.right_out]
        return Shape(pl.Schema(cols))

    def label(self) -> str:
        on = ", ".join(
            k if k == r else f"{k}={r}" for k, r in zip(self.left_keys, self.right_keys, strict=True)
        )
        return f"stream_join[{on}]"

    def eval(self, kernel: Kernel, state: Any, inputs: list[Any], undo: list) -> Any:
        return kernel.join(inputs[0], inputs[1], self.left_keys, self.right_keys, self.right_out)


@dataclass(frozen=True)
class StreamProduct(Operator):
    """The lifted Cartesian product ↑×; weights multiply."""

    right_out: tuple[tuple[str, str], ...]
    name = "stream_product"
    kind = BILINEAR
    arity = 2

    def shape(self, ins: list[Shape]) -> Shape:
        a, b = ins
        return Shape(pl.Schema(list(a.schema.items()) + [(d, b.schema[s]) for s, d in self.right_out]))

    def eval(self, kernel: Kernel, state: Any, inputs: list[Any], undo: list) -> Any:
        return kernel.product(inputs[0], inputs[1], self.right_out)
