"""Tables with a primary key on the local engine: one step's upserts and deletes as a change of the table.

The step's pushes are a sequence of operations on keys, in push order and, within a push, in row order:
an insert (weight 1) of a key puts its row (replacing the row that was there), a delete (weight -1)
removes the key's row and is valid only if the key is there at that point. So per key, with the table's
integral looked up for the step's keys only (`TraceSnapshot.seek`):

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
from dbspark.errors import NegativeStateError
from dbspark.trace.spine import TraceSnapshot, consolidate_frame

SEQ = "__seq"


def keyed_change(
    snapshot: TraceSnapshot, ops: pl.DataFrame, schema: pl.Schema, key: Sequence[str], where: str
) -> pl.DataFrame:
    """The change (data columns and weight, consolidated) that the operations `ops` (rows with weights
    1 / -1 and their order in `SEQ`) make to a keyed table whose integral is `snapshot`.

    A delete of a key that is not there (never, or no longer, at that point of the step) raises a
    NegativeStateError naming the table and the key."""
    key = list(key)
    cols = list(schema)
    old = snapshot.seek(ops.select(key).unique()).df.select(*cols, WEIGHT)
    had = old.select(key).unique().with_columns(pl.lit(True).alias("__had"))
    s = (
        ops.sort(SEQ)
        .with_columns(
            pl.col(WEIGHT).shift(1).over(key).alias("__prev"),
            (pl.col(SEQ) == pl.col(SEQ).max().over(key)).alias("__last"),
        )
        .join(had, on=key, how="left")
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
    new = s.filter(pl.col("__last") & (pl.col(WEIGHT) == 1)).select(*cols, WEIGHT)
    retract = old.with_columns(-pl.col(WEIGHT))
    return consolidate_frame(pl.concat([retract, new], how="vertical"), [WEIGHT])


def _key_text(key: list[str], k: tuple) -> str:
    return "(" + ", ".join(f"{c}={v!r}" for c, v in zip(key, k, strict=True)) + ")"
