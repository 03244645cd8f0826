"""SDP itself as the oracle of an SDP project: `spark-pipelines run` (from pip's pyspark) on the same
sources, its materialized views against the tables `dbspark run spec.yml` wrote.

`spark-pipelines` here has no Delta reader (delta-spark's jars are not reachable from this machine), so
it runs on a copy of the project in which each Delta source is its current version written as Parquet
(`delta.\\`p\\`` and `format("delta")` of it read that copy) and every other path is the original's:
the same rows; its storage is the copy's, an absolute `file://` URI as `spark-pipelines` requires. Each
run is a full recompute (`spark-pipelines` refreshes a materialized view by
recomputing it; the copy starts without tables or state).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import polars as pl

from dbspark.frontends.sdp.project import load_project
from dbspark.testing.sql_oracle import compare_frames


def oracle_copy(project: Path, dest: Path) -> Path:
    """A copy of the project at `project` (its spec and library files) for `spark-pipelines`, reading
    the same sources, Delta ones as Parquet snapshots; returns the copy's spec."""
    from deltalake import DeltaTable

    from dbspark.frontends.sdp.project import resolve
    from dbspark.io.sources import is_delta_table

    proj = load_project(_spec(project))
    resolve(proj)  # (opens its sources)
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    spec = proj.spec
    import yaml

    body = yaml.safe_load(spec.path.read_text())
    body["storage"] = f"file://{dest.resolve() / 'storage'}"  # (spark-pipelines wants an absolute URI)
    (dest / spec.path.name).write_text(yaml.safe_dump(body))
    replace: dict[str, str] = {}
    for lib in spec.files():
        rel = lib.relative_to(spec.root)
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(lib, dest / rel)
    for src in proj.sources.values():
        if is_delta_table(src.path):
            snap = dest / "_snapshots" / src.table
            snap.mkdir(parents=True)
            pl.DataFrame(pl.from_arrow(DeltaTable(str(src.path)).to_pyarrow_table())).write_parquet(
                snap / "part-0.parquet"
            )
            replace[str(src.path)] = str(snap)
    for lib in dest.rglob("*"):
        if lib.suffix not in (".sql", ".py"):
            continue
        text = lib.read_text()
        for original, copy in replace.items():
            local = os.path.relpath(original, spec.root)
            for spelled in (original, local, f"./{local}"):
                text = text.replace(f"delta.`{spelled}`", f"parquet.`{copy}`")
                text = text.replace(f'format("delta").load("{spelled}")', f'format("parquet").load("{copy}")')
        lib.write_text(text)
    data = spec.root / "data"
    if data.exists():
        (dest / "data").symlink_to(data, target_is_directory=True)
    return dest / spec.path.name


def _spec(project: Path) -> Path:
    from dbspark.frontends.sdp.spec import find

    return project if project.is_file() else find(project)


def run_sdp(spec: Path, timeout: float = 900, log: bool = False) -> dict[str, Any]:
    """Run `spark-pipelines run` on `spec` (fresh: its tables and storage deleted first) and read back
    every published dataset (`spark-warehouse/<name>`, Parquet); with `log`, its output too, as
    `__log__`."""
    root = spec.parent
    for d in ("spark-warehouse", "storage", "metastore_db"):
        shutil.rmtree(root / d, ignore_errors=True)
    env = dict(os.environ, PYSPARK_PYTHON=shutil.which("python3") or "python3")
    got = subprocess.run(
        ["spark-pipelines", "run", "--spec", str(spec)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if got.returncode != 0 or "Run is COMPLETED" not in got.stdout + got.stderr:
        raise AssertionError(
            f"spark-pipelines run failed ({got.returncode}):\n{got.stdout[-3000:]}\n{got.stderr[-3000:]}"
        )
    out: dict[str, Any] = {}
    for name in load_project(spec).published:
        folder = root / "spark-warehouse" / name
        files = sorted(folder.glob("*.parquet"))
        out[name] = pl.concat([pl.read_parquet(f) for f in files]) if files else pl.DataFrame()
    if log:
        out["__log__"] = got.stdout + got.stderr
    return out


def read_published(project: Path) -> dict[str, pl.DataFrame]:
    """The tables `dbspark run` wrote for the project's published datasets (Parquet or Delta)."""
    from dbspark.io.sources import is_delta_table

    proj = load_project(_spec(project))
    out = {}
    for name in proj.published:
        folder = proj.spec.storage / "tables" / name
        if is_delta_table(folder):
            from deltalake import DeltaTable

            out[name] = pl.DataFrame(pl.from_arrow(DeltaTable(str(folder)).to_pyarrow_table()))
        else:
            out[name] = pl.concat([pl.read_parquet(f) for f in sorted(folder.glob("*.parquet"))])
    return out


def assert_same_tables(ours: dict[str, pl.DataFrame], sdp: dict[str, pl.DataFrame], what: str) -> None:
    """Every dataset's table equals SDP's, as multisets (`compare_frames`)."""
    assert sorted(ours) == sorted(sdp), (sorted(ours), sorted(sdp))
    errors = []
    for name in sorted(ours):
        msg = compare_frames(ours[name], sdp[name], f"{name} {what}")
        if msg is not None:
            errors.append(msg)
    assert not errors, "\n".join(errors)
