"""The leapfrog join of several Z-sets, worst-case optimal, on tries (`columnar/trie.py`).

`lftj-incremental-maintenance.txt` §4.1: leapfrog triejoin binds the variables of a conjunctive body
one at a time, in a global order; at each variable the iterators of the atoms that hold it leapfrog:
the one at the least key seeks to the greatest, until all agree, so that a binding is extended only by
the values every atom has, and the work at a variable is bounded by the smallest atom's candidates
(the AGM bound overall: a triangle query over m edges does O(m^1.5) work where a chain of binary joins
may do O(m^2)). Here the leapfrog is run for all partial bindings at once: for each binding the atom
with the fewest children under its current node leads (its children are the candidates, read in one
range each), and every other atom seeks each candidate (`Trie.seek`, a binary search): a candidate all
of them find extends the binding. This intersection by the smallest side is the leapfrog's bound, and
each step is a handful of NumPy calls over the batch.

Only the variables two or more atoms share are trie levels; an atom's other columns are its leaves'
payload, and a binding of every join variable is multiplied out with each atom's rows under its leaf
(weights multiply: the natural join of Z-sets, `dbsp-paper.txt` Table 1, generalized to n inputs). A
NULL never equals anything (SQL): a row with a NULL join variable matches nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from dbspark.algebra.weights import checked_mul
from dbspark.algebra.zset import WEIGHT
from dbspark.columnar.trie import Trie, encode


def join_variables(atoms: Sequence[Sequence[str]]) -> list[str]:
    """The variables (column names) that two or more atoms share, in order of first appearance."""
    seen: dict[str, int] = {}
    for a in atoms:
        for v in a:
            seen[v] = seen.get(v, 0) + 1
    return [v for v, k in seen.items() if k > 1]


def output_schema(schemas: Sequence[pl.Schema]) -> pl.Schema:
    """The natural join's columns: each variable once, in order of first appearance (its first atom's
    type), then the weight."""
    out: dict[str, pl.DataType] = {}
    for s in schemas:
        for c, t in s.items():
            if c != WEIGHT and c not in out:
                out[c] = t
    return pl.Schema([*out.items(), (WEIGHT, pl.Int64())])


def variable_order(
    atoms: Sequence[Sequence[str]], sizes: Sequence[int], first: Sequence[str] = ()
) -> list[str]:
    """A global order of the join variables: `first`'s (a change's) variables, then greedily the variable
    most atoms already bound share (ties: in more atoms, then in smaller atoms), so that each next
    variable is constrained by the bindings made so far."""
    joins = join_variables(atoms)
    order = [v for v in first if v in joins]

    def rank(v: str, bound: set[str]) -> tuple[int, int, int]:
        holders = [i for i, a in enumerate(atoms) if v in a]
        linked = sum(1 for i in holders if bound & set(atoms[i]))
        return (-linked, -len(holders), min(sizes[i] for i in holders))

    while len(order) < len(joins):
        bound = set(order)
        order.append(min((v for v in joins if v not in bound), key=lambda v: rank(v, bound)))
    return order


def leapfrog_join(frames: Sequence[pl.DataFrame], order: Sequence[str] | None = None) -> pl.DataFrame:
    """The natural join of Z-set frames (data columns named by variables, then the weight): one row per
    combination of rows that agree on every shared column, weights multiplied (not consolidated);
    columns as `output_schema`. `order`: the join variables' order (default: `variable_order`)."""
    schema = output_schema([f.schema for f in frames])
    atoms = [[c for c in f.columns if c != WEIGHT] for f in frames]
    joins = join_variables(atoms)
    if order is None:
        order = variable_order(atoms, [f.height for f in frames])
    if sorted(order) != sorted(joins):
        raise ValueError(f"leapfrog_join: the order {list(order)} is not of the join variables {joins}")
    # a NULL or NaN-signed zero: NULL matches nothing, -0.0 equals 0.0 (as a join compares them)
    frames = [matchable(f, [v for v in order if v in a]) for f, a in zip(frames, atoms, strict=True)]
    if any(f.height == 0 for f in frames):
        return pl.DataFrame(schema=schema)
    levels = [[v for v in order if v in a] for a in atoms]  # each atom's variables, in the global order
    codes: list[dict[str, np.ndarray]] = [{} for _ in frames]
    radix: dict[str, int] = {}
    for v in order:
        holders = [i for i, lv in enumerate(levels) if v in lv]
        got, radix[v] = encode([frames[i][v] for i in holders])
        for i, c in zip(holders, got, strict=True):
            codes[i][v] = c
    tries = [
        Trie.build([codes[i][v] for v in lv], [radix[v] for v in lv], frames[i].height)
        for i, lv in enumerate(levels)
    ]
    nodes = _bind(tries, levels, order)
    return _leaves(frames, tries, nodes, schema)


def matchable(f: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """The rows whose join columns can match: none NULL; a float's -0.0 as 0.0 (a join's equality)."""
    if any(f[k].null_count() for k in keys):
        f = f.drop_nulls(keys)
    floats = [k for k in keys if f.schema[k].is_float()]
    return f.with_columns(pl.col(k) + 0.0 for k in floats) if floats else f


def _bind(tries: list[Trie], levels: list[list[str]], order: Sequence[str]) -> list[np.ndarray]:
    """Each binding of the join variables that every atom holds, as the node each atom's trie is at
    (its last level's; the root, 0, for an atom without join variables)."""
    nodes = [np.zeros(1, dtype=np.int64) for _ in tries]  # one empty binding; every atom at its root
    depth = [0] * len(tries)
    for v in order:
        holders = [i for i, lv in enumerate(levels) if v in lv]
        los, his = zip(*(tries[i].children(depth[i], nodes[i]) for i in holders), strict=True)
        counts = np.stack(his) - np.stack(los)
        lead = np.argmin(counts, axis=0)  # per binding: the atom with the fewest candidates leads
        m = len(lead)
        take = counts[lead, np.arange(m)]
        rep = np.repeat(np.arange(m), take)
        nth = np.arange(len(rep)) - np.repeat(np.cumsum(take) - take, take)
        first = np.stack(los)[lead, np.arange(m)]
        lead_node = first[rep] + nth
        lead_of = lead[rep]
        code = np.empty(len(rep), dtype=np.int64)
        for k, i in enumerate(holders):
            at = lead_of == k
            code[at] = tries[i].codes[depth[i]][lead_node[at]]
        keep = np.ones(len(rep), dtype=bool)
        moved: dict[int, np.ndarray] = {}
        for i in holders:  # every holder seeks the candidate (the leader finds its own child)
            found, node = tries[i].seek(depth[i], nodes[i][rep], code)
            keep &= found
            moved[i] = node
        rep = rep[keep]
        for i in range(len(tries)):
            nodes[i] = moved[i][keep] if i in moved else nodes[i][rep]
        for i in holders:
            depth[i] += 1
    return nodes


def _leaves(
    frames: Sequence[pl.DataFrame], tries: list[Trie], nodes: list[np.ndarray], schema: pl.Schema
) -> pl.DataFrame:
    """The bindings multiplied out with each atom's rows under its leaf: the join's rows."""
    rows: list[np.ndarray] = []
    binding = np.arange(len(nodes[0]))  # each output row's binding
    for t, at in zip(tries, nodes, strict=True):
        lo, hi = t.leaves(at[binding])
        take = hi - lo
        rep = np.repeat(np.arange(len(take)), take)
        nth = np.arange(len(rep)) - np.repeat(np.cumsum(take) - take, take)
        binding = binding[rep]
        rows = [r[rep] for r in rows]
        rows.append(t.rows[lo[rep] + nth])
    cols: list[pl.Series] = []
    for c in schema:
        if c == WEIGHT:
            continue
        i = next(k for k, f in enumerate(frames) if c in f.schema)
        cols.append(frames[i][c].gather(rows[i]))
    w = frames[0][WEIGHT].to_numpy()[rows[0]]
    for f, r in zip(frames[1:], rows[1:], strict=True):
        w = checked_mul(w, f[WEIGHT].to_numpy()[r])
    return pl.DataFrame([*cols, pl.Series(WEIGHT, w, dtype=pl.Int64)], schema=schema)
