"""Fault points: the places where crash tests kill a pipeline's process (`dbspark.testing.torture`).

`DBSPARK_KILL_AT=<point>:<n>` in a process's environment kills it with SIGKILL the n-th time it passes
`point` (n defaults to 1): nothing is flushed or cleaned up, as when a machine dies. The points:

- `frames`: a checkpoint's new frame files written, its manifest not yet;
- `manifest`: the new manifest written under its temporary name, not yet renamed over the old one;
- `commit`: a step's state files and outputs written, its checkpoint not yet;
- `output`: one view's output file of a step written, the others not yet;
- `merge`: inside a merge of a local trace's batches (the local engine), or of the runs a step writes
  in the driver (the spark engine).

Without the variable a point costs one comparison.
"""

from __future__ import annotations

import os
import signal

POINTS = ("frames", "manifest", "commit", "output", "merge")


def _target() -> list | None:
    at = os.environ.get("DBSPARK_KILL_AT")
    if not at:
        return None
    name, _, n = at.partition(":")
    if name not in POINTS:
        raise ValueError(f"DBSPARK_KILL_AT={at!r}: no fault point {name!r}; the points are {POINTS}")
    return [name, int(n or 1)]


_TARGET = _target()


def point(name: str) -> None:
    """Pass the fault point `name` (one of `POINTS`): the process dies here if told to."""
    if _TARGET is None or _TARGET[0] != name:
        return
    _TARGET[1] -= 1
    if _TARGET[1] <= 0:
        os.kill(os.getpid(), signal.SIGKILL)
