"""Views published as tables that Spark reads as usual: a folder per view, Parquet or Delta.

    tables/<view>/part-00000007.parquet      spark.read.parquet("…/tables/<view>")
    tables/<view>/_delta_log/ …              spark.read.format("delta").load("…/tables/<view>")

A table holds the view's current contents, each row as many times as its weight. After a step commits,
each view that the step changed is written: a change of inserts only (a streaming table's new rows, a
growing view's) is appended, as a Parquet file named after the step or a Delta append; another change
rewrites the table, a Parquet table as one new file named after the step (the older files then
deleted), a Delta table as a new version overwriting the last (delta-rs, an atomic commit). So a
refresh writes what changed, not the tables. `tables/_published.json` records the step the tables
were last written for and each table's rows; a run that finds it behind the committed step (it stopped
between the two) writes every table again, so the tables always end equal to the views.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from dbspark.algebra.zset import WEIGHT

MARK = "_published.json"


def rows_of(view: Any) -> pl.DataFrame:
    """A view's contents (a Z-set of positive weights) as a frame with each row repeated."""
    z = view.to_zset() if hasattr(view, "to_zset") else view
    df = z.consolidate().df
    w = df[WEIGHT].to_numpy()
    if (w < 0).any():
        raise ValueError("a view holds a row with a negative weight")
    return df.drop(WEIGHT)[np.repeat(np.arange(df.height), w)]


def read_table(folder: Path, fmt: str) -> pl.DataFrame:
    """A published table's rows, as written (`publish`)."""
    if fmt == "delta":
        from deltalake import DeltaTable

        return pl.from_arrow(DeltaTable(str(folder)).to_pyarrow_table())  # type: ignore[return-value]
    return pl.concat([pl.read_parquet(f) for f in sorted(folder.glob("*.parquet"))], how="vertical")


def applied(table: pl.DataFrame, change: Any) -> pl.DataFrame:
    """A published table's rows after a view's change (a consolidated Z-set of the view's rows): the
    table as a Z-set plus the change, each row as many times as its weight."""
    from dbspark.algebra.zset import ZSet

    cols = change.df.drop(WEIGHT).columns
    z = ZSet(table.select(cols).with_columns(pl.lit(1, pl.Int64).alias(WEIGHT)))
    return rows_of(z + ZSet(change.df))


def published(root: Path) -> tuple[int | None, dict[str, int]]:
    """The step the tables were last written for, and each table's rows then."""
    try:
        mark = json.loads((root / MARK).read_text())
        return int(mark["step"]), {str(k): int(v) for k, v in mark.get("rows", {}).items()}
    except (OSError, ValueError, KeyError, TypeError):
        return None, {}


def publish(
    root: Path, tables: Iterable[tuple[str, pl.DataFrame, str, bool]], step: int, rows: dict[str, int]
) -> None:
    """Write each (name, rows, format "parquet" | "delta", append) as of committed `step`: with
    `append`, the rows are added to the table, else they are its contents; then mark the tables written
    for the step, with each table's rows `rows`."""
    root.mkdir(parents=True, exist_ok=True)
    for name, df, fmt, append in tables:
        folder = root / name
        if fmt == "delta":
            from deltalake import write_deltalake

            if append:
                write_deltalake(str(folder), df.to_arrow(), mode="append")
            else:
                write_deltalake(str(folder), df.to_arrow(), mode="overwrite", schema_mode="overwrite")
            continue
        folder.mkdir(parents=True, exist_ok=True)
        part = folder / f"part-{step:08d}.parquet"
        tmp = folder / f".{part.name}.tmp"
        df.write_parquet(tmp)
        os.replace(tmp, part)
        if not append:
            for old in folder.iterdir():
                if old.name != part.name and old.suffix == ".parquet":
                    old.unlink()
    tmp_mark = root / f".{MARK}.tmp"
    tmp_mark.write_text(json.dumps({"step": step, "rows": rows}))
    os.replace(tmp_mark, root / MARK)
