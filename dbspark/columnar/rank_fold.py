"""The fold of a ranked recursive distinct (`operators/ranked_distinct.py`), in Polars: each fact's
supports counted beside it.

A ranked distinct keeps, for each fact it holds, one row (`docs/recursion-strategies.md`, "Ranks", and
"A fact's supports, counted beside it"): its columns, its rank `r`, and three counts of its derivations
among the facts held,

- `__below` (b): derivations counted as ranking below `r`: never more than those that do, so that
  b > 0 proves a derivation whose premises all rank below the fact (its support);
- `__above` (a): the others, so that b + a is exactly the fact's count of derivations;
- `__top` (t): at least the rank of every derivation counted in a (and at least r - 1).

A change of derivations at rank s, weight w, adds w to b where s < r, else to a (and raises t to s on
an insert). A loss that b cannot take (b would go below 0: the derivation lost was counted in a, whose
ranks are known only up to t) is taken from a. A fact that comes in (or comes back) at the least rank k
+ 1 where its derivations' prefix count up to k is positive: its derivations by rank, a fact removed
in the step counting its a at rank t. Every count up to k this reads is at most the derivations there
(b and a are under- and upper-bounded as above), so a positive one proves a derivation ranking at most
k; it then counts b = that prefix, a = the rest, t = the largest rank it read.

The distinct's parts, as its fold reads them (rows as a trace's seek gives them: a fact's row of an
earlier version and its removal, -1, may both be there): the change (the fact's columns, `__rank` = the
derivation's rank, the weight), the facts held at the change's facts (their rows), and, in the
over-delete, the facts removed so far in the step at the change's facts (their rows, b = 0), or in the
first evaluation after it, every fact the over-delete removed. It returns rows of three kinds (`TO`):
the distinct's output (0: the facts' changes, at their ranks), the rows to write to its facts (1), and
to the step's removed facts (2).

Before 2026-12-05 the distinct's input integral counted derivations by (fact, rank): 9.6M rows for
transitive closure's 3.8M pairs at 2,000 nodes, where this keeps one row per fact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from dbspark.algebra.consolidate import INTEGER_LIKE, WEIGHT, index
from dbspark.columnar.plans import collect

RANK = "__rank"
BELOW, ABOVE, TOP = "__below", "__above", "__top"
COUNTS = (BELOW, ABOVE, TOP)
TO = "__to"  # which way a row of the fold goes: 0 out, 1 to the facts, 2 to the removed facts
OUT, FACTS, REMOVED = 0, 1, 2
KEPT = "__kept"  # (counting only) a fact removed while some derivation of it is left
_S = "__s"  # a derivation's rank
_NEW = {BELOW: "__b", ABOVE: "__a", TOP: "__t"}


def state_schema(schema: pl.Schema) -> pl.Schema:
    """A ranked distinct's rows of facts: its output's columns (the fact's and the rank) and the counts."""
    return pl.Schema({**schema, **{c: pl.Int64() for c in COUNTS}})


def fold_schema(schema: pl.Schema, count: bool = False) -> pl.Schema:
    """The fold's rows (without the weight): the facts' rows and where each goes."""
    extra = {KEPT: pl.Boolean()} if count else {}
    return pl.Schema({**state_schema(schema), TO: pl.Int64(), **extra})


@dataclass(frozen=True)
class RankFold:
    """`cols`: the fact's columns. `overdelete`: remove each held fact of the change that has no
    derivation counted below its rank left; else H by facts (a fact of positive count not held comes
    in, a held fact of count 0 goes). `count`: the removals also say whether a derivation is left
    (`KEPT`)."""

    cols: tuple[str, ...]
    overdelete: bool
    count: bool = False

    def __call__(self, parts: list[pl.DataFrame]) -> pl.DataFrame:
        change, facts, other = parts
        packed = _Packed.of(self.cols, parts, self.count)
        if packed is not None:
            return packed.overdelete() if self.overdelete else packed.normal()
        rows = sum(p.height for p in parts)
        plans = (
            self._overdelete(change, facts, other) if self.overdelete else self._normal(change, facts, other)
        )
        out = collect(pl.concat(plans, how="diagonal_relaxed"), rows)
        return out.select(*self.cols, RANK, *COUNTS, TO, *([KEPT] if self.count else []), WEIGHT)

    # ---- the held facts' counts, changed -----------------------------------------------------------
    def _applied(self, change: pl.DataFrame, state: pl.LazyFrame) -> pl.LazyFrame:
        """Each fact of `state` (rows with its counts) that the change touches, with its counts after the
        change (`__b`, `__a`, `__t`) and whether they differ (`__changed`)."""
        cols = list(self.cols)
        d = change.lazy().select(*cols, pl.col(RANK).alias(_S), WEIGHT)
        below = pl.col(_S) < pl.col(RANK)
        w = pl.col(WEIGHT)
        per = (
            d.join(state, on=cols, how="inner", nulls_equal=True)
            .group_by(cols)
            .agg(
                pl.col(RANK, *COUNTS, "__held").first(),
                w.filter(below).sum().alias("__db"),
                w.filter(~below).sum().alias("__da"),
                pl.col(_S).filter(~below & (w > 0)).max().alias("__ds"),
            )
        )
        b = pl.col(BELOW) + pl.col("__db")
        a = pl.col(ABOVE) + pl.col("__da")
        return per.with_columns(
            pl.max_horizontal(b, 0).alias("__b"),
            (a + pl.min_horizontal(b, 0)).alias("__a"),
            pl.max_horizontal(pl.col(TOP), pl.col("__ds")).alias("__t"),
        ).with_columns(
            (
                (pl.col("__b") != pl.col(BELOW))
                | (pl.col("__a") != pl.col(ABOVE))
                | (pl.col("__t") != pl.col(TOP))
            ).alias("__changed")
        )

    def _rows(
        self, per: pl.LazyFrame, to: int, weight: int, new: bool = False, kept: pl.Expr | None = None
    ) -> pl.LazyFrame:
        """Rows of the facts of `per`, with their counts (old, or `new`: `__b`, `__a`, `__t`), going `to`
        (with `KEPT` if given)."""
        counts = [pl.col(_NEW[c] if new else c).alias(c) for c in COUNTS]
        extra = [] if kept is None else [kept.alias(KEPT)]
        return per.select(
            *self.cols,
            RANK,
            *counts,
            pl.lit(to, pl.Int64).alias(TO),
            *extra,
            pl.lit(weight, pl.Int64).alias(WEIGHT),
        )

    def _overdelete(
        self, change: pl.DataFrame, facts: pl.DataFrame, removed: pl.DataFrame
    ) -> list[pl.LazyFrame]:
        """The held facts of the change whose count below their rank drops to 0 go (out, from the facts,
        into the removed ones); the others' counts change in place; the removed ones' counts too."""
        cols = list(self.cols)
        state = pl.concat(
            [
                _current(facts, cols).with_columns(pl.lit(True).alias("__held")),
                _current(removed, cols).with_columns(pl.lit(False).alias("__held")),
            ]
        )
        per = self._applied(change, state)
        held, changed = pl.col("__held"), pl.col("__changed")
        gone = per.filter(held & (pl.col("__b") <= 0))
        kept = per.filter(held & (pl.col("__b") > 0) & changed)
        again = per.filter(~held & changed)
        kept_ = pl.col("__a") > 0 if self.count else None
        return [
            self._rows(gone, OUT, -1, kept=kept_),
            self._rows(gone, FACTS, -1),
            self._rows(gone, REMOVED, 1, True),
            self._rows(kept, FACTS, -1),
            self._rows(kept, FACTS, 1, True),
            self._rows(again, REMOVED, -1),
            self._rows(again, REMOVED, 1, True),
        ]

    def _normal(self, change: pl.DataFrame, facts: pl.DataFrame, gone: pl.DataFrame) -> list[pl.LazyFrame]:
        """H by facts: a held fact's counts change, and it goes when its count drops to 0; a fact not held
        (a new one, or one the over-delete removed: `gone`, each counting its a at rank t) comes in when
        its count is positive, at 1 + the least rank where its count so far is positive."""
        cols = list(self.cols)
        held = _current(facts, cols)
        per = self._applied(change, held.with_columns(pl.lit(True).alias("__held")))
        total = pl.col("__b") + pl.col("__a")
        goes = per.filter(total <= 0)
        stays = per.filter((total > 0) & pl.col("__changed"))
        # the facts coming in: their derivations by rank, summed, in order, with the count so far
        w = pl.col(WEIGHT)
        rows = pl.concat(
            [
                change.lazy()
                .select(*cols, pl.col(RANK).alias(_S), WEIGHT)
                .join(held, on=cols, how="anti", nulls_equal=True),
                _current(gone, cols)
                .filter(pl.col(ABOVE) > 0)
                .select(*cols, pl.col(TOP).alias(_S), pl.col(ABOVE).alias(WEIGHT)),
            ]
        )
        by_rank = (
            rows.group_by([*cols, _S])
            .agg(w.sum())
            .sort(_S)
            .with_columns(w.cum_sum().over(cols).alias("__pre"))
        )
        pre = pl.col("__pre")
        least = (
            by_rank.filter(pre > 0)
            .group_by(cols)
            .agg(pl.col(_S).min().alias("__k"), pre.sort_by(_S).first().alias("__b"))
        )
        whole = by_rank.group_by(cols).agg(
            w.sum().alias("__n"), pl.col(_S).filter(w > 0).max().alias("__top")
        )
        come = (
            least.join(whole, on=cols, nulls_equal=True)
            .filter(pl.col("__n") > 0)
            .with_columns(
                (pl.col("__k") + 1).alias(RANK),
                (pl.col("__n") - pl.col("__b")).alias("__a"),
                pl.max_horizontal(pl.col("__k"), pl.col("__top")).alias("__t"),
            )
        )
        return [
            self._rows(goes, OUT, -1),
            self._rows(goes, FACTS, -1),
            self._rows(stays, FACTS, -1),
            self._rows(stays, FACTS, 1, True),
            self._rows(come, OUT, 1, True),
            self._rows(come, FACTS, 1, True),
        ]


def _current(rows: pl.DataFrame, cols: list[str]) -> pl.LazyFrame:
    """The facts' rows now: a trace's rows at a fact are not consolidated across its runs (a fact's row
    of an earlier version and its removal may both be there)."""
    summed = rows.lazy().group_by([*cols, RANK, *COUNTS]).agg(pl.col(WEIGHT).sum())
    return summed.filter(pl.col(WEIGHT) > 0).drop(WEIGHT)


def supports(facts: pl.DataFrame, counts: pl.DataFrame, cols: list[str]) -> pl.DataFrame:
    """The rows of facts derived from empty state (`facts`: each fact once, at its rank) whose derivations
    are `counts` (the fact, `__rank` the derivation's, the weight: summed): each fact's counts as the
    fold would have kept them (`operators/fresh.py`)."""
    packed = _Packed.of(tuple(cols), [facts, counts], False)
    if packed is not None:
        return packed.supports()
    s = pl.col(_S)
    below = s < pl.col(RANK)
    plan = (
        counts.lazy()
        .select(*cols, pl.col(RANK).alias(_S), WEIGHT)
        .join(facts.lazy().select(*cols, RANK), on=cols, nulls_equal=True)
        .group_by(cols)
        .agg(
            pl.col(RANK).first(),
            pl.col(WEIGHT).filter(below).sum().alias(BELOW),
            pl.col(WEIGHT).filter(~below).sum().alias(ABOVE),
            s.filter(~below).max().alias("__ds"),
        )
        .select(
            *cols,
            RANK,
            BELOW,
            ABOVE,
            pl.max_horizontal(pl.col(RANK) - 1, pl.col("__ds")).alias(TOP),
            pl.lit(1, pl.Int64).alias(WEIGHT),
        )
    )
    return collect(plan, counts.height + facts.height)


_BITS = 62
_LOW = np.iinfo(np.int64).min


def _ints(s: pl.Series) -> np.ndarray:
    """An integer-like column without NULLs as int64 values (a Polars cast is a query: ~0.1 ms)."""
    return s.to_numpy() if s.dtype == pl.Int64 else s.to_physical().cast(pl.Int64).to_numpy()


def _sums(at: np.ndarray, w: np.ndarray, n: int) -> np.ndarray:
    """The sums of `w` by position `at` (0 <= at < n), exact in int64."""
    if len(w) == 0 or int(np.abs(w).max()) < 2**52:
        return np.bincount(at, weights=w, minlength=n).astype(np.int64)
    out = np.zeros(n, dtype=np.int64)
    np.add.at(out, at, w)
    return out


def _packed(cols: list[np.ndarray]) -> list[np.ndarray]:
    """Columns as one int64 column of the same order (each by its offset from its least value, side by
    side) where they fit 62 bits, else as they are."""
    if not len(cols[0]):
        return cols
    out, used = np.zeros(len(cols[0]), dtype=np.int64), 0
    for c in cols:
        lo, hi = int(c.min()), int(c.max())
        bits = max(1, (hi - lo).bit_length())
        used += bits
        if used > _BITS:
            return cols
        out = (out << np.int64(bits)) | (c - np.int64(lo))
    return [out]


class _State:
    """A part's rows of facts now (`_current`), by NumPy: per fact (its packed key, sorted), a row of the
    part holding it, its rank and counts."""

    def __init__(self, key: np.ndarray, part: pl.DataFrame) -> None:
        cols = [_ints(part[c]) for c in (RANK, *COUNTS)]
        w = part[WEIGHT].to_numpy()
        if len(key) and bool((w == 1).all()):
            at = np.argsort(key, kind="stable")
            if len(at) < 2 or bool((key[at][1:] != key[at][:-1]).all()):
                self._set(key, at, cols)
                return
        # rows of earlier versions and their removals: summed by the whole row (its rank and counts
        # packed into one int64 where they fit, as they do unless a count is huge)
        order = np.lexsort((*reversed(_packed(cols)), key))
        rows = [key[order], *(c[order] for c in cols)]
        new = np.ones(len(order), dtype=bool)
        if len(order):
            new[1:] = np.any([r[1:] != r[:-1] for r in rows], axis=0)
        starts = np.flatnonzero(new)
        summed = np.add.reduceat(w[order], starts) if len(order) else w[:0]
        at = order[starts[summed > 0]]
        self._set(key, at, cols)

    def _set(self, key: np.ndarray, at: np.ndarray, cols: list[np.ndarray]) -> None:
        self.at = at  # a row of each fact in the part
        self.key = key[at]
        self.rank, self.below, self.above, self.top = (c[at] for c in cols)

    def find(self, key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each key: whether a fact here has it, and its place (where it has)."""
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


class _Packed:
    """The fold by NumPy: each row's fact packed into one int64 (each column by its offset from the
    parts' least value, side by side)."""

    def __init__(self, cols: tuple[str, ...], parts: list[pl.DataFrame], keys: list[np.ndarray], count: bool):
        self.cols, self.parts, self.keys, self.count = cols, parts, keys, count
        self.out: list[tuple] = []  # (part, rows, counts, to, weight, kept) of each `_emit`

    @staticmethod
    def of(cols: tuple[str, ...], parts: list[pl.DataFrame], count: bool) -> _Packed | None:
        """The parts packed, or None when a fact column is not integer-like, holds a NULL, or the packed
        fact needs more than 62 bits."""
        keys = [np.zeros(p.height, dtype=np.int64) for p in parts]
        schemas = [p.schema for p in parts]
        used = 0
        for c in cols:
            if not all(isinstance(s[c], INTEGER_LIKE) for s in schemas) or any(
                p[c].has_nulls() for p in parts
            ):
                return None
            values = [_ints(p[c]) for p in parts]
            filled = [v for v in values if len(v)]
            if not filled:
                return _Packed(cols, parts, keys, count)  # no rows at all
            lo = min(int(v.min()) for v in filled)
            bits = max(1, (max(int(v.max()) for v in filled) - lo).bit_length())
            used += bits
            if used > _BITS:
                return None
            for i, v in enumerate(values):
                keys[i] = (keys[i] << np.int64(bits)) | (v - np.int64(lo))
        return _Packed(cols, parts, keys, count)

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
        order = np.argsort(self.keys[0], kind="stable")
        r = _ints(facts[RANK])
        pos = order[np.searchsorted(self.keys[0][order], self.keys[1])]  # (each derivation's fact)
        s, w = _ints(counts[RANK]), counts[WEIGHT].to_numpy()
        below = s < r[pos]
        n = facts.height
        t = r - 1
        np.maximum.at(t, pos[~below], s[~below])
        rows = [facts.get_column(c) for c in self.cols]
        rows += [
            facts.get_column(RANK),
            pl.Series(BELOW, _sums(pos[below], w[below], n)),
            pl.Series(ABOVE, _sums(pos[~below], w[~below], n)),
            pl.Series(TOP, t),
            pl.Series(WEIGHT, np.ones(n, dtype=np.int64)),
        ]
        return pl.DataFrame(rows)

    def _change(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        d = self.parts[0]
        return self.keys[0], _ints(d[RANK]), d[WEIGHT].to_numpy()

    def overdelete(self) -> pl.DataFrame:
        """`RankFold._overdelete`."""
        key, s, w = self._change()
        for part in (1, 2):  # the facts held, then those removed so far
            st = _State(self.keys[part], self.parts[part])
            found, pos = st.find(key)
            if part == 1:
                rest = ~found
            else:
                found &= rest
            _, b, a, t, changed = st.applied(pos[found], s[found], w[found])
            old = (st.rank, st.below, st.above, st.top)
            if part == 1:
                gone = np.bincount(pos[found], minlength=len(st.key)) > 0
                gone &= b <= 0
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
        st = _State(self.keys[1], self.parts[1])
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
        g = _State(self.keys[2], self.parts[2])
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
