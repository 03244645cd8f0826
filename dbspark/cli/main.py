"""The `dbspark` command: run a pipeline over a directory of change batches, explain its circuits.

    dbspark run PIPELINE --changes DIR [--engine spark|local] [--state DIR] [--output DIR] [--follow]

PIPELINE is a Python file with a function `define(p)` declaring tables and views on the pipeline `p`
(SQL and Datalog files come with their front ends). DIR holds one sub-directory per step, in natural
order (`1/`, `2/`, ..., `10/`); each holds one change batch per table, named after it
(`orders.parquet`, `orders.csv`, `orders.json`, or a Delta table `orders/`), with a `weight` or an
`op` (insert/delete) column. With `--state` the run is durable: rerun after a crash, it skips the
committed steps and goes on. With `--output` every view's change of step N is written to
`OUTPUT/<view>/step-N.parquet` (a rerun replaces, never duplicates). With `--follow` the run goes on
as new step directories appear (`cli/follow.py`), until Ctrl-C stops it at a step boundary.

DIR may instead hold Delta tables named after the tables, with their change data feeds enabled
(`io/feeds.py`): a step takes every commit since the last step (one step over all of them without
`--follow`), and the versions it read are committed with it.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from dbspark import faults
from dbspark.cli.follow import follow as follow_changes
from dbspark.cli.follow import next_commits, next_directory
from dbspark.errors import DbsparkError, UnknownNameError, UnsupportedError
from dbspark.io.feeds import DeltaFeed, is_delta_feed
from dbspark.pipeline import Pipeline

app = typer.Typer(
    add_completion=False, no_args_is_help=True, help="Incremental view maintenance on DBSP, on Spark."
)
console = Console()
err = Console(stderr=True)
PIPELINE_HELP = (
    "the pipeline: a .sql file (CREATE TABLE / CREATE VIEW), a .dl Datalog program, a .py file with define(p), "
    "or a Spark Declarative Pipelines spec (spark-pipeline.yml)"
)


def _version(show: bool) -> None:
    if show:
        from dbspark import __version__

        console.print(f"dbspark {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="print the version and exit")
    ] = False,
) -> None:
    """Incremental view maintenance on DBSP, on Spark."""


DIALECT_HELP = "the SQL dialect of a .sql pipeline: duckdb, or spark (Spark 4's ANSI semantics)"


def load_pipeline(path: Path, p: Pipeline, dialect: str = "duckdb") -> None:
    """Declare the tables and views of the pipeline file `path` on `p` (a .sql file in `dialect`)."""
    if path.suffix == ".dl":  # a Datalog program; its fact files are looked up next to it
        from dbspark.frontends.datalog import load

        load(p, path.read_text(), base_dir=path.parent, max_iterations=p.recursion_limit)
        return
    if path.suffix == ".sql":
        p.sql(path.read_text(), dialect=dialect)
        return
    from dbspark.frontends.sdp.spec import is_spec

    if is_spec(path):  # a Spark Declarative Pipelines project (`frontends/sdp/`)
        from dbspark.frontends.sdp.project import declare, load_project

        declare(load_project(path), p)
        return
    if path.suffix != ".py":
        raise DbsparkError(
            f"{path}: a pipeline file is a Python file with define(p), a .sql or a .dl file, or a Spark "
            "Declarative Pipelines spec (spark-pipeline.yml)"
        )
    spec = importlib.util.spec_from_file_location(f"dbspark_pipeline_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise DbsparkError(f"cannot load pipeline file {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    define = getattr(module, "define", None)
    if not callable(define):
        raise DbsparkError(f"{path}: defines no function define(p) declaring the pipeline's tables and views")
    define(p)


def step_dirs(changes: Path) -> list[Path]:
    if not changes.is_dir():
        raise DbsparkError(f"--changes {changes}: not a directory")
    dirs = [d for d in changes.iterdir() if d.is_dir() and not d.name.startswith((".", "_"))]

    def key(p: Path) -> list[Any]:
        return [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", p.name)]

    return sorted(dirs, key=key)


def push_batch(p: Pipeline, step: Path) -> int:
    """Queue every table's change batch found in the step directory `step`; returns their rows."""
    from dbspark.io import list_batches, read_changes

    n = 0
    for f in list_batches(step):
        table = f.stem if f.is_file() else f.name
        if table not in p.tables:
            raise UnknownNameError(
                f"{f}: no table {table!r} in the pipeline; its tables are {sorted(p.tables)}"
            )
        schema = p.circuit.nodes[p.circuit.inputs[table]].shape.schema
        rows, weights = read_changes(f, schema)
        n += rows.height
        if rows.height:
            try:
                p.push(table, rows, weights)
            except DbsparkError as e:  # (a row the table refuses: named with its file)
                e.args = (f"{f}: {e.args[0] if e.args else e}", *e.args[1:])
                raise
    return n


def push_changes(p: Pipeline, root: Path | None, got: dict[str, Any]) -> int:
    """Queue each table's changes read from a feed ({table: (rows, weights)}); returns their rows."""
    n = 0
    for table, (rows, weights) in got.items():
        n += rows.height
        if rows.height:
            try:
                p.push(table, rows, weights)
            except DbsparkError as e:  # (a row the table refuses: named with its Delta table)
                e.args = (f"{root}/{table} (change data feed): {e.args[0] if e.args else e}", *e.args[1:])
                raise
    return n


def show_changes(step: int, changes: dict[str, Any], limit: int) -> None:
    for view, z in changes.items():
        rows = z.to_zset().to_rows()
        if not rows:
            continue
        console.print(f"[bold]step {step}[/]: {view}, {len(rows)} changed row(s)")
        rows.sort(key=lambda rw: (rw[1], tuple(str(x) for x in rw[0])))
        t = Table()
        for c in [*z.columns, "weight"]:
            t.add_column(c)
        for r, w in rows[:limit]:
            t.add_row(*[str(x) for x in r], f"{w:+d}")
        if len(rows) > limit:
            t.add_row(*["…"] * (len(z.columns) + 1))
        console.print(t)


@app.command()
def run(
    pipeline: Annotated[Path, typer.Argument(help=PIPELINE_HELP, exists=True, dir_okay=False)],
    changes: Annotated[
        Path | None,
        typer.Option(
            "--changes",
            help="directory of steps of change batches (none: one step over the program's own facts)",
            exists=True,
            file_okay=False,
        ),
    ] = None,
    engine: Annotated[str, typer.Option(help="spark (default) or local")] = "spark",
    state: Annotated[
        Path | None, typer.Option(help="directory for durable state (resume after a crash)")
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(help="write each view's changes here, per step (and a Datalog program's .output files)"),
    ] = None,
    master: Annotated[
        str | None, typer.Option(help="Spark master URL (default: active session or local[*])")
    ] = None,
    show: Annotated[
        int, typer.Option(help="print up to this many changed rows per view and step (0: none)")
    ] = 10,
    memory_limit: Annotated[
        str | None,
        typer.Option(help="the local engine's ceiling on its state, e.g. 8GiB (a step past it is rejected)"),
    ] = None,
    follow: Annotated[
        bool,
        typer.Option(
            help="keep stepping as new step directories (or Delta commits) appear in --changes; Ctrl-C stops "
            "at a step boundary"
        ),
    ] = False,
    poll: Annotated[float, typer.Option(help="with --follow: seconds between looks for a new step")] = 1.0,
    metrics: Annotated[
        bool,
        typer.Option(
            help="after the run, a table per operator of the steps run: time, rows in and out, state rows "
            "and bytes (`explain` numbers the operators)"
        ),
    ] = False,
    dialect: Annotated[str, typer.Option(help=DIALECT_HELP)] = "duckdb",
    full_refresh: Annotated[
        list[str] | None,
        typer.Option(
            help="a Spark Declarative Pipelines project: recompute these datasets (comma-separated)"
        ),
    ] = None,
    full_refresh_all: Annotated[
        bool, typer.Option(help="a Spark Declarative Pipelines project: start over (state and tables)")
    ] = False,
) -> None:
    """Run PIPELINE over the change batches in --changes, one step per sub-directory (without
    --changes: one step, over the facts the pipeline itself loads, as `souffle prog.dl` runs). PIPELINE
    may be a Spark Declarative Pipelines spec (spark-pipeline.yml): one incremental refresh of its
    materialized views over what is new in its sources (`cli/sdp.py`)."""
    from dbspark.frontends.sdp.spec import is_spec

    if is_spec(pipeline):
        run_sdp(pipeline, engine, master, full_refresh or [], full_refresh_all)
        return
    if full_refresh or full_refresh_all:
        fail(
            DbsparkError(
                "--full-refresh and --full-refresh-all refresh a Spark Declarative Pipelines project"
            )
        )
    if follow and changes is None:
        fail(DbsparkError("--follow needs --changes: the directory new step directories appear in"))
    try:
        with Pipeline(state, engine=engine, master=master, memory_limit=memory_limit, metrics=metrics) as p:
            load_pipeline(pipeline, p, dialect)
            feed = (
                DeltaFeed(changes, tuple(p.tables))
                if changes is not None and is_delta_feed(changes)
                else None
            )
            steps = step_dirs(changes) if changes is not None and feed is None else []
            done = p.steps
            if done:
                console.print(f"resuming after step {done} (committed in {state})")
            cols = (
                TextColumn("[progress.description]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
            )
            with Progress(*cols, console=err, transient=True, disable=not err.is_terminal) as bar:
                task = bar.add_task("steps", total=len(steps), completed=min(done, len(steps)))
                # with --follow the batches already there are stepped by `follow_changes` too, under its
                # Ctrl-C handler (a Ctrl-C while they run stops at a step boundary as well)
                for i, d in enumerate([] if follow else steps[done:], start=done):
                    bar.update(task, description=f"step {i + 1} ({d.name})")
                    push_batch(p, d)
                    out = p.step(
                        sink=(lambda n, ch: write_outputs(output, n, ch)) if output is not None else None
                    )
                    if show:
                        show_changes(i + 1, out, show)
                    bar.advance(task)
            sink = (lambda n, ch: write_outputs(output, n, ch)) if output is not None else None

            def run_dir(d: Path) -> int:
                rows = push_batch(p, d)
                out = p.step(sink=sink)
                if show:
                    show_changes(p.steps, out, show)
                return rows

            def run_changes(got: dict[str, Any], offsets: dict[str, Any]) -> int:
                rows = push_changes(p, changes, got)
                out = p.step(sink=sink, offsets=offsets)
                if show:
                    show_changes(p.steps, out, show)
                return rows

            if follow:
                assert changes is not None
                nxt = (
                    next_commits(p, feed, run_changes)
                    if feed is not None
                    else next_directory(p, changes, step_dirs, run_dir)
                )
                follow_changes(p, str(changes), nxt, err, poll)
            elif feed is not None:  # one step over every commit not read yet
                got = next_commits(p, feed, run_changes)()
                if got is not None:
                    got[2]()
            elif not steps and not done:  # no change batches: a step over the facts the pipeline holds
                out = p.step(
                    sink=(lambda n, ch: write_outputs(output, n, ch)) if output is not None else None
                )
                if show:
                    show_changes(1, out, show)
            if p.datalog_outputs:  # a Datalog program's .output files, as Soufflé writes them
                from dbspark.frontends.datalog.records import render
                from dbspark.io.souffle import write_souffle_outputs

                views = {v: p.view(v) for v in p.datalog_outputs}
                for line in write_souffle_outputs(p.datalog_outputs, views, output, render):
                    err.print(f"wrote {line}", soft_wrap=True, highlight=False)
            summary = Table(title=f"views after {p.steps} steps", title_justify="left")
            summary.add_column("view")
            summary.add_column("rows", justify="right")
            for v in p.views:
                summary.add_row(v, str(sum(w for _, w in p.view(v).to_zset().to_rows())))
            console.print(summary)
            if metrics:
                console.print(metrics_table(p.metrics()))
    except KeyboardInterrupt:
        err.print("[bold red]interrupted:[/] the step in progress was rolled back; committed steps are kept")
        raise typer.Exit(130) from None
    except Exception as e:
        fail(e)


def run_sdp(
    spec: Path, engine: str, master: str | None, full_refresh: list[str], full_refresh_all: bool
) -> None:
    """One refresh of an SDP project, and a table of its published datasets."""
    from dbspark.cli.sdp import refresh

    names = [n.strip() for item in full_refresh for n in item.split(",") if n.strip()]
    try:
        r = refresh(spec, engine=engine, full_refresh=names, full_refresh_all=full_refresh_all, master=master)
    except KeyboardInterrupt:
        err.print(
            "[bold red]interrupted:[/] the refresh in progress was rolled back; committed refreshes are kept"
        )
        raise typer.Exit(130) from None
    except Exception as e:
        fail(e)
    for table, n in r.read.items():
        err.print(f"read {n} row(s) new in source {table}", highlight=False)
    t = Table(title=f"{spec.parent.name}: refresh {r.step}", title_justify="left")
    for c, right in [("dataset", False), ("rows", True), ("changed rows", True), ("table", False)]:
        t.add_column(c, justify="right" if right else "left")
    for name, (rows, changed, folder) in r.datasets.items():
        t.add_row(name, str(rows), str(changed), str(folder) if folder is not None else "")
    console.print(t)


def metrics_table(m: Any) -> Table:
    """Per operator, over the steps run: time, rows in and out, and its state after the last step."""
    import polars as pl

    t = Table(title=f"operators over {m['step'].n_unique()} steps", title_justify="left")
    for c, right in [("node", False), ("operator", False), ("ms", True), ("rows in", True)]:
        t.add_column(c, justify="right" if right else "left")
    for c in ("rows out", "state rows", "state bytes"):
        t.add_column(c, justify="right")
    how = "how" in m.columns and m["how"].is_not_null().any()
    if how:  # (a recursive scope's last step: `circuit/metrics.py`)
        t.add_column("last step")
    last = m.filter(pl.col("step") == m["step"].max())

    def total(c: str) -> pl.Expr:  # NULL where no step counted it
        return pl.when(pl.col(c).is_null().all()).then(None).otherwise(pl.col(c).sum()).alias(c)

    by = m.group_by("node", maintain_order=True).agg(
        pl.col("operator").first(), pl.col("ms").sum(), total("rows_in"), total("rows_out")
    )
    held = dict(zip(last["node"], zip(last["state_rows"], last["state_bytes"], strict=True), strict=True))
    ways = dict(zip(last["node"], last["how"], strict=True)) if how else {}

    def num(v: Any) -> str:
        return "" if v is None else f"{v:,.1f}" if isinstance(v, float) else f"{v:,}"

    for node, op, ms, rin, rout in by.iter_rows():
        rows, size = held.get(node, (None, None))
        cells = [node, op[:50], num(ms), num(rin), num(rout), num(rows), num(size)]
        t.add_row(*cells, *([ways.get(node) or ""] if how else []))
    return t


def write_outputs(output: Path, step: int, changes: dict[str, Any]) -> None:
    from dbspark.io import write_changes

    for view, z in changes.items():
        d = output / view
        d.mkdir(parents=True, exist_ok=True)
        write_changes(z.to_zset().df, d / f"step-{step:08d}.parquet")
        faults.point("output")


@app.command()
def explain(
    pipeline: Annotated[Path, typer.Argument(help=PIPELINE_HELP, exists=True, dir_okay=False)],
    format: Annotated[
        str,
        typer.Option(
            "--format",
            "-f",
            help="text, or a picture: dot, mermaid, svg, png (svg and png need Graphviz's dot program)",
        ),
    ] = "text",
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="write it to this file (png: required)")
    ] = None,
    dialect: Annotated[str, typer.Option(help=DIALECT_HELP)] = "duckdb",
) -> None:
    """Print (or draw) the pipeline's circuit before and after incrementalization."""
    try:
        p = Pipeline(engine="local")
        load_pipeline(pipeline, p, dialect)
        if format == "text":
            text: str | bytes = (
                f"circuit\n{p.circuit.explain()}\nincremental circuit\n{p.circuit.incrementalize().explain()}\n"
            )
        else:
            text = p.picture(format)
        if output is not None:
            output.write_bytes(text if isinstance(text, bytes) else text.encode())
        elif isinstance(text, bytes):
            raise UnsupportedError(
                f"the {format} format to the terminal (it is binary: give a file with --output)"
            )
        else:
            typer.echo(text, nl=False)
    except Exception as e:
        fail(e)


def fail(e: Exception) -> NoReturn:
    """One line on stderr and exit status 1: dbspark's errors as they are, anything else (an OS error, an
    error Spark raised) by its type and first line; DBSPARK_DEBUG=1 shows the traceback instead."""
    if os.environ.get("DBSPARK_DEBUG"):
        raise e
    # (soft_wrap: one line, however long; a path wrapped by rich could not be copied whole)
    if isinstance(e, DbsparkError):
        err.print(f"[bold red]error:[/] {escape(str(e))}", soft_wrap=True, highlight=False)
    else:
        first = escape((str(e).strip().splitlines() or [""])[0][:500])
        err.print(
            f"[bold red]error:[/] {type(e).__name__}: {first} (DBSPARK_DEBUG=1 shows the traceback)",
            soft_wrap=True,
            highlight=False,
        )
    raise typer.Exit(1)


def main() -> None:  # pragma: no cover
    sys.exit(app())
