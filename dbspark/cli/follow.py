"""`dbspark run PIPELINE --changes DIR --follow`: a continuous run. After the batches already in DIR, it
keeps stepping as new step directories appear there (written under a name starting with `_` or `.` and
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


def follow(
    p: Pipeline,
    changes: Path,
    step_dirs: Callable[[Path], list[Path]],
    run_step: Callable[[Path], int],
    err: Console,
    poll: float,
) -> int:
    """Step through new step directories of `changes` until Ctrl-C; `run_step(dir)` pushes a batch, steps
    and returns its rows. Returns the number of committed steps."""
    done = p.steps
    err.print(
        f"following {changes} after step {done} (Ctrl-C stops at the next step boundary)", highlight=False
    )
    with Stop() as stop:
        while not stop.requested:
            dirs = step_dirs(changes)
            if len(dirs) <= done:
                time.sleep(poll)
                continue
            d = dirs[done]
            written = max((f.stat().st_mtime for f in [d, *d.iterdir()]), default=d.stat().st_mtime)
            start = time.monotonic()
            rows = run_step(d)
            took = time.monotonic() - start
            done += 1
            lag = time.time() - written
            rate = f"{rows / took:,.0f} rows/s" if took > 0 else "-"
            state = _state_bytes(p)
            late = sum(p.late_rows.values())
            err.print(
                f"step {done} ({d.name}): {rows:,} rows in {took:.2f} s, {rate}, lag {lag:.2f} s, "
                f"state {p.state_rows():,} rows"
                + (f" ({state / 2**20:,.1f} MiB)" if state is not None else "")
                + (f", {late:,} late rows dropped" if late else ""),
                highlight=False,
            )
    err.print(f"stopped after step {done} (committed)", highlight=False)
    return done


def _state_bytes(p: Pipeline) -> int | None:
    """The state's bytes where the engine measures them (the local engine with a memory limit)."""
    memory = getattr(getattr(p.runtime, "kernel", None), "memory", None)
    if memory is None or getattr(memory, "limit", None) is None:
        return None
    return int(memory.total)
