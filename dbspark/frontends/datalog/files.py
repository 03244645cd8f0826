"""Fact files of `.input` relations: Soufflé's `<name>.facts` (tab-separated, no header) next to the
program, or `.input p(IO=file, filename="...", delimiter=",", headers=true)`; `.csv` files default to
commas, `.parquet` / `.pq` files are read as Parquet (columns taken positionally)."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from dbspark.errors import DataError, SchemaError, UnknownNameError
from dbspark.frontends.datalog.check import DTYPES, Relation


def fact_file(rel: Relation, base_dir: Path | None) -> Path | None:
    """The file an `.input` relation loads, or None (the pipeline feeds it)."""
    name = rel.params.get("filename")
    if name is None:
        if base_dir is None:
            return None
        p = base_dir / f"{rel.name}.facts"
        if p.exists():
            return p
        if "IO" in rel.params:
            raise UnknownNameError(f".input {rel.name}(IO=file): no file {p}")
        return None
    p = Path(name)
    if not p.is_absolute() and base_dir is not None:
        p = base_dir / p
    if not p.exists():
        raise UnknownNameError(f".input {rel.name}: fact file {p} does not exist")
    return p


def read_facts(path: Path, rel: Relation) -> pl.DataFrame:
    """The distinct rows of a fact file, typed like the relation (unsigned columns checked >= 0)."""
    schema = {c: DTYPES[t] for c, t in zip(rel.columns, rel.types, strict=True)}
    where = f".input {rel.name} ({path})"
    try:
        if path.suffix.lower() in (".parquet", ".pq"):
            df = pl.read_parquet(path)
            if df.width != len(schema):
                raise SchemaError(f"{where}: {df.width} columns, the relation has {len(schema)}")
            df = df.rename(dict(zip(df.columns, schema, strict=True))).cast(schema)  # type: ignore[arg-type]
        else:
            sep = rel.params.get("delimiter", "," if path.suffix.lower() == ".csv" else "\t")
            headers = str(rel.params.get("headers", "false")).lower() == "true"
            df = pl.read_csv(
                path,
                separator=sep,
                has_header=headers,
                new_columns=list(schema),
                schema=schema,
                quote_char='"' if sep == "," else None,
            )
    except (pl.exceptions.ComputeError, pl.exceptions.InvalidOperationError, pl.exceptions.ShapeError) as e:
        raise DataError(
            f"{where}: cannot read the facts as {rel.columns} of types {rel.types}: {e}"
        ) from None
    for c, t in zip(rel.columns, rel.types, strict=True):
        if t == "unsigned" and df.height and (df[c].min() or 0) < 0:  # type: ignore[operator]
            raise DataError(f"{where}: column {c} is unsigned but holds {df[c].min()!r}")
        if df[c].null_count():
            raise DataError(f"{where}: column {c} has an empty or missing value")
    return df.unique(maintain_order=True)
