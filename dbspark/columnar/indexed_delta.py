"""The delta join of a multiway join over indexed tries, each change's term in its own variable order.

The delta join (`incremental/multilinear.py`; `dbsp-paper.txt` Thm 3.4 generalized) sums, over the
inputs k, input k's change joined with the other inputs, those before k as they are after this step,
those after k as they were before it. Where `operators/multijoin.py`'s terms fetch each other input's
rows at the keys the change reaches (whole neighbourhoods, a hub's included) and sort them into tries
anew, here every input stays indexed from one step to the next as a `PackedTrie` (`columnar/packed_trie.py`)
in each column order a term reads it in, and term k is a leapfrog join (`lftj-incremental-maintenance.txt`
§4.1, the `smallest_leads` discipline of `columnar/intersections.py`) whose variable order starts with
input k's columns: the change binds them, and each later variable is the intersection of the holders'
children under the binding, led by the holder with the fewest. For a triangle `R(a, b), S(b, c), T(a, c)`
the term of a changed edge T(a, c) intersects R's children of a with S's parents of c: min(deg a, deg c)
binary searches, where a binary delta join reads all of a's deg(a) edges and a sensitivity trace
recorded in one order re-evaluates one region per b tried under a (`docs/multiway-joins.md`). This is
the variable order per change that a trace recorded in one order cannot have (the seed's §4.1 evaluates
in one global order); what it gives up is the trace: a term's work follows the change's neighbourhoods'
intersections, not the edit distance between evaluations.

Each input keeps one trie per distinct order of its levels among the terms that read it (for a
triangle, two per input: (a, b) and (b, a)). Its levels are its join columns and, if it has others, one
more: their tuples' local code under the join key (`columnar/payloads.py`), so that columns no other
input reads cost the bits of the most tuples under one key, not of their distinct values. A step first
applies every input's change to its tries, each `apply` making a new version and leaving the old one
valid, then runs the terms, term k reading the inputs j < k in their new versions and j > k in their
old ones; a step's undo is keeping the old versions. Values are coded by `Dictionary`s; a column that
outgrows its bits repacks every trie.

A self-join (a triangle over one edge table: R, S and T are `e` renamed) gets the same change on each of
its inputs at every step. Inputs of one row type code their columns, position by position, by one
dictionary, and inputs whose changes have been equal at every step form a class that holds one set of
tries (a triangle over `e`: two tries, not six, and a third of the updates), and a change an earlier
input got too is coded once; a step whose changes differ splits the class, each part keeping the tries
it had (versions are immutable, so the split copies nothing).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import numpy as np
import polars as pl

from dbspark.algebra.weights import checked_mul
from dbspark.algebra.zset import WEIGHT
from dbspark.columnar.intersections import first_keys
from dbspark.columnar.leapfrog import join_variables, matchable, output_schema, variable_order
from dbspark.columnar.packed_trie import (
    MAX_BITS,
    Dictionary,
    PackedTrie,
    bits_for,
    consolidate_rows,
    find_sorted,
    pack,
    unpack,
)
from dbspark.columnar.payloads import Payloads
from dbspark.errors import SchemaError

OWN = "__own"  # an input's own level (its own columns' local code): OWN + the input's number


def term_orders(atoms: Sequence[Sequence[str]]) -> list[list[str]]:
    """Term k's variable order: input k's columns (its change binds them), then the other join
    variables greedily (`variable_order`: the one most bound atoms share), then the other inputs' own
    columns (each held by one input: its rows under the binding)."""
    joins = join_variables(atoms)
    out = []
    for k, a in enumerate(atoms):
        first = list(a)
        rest = [
            v for v in variable_order(atoms, [1] * len(atoms), [v for v in a if v in joins]) if v not in a
        ]
        own = [c for j, b in enumerate(atoms) if j != k for c in b if c not in joins and c not in a]
        out.append(first + rest + own)
    return out


class IndexedDeltaJoin:
    """The natural join of n Z-set inputs (frames of `schemas`' columns and a weight), whose change
    `step` returns for the inputs' changes by the delta join over indexed tries (module docstring);
    columns as `leapfrog.output_schema`."""

    def __init__(self, schemas: Sequence[pl.Schema], names: Mapping[str, str] | None = None) -> None:
        self.names = dict(names or {})  # what the errors call a column (a front end's own name for it)
        self.atoms = [[c for c in s if c != WEIGHT] for s in schemas]
        self.schemas = [pl.Schema({c: s[c] for c in a}) for s, a in zip(schemas, self.atoms, strict=True)]
        self.out_schema = output_schema(schemas)
        self.joins = join_variables(self.atoms)
        self.columns = list(self.out_schema)[:-1]
        # an input's own columns (no other input reads them) are one level of its tries: their local code
        # under its join key (`columnar/payloads.py`); `vatoms` are the inputs' levels, in their order
        self.own = [[c for c in a if c not in self.joins] for a in self.atoms]
        self.vatoms = [
            [c for c in a if c in self.joins] + ([f"{OWN}{j}"] if self.own[j] else [])
            for j, a in enumerate(self.atoms)
        ]
        self.vcolumns = [c for c in self.columns if c in self.joins] + [
            a[-1] for j, a in enumerate(self.vatoms) if self.own[j]
        ]
        self.orders = term_orders(self.vatoms)
        # inputs of one row type with their own columns at the same positions may be one relation (a
        # self-join): their join columns, position by position, share a dictionary, and their own columns
        # a coder, so that equal rows have equal codes and equal changes can share tries
        kinds = [
            (tuple(s.values()), tuple(p for p, c in enumerate(a) if c not in self.joins))
            for s, a in zip(self.schemas, self.atoms, strict=True)
        ]
        group = {v: v for v in self.joins}

        def root(v: str) -> str:
            while group[v] != v:
                v = group[v]
            return v

        for i, j in itertools.combinations(range(len(self.atoms)), 2):
            if kinds[i] == kinds[j]:
                for u, v in zip(self.atoms[i], self.atoms[j], strict=True):
                    if u in group:
                        group[root(u)] = root(v)
        types = {c: t for s in self.schemas for c, t in s.items()}
        shared = {r: Dictionary(types[r]) for r in {root(v) for v in self.joins}}
        self.dicts = {v: shared[root(v)] for v in self.joins}
        self.coding = {id(d): d for d in shared.values()}  # each dictionary once
        coders: dict[tuple, Payloads] = {}
        self.coders: dict[str, Payloads] = {}  # an own level's coder
        for j, a in enumerate(self.atoms):
            if self.own[j]:
                if kinds[j] not in coders:
                    own = pl.Schema({f"__o{p}": self.schemas[j][a[p]] for p in kinds[j][1]})
                    coders[kinds[j]] = Payloads(len(self.vatoms[j]) - 1, own)
                self.coders[self.vatoms[j][-1]] = coders[kinds[j]]
        # input j's layouts: the positions of its levels in the order each other term reads them (the
        # first: its own order)
        self.layouts: list[list[tuple[int, ...]]] = []
        for j, a in enumerate(self.vatoms):
            seen = [tuple(range(len(a)))]
            for k, order in enumerate(self.orders):
                lv = _layout(a, order)
                if k != j and lv not in seen:
                    seen.append(lv)
            self.layouts.append(seen)
        # inputs that have had the same rows at every step (by position) share a class, and its tries
        alike = {k: [j for j in range(len(kinds)) if kinds[j] == k] for k in dict.fromkeys(kinds)}
        self.classes: list[tuple[int, ...]] = [tuple(js) for js in alike.values()]
        self.last: dict[str, object] = {}  # the last step's figures: terms, rows, candidates sought, classes
        self.sought = 0
        self._setup(None)

    # -- state ---------------------------------------------------------------------------------------

    def _class_of(self, j: int) -> int:
        return next(c for c, js in enumerate(self.classes) if j in js)

    def _bits(self, j: int, lv: tuple[int, ...], bits: dict[str, int] | None = None) -> list[int]:
        bits = self.bits if bits is None else bits
        return [bits[self.vatoms[j][p]] for p in lv]

    def _sizes(self) -> dict[str, int]:
        """Each level's number of codes: a join column's dictionary, an own level's largest local code."""
        return {v: len(self.dicts[v]) for v in self.joins} | {o: len(c) for o, c in self.coders.items()}

    def _setup(self, rows: list[tuple[np.ndarray, np.ndarray]] | None) -> None:
        """Bits from the dictionaries' sizes, and each class's tries of `rows` (each input's codes in its
        own level order, and weights; None: empty). Nothing changes if an input's levels cannot be
        packed."""
        bits = {v: bits_for(n) for v, n in self._sizes().items()}
        for j, a in enumerate(self.vatoms):
            need = sum(bits[v] for v in a)
            if need > MAX_BITS:
                joined = [v for v in self.atoms[j] if v in self.joins]
                shown = ", ".join(self.names.get(v, v) for v in joined)
                raise SchemaError(
                    f"the multiway join over indexed tries packs each input's join columns in {MAX_BITS} "
                    f"bits; input {j}'s columns ({shown}) now need {need} bits for their "
                    "distinct values"
                    + (" and its other columns' codes under them" if self.own[j] else "")
                    + ": use maintenance='delta' for this join"
                )
        tries: list[dict[tuple[int, ...], PackedTrie]] = []
        for js in self.classes:
            j = js[0]
            mine = {}
            for lv in dict.fromkeys(lv for i in js for lv in self.layouts[i]):
                t = PackedTrie.empty(self._bits(j, lv, bits))
                if rows is not None and len(rows[j][1]):
                    t = _applied(t, lv, rows[j][0], rows[j][1])
                mine[lv] = t
            tries.append(mine)
        self.bits, self.tries = bits, tries

    def rows(self) -> list[pl.DataFrame]:
        """Each input's current rows (consolidated, with their weights)."""
        out = []
        for j, (m, w) in enumerate(self._rows()):
            cols = {
                v: self.dicts[v].decode(m[:, k]).rename(v)
                for k, v in enumerate(self.vatoms[j])
                if v in self.dicts
            }
            if self.own[j]:
                cols |= self._own(j, m[:, :-1], m[:, -1])
            out.append(
                pl.DataFrame(
                    [
                        *(cols[v].cast(self.schemas[j][v]) for v in self.atoms[j]),
                        pl.Series(WEIGHT, w, dtype=pl.Int64),
                    ]
                )
            )
        return out

    def _own(self, j: int, keys: np.ndarray, loc: np.ndarray) -> dict[str, pl.Series]:
        """Input j's own columns, by name, of rows of its join columns' codes and its local codes."""
        bits = self._bits(j, tuple(range(len(self.vatoms[j]))))
        got = self.coders[self.vatoms[j][-1]].decode(keys, loc, bits)
        return {c: got.to_series(i).rename(c) for i, c in enumerate(self.own[j])}

    def _rows(self) -> list[tuple[np.ndarray, np.ndarray]]:
        out = []
        for j, a in enumerate(self.vatoms):
            t = self.tries[self._class_of(j)][tuple(range(len(a)))]
            k, w = t.rows()
            m = np.stack(unpack(k, t.bits), axis=1) if len(k) else np.zeros((0, t.depth), np.int64)
            out.append((m, w))
        return out

    # -- a step --------------------------------------------------------------------------------------

    def step(self, deltas: Sequence[pl.DataFrame | None], undo: list | None = None) -> pl.DataFrame:
        """The join's change for these changes of the inputs (None: no change). `undo`: a callable that
        puts the state back as it was before this step is appended to it."""
        if undo is not None:
            saved = (
                self.tries,  # (a step makes a new list: the old tries stay valid)
                self.classes,
                self.bits,
                {id(d): (d.values, d.sorted, d.sorted_codes) for d in self.coding.values()},
                {id(c): c.state() for c in self.coders.values()},
            )
            undo.append(lambda: self._undo(saved))
        changes, overflow = self._codes(deltas)
        if overflow:  # a column outgrew its bits: repack every trie (the codes are kept)
            self._setup(self._rows())
        self._split(changes)
        old = self.tries
        new = []
        for c, js in enumerate(self.classes):
            m, w = changes[js[0]]
            tries = self.tries[c]
            new.append({lv: _applied(t, lv, m, w) for lv, t in tries.items()} if len(w) else tries)
        self.tries = new
        parts, rows = [], 0
        self.sought = 0  # candidates the terms' leaders gave, each sought by the other holders
        for k, (m, w) in enumerate(changes):  # term k: the inputs before k new, those after it old
            if len(w):
                part = self._term(k, m, w, old)
                rows += len(part)
                if len(part):
                    parts.append(part)
        self.last = {
            "terms": sum(1 for _, w in changes if len(w)),
            "rows": rows,
            "sought": self.sought,
            "classes": len(self.classes),
        }
        if not parts:
            return pl.DataFrame(schema=self.out_schema)
        return self._decode(np.concatenate(parts))

    def _split(self, changes: list[tuple[np.ndarray, np.ndarray]]) -> None:
        """Each class divided by its inputs' changes (equal changes stay together); `self.tries` (the
        tries before the step) made one per class, the split ones shared (their versions are equal)."""
        classes, tries = [], []
        for c, js in enumerate(self.classes):
            parts: list[list[int]] = []
            for j in js:
                m, w = changes[j]
                same = next(
                    (p for p in parts if _equal(changes[p[0]], (m, w))),
                    None,
                )
                if same is None:
                    parts.append([j])
                else:
                    same.append(j)
            for p in parts:
                classes.append(tuple(p))
                need = dict.fromkeys(lv for i in p for lv in self.layouts[i])
                tries.append({lv: t for lv, t in self.tries[c].items() if lv in need})
        self.classes, self.tries = classes, tries

    def _undo(self, saved: tuple) -> None:
        self.tries, self.classes, self.bits, dicts, coders = saved
        for key, d in self.coding.items():
            d.values, d.sorted, d.sorted_codes = dicts[key]
        for c in self.coders.values():
            c.set_state(coders[id(c)])
        self.last = {}

    def _coded_alike(self, i: int, j: int) -> bool:
        """Whether inputs i and j code their columns, position by position, by the same dictionaries (and
        their own columns, at the same positions, by the same coder)."""
        a, b = self.atoms[i], self.atoms[j]
        if len(a) != len(b) or any((u in self.joins) != (v in self.joins) for u, v in zip(a, b, strict=True)):
            return False
        coder = {**self.dicts, **self.coders}
        return all(coder[u] is coder[v] for u, v in zip(self.vatoms[i], self.vatoms[j], strict=True))

    def _codes(
        self, deltas: Sequence[pl.DataFrame | None]
    ) -> tuple[list[tuple[np.ndarray, np.ndarray]], bool]:
        """Each change as (codes (rows, columns) in the input's column order, weights), consolidated,
        rows with a NULL join column dropped; and whether a column outgrew its bits."""
        frames: list[pl.DataFrame | None] = []
        twin: dict[int, int] = {}  # an input whose change is an earlier one's, by position: coded once
        for j, d in enumerate(deltas):
            if d is None or d.height == 0:
                frames.append(None)
                continue
            joined = [v for v in self.atoms[j] if v in self.joins]
            f = matchable(d.select([*self.atoms[j], WEIGHT]), joined)
            frames.append(f)
            for i, g in enumerate(frames[:j]):
                if g is not None and self._coded_alike(i, j) and g.height == f.height:
                    if g.rename(dict(zip(g.columns, f.columns, strict=True))).equals(f):
                        twin[j] = i
                        break
        codes: list[dict[str, np.ndarray]] = [{} for _ in frames]
        for key, coder in self.coding.items():
            cols = [
                (j, v)
                for j, f in enumerate(frames)
                if f is not None and j not in twin
                for v in self.vatoms[j]
                if v in self.dicts and id(self.dicts[v]) == key
            ]
            got = coder.encode([frames[j][v] for j, v in cols])  # type: ignore[index]
            for (j, v), c in zip(cols, got, strict=True):
                codes[j][v] = c
        out: list[tuple[np.ndarray, np.ndarray]] = []
        for j, got_f in enumerate(frames):
            if j in twin:
                out.append(out[twin[j]])
            elif got_f is None or got_f.height == 0:
                out.append((np.zeros((0, len(self.vatoms[j])), np.int64), np.zeros(0, np.int64)))
            else:
                joined = [v for v in self.vatoms[j] if v in self.dicts]
                m = np.zeros((got_f.height, len(self.vatoms[j])), np.int64)
                for i, v in enumerate(joined):
                    m[:, i] = codes[j][v]
                if self.own[j]:
                    m[:, -1] = self.coders[self.vatoms[j][-1]].encode(m[:, :-1], got_f.select(self.own[j]))
                out.append(consolidate_rows(m, got_f[WEIGHT].to_numpy().astype(np.int64)))
        return out, any(n >= (1 << self.bits[v]) - 1 for v, n in self._sizes().items())

    def _term(
        self, k: int, m: np.ndarray, w: np.ndarray, old: list[dict[tuple[int, ...], PackedTrie]]
    ) -> np.ndarray:
        """Input k's change (codes `m`, weights `w`) joined with the inputs before k as they are after
        this step (`self.tries`) and those after k as they were before it (`old`): rows of every
        level's code (in `self.vcolumns`' order) and a last column of weights."""
        order = self.orders[k]
        n = len(self.vatoms)
        others = [j for j in range(n) if j != k]
        tries = {}
        for j in others:
            lv = _layout(self.vatoms[j], order)
            tries[j] = (self.tries if j < k else old)[self._class_of(j)][lv]
        bound = len(self.vatoms[k])
        prefix = m  # the change's columns are the order's first
        depth = {j: sum(1 for v in self.vatoms[k] if v in self.vatoms[j]) for j in others}
        keys: dict[int, np.ndarray] = {}
        alive = np.ones(len(w), dtype=bool)
        for j in others:
            if depth[j]:
                t = tries[j]
                keys[j] = pack([m[:, order.index(v)] for v in order[:bound] if v in self.vatoms[j]], t.bits)
                alive &= find_sorted(t.keys[depth[j] - 1], keys[j])[1]
            else:
                keys[j] = np.zeros(len(w), np.int64)
        prefix, weight = prefix[alive], w[alive]
        keys = {j: kk[alive] for j, kk in keys.items()}
        for level in range(bound, len(order)):
            v = order[level]
            hs = [j for j in others if v in self.vatoms[j]]
            end = np.int64((1 << self.bits[v]) - 1)
            parent, code, _, _, _, led = first_keys(
                [tries[j] for j in hs],
                [depth[j] for j in hs],
                [keys[j] for j in hs],
                np.full(len(prefix), -1, dtype=np.int64),
                np.full(len(prefix), end, dtype=np.int64),
                end,
                False,
                None,
            )
            self.sought += led
            prefix = np.concatenate([prefix[parent], code[:, None]], axis=1)
            weight = weight[parent]
            for j in others:
                keys[j] = keys[j][parent]
            for j in hs:
                keys[j] = (keys[j] << np.int64(tries[j].bits[depth[j]])) | code
                depth[j] += 1
            if not len(prefix):
                break
        if not len(prefix):
            return np.zeros((0, len(self.vcolumns) + 1), dtype=np.int64)
        for j in others:
            lk, lw = tries[j].rows()
            weight = checked_mul(weight, lw[np.searchsorted(lk, keys[j])])
        cols = [prefix[:, order.index(c)] for c in self.vcolumns]
        return np.stack([*cols, weight], axis=1)

    def _decode(self, rows: np.ndarray) -> pl.DataFrame:
        at = {c: i for i, c in enumerate(self.vcolumns)}
        cols = {c: self.dicts[c].decode(rows[:, at[c]]).rename(c) for c in self.columns if c in self.dicts}
        for j, a in enumerate(self.vatoms):
            if self.own[j]:
                cols |= self._own(j, rows[:, [at[v] for v in a[:-1]]], rows[:, at[a[-1]]])
        return pl.DataFrame(
            [
                *(cols[c].cast(self.out_schema[c]) for c in self.columns),
                pl.Series(WEIGHT, rows[:, -1], dtype=pl.Int64),
            ],
            schema=self.out_schema,
        )


def _layout(atom: Sequence[str], order: Sequence[str]) -> tuple[int, ...]:
    """The positions of the atom's columns in the order `order` reads them."""
    return tuple(sorted(range(len(atom)), key=lambda p: order.index(atom[p])))


def _applied(t: PackedTrie, lv: tuple[int, ...], m: np.ndarray, w: np.ndarray) -> PackedTrie:
    """Trie `t` (columns at positions `lv` of its input's) after adding weights `w` to the rows of codes
    `m` (the input's column order, consolidated)."""
    key = pack([m[:, p] for p in lv], t.bits)
    order = np.argsort(key, kind="stable")
    return t.apply(key[order], w[order])[0]


def _equal(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> bool:
    """Whether two consolidated changes (codes, weights) are the same rows with the same weights."""
    if a is b:  # (a change coded once for its twins: `_codes`)
        return True
    return a[0].shape == b[0].shape and bool(np.array_equal(a[1], b[1])) and bool(np.array_equal(a[0], b[0]))
