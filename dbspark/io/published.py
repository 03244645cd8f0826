"""Views published as tables that Spark reads as usual: a folder per view, Parquet or Delta.

    tables/<view>/part-00000007.parquet      spark.read.parquet("…/tables/<view>")
    tables/<view>/_delta_log/ …              spark.read.format("delta").load("…/tables/<view>")

A table holds the view's current contents, each row as many times as its weight. After a step commits,
each view that the step changed is written anew: a Parquet table as one new file named after the step,
the older files then deleted; a Delta table as a new version overwriting the last (delta-rs, an atomic
commit). `tables/_published.json` records the step the tables were last written for; a run that finds
it behind the committed step (it stopped between the two) writes every table again, so the tables
always end equal to the views.
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


def published_step(root: Path) -> int | None:
    try:
        return int(json.loads((root / MARK).read_text())["step"])
    except (OSError, ValueError, KeyError):
        return None


def publish(root: Path, tables: Iterable[tuple[str, Any, str]], step: int) -> list[Path]:
    """Write each (name, view contents, format "parquet" | "delta") as of committed `step`, then mark
    the tables written for it; returns the folders written."""
    root.mkdir(parents=True, exist_ok=True)
    out = []
    for name, view, fmt in tables:
        folder = root / name
        df = rows_of(view)
        if fmt == "delta":
            from deltalake import write_deltalake

            write_deltalake(str(folder), df.to_arrow(), mode="overwrite", schema_mode="overwrite")
        else:
            folder.mkdir(parents=True, exist_ok=True)
            part = folder / f"part-{step:08d}.parquet"
            tmp = folder / f".{part.name}.tmp"
            df.write_parquet(tmp)
            os.replace(tmp, part)
            for old in folder.iterdir():
                if old.name != part.name and old.suffix == ".parquet":
                    old.unlink()
        out.append(folder)
    tmp_mark = root / f".{MARK}.tmp"
    tmp_mark.write_text(json.dumps({"step": step}))
    os.replace(tmp_mark, root / MARK)
    return out
