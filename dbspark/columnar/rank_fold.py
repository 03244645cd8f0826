"""The fold of a ranked recursive distinct (`operators/ranked_distinct.py`), in Polars.

Its parts, each with the fact's columns, the rank column and the weight: the change of the distinct's
input (derivations, the rank being the derivation's), its input's integral at the change's facts (every
derivation of those facts so far, by rank) and the distinct's own facts at them (one row per fact held:
its rank). `docs/recursion-strategies.md` ("Ranks") derives what it returns.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from dbspark.algebra.consolidate import WEIGHT
from dbspark.columnar.plans import collect

RANK = "__rank"
KEPT = "__kept"  # (counting only) a fact removed while some derivation of it is left


@dataclass(frozen=True)
class RankFold:
    """`cols`: the fact's columns. `overdelete`: remove each held fact of the change none of whose
    derivations left has a smaller rank than the fact's; else H by facts (a fact of positive count not
    held comes in, at 1 + its derivations' least rank; a held fact of count 0 goes). `count`: the
    removals also say whether a derivation is left (`KEPT`)."""

    cols: tuple[str, ...]
    overdelete: bool
    count: bool = False

    def __call__(self, parts: list[pl.DataFrame]) -> pl.DataFrame:
        if self.overdelete:
            return self._overdelete(*parts)
        return self._normal(*parts)

    def _derivations(self, change: pl.DataFrame, integral: pl.DataFrame) -> pl.LazyFrame:
        """Each fact's derivations by rank, the change's and the integral's summed, 0 left out."""
        cols = list(self.cols)
        return (
            pl.concat([change.select(*cols, RANK, WEIGHT), integral.select(*cols, RANK, WEIGHT)])
            .lazy()
            .group_by([*cols, RANK])
            .agg(pl.col(WEIGHT).sum())
            .filter(pl.col(WEIGHT) != 0)
        )

    def _overdelete(self, change: pl.DataFrame, integral: pl.DataFrame, facts: pl.DataFrame) -> pl.DataFrame:
        """The facts of the change held (`facts`: their ranks) with no derivation left below their rank,
        each removed (-1 at its rank)."""
        cols = list(self.cols)
        held = _held(facts, cols).select(*cols, pl.col(RANK).alias("__held"))
        # (a held fact of the change whose derivations are all gone has no row among them)
        j = held.join(self._derivations(change, integral), on=cols, how="left", nulls_equal=True)
        per = j.group_by(cols).agg(
            pl.col("__held").first().alias(RANK),
            pl.col(WEIGHT).filter(pl.col(RANK) < pl.col("__held")).sum().alias("__below"),
            pl.col(WEIGHT).sum().alias("__all"),
        )
        gone = per.filter(pl.col("__below") <= 0)
        extra = [(pl.col("__all") > 0).alias(KEPT)] if self.count else []
        plan = gone.select(*cols, RANK, *extra, pl.lit(-1, pl.Int64).alias(WEIGHT))
        return collect(plan, change.height + integral.height + facts.height)

    def _normal(
        self, change: pl.DataFrame, integral: pl.DataFrame, facts: pl.DataFrame, removed: pl.DataFrame
    ) -> pl.DataFrame:
        """H by facts: a fact is held when its derivations' count is positive, except those the step's
        over-delete `removed`; one whose count becomes positive and is not held comes in at 1 + the least
        rank of its derivations, one held whose count drops to 0 goes (at its rank: `facts`, sought only
        where the change removes derivations)."""
        cols = list(self.cols)
        old = integral.lazy().group_by(cols).agg(pl.col(WEIGHT).sum().alias("__old"))
        per = (
            self._derivations(change, integral)
            .group_by(cols)
            .agg(
                pl.col(WEIGHT).sum().alias("__all"),
                pl.col(RANK).filter(pl.col(WEIGHT) > 0).min().alias("__least"),
            )
            .join(old, on=cols, how="full", nulls_equal=True, coalesce=True)
            .join(
                removed.lazy().select(*cols, pl.lit(True).alias("__removed")).unique(cols),
                on=cols,
                how="left",
                nulls_equal=True,
            )
            .with_columns(
                ((pl.col("__old").fill_null(0) > 0) & pl.col("__removed").is_null()).alias("__was"),
                pl.col("__all").fill_null(0),
            )
        )
        come = per.filter((pl.col("__all") > 0) & ~pl.col("__was")).select(
            *cols, (pl.col("__least") + 1).alias(RANK), pl.lit(1, pl.Int64).alias(WEIGHT)
        )
        go = (
            per.filter(pl.col("__was") & (pl.col("__all") <= 0))
            .select(cols)
            .join(_held(facts, cols).select(*cols, RANK), on=cols, nulls_equal=True)
            .select(*cols, RANK, pl.lit(-1, pl.Int64).alias(WEIGHT))
        )
        rows = change.height + integral.height + facts.height + removed.height
        return collect(pl.concat([come, go]), rows)


def _held(facts: pl.DataFrame, cols: list[str]) -> pl.LazyFrame:
    """The facts held, each at its rank: a trace's rows at a fact are not consolidated across its runs
    (a fact that came in at one rank, went and came back at another has three)."""
    summed = facts.lazy().group_by([*cols, RANK]).agg(pl.col(WEIGHT).sum())
    return summed.filter(pl.col(WEIGHT) > 0)
