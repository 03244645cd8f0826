"""Soufflé's output files of a Datalog program's `.output` relations, written by `dbspark run` after
its last step: `<name>.csv` (or `filename=`) under the run's `--output` directory, tab-separated (or
`delimiter=`), a header line with `headers=true`, gzip-compressed with `compress=true`; `IO=stdout`
prints the relation instead, and `.printsize` prints its size (`name<TAB>n`). Each holds the relation's current contents, one line per tuple, sorted, as
Soufflé writes them after a run."""

from __future__ import annotations

import gzip
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

Render = Callable[[str, str], str]  # a record's encoding and its type -> Soufflé's text of it


def souffle_frame(view: Any) -> pl.DataFrame:
    """The tuples of a view (a set) as a sorted frame."""
    rows = sorted(view.to_dict())
    z = view.to_zset()
    return pl.DataFrame(rows, schema=z.schema, orient="row") if rows else pl.DataFrame(schema=z.schema)


def souffle_text(frame: pl.DataFrame, params: dict[str, Any], render: Render | None = None) -> str:
    """The lines of an output file; a record or ADT column (`@records`: column -> type) in Soufflé's
    form (`[1, [2, nil]]`, `$Leaf(1)`) by `render(value, type)` (`frontends.datalog.records.render`)."""
    sep = str(params.get("delimiter", "\t"))
    lines = [sep.join(frame.columns)] if str(params.get("headers", "false")).lower() == "true" else []
    types = [params.get("@records", {}).get(c) for c in frame.columns]
    lines += [
        sep.join(
            _text(v) if t is None or render is None else render(v, t) for v, t in zip(row, types, strict=True)
        )
        for row in frame.iter_rows()
    ]
    return "".join(line + "\n" for line in lines)


def _text(v: Any) -> str:
    return repr(v) if isinstance(v, float) else str(v)


def write_souffle_outputs(
    outputs: dict[str, dict[str, Any]],
    views: dict[str, Any],
    directory: Path | None,
    render: Render | None = None,
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
        text = souffle_text(frame, params, render)
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
