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
from dbspark.ir.aggregate import AggCall, AggSpec, UserAggregate, result_dtype


def flat_map_batches(batches: Iterator[pa.RecordBatch], fn: Callable[[dict], Any], in_schema: pl.Schema,
                     out_schema: pl.Schema) -> Iterator[pa.RecordBatch]:
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


def user_fold(v: Any, keys: list[str], c: AggCall, spec: AggSpec) -> Any:
    """(keys, value) of a user aggregate: its (f, g, r) folded over each group's values and weights."""
    from dbspark.engines.local.aggregate import _final_user, _fold
    from dbspark.engines.spark.convert import spark_schema, to_arrow

    ua = c.func
    assert isinstance(ua, UserAggregate)
    t = result_dtype(c, spec.input_schema)
    out_pl = pl.Schema([*[(k, spec.input_schema.get(k, pl.Int8())) for k in keys], (c.name, t)])

    def fold(table: pa.Table) -> pa.Table:
        d = table.to_pydict()
        key = tuple(d[k][0] for k in keys) if table.num_rows else ()
        value = _final_user(ua, _fold(ua, d["__x"], d[WEIGHT]))
        df = pl.DataFrame([(*key, value)], schema=out_pl, orient="row")
        return to_arrow(df)

    return v.groupBy(*keys).applyInArrow(fold, spark_schema(out_pl, weight=False))
