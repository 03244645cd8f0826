"""Circuit inputs: named sources of Z-sets pushed by the user each step."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from dbspark.operators.base import SOURCE, Operator, Shape


@dataclass(frozen=True)
class Input(Operator):
    """A named input. `kind` is 'zset' (any weights), 'bag' (its integral stays non-negative) or 'set'."""

    name_: str
    schema: pl.Schema
    kind_: str = "zset"

    name = "input"
    kind = SOURCE
    arity = 0

    def __hash__(self) -> int:
        return hash((self.name_, tuple(self.schema.items()), self.kind_))

    def shape(self, ins: list[Shape]) -> Shape:
        return Shape(self.schema)

    def label(self) -> str:
        cols = ", ".join(f"{c}: {t}" for c, t in self.schema.items())
        return f"input {self.name_}({cols})" + ("" if self.kind_ == "zset" else f" [{self.kind_}]")

    @property
    def positive(self) -> bool:
        return self.kind_ in ("bag", "set")
