"""The incremental transitive closure kernel: the graph index behind `operators.closure.Closure`.

The closure of an edge set E is {(x, y) : a path of one or more edges leads from x to y}. Generic
recursion (`dbsp-paper.txt` §6, the doubly-incremental circuit) maintains the closure through the
iterations of its fixpoint: iteration i holds the pairs at hop distance <= i + 1, so an edge change
moves every pair whose shortest path changes, often 40x more than the pairs entering or leaving the
closure (bench/README.md, `tc`). This kernel maintains the closure through the graph's strongly
connected components (SCCs) instead, which only depend on reachability:

* x reaches y iff comp(x) reaches comp(y) in the condensation (a DAG), where a component reaches
  itself iff it has a cycle (two or more nodes, or a self-loop).
* After an edge change, only a node that reaches the source u of a changed edge (u, v), in the old or
  in the new graph, can have a different set of reachable nodes: any path that gained or lost an edge
  passes through u. Those nodes are the old and new ancestors of the changed sources.
* Nodes with the same (old component, new component) pair (a *cell*) have the same old and the same
  new reachable sets. The change of the closure is computed per pair of cells, (ancestor cell, any
  cell), and only then expanded into node pairs: the work is O(|V| + |E|) for the components, plus
  O(k^2 / 8) bytes for the component reachability matrix (k components), plus O(|Δclosure|) for the
  output, instead of the size of the closure.

Per step: the change is consolidated against the edges' integrated weights (an edge is present when
its weight is positive, as `distinct` counts it); if no edge appeared or disappeared the closure does
not change. Otherwise the SCCs are recomputed (scipy, linear time), the component reachability is
recomputed as bit rows in reverse topological order (vectorized per level of the DAG), and the old and
new reachability are compared on the ancestor cells.

NULL endpoints follow SQL's join: a NULL never equals another value, so it cannot be the middle of a
path. A NULL source is the node NULL_OUT (no edges in) and a NULL destination the node NULL_IN (no edges
out); both map back to NULL.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from dbspark.algebra.zset import WEIGHT, ZSet, weight_sum_checked

NULL_OUT, NULL_IN = 0, 1  # node ids of a NULL source and a NULL destination
_ID, _VAL = "__id", "__v"


@dataclass
class _Graph:
    """One step's graph index: present edges, components and their reachability."""

    edges: pl.DataFrame  # __a, __b (node ids), weight: every edge with a non-zero integrated weight
    lab: np.ndarray  # component of each node id
    reach: np.ndarray  # (k + 1) x bytes: bit j of row c = component j is reachable from c (row k: none)


def _empty_graph() -> _Graph:
    e = pl.DataFrame(schema={"__a": pl.Int64, "__b": pl.Int64, WEIGHT: pl.Int64})
    return _Graph(e, np.zeros(2, np.int64), np.zeros((1, 1), np.uint8))


@dataclass
class ClosureState:
    """The state of (↑TC)^Δ over columns (src, dst) of one value type."""

    src: str
    dst: str
    dtype: pl.DataType
    values: pl.Series = field(init=False)  # node id -> value (ids 0, 1: NULL)
    ids: pl.DataFrame = field(init=False)  # value -> node id, non-NULL values
    graph: _Graph = field(default_factory=_empty_graph)

    def __post_init__(self) -> None:
        self.values = pl.Series(_VAL, [None, None], self.dtype)
        self.ids = pl.DataFrame(schema={_VAL: self.dtype, _ID: pl.Int64})

    # ---- one step ---------------------------------------------------------------------------------
    def step(self, delta: pl.DataFrame, undo: list) -> pl.DataFrame:
        """The change of the closure for a change of the edges (columns src, dst, weight)."""
        d = weight_sum_checked(delta.select(self.src, self.dst, WEIGHT), [self.src, self.dst])
        d = d.filter(pl.col(WEIGHT) != 0)
        if d.height == 0:
            return self._empty()
        saved = (self.values, self.ids, self.graph)
        undo.append(lambda: self._restore(saved))
        d = self._node_ids(d)
        old = self.graph
        j = d.join(old.edges.rename({WEIGHT: "__old"}), on=["__a", "__b"], how="left").with_columns(
            pl.col("__old").fill_null(0)
        )
        j = j.with_columns((pl.col("__old") + pl.col(WEIGHT)).alias("__new"))
        flips = j.filter((pl.col("__old") > 0) != (pl.col("__new") > 0))
        edges = pl.concat(
            [
                old.edges.join(d.select("__a", "__b"), on=["__a", "__b"], how="anti"),
                j.filter(pl.col("__new") != 0).select("__a", "__b", pl.col("__new").alias(WEIGHT)),
            ]
        )
        if flips.height == 0:
            self.graph = _Graph(edges, old.lab, old.reach)
            return self._empty()
        present = edges.filter(pl.col(WEIGHT) > 0)
        n = self.values.len()
        lab, reach = _components(n, present["__a"].to_numpy(), present["__b"].to_numpy())
        self.graph = _Graph(edges, lab, reach)
        changed_src = np.unique(flips["__a"].to_numpy())
        x, y, sign = _diff(old, self.graph, n, changed_src)
        return pl.DataFrame(
            {
                self.src: self.values.gather(x),
                self.dst: self.values.gather(y),
                WEIGHT: pl.Series(sign, dtype=pl.Int64),
            }
        )

    def _node_ids(self, d: pl.DataFrame) -> pl.DataFrame:
        """Give new values ids, and d's endpoints as node ids __a, __b (NULL: NULL_OUT, NULL_IN)."""
        seen = pl.concat([d[self.src], d[self.dst]]).drop_nulls().unique().to_frame(_VAL)
        new = seen.join(self.ids, on=_VAL, how="anti")
        if new.height:
            start = self.values.len()
            new = new.with_columns(pl.int_range(start, start + new.height, dtype=pl.Int64).alias(_ID))
            self.ids = pl.concat([self.ids, new])
            self.values = pl.concat([self.values, new[_VAL]])
        ids = self.ids
        u = d.select(self.src).join(ids, left_on=self.src, right_on=_VAL, how="left", maintain_order="left")[_ID]
        w = d.select(self.dst).join(ids, left_on=self.dst, right_on=_VAL, how="left", maintain_order="left")[_ID]
        return pl.DataFrame(
            {"__a": u.fill_null(NULL_OUT), "__b": w.fill_null(NULL_IN), WEIGHT: d[WEIGHT]}
        )

    def _empty(self) -> pl.DataFrame:
        return pl.DataFrame(schema={self.src: self.dtype, self.dst: self.dtype, WEIGHT: pl.Int64})

    def _restore(self, saved: tuple[pl.Series, pl.DataFrame, _Graph]) -> None:
        self.values, self.ids, self.graph = saved

    # ---- checkpoints --------------------------------------------------------------------------------
    def checkpoint(self) -> Any:
        return (self.values, self.ids, self.graph)

    def restore(self, saved: Any) -> None:
        self._restore(saved)


def closure_of(z: ZSet, src: str, dst: str) -> ZSet:
    """↑TC of one Z-set (its rows of positive weight are the edges), every pair with weight 1."""
    st = ClosureState(src, dst, z.schema[src])
    return ZSet(st.step(z.distinct().df, []), True)


# ---- components and their reachability --------------------------------------------------------------
def _components(n: int, u: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """SCC label per node, and the packed reachability rows of the components (plus an empty last row)."""
    g = csr_matrix((np.ones(len(u), np.int8), (u, w)), shape=(n, n))
    k, lab = connected_components(g, directed=True, connection="strong")
    lab = lab.astype(np.int64)
    cu, cw = lab[u], lab[w]
    cyclic = np.bincount(lab, minlength=k) > 1
    cyclic[cu[u == w]] = True  # a self-loop
    dag = np.unique(np.stack([cu[cu != cw], cw[cu != cw]], axis=1), axis=0).reshape(-1, 2)
    reach = np.zeros((k + 1, (k + 8) // 8), np.uint8)
    _fill_reach(reach, k, dag[:, 0], dag[:, 1])
    comps = np.flatnonzero(cyclic)
    reach[comps, comps >> 3] |= (1 << (comps & 7)).astype(np.uint8)
    return lab, reach


def _fill_reach(reach: np.ndarray, k: int, a: np.ndarray, b: np.ndarray) -> None:
    """reach[c] = OR over DAG edges c -> s of (reach[s] | {s}), level by level from the sinks up.

    Each DAG edge is visited once, when its target's row is final (its target is in the frontier)."""
    out_left = np.bincount(a, minlength=k)
    by_target = np.argsort(b, kind="stable")
    a, b = a[by_target], b[by_target]
    first = np.searchsorted(b, np.arange(k + 1))
    frontier = np.flatnonzero(out_left == 0)
    while frontier.size:
        lo, hi = first[frontier], first[frontier + 1]
        cnt = hi - lo
        idx = np.repeat(lo - np.r_[0, np.cumsum(cnt)[:-1]], cnt) + np.arange(cnt.sum())
        if idx.size == 0:
            break
        ea, eb = a[idx], b[idx]
        rows = reach[eb]
        rows[np.arange(eb.size), eb >> 3] |= (1 << (eb & 7)).astype(np.uint8)
        order = np.argsort(ea, kind="stable")
        ea, rows = ea[order], rows[order]
        starts = np.flatnonzero(np.r_[True, ea[1:] != ea[:-1]])
        srcs = ea[starts]
        reach[srcs] |= np.bitwise_or.reduceat(rows, starts, axis=0)
        out_left -= np.bincount(ea, minlength=k)
        frontier = srcs[out_left[srcs] == 0]


def _bits(reach: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """bool matrix [i, j] = bit cols[j] of reach row rows[i]."""
    sub = reach[rows][:, cols >> 3]
    return (sub >> (cols & 7).astype(np.uint8)) & 1 == 1


def _diff(old: _Graph, new: _Graph, n: int, changed_src: np.ndarray) -> tuple[np.ndarray, ...]:
    """The node pairs whose membership in the closure differs between old and new, with +1 / -1."""
    k_old = old.reach.shape[0] - 1
    lab_old = np.full(n, k_old, np.int64)  # nodes unknown before: the empty row
    lab_old[: old.lab.size] = old.lab
    lab_new = new.lab
    # ancestors (or self) of the changed edges' sources, in the old and in the new graph
    anc_old = _ancestors(old.reach, lab_old[changed_src], k_old)
    anc_new = _ancestors(new.reach, lab_new[changed_src], new.reach.shape[0] - 1)
    cell_key = lab_old * (new.reach.shape[0]) + lab_new
    keys, cell = np.unique(cell_key, return_inverse=True)
    c_old, c_new = keys // new.reach.shape[0], keys % new.reach.shape[0]
    dirty = np.flatnonzero(anc_old[c_old] | anc_new[c_new])
    members = np.argsort(cell, kind="stable")
    size = np.bincount(cell, minlength=keys.size)
    offset = np.r_[0, np.cumsum(size)[:-1]]
    ps, pt, sg = [], [], []
    chunk = max(1, 2**24 // max(keys.size, 1))
    for lo in range(0, dirty.size, chunk):
        s = dirty[lo : lo + chunk]
        before = _bits(old.reach, c_old[s], c_old)
        after = _bits(new.reach, c_new[s], c_new)
        i, t = np.nonzero(before != after)
        ps.append(s[i])
        pt.append(t)
        sg.append(after[i, t].astype(np.int64) * 2 - 1)
    if not ps:
        e = np.zeros(0, np.int64)
        return e, e, e
    s, t, sign = np.concatenate(ps), np.concatenate(pt), np.concatenate(sg)
    counts = size[s] * size[t]
    rep = np.repeat(np.arange(s.size), counts)
    within = np.arange(rep.size) - np.repeat(np.cumsum(counts) - counts, counts)
    tsize = size[t][rep]
    x = members[offset[s][rep] + within // tsize]
    y = members[offset[t][rep] + within % tsize]
    return x, y, sign[rep]


def _ancestors(reach: np.ndarray, comps: np.ndarray, k: int) -> np.ndarray:
    """bool per component row (k + 1 rows): it is one of `comps` or reaches one of them."""
    out = np.zeros(reach.shape[0], bool)
    comps = np.unique(comps[comps < k])
    if comps.size == 0:
        return out
    out[comps] = True
    out[:k] |= _bits(reach[:k], np.arange(k), comps).any(axis=1)
    return out
