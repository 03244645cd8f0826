"""Tables with a primary key: one step's upserts and deletes as a change of the table, for rows held in
this process (the local engine, and the spark engine's steps in the driver).

The step's pushes are a sequence of operations on keys, in push order and, within a push, in row order:
an insert (weight 1) of a key puts its row (replacing the row that was there), a delete (weight -1)
removes the key's row and is valid only if the key is there at that point. A pushed Spark DataFrame
read into the driver has no row order: its deletes come before its inserts (a delete and an insert of a
key in one DataFrame update the row), and two inserts of one key in it are an error, as on Spark
(`engines/spark/keyed.py`). Per key, with the table's rows looked up for the step's keys only:

- a delete is valid iff the key's previous operation in the step was an insert, or, for the first
  operation, iff the key is in the table;
- the key's final row is its last operation's row if that is an insert, and absent otherwise;
- the change is -old + final (an update of a row to itself cancels; insert then delete nets out).

All of it is a sort by key and a window over the step's operations: no per-row Python.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from dbspark.algebra.zset import WEIGHT
from dbspark.errors import DataError, NegativeStateError
from dbspark.trace.spine import consolidate_frame

PUSH, POS = "__push", "__pos"


def operations(pushes: Sequence[tuple[pl.DataFrame, bool]], schema: pl.Schema) -> pl.DataFrame:
    """The step's operations (data columns, weight, and their order `PUSH`, `POS`) from its pushes in
    order, each a frame of rows with weights 1 / -1 and whether its row order is unknown (a DataFrame
    read into the driver: deletes first, then inserts)."""
    frames = [
        df.select(
            *schema,
            WEIGHT,
            pl.lit(i, pl.Int64).alias(PUSH),
            (pl.when(pl.col(WEIGHT) < 0).then(0).otherwise(1) if unordered else pl.int_range(pl.len()))
            .cast(pl.Int64)
            .alias(POS),
        )
        for i, (df, unordered) in enumerate(pushes)
        if df.height
    ]
    if not frames:
        return pl.DataFrame(
            schema=pl.Schema([*schema.items(), (WEIGHT, pl.Int64()), (PUSH, pl.Int64()), (POS, pl.Int64())])
        )
    return pl.concat(frames, how="vertical")


def keyed_change(
    old: pl.DataFrame, ops: pl.DataFrame, schema: pl.Schema, key: Sequence[str], where: str
) -> pl.DataFrame:
    """The change (data columns and weight, consolidated) that the operations `ops` (`operations`) make
    to a keyed table whose rows at the operations' keys are `old` (data columns and weight, any
    consolidation).

    A delete of a key that is not there (never, or no longer, at that point of the step) raises a
    NegativeStateError naming the table and the key; two inserts of a key in one DataFrame a DataError."""
    key = list(key)
    cols = list(schema)
    old = consolidate_frame(old.select(*cols, WEIGHT), [WEIGHT])
    had = old.select(key).unique().with_columns(pl.lit(True).alias("__had"))
    s = (
        ops.sort(PUSH, POS, maintain_order=True)
        .with_columns(
            pl.col(WEIGHT).shift(1).over(key).alias("__prev"),
            (
                (pl.col(PUSH).shift(1).over(key) == pl.col(PUSH))
                & (pl.col(POS).shift(1).over(key) == pl.col(POS))
            ).alias("__tie"),
            (pl.int_range(pl.len()).over(key) == pl.len().over(key) - 1).alias("__last"),
        )
        .join(had, on=key, how="left", nulls_equal=True)
    )
    present = (
        pl.when(pl.col("__prev").is_null())
        .then(pl.col("__had").fill_null(False))
        .otherwise(pl.col("__prev") == 1)
    )
    bad = s.filter((pl.col(WEIGHT) == -1) & ~present)
    if bad.height:
        r = bad.row(0, named=True)
        k = tuple(r[c] for c in key)
        why = "it was deleted earlier in this step" if r["__prev"] is not None else "it is not in the table"
        raise NegativeStateError(f"{where}: delete of key {_key_text(key, k)} that is not there ({why})")
    tie = s.filter((pl.col(WEIGHT) == 1) & (pl.col("__prev") == 1) & pl.col("__tie").fill_null(False))
    if tie.height:
        k = tuple(tie.row(0, named=True)[c] for c in key)
        raise DataError(
            f"{where}: one pushed DataFrame inserts key {_key_text(key, k)} twice (a DataFrame has no row "
            "order: push the rows in order, or one per key)"
        )
    new = s.filter(pl.col("__last") & (pl.col(WEIGHT) == 1)).select(*cols, WEIGHT)
    retract = old.with_columns(-pl.col(WEIGHT))
    return consolidate_frame(pl.concat([retract, new], how="vertical"), [WEIGHT])


def _key_text(key: list[str], k: tuple) -> str:
    """`(a=7, b='q')`: the key's columns and values as Python shows them (as on Spark)."""
    return "(" + ", ".join(f"{c}={v!r}" for c, v in zip(key, k, strict=True)) + ")"
