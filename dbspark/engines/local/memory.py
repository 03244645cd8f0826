"""A ceiling on the local engine's state: a step that would pass it is rejected with a clear error,
before the process runs out of memory and is killed.

The state measured is the traces' (the integrals behind joins, aggregates, DISTINCT, the views and
the inputs: nearly all of what a pipeline keeps), as Polars estimates its frames' sizes, plus their
hash arrays. With a limit, the kernel measures every trace at the start of a step and each trace it
inserts into after the insert; a step whose state passes the limit raises `MemoryLimitError`, and the
step is rolled back like any rejected step (nothing applied, the pipeline goes on from its last step).
Without a limit nothing is measured.

The limit: `Pipeline(..., memory_limit="8GiB")` (or `circuit.run("local", memory_limit=...)`), the CLI's
`--memory-limit`, or the environment's `DBSPARK_MEMORY_LIMIT`; a number of bytes or a size such as
`512MB`, `1.5GiB`, `2G` (K, M, G, T: powers of 1024).
"""

from __future__ import annotations

import os
import re
import weakref
from typing import TYPE_CHECKING

from dbspark.errors import DbsparkError, MemoryLimitError

if TYPE_CHECKING:
    from dbspark.trace.spine import Spine

ENV = "DBSPARK_MEMORY_LIMIT"
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(size: int | str) -> int:
    """Bytes from a number of bytes or a size such as '512MB', '1.5GiB', '2G' (units of 1024)."""
    if isinstance(size, int) and not isinstance(size, bool) and size > 0:
        return size
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*", str(size), re.IGNORECASE)
    if m is None or float(m.group(1)) <= 0:
        raise DbsparkError(
            f"memory limit {size!r}: expected a positive number of bytes or a size such as '512MB', '8GiB'"
        )
    return int(float(m.group(1)) * _UNITS[m.group(2).upper()])


def _show(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


class MemoryGuard:
    """The state's bytes against a limit (`limit` None: from the environment, else no limit)."""

    def __init__(self, limit: int | str | None = None) -> None:
        if limit is None:
            limit = os.environ.get(ENV) or None
        self.limit = parse_size(limit) if limit is not None else None
        self.traces: weakref.WeakSet[Spine] = weakref.WeakSet()
        self.total = 0

    def track(self, trace: Spine) -> None:
        if self.limit is not None:
            self.traces.add(trace)

    def measure(self) -> None:
        """At a step's start: the state's bytes, measured (restores and rollbacks change traces too)."""
        if self.limit is not None:
            self.total = sum(t.nbytes() for t in list(self.traces))

    def grew(self, trace: Spine, before: int, undo: list) -> None:
        """After an insert into `trace`, which held `before` bytes: the limit checked."""
        assert self.limit is not None
        total = self.total
        self.total += trace.nbytes() - before
        undo.append(lambda: setattr(self, "total", total))
        if self.total > self.limit:
            raise MemoryLimitError(
                f"the local engine's state would grow to {_show(self.total)}, past its memory limit of "
                f"{_show(self.limit)} (memory_limit / --memory-limit / {ENV}): the step is rejected"
            )
