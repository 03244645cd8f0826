"""Incremental maintenance of a leapfrog join by sensitivity indices and the change oracle
(`lftj-incremental-maintenance.txt` §4; the derivation, with the soundness argument, is in
`docs/multiway-joins.md`, "Maintenance by sensitivity indices").

The join is evaluated by leapfrog triejoin over each atom's `PackedTrie`, every column a level (the join
variables first, in the planner's order, then each atom's own columns). At a variable, for every partial
binding at once, the holders' keys are intersected in one of two disciplines: `"leapfrog"` as §4.1
describes it (each iterator is opened, or sought to the start of the region evaluated; while they
disagree, the one at the least key seeks the greatest; when they agree the key is emitted and the first
atom's iterator moves to its next key; the run ends when one reaches its end or passes the region), one
round of NumPy calls per operation; or `"smallest"` (the default), the holder with the fewest keys in
the region leading and the others seeking each of its keys, with no rounds. Each operation is recorded
as §4.1's sensitivity interval of the iterator's atom (open: [-∞, v]; seek to t landing at v: [t, v];
next from v to v': [v, v']), in the atom's index for that depth (§4.2: keyed by the atom's codes before
the variable, with the codes of every variable bound before it as payload), an `IntervalIndex` (§3.2).

A step (`MaintainedJoin.step`) applies each input's change to its trie, which gives the tree surgery
operations (§4.2.1); each operation is matched against its atom's index at its depth (§4.2.2; matched
intervals are removed) and each match names a region of the tuple space, the variables bound before
and an interval of the next: the change oracle. The regions are merged (overlapping intervals of one
prefix united; a region inside a shallower one dropped), the join is evaluated over them on the old and
on the new tries, and the difference is the join's change (§1.2's maintenance rule); the new
evaluation's operations are recorded, ready for the next step. With `regions="intervals"` (the seed's
§4.1) a region's interval is the whole matched interval, removed from the index and recorded anew by
the evaluation; with `regions="points"` (the default) it is the changed value alone: a binding whose
result changed has the changed node's value there, so the point is enough for the result, and the
matched interval stays in the index, still a sound (wider) record, since a point's evaluation would not
record the part of the interval before it. When the index has grown to twice its
size after the last full evaluation (intervals of regions evaluated again that no change matched stay
behind, harmless but useless) it is rebuilt by one full evaluation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from dbspark.algebra.weights import checked_mul
from dbspark.algebra.zset import WEIGHT
from dbspark.columnar.intersections import leapfrog, smallest_leads
from dbspark.columnar.intervals import IntervalIndex
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
from dbspark.columnar.regions import Regions, normalize
from dbspark.columnar.short_circuit import Heads, exists
from dbspark.errors import SchemaError


@dataclass
class Trace:
    """What an evaluation recorded: per (atom, depth), the intervals' keys, ends and payloads."""

    rows: dict[tuple[int, int], list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]] = field(
        default_factory=dict
    )

    def record(
        self, atom: int, depth: int, key: np.ndarray, lo: np.ndarray, hi: np.ndarray, pay: np.ndarray
    ) -> None:
        if len(key):
            self.rows.setdefault((atom, depth), []).append((key, lo, hi, pay))

    def size(self) -> int:
        return sum(len(k) for parts in self.rows.values() for k, _, _, _ in parts)


class MaintainedJoin:
    """The natural join of n Z-set inputs (frames of `schemas`' columns and a weight), kept by §4's
    maintenance: `step` takes each input's change and returns the join's change (columns as
    `leapfrog.output_schema`). `last` holds the step's figures: surgery operations, intervals matched,
    regions evaluated, intervals recorded (the trace edit distance's two halves), and the oracle."""

    def __init__(
        self,
        schemas: Sequence[pl.Schema],
        order: Sequence[str] | None = None,
        regions: str = "points",
        discipline: str = "smallest",
        project: Sequence[str] | None = None,
        names: Mapping[str, str] | None = None,
    ) -> None:
        self.names = dict(names or {})  # what the errors call a column (a front end's own name for it)
        if regions not in ("points", "intervals"):
            raise ValueError(f"regions={regions!r}: 'points' or 'intervals'")
        if discipline not in ("smallest", "leapfrog"):
            raise ValueError(f"discipline={discipline!r}: 'smallest' or 'leapfrog'")
        self.regions = regions
        self.discipline = discipline
        atoms = [[c for c in s if c != WEIGHT] for s in schemas]
        joins = join_variables(atoms)
        order = list(order) if order is not None else variable_order(atoms, [1] * len(atoms))
        if sorted(order) != sorted(joins):
            raise ValueError(f"the order {order} is not of the join variables {joins}")
        own = [c for a in atoms for c in a if c not in joins]
        self.order: list[str] = order + own  # every column a level: the join variables, then the rest
        self.out_schema = output_schema(schemas)
        self.head: int | None = None  # under `project`: how many levels (the first) the head binds
        if project is not None:
            self._project(project, discipline)
        self.atoms = atoms
        self.schemas = [pl.Schema({c: s[c] for c in a}) for s, a in zip(schemas, atoms, strict=True)]
        types = {c: t for s in self.schemas for c, t in s.items()}
        self.dicts = {v: Dictionary(types[v]) for v in self.order}
        self.levels = [[v for v in self.order if v in a] for a in atoms]  # each atom's columns, in order
        self.holders = [[i for i, lv in enumerate(self.levels) if v in lv] for v in self.order]
        self.last: dict[str, object] = {}
        self._setup(full=None)

    def _project(self, project: Sequence[str], discipline: str) -> None:
        """Short-circuit evaluation (§2.2.1; `columnar/short_circuit.py`): the output is the set of
        `project`'s bindings that some binding of the other columns completes with rows of positive
        weight, each of weight 1; its columns are bound first."""
        keep = list(dict.fromkeys(project))
        missing = [c for c in keep if c not in self.order]
        if missing or not keep:
            raise SchemaError(
                f"a multiway join's projection names {missing or 'no columns'}; its columns are {self.order}"
            )
        if discipline != "smallest":
            raise ValueError("short-circuit evaluation (project=) runs the 'smallest' discipline")
        self.order = [v for v in self.order if v in keep] + [v for v in self.order if v not in keep]
        self.head = len(keep)
        self.out_schema = pl.Schema([(c, t) for c, t in self.out_schema.items() if c in keep or c == WEIGHT])

    # -- state ---------------------------------------------------------------------------------------

    def _setup(self, full: list[tuple[np.ndarray, np.ndarray]] | None) -> None:
        """Bits from the dictionaries' sizes, the tries (of `full`'s rows as codes, else empty) and a
        fresh index from a full evaluation."""
        self.bits = {v: bits_for(len(self.dicts[v])) for v in self.order}
        self.tries = []
        for i, lv in enumerate(self.levels):
            need = sum(self.bits[v] for v in lv)
            if need > MAX_BITS:
                raise SchemaError(
                    f"the multiway join maintained by sensitivity indices packs each input's columns in "
                    f"{MAX_BITS} bits; input {i}'s columns ({', '.join(self.names.get(v, v) for v in lv)}) now "
                    f"need {need} bits for their "
                    "distinct values: use maintenance='delta' (joins='auto' in SQL and Datalog) for this join"
                )
            t = PackedTrie.empty([self.bits[v] for v in lv])
            if full is not None and len(full[i][0]):
                t, _ = t.apply(pack(list(full[i][0].T), t.bits), full[i][1])
            self.tries.append(t)
        self.index = {
            (i, d): IntervalIndex(width=self.order.index(v))
            for i, lv in enumerate(self.levels)
            for d, v in enumerate(lv)
        }
        trace = Trace()
        out = self._evaluate(self.tries, self._whole(), trace)
        self._file(trace)
        self.built = max(trace.size(), 1)
        if self.head is not None:
            bits = [self.bits[v] for v in self.order[: self.head]]
            if sum(bits) > MAX_BITS:
                raise SchemaError(
                    f"the multiway join's projection packs its columns ({', '.join(self.order[: self.head])}) "
                    f"in {MAX_BITS} bits and now needs {sum(bits)}: join without project= for this join"
                )
            self.heads = Heads.of(bits, out)

    def _end(self, level: int) -> np.int64:
        return np.int64((1 << self.bits[self.order[level]]) - 1)

    def _file(self, trace: Trace) -> None:
        for (i, d), parts in trace.rows.items():
            self.index[(i, d)].add(*(np.concatenate([p[k] for p in parts]) for k in range(4)))

    def _codes(
        self, deltas: Sequence[pl.DataFrame | None]
    ) -> tuple[list[tuple[np.ndarray, np.ndarray]], bool]:
        """Each change as (codes (rows, columns) in the atom's level order, weights), consolidated; and
        whether a variable outgrew its bits (then the tries are rebuilt)."""
        frames = []
        for i, d in enumerate(deltas):
            f = pl.DataFrame(schema={**self.schemas[i], WEIGHT: pl.Int64}) if d is None else d
            joined = [v for v in self.levels[i] if len(self.holders[self.order.index(v)]) > 1]
            frames.append(matchable(f.select([*self.levels[i], WEIGHT]), joined))
        codes: list[dict[str, np.ndarray]] = [{} for _ in frames]
        for li, v in enumerate(self.order):
            hs = self.holders[li]
            for i, c in zip(hs, self.dicts[v].encode([frames[i][v] for i in hs]), strict=True):
                codes[i][v] = c
        out = []
        for i, f in enumerate(frames):
            width = len(self.levels[i])
            m = (
                np.stack([codes[i][v] for v in self.levels[i]], axis=1)
                if f.height
                else np.zeros((0, width), np.int64)
            )
            out.append(consolidate_rows(m, f[WEIGHT].to_numpy().astype(np.int64)))
        return out, any(len(self.dicts[v]) >= (1 << self.bits[v]) - 1 for v in self.order)

    def _rows(self, tries: list[PackedTrie]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Each trie's rows as (codes, weights)."""
        out = []
        for t in tries:
            k, w = t.rows()
            out.append(
                (np.stack(unpack(k, t.bits), axis=1) if len(k) else np.zeros((0, t.depth), np.int64), w)
            )
        return out

    # -- a step --------------------------------------------------------------------------------------

    def step(self, deltas: Sequence[pl.DataFrame | None], undo: list | None = None) -> pl.DataFrame:
        """The join's change for these changes of the inputs (None: no change). `undo`: a callable that
        puts the state back as it was before this step is appended to it."""
        if undo is not None:
            saved = self._mark()
            undo.append(lambda: self._undo(saved))
        return self._step(deltas)

    def _mark(self) -> tuple:
        runs = {k: ix.mark() for k, ix in self.index.items()}
        dicts = {v: (d.values, d.sorted, d.sorted_codes) for v, d in self.dicts.items()}
        return (self.tries, self.bits, self.built, self.index, runs, dicts, getattr(self, "heads", None))

    def _undo(self, saved: tuple) -> None:
        self.tries, self.bits, self.built, index, runs, dicts, heads = saved
        if heads is not None:
            self.heads = heads
        for k, ix in index.items():
            ix.undo(runs[k])
        self.index = index
        for v, d in self.dicts.items():
            d.values, d.sorted, d.sorted_codes = dicts[v]
        self.last = {}

    def rows(self) -> list[pl.DataFrame]:
        """Each input's current rows (consolidated, with their weights)."""
        out = []
        for i, (m, w) in enumerate(self._rows(self.tries)):
            cols = [
                self.dicts[v].decode(m[:, k]).rename(v).cast(self.schemas[i][v])
                for k, v in enumerate(self.levels[i])
            ]
            f = pl.DataFrame([*cols, pl.Series(WEIGHT, w, dtype=pl.Int64)])
            out.append(f.select([*self.atoms[i], WEIGHT]))
        return out

    def _step(self, deltas: Sequence[pl.DataFrame | None]) -> pl.DataFrame:
        old_tries = self.tries
        changes, overflow = self._codes(deltas)
        if overflow:  # a variable outgrew its bits: repack and evaluate everything again
            old_out = self._evaluate(old_tries, self._whole(), None)
            rows = [
                consolidate_rows(np.concatenate([r[0], c[0]]), np.concatenate([r[1], c[1]]))
                for r, c in zip(self._rows(old_tries), changes, strict=True)
            ]
            self._setup(rows)
            new_out = self._evaluate(self.tries, self._whole(), None)
            self.last = {"rebuilt": True, "recorded": self.built}
            return self._decode(self._change(new_out, old_out))
        surgery = 0
        contributions: list[tuple[int, int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        matches: dict[int, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}
        matched = 0
        new_tries = []
        for i, (t, (m, w)) in enumerate(zip(old_tries, changes, strict=True)):
            if len(w) == 0:
                new_tries.append(t)
                continue
            nt, ops = t.apply(pack(list(m.T), t.bits), w)
            new_tries.append(nt)
            for d, op in enumerate(ops):
                if not len(op):
                    continue
                surgery += len(op)
                b = np.int64(t.bits[d])
                code = op & np.int64((1 << t.bits[d]) - 1)
                if self.regions == "intervals":  # §4.1: the matched intervals, removed and evaluated again
                    q, lo, hi, pay = self.index[(i, d)].take(op >> b, code)
                    found = (pay, lo, hi)
                else:  # the points changed within them: the intervals stay (sound, see the module docstring)
                    q, lo, hi, pay = self.index[(i, d)].find(op >> b, code)
                    found = (pay, code[q], code[q])
                contributions.append((i, d, op, q, lo, hi))
                matched += len(lo)
                lv = self.order.index(self.levels[i][d])
                if len(lo) and self.head is not None and lv >= self.head:
                    whole, found = self._widened(i, d, t, nt, op[q], found)
                    matches.setdefault(self.head, []).append(whole)
                if len(found[0]):
                    matches.setdefault(lv, []).append(found)
        self.tries = new_tries
        regions = normalize(
            {
                lv: Regions(*(np.concatenate([p[k] for p in parts]) for k in range(3)))
                for lv, parts in matches.items()
            }
        )
        trace = Trace()
        old_out = (
            self.heads.within(regions) if self.head is not None else self._evaluate(old_tries, regions, None)
        )
        new_out = self._evaluate(new_tries, regions, trace)
        if self.head is not None:
            self.heads = self.heads.update(old_out, new_out)
        self._file(trace)
        self.last = {
            "surgery": surgery,
            "matched": matched,
            "recorded": trace.size(),
            "regions": sum(len(r.lo) for r in regions.values()),
            "oracle": {lv: r for lv, r in regions.items()},
            "contributions": contributions,
        }
        if sum(len(ix) for ix in self.index.values()) > 2 * self.built + 1024:
            self._rebuild_index()
        return self._decode(self._change(new_out, old_out))

    def _change(self, new: np.ndarray, old: np.ndarray) -> np.ndarray:
        """new - old of two evaluations' rows; under a projection, of their head bindings."""
        if self.head is not None:
            h = self.head
            new, old = (np.concatenate([x[:, :h], x[:, -1:]], axis=1) for x in (new, old))
        return _difference(new, old)

    def _widened(
        self,
        i: int,
        d: int,
        old: PackedTrie,
        new: PackedTrie,
        op: np.ndarray,
        found: tuple[np.ndarray, np.ndarray, np.ndarray],
    ) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """The regions for an operation of atom i at depth d (a quantified level), each match's `found`
        (payload, lo, hi), as (head regions, regions left where they are). A head binding's answer is
        its whole subtree's, so a match that can make a present binding absent is widened to all of it
        (level `head`, every code): under `regions="points"`, one whose witness's row in atom i the
        operation leaves without a positive weight; one that can make an absent binding present (it
        adds a node or a row's positive weight: a new witness must have such a row, and passes through
        the point) stays, its evaluation saying whether a witness is there; any other cannot move the
        answer and is dropped (`columnar/short_circuit.py`). Under "intervals" every match is widened:
        its matched intervals were taken from the index and are recorded again by the evaluation."""
        h = self.head
        assert h is not None
        heads = found[0][:, :h]
        stay = np.zeros(len(heads), dtype=bool)
        if self.regions == "points":
            present, wit = self.heads.find(heads)
            if d == old.depth - 1:
                nk, nw = new.rows()
                ok, ow = old.rows()
                now = _weight_at(nk, nw, op)
                gains = (now > 0) & (_weight_at(ok, ow, op) <= 0)
                cols = [self.order.index(v) for v in self.levels[i]]
                loses = (now <= 0) & (pack(list(wit[:, cols].T), old.bits) == op)
            else:
                _, gains = find_sorted(new.keys[d], op)
                loses = np.zeros(len(op), dtype=bool)
            heads = heads[present & loses]
            stay = ~present & gains
        every = np.full(len(heads), -1, dtype=np.int64)
        whole = (heads, every, np.full(len(heads), self._end(h), dtype=np.int64))
        return whole, (found[0][stay], found[1][stay], found[2][stay])

    def _whole(self) -> dict[int, Regions]:
        return {0: Regions(np.zeros((1, 0), dtype=np.int64), np.array([-1]), np.array([self._end(0)]))}

    def _rebuild_index(self) -> None:
        self._setup(self._rows(self.tries))

    def _value(self, v: str, code: int) -> object:
        """A code as its value; None for -∞ (-1) and +∞ (the end marker)."""
        if code == -1 or code == (1 << self.bits[v]) - 1:
            return None
        return self.dicts[v].values[code]

    def contributions(self) -> list[tuple[int, tuple[object, ...], list[tuple[object, object]]]]:
        """The last step's tree surgery operations, each with the intervals it matched (§4.1.1's table):
        (atom, the operation's node as values, [(lo, hi), ...]); None stands for -∞ / +∞."""
        out = []
        for i, d, op, q, lo, hi in self.last.get("contributions", []):  # type: ignore[attr-defined]
            t = self.tries[i]
            path = unpack(op, t.bits[: d + 1])
            names = self.levels[i][: d + 1]
            v = names[-1]
            for k in range(len(op)):
                node = tuple(self._value(n, int(c[k])) for n, c in zip(names, path, strict=True))
                got = [
                    (self._value(v, int(a)), self._value(v, int(b)))
                    for a, b in zip(lo[q == k], hi[q == k], strict=True)
                ]
                out.append((i, node, got))
        return out

    def oracle(self) -> list[tuple[tuple[object, ...], object, object]]:
        """The last step's change oracle (§4.1): its regions as (values of the variables before, lo, hi)."""
        out = []
        for lv, r in sorted(self.last.get("oracle", {}).items()):  # type: ignore[attr-defined]
            names, v = self.order[:lv], self.order[lv]
            for k in range(len(r.lo)):
                pre = tuple(self._value(n, int(r.prefix[k, j])) for j, n in enumerate(names))
                out.append((pre, self._value(v, int(r.lo[k])), self._value(v, int(r.hi[k]))))
        return out

    def sensitivity(self, atom: int, depth: int) -> list[tuple[object, object]]:
        """The atom's sensitivity intervals at a depth, as values (None for -∞ / +∞), sorted; for tests
        and for explaining a step."""
        _, lo, hi, _ = self.index[(atom, depth)].rows()
        v = self.levels[atom][depth]
        out = [(self._value(v, a), self._value(v, b)) for a, b in zip(lo.tolist(), hi.tolist(), strict=True)]
        return sorted(
            out,
            key=lambda iv: (
                iv[0] is not None,
                iv[0] if iv[0] is not None else 0,
                iv[1] is None,
                iv[1] if iv[1] is not None else 0,
            ),
        )

    # -- evaluation ----------------------------------------------------------------------------------

    def _evaluate(
        self, tries: list[PackedTrie], regions: dict[int, Regions], trace: Trace | None
    ) -> np.ndarray:
        """The join's bindings over the regions, as rows of every variable's code and a last column of
        weights (summed over the regions, which are disjoint)."""
        parts = [self._evaluate_level(tries, lv, r, trace) for lv, r in sorted(regions.items()) if len(r.lo)]
        parts = [p for p in parts if len(p)]
        if not parts:
            return np.zeros((0, len(self.order) + 1), dtype=np.int64)
        rows = np.concatenate(parts)
        if self.head is not None:  # a head binding found in two regions (points under it) counts once
            _, first = np.unique(rows[:, : self.head], axis=0, return_index=True)
            rows = rows[np.sort(first)]
        return rows

    def _evaluate_level(
        self, tries: list[PackedTrie], start: int, r: Regions, trace: Trace | None
    ) -> np.ndarray:
        n = len(self.atoms)
        depth = [sum(1 for v in self.order[:start] if v in lv) for lv in self.levels]
        keys = [
            pack([r.prefix[:, self.order.index(v)] for v in lv[: depth[i]]], tries[i].bits)
            if depth[i]
            else np.zeros(len(r.lo), np.int64)
            for i, lv in enumerate(self.levels)
        ]
        alive = np.ones(len(r.lo), dtype=bool)
        for i in range(n):  # a prefix some atom lacks is not reached: nothing under it
            if depth[i]:
                alive &= find_sorted(tries[i].keys[depth[i] - 1], keys[i])[1]
        prefix = r.prefix[alive]
        keys = [k[alive] for k in keys]
        lo, hi = r.lo[alive], r.hi[alive]
        for lv in range(start, len(self.order) if self.head is None else self.head):
            if lv > start:
                lo = np.full(len(prefix), -1, dtype=np.int64)
                hi = np.full(len(prefix), self._end(lv), dtype=np.int64)
            hs = self.holders[lv]
            parent, code, ops = (leapfrog if self.discipline == "leapfrog" else smallest_leads)(
                [tries[i] for i in hs],
                [depth[i] for i in hs],
                [keys[i] for i in hs],
                lo,
                hi,
                self._end(lv),
                trace is not None,
            )
            if trace is not None:
                for h, key, a, b, at in ops:
                    trace.record(hs[h], depth[hs[h]], key, a, b, prefix[at])
            prefix = np.concatenate([prefix[parent], code[:, None]], axis=1)
            for i in range(n):
                keys[i] = keys[i][parent]
            for i in hs:
                keys[i] = (keys[i] << np.int64(tries[i].bits[depth[i]])) | code
                depth[i] += 1
        if self.head is not None:
            return self._heads(tries, start, depth, keys, prefix, lo, hi, trace)
        w = np.ones(len(prefix), dtype=np.int64)
        for i, t in enumerate(tries):
            lk, lw = t.rows()
            w = checked_mul(w, lw[np.searchsorted(lk, keys[i])]) if len(w) else w
        return np.concatenate([prefix, w[:, None]], axis=1)

    def _heads(
        self,
        tries: list[PackedTrie],
        start: int,
        depth: list[int],
        keys: list[np.ndarray],
        prefix: np.ndarray,
        lo: np.ndarray,
        hi: np.ndarray,
        trace: Trace | None,
    ) -> np.ndarray:
        """The head bindings `prefix` (every head level bound) that some binding of the levels after
        completes, by short-circuit evaluation, as rows of its witness's codes and weight 1. A region at
        the first quantified level is one head binding's whole subtree; one deeper (`start`), a part of
        it that an absent binding's new witness would pass through."""
        h = self.head
        assert h is not None
        if start < h:
            lo = np.full(len(prefix), -1, dtype=np.int64)
            hi = np.full(len(prefix), self._end(h) if h < len(self.order) else 0, dtype=np.int64)
        if h == len(self.order):  # nothing quantified: the rows of positive weight
            ok = np.ones(len(prefix), dtype=bool)
            for i, t in enumerate(tries):
                lk, lw = t.rows()
                ok &= lw[np.searchsorted(lk, keys[i])] > 0 if len(ok) else ok
            witness = prefix
        else:
            ok, witness = exists(
                tries,
                self.holders,
                [self._end(v) for v in range(len(self.order))],
                max(start, h),
                depth,
                keys,
                prefix,
                lo,
                hi,
                None if trace is None else trace.record,
            )
        rows = witness[ok]
        return np.concatenate([rows, np.ones((len(rows), 1), dtype=np.int64)], axis=1)

    def _decode(self, rows: np.ndarray) -> pl.DataFrame:
        cols = []
        for c in self.out_schema:
            if c == WEIGHT:
                continue
            cols.append(self.dicts[c].decode(rows[:, self.order.index(c)]).rename(c).cast(self.out_schema[c]))
        return pl.DataFrame([*cols, pl.Series(WEIGHT, rows[:, -1], dtype=pl.Int64)], schema=self.out_schema)


def _difference(new: np.ndarray, old: np.ndarray) -> np.ndarray:
    """new - old as consolidated rows of codes with a last column of weights."""
    rows = np.concatenate([new[:, :-1], old[:, :-1]])
    w = np.concatenate([new[:, -1], -old[:, -1]])
    m, s = consolidate_rows(rows, w)
    return np.concatenate([m, s[:, None]], axis=1) if len(s) else np.zeros((0, new.shape[1]), dtype=np.int64)


def _weight_at(keys: np.ndarray, weights: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The weights of the rows of packed keys `at` (0 for a row not there)."""
    pos, here = find_sorted(keys, at)
    return np.where(here, weights[pos], 0) if len(keys) else np.zeros(len(at), dtype=np.int64)
