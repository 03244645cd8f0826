"""A large group of a bucketed trace read as slices of its sorted runs, without reading it whole.

A bucketed trace's run is sorted by the key hash and then by its data columns (`bucket_files.sort_run`),
so the rows of one key in one run are a contiguous range, and within it they are sorted by the first
data column after the keys. A group of 10^6 rows is therefore a few zero-copy slices of the
memory-mapped runs (`group_slices`: two binary searches per run), over which MIN, MAX and MEDIAN are
ranked (`columnar.ranked_fold`) instead of gathering, grouping and selecting 10^6 rows.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import polars as pl
import pyarrow as pa

from dbspark.algebra.consolidate import sorted_unique
from dbspark.algebra.keyhash import bucket_of, stable_hash
from dbspark.trace.bucket_files import HASH, open_run
from dbspark.trace.bucketed import SHARED, BucketEntry, BucketLayout


def group_slices(
    layout: BucketLayout, files: Mapping[int, BucketEntry], probe: pl.DataFrame, min_rows: int
) -> dict[int, list[pa.Table]]:
    """The runs' entries of each probe key (row i of `probe`, the layout's key columns) that has at
    least `min_rows` of them, as zero-copy slices (one per run holding the key, without `__h`); keys
    with fewer entries, and keys whose range in a run also holds another key (a hash collision), are
    left out. `files` is a version of the layout's trace."""
    keys = list(layout.keys)
    if probe.height == 0 or not files:
        return {}
    probe = layout.cast_probe(probe)
    hs = stable_hash(probe, keys)
    buckets = bucket_of(hs, layout.n_buckets)
    ranges: list[list[tuple[str, int, int]]] = [[] for _ in range(probe.height)]
    sizes = np.zeros(probe.height, dtype=np.int64)

    def search(path: str, rows: np.ndarray) -> None:
        _, h = open_run(path)
        lo = np.searchsorted(h, hs[rows], side="left")
        n = np.searchsorted(h, hs[rows], side="right") - lo
        for r, a, m in zip(rows[n > 0], lo[n > 0], n[n > 0], strict=True):
            ranges[r].append((path, int(a), int(m)))
        sizes[rows] += n

    everyone = np.arange(probe.height)
    shared = files.get(SHARED)
    for rel in shared.paths if shared is not None else ():
        search(layout.path(rel), everyone)
    for b in sorted_unique(buckets):
        entry = files.get(int(b))
        if entry is not None:
            for rel in entry.runs():
                search(layout.path(rel), everyone[buckets == b])
    out: dict[int, list[pa.Table]] = {}
    for i in np.flatnonzero(sizes >= max(min_rows, 1)):
        want = probe.row(int(i))
        parts = []
        for path, a, m in ranges[i]:
            t = open_run(path)[0].slice(a, m)
            ends = (t.slice(0, 1), t.slice(m - 1, 1))  # sorted by the keys within a hash: both ends hold it
            if any(tuple(e.column(k)[0].as_py() for k in keys) != want for e in ends):
                break
            parts.append(t.drop_columns([HASH]))
        else:
            out[int(i)] = parts
    return out
