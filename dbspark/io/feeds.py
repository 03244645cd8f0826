"""Change feeds a continuous run follows (`dbspark run --follow`): a directory of Delta tables, one per
pipeline table (named after it), each with its change data feed enabled.

A step takes every table's commits since the last step (`read_delta_cdf`: inserts +1, deletes -1, an
update as its pre-image -1 and post-image +1). The versions a step consumed are its *offsets*, recorded
in the pipeline's checkpoint with the step (`Pipeline.offsets`), so a run resumed from its state
directory reads each commit exactly once: a step that did not commit is read again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from dbspark.errors import UnknownNameError
from dbspark.io.sources import is_delta_table, read_delta_cdf


def is_delta_feed(directory: Path) -> bool:
    """Whether `directory` holds Delta tables (sub-directories with a `_delta_log`), not step directories."""
    return directory.is_dir() and any(is_delta_table(d) for d in directory.iterdir() if d.is_dir())


@dataclass
class DeltaFeed:
    """The Delta tables of `root`, each named after one of the pipeline's `tables`; the versions read so
    far are the pipeline's offsets (`pending`'s argument: table → the last version read)."""

    root: Path
    tables: tuple[str, ...]

    def paths(self) -> dict[str, Path]:
        found = {d.name: d for d in sorted(self.root.iterdir()) if d.is_dir() and is_delta_table(d)}
        unknown = sorted(set(found) - set(self.tables))
        if unknown:
            raise UnknownNameError(
                f"{self.root}: Delta tables {unknown} name no table of the pipeline; its tables are "
                f"{sorted(self.tables)}"
            )
        return found

    def pending(self, offsets: Mapping[str, Any]) -> dict[str, tuple[int, int]]:
        """{table: (first, last) version not read yet} for each table with new commits."""
        from deltalake import DeltaTable

        got = {}
        for name, path in self.paths().items():
            last = DeltaTable(str(path)).version()
            first = int(offsets.get(name, -1)) + 1
            if last >= first:
                got[name] = (first, last)
        return got

    def read(
        self, spans: Mapping[str, tuple[int, int]], schemas: Mapping[str, pl.Schema]
    ) -> dict[str, tuple[pl.DataFrame, np.ndarray]]:
        """Each table's changes over its span of versions, as rows and weights."""
        path = self.paths()
        return {
            name: read_delta_cdf(path[name], first, last, schemas[name])
            for name, (first, last) in spans.items()
        }
