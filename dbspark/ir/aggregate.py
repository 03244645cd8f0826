"""Aggregate calls and GROUP BY specifications (`dbsp-paper.txt` §7.2, §7.4).

Linear aggregates (COUNT, SUM, AVG, VAR_*, STDDEV_*) are computed from per-group accumulators that
form an abelian group (count, Σx, Σx², non-null count), so a change costs O(1) per row. MIN, MAX,
MEDIAN and MODE keep ordered per-group state, O(log n) per change
(`incremental-aggregation-monotonic-programs.txt` §2.4, Table 2). A user aggregate gives (f, g, d[, r])
(same paper, §2.3, Definitions 2.5, 2.6): without `d` a group whose input loses rows is recomputed from
the group's stored rows; with it, deletions are O(1).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from dbspark.errors import SchemaError, UnknownNameError

LINEAR = {"count", "count_star", "sum", "avg", "var_samp", "var_pop", "stddev_samp", "stddev_pop"}
ORDERED = {"min", "max", "median", "mode"}
ALIASES = {
    "mean": "avg",
    "variance": "var_samp",
    "var": "var_samp",
    "stddev": "stddev_samp",
    "std": "stddev_samp",
}


@dataclass(frozen=True)
class UserAggregate:
    """An aggregate definable by structural recursion: G({a}) = f(a), G(S ∪ T) = g(G(S), G(T)).

    `d` (optional) inverts g: G(S) = d(G(S ∪ T), G(T)); `r` (optional) is a final projection applied
    to the accumulated value. `dtype` is the result type."""

    name: str
    f: Callable[[Any], Any]
    g: Callable[[Any, Any], Any]
    d: Callable[[Any, Any], Any] | None = None
    r: Callable[[Any], Any] | None = None
    dtype: Any = None

    def power(self, v: Any, n: int) -> Any:
        """g applied to n copies of v, by doubling (weights may be large)."""
        result = None
        base = v
        while n:
            if n & 1:
                result = base if result is None else self.g(result, base)
            n >>= 1
            if n:
                base = self.g(base, base)
        return result

    def fold(self, values: list[Any], weights: list[int]) -> Any:
        """The accumulated value of a group: each non-NULL value of positive weight w counts w times."""
        acc = None
        for v, w in zip(values, weights, strict=True):
            if v is None or w <= 0:
                continue
            p = self.power(self.f(v), w)
            acc = p if acc is None else self.g(acc, p)
        return acc

    def final(self, acc: Any) -> Any:
        """The result of an accumulated value (NULL for an empty group)."""
        if acc is None:
            return None
        return self.r(acc) if self.r is not None else acc

    def __hash__(self) -> int:
        return hash((self.name, id(self.f), id(self.g), id(self.d), id(self.r)))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UserAggregate) and (self.name, self.f, self.g, self.d, self.r) == (
            other.name,
            other.f,
            other.g,
            other.d,
            other.r,
        )


@dataclass(frozen=True)
class AggCall:
    """One output column of a GROUP BY: `func(arg)` named `name`; arg None means COUNT(*)."""

    name: str
    func: str | UserAggregate
    arg: str | None = None
    label: str = field(default="", compare=False)  # how errors name it: the user's own words

    def describe(self) -> str:
        """How an error names this call: its `label` (a front end's, e.g. "view 's', SUM(x + 1) AS
        total"), else its output column and function."""
        if self.label:
            return self.label
        func = getattr(self.func, "name", self.func)
        return f"aggregate {self.name!r}: {str(func).upper()}({self.arg or '*'})"

    @property
    def kind(self) -> str:
        if isinstance(self.func, UserAggregate):
            return "user"
        return "linear" if self.func in LINEAR else "ordered"


@dataclass(frozen=True)
class AggSpec:
    """GROUP BY `by` computing `calls`; output columns: by..., then one per call."""

    by: tuple[str, ...]
    calls: tuple[AggCall, ...]
    input_schema: pl.Schema = field(compare=False, hash=False, repr=False)

    def output_schema(self) -> pl.Schema:
        s = self.input_schema
        cols: list[tuple[str, pl.DataType]] = [(b, s[b]) for b in self.by]
        for c in self.calls:
            cols.append((c.name, result_dtype(c, s)))
        return pl.Schema(cols)

    def empty_row(self) -> pl.DataFrame:
        """The one row of this aggregate without GROUP BY over an empty input (SQL): COUNT is 0, every
        other aggregate (SUM, AVG, MIN, ..., a user aggregate, which folds nothing) is NULL."""
        s = self.output_schema()
        return pl.DataFrame(
            [[0 if c.func in ("count", "count_star") else None for c in self.calls]], schema=s, orient="row"
        )

    @property
    def needs_ordered(self) -> bool:
        return any(c.kind == "ordered" for c in self.calls)

    @property
    def needs_rows(self) -> bool:
        """Whether the group's stored rows are needed (user aggregates without an inverse d)."""
        return any(c.kind == "user" and c.func.d is None for c in self.calls)  # type: ignore[union-attr]


def result_dtype(c: AggCall, s: pl.Schema) -> pl.DataType:
    if isinstance(c.func, UserAggregate):
        return pl.Float64() if c.func.dtype is None else _dtype(c.func.dtype)
    if c.func in ("count", "count_star"):
        return pl.Int64()
    t = s[c.arg] if c.arg else pl.Int64()
    if c.func == "sum":
        if t.is_integer() or t == pl.Boolean():
            return pl.Int64()
        if isinstance(t, pl.Decimal):
            return pl.Decimal(38, t.scale)
        return pl.Float64()
    if c.func in ("avg", "var_samp", "var_pop", "stddev_samp", "stddev_pop"):
        return pl.Float64()
    if c.func == "median":
        return median_dtype(t)
    return t  # min, max, mode


def median_dtype(t: pl.DataType) -> pl.DataType:
    """DuckDB's MEDIAN type: a DECIMAL keeps its type, a DATE's or TIMESTAMP's median is a TIMESTAMP (the
    midpoint of an even count may fall between days), other numbers give DOUBLE, anything else its own type
    (the lower middle value)."""
    if isinstance(t, pl.Decimal):
        return t
    if t == pl.Date():
        return pl.Datetime("us")
    if isinstance(t, pl.Datetime):
        return t
    return pl.Float64() if t.is_numeric() else t


def _dtype(t: Any) -> pl.DataType:
    from dbspark.ir.schema import to_dtype

    return to_dtype(t)


def make_spec(by: tuple[str, ...], aggs: dict[str, Any], schema: pl.Schema) -> AggSpec:
    """Normalize `{out: ("sum", "x") | "count" | UserAggregate-with-arg}` into an AggSpec, checking names."""
    for b in by:
        if b not in schema:
            raise UnknownNameError(f"GROUP BY column {b!r} is not a column of the stream {list(schema)}")
    calls = []
    for name, a in aggs.items():
        if name in by:
            raise SchemaError(f"aggregate output {name!r} clashes with a GROUP BY column")
        if isinstance(a, AggCall):
            calls.append(AggCall(name, a.func, a.arg, a.label))
            continue
        label = ""
        if isinstance(a, str):
            func, arg = a, None
        else:  # (func, arg) or (func, arg, label)
            func, arg, *rest = a
            label = rest[0] if rest else ""
        if isinstance(func, str):
            func = ALIASES.get(func.lower(), func.lower())
            if func == "count" and arg in (None, "*"):
                func, arg = "count_star", None
            if func not in LINEAR | ORDERED:
                raise SchemaError(
                    f"unknown aggregate {func!r} for {name!r}; known: {sorted(LINEAR | ORDERED - {'count_star'})}"
                )
            if func != "count_star" and arg is None:
                raise SchemaError(f"aggregate {func!r} for {name!r} needs a column")
        if arg is not None and arg not in schema:
            raise UnknownNameError(
                f"aggregate {name!r} reads unknown column {arg!r}; the stream has {list(schema)}"
            )
        if isinstance(func, str) and func in (
            "sum",
            "avg",
            "var_samp",
            "var_pop",
            "stddev_samp",
            "stddev_pop",
        ):
            t = schema[arg]  # type: ignore[index]
            if not (t.is_numeric() or t == pl.Boolean()):
                raise SchemaError(f"aggregate {func}({arg}) needs a numeric column, {arg!r} is {t}")
        calls.append(AggCall(name, func, arg, label))
    if not calls:
        raise SchemaError("an aggregate needs at least one aggregate call")
    return AggSpec(tuple(by), tuple(calls), schema)
