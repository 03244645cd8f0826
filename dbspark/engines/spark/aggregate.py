"""GROUP BY aggregation on Spark: from scratch, and incrementally through the keys of a change.

The results equal the local engine's (`engines.local.aggregate`): COUNT/SUM/AVG/VAR/STDDEV from
per-group accumulators (integer sums exact in DECIMAL(38), overflow an error), MIN/MAX/MEDIAN/MODE over
the group's values with their weights, user aggregates folded by Spark's Python workers.

Incrementally (`dbsp-paper.txt` §7.2, §7.4), a GROUP BY of linear aggregates keeps a trace of
accumulators (an abelian group: a change's accumulators are added, `engines.spark.trace`), looks up
the old accumulators of the changed groups only, and emits old rows with weight -1 and new ones with
+1. With ordered or user aggregates it keeps the integral of its input indexed by the group keys and
recomputes the changed groups from their rows: work follows the changed groups' sizes (the local
engine's ordered trees give O(log n) per change; a Spark-side equivalent is left for later).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl

from dbspark.algebra.zset import WEIGHT
from dbspark.engines.spark.convert import spark_type
from dbspark.errors import NegativeStateError
from dbspark.ir.aggregate import AggCall, AggSpec, UserAggregate, result_dtype

if TYPE_CHECKING:
    from dbspark.engines.spark.kernel import SparkKernel
    from dbspark.engines.spark.values import SparkZSet

G = "__g"  # the constant group key of an aggregate without GROUP BY
VAR = ("var_samp", "var_pop", "stddev_samp", "stddev_pop")


def _F() -> Any:
    from pyspark.sql import functions as F

    return F


def keys_of(spec: AggSpec) -> list[str]:
    return list(spec.by) if spec.by else [G]


def with_key(df: Any, spec: AggSpec) -> Any:
    return df if spec.by else df.withColumn(G, _F().lit(0).cast("byte"))


def _is_int(spec: AggSpec, c: AggCall) -> bool:
    t = spec.input_schema[c.arg] if c.arg else None
    return t is not None and (t.is_integer() or t == pl.Boolean())


def _acc_exprs(spec: AggSpec) -> list[Any]:
    """Per-group accumulator sums of a Z-set: the linear part of every call."""
    F = _F()
    w = F.col(WEIGHT)
    out = [F.sum(w).alias(WEIGHT)]
    for i, c in enumerate(spec.calls):
        if c.kind != "linear" or c.arg is None:
            continue
        x = F.col(c.arg)
        out.append(F.sum(F.when(x.isNotNull(), w).otherwise(0)).alias(f"__c{i}"))
        if _is_int(spec, c):
            xs = x.cast("long").cast("decimal(38,0)")
            wd = w.cast("decimal(38,0)")
        elif isinstance(spec.input_schema[c.arg], pl.Decimal):
            xs, wd = x, w.cast("decimal(20,0)")
        else:
            xs, wd = x.cast("double"), w.cast("double")
        if c.func != "count":
            out.append(F.sum(xs * wd).alias(f"__s{i}"))
        if c.func in VAR:
            xv = xs if _is_int(spec, c) else xs.cast("double")
            out.append(F.sum(xv * xv * (wd if _is_int(spec, c) else w.cast("double"))).alias(f"__q{i}"))
    return out


def _finalize(spec: AggSpec) -> list[Any]:
    """Columns turning accumulators into the linear aggregates."""
    F = _F()
    out = []
    for i, c in enumerate(spec.calls):
        if c.kind != "linear":
            continue
        t = spark_type(result_dtype(c, spec.input_schema))
        if c.func == "count_star":
            e = F.col(WEIGHT)
        elif c.func == "count":
            e = F.col(f"__c{i}")
        else:
            n, s = F.col(f"__c{i}"), F.col(f"__s{i}")
            nf = n.cast("double")
            if c.func == "sum":
                e = F.when(n > 0, s)
            elif c.func == "avg":
                e = F.when(n > 0, s.cast("double") / nf)
            else:
                q = F.col(f"__q{i}")
                if _is_int(spec, c):  # n·Σx² - (Σx)² exactly, divided once at the end
                    m2 = (n.cast("decimal(38,0)") * q - s * s).cast("double") / nf
                else:
                    m2 = q - s * s / nf
                m2 = F.greatest(m2, F.lit(0.0))
                e = F.when(n > 1, m2 / (nf - 1)) if c.func in ("var_samp", "stddev_samp") else F.when(n > 0, m2 / nf)
                if str(c.func).startswith("stddev"):
                    e = F.sqrt(e)
        out.append(e.cast(t).alias(c.name))
    return out


def _checked_count(where: str) -> Any:
    from dbspark.engines.spark.kernel import fail

    F = _F()
    return F.when(F.col(WEIGHT) < 0, fail(NegativeStateError, where)).otherwise(F.col(WEIGHT))


def _values(df: Any, keys: list[str], c: AggCall) -> Any:
    """(keys, __x, __w): the call's non-NULL values with their total weights, checked non-negative."""
    F = _F()
    assert c.arg is not None
    v = df.filter(F.col(c.arg).isNotNull()).select(*keys, F.col(c.arg).alias("__x"), WEIGHT)
    v = v.groupBy(*keys, "__x").agg(F.sum(WEIGHT).alias(WEIGHT)).filter(F.col(WEIGHT) != 0)
    return v.withColumn(WEIGHT, _checked_count(f"aggregate {c.name}: a value would have a negative count"))


def _ordered(df: Any, keys: list[str], c: AggCall, spec: AggSpec) -> Any:
    """(keys, value) of an ordered or user aggregate call for every group with values."""
    from pyspark.sql import Window

    F = _F()
    t = result_dtype(c, spec.input_schema)
    v = _values(df, keys, c)
    if isinstance(c.func, UserAggregate):
        from dbspark.engines.spark.udf import user_fold

        return user_fold(v, keys, c, spec)
    if c.func in ("min", "max"):
        f = F.min if c.func == "min" else F.max
        return v.groupBy(*keys).agg(f("__x").cast(spark_type(t)).alias(c.name))
    if c.func == "mode":  # the most frequent value; ties go to the smallest
        win = Window.partitionBy(*keys).orderBy(F.col(WEIGHT).desc(), F.col("__x").asc())
        top = v.withColumn("__rn", F.row_number().over(win)).filter(F.col("__rn") == 1)
        return top.select(*keys, F.col("__x").cast(spark_type(t)).alias(c.name))
    # median over weighted values: the values at positions (n-1)//2 and n//2
    win = Window.partitionBy(*keys).orderBy("__x").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    v = v.withColumn("__cum", F.sum(WEIGHT).over(win)).withColumn("__n", F.sum(WEIGHT).over(Window.partitionBy(*keys)))
    n = F.col("__n")
    lo = F.min(F.when(F.col("__cum") > F.floor((n - 1) / 2), F.col("__x")))
    hi = F.min(F.when(F.col("__cum") > F.floor(n / 2), F.col("__x")))
    e = (lo.cast("double") + hi.cast("double")) / 2 if spec.input_schema[c.arg].is_numeric() else lo  # type: ignore[index]
    return v.groupBy(*keys).agg(e.cast(spark_type(t)).alias(c.name))


def _dummy_group(df: Any, spec: AggSpec) -> Any:
    """df plus a weight-0 row of NULLs in the global group: a global aggregate has a row even when empty."""
    F = _F()
    row = df.sparkSession.range(1).select(
        *[F.lit(None).cast(spark_type(t)).alias(n) for n, t in spec.input_schema.items()],
        F.lit(0).cast("long").alias(WEIGHT), F.lit(0).cast("byte").alias(G))
    return df.unionByName(row)


def rows_aggregate(df: Any, spec: AggSpec, keep_global: bool = True) -> Any:
    """The aggregate of a consolidated Z-set frame that already has the group key columns."""
    from dbspark.engines.spark.kernel import ns_join

    F = _F()
    keys = keys_of(spec)
    if not spec.by and keep_global:
        df = _dummy_group(df, spec)
    acc = df.groupBy(*keys).agg(*_acc_exprs(spec))
    if spec.by:
        acc = acc.filter(F.col(WEIGHT) != 0).withColumn(
            WEIGHT, _checked_count("aggregate over a Z-set with a group of negative count"))
    out = acc.select(*keys, *_finalize(spec))
    for c in spec.calls:
        if c.kind != "linear":
            out = ns_join(out, _ordered(df, keys, c, spec), keys, "left")
    return out.select(*spec.by, *[c.name for c in spec.calls], F.lit(1).cast("long").alias(WEIGHT))


def aggregate_full(kernel: SparkKernel, z: SparkZSet, spec: AggSpec) -> Any:
    """The aggregate of a whole Z-set (the non-incremental `stream_aggregate`)."""
    return rows_aggregate(with_key(z.frame, spec), spec)


class AggregateState:
    """The state of an incremental GROUP BY on Spark: an accumulator trace, or the input's integral."""

    def __init__(self, kernel: SparkKernel, spec: AggSpec) -> None:
        from dbspark.engines.spark.trace import SparkTrace

        self.kernel, self.spec = kernel, spec
        self.linear = all(c.kind == "linear" for c in spec.calls)
        keys = keys_of(spec)
        rows_schema = pl.Schema([*spec.input_schema.items(), *([] if spec.by else [(G, pl.Int8())])])
        if self.linear:
            probe = with_key(kernel.empty(spec.input_schema).frame, spec).groupBy(*keys).agg(*_acc_exprs(spec))
            sums = tuple(c for c in probe.columns if c not in keys)
            types = {f.name: f.dataType for f in probe.schema.fields if f.name in sums}
            self.trace = SparkTrace(kernel, pl.Schema([(k, rows_schema[k]) for k in keys]), tuple(keys), sums, types)
        else:
            self.trace = SparkTrace(kernel, rows_schema, tuple(keys))
        self.started = False

    def step(self, delta: SparkZSet, undo: list) -> SparkZSet:
        k, spec = self.kernel, self.spec
        out_schema = spec.output_schema()
        if delta.known_empty and (self.started or spec.by):
            return k.empty(out_schema)
        was = self.started
        self.started = True
        undo.append(lambda: setattr(self, "started", was))
        F = _F()
        keys = keys_of(spec)
        prev = self.trace.snapshot()
        d = with_key(delta.frame, spec)
        if self.linear:
            path = self.trace.append(d.groupBy(*keys).agg(*_acc_exprs(spec)), undo)
            out = self._linear(prev, path, was)
        else:
            path = self.trace.append(d.select(*self.trace.schema, WEIGHT), undo, consolidated=delta.consolidated)
            dz = self.kernel.spark.read.schema(self._schema(prev)).parquet(path)
            touched = dz.select(*keys).distinct() if spec.by else dz.sparkSession.range(1).select(
                F.lit(0).cast("byte").alias(G))
            out = self._rows(prev, dz, touched, was)
        z = k._z(out_schema, out)
        return k.consolidate(z)

    def _schema(self, snap: Any) -> Any:
        return snap.frame(self.kernel.spark, self.trace.sum_types).schema

    def _linear(self, prev: Any, path: str, was: bool) -> Any:
        from dbspark.engines.spark.kernel import ns_join

        F, spec, keys = _F(), self.spec, keys_of(self.spec)
        sums = self.trace.sums
        dacc = self.kernel.spark.read.schema(self._schema(prev)).parquet(path)
        if not spec.by:  # the global group always exists
            dacc = dacc.unionByName(dacc.sparkSession.range(1).select(
                F.lit(0).cast("byte").alias(G), *[F.lit(0).cast(t).alias(s) for s, t in self.trace.sum_types.items()]))
            dacc = dacc.groupBy(G).agg(*[F.sum(s).alias(s) for s in sums])
        old = prev.frame(self.kernel.spark, self.trace.sum_types)
        old = ns_join(old, F.broadcast(dacc.select(*keys)), keys, "left_semi").groupBy(*keys).agg(
            *[F.sum(s).alias(s) for s in sums])
        j = ns_join(dacc.select(*keys, *[F.col(s).alias(f"__d{s}") for s in sums]), old, keys, "left")
        old_cols = [F.coalesce(F.col(s), F.lit(0).cast(self.trace.sum_types[s])).alias(s) for s in sums]
        new_cols = [(F.coalesce(F.col(s), F.lit(0).cast(self.trace.sum_types[s])) + F.col(f"__d{s}")).alias(s)
                    for s in sums]
        old = j.select(*keys, *old_cols)
        new = j.select(*keys, *new_cols).withColumn(
            WEIGHT, _checked_count("aggregate: a group would have a negative number of rows; a delete of rows "
                                   "that are not there"))
        names = [c.name for c in spec.calls]

        def rows(acc: Any, w: int, keep_global: bool) -> Any:
            r = acc.select(*keys, *_finalize(spec), F.col(WEIGHT).alias("__n"))
            r = r.filter((F.col("__n") > 0) | F.lit(keep_global))
            return r.select(*spec.by, *names, F.lit(w).cast("long").alias(WEIGHT))

        return rows(old, -1, was and not spec.by).unionByName(rows(new, 1, not spec.by))

    def _rows(self, prev: Any, dz: Any, touched: Any, was: bool) -> Any:
        from dbspark.engines.spark.kernel import ns_join

        F, spec, keys = _F(), self.spec, keys_of(self.spec)
        old = ns_join(prev.frame(self.kernel.spark), F.broadcast(touched), keys, "left_semi")
        cols = [*self.trace.schema, WEIGHT]
        new = old.select(*cols).unionByName(dz.select(*cols))
        new = new.groupBy(*self.trace.schema).agg(F.sum(WEIGHT).alias(WEIGHT)).filter(F.col(WEIGHT) != 0)
        old = old.groupBy(*self.trace.schema).agg(F.sum(WEIGHT).alias(WEIGHT)).filter(F.col(WEIGHT) != 0)
        out = rows_aggregate(new, spec)
        if spec.by or was:
            neg = rows_aggregate(old, spec).withColumn(WEIGHT, -F.col(WEIGHT))
            out = out.unionByName(neg)
        return out

    def checkpoint(self) -> Any:
        return (self.trace.to_state(), self.started)

    def restore(self, saved: Any) -> None:
        self.trace.restore(saved[0])
        self.started = saved[1]
