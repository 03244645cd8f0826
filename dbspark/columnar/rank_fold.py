"""The fold of a ranked recursive distinct (`operators/ranked_distinct.py`), in Polars: each fact's
supports counted beside it.

A ranked distinct keeps, for each fact it holds, one row (`docs/recursion-strategies.md`, "Ranks", and
"A fact's supports, counted beside it"): its columns, its rank `r`, and three counts of its derivations
among the facts held,

- `__below` (b): derivations counted as ranking below `r`: never more than those that do, so that
  b > 0 proves a derivation whose premises all rank below the fact (its support);
- `__above` (a): the others, so that b + a is exactly the fact's count of derivations;
- `__top` (t): at least the rank of every derivation counted in a (and at least r - 1).

A change of derivations at rank s, weight w, adds w to b where s < r, else to a (and raises t to s on
an insert). A loss that b cannot take (b would go below 0: the derivation lost was counted in a, whose
ranks are known only up to t) is taken from a. A fact that comes in (or comes back) at the least rank k
+ 1 where its derivations' prefix count up to k is positive: its derivations by rank, a fact removed
in the step counting its a at rank t. Every count up to k this reads is at most the derivations there
(b and a are under- and upper-bounded as above), so a positive one proves a derivation ranking at most
k; it then counts b = that prefix, a = the rest, t = the largest rank it read.

The distinct's parts, as its fold reads them (rows as a trace's seek gives them: a fact's row of an
earlier version and its removal, -1, may both be there): the change (the fact's columns, `__rank` = the
derivation's rank, the weight), the facts held at the change's facts (their rows), and, in the
over-delete, the facts removed so far in the step at the change's facts (their rows, b = 0), or in the
first evaluation after it, every fact the over-delete removed. It returns rows of three kinds (`TO`):
the distinct's output (0: the facts' changes, at their ranks), the rows to write to its facts (1), and
to the step's removed facts (2).

Before 2026-12-05 the distinct's input integral counted derivations by (fact, rank): 9.6M rows for
transitive closure's 3.8M pairs at 2,000 nodes, where this keeps one row per fact.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from dbspark.algebra.consolidate import WEIGHT
from dbspark.columnar.packed_rank_fold import (
    ABOVE,
    BELOW,
    COUNTS,
    FACTS,
    KEPT,
    OUT,
    RANK,
    REMOVED,
    TO,
    TOP,
    PackedFold,
    packed_supports,
)
from dbspark.columnar.plans import collect
from dbspark.columnar.row_set import RowSet

DERIVED_RANK = "__s"  # a derivation's rank
NEW_COUNTS = {BELOW: "__b", ABOVE: "__a", TOP: "__t"}  # a fact's counts after a change

__all__ = [
    "ABOVE",
    "BELOW",
    "COUNTS",
    "FACTS",
    "KEPT",
    "OUT",
    "RANK",
    "REMOVED",
    "TO",
    "TOP",
    "RankFold",
    "supports",
]


def state_schema(schema: pl.Schema) -> pl.Schema:
    """A ranked distinct's rows of facts: its output's columns (the fact's and the rank) and the counts."""
    return pl.Schema({**schema, **{c: pl.Int64() for c in COUNTS}})


def fold_schema(schema: pl.Schema, count: bool = False) -> pl.Schema:
    """The fold's rows (without the weight): the facts' rows and where each goes."""
    extra = {KEPT: pl.Boolean()} if count else {}
    return pl.Schema({**state_schema(schema), TO: pl.Int64(), **extra})


@dataclass(frozen=True)
class RankFold:
    """`cols`: the fact's columns. `overdelete`: remove each held fact of the change that has no
    derivation counted below its rank left; else H by facts (a fact of positive count not held comes
    in, a held fact of count 0 goes). `count`: the removals also say whether a derivation is left
    (`KEPT`)."""

    cols: tuple[str, ...]
    overdelete: bool
    count: bool = False

    def __call__(self, parts: list[pl.DataFrame]) -> pl.DataFrame:
        change, facts, other = parts
        packed = PackedFold.of(self.cols, parts, self.count)
        if packed is not None:
            return packed.overdelete() if self.overdelete else packed.normal()
        rows = sum(p.height for p in parts)
        plans = (
            self._overdelete(change, facts, other) if self.overdelete else self._normal(change, facts, other)
        )
        out = collect(pl.concat(plans, how="diagonal_relaxed"), rows)
        return out.select(*self.cols, RANK, *COUNTS, TO, *([KEPT] if self.count else []), WEIGHT)

    # ---- the held facts' counts, changed -----------------------------------------------------------
    def _applied(self, change: pl.DataFrame, state: pl.LazyFrame) -> pl.LazyFrame:
        """Each fact of `state` (rows with its counts) that the change touches, with its counts after the
        change (`__b`, `__a`, `__t`) and whether they differ (`__changed`)."""
        cols = list(self.cols)
        d = change.lazy().select(*cols, pl.col(RANK).alias(DERIVED_RANK), WEIGHT)
        below = pl.col(DERIVED_RANK) < pl.col(RANK)
        w = pl.col(WEIGHT)
        per = (
            d.join(state, on=cols, how="inner", nulls_equal=True)
            .group_by(cols)
            .agg(
                pl.col(RANK, *COUNTS, "__held").first(),
                w.filter(below).sum().alias("__db"),
                w.filter(~below).sum().alias("__da"),
                pl.col(DERIVED_RANK).filter(~below & (w > 0)).max().alias("__ds"),
            )
        )
        b = pl.col(BELOW) + pl.col("__db")
        a = pl.col(ABOVE) + pl.col("__da")
        return per.with_columns(
            pl.max_horizontal(b, 0).alias("__b"),
            (a + pl.min_horizontal(b, 0)).alias("__a"),
            pl.max_horizontal(pl.col(TOP), pl.col("__ds")).alias("__t"),
        ).with_columns(
            (
                (pl.col("__b") != pl.col(BELOW))
                | (pl.col("__a") != pl.col(ABOVE))
                | (pl.col("__t") != pl.col(TOP))
            ).alias("__changed")
        )

    def _rows(
        self, per: pl.LazyFrame, to: int, weight: int, new: bool = False, kept: pl.Expr | None = None
    ) -> pl.LazyFrame:
        """Rows of the facts of `per`, with their counts (old, or `new`: `__b`, `__a`, `__t`), going `to`
        (with `KEPT` if given)."""
        counts = [pl.col(NEW_COUNTS[c] if new else c).alias(c) for c in COUNTS]
        extra = [] if kept is None else [kept.alias(KEPT)]
        return per.select(
            *self.cols,
            RANK,
            *counts,
            pl.lit(to, pl.Int64).alias(TO),
            *extra,
            pl.lit(weight, pl.Int64).alias(WEIGHT),
        )

    def _overdelete(
        self, change: pl.DataFrame, facts: pl.DataFrame, removed: pl.DataFrame
    ) -> list[pl.LazyFrame]:
        """The held facts of the change whose count below their rank drops to 0 go (out, from the facts,
        into the removed ones); the others' counts change in place; the removed ones' counts too."""
        cols = list(self.cols)
        state = pl.concat(
            [
                _current(facts, cols).with_columns(pl.lit(True).alias("__held")),
                _current(removed, cols).with_columns(pl.lit(False).alias("__held")),
            ]
        )
        per = self._applied(change, state)
        held, changed = pl.col("__held"), pl.col("__changed")
        gone = per.filter(held & (pl.col("__b") <= 0))
        kept = per.filter(held & (pl.col("__b") > 0) & changed)
        again = per.filter(~held & changed)
        kept_ = pl.col("__a") > 0 if self.count else None
        return [
            self._rows(gone, OUT, -1, kept=kept_),
            self._rows(gone, FACTS, -1),
            self._rows(gone, REMOVED, 1, True),
            self._rows(kept, FACTS, -1),
            self._rows(kept, FACTS, 1, True),
            self._rows(again, REMOVED, -1),
            self._rows(again, REMOVED, 1, True),
        ]

    def _normal(self, change: pl.DataFrame, facts: pl.DataFrame, gone: pl.DataFrame) -> list[pl.LazyFrame]:
        """H by facts: a held fact's counts change, and it goes when its count drops to 0; a fact not held
        (a new one, or one the over-delete removed: `gone`, each counting its a at rank t) comes in when
        its count is positive, at 1 + the least rank where its count so far is positive."""
        cols = list(self.cols)
        held = _current(facts, cols)
        per = self._applied(change, held.with_columns(pl.lit(True).alias("__held")))
        total = pl.col("__b") + pl.col("__a")
        goes = per.filter(total <= 0)
        stays = per.filter((total > 0) & pl.col("__changed"))
        # the facts coming in: their derivations by rank, summed, in order, with the count so far
        w = pl.col(WEIGHT)
        rows = pl.concat(
            [
                change.lazy()
                .select(*cols, pl.col(RANK).alias(DERIVED_RANK), WEIGHT)
                .join(held, on=cols, how="anti", nulls_equal=True),
                _current(gone, cols)
                .filter(pl.col(ABOVE) > 0)
                .select(*cols, pl.col(TOP).alias(DERIVED_RANK), pl.col(ABOVE).alias(WEIGHT)),
            ]
        )
        by_rank = (
            rows.group_by([*cols, DERIVED_RANK])
            .agg(w.sum())
            .sort(DERIVED_RANK)
            .with_columns(w.cum_sum().over(cols).alias("__pre"))
        )
        pre = pl.col("__pre")
        least = (
            by_rank.filter(pre > 0)
            .group_by(cols)
            .agg(pl.col(DERIVED_RANK).min().alias("__k"), pre.sort_by(DERIVED_RANK).first().alias("__b"))
        )
        whole = by_rank.group_by(cols).agg(
            w.sum().alias("__n"), pl.col(DERIVED_RANK).filter(w > 0).max().alias("__top")
        )
        come = (
            least.join(whole, on=cols, nulls_equal=True)
            .filter(pl.col("__n") > 0)
            .with_columns(
                (pl.col("__k") + 1).alias(RANK),
                (pl.col("__n") - pl.col("__b")).alias("__a"),
                pl.max_horizontal(pl.col("__k"), pl.col("__top")).alias("__t"),
            )
        )
        return [
            self._rows(goes, OUT, -1),
            self._rows(goes, FACTS, -1),
            self._rows(stays, FACTS, -1),
            self._rows(stays, FACTS, 1, True),
            self._rows(come, OUT, 1, True),
            self._rows(come, FACTS, 1, True),
        ]


def _current(rows: pl.DataFrame, cols: list[str]) -> pl.LazyFrame:
    """The facts' rows now: a trace's rows at a fact are not consolidated across its runs (a fact's row
    of an earlier version and its removal may both be there)."""
    summed = rows.lazy().group_by([*cols, RANK, *COUNTS]).agg(pl.col(WEIGHT).sum())
    return summed.filter(pl.col(WEIGHT) > 0).drop(WEIGHT)


def tallied_supports(facts: pl.DataFrame, tally: RowSet, cols: list[str]) -> pl.DataFrame:
    """`supports` of derivations tallied by a `RowSet` of (the fact's columns, `__rank`): read from its
    packed keys where it keeps them (`packed_supports`: at 2,000-node transitive closure 13M
    derivations are not decoded into a frame and packed again), else from its counts' frame."""
    packed = tally.packed_counts() if tally.cols == [*cols, RANK] else None
    rows = packed_supports(facts, tuple(cols), *packed) if packed is not None else None
    return rows if rows is not None else supports(facts, tally.counts(), cols)


def supports(facts: pl.DataFrame, counts: pl.DataFrame, cols: list[str]) -> pl.DataFrame:
    """The rows of facts derived from empty state (`facts`: each fact once, at its rank) whose derivations
    are `counts` (the fact, `__rank` the derivation's, the weight: summed): each fact's counts as the
    fold would have kept them (`operators/fresh.py`)."""
    packed = PackedFold.of(tuple(cols), [facts, counts], False)
    if packed is not None:
        return packed.supports()
    s = pl.col(DERIVED_RANK)
    below = s < pl.col(RANK)
    plan = (
        counts.lazy()
        .select(*cols, pl.col(RANK).alias(DERIVED_RANK), WEIGHT)
        .join(facts.lazy().select(*cols, RANK), on=cols, nulls_equal=True)
        .group_by(cols)
        .agg(
            pl.col(RANK).first(),
            pl.col(WEIGHT).filter(below).sum().alias(BELOW),
            pl.col(WEIGHT).filter(~below).sum().alias(ABOVE),
            s.filter(~below).max().alias("__ds"),
        )
        .select(
            *cols,
            RANK,
            BELOW,
            ABOVE,
            pl.max_horizontal(pl.col(RANK) - 1, pl.col("__ds")).alias(TOP),
            pl.lit(1, pl.Int64).alias(WEIGHT),
        )
    )
    return collect(plan, counts.height + facts.height)
