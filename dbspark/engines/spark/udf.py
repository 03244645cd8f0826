"""User Python code run by Spark's Python workers: flat_map callbacks and user aggregates (f, g, d, r).

These are the only per-row Python on the spark engine, as on the local one; they go through Arrow
batches (`mapInArrow`, `applyInArrow`), which Spark Connect supports too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import polars as pl
import pyarrow as pa

from dbspark.algebra.zset import WEIGHT
from dbspark.errors import SchemaError
from dbspark.ir.aggregate import UserAggregate


def flat_map_batches(
    batches: Iterator[pa.RecordBatch], fn: Callable[[dict], Any], in_schema: pl.Schema, out_schema: pl.Schema
) -> Iterator[pa.RecordBatch]:
    from dbspark.engines.spark.convert import to_arrow

    cols = list(out_schema)
    for b in batches:
        rows: list[tuple] = []
        ws: list[int] = []
        data = [c for c in in_schema]
        for r in b.to_pylist():
            w = r[WEIGHT]
            for out in fn({c: r[c] for c in data}) or ():
                t = tuple(out[c] for c in cols) if isinstance(out, dict) else tuple(out)
                if len(t) != len(cols):
                    raise SchemaError(f"flat_map produced {t!r}, expected {len(cols)} values {cols}")
                rows.append(t)
                ws.append(w)
        df = pl.DataFrame(rows, schema=out_schema, orient="row") if rows else pl.DataFrame(schema=out_schema)
        df = df.with_columns(pl.Series(WEIGHT, ws, dtype=pl.Int64))
        yield from to_arrow(df).to_batches()


def user_fold_entries(ua: UserAggregate, entries: list | None, t: pl.DataType) -> Any:
    """A user aggregate's value over one group's (x, w) entries sorted by x (an x may repeat: its
    count is the sum of its weights), as the local engine folds it, converted to the result type."""
    xs: list[Any] = []
    ws: list[int] = []
    for e in entries or ():
        x, w = e[0], e[1]
        if xs and xs[-1] == x:
            ws[-1] += w
        else:
            xs.append(x)
            ws.append(w)
    value = ua.final(ua.fold(xs, ws))
    if value is None:
        return None
    return pl.DataFrame([(value,)], schema={"v": t}, orient="row")["v"][0]
