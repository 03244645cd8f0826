"""User Python code run by Spark's Python workers: flat_map callbacks (user aggregates fold in
`columnar.ordered_fold`, run by `cogroup`).

These are the only per-row Python on the spark engine, as on the local one; they go through Arrow
batches (`mapInArrow`), which Spark Connect supports too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import polars as pl
import pyarrow as pa

from dbspark.algebra.zset import WEIGHT
from dbspark.errors import SchemaError


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
