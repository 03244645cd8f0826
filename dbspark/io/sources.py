"""Read change batches: rows with signed integer weights, from Parquet, CSV, JSON lines or Delta tables.

A batch carries its weights in a `weight` column (integers), or in an `op` column (insert / delete,
also `+` / `-` and `i` / `d`, case-insensitive); with neither, every row is an insert (+1). A Delta
table's change data feed is read with `read_delta_cdf`. Row numbers in error messages are 0-based.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import polars as pl

from dbspark.columnar.rows import rows_to_frame
from dbspark.errors import SchemaError, UnsupportedError

WEIGHT_COLUMN = "weight"
OP_COLUMN = "op"
CDF_PROPERTY = "delta.enableChangeDataFeed"
FORMATS = ("parquet", "csv", "json", "delta")
SUFFIXES = {".parquet": "parquet", ".csv": "csv", ".json": "json", ".jsonl": "json", ".ndjson": "json"}
_ALIASES = {"jsonl": "json", "ndjson": "json"}
_OPS = {"insert": 1, "i": 1, "+": 1, "delete": -1, "d": -1, "-": -1}
_CDF_WEIGHTS = {"insert": 1, "delete": -1, "update_preimage": -1, "update_postimage": 1}
_CDF_META = ("_change_type", "_commit_version", "_commit_timestamp")

PathLike = str | os.PathLike[str]


def is_delta_table(path: PathLike) -> bool:
    """Whether `path` is a directory holding a Delta table (it has a `_delta_log` folder)."""
    return (Path(path) / "_delta_log").is_dir()


def resolve_format(path: PathLike, format: str | None = None) -> str:
    """The format of the batch at `path`: `format` if given, else from the suffix (a directory: delta)."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"no such change batch: {p}")
    if format is not None:
        fmt = _ALIASES.get(format.lower(), format.lower())
        if fmt not in FORMATS:
            raise UnsupportedError(f"{p}: unknown format {format!r}; expected one of {', '.join(FORMATS)}")
    elif p.is_dir():
        fmt = "delta"
    elif not (fmt := SUFFIXES.get(p.suffix.lower(), "")):
        raise UnsupportedError(
            f"{p}: unknown suffix {p.suffix!r}; expected {'/'.join(SUFFIXES)}, or pass format="
        )
    if fmt == "delta" and not is_delta_table(p):
        raise UnsupportedError(
            f"{p}: not a Delta table (no _delta_log folder); batches are files or Delta tables"
        )
    if fmt != "delta" and p.is_dir():
        raise UnsupportedError(f"{p}: a directory, but format {fmt!r} expects a single file")
    return fmt


def read_changes(
    path: PathLike, schema: Mapping[str, pl.DataType] | None = None, format: str | None = None
) -> tuple[pl.DataFrame, np.ndarray]:
    """The rows of the change batch at `path` and their int64 weights.

    With a `schema` the rows have exactly its columns, in its order and types (a SchemaError names the
    file, column and value otherwise); a schema column named `weight` or `op` is data, not a weight."""
    p = Path(path)
    fmt = resolve_format(p, format)
    target = None if schema is None else pl.Schema(schema)
    raw = _read_raw(p, fmt, text=target is not None)
    meta = [c for c in (WEIGHT_COLUMN, OP_COLUMN) if c in raw.columns and (target is None or c not in target)]
    if len(meta) == 2:
        raise SchemaError(f"{p}: has both a {WEIGHT_COLUMN!r} and an {OP_COLUMN!r} column; use one of them")
    if meta == [WEIGHT_COLUMN]:
        weights = parse_weights(raw[WEIGHT_COLUMN], str(p))
    elif meta == [OP_COLUMN]:
        weights = parse_ops(raw[OP_COLUMN], str(p))
    else:
        weights = np.ones(raw.height, dtype=np.int64)
    data = raw.drop(meta)
    return (data if target is None else conform(data, target, str(p))), weights


def read_delta_cdf(
    path: PathLike,
    starting_version: int,
    ending_version: int | None = None,
    schema: Mapping[str, pl.DataType] | None = None,
) -> tuple[pl.DataFrame, np.ndarray]:
    """The change data feed of the Delta table at `path` between two versions (inclusive) as rows and weights.

    insert and update_postimage weigh +1, delete and update_preimage -1; rows come in commit order."""
    import pyarrow as pa
    from deltalake import DeltaTable
    from deltalake.exceptions import DeltaError

    p = Path(path)
    resolve_format(p, "delta")
    table = DeltaTable(str(p))
    if str(table.metadata().configuration.get(CDF_PROPERTY, "false")).lower() != "true":
        raise UnsupportedError(
            f"{p}: the Delta table does not have its change data feed enabled; set the table property "
            f"{CDF_PROPERTY}=true (e.g. write_deltalake(..., configuration={{'{CDF_PROPERTY}': 'true'}}) "
            f"or ALTER TABLE ... SET TBLPROPERTIES) before the commits whose changes are to be read"
        )
    span = f"versions {starting_version}..{'latest' if ending_version is None else ending_version}"
    try:
        reader = table.load_cdf(starting_version=starting_version, ending_version=ending_version)
        arrow = pa.RecordBatchReader.from_stream(reader).read_all()
    except DeltaError as e:
        if "change data" in str(e).lower():
            raise UnsupportedError(
                f"{p}: {span} include commits made before {CDF_PROPERTY} was set; start at a later version ({e})"
            ) from e
        raise ValueError(f"{p}: cannot read the change data feed for {span}: {e}") from e
    df = pl.DataFrame(pl.from_arrow(arrow)).sort("_commit_version", maintain_order=True)
    kind = df["_change_type"].cast(pl.String)
    weights = kind.replace_strict(_CDF_WEIGHTS, default=None, return_dtype=pl.Int64)
    if weights.null_count():
        i = int(weights.is_null().arg_true()[0])
        raise SchemaError(f"{p}: row {i} of the change data feed has an unknown _change_type {kind[i]!r}")
    data = df.drop([c for c in _CDF_META if c in df.columns])
    rows = data if schema is None else conform(data, pl.Schema(schema), f"{p} (change data feed)")
    return rows, weights.to_numpy().astype(np.int64, copy=False)


def list_batches(directory: PathLike) -> list[Path]:
    """The change batches (files of a known suffix, Delta tables) in `directory`, in natural order.

    Names starting with `.` or `_` (hidden files, temporaries of `write_changes`, `_delta_log`) are skipped."""
    d = Path(directory)
    if not d.is_dir():
        raise NotADirectoryError(f"not a directory of change batches: {d}")
    found = [
        p
        for p in d.iterdir()
        if not p.name.startswith((".", "_"))
        and (is_delta_table(p) if p.is_dir() else p.suffix.lower() in SUFFIXES)
    ]
    return sorted(found, key=_natural_key)


def _natural_key(p: Path) -> tuple[list[str | int], str]:
    parts = re.split(r"(\d+)", p.name)  # text, digits, text, ...: the same type at each position
    return [int(x) if i % 2 else x.lower() for i, x in enumerate(parts)], p.name


def _read_raw(p: Path, fmt: str, text: bool) -> pl.DataFrame:
    """The file as a frame; CSV is read as text when a schema will parse it, and otherwise inferred."""
    try:
        if fmt == "parquet":
            return pl.read_parquet(p)
        if fmt == "csv":
            with open(p, "rb") as f:
                if not f.read(4096).strip():  # an empty file, as an empty JSON lines file: no rows
                    return pl.DataFrame()
            if text:
                return pl.read_csv(p, infer_schema=False)
            return pl.read_csv(p, infer_schema_length=None, schema_overrides={WEIGHT_COLUMN: pl.String})
        if fmt == "json":
            with open(p, "rb") as f:
                head = f.read(4096).lstrip()
            if not head:
                return pl.DataFrame()
            if head.startswith(b"["):  # a JSON array of objects rather than JSON lines
                return pl.read_json(p, infer_schema_length=None)
            return pl.read_ndjson(p, infer_schema_length=None)
        from deltalake import DeltaTable

        return pl.DataFrame(pl.from_arrow(DeltaTable(str(p)).to_pyarrow_table()))
    except pl.exceptions.PolarsError as e:
        raise SchemaError(f"{p}: cannot read it as {fmt}: {e}") from e


def conform(data: pl.DataFrame, schema: pl.Schema, where: str) -> pl.DataFrame:
    """`data` with exactly `schema`'s columns, in its order and types, or a SchemaError naming the fault."""
    if not data.columns and not data.height:  # an empty JSON lines file has no columns
        return pl.DataFrame(schema=schema)
    missing = [c for c in schema if c not in data.columns]
    if missing:
        raise SchemaError(
            f"{where}: missing column(s) {missing} of the schema; it has columns {data.columns}"
        )
    extra = [c for c in data.columns if c not in schema]
    if extra:
        raise SchemaError(f"{where}: column(s) {extra} are not in the schema {list(schema)}")
    parsed = pl.DataFrame([_parse_text(data[c], t, where) for c, t in schema.items()])
    return rows_to_frame(parsed, schema, where)


def _parse_text(s: pl.Series, t: pl.DataType, where: str) -> pl.Series:
    """Parse a text column into the types Polars does not cast strings to (booleans, dates and times)."""
    if s.dtype != pl.String or not isinstance(t, pl.Boolean | pl.Date | pl.Datetime | pl.Time):
        return s
    if isinstance(t, pl.Boolean):
        out = (
            s.str.strip_chars()
            .str.to_lowercase()
            .replace_strict({"true": True, "false": False}, default=None, return_dtype=pl.Boolean)
        )
    elif isinstance(t, pl.Datetime):
        out = s.str.to_datetime(time_unit=t.time_unit, time_zone=t.time_zone, strict=False)
    elif isinstance(t, pl.Date):
        out = s.str.to_date(strict=False)
    else:
        out = s.str.to_time(strict=False)
    bad = s.filter(s.is_not_null() & out.is_null())
    if bad.len():
        raise SchemaError(f"{where}: column {s.name!r} ({t}) cannot take the value {bad[0]!r}")
    return out.alias(s.name)


def parse_weights(s: pl.Series, where: str) -> np.ndarray:
    """A `weight` column as int64: integers, or floats / strings holding integral values."""
    if s.dtype == pl.String:
        text = s.str.strip_chars()
        out = text.cast(pl.Int64, strict=False).fill_null(_integral(text.cast(pl.Float64, strict=False)))
    elif s.dtype.is_float():
        out = _integral(s)
    elif s.dtype.is_integer():
        out = s.cast(pl.Int64, strict=False)
    elif s.dtype == pl.Null:
        out = s.cast(pl.Int64)
    else:
        raise SchemaError(f"{where}: the {WEIGHT_COLUMN!r} column has type {s.dtype}, expected integers")
    if out.null_count():
        i = int(out.is_null().arg_true()[0])
        what = "null" if s[i] is None else "not an integer"
        raise SchemaError(f"{where}: row {i} has weight {s[i]!r}, which is {what}")
    return out.to_numpy().astype(np.int64, copy=False)


def _integral(f: pl.Series) -> pl.Series:
    ok = f.is_finite() & (f == f.floor()) & (f.abs() < 2.0**63)
    return pl.select(pl.when(ok).then(f.cast(pl.Int64, strict=False))).to_series()


def parse_ops(s: pl.Series, where: str) -> np.ndarray:
    """An `op` column as weights: insert / + / i is +1, delete / - / d is -1 (case-insensitive)."""
    try:
        text = s.cast(pl.String)
    except pl.exceptions.PolarsError:
        raise SchemaError(
            f"{where}: the {OP_COLUMN!r} column has type {s.dtype}, expected insert/delete"
        ) from None
    out = text.str.strip_chars().str.to_lowercase().replace_strict(_OPS, default=None, return_dtype=pl.Int64)
    if out.null_count():
        i = int(out.is_null().arg_true()[0])
        raise SchemaError(
            f"{where}: row {i} has {OP_COLUMN} {s[i]!r}; expected insert or delete (also +/-, i/d)"
        )
    return out.to_numpy().astype(np.int64, copy=False)
