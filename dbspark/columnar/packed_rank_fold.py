"""The fold of a ranked recursive distinct by NumPy (`columnar/rank_fold.py` says what it computes).

Facts of integer-like columns without NULLs are folded here: each row's fact packed into one int64 (each
column by its offset from the parts' least value, side by side), so that a fact's rows are found by one
sort and binary searches, and its counts summed by positions. Polars' group-by on the fact's columns
(the plans of `RankFold`, which serve other facts: strings, NULLs, more than 62 bits) costs several
times as much on a step's rows; the old fold's measurement (2026-12-03): 0.22 s for 650k rows of three
int64 columns, a sort of the packed keys 0.07 s.

Its names (the rows' columns and where each goes) are defined here and used by `rank_fold`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import polars as pl

from dbspark.algebra.consolidate import INTEGER_LIKE, WEIGHT, index
from dbspark.algebra.weights import magnitude
from dbspark.columnar.packed_trie import pack
from dbspark.errors import WeightError

RANK = "__rank"
BELOW, ABOVE, TOP = "__below", "__above", "__top"
COUNTS = (BELOW, ABOVE, TOP)
TO = "__to"  # which way a row of the fold goes: 0 out, 1 to the facts, 2 to the removed facts
OUT, FACTS, REMOVED = 0, 1, 2
KEPT = "__kept"  # (counting only) a fact removed while some derivation of it is left


_BITS = 62
_LOW = np.iinfo(np.int64).min


def _ints(s: pl.Series) -> np.ndarray:
    """An integer-like column without NULLs as int64 values (a Polars cast is a query: ~0.1 ms)."""
    return s.to_numpy() if s.dtype == pl.Int64 else s.to_physical().cast(pl.Int64).to_numpy()


def _sums(at: np.ndarray, w: np.ndarray, n: int) -> np.ndarray:
    """The sums of `w` by position `at` (0 <= at < n), exact in int64."""
    if len(w) == 0 or bool((w == 1).all()):  # (no float weights: a count)
        return np.bincount(at, minlength=n).astype(np.int64, copy=False)
    if magnitude(w) * len(w) < 2**53:  # (every float sum exact)
        return np.bincount(at, weights=w, minlength=n).astype(np.int64)
    out = np.zeros(n, dtype=np.int64)
    np.add.at(out, at, w)
    return out


def _packed(cols: list[np.ndarray]) -> np.ndarray | None:
    """Columns of integers as one int64 column of the same order (each by its offset from its least
    value, side by side), or None where they need more than 62 bits together."""
    out, used = np.zeros(len(cols[0]), dtype=np.int64), 0
    if not len(out):
        return out
    for c in cols:
        lo, hi = int(c.min()), int(c.max())
        bits = max(1, (hi - lo).bit_length())
        used += bits
        if used > _BITS:
            return None
        out = (out << np.int64(bits)) | (c - np.int64(lo))
    return out


_DENSE = 1 << 28  # packed facts below this (and below 16 per fact given) are placed by a table


def _dense_top(keys: np.ndarray) -> int | None:
    """The largest of `keys` where they are dense enough to be placed by a table indexed by the key
    (non-negative, below `_DENSE` and 16 per key), else None."""
    n = len(keys)
    if n == 0:
        return None
    lo, hi = int(keys.min()), int(keys.max())
    return None if lo < 0 or hi >= _DENSE or hi >= 16 * n else hi


def _table(keys: np.ndarray) -> np.ndarray | None:
    """The position of each of `keys` by key (-1 elsewhere), when they are dense enough (non-negative,
    below `_DENSE` and 16 per key) and distinct; else None. Positions as int32 where they fit (4 bytes a
    slot: transitive closure of 5,000 nodes, 24M facts packed below 2^27, a 328 MB table; placing its
    36M later derivations by it took 1.8-1.9 s against 3.2-3.5 s by a sort and binary searches)."""
    n = len(keys)
    hi = _dense_top(keys)
    if hi is None:
        return None
    kind = np.int32 if n < 2**31 else np.intp
    table = np.full(hi + 1, -1, dtype=kind)
    at = np.arange(n, dtype=kind)
    table[keys] = at
    return table if bool((table[keys] == at).all()) else None


def _look_up(table: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each of `at`: its position by `table` (0 where none), and whether it has one."""
    inside = (at >= 0) & (at < len(table))
    pos = table[np.where(inside, at, 0)]
    return np.maximum(pos, 0).astype(np.intp, copy=False), inside & (pos >= 0)


class FactCounts:
    """A part's rows of facts now (`_current`), by NumPy: per fact (its packed key, sorted), a row of the
    part holding it, its rank and counts."""

    def __init__(self, key: np.ndarray, part: pl.DataFrame) -> None:
        cols = [_ints(part[c]) for c in (RANK, *COUNTS)]
        w = part[WEIGHT].to_numpy()
        self.table: np.ndarray | None = None
        if len(key) and bool((w == 1).all()):
            self.table = _table(key)
            if self.table is not None:  # (each fact once, found by the table: no sort)
                self._set(key, np.arange(len(key)), cols)
                return
            at = np.argsort(key, kind="stable")
            if len(at) < 2 or bool((key[at][1:] != key[at][:-1]).all()):
                self._set(key, at, cols)
                return
        # rows of earlier versions and their removals: summed by the whole row (packed into one int64
        # where it fits, as it does unless a count is huge: one sort and one comparison)
        packed = _packed([key, *cols])
        whole = [key, *cols] if packed is None else [packed]
        order = np.lexsort(whole[::-1]) if packed is None else np.argsort(packed, kind="stable")
        rows = [r[order] for r in whole]
        new = np.ones(len(order), dtype=bool)
        if len(order):
            new[1:] = np.any([r[1:] != r[:-1] for r in rows], axis=0)
        starts = np.flatnonzero(new)
        summed = np.add.reduceat(w[order], starts) if len(order) else w[:0]
        at = order[starts[summed > 0]]
        self._set(key, at, cols)

    def _set(self, key: np.ndarray, at: np.ndarray, cols: list[np.ndarray]) -> None:
        self.at = at  # a row of each fact in the part
        self.key = key[at]  # (sorted, unless found by `table`)
        self.rank, self.below, self.above, self.top = (c[at] for c in cols)

    def find(self, key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each key: whether a fact here has it, and its place (where it has)."""
        if self.table is not None:
            pos, found = _look_up(self.table, key)
            return found, pos
        pos = np.searchsorted(self.key, key)
        found = pos < len(self.key)
        found[found] = self.key[pos[found]] == key[found]
        return found, pos

    def applied(self, pos: np.ndarray, s: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, ...]:
        """The counts after changes at facts `pos` (rank s, weight w): touched, b, a, t and changed."""
        n = len(self.key)
        below = s < self.rank[pos]
        b = self.below + _sums(pos[below], w[below], n)
        a = self.above + _sums(pos[~below], w[~below], n)
        a += np.minimum(b, 0)
        b = np.maximum(b, 0)
        t = self.top.copy()
        up = ~below & (w > 0)
        np.maximum.at(t, pos[up], s[up])
        touched = np.bincount(pos, minlength=n) > 0
        changed = touched & ((b != self.below) | (a != self.above) | (t != self.top))
        return touched, b, a, t, changed


class PackedFold:
    """The fold by NumPy: each row's fact packed into one int64 (each column by its offset from the
    parts' least value, side by side)."""

    def __init__(self, cols: tuple[str, ...], parts: list[pl.DataFrame], keys: list[np.ndarray], count: bool):
        self.cols, self.parts, self.keys, self.count = cols, parts, keys, count
        self.out: list[tuple] = []  # (part, rows, counts, to, weight, kept) of each `_emit`

    @staticmethod
    def of(cols: tuple[str, ...], parts: list[pl.DataFrame], count: bool) -> PackedFold | None:
        """The parts packed, or None when a fact column is not integer-like, holds a NULL, or the packed
        fact needs more than 62 bits."""
        schemas = [p.schema for p in parts]
        for c in cols:
            if not all(isinstance(s[c], INTEGER_LIKE) for s in schemas) or any(
                p[c].has_nulls() for p in parts
            ):
                return None
        whole = _packed([np.concatenate([_ints(p[c]) for p in parts]) for c in cols])
        if whole is None:
            return None
        ends = np.cumsum([p.height for p in parts])[:-1]
        return PackedFold(cols, parts, np.split(whole, ends), count)

    def _emit(
        self,
        part: int,
        at: np.ndarray,
        to: int,
        weight: int,
        counts: tuple[np.ndarray, ...],
        kept: np.ndarray | None = None,
    ) -> None:
        """Rows of the facts at rows `at` of part `part`: the fact's columns from there, `counts` (rank,
        b, a, t), going `to`, of weight `weight` (gathered by `_result`)."""
        if len(at):
            k = np.zeros(len(at), dtype=bool) if kept is None else kept
            self.out.append((part, at, counts, np.full(len(at), to), np.full(len(at), weight), k))

    def _result(self) -> pl.DataFrame:
        """The rows emitted: each part's facts' columns gathered once."""
        frames = []
        for part in sorted({e[0] for e in self.out}):
            es = [e for e in self.out if e[0] == part]
            p, idx = self.parts[part], index(np.concatenate([e[1] for e in es]))
            out = [p.get_column(c).gather(idx) for c in self.cols]
            for i, c in enumerate((RANK, *COUNTS)):
                out.append(pl.Series(c, np.concatenate([e[2][i] for e in es]), dtype=pl.Int64))
            out.append(pl.Series(TO, np.concatenate([e[3] for e in es]), dtype=pl.Int64))
            if self.count:
                out.append(pl.Series(KEPT, np.concatenate([e[5] for e in es]), dtype=pl.Boolean))
            out.append(pl.Series(WEIGHT, np.concatenate([e[4] for e in es]), dtype=pl.Int64))
            frames.append(pl.DataFrame(out))
        if not frames:
            schema = {
                **{c: self.parts[1].schema[c] for c in self.cols},
                **{c: pl.Int64() for c in (RANK, *COUNTS, TO)},
            }
            if self.count:
                schema[KEPT] = pl.Boolean()
            return pl.DataFrame(schema={**schema, WEIGHT: pl.Int64()})
        return pl.concat(frames, how="vertical_relaxed") if len(frames) > 1 else frames[0]

    def supports(self) -> pl.DataFrame:
        """`supports`: part 0 the facts (each once, at its rank), part 1 their derivations (summed)."""
        facts, counts = self.parts
        s, w = _ints(counts[RANK]), counts[WEIGHT].to_numpy()
        return _supports_of(facts, self.cols, self.keys[0], self.keys[1], s, w)

    def _change(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        d = self.parts[0]
        return self.keys[0], _ints(d[RANK]), d[WEIGHT].to_numpy()

    def overdelete(self) -> pl.DataFrame:
        """`RankFold._overdelete`."""
        key, s, w = self._change()
        for part in (1, 2):  # the facts held, then those removed so far
            st = FactCounts(self.keys[part], self.parts[part])
            found, pos = st.find(key)
            if part == 1:
                rest = ~found
            else:
                found &= rest
            touched, b, a, t, changed = st.applied(pos[found], s[found], w[found])
            old = (st.rank, st.below, st.above, st.top)
            if part == 1:
                gone = touched & (b <= 0)
                kept = ~gone & changed
                self._emit(1, st.at[gone], OUT, -1, tuple(c[gone] for c in old), (a > 0)[gone])
                self._emit(1, st.at[gone], FACTS, -1, tuple(c[gone] for c in old))
                self._emit(1, st.at[gone], REMOVED, 1, (st.rank[gone], b[gone], a[gone], t[gone]))
                self._emit(1, st.at[kept], FACTS, -1, tuple(c[kept] for c in old))
                self._emit(1, st.at[kept], FACTS, 1, (st.rank[kept], b[kept], a[kept], t[kept]))
            else:
                self._emit(2, st.at[changed], REMOVED, -1, tuple(c[changed] for c in old))
                self._emit(
                    2, st.at[changed], REMOVED, 1, (st.rank[changed], b[changed], a[changed], t[changed])
                )
        return self._result()

    def normal(self) -> pl.DataFrame:
        """`RankFold._normal`."""
        key, s, w = self._change()
        st = FactCounts(self.keys[1], self.parts[1])
        found, pos = st.find(key)
        touched, b, a, t, changed = st.applied(pos[found], s[found], w[found])
        old = (st.rank, st.below, st.above, st.top)
        goes = touched & (b + a <= 0)
        stays = ~goes & changed
        self._emit(1, st.at[goes], OUT, -1, tuple(c[goes] for c in old))
        self._emit(1, st.at[goes], FACTS, -1, tuple(c[goes] for c in old))
        self._emit(1, st.at[stays], FACTS, -1, tuple(c[stays] for c in old))
        self._emit(1, st.at[stays], FACTS, 1, (st.rank[stays], b[stays], a[stays], t[stays]))
        # the facts coming in: the change's rows at facts not held, and the removed facts' counts
        g = FactCounts(self.keys[2], self.parts[2])
        lump = g.above > 0
        new = ~found
        ek = np.concatenate([key[new], g.key[lump]])
        es = np.concatenate([s[new], g.top[lump]])
        ew = np.concatenate([w[new], g.above[lump]])
        epart = np.concatenate(
            [np.zeros(int(new.sum()), dtype=np.int8), np.full(int(lump.sum()), 2, dtype=np.int8)]
        )
        erow = np.concatenate([np.flatnonzero(new), g.at[lump]])
        if len(ek) == 0:
            return self._result()
        order = np.lexsort((es, ek))
        ek, es, ew, epart, erow = ek[order], es[order], ew[order], epart[order], erow[order]
        # summed by (fact, rank), then the count so far within each fact
        run = np.ones(len(ek), dtype=bool)
        run[1:] = (ek[1:] != ek[:-1]) | (es[1:] != es[:-1])
        rs = np.flatnonzero(run)
        ek, es, epart, erow = ek[rs], es[rs], epart[rs], erow[rs]
        ew = np.add.reduceat(ew, rs)
        fs = np.flatnonzero(np.concatenate(([True], ek[1:] != ek[:-1])))
        cum = np.cumsum(ew)
        base = np.repeat(cum[fs] - ew[fs], np.diff(np.append(fs, len(ek))))
        pre = cum - base
        total = np.add.reduceat(ew, fs)
        big = np.int64(len(ek))
        first = np.minimum.reduceat(np.where(pre > 0, np.arange(len(ek)), big), fs)
        top = np.maximum.reduceat(np.where(ew > 0, es, _LOW), fs)
        come = total > 0  # (then a count so far is positive: `first` is a place)
        f = first[come]
        k_, b_ = es[f], pre[f]
        counts = (k_ + 1, b_, total[come] - b_, np.maximum(k_, top[come]))
        rep = fs[come]  # a row of each fact: its columns
        for part in (0, 2):
            m = epart[rep] == part
            if m.any():
                sub = tuple(c[m] for c in counts)
                self._emit(part, erow[rep][m], OUT, 1, sub)
                self._emit(part, erow[rep][m], FACTS, 1, sub)
        return self._result()


def packed_supports(
    facts: pl.DataFrame, cols: tuple[str, ...], keys: np.ndarray, w: np.ndarray, layout: list[tuple[int, int]]
) -> pl.DataFrame | None:
    """`rank_fold.supports` from derivations packed by a `RowSet` (`keys`: (fact, rank) in `layout`,
    each column's bits and least value, the rank last; `w` summed), without decoding them: a derivation's
    fact is its key's high bits, its rank the low ones, and the facts are packed in the same layout.
    None when a fact does not fit the layout (not one of the derivations')."""
    fact_layout, (rank_bits, rank_lo) = layout[:-1], layout[-1]
    codes = [_ints(facts[c]) - np.int64(lo) for c, (_, lo) in zip(cols, fact_layout, strict=True)]
    for code, (bits, _) in zip(codes, fact_layout, strict=True):
        if len(code) and (int(code.min()) < 0 or int(code.max()) >= 1 << bits):
            return None
    fk = pack(codes, [bits for bits, _ in fact_layout])
    at = keys >> np.int64(rank_bits)
    s = (keys & np.int64((1 << rank_bits) - 1)) + np.int64(rank_lo)
    return _supports_of(facts, cols, fk, at, s, w)


def _places(keys: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each of `at`: the position of the equal one of `keys` (distinct), and whether there is one.
    By a table indexed by the key where the keys are dense enough (`_table`; tc at 2,000 nodes: 13M
    derivations among 3.8M facts of 24 bits, one gather against a binary search each), else by a sort
    and binary searches."""
    n = len(keys)
    if n == 0:
        return np.zeros(len(at), dtype=np.intp), np.zeros(len(at), dtype=bool)
    table = _table(keys)
    if table is not None:
        return _look_up(table, at)
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    pos = np.minimum(np.searchsorted(sk, at), n - 1)
    return order[pos], sk[pos] == at


def _placer(keys: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """A lookup of keys each one of `keys` (distinct): their positions in `keys`. By a table indexed by
    the key where they are dense enough (as `_table`), left unfilled where no key is (the keys looked up
    are known to be there: no -1 to write first, no check); else by a sort and binary searches (a key
    not there is an error). Transitive closure of 5,000 nodes: 36M derivations of 24M facts, whose
    table of 2^26 slots, filled with -1 first and checked, took 2.2 s of the round supports' 4.2."""
    n = len(keys)
    hi = _dense_top(keys)
    if hi is not None:
        kind = np.int32 if n < 2**31 else np.intp
        table = np.empty(hi + 1, dtype=kind)
        table[keys] = np.arange(n, dtype=kind)

        def by_table(at: np.ndarray) -> np.ndarray:
            if len(at) and (int(at.min()) < 0 or int(at.max()) > hi):
                raise AssertionError("a fresh run's derivation of a fact it did not derive")
            return table[at]

        return by_table
    order = np.argsort(keys, kind="stable")
    sk = keys[order]

    def by_search(at: np.ndarray) -> np.ndarray:
        if not n:
            if len(at):
                raise AssertionError("a fresh run's derivation of a fact it did not derive")
            return np.zeros(0, dtype=np.intp)
        pos = np.minimum(np.searchsorted(sk, at), n - 1)
        if not bool((sk[pos] == at).all()):
            raise AssertionError("a fresh run's derivation of a fact it did not derive")
        return order[pos]

    return by_search


def _supports_of(
    facts: pl.DataFrame, cols: tuple[str, ...], keys: np.ndarray, at: np.ndarray, s: np.ndarray, w: np.ndarray
) -> pl.DataFrame:
    """The rows of `facts` (each once, at its rank; `keys` their packed facts) with their counts, from
    their derivations: each of the fact `at` (packed the same way), of rank `s` and weight `w` (summed
    by fact and rank): b the weights below the fact's rank, a the others, t the largest rank of those
    (at least the rank - 1). The derivations of a fact not given are left out."""
    n = facts.height
    fact, given = _places(keys, at)  # (each derivation's fact)
    if not bool(given.all()):
        fact, s, w = fact[given], s[given], w[given]
    r = _ints(facts[RANK])
    below = s < r[fact]
    t = r - 1
    np.maximum.at(t, fact[~below], s[~below])
    return _counted(facts, cols, _sums(fact[below], w[below], n), _sums(fact[~below], w[~below], n), t)


def _counted(
    facts: pl.DataFrame, cols: tuple[str, ...] | list[str], b: np.ndarray, a: np.ndarray, t: np.ndarray
) -> pl.DataFrame:
    """The rows of `facts` (each once, at its rank) with their counts b, a, t, weight 1."""
    return pl.DataFrame(
        [
            *(facts.get_column(c) for c in cols),
            facts.get_column(RANK),
            pl.Series(BELOW, b),
            pl.Series(ABOVE, a),
            pl.Series(TOP, t),
            pl.Series(WEIGHT, np.ones(facts.height, dtype=np.int64)),
        ]
    )


def round_supports(
    facts: pl.DataFrame,
    cols: list[str],
    rounds: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
    ranks: list[int],
) -> pl.DataFrame:
    """`rank_fold.supports` from a fresh run's rounds (`RowSet.fresh_round`): round i's derivations all of
    rank `ranks[i]`, summed by fact (`keys`, sorted, once each; `w`), `new` the facts first derived there.
    `facts` holds the rounds' new facts in that order (each once, at its rank), so a new fact's place is
    its count so far and only the derivations of earlier facts are looked up (`_placer`: one table for
    all rounds). Per fact: b the weights of its derivations below its rank, a the others, t the largest rank
    of those (at least the rank - 1); each round adds to a fact once (its keys are distinct)."""
    n = facts.height
    fact_keys = np.concatenate([k[new] for k, _, new in rounds]) if rounds else np.zeros(0, np.int64)
    if len(fact_keys) != n:
        raise AssertionError("a fresh run's facts are not its rounds' new ones")
    total = sum(magnitude(w) * len(w) for _, w, _ in rounds if len(w))
    if total >= 2**63 - 1:
        raise WeightError("weight overflow while counting a recursive distinct's derivations")
    olds = [~new for _, _, new in rounds]  # (each round's derivations of earlier facts)
    place = _placer(fact_keys)
    places = [place(k[o]) for (k, _, _), o in zip(rounds, olds, strict=True)]
    r = _ints(facts[RANK])
    below, above, top = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64), r - 1
    # rounds of rising ranks (a fresh run's iterations): a later round's derivations rank at or above
    # the fact's rank (1 + its first round's), so they are counted above it, and the last one raises top
    # to its rank: no fact's rank or top is read (three reads at random of 36M derivations' facts at
    # transitive closure of 5,000 nodes)
    rising = all(a < b for a, b in zip(ranks, ranks[1:], strict=False))
    at_new = 0
    for (_, w, new), s, o, p in zip(rounds, ranks, olds, places, strict=True):
        k = len(w) - len(p)
        below[at_new : at_new + k] = w[new]  # (its first round: the derivations' rank is its rank - 1)
        at_new += k
        wo = w[o]
        if rising:
            above[p] += wo
            top[p] = s
            continue
        b = s < r[p]
        if b.any():
            below[p[b]] += wo[b]
            p, wo = p[~b], wo[~b]
        above[p] += wo
        top[p] = np.maximum(top[p], s)
    return _counted(facts, cols, below, above, top)
