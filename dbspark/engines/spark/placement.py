"""Adaptive placement: a step's changes that are small run in the driver, large ones on the cluster.

A Spark step costs at least its jobs (0.1-0.6 s each on a local session, more on a cluster), whatever
the size of its change; the same operators run in the driver over the same bucket files in tens of
milliseconds (`docs/engine-state.md`). So at the start of a step the DataFrames pushed for it are
read into the driver together, in ONE Spark job, each cut at `spark.dbspark.driver_rows` + 1 rows
(`driver_rows`: 100,000 on a cluster, 2,000,000 on a `local[n]` master): a DataFrame that fits is
the step's change held in the driver from then on (its seeks, joins, checks and trace writes run
there, no Spark job); one that does not stays on Spark and its step runs on the cluster (it paid one
job for the first rows it did not keep). Rows pushed from Python are always in the driver.

On a `local[n]` master the cluster's tasks are threads of the driver's JVM on the driver's own cores:
the cluster path buys no parallelism there, only Spark jobs (Nexmark's q16, a 125,000-bid step: 140
jobs and 185 s on the cluster path against 5 s in the driver; reachability over a 1M-edge load: 176 s
against 3.2 s, `bench/README.md`), so its threshold is what the driver's memory holds rather than
what a job costs: two million rows (a step holds its change and what its operators derive from it, as
the local engine does; the state stays in the bucket files). A larger change (a bulk load) still runs
on the cluster.

`spark.dbspark.placement` forces either side: `driver` reads every pushed DataFrame into the driver
whatever its size; `cluster` moves every change to Spark, rows pushed from Python too; `auto` (the
default) decides by the threshold. Both paths write the same files and commit the same way, so steps
of either kind interleave freely. The read is the pushed frames as coerced and checked for their
table (`engines.spark.coerce`): a bad value rejects the step in this job, as it would later.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import polars as pl
import pyarrow as pa

from dbspark.algebra.zset import WEIGHT, ZSet

if TYPE_CHECKING:
    from dbspark.engines.spark.kernel import SparkKernel
    from dbspark.engines.spark.values import SparkZSet

MODES = ("auto", "driver", "cluster")
DRIVER_ROWS = 100_000
LOCAL_DRIVER_ROWS = 2_000_000


TAG = "__ptag"


def _wide(frames: Sequence[Any], schemas: Sequence[pl.Schema], limit: int | None) -> Any:
    """The frames as one union of the same columns: a tag, then every frame's columns side by side
    (`__p<tag>_<i>`), NULL in the other frames' rows. Plain Spark SQL (no Python worker): over frames
    built from local data (`createDataFrame`) Spark folds the projections and limits into the local
    relations, and the read is one short job of a few tasks. Built from SQL text, a few py4j calls per
    frame (each Column call would be one)."""
    from dbspark.engines.spark.convert import spark_type, sql_name

    typed = [
        [(f"__p{t}_{i}", spark_type(dt).simpleString()) for i, dt in enumerate([*sch.values(), pl.Int64()])]
        for t, sch in enumerate(schemas)
    ]
    out = None
    for t, (f, sch) in enumerate(zip(frames, schemas, strict=True)):
        if limit is not None:
            f = f.limit(limit + 1)
        cols = [f"{t} AS {TAG}"]
        for u, names in enumerate(typed):
            if u == t:
                given = [*sch, WEIGHT]
                cols += [
                    f"CAST({sql_name(c)} AS {dt}) AS {n}" for c, (n, dt) in zip(given, names, strict=True)
                ]
            else:
                cols += [f"CAST(NULL AS {dt}) AS {n}" for n, dt in names]
        branch = f.selectExpr(*cols)
        out = branch if out is None else out.union(branch)
    return out


def _frame(table: pa.Table, tag: int, schema: pl.Schema) -> pl.DataFrame:
    """Frame `tag`'s rows of the wide table, in the value's Polars types."""
    import pyarrow.compute as pc

    cols = [*schema, WEIGHT]
    mine = table.filter(pc.equal(table.column(TAG), tag)).select([f"__p{tag}_{i}" for i in range(len(cols))])
    df = pl.from_arrow(mine.rename_columns(cols))
    assert isinstance(df, pl.DataFrame)
    return df.cast({**dict(schema.items()), WEIGHT: pl.Int64()})


def mode(kernel: SparkKernel) -> str:
    m = kernel.handle.setting("placement", "auto").strip().lower()
    if m not in MODES:
        from dbspark.errors import EngineError

        # not the data's fault: the changes stay queued for a step run once the setting is fixed
        raise EngineError(f"spark.dbspark.placement is {m!r}; it is one of {', '.join(MODES)}")
    return m


def driver_rows(kernel: SparkKernel) -> int:
    """The most rows of a pushed DataFrame (or of a trace a product reads whole) that a step holds in
    the driver: `spark.dbspark.driver_rows` if set, else by the session's master (above)."""
    default = LOCAL_DRIVER_ROWS if kernel.handle.local_master else DRIVER_ROWS
    return int(kernel.handle.setting("driver_rows", str(default)))


def place(kernel: SparkKernel, batches: Sequence[SparkZSet], loop: bool = False) -> list[SparkZSet]:
    """The step's pushed values, each held in the driver or on Spark as the placement decides.

    `loop`: the values are a recursive scope's feedback. Those that stay on Spark are checkpointed
    (computed once, their plans cut): the next iteration's plans, its emptiness check and every later
    iteration would otherwise recompute them from the scope's first iteration on (measured on a
    reachability load of 20k edges on the cluster: lineage cuts of ~3 s each in its seeks)."""
    from dbspark.engines.spark.values import SparkZSet

    m = mode(kernel)
    out = list(batches)
    if m == "cluster":
        for i, b in enumerate(out):
            if b._df is None and not b.known_empty:
                # (the rows stay known too: a keyed table keeps their push order, `SparkKernel.ordinal`)
                out[i] = SparkZSet(kernel.spark, b.schema, b.frame, b.local, keys=b.keys, lineage=b.lineage)
            elif loop and b._df is not None:
                out[i] = _computed(kernel, b)
        return out
    on_spark = [i for i, b in enumerate(out) if b._df is not None]
    if not on_spark:
        return out
    limit = None if m == "driver" else driver_rows(kernel)
    wide = _wide([out[i].frame for i in on_spark], [out[i].schema for i in on_spark], limit)
    with kernel.step_settings():
        got = kernel.act(lambda: wide.toArrow())
    counts = pl.from_arrow(got.select([TAG]))[TAG].value_counts()  # type: ignore[index]
    n_of = dict(zip(counts[TAG].to_list(), counts["count"].to_list(), strict=True))
    for tag, i in enumerate(on_spark):
        if limit is not None and n_of.get(tag, 0) > limit:
            if loop:
                out[i] = _computed(kernel, out[i])
            continue  # too large for the driver: the step's work on it runs on the cluster
        b = out[i]
        placed = SparkZSet(kernel.spark, b.schema, local=ZSet(_frame(got, tag, b.schema)), keys=b.keys)
        placed.unordered = True
        out[i] = placed
        kernel.placed_to_driver += 1
    return out


def _computed(kernel: SparkKernel, b: SparkZSet) -> SparkZSet:
    """`b` computed on the cluster once (a local checkpoint: one job), its plan starting over, and its
    rows counted by the same job (so that the scope's emptiness check of its feedback runs none)."""
    from dbspark.engines.spark.values import SparkZSet

    if b._cut is not None:  # a cut due on its plan is this computation (one job, not two)
        kernel.cuts += 1
    frame, rows = kernel.computed_counted(b._df)
    b._df, b._cut, b.lineage = frame, None, 1  # (a reader of `b` reads the computed frame too)
    out = SparkZSet(kernel.spark, b.schema, frame, keys=b.keys, consolidated=b.consolidated)
    out.rows = rows if b.consolidated else None
    return out
