"""The incremental GROUP BY with MIN / MAX / MEDIAN / MODE or user aggregates on Spark.

The state is the input's integral indexed by the group keys (a bucketed trace). A step seeks the
integral's rows at the change's groups and folds them with the change by `columnar.ordered_fold` (the
same code wherever it runs, so steps of either kind interleave on one trace): in the driver for a
change held there, where a group too large to read is ranked over its sorted runs instead
(`big_groups`); otherwise as a `cogroup` inside Spark's tasks, the change and the sought rows
exchanged by the group keys. A spec of linear calls only folds above the kernel
(`operators/aggregate.py`).
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

import polars as pl

from dbspark.algebra.zset import WEIGHT, ZSet
from dbspark.columnar import ordered_fold
from dbspark.columnar.aggfold import G, keys_of
from dbspark.engines.spark.convert import col_list
from dbspark.ir.aggregate import AggSpec

if TYPE_CHECKING:
    from dbspark.engines.spark.kernel import SparkKernel
    from dbspark.engines.spark.values import SparkZSet


class AggregateState:
    """The state of an incremental GROUP BY with ordered or user calls on Spark: the input's integral
    indexed by the group keys."""

    def __init__(self, kernel: SparkKernel, spec: AggSpec) -> None:
        self.kernel, self.spec = kernel, spec
        keys = keys_of(spec)
        rows_schema = pl.Schema([*spec.input_schema.items(), *([] if spec.by else [(G, pl.Int8())])])
        self.trace = kernel.bucket_trace(rows_schema, tuple(keys), pl.Schema([(WEIGHT, pl.Int64())]))
        self.started = False

    def step(self, delta: SparkZSet, undo: list) -> SparkZSet:
        k, spec = self.kernel, self.spec
        if delta.known_empty and (self.started or spec.by):
            return k.empty(spec.output_schema())
        was = self.started
        prev = self.trace.snapshot()
        if delta._df is None:  # held in the driver, or known empty
            out = self._in_driver(delta, prev, was, undo)
            if out is not None:
                return out
        keys = keys_of(spec)
        d = k._z(
            self.trace.schema,
            with_key(delta.frame, spec).select(*col_list([*self.trace.schema, WEIGHT])),
            lineage=delta.lineage,
        )
        found = k.seek(prev, d, [(c, c) for c in keys], exact=True)
        out = k.cogroup(
            [d, found], keys, partial(ordered_fold.fold, spec, was), spec.output_schema(), None, True
        )
        self.trace.add(d, undo)
        self.started = True
        undo.append(lambda: setattr(self, "started", was))
        return out

    def _in_driver(self, delta: SparkZSet, prev: Any, was: bool, undo: list) -> SparkZSet | None:
        """The step of a change held in the driver (or known empty), there: the changed groups' rows
        sought in the input's integral, a group too large to read ranked over its runs instead
        (`big_groups`). None when the trace has a change on Spark pending."""
        from dbspark.engines.spark import big_groups
        from dbspark.engines.spark.values import SparkZSet

        spec, keys = self.spec, keys_of(self.spec)
        pend = prev.pending_local()
        if pend is None:
            return None
        d = (
            delta.local.df
            if delta.local is not None
            else pl.DataFrame(schema={**spec.input_schema, WEIGHT: pl.Int64()})
        )
        if not spec.by:
            d = d.with_columns(pl.lit(0, pl.Int8).alias(G))
        d = d.select(*self.trace.schema, WEIGHT)
        groups, small = d.select(keys).unique(), d
        split = big_groups.ranked(spec, keys, groups, d, prev, pend, was) if spec.by else None
        if split is not None:  # the big groups ranked over their runs; the others read
            groups = split[1]
            small = d.join(groups, on=keys, how="semi", nulls_equal=True)
        if split is not None and groups.height == 0:
            out = split[0].df
        else:
            found = prev.seek_local(groups, True)
            assert found is not None
            out = ordered_fold.fold(spec, was, [small, found])
            if split is not None:
                out = pl.concat([split[0].df, out], how="vertical")
        self.started = True
        undo.append(lambda: setattr(self, "started", was))
        if d.height:
            self.trace.add(SparkZSet(self.kernel.spark, self.trace.schema, local=ZSet(d)), undo)
        return SparkZSet(self.kernel.spark, spec.output_schema(), local=ZSet(out, True), consolidated=True)

    def checkpoint(self) -> Any:
        return (self.trace.to_state(), self.started)

    def restore(self, saved: Any) -> None:
        self.trace.restore(saved[0])
        self.started = saved[1]


def with_key(df: Any, spec: AggSpec) -> Any:
    """A Spark frame with the constant group key of an aggregate without GROUP BY."""
    from pyspark.sql import functions as F

    return df if spec.by else df.withColumn(G, F.lit(0).cast("byte"))
