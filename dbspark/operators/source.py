"""Circuit sources: named inputs of Z-sets pushed by the user each step, and constant streams."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import polars as pl

from dbspark.algebra.zset import ZSet
from dbspark.operators.base import NONLINEAR, SOURCE, Operator, Shape

if TYPE_CHECKING:
    from dbspark.engines.base import Kernel


@dataclass(frozen=True)
class Lateness:
    """A table's declared lateness (`docs/lateness.md`): rows arrive at most `delay` behind the largest
    `column` value seen so far. After each step the table's waterline is that largest value minus
    `delay`; a later row (its `column` below the waterline of the steps before) is dropped and
    counted (`late` 'drop') or rejects its step ('error'), and state below the waterline is collected.
    `delay` is a `datetime.timedelta` for a TIMESTAMP or DATE column, a number for a numeric one."""

    column: str
    delay: Any
    late: str = "drop"

    def label(self) -> str:
        return f"lateness {self.column} {self.delay}" + (
            ", late rows rejected" if self.late == "error" else ""
        )


@dataclass(frozen=True)
class Input(Operator):
    """A named input. `kind` is 'zset' (any weights), 'bag' (its integral stays non-negative) or 'set'.

    A `primary_key` (column names) makes it a keyed table: an insert of a key that is there updates the
    row, a delete is by key (`Runtime._input_value`). `not_null` columns (and the key's) reject NULLs.
    Each of `unique` (column names) is a UNIQUE constraint, checked per step (`Runtime._input_value`)."""

    name_: str
    schema: pl.Schema
    kind_: str = "zset"
    primary_key: tuple[str, ...] = ()
    not_null: tuple[str, ...] = ()
    unique: tuple[tuple[str, ...], ...] = ()
    lateness: Lateness | None = None

    name = "input"
    kind = SOURCE
    arity = 0

    def __hash__(self) -> int:
        return hash(
            (
                self.name_,
                tuple(self.schema.items()),
                self.kind_,
                self.primary_key,
                self.not_null,
                self.unique,
                self.lateness,
            )
        )

    def shape(self, ins: list[Shape]) -> Shape:
        return Shape(self.schema)

    def label(self) -> str:
        cols = ", ".join(f"{c}: {t}" for c, t in self.schema.items())
        key = f", key ({', '.join(self.primary_key)})" if self.primary_key else ""
        late = f" [{self.lateness.label()}]" if self.lateness is not None else ""
        return (
            f"input {self.name_}({cols})"
            + ("" if self.kind_ == "zset" and not key else f" [{self.kind_}{key}]")
            + late
        )

    @property
    def positive(self) -> bool:
        return self.kind_ in ("bag", "set")

    @property
    def required(self) -> tuple[str, ...]:
        """The columns that may not be NULL: the primary key's and the NOT NULL ones, in schema order."""
        req = set(self.primary_key) | set(self.not_null)
        return tuple(c for c in self.schema if c in req)


@dataclass(frozen=True)
class Constant(Operator):
    """A constant stream: the same Z-set (`rows`, weight 1 each) at every step, e.g. the one row of a
    SQL SELECT without FROM. Incrementalized by the definition rule it is D(c): c at step 0, then 0;
    inside a recursive scope it is the same relation at every iteration (`operators.nested.NestedConstant`
    once the scope is incrementalized). Rows are tuples in column order."""

    schema: pl.Schema
    rows: tuple[tuple[Any, ...], ...]

    name = "constant"
    kind = NONLINEAR
    arity = 0

    def __hash__(self) -> int:
        return hash((tuple(self.schema.items()), self.rows))

    def shape(self, ins: list[Shape]) -> Shape:
        return Shape(self.schema)

    def label(self) -> str:
        cols = ", ".join(f"{c}: {t}" for c, t in self.schema.items())
        return f"constant({cols}) [{len(self.rows)} row{'s' if len(self.rows) != 1 else ''}]"

    def value(self) -> ZSet:
        return ZSet.from_rows(self.rows, self.schema)

    def eval(self, kernel: Kernel, state: Any, inputs: list[Any], undo: list) -> Any:
        return kernel.from_local(self.value())
