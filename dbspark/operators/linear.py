"""Linear operators (`dbsp-paper.txt` §4.2, Table 1; §7.3): each is its own incremental version (Thm 3.3)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import polars as pl

from dbspark.errors import SchemaError, UnknownNameError
from dbspark.ir.expr import Expr, check_columns
from dbspark.ir.schema import describe
from dbspark.operators.base import LINEAR, Operator, Shape

if TYPE_CHECKING:
    from dbspark.engines.base import Kernel


@dataclass(frozen=True)
class Filter(Operator):
    """σ_P: keep the rows where the predicate is TRUE (NULL and FALSE drop the row)."""

    pred: Expr
    name = "filter"
    kind = LINEAR

    def shape(self, ins: list[Shape]) -> Shape:
        s = ins[0]
        check_columns(self.pred, s.schema, "filter")
        t = self.pred.dtype(s.schema)
        if t not in (pl.Boolean(), pl.Null()):
            raise SchemaError(f"filter predicate {self.pred!r} has type {t}, not Boolean")
        return Shape(s.schema, s.keys)

    def label(self) -> str:
        return f"filter[{self.pred!r}]"

    def eval(self, kernel: Kernel, state: Any, inputs: list[Any], undo: list) -> Any:
        return kernel.filter(inputs[0], self.pred)


@dataclass(frozen=True)
class Map(Operator):
    """map(f) / projection π: compute each output column from the input row (not distinct: bags stay bags)."""

    exprs: tuple[tuple[str, Expr], ...]
    name = "map"
    kind = LINEAR

    def shape(self, ins: list[Shape]) -> Shape:
        s = ins[0].schema
        names = [n for n, _ in self.exprs]
        if len(set(names)) != len(names):
            raise SchemaError(f"map produces duplicate column names {names}")
        out = []
        for n, e in self.exprs:
            check_columns(e, s, f"map column {n!r}")
            t = e.dtype(s)
            out.append((n, pl.Int64() if t == pl.Null() else t))
        return Shape(pl.Schema(out))

    def label(self) -> str:
        return "map[" + ", ".join(n if repr(e) == n else f"{n}={e!r}" for n, e in self.exprs) + "]"

    def init(self, kernel: Kernel, shape: Shape, in_shapes: list[Shape]) -> Any:
        return shape.schema

    def eval(self, kernel: Kernel, state: Any, inputs: list[Any], undo: list) -> Any:
        return kernel.map(inputs[0], self.exprs, state)


@dataclass(frozen=True)
class Ranges(Operator):
    """Each row once per value of the integer range in its columns `lo`, `hi`, `step` (Soufflé's
    `range(lo, hi, step)`: `engines.base.ZSetKernel.ranges`), in `column`, which replaces the three.
    Linear: each row's values depend on that row alone, and its weight carries over."""

    lo: str
    hi: str
    step: str
    column: str
    name = "ranges"
    kind = LINEAR

    def shape(self, ins: list[Shape]) -> Shape:
        s = ins[0].schema
        for c in (self.lo, self.hi, self.step):
            if c not in s:
                raise UnknownNameError(f"ranges: unknown column {c!r}; the stream has {list(s)}")
            if not s[c].is_integer():
                raise SchemaError(f"ranges: column {c!r} is {s[c]}, not an integer")
        keep = [(c, t) for c, t in s.items() if c not in (self.lo, self.hi, self.step)]
        if self.column in dict(keep):
            raise SchemaError(f"ranges: column {self.column!r} is already in the stream")
        return Shape(pl.Schema([*keep, (self.column, pl.Int64())]))

    def label(self) -> str:
        return f"ranges[{self.column} in {self.lo}..{self.hi} by {self.step}]"

    def eval(self, kernel: Kernel, state: Any, inputs: list[Any], undo: list) -> Any:
        return kernel.ranges(inputs[0], self.lo, self.hi, self.step, self.column)


@dataclass(frozen=True, eq=False)
class FlatMap(Operator):
    """flat_map(f): each row becomes any number of rows (f: row dict -> iterable of tuples or dicts).

    f runs in Python once per changed row: a user callback, not a vectorized kernel."""

    fn: Callable[[dict], Any]
    out_schema: pl.Schema
    name = "flat_map"
    kind = LINEAR

    def __hash__(self) -> int:
        return hash((id(self.fn), tuple(self.out_schema.items())))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FlatMap) and self.fn is other.fn and self.out_schema == other.out_schema

    def shape(self, ins: list[Shape]) -> Shape:
        return Shape(self.out_schema)

    def label(self) -> str:
        return f"flat_map[{getattr(self.fn, '__name__', 'fn')} -> {describe(self.out_schema)}]"

    def eval(self, kernel: Kernel, state: Any, inputs: list[Any], undo: list) -> Any:
        return kernel.flat_map(inputs[0], self.fn, self.out_schema)


@dataclass(frozen=True)
class Index(Operator):
    """G_p of §7.3: group a Z-set by key columns into an indexed Z-set (linear)."""

    keys: tuple[str, ...]
    name = "index"
    kind = LINEAR

    def shape(self, ins: list[Shape]) -> Shape:
        s = ins[0].schema
        for k in self.keys:
            if k not in s:
                raise UnknownNameError(f"index: unknown key column {k!r}; the stream has {list(s)}")
        return Shape(s, self.keys)

    def label(self) -> str:
        return f"index[{', '.join(self.keys)}]"

    def eval(self, kernel: Kernel, state: Any, inputs: list[Any], undo: list) -> Any:
        return kernel.index(inputs[0], self.keys)


@dataclass(frozen=True)
class Plus(Operator):
    """Z-set addition (UNION ALL); `a - b` is plus(a, neg(b))."""

    name = "plus"
    kind = LINEAR
    arity = 2

    def shape(self, ins: list[Shape]) -> Shape:
        a, b = ins
        if list(a.schema.items()) != list(b.schema.items()):
            raise SchemaError(
                f"plus of streams with different schemas {describe(a.schema)} and {describe(b.schema)}"
            )
        return Shape(a.schema, a.keys if a.keys == b.keys else None)

    def eval(self, kernel: Kernel, state: Any, inputs: list[Any], undo: list) -> Any:
        return kernel.plus(inputs[0], inputs[1])


@dataclass(frozen=True)
class Neg(Operator):
    """Z-set negation."""

    name = "neg"
    kind = LINEAR

    def shape(self, ins: list[Shape]) -> Shape:
        return Shape(ins[0].schema, ins[0].keys)

    def eval(self, kernel: Kernel, state: Any, inputs: list[Any], undo: list) -> Any:
        return kernel.neg(inputs[0])


@dataclass(frozen=True)
class Weigh(Operator):
    """Move an integer column into the weight: each row's weight is multiplied by its value in `column`,
    which is dropped (a row with 0 disappears). Linear: it acts on each row alone, and multiplying
    weights distributes over Z-set addition. SQL's INTERSECT ALL uses it to turn a count into copies."""

    column: str
    name = "weigh"
    kind = LINEAR

    def shape(self, ins: list[Shape]) -> Shape:
        s = ins[0].schema
        if self.column not in s:
            raise UnknownNameError(f"weigh: unknown column {self.column!r}; the stream has {list(s)}")
        if not s[self.column].is_integer():
            raise SchemaError(f"weigh: column {self.column!r} is {s[self.column]}, not an integer")
        return Shape(pl.Schema([(c, t) for c, t in s.items() if c != self.column]))

    def label(self) -> str:
        return f"weigh[{self.column}]"

    def eval(self, kernel: Kernel, state: Any, inputs: list[Any], undo: list) -> Any:
        return kernel.weigh(inputs[0], self.column)
