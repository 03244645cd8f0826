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
  cell), and only then expanded into node pairs.

The work of a step is O(|V| + |E|) for the components plus O(|Δclosure|) for the output, plus the
reachability of the components: with k <= `DENSE_MAX` components one bit matrix (O(k^2 / 8) bytes, built
in reverse topological order, each condensation edge visited once); with more, compiled searches of the
condensation from the ancestors of the change only (a graph with few cycles has many components, and
its changes usually reach few of them). Neither depends on the size of the closure.

Per step: the change is consolidated against the edges' integrated weights (an edge is present when
its weight is positive, as `distinct` counts it); if no edge appeared or disappeared the closure does
not change. Otherwise the SCCs are recomputed (scipy, linear time), then the component reachability,
and the old and new reachability are compared on the ancestor cells.

NULL endpoints follow SQL's join: a NULL never equals another value, so it cannot be the middle of a
path. A NULL source is the node NULL_OUT (no edges in) and a NULL destination the node NULL_IN (no edges
out); both map back to NULL.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from dbspark.algebra.consolidate import sorted_unique, weight_sum_checked
from dbspark.algebra.zset import WEIGHT, ZSet

NULL_OUT, NULL_IN = 0, 1  # node ids of a NULL source and a NULL destination
_ID, _VAL = "__id", "__v"


@dataclass
class _Graph:
    """One step's graph index: present edges, components and their reachability."""

    edges: pl.DataFrame  # __a, __b (node ids), weight: every edge with a non-zero integrated weight
    lab: np.ndarray  # component of each node id
    reach: _Dense | _Sparse  # reachability between the components (index k: an empty sentinel)


def _empty_graph() -> _Graph:
    e = pl.DataFrame(schema={"__a": pl.Int64, "__b": pl.Int64, WEIGHT: pl.Int64})
    none = np.zeros(0, np.int64)
    return _Graph(e, np.zeros(2, np.int64), _Dense(0, none, none, np.zeros(0, bool)))


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
        changed_src = sorted_unique(flips["__a"].to_numpy())
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
        u = d.select(self.src).join(ids, left_on=self.src, right_on=_VAL, how="left", maintain_order="left")[
            _ID
        ]
        w = d.select(self.dst).join(ids, left_on=self.dst, right_on=_VAL, how="left", maintain_order="left")[
            _ID
        ]
        return pl.DataFrame({"__a": u.fill_null(NULL_OUT), "__b": w.fill_null(NULL_IN), WEIGHT: d[WEIGHT]})

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
DENSE_MAX = 4096  # up to this many components the reachability is one bit matrix (<= 2 MiB)


class _Dense:
    """Reachability between k components as packed bit rows, computed at once in reverse topological
    order (each DAG edge visited once): O(k^2 / 8) bytes. Row and column k are the empty sentinel."""

    def __init__(self, k: int, a: np.ndarray, b: np.ndarray, cyclic: np.ndarray) -> None:
        self.k = k
        self.bits = np.zeros((k + 1, (k + 8) // 8), np.uint8)
        _fill_reach(self.bits, k, a, b)
        comps = np.flatnonzero(cyclic)
        self.bits[comps, comps >> 3] |= (1 << (comps & 7)).astype(np.uint8)

    def rows(self, comps: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """bool [i, j]: component cols[j] is reachable from comps[i]."""
        sub = self.bits[comps][:, cols >> 3]
        return (sub >> (cols & 7).astype(np.uint8)) & 1 == 1

    def ancestors(self, comps: np.ndarray) -> np.ndarray:
        """bool per component (k + 1): it is one of `comps` or reaches one of them."""
        out = np.zeros(self.k + 1, bool)
        comps = sorted_unique(comps[comps < self.k])
        if comps.size:
            out[comps] = True
            out[: self.k] |= self.rows(np.arange(self.k), comps).any(axis=1)
        return out


class _Sparse:
    """Reachability between many components, answered by searches of the condensation (compiled BFS):
    a row costs O(what it reaches), so memory stays O(k + DAG edges) and the work follows the rows asked
    for (those of the change's ancestors), not k^2."""

    def __init__(self, k: int, a: np.ndarray, b: np.ndarray, cyclic: np.ndarray) -> None:
        self.k, self.cyclic = k, cyclic
        self.a, self.b = a, b
        from scipy.sparse import csr_matrix  # (scipy is imported when a closure is built)

        ones = np.ones(a.size, np.int8)
        self.dag = csr_matrix((ones, (a, b)), shape=(k + 1, k + 1))

    def rows(self, comps: np.ndarray, cols: np.ndarray) -> np.ndarray:
        from scipy.sparse.csgraph import breadth_first_order

        out = np.zeros((comps.size, cols.size), bool)
        uniq, inv = np.unique(comps, return_inverse=True)
        for i, c in enumerate(uniq):
            if c >= self.k:
                continue
            reach = np.zeros(self.k + 1, bool)
            reach[breadth_first_order(self.dag, c, directed=True, return_predecessors=False)] = True
            reach[c] = self.cyclic[c]
            out[inv == i] = reach[cols]
        return out

    def ancestors(self, comps: np.ndarray) -> np.ndarray:
        from scipy.sparse import csr_matrix
        from scipy.sparse.csgraph import breadth_first_order

        out = np.zeros(self.k + 1, bool)
        comps = sorted_unique(comps[comps < self.k])
        if comps.size == 0:
            return out
        # one search of the reversed DAG from the sentinel node k, linked to every comp for this search
        src = np.r_[self.b, np.full(comps.size, self.k)]
        dst = np.r_[self.a, comps]
        up = csr_matrix((np.ones(src.size, np.int8), (src, dst)), shape=(self.k + 1, self.k + 1))
        out[breadth_first_order(up, self.k, directed=True, return_predecessors=False)] = True
        out[self.k] = False
        return out


def _components(n: int, u: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, _Dense | _Sparse]:
    """SCC label per node, and the reachability between the components."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    g = csr_matrix((np.ones(len(u), np.int8), (u, w)), shape=(n, n))
    k, lab = connected_components(g, directed=True, connection="strong")
    lab = lab.astype(np.int64)
    cu, cw = lab[u], lab[w]
    cyclic = np.bincount(lab, minlength=k) > 1
    cyclic[cu[u == w]] = True  # a self-loop
    dag = np.unique(np.stack([cu[cu != cw], cw[cu != cw]], axis=1), axis=0).reshape(-1, 2)
    kind = _Dense if k <= DENSE_MAX else _Sparse
    return lab, kind(k, dag[:, 0], dag[:, 1], cyclic)


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


def _diff(old: _Graph, new: _Graph, n: int, changed_src: np.ndarray) -> tuple[np.ndarray, ...]:
    """The node pairs whose membership in the closure differs between old and new, with +1 / -1."""
    k_old = old.reach.k
    lab_old = np.full(n, k_old, np.int64)  # nodes unknown before: the empty row
    lab_old[: old.lab.size] = old.lab
    lab_new = new.lab
    # ancestors (or self) of the changed edges' sources, in the old and in the new graph
    anc_old = old.reach.ancestors(lab_old[changed_src])
    anc_new = new.reach.ancestors(lab_new[changed_src])
    width = new.reach.k + 1
    keys, cell = np.unique(lab_old * width + lab_new, return_inverse=True)
    c_old, c_new = keys // width, keys % width
    dirty = np.flatnonzero(anc_old[c_old] | anc_new[c_new])
    members = np.argsort(cell, kind="stable")
    size = np.bincount(cell, minlength=keys.size)
    offset = np.r_[0, np.cumsum(size)[:-1]]
    ps, pt, sg = [], [], []
    chunk = max(1, 2**24 // max(keys.size, 1))
    for lo in range(0, dirty.size, chunk):
        s = dirty[lo : lo + chunk]
        before = old.reach.rows(c_old[s], c_old)
        after = new.reach.rows(c_new[s], c_new)
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
