"""Hypothesis strategies for Z-sets, streams of Z-sets and streams of changes (`dbsp-paper.txt` §2, §4.1).

The building blocks, from the bottom up:

* `TableSpec`: a schema plus the set of columns that may hold NULL; `table_specs()` draws one with
  int64 / str / float64 / bool columns, `join_specs()` draws a (left, right, key) pair for equi-joins.
* `row_pools(spec)`: a small list of distinct rows. Z-sets drawn from a pool reuse its rows, so
  duplicates within a Z-set, rows recurring across steps, deletions of present rows and join matches are
  all common instead of astronomically rare.
* `zsets(spec, pool)`: one Z-set, unconsolidated (the same row may occur several times, weight 0
  entries occur), weights negative or positive, optionally huge (±10**12).
* `streams(spec, pool)`: a stream prefix, i.e. a list of Z-sets, one per step.
* `change_streams(spec, pool, kind=...)`: a list of changes whose integral obeys an input kind:
  'set' (0/1), 'bag' (non-negative: deletions only of present rows), 'zset' (anything: deletions of
  absent rows and over-deletions make negative integrals).
* `predicates(schema)` / `map_columns(schema)`: random filter predicates and map column lists (the
  scalar expression IR of `dbspark.ir.expr`).

Values are drawn from small domains (plus a few extremes such as ±2**62, -0.0, 1e300, '' and
non-ASCII text) so that equal values are frequent. NaN is never drawn: NaN != NaN would make two equal
Z-sets compare unequal in `ZSet.__eq__`, which compares `{row tuple: weight}` dictionaries.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl
from hypothesis import strategies as st

from dbspark.algebra.zset import ZSet
from dbspark.ir.expr import Expr, col, lit

#: the column types drawn by `table_specs` (name -> Polars type)
DTYPES: dict[str, pl.DataType] = {
    "int64": pl.Int64(),
    "str": pl.String(),
    "float64": pl.Float64(),
    "bool": pl.Boolean(),
}

#: join keys: three values each, so that keys match often (NULL is added by nullability)
KEY_DOMAINS: dict[str, tuple[Any, ...]] = {"int64": (0, 1, 2**62), "str": ("", "a", "ä")}

#: the weights a Z-set entry may carry: small ones (0 included: an unconsolidated entry may cancel)
SMALL_WEIGHTS = st.integers(-3, 3)
#: weights in the order of 10**12: sums of a few still fit int64, products of two do not
BIG_WEIGHTS = st.sampled_from([10**12, -(10**12), 10**12 + 7])


@dataclass(frozen=True)
class TableSpec:
    """A schema and the columns of it that may hold NULL."""

    schema: pl.Schema
    nullable: frozenset[str] = field(default_factory=frozenset)
    #: (column, values) pairs: columns drawn from these values only (e.g. a join key from a tiny domain)
    domains: tuple[tuple[str, tuple[Any, ...]], ...] = ()

    @classmethod
    def of(
        cls,
        columns: Mapping[str, Any],
        nullable: Iterable[str] | bool = (),
        domains: Mapping[str, Sequence[Any]] | None = None,
    ) -> TableSpec:
        """`TableSpec.of({"a": "int64", "b": "str"}, nullable=["b"], domains={"a": [0, 1, 2]})`;
        `nullable=True`: every column."""
        from dbspark.ir.schema import to_schema

        schema = to_schema(columns)
        nl = frozenset(schema) if nullable is True else frozenset(nullable or ())
        return cls(schema, nl, tuple((c, tuple(v)) for c, v in (domains or {}).items()))

    @property
    def columns(self) -> list[str]:
        return list(self.schema)

    def values(self, column: str) -> st.SearchStrategy[Any]:
        """The values column `column` may take (NULL included if it is nullable)."""
        fixed = dict(self.domains).get(column)
        base = st.sampled_from(fixed) if fixed else values_of(self.schema[column])
        if column not in self.nullable:
            return base
        return st.integers(0, 3).flatmap(lambda i: st.none() if i == 0 else base)  # NULL 1 time in 4


def values_of(dtype: pl.DataType) -> st.SearchStrategy[Any]:
    """Non-NULL values of a column type, from a small domain with a few extremes mixed in."""
    # small values repeated so that extremes are about 1 draw in 6
    if dtype == pl.Int64() or dtype.is_integer():
        return st.sampled_from([*range(-3, 4), *range(-3, 4), 2**62, -(2**62), 10**12])
    if dtype == pl.Float64() or dtype.is_float():
        return st.one_of(
            st.sampled_from([0.0, 0.5, -1.5, 2.0, -0.0, 0.0, 0.5, -1.5, 2.0, 1e300, -1e-300, float("inf")]),
            st.floats(-4, 4, allow_nan=False, width=32),
        )
    if dtype == pl.String():
        return st.sampled_from(["", "a", "b", "ab", "ä", " a", "a\x00"])
    if dtype == pl.Boolean():
        return st.booleans()
    raise NotImplementedError(f"no value strategy for column type {dtype}")


@st.composite
def table_specs(
    draw: st.DrawFn,
    min_cols: int = 1,
    max_cols: int = 3,
    dtypes: Sequence[str] = ("int64", "str", "float64", "bool"),
    names: Sequence[str] = ("a", "b", "c", "d"),
    allow_nulls: bool = True,
) -> TableSpec:
    """A random schema over `names` (in order) with column types from `dtypes`, some columns nullable."""
    n = draw(st.integers(min_cols, min(max_cols, len(names))))
    cols = [(names[i], DTYPES[draw(st.sampled_from(list(dtypes)))]) for i in range(n)]
    nullable = [c for c, _ in cols if allow_nulls and draw(st.booleans())]
    return TableSpec(pl.Schema(cols), frozenset(nullable))


@st.composite
def join_specs(
    draw: st.DrawFn,
    key_dtypes: Sequence[str] = ("int64", "str"),
    allow_nulls: bool = True,
) -> tuple[TableSpec, TableSpec, str]:
    """(left, right, key): two tables sharing a key column `k` of one type (NULL keys possible).

    Key values come from a domain of three values so that keys match often. The right table may reuse
    a non-key column name of the left one (the join renames it `_right`)."""
    kname = draw(st.sampled_from(list(key_dtypes)))
    kt = DTYPES[kname]
    kdom = {"k": KEY_DOMAINS[kname]}
    left = draw(table_specs(0, 2, names=("a", "b"), allow_nulls=allow_nulls))
    right = draw(table_specs(0, 2, names=("b", "c"), allow_nulls=allow_nulls))
    knull = {"k"} if allow_nulls and draw(st.booleans()) else set()
    lspec = TableSpec.of({"k": kt, **left.schema}, left.nullable | knull, kdom)
    knull_r = {"k"} if allow_nulls and draw(st.booleans()) else set()
    rspec = TableSpec.of({"k": kt, **right.schema}, right.nullable | knull_r, kdom)
    return lspec, rspec, "k"


def rows(spec: TableSpec) -> st.SearchStrategy[tuple]:
    """One row of `spec` as a tuple in column order."""
    return st.tuples(*[spec.values(c) for c in spec.columns])


def row_pools(spec: TableSpec, min_size: int = 2, max_size: int = 6) -> st.SearchStrategy[list[tuple]]:
    """A small list of distinct rows (-0.0 and 0.0 count as equal, as they do for Z-sets)."""
    return st.lists(rows(spec), min_size=min_size, max_size=max_size, unique_by=_row_key)


def _row_key(r: tuple) -> tuple:
    return tuple(r)  # -0.0 == 0.0 and hash equally: one Z-set row


def weights(big: bool = True, positive: bool = False) -> st.SearchStrategy[int]:
    """Entry weights: small (zero included unless `positive`), and ±10**12 if `big`."""
    small = st.integers(1, 3) if positive else SMALL_WEIGHTS
    if not big:
        return small
    large = st.sampled_from([10**12, 10**12 + 7]) if positive else BIG_WEIGHTS
    return st.one_of(small, small, small, large)


@st.composite
def zsets(
    draw: st.DrawFn,
    spec: TableSpec,
    pool: Sequence[tuple] | None = None,
    min_size: int = 0,
    max_size: int = 6,
    big: bool = True,
    positive: bool = False,
) -> ZSet:
    """One Z-set of `spec`, unconsolidated: entries are rows of `pool` (or fresh rows) with weights.

    `positive=True` gives a positive Z-set (a bag): every entry weight >= 1. `big=True` mixes in weights
    of ±10**12 (keep it off where two such weights would be multiplied, e.g. a join's inputs)."""
    row_st = st.sampled_from(list(pool)) if pool else rows(spec)
    entries = draw(st.lists(st.tuples(row_st, weights(big, positive)), min_size=min_size, max_size=max_size))
    return ZSet.from_rows([r for r, _ in entries], spec.schema, [w for _, w in entries])


@st.composite
def streams(
    draw: st.DrawFn,
    spec: TableSpec,
    pool: Sequence[tuple] | None = None,
    min_len: int = 1,
    max_len: int = 5,
    **zset_options: Any,
) -> list[ZSet]:
    """A stream prefix: one Z-set per step (see `zsets` for the options)."""
    n = draw(st.integers(min_len, max_len))
    out = []
    for _ in range(n):
        opts = dict(zset_options)
        opts.setdefault("min_size", 1 if draw(st.integers(0, 4)) else 0)  # empty steps 1 time in 5
        out.append(draw(zsets(spec, pool, **opts)))
    return out


@st.composite
def change_streams(
    draw: st.DrawFn,
    spec: TableSpec,
    pool: Sequence[tuple] | None = None,
    kind: str = "bag",
    min_len: int = 1,
    max_len: int = 6,
    big: bool = False,
) -> list[ZSet]:
    """Changes to an input of the given kind, one Z-set per step, with deletions of present rows.

    kind 'set': inserts of absent rows (weight 1) and deletes of present ones (weight -1).
    kind 'bag': inserts with positive weights, deletes of at most the present multiplicity, so the
    integral never goes negative. kind 'zset': anything, including deletes of absent rows and
    over-deletions (negative integrals)."""
    if kind not in ("set", "bag", "zset"):
        raise ValueError(f"kind must be 'set', 'bag' or 'zset', not {kind!r}")
    pool = list(pool) if pool else draw(row_pools(spec))
    n = draw(st.integers(min_len, max_len))
    current: dict[tuple, int] = {}
    out: list[ZSet] = []
    for _ in range(n):
        change: dict[tuple, int] = {}
        present = [r for r in pool if current.get(r, 0) > 0]
        absent = [r for r in pool if current.get(r, 0) <= 0]
        # deletions of present rows
        deleted: list[tuple] = draw(st.lists(st.sampled_from(present), unique=True)) if present else []
        for r in deleted:
            have = current[r]
            if kind == "set":
                change[r] = -1
            elif kind == "bag":
                change[r] = -draw(st.one_of(st.integers(1, have), st.just(have)))
            else:
                change[r] = -draw(st.one_of(st.integers(1, have + 2), st.just(have)))
        # insertions
        cands = absent if kind == "set" else pool
        n_ins = 0 if not cands or draw(st.integers(0, 4)) == 0 else 1  # no insertion 1 step in 5
        inserted: list[tuple] = (
            draw(st.lists(st.sampled_from(cands), min_size=n_ins, unique=True)) if cands else []
        )
        for r in inserted:
            w = 1 if kind == "set" else draw(weights(big, positive=True))
            change[r] = change.get(r, 0) + w
        delete_absent: bool = draw(st.booleans())
        if kind == "zset" and absent and delete_absent:
            r = draw(st.sampled_from(absent))  # delete a row that is not there
            change[r] = change.get(r, 0) - draw(st.integers(1, 2))
        for r, w in change.items():
            current[r] = current.get(r, 0) + w
        # split some changes in two entries to exercise unconsolidated input batches
        items: list[tuple[tuple, int]] = []
        for r, w in change.items():
            if w != 0 and abs(w) > 1 and draw(st.booleans()):
                items += [(r, w - (w // abs(w))), (r, w // abs(w))]
            else:
                items.append((r, w))
        out.append(ZSet.from_rows([r for r, _ in items], spec.schema, [w for _, w in items]))
    return out


# ---- scalar expressions ---------------------------------------------------------------------------
def _atoms(schema: pl.Schema) -> list[st.SearchStrategy[Expr]]:
    out: list[st.SearchStrategy[Expr]] = []
    for c, t in schema.items():
        x = col(c)
        out.append(st.sampled_from([x.is_null(), x.is_not_null()]))
        if t == pl.Boolean():
            out.append(st.just(x))
        elif t.is_numeric():
            out.append(
                st.builds(_compare, st.just(x), st.sampled_from(["gt", "le", "eq", "ne"]), values_of(t))
            )
        else:
            out.append(st.builds(_compare, st.just(x), st.just("eq"), values_of(t)))
    return out


def _compare(x: Expr, op: str, v: Any) -> Expr:
    if op == "gt":
        return x > v
    if op == "le":
        return x <= v
    return x.eq(v) if op == "eq" else x.ne(v)


def predicates(schema: pl.Schema, max_leaves: int = 4) -> st.SearchStrategy[Expr]:
    """Random Boolean predicates over `schema`: comparisons with constants, IS [NOT] NULL, AND/OR/NOT.

    SQL three-valued logic applies: a row whose predicate is NULL is filtered out."""
    base = st.one_of(*_atoms(schema))
    return st.recursive(
        base,
        lambda inner: st.one_of(
            st.tuples(inner, inner).map(lambda p: p[0] & p[1]),
            st.tuples(inner, inner).map(lambda p: p[0] | p[1]),
            inner.map(lambda e: ~e),
        ),
        max_leaves=max_leaves,
    )


def _column_exprs(schema: pl.Schema) -> st.SearchStrategy[Expr]:
    opts: list[st.SearchStrategy[Expr]] = [st.sampled_from([col(c) for c in schema])]
    for c, t in schema.items():
        x = col(c)
        if t == pl.Boolean():
            opts.append(st.just(~x))
        elif t.is_integer():
            opts.append(st.sampled_from([x + 1, -x, x % 3, x // 2]))
        elif t.is_float():
            opts.append(st.sampled_from([x + 0.5, -x, x * 2.0]))
    opts.append(st.sampled_from([lit(1), lit("k"), lit(True)]))
    return st.one_of(*opts)


@st.composite
def map_columns(
    draw: st.DrawFn, schema: pl.Schema, min_cols: int = 1, max_cols: int = 3, prefix: str = "o"
) -> list[tuple[str, Expr]]:
    """A map's output columns [(name, expr)]: projections of input columns and simple computed columns.

    Integer arithmetic stays within int64 for the values `values_of` draws (|x| <= 2**62)."""
    n = draw(st.integers(min_cols, max_cols))
    return [(f"{prefix}{i}", draw(_column_exprs(schema))) for i in range(n)]


__all__ = [
    "BIG_WEIGHTS",
    "DTYPES",
    "KEY_DOMAINS",
    "SMALL_WEIGHTS",
    "TableSpec",
    "change_streams",
    "join_specs",
    "map_columns",
    "predicates",
    "row_pools",
    "rows",
    "streams",
    "table_specs",
    "values_of",
    "weights",
    "zsets",
]
