"""`dbspark run path/to/spark-pipeline.yml`: a Spark Declarative Pipelines project, refreshed incrementally.

Each run reads what is new in the project's sources since the last run (`frontends/sdp/sources.py`),
applies it as one step of a durable pipeline whose state is under the spec's `storage`
(`storage/dbspark/`), and writes every materialized view and streaming table that changed as a table
under `storage/tables/<name>` (`io/published.py`; Parquet, or Delta for a dataset declared `USING
delta` / `format="delta"`). A definition file that gained, lost or changed datasets since the last run
keeps the state of what is the same and backfills the rest (`docs/changing-pipelines.md`).

`--full-refresh a,b` recomputes those datasets from the sources as read so far; `--full-refresh-all`
starts over: state and tables are deleted and every source is read from its beginning, as
`spark-pipelines run --full-refresh-all` resets the graph.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dbspark.algebra.zset import WEIGHT
from dbspark.errors import UnknownNameError, UnsupportedError
from dbspark.frontends.sdp.project import Project, declare, load_project
from dbspark.io.published import applied, publish, published, read_table, rows_of
from dbspark.pipeline import Pipeline

FORMATS = ("parquet", "delta")


@dataclass
class Refresh:
    """What a run did: the step it committed, rows read per source, and per published dataset its rows
    and the rows its change held."""

    step: int
    read: dict[str, int]
    datasets: dict[str, tuple[int, int, Path | None]]


def state_dir(project: Project) -> Path:
    return project.spec.storage / "dbspark"


def tables_dir(project: Project) -> Path:
    return project.spec.storage / "tables"


def refresh(
    spec: Path,
    engine: str = "spark",
    full_refresh: list[str] | None = None,
    full_refresh_all: bool = False,
    **options: Any,
) -> Refresh:
    """One refresh of the project at `spec` (see the module's docstring)."""
    project = load_project(spec)
    formats = {n: _format(project, n) for n in project.published}
    if full_refresh_all:
        shutil.rmtree(state_dir(project), ignore_errors=True)
        shutil.rmtree(tables_dir(project), ignore_errors=True)
    with Pipeline(state_dir(project), engine=engine, **options) as p:
        declare(project, p)
        p.start()
        for name in full_refresh or []:
            if name not in project.datasets:
                raise UnknownNameError(f"--full-refresh {name}: the datasets are {sorted(project.datasets)}")
            p.refresh_view(name)
        offsets, read = {}, {}
        before = p.offsets
        for src in project.sources.values():
            got = src.changes(before.get(src.offset_key))
            if got is None:
                continue
            rows, weights, offset = got
            read[src.table] = rows.height
            if rows.height:
                p.push(src.table, rows, weights)
            offsets[src.offset_key] = offset
        last, counts = published(tables_dir(project))
        behind = last != p.steps
        backfilled = set(p.runtime.backfilled) if p.runtime is not None else set()
        changes = p.step(offsets=offsets)
        out: dict[str, tuple[int, int, Path | None]] = {}
        write = []
        for name in project.published:
            changed = p.runtime.kernel.to_local(changes[name]).consolidate() if p.runtime else None
            n_changed = len(changed) if changed is not None else 0
            folder = tables_dir(project) / name
            # (a new, changed or refreshed dataset's change is its contents, not a change of its table)
            fresh = behind or not folder.exists() or name not in counts or name in backfilled
            deletes = bool(n_changed) and changed is not None and changed.df[WEIGHT].min() < 0
            if fresh or deletes:  # rewritten whole (with deletes: the table, read here, plus its change)
                rows = rows_of(p.view(name)) if fresh else applied(read_table(folder, formats[name]), changed)
                write.append((name, rows, formats[name], False))
                counts[name] = rows.height
            elif n_changed:  # inserts only: appended
                assert changed is not None
                write.append((name, rows_of(changed), formats[name], True))
                counts[name] += int(changed.df[WEIGHT].sum())
            out[name] = (counts[name], n_changed, folder)
        publish(tables_dir(project), write, p.steps, {n: counts[n] for n in project.published})
        return Refresh(p.steps, read, out)


def _format(project: Project, name: str) -> str:
    ds = project.datasets[name]
    fmt = (ds.format or project.conf.get("dbspark.format") or "parquet").lower()
    if fmt not in FORMATS:
        raise UnsupportedError(
            f"{ds.where}: {name} USING {fmt} (dbspark writes tables as {' or '.join(FORMATS)})"
        )
    return fmt
