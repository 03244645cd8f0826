"""Soufflé's output files of a Datalog program's `.output` relations, written by `dbspark run` after
its last step: `<name>.csv` (or `filename=`) under the run's `--output` directory, tab-separated (or
`delimiter=`), a header line with `headers=true`, gzip-compressed with `compress=true`; `IO=stdout`
prints the relation instead, and `.printsize` prints its size (`name<TAB>n`). Each holds the relation's current contents, one line per tuple, sorted, as
Soufflé writes them after a run."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import polars as pl


def souffle_frame(view: Any) -> pl.DataFrame:
    """The tuples of a view (a set) as a sorted frame."""
    rows = sorted(view.to_dict())
    z = view.to_zset()
    return pl.DataFrame(rows, schema=z.schema, orient="row") if rows else pl.DataFrame(schema=z.schema)


def souffle_text(frame: pl.DataFrame, params: dict[str, Any]) -> str:
    sep = str(params.get("delimiter", "\t"))
    lines = [sep.join(frame.columns)] if str(params.get("headers", "false")).lower() == "true" else []
    lines += [sep.join(_text(v) for v in row) for row in frame.iter_rows()]
    return "".join(line + "\n" for line in lines)


def _text(v: Any) -> str:
    return repr(v) if isinstance(v, float) else str(v)


def write_souffle_outputs(
    outputs: dict[str, dict[str, Any]], views: dict[str, Any], directory: Path | None
) -> list[str]:
    """Write (or print, for IO=stdout) each `.output` relation; returns what was written, for the log.
    Files go under `directory` (none written without one)."""
    done = []
    for name, params in outputs.items():
        frame = souffle_frame(views[name])
        if params.get("printsize") == "true":
            print(f"{name}\t{frame.height}", flush=True)
            done.append(f"{name}: its size")
        if params.get("IO", "file") == "none":  # (.printsize alone)
            continue
        text = souffle_text(frame, params)
        if params.get("IO", "file") == "stdout":
            print(f"---------------\n{name}\n===============\n{text}===============", flush=True)
            done.append(f"{name}: stdout")
            continue
        if directory is None:
            continue
        target = directory / str(params.get("filename", f"{name}.csv"))
        target.parent.mkdir(parents=True, exist_ok=True)
        if str(params.get("compress", "false")).lower() == "true":
            target.write_bytes(gzip.compress(text.encode()))
        else:
            target.write_text(text)
        done.append(f"{name}: {target}")
    return done
