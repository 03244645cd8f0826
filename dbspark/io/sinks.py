"""Write view changes (a Z-set frame whose `__w` column is the weight) as change batches.

The weight column is written as `weight`, so that `read_changes` reads the batch back. Files are
written atomically: to a hidden temporary name in the same directory (which `list_batches` skips),
then renamed over the target; a temporary file of an earlier writer of the same target that was
killed is deleted when the target is written again. Delta tables are appended to, and created when
absent.
"""

from __future__ import annotations

import glob
import os
import uuid
from contextlib import suppress
from pathlib import Path
from typing import Literal

import polars as pl

from dbspark.algebra.zset import WEIGHT
from dbspark.errors import SchemaError, UnsupportedError
from dbspark.io.sources import FORMATS, SUFFIXES, WEIGHT_COLUMN, PathLike

Format = Literal["parquet", "delta", "csv", "json"]


def write_changes(frame: pl.DataFrame, path: PathLike, format: Format = "parquet") -> Path:
    """Write `frame` (data columns and the `__w` weight) to `path` as `format`; returns the path written."""
    p = Path(path)
    fmt = {"jsonl": "json", "ndjson": "json"}.get(format.lower(), format.lower())
    if fmt not in FORMATS:
        raise UnsupportedError(f"{p}: unknown format {format!r}; expected one of {', '.join(FORMATS)}")
    implied = SUFFIXES.get(p.suffix.lower())
    if fmt != "delta" and implied is not None and implied != fmt:
        raise UnsupportedError(f"{p}: the suffix {p.suffix!r} says {implied}, but format={format!r}")
    if WEIGHT not in frame.columns:
        raise SchemaError(f"{p}: the frame has no weight column {WEIGHT!r}: {frame.columns}")
    if WEIGHT_COLUMN in frame.columns:
        raise SchemaError(
            f"{p}: the frame has a data column {WEIGHT_COLUMN!r}, which the weight would overwrite"
        )
    data = [c for c in frame.columns if c != WEIGHT]
    out = frame.select(*data, pl.col(WEIGHT).cast(pl.Int64).alias(WEIGHT_COLUMN))
    if fmt == "delta":
        _append_delta(out, p)
    else:
        _write_file(out, p, fmt)
    return p


def _write_file(out: pl.DataFrame, p: Path, fmt: str) -> None:
    if fmt == "csv":
        nested = [c for c, t in out.schema.items() if t.is_nested()]
        if nested:
            raise UnsupportedError(
                f"{p}: CSV cannot hold the nested column(s) {nested}; use parquet, json or delta"
            )
    p.parent.mkdir(parents=True, exist_ok=True)
    for left in p.parent.glob(f".{glob.escape(p.name)}.*.tmp"):  # of a writer of `p` that was killed
        with suppress(OSError):
            left.unlink()
    tmp = p.with_name(f".{p.name}.{uuid.uuid4().hex}.tmp")
    try:
        if fmt == "parquet":
            out.write_parquet(tmp)
        elif fmt == "csv":
            out.write_csv(tmp)
        else:
            out.write_ndjson(tmp)
        with open(tmp, "rb+") as f:  # the data is on disk before the rename makes it visible
            os.fsync(f.fileno())
        os.replace(tmp, p)
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp)
        raise


def _append_delta(out: pl.DataFrame, p: Path) -> None:
    from deltalake import write_deltalake
    from deltalake.exceptions import SchemaMismatchError

    if p.exists() and not (p / "_delta_log").is_dir() and (p.is_file() or any(p.iterdir())):
        raise UnsupportedError(f"{p}: exists and is not a Delta table; cannot append changes to it")
    try:
        write_deltalake(str(p), out.to_arrow(), mode="append")
    except SchemaMismatchError as e:
        raise SchemaError(f"{p}: the changes do not match the Delta table's schema: {e}") from e
