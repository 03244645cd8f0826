"""Weighted graphs for the oracle tests of recursive aggregates (`tests/test_recursive_aggregates.py`,
`tests/test_magic_sets.py`): hypothesis change streams of weighted edges, and scipy's shortest paths."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st
from scipy.sparse.csgraph import csgraph_from_dense, shortest_path

import dbspark

N = 6  # nodes 0..N-1


def weighted_changes(
    max_steps: int = 5, max_weight: int = 4, one_per_pair: bool = False
) -> st.SearchStrategy:
    """Steps of (inserted, deleted) weighted edges (x, y, w), each a change of the current set: new
    edges, deletes, and cost changes (an edge deleted and inserted with another weight). Several
    weights of one pair may coexist unless `one_per_pair`."""
    edge = st.tuples(st.integers(0, N - 1), st.integers(0, N - 1), st.integers(0, max_weight))

    @st.composite
    def build(draw: Any) -> list[tuple[list, list]]:
        cur: set[tuple] = set()
        out = []
        for _ in range(draw(st.integers(1, max_steps))):
            dels = sorted(draw(st.sets(st.sampled_from(sorted(cur)), max_size=3))) if cur else []
            rest = cur - set(dels)
            n_changed = draw(st.integers(0, 2))
            changed = {(x, y, draw(st.integers(0, max_weight))) for x, y, _ in dels[:n_changed]}
            ins = (draw(st.sets(edge, max_size=8)) | changed) - cur
            if one_per_pair:
                pairs = {(x, y) for x, y, _ in rest}
                kept: dict[tuple, tuple] = {}
                for e in sorted(ins):
                    if e[:2] not in pairs:
                        kept.setdefault(e[:2], e)
                ins = set(kept.values())
            cur = rest | ins
            out.append((sorted(ins), dels))
        return out

    return build()


def apply(p: dbspark.Pipeline, table: str, cur: set, ins: list, dels: list) -> set:
    p.delete(table, dels)
    p.insert(table, ins)
    return (cur - set(dels)) | set(ins)


def distances(edges: set[tuple[int, int, int]]) -> np.ndarray:
    m = np.full((N, N), np.inf)
    for x, y, w in edges:
        m[x, y] = min(m[x, y], w)
    return shortest_path(csgraph_from_dense(m, null_value=np.inf), method="D")


def nearest(edges: set[tuple[int, int, int]], sources: set[int]) -> set[tuple[int, int]]:
    """(node, distance from the nearest source) by scipy, for the nodes some source reaches."""
    d = distances(edges)
    return {
        (y, int(min(d[s, y] for s in sources)))
        for y in range(N)
        if any(np.isfinite(d[s, y]) for s in sources)
    }
