"""A linear aggregate inside a recursive scope, kept as accumulators (`incremental-aggregation-
monotonic-programs.txt` §2.3, §5).

A doubly-incremental GROUP BY-aggregate (`NestedKeyed`) computes, for each key of interest,

    out[t] = f(w1 + w2 + w3 + x) - f(w1 + w3) - f(w1 + w2) + f(w1)

from the parts of the group's input: w1 (earlier steps, earlier iterations), w2 (earlier steps, this
iteration), w3 (this step, earlier iterations) and the change x. Kept as rows, each part is all of the
group's rows: IncrEvalMonotonic's semi-naive loop would re-read a growing group at every iteration,
Θ(n²) on the company-control chain of the seed's Figure 1 (Example 5.1).

For a spec of linear calls with exact accumulators (COUNT, and SUM / AVG of integers and DECIMALs:
`aggfold.linear` and not `aggfold.has_floats`), f is a function of the group's accumulators (its row count,
and per call the count and sum of its values), and accumulators add: the seed's (f, g) with g = +,
d = - (§2.3, Table 2). So every part is kept as accumulators, one row per group (and iteration), and
the four values of f come from four sums of accumulators:

    out[t] = [F(A1 + A3 + A2 + Ax) - F(A1 + A3)] - [F(A1 + A2) - F(A1)]

with each bracket one `aggfold.fold` (old accumulators, and a change of them). A group of any size
costs O(1) per iteration where it is of interest, plus the change x.

The parts are Z-sets of accumulator rows: a row (group keys, accumulator columns) of weight w stands
for w times its accumulators, so consolidation (which only merges equal rows) keeps their meaning. The
trace of earlier steps holds one row per (group, iteration): a step's accumulators are merged into
what is there when the step ends (`AccumulatorTrace.merged`), so the trace does not grow with the
number of steps.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

import polars as pl

from dbspark.algebra.zset import WEIGHT
from dbspark.columnar.aggfold import (
    accumulate,
    accumulator_schema,
    check_fits,
    computable,
    emit,
    has_floats,
    key_schema,
    linear,
    results,
    stored,
)
from dbspark.ir.aggregate import AggSpec
from dbspark.operators.nested_trace import ITER, NestedTrace

PART = "__part"  # which part of a group's input an accumulator row is: w1, w2, w3 or x (0-3)

if TYPE_CHECKING:
    from dbspark.engines.base import Kernel, Value


class AccumulatorTrace(NestedTrace):
    """`NestedTrace` for a linear aggregate's input, its changes kept as accumulator rows (`acc_schema`:
    the GROUP BY columns, then the accumulators) per group, with their iteration `ITER` in the trace
    of earlier steps, one row per (group, iteration) there."""

    def __init__(self, kernel: Kernel, spec: AggSpec) -> None:
        self.spec = spec
        super().__init__(kernel, acc_schema(spec), spec.by)

    def _new_row(self) -> None:
        """This step's part is a trace that sums the accumulators by group (`Kernel.new_trace` with
        sums): a group changed at many iterations is one entry per run of it, not one per iteration."""
        k = self.kernel
        with k.scratch():
            self.row = k.new_trace(key_schema(self.spec), self.keys, accumulator_schema(self.spec))
        self.row_snap = self.row.snapshot()

    def row_change(self, change: Value) -> Value:
        """The accumulator rows' sums by group, for the trace that sums them."""
        fn = partial(summed_accumulators, self.spec)
        sums = accumulator_schema(self.spec)
        return self.kernel.cogroup([change], self.keys, fn, key_schema(self.spec), sums, True)

    def merged(self, change: Value) -> Value:
        """Per (group, iteration) the step changed, the trace's rows there retracted and their sum with
        the step's accumulators inserted."""
        k = self.kernel
        old = self.seek_cols(change, [(c, c) for c in self.keys], exact=True)
        parts = [change, old if old is not None else k.empty(self.timed)]
        return k.cogroup(parts, self.keys, partial(merge_accumulators, self.spec), self.timed)


def accumulates(spec: AggSpec) -> bool:
    """Whether a nested aggregate of `spec` is kept as accumulators: GROUP BY, linear calls only, and
    no floating sum (whose limb rows the nested fold does not keep: whole groups are summed exactly
    instead, `operators.aggregate.aggregate`)."""
    return bool(spec.by) and linear(spec) and not has_floats(spec)


def acc_schema(spec: AggSpec) -> pl.Schema:
    """An accumulator row: the GROUP BY columns, then the accumulators in their stored types."""
    return pl.Schema([*key_schema(spec).items(), *accumulator_schema(spec).items()])


def accumulator_rows(spec: AggSpec, frames: list[pl.DataFrame]) -> pl.DataFrame:
    """`cogroup` function: a change's accumulators per group, as rows of weight 1 (`acc_schema`)."""
    acc = accumulate(spec, frames)
    return acc.with_columns(pl.lit(1, pl.Int64).alias(WEIGHT))


def _summed(spec: AggSpec, rows: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """Weighted accumulator rows as one row per `by` value of Σ weight × accumulators, computable
    (`aggfold.computable`: Int128 counts and units)."""
    sums = accumulator_schema(spec)
    w = pl.col(WEIGHT).cast(pl.Int128)
    return computable(rows, sums).group_by(by).agg([(pl.col(n) * w).sum() for n in sums])


def summed_accumulators(spec: AggSpec, frames: list[pl.DataFrame]) -> pl.DataFrame:
    """`cogroup` function: weighted accumulator rows as one row of accumulators per group, in their
    stored types (the rows of a trace that sums them)."""
    return stored(spec, _summed(spec, frames[0], list(spec.by)))


def merge_accumulators(spec: AggSpec, frames: list[pl.DataFrame]) -> pl.DataFrame:
    """`cogroup` function of `AccumulatorTrace.merged`: for each (group, iteration) of the step's
    accumulator rows `frames[0]`, the trace's rows there `frames[1]` retracted and their sum with the
    step's inserted (left out where every accumulator is 0: the group has no rows there)."""
    cols = [*acc_schema(spec), ITER, WEIGHT]
    new, old = (f.select(cols) for f in frames)
    keys, sums = [*spec.by, ITER], accumulator_schema(spec)
    old = old.join(new.select(keys).unique(), on=keys, how="semi", nulls_equal=True)
    total = _summed(spec, pl.concat([new, old], how="vertical_relaxed"), keys)
    total = total.filter(~pl.all_horizontal([pl.col(n) == 0 for n in sums]))
    merged = stored(spec, total).with_columns(pl.lit(1, pl.Int64).alias(WEIGHT)).select(cols)
    return pl.concat([old.with_columns(-pl.col(WEIGHT)), merged], how="vertical_relaxed")


def nested_fold(spec: AggSpec, t1: int, frames: list[pl.DataFrame]) -> pl.DataFrame:
    """`cogroup` function: the nested aggregate's output at iteration t1 for the groups of interest,
    from earlier steps' accumulator rows `frames[0]` (with `ITER`), this step's at earlier iterations
    `frames[1]` (w3: sums of accumulators, without a weight) and the change's `frames[2]` (x), weighted
    (module docstring):
    [F(A1 + A3 + A2 + Ax) - F(A1 + A3)] - [F(A1 + A2) - F(A1)], the four parts summed per group in
    one pass."""
    timed, w3, x = frames
    by, sums = list(spec.by), accumulator_schema(spec)
    cols = [*acc_schema(spec), WEIGHT]
    it = pl.col(ITER)
    rows = pl.concat(
        [
            timed.filter(it <= t1).select(*cols, pl.when(it < t1).then(0).otherwise(1).alias(PART)),
            w3.with_columns(pl.lit(1, pl.Int64).alias(WEIGHT)).select(*cols, pl.lit(2).alias(PART)),
            x.select(*cols, pl.lit(3).alias(PART)),
        ],
        how="vertical_relaxed",
    )
    w, p = pl.col(WEIGHT).cast(pl.Int128), pl.col(PART)
    a = (
        computable(rows, sums)
        .group_by(by)
        .agg([(pl.col(n) * w).filter(p == i).sum().alias(f"{n}@{i}") for n in sums for i in range(4)])
    )

    def total(*parts: int) -> pl.DataFrame:
        return a.select(*by, *[pl.sum_horizontal(f"{n}@{i}" for i in parts).alias(n) for n in sums])

    a1, a12, a13, a1234 = total(0), total(0, 1), total(0, 2), total(0, 1, 2, 3)
    check_fits(spec, a1234)
    check_fits(spec, a12)
    later = emit(spec, a13, a1234, results(spec, a13), results(spec, a1234), True)
    earlier = emit(spec, a1, a12, results(spec, a1), results(spec, a12), True)
    return pl.concat([later, earlier.with_columns(-pl.col(WEIGHT))], how="vertical_relaxed")
