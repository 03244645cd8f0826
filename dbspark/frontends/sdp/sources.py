"""The files an SDP project reads by path, as tables whose changes each run reads.

- **Delta** (`delta.\\`path\\``, `format("delta")`): the first run reads the table's current version
  whole; each later run reads its change data feed since the version read last (inserts, deletes,
  updates as pre- and post-images: `io/sources.read_delta_cdf`), which must be enabled
  (`delta.enableChangeDataFeed`) before those commits.
- **Parquet, JSON lines, CSV** (`parquet.\\`path\\``, ...): a folder of files (or one file) read as Spark
  reads a folder (files whose names start with `_` or `.` left out); each run reads the files that are
  new since the last run. Files are append-only: one removed or changed since it was read is an
  `UnsupportedError` naming it (use a Delta source for deletes and updates).

What a run has read (the Delta version, the files and their sizes) is its *offset*, committed with the
run's step (`Pipeline.step(offsets=...)`), so a run that fails reads the same changes again. Column
types are the files' own, widened as dbspark's SQL types are (integers to BIGINT, floats to DOUBLE);
a nested type is an `UnsupportedError` naming the column.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from dbspark.errors import SchemaError, UnsupportedError

FORMATS = ("delta", "parquet", "json", "csv")


@dataclass
class Source:
    format: str
    path: Path
    table: str
    schema: pl.Schema
    options: dict[str, str]

    @property
    def offset_key(self) -> str:
        return f"source:{self.table}"

    def changes(self, offset: Any) -> tuple[pl.DataFrame, np.ndarray, Any] | None:
        """(rows, weights, new offset) of what is new since `offset` (None: never read), or None."""
        if self.format == "delta":
            return self._delta(offset)
        return self._files(offset)

    # ---- Delta -------------------------------------------------------------------------------------
    def _delta(self, offset: Any) -> tuple[pl.DataFrame, np.ndarray, Any] | None:
        from deltalake import DeltaTable

        from dbspark.io.sources import read_delta_cdf

        table = DeltaTable(str(self.path))
        latest = table.version()
        if offset is None:
            rows = _conform(pl.DataFrame(pl.from_arrow(table.to_pyarrow_table())), self.schema, self.path)
            return rows, np.ones(rows.height, dtype=np.int64), latest
        if latest <= int(offset):
            return None
        rows, weights = read_delta_cdf(self.path, int(offset) + 1, latest, self.schema)
        return rows, weights, latest

    # ---- files -------------------------------------------------------------------------------------
    def files(self) -> dict[str, int]:
        """The data files now: relative name -> size."""
        if self.path.is_file():
            return {self.path.name: self.path.stat().st_size}
        if not self.path.is_dir():
            raise SchemaError(f"source {self.format}.`{self.path}`: no such file or folder")
        out = {}
        for p in sorted(self.path.rglob("*")):
            rel = p.relative_to(self.path)
            if any(part.startswith(("_", ".")) for part in rel.parts) or not p.is_file():
                continue
            if len(rel.parts) > 1:
                raise UnsupportedError(
                    f"source {self.format}.`{self.path}`: files in sub-folders ({rel}: a partitioned table)"
                )
            out[str(rel)] = p.stat().st_size
        return out

    def _files(self, offset: Any) -> tuple[pl.DataFrame, np.ndarray, Any] | None:
        now = self.files()
        seen: dict[str, int] = dict(offset or {})
        for name, size in seen.items():
            if name not in now:
                raise UnsupportedError(
                    f"source {self.format}.`{self.path}`: the file {name} was read by an earlier run and is "
                    "gone (a file source only grows: use a Delta source for deletes)"
                )
            if now[name] != size:
                raise UnsupportedError(
                    f"source {self.format}.`{self.path}`: the file {name} changed since an earlier run read "
                    "it (a file source only grows: add files, or use a Delta source)"
                )
        new = [n for n in now if n not in seen]
        if not new and offset is not None:
            return None
        frames = [
            _conform(
                self._read(self.path / n if self.path.is_dir() else self.path), self.schema, self.path / n
            )
            for n in new
        ]
        rows = pl.concat(frames) if frames else pl.DataFrame(schema=self.schema)
        return rows, np.ones(rows.height, dtype=np.int64), now

    def _read(self, f: Path) -> pl.DataFrame:
        if self.format == "parquet":
            return pl.read_parquet(f)
        if self.format == "json":
            return pl.read_ndjson(f)
        header = self.options.get("header", "false").lower() == "true"
        df = pl.read_csv(f, has_header=header, infer_schema_length=10_000)
        return df if header else df.rename({c: f"_c{i}" for i, c in enumerate(df.columns)})


def open_source(ref: Any, path: Path, taken: set[str], where: str) -> Source:
    """The source of a reference: its table's name (after its folder, made apart from `taken`) and its
    columns (read from the files)."""
    import re

    fmt = ref.format
    if fmt not in FORMATS:
        raise UnsupportedError(f"{where}: a source of format {fmt!r} (dbspark reads {', '.join(FORMATS)})")
    opts = dict(ref.options)
    stem = re.sub(r"\W+", "_", path.stem if path.is_file() else path.name).strip("_").lower() or "source"
    name, k = stem, 2
    while name in taken:
        name, k = f"{stem}_{k}", k + 1
    src = Source(fmt, path, name, pl.Schema(), opts)
    src.schema = _schema(src, where)
    return src


def _schema(src: Source, where: str) -> pl.Schema:
    if src.format == "delta":
        from deltalake import DeltaTable

        from dbspark.io.sources import is_delta_table

        if not is_delta_table(src.path):
            raise SchemaError(f"{where}: delta.`{src.path}` is not a Delta table")
        import pyarrow as pa

        arrow = pa.schema(DeltaTable(str(src.path)).schema().to_arrow())
        raw = pl.DataFrame(pl.from_arrow(arrow.empty_table())).schema
    else:
        files = src.files()
        if not files:
            raise SchemaError(
                f"{where}: {src.format}.`{src.path}` has no files, so its columns are not known (add one)"
            )
        first = src.path / next(iter(files)) if src.path.is_dir() else src.path
        raw = src._read(first).schema
    return pl.Schema([(c, _widened(t, src, c)) for c, t in raw.items()])


def _widened(t: pl.DataType, src: Source, c: str) -> pl.DataType:
    if t.is_integer():
        return pl.Int64()
    if t in (pl.Float32, pl.Float64):
        return pl.Float64()
    if isinstance(t, pl.Datetime):
        return pl.Datetime("us", t.time_zone and "UTC")
    if isinstance(t, (pl.Decimal, pl.Date, pl.Boolean, pl.String)):
        return t
    if t in (pl.String, pl.Utf8):
        return pl.String()
    raise UnsupportedError(
        f"source {src.format}.`{src.path}`: column {c} of type {t} (dbspark reads flat columns)"
    )


def _conform(df: pl.DataFrame, schema: pl.Schema, where: Path) -> pl.DataFrame:
    missing = [c for c in schema if c not in df.columns]
    if missing:
        raise SchemaError(f"{where}: the columns {missing} of the source are missing")
    return df.select([pl.col(c).cast(t) for c, t in schema.items()])
