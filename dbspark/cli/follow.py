"""`dbspark run PIPELINE --changes DIR --follow`: a continuous run. DIR is a directory of step
directories, or of Delta tables named after the pipeline's tables (their change data feeds,
`io/feeds.py`: a step takes every commit since the last one, and records the versions it read with its
commit, so a resumed run reads each commit once). With step directories, after the batches already in
DIR it keeps stepping as new step directories appear there (written under a name starting with `_` or `.` and
renamed when complete, so that a half-written batch is never read; named so that they sort after the
ones before, `1/`, `2/`, ...), printing a progress line per step: its rows, time, rows per second, lag
(from the batch directory's last change to the step's commit), the state's rows (and bytes, where the
engine measures them) and the late rows dropped so far (tables with a lateness, `docs/lateness.md`).

Ctrl-C stops it at a step boundary: the step under way finishes and commits, then the run ends as a
batch run does (outputs, summary; exit code 0). A second Ctrl-C aborts that step, which is rolled back.
With `--state`, a later run resumes after the last committed step.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console

from dbspark.io.feeds import DeltaFeed
from dbspark.pipeline import Pipeline


class Stop:
    """Ctrl-C as a request to stop at the next step boundary; a second one interrupts."""

    def __init__(self) -> None:
        self.requested = False
        self._old: Any = None

    def __enter__(self) -> Stop:
        self._old = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc: Any) -> None:
        signal.signal(signal.SIGINT, self._old)

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True


Next = Callable[[], "tuple[str, float, Callable[[], int]] | None"]


def follow(p: Pipeline, source: str, next_step: Next, err: Console, poll: float) -> int:
    """Step as the source offers new changes until Ctrl-C. `next_step()` gives, when there are some,
    (their name, when they were written, a function that pushes them, steps and returns their rows);
    None when there are none. Returns the number of committed steps."""
    done = p.steps
    err.print(
        f"following {source} after step {done} (Ctrl-C stops at the next step boundary)", highlight=False
    )
    with Stop() as stop:
        while not stop.requested:
            got = next_step()
            if got is None:
                time.sleep(poll)
                continue
            name, written, run_step = got
            start = time.monotonic()
            rows = run_step()
            took = time.monotonic() - start
            done = p.steps
            lag = time.time() - written
            rate = f"{rows / took:,.0f} rows/s" if took > 0 else "-"
            state = _state_bytes(p)
            late = sum(p.late_rows.values())
            err.print(
                f"step {done} ({name}): {rows:,} rows in {took:.2f} s, {rate}, lag {lag:.2f} s, "
                f"state {p.state_rows():,} rows"
                + (f" ({state / 2**20:,.1f} MiB)" if state is not None else "")
                + (f", {late:,} late rows dropped" if late else ""),
                highlight=False,
            )
    err.print(f"stopped after step {done} (committed)", highlight=False)
    return done


def next_directory(
    p: Pipeline, changes: Path, step_dirs: Callable[[Path], list[Path]], run_dir: Callable[[Path], int]
) -> Next:
    """The next step directory of `changes` after the committed steps (one per step)."""

    def next_step() -> tuple[str, float, Callable[[], int]] | None:
        dirs = step_dirs(changes)
        if len(dirs) <= p.steps:
            return None
        d = dirs[p.steps]
        written = max((f.stat().st_mtime for f in [d, *d.iterdir()]), default=d.stat().st_mtime)
        return d.name, written, lambda: run_dir(d)

    return next_step


def next_commits(
    p: Pipeline, feed: DeltaFeed, run_changes: Callable[[dict[str, Any], dict[str, Any]], int]
) -> Next:
    """Every table's Delta commits after the offsets of the committed steps (one step for all of them);
    `run_changes(changes, offsets)` pushes {table: (rows, weights)}, steps with the new offsets and
    returns the rows."""

    def next_step() -> tuple[str, float, Callable[[], int]] | None:
        spans = feed.pending(p.offsets)
        if not spans:
            return None
        paths = feed.paths()
        written = max(
            max((f.stat().st_mtime for f in (paths[t] / "_delta_log").iterdir()), default=0.0) for t in spans
        )
        name = ", ".join(f"{t} v{a}" + (f"-{b}" if b > a else "") for t, (a, b) in sorted(spans.items()))
        schemas = {t: p.circuit.nodes[p.circuit.inputs[t]].shape.schema for t in spans}
        return (
            name,
            written,
            lambda: run_changes(feed.read(spans, schemas), {t: b for t, (_, b) in spans.items()}),
        )

    return next_step


def _state_bytes(p: Pipeline) -> int | None:
    """The state's bytes where the engine measures them (the local engine with a memory limit)."""
    memory = getattr(getattr(p.runtime, "kernel", None), "memory", None)
    if memory is None or getattr(memory, "limit", None) is None:
        return None
    return int(memory.total)
