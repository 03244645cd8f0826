"""UNIQUE constraints on the spark engine: a table's change checked against the constraint's index.

The index of a UNIQUE constraint on columns `cols` is a trace of the table's rows with no NULL in
`cols`, projected on them (NULLs are distinct in SQL: such rows never conflict). A step's change is
consolidated on `cols`; the index's rows with the change's keys are read (a seek of the bucketed
index at the change's keys, `SparkKernel.seek`), and a key whose count would exceed 1 fails the plan (`raise_error`) when the change is
written to the index, so the check costs no extra Spark action (as `SparkKernel.insert_checked`).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce
from typing import Any

from dbspark import errors
from dbspark.algebra.zset import WEIGHT
from dbspark.engines.spark.coerce import fail
from dbspark.engines.spark.convert import col, col_list


def _F() -> Any:
    from pyspark.sql import functions

    return functions


def unique_change(snap: Any, change: Any, cols: Sequence[str], where: str) -> Any:
    """The change of the index (key columns and weight, consolidated) for the table's change `change`
    (a DataFrame with the table's columns and weight); `snap` is the index's rows at the change's keys
    (None: none)
    Evaluating it raises DataError (DuckDB's words, the key's values) at a key two rows would hold."""
    F = _F()
    cols = list(cols)
    w = F.col(WEIGHT)
    present = reduce(lambda a, b: a & b, [col(c).isNotNull() for c in cols])
    k = change.filter(present).groupBy(*col_list(cols)).agg(F.sum(WEIGHT).alias(WEIGHT)).filter(w != 0)
    zero = F.lit(0).cast("long")
    if snap is not None:
        rows = k.select(*col_list(cols), w.alias("__d"), zero.alias("__old")).unionByName(
            snap.select(*col_list(cols), zero.alias("__d"), w.alias("__old"))
        )
        j = rows.groupBy(*col_list(cols)).agg(F.sum("__d").alias(WEIGHT), F.sum("__old").alias("__old"))
        j = j.filter(w != 0)
    else:
        j = k.withColumn("__old", zero)
    parts: list[Any] = []
    for i, c in enumerate(cols):
        parts += [F.lit(f"{', ' if i else ''}{c}: "), F.coalesce(col(c).cast("string"), F.lit("None"))]
    msg = F.concat(
        F.lit(f'{where}: Duplicate key "'),
        *parts,
        F.lit(f'" violates unique constraint UNIQUE ({", ".join(cols)})'),
    )
    checked = F.when(F.col("__old") + w > 1, fail(errors.DataError, msg)).otherwise(w)
    return j.select(*col_list(cols), checked.alias(WEIGHT))
