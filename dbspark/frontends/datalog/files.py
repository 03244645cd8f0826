"""Fact files of `.input` relations: Soufflé's `<name>.facts` (tab-separated, no header, no quoting)
next to the program, or `.input p(IO=file, filename="...", delimiter=",", headers=true, rfc4180=true,
columns="0:2")`; `.csv` files default to commas and RFC 4180 quoting, `.gz` files are decompressed,
`.parquet` / `.pq` files are read as Parquet (columns taken positionally)."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from dbspark.errors import DataError, SchemaError, UnknownNameError
from dbspark.frontends.datalog import records
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


def _columns(spec: object, where: str) -> list[int] | None:
    """Soufflé's `columns="4:7"`: the zero-based file columns the relation's attributes read."""
    if spec is None:
        return None
    try:
        return [int(c) for c in str(spec).split(":")]
    except ValueError:
        raise SchemaError(f'{where}: columns="{spec}" is not a list of column numbers like "4:7"') from None


def _read_text(path: Path, rel: Relation, where: str) -> pl.DataFrame:
    """A delimited fact file as strings, one column per attribute (Soufflé's `ReadStreamCSV`): no
    quoting unless `rfc4180=true` (`.csv` files default to it), an empty field an empty symbol."""
    params = rel.params
    csv = path.suffix.lower() == ".csv" or path.name.lower().endswith(".csv.gz")
    sep = str(params.get("delimiter", "," if csv else "\t"))
    if len(sep.encode()) != 1:
        raise SchemaError(f"{where}: delimiter {sep!r} is longer than one byte (dbspark reads one-byte ones)")
    rfc = str(params.get("rfc4180", "true" if csv else "false")).lower() == "true"
    df = pl.read_csv(
        path,
        separator=sep,
        has_header=str(params.get("headers", "false")).lower() == "true",
        infer_schema=False,
        quote_char='"' if rfc else None,
        empty_string_is_null=False,
        raise_if_empty=False,
    )
    picked = _columns(params.get("columns"), where)
    if picked is not None:
        if max(picked) >= df.width:
            raise SchemaError(f"{where}: columns {picked}, but the file has {df.width} columns")
        df = df.select(pl.nth(picked))
    if df.width != len(rel.columns) and df.height:
        raise SchemaError(f"{where}: {df.width} columns, the relation has {len(rel.columns)}")
    if not df.height:
        return pl.DataFrame(schema={c: pl.String() for c in rel.columns})
    return df.rename(dict(zip(df.columns, rel.columns, strict=True)))


def read_facts(path: Path, rel: Relation) -> pl.DataFrame:
    """The distinct rows of a fact file (gzip-compressed too), typed like the relation (unsigned
    columns checked >= 0)."""
    schema = {c: DTYPES[t] for c, t in zip(rel.columns, rel.types, strict=True)}
    where = f".input {rel.name} ({path})"
    try:
        if path.suffix.lower() in (".parquet", ".pq"):
            df = pl.read_parquet(path)
            if df.width != len(schema):
                raise SchemaError(f"{where}: {df.width} columns, the relation has {len(schema)}")
            df = df.rename(dict(zip(df.columns, schema, strict=True))).cast(schema)  # type: ignore[arg-type]
        else:
            text = _read_text(path, rel, where)
            df = text.select(
                pl.col(c) if t == pl.String() else pl.col(c).str.strip_chars().cast(t, strict=True)
                for c, t in schema.items()
            )
            for c, t in zip(rel.columns, rel.types, strict=True):
                if records.is_structured(t):  # Soufflé's text of a record, read row by row
                    vals = [records.parse(v, t, f"{where}, column {c}") for v in df[c].to_list()]
                    df = df.with_columns(pl.Series(c, vals, dtype=pl.String()))
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
