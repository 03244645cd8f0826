"""MIN / MAX inside a recursive scope: the four values of a group's extreme in one grouped pass.

The nested aggregate (`operators.nested.NestedKeyed`) needs, per group of interest, f at four corners
of the (step, iteration) grid: f(w1 + w2 + w3 + x) - f(w1 + w3) - f(w1 + w2) + f(w1), from the parts
w1, w2, w3 and the change x of the group's input (`operators/nested_accumulators.py` has the linear
case). MIN and MAX are not invertible (`incremental-aggregation-monotonic-programs.txt` §2.4, Table
2: a delete of the extreme needs the group's other values), so the parts are the group's rows; but
the four corners share them: one pass sums each value's multiplicity in the four combinations of
parts, and each corner's extreme is the least (greatest) value present there (multiplicity > 0), a
group present where its row count is. That replaces four whole folds (`ordered_fold.whole`) of the
same rows: on shortest paths they were most of a batch's time.

The same values as `ordered_fold` for MIN / MAX of a non-floating column (`extremes`): NULLs ignored,
a group of NULLs only is NULL.
"""

from __future__ import annotations

import polars as pl

from dbspark.algebra.zset import WEIGHT
from dbspark.ir.aggregate import AggSpec, result_dtype

PART = "__part"
# the corners: (name, the parts summed (w1 = 0, w2 = 1, w3 = 2, x = 3), the sign of its row)
CORNERS = (("all", (0, 1, 2, 3), 1), ("w13", (0, 2), -1), ("w12", (0, 1), -1), ("w1", (0,), 1))


def extremes(spec: AggSpec) -> bool:
    """Whether `nested_extreme` folds the spec: GROUP BY, and only MIN / MAX of non-floating columns."""
    return bool(spec.by) and all(
        c.func in ("min", "max") and c.arg is not None and not spec.input_schema[c.arg].is_float()
        for c in spec.calls
    )


def nested_extreme(spec: AggSpec, frames: list[pl.DataFrame]) -> pl.DataFrame:
    """`cogroup` function: f(w1 + w2 + w3 + x) - f(w1 + w3) - f(w1 + w2) + f(w1) for the groups of
    `frames` = [w1, w2, w3, x] (the input's columns and the weight), not consolidated."""
    keys = list(spec.by)
    cols = [c for c in spec.input_schema]
    rows = pl.concat(
        [f.select(*cols, WEIGHT).with_columns(pl.lit(i, pl.Int8).alias(PART)) for i, f in enumerate(frames)],
        how="vertical",
    )
    w, part = pl.col(WEIGHT), pl.col(PART)

    def sums(prefix: str) -> list[pl.Expr]:
        return [w.filter(part.is_in(list(ids))).sum().alias(prefix + name) for name, ids, _ in CORNERS]

    groups = rows.group_by(keys).agg(sums("__n"))
    for i, c in enumerate(spec.calls):
        x = pl.col(str(c.arg))
        by_value = list(dict.fromkeys([*keys, str(c.arg)]))
        values = rows.filter(x.is_not_null()).group_by(by_value).agg(sums("__m"))
        pick = [
            (
                x.filter(pl.col("__m" + name) > 0).min()
                if c.func == "min"
                else x.filter(pl.col("__m" + name) > 0).max()
            ).alias(f"__v{i}{name}")
            for name, _, _ in CORNERS
        ]
        groups = groups.join(values.group_by(keys).agg(pick), on=keys, how="left", nulls_equal=True)
    out = []
    for name, _, sign in CORNERS:
        out.append(
            groups.filter(pl.col("__n" + name) > 0).select(
                *keys,
                *[
                    pl.col(f"__v{i}{name}").cast(result_dtype(c, spec.input_schema)).alias(c.name)
                    for i, c in enumerate(spec.calls)
                ],
                pl.lit(sign, pl.Int64).alias(WEIGHT),
            )
        )
    return pl.concat(out, how="vertical")
