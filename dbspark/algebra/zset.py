"""Z-sets and indexed Z-sets as columnar batches (`dbsp-paper.txt` §4.1, §7.3).

A Z-set is a finite map from rows to non-zero integer weights. Here it is a Polars DataFrame whose
data columns are the row and whose last column, `WEIGHT`, is the weight (int64). A batch may be
*unconsolidated* (the same row several times, or weight 0) as it flows between linear operators;
`consolidate()` sums the weights of equal rows and drops zeros, which is the canonical form used for
equality, traces and outputs. An indexed Z-set is a Z-set together with the names of its key columns
(`Z[A][K]` of §7.3 flattened to rows (k, a)): the input of joins and grouped aggregates.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

import numpy as np
import polars as pl

from dbspark.algebra.consolidate import WEIGHT, consolidate_sorted, key_hash, sorted_by_hash
from dbspark.errors import WeightError


def with_weight(schema: Mapping[str, pl.DataType], *extra: tuple[str, pl.DataType]) -> pl.Schema:
    """The schema of a Z-set frame: the data columns, any `extra` columns, then the int64 weight."""
    return pl.Schema([*schema.items(), *extra, (WEIGHT, pl.Int64())])


HTML_ROWS = 20  # rows a notebook shows of a Z-set


class ZSet:
    """A Z-set over rows of a fixed schema, stored columnar; the values of a DBSP stream."""

    __slots__ = ("_cons", "_df", "_src", "at", "consolidated", "hashes", "probes")

    def __init__(self, df: pl.DataFrame, consolidated: bool = False) -> None:
        if df.columns[-1:] != [WEIGHT]:
            raise ValueError(f"a Z-set frame must end with the weight column {WEIGHT!r}: {df.columns}")
        self._df = df
        self.consolidated = consolidated
        self._cons: ZSet | None = None  # the consolidated form, once computed (frames are immutable)
        self._src: ZSet | None = None  # a Z-set of the same rows whose consolidation this one shares
        # of a consolidated frame: the sorted `key_hash` of its data columns, row by row, when known
        # (`consolidate_sorted`): a trace indexed by every column and its seeks reuse them
        self.hashes: np.ndarray | None = None
        # of rows sought in a trace at a consolidated probe's rows (`TraceSnapshot.seek_rows`): the
        # probe and, per row, the probe row it equals (`combine` then sums by position, not by a join)
        self.at: tuple[ZSet, np.ndarray] | None = None
        # how joins read this value by key columns: a count of the joins so far, then the index they
        # probe (`columnar/key_index.py`)
        self.probes: dict[tuple[str, ...], Any] | None = None

    # ---- construction -------------------------------------------------------------------------
    @classmethod
    def empty(cls, schema: Mapping[str, pl.DataType]) -> ZSet:
        try:
            df = _empty_frame(tuple(schema.items()))
        except TypeError:  # (a type that cannot be hashed)
            df = pl.DataFrame(schema=with_weight(schema))
        return cls(df, consolidated=True)

    @classmethod
    def from_rows(
        cls,
        rows: Iterable[Sequence[Any]],
        schema: Mapping[str, pl.DataType],
        weights: Iterable[int] | None = None,
    ) -> ZSet:
        """Rows as tuples in column order; weights default to 1 each."""
        rows = list(rows)
        cols = list(schema)
        data = {c: [r[i] for r in rows] for i, c in enumerate(cols)}
        w = [1] * len(rows) if weights is None else list(weights)
        df = pl.DataFrame({**data, WEIGHT: w}, schema=with_weight(schema), strict=False)
        return cls(df)

    @classmethod
    def from_dict(cls, m: Mapping[tuple, int], schema: Mapping[str, pl.DataType]) -> ZSet:
        return cls.from_rows(list(m.keys()), schema, list(m.values()))

    # ---- views --------------------------------------------------------------------------------
    @property
    def df(self) -> pl.DataFrame:
        """The frame: data columns then the weight column."""
        return self._df

    @property
    def columns(self) -> list[str]:
        return self._df.columns[:-1]

    @property
    def schema(self) -> pl.Schema:
        s = self._df.schema
        return pl.Schema([(c, s[c]) for c in self.columns])

    def data(self) -> pl.DataFrame:
        """The data columns only (each row once per stored entry, weights dropped): a frame of the
        columns, not a query (~5 µs against ~32 µs for `drop`)."""
        return pl.DataFrame([s for s in self._df.get_columns() if s.name != WEIGHT])

    def weights(self) -> np.ndarray:
        return self._df[WEIGHT].to_numpy()

    def __len__(self) -> int:
        """Number of stored entries (distinct rows once consolidated)."""
        return self._df.height

    def with_df(self, df: pl.DataFrame, consolidated: bool = False) -> ZSet:
        """A Z-set of the same kind (plain or indexed) over another frame."""
        return ZSet(df, consolidated)

    # ---- the group (Z[A], +, 0, -) ------------------------------------------------------------
    def consolidate(self, by_rows: bool = False) -> ZSet:
        """Sum the weights of equal rows and drop zero weights: the canonical form.

        Computed once per Z-set: a change read by several operators (a join and the integral of the
        same input) is consolidated once. `by_rows`: its rows are to be sought and indexed by every
        column (a distinct's change): they come out in the order of their hash, with the hashes
        (`consolidate_sorted`), even when they were distinct already."""
        if self.consolidated:
            return self
        cons = getattr(self, "_cons", None)  # (a Z-set pickled before the slot existed has none)
        if cons is not None:
            return cons
        df = self._df
        if df.height == 0:
            self._cons = self.with_df(df, True)
            return self._cons
        src = getattr(self, "_src", None)
        if src is not None:  # (an index of `src`: the same rows, consolidated once for both)
            c = src.consolidate(by_rows)
            df, h = c._df, c.hashes
        else:
            df, h = consolidate_sorted(df, ordered=by_rows)
        self._cons = self.with_df(df, True)
        self._cons.hashes = h
        return self._cons

    def by_row_hash(self) -> ZSet:
        """This Z-set consolidated, its rows in the order of their hash over every data column, with
        the hashes (`hashes`): as a trace indexed by every column keeps it in a batch, which can then
        be this frame itself (a view's trace and the step's output of it sharing their columns)."""
        z = self.consolidate(by_rows=True)
        if z.hashes is not None or len(z) == 0:
            return z
        df, h = sorted_by_hash(z._df, key_hash(z._df, z.columns))
        out = self.with_df(df, True)
        out.hashes = h
        return out

    def __add__(self, other: ZSet) -> ZSet:
        if self._df.height == 0:
            return other
        if other._df.height == 0:
            return self
        right = other._df
        if right.schema != self._df.schema:
            right = (
                right.select([pl.col(c).cast(t) for c, t in self._df.schema.items()])
                if right.columns == self._df.columns
                else right
            )
        return self.with_df(pl.concat([self._df, right], how="vertical_relaxed"))

    def __neg__(self) -> ZSet:
        return self.with_df(self._df.with_columns(-pl.col(WEIGHT)), self.consolidated)

    def __sub__(self, other: ZSet) -> ZSet:
        return self + (-other)

    def is_zero(self) -> bool:
        return self.consolidate()._df.height == 0

    # ---- distinct and predicates (§4.1) --------------------------------------------------------
    def distinct(self) -> ZSet:
        """Weight 1 for rows of positive weight; others dropped."""
        c = self.consolidate()._df
        return self.with_df(
            c.filter(pl.col(WEIGHT) > 0).with_columns(pl.lit(1, pl.Int64).alias(WEIGHT)), True
        )

    def isset(self) -> bool:
        """Every weight is 1 (after consolidation)."""
        w = self.consolidate()._df[WEIGHT]
        return bool((w == 1).all())

    def ispositive(self) -> bool:
        """Every weight is positive (after consolidation): a bag."""
        w = self.consolidate()._df[WEIGHT]
        return bool((w > 0).all())

    # ---- conversions --------------------------------------------------------------------------
    def to_zset(self) -> ZSet:
        """This Z-set (engines' values share this method; on Spark it collects)."""
        return self

    def to_dict(self) -> dict[tuple, int]:
        """{row tuple: weight}, consolidated."""
        c = self.consolidate()._df
        ws = c[WEIGHT].to_list()
        rows = c.drop(WEIGHT).rows()
        return dict(zip(rows, ws, strict=True))

    def to_rows(self) -> list[tuple[tuple, int]]:
        """[(row, weight)], consolidated and sorted (NULLs first) for stable printing."""
        return sorted(self.to_dict().items(), key=lambda kv: _sort_key(kv[0]))

    def to_polars(self) -> pl.DataFrame:
        """The consolidated frame, weight column named `weight`."""
        return self.consolidate()._df.rename({WEIGHT: "weight"})

    def to_pandas(self) -> Any:
        return self.to_polars().to_pandas()

    def to_arrow(self) -> Any:
        return self.to_polars().to_arrow()

    def expand(self) -> list[tuple]:
        """The rows repeated by weight (a bag); raises if a weight is negative."""
        out: list[tuple] = []
        for row, w in self.to_rows():
            if w < 0:
                raise WeightError(f"cannot expand a negative weight {w} of row {row}")
            out.extend([row] * w)
        return out

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ZSet):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    def __hash__(self) -> int:  # Z-sets are values but mutable frames are not hashed
        raise TypeError("ZSet is not hashable")

    def _repr_html_(self) -> str:
        """A notebook shows a Z-set as a table of its first rows, each with its weight."""
        df = self.consolidate().df
        head = df.head(HTML_ROWS).rename({WEIGHT: "weight"})
        note = f"<p>{df.height} rows (first {HTML_ROWS} shown)</p>" if df.height > HTML_ROWS else ""
        with pl.Config(tbl_rows=HTML_ROWS):
            return head._repr_html_() + note

    def __repr__(self) -> str:
        items = self.to_rows()
        shown = ", ".join(f"{r}: {w}" for r, w in items[:8])
        more = f", ... ({len(items)} rows)" if len(items) > 8 else ""
        return f"ZSet({{{shown}{more}}})"


class IndexedZSet(ZSet):
    """A Z-set grouped by key columns (`dbsp-paper.txt` §7.3)."""

    __slots__ = ("keys",)

    def __init__(self, df: pl.DataFrame, keys: Sequence[str], consolidated: bool = False) -> None:
        super().__init__(df, consolidated)
        self.keys = tuple(keys)

    def with_df(self, df: pl.DataFrame, consolidated: bool = False) -> IndexedZSet:
        return IndexedZSet(df, self.keys, consolidated)

    def __repr__(self) -> str:
        return f"IndexedZSet(keys={list(self.keys)}, {super().__repr__()})"


def _sort_key(row: tuple) -> tuple:
    return tuple((v is not None, type(v).__name__, v) if v is not None else (False, "", 0) for v in row)


def distinct_h(d: ZSet, found: pl.DataFrame) -> ZSet:
    """H(i, d) of `dbsp-paper.txt` Prop 4.7: distinct's change for the change `d` given the rows of the
    integral i at d's rows (`found`: data columns and weights, any consolidation), per row:
    -1 where i was positive and i + d is not, +1 where i was not and i + d is, else nothing."""
    d = d.consolidate()
    if d.df.height == 0:
        return ZSet(d.df, True)
    cols = d.columns
    old = found.group_by(cols, maintain_order=True).agg(pl.col(WEIGHT).sum().alias("__i"))
    j = d.df.join(old, on=cols, how="left", nulls_equal=True).with_columns(pl.col("__i").fill_null(0))
    i, new = pl.col("__i"), pl.col("__i") + pl.col(WEIGHT)
    w = pl.when((i > 0) & (new <= 0)).then(-1).when((i <= 0) & (new > 0)).then(1).otherwise(0)
    out = j.with_columns(w.cast(pl.Int64).alias(WEIGHT)).filter(pl.col(WEIGHT) != 0)
    return ZSet(out.select(d.df.columns), True)


@lru_cache(maxsize=4096)
def _empty_frame(schema: tuple[tuple[str, pl.DataType], ...]) -> pl.DataFrame:
    """The empty frame of a schema, built once (frames are immutable): a recursive scope's operators
    make empty values at every iteration, and building a frame costs more than the rest of their work."""
    return pl.DataFrame(schema=with_weight(dict(schema)))
