"""GROUP BY aggregation on the local engine: from scratch, and incrementally per change.

Linear aggregates keep per-group accumulators (row count, non-null count, Σx, Σx²) in a trace whose
"weights" are those accumulators (an abelian group, `algebra.weights`), so a change is O(1) per row
plus a seek of the changed groups (`dbsp-paper.txt` §7.2, §7.4). MIN/MAX/MEDIAN/MODE keep an
`OrderedMultiset` per group and call (`incremental-aggregation-monotonic-programs.txt` §2.4, Table 2).
User aggregates keep their accumulated value; without an inverse `d` a group that loses rows is
recomputed from its stored rows (§2.3). Only groups present in the change are recomputed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import polars as pl

from dbspark.algebra.weights import INT64_MAX
from dbspark.algebra.zset import _OVERFLOW, WEIGHT, ZSet, with_weight
from dbspark.columnar.median import median_expr, median_frame
from dbspark.columnar.plans import collect
from dbspark.engines.local.exprs import fdiv
from dbspark.errors import NegativeStateError, WeightError
from dbspark.ir.aggregate import AggCall, AggSpec, UserAggregate, result_dtype
from dbspark.trace.ordered import NegativeMultiplicityError, OrderedMultiset
from dbspark.trace.spine import Spine, _nonzero

G = "__g"  # the constant group key used when there is no GROUP BY
_WF = "__wf"  # a group's row count summed in floats: the overflow check of the int64 count


def _keys(spec: AggSpec) -> list[str]:
    return list(spec.by) if spec.by else [G]


def _with_key(df: pl.DataFrame, spec: AggSpec) -> pl.DataFrame:
    return df if spec.by else df.with_columns(pl.lit(0, pl.Int8).alias(G))


def _acc_exprs(spec: AggSpec) -> list[pl.Expr]:
    """Per-group accumulator sums of a change: the linear part of every call."""
    w = pl.col(WEIGHT)
    out = [w.sum().alias(WEIGHT)]
    for i, c in enumerate(spec.calls):
        if c.kind != "linear" or c.arg is None:
            continue
        x = pl.col(c.arg)
        xs = x.cast(pl.Int64) if spec.input_schema[c.arg] == pl.Boolean() else x
        out.append(pl.when(x.is_not_null()).then(w).otherwise(0).sum().alias(f"__c{i}"))
        if c.func != "count":
            xw = xs.cast(pl.Int128) * w if _int_sum(c, spec) else xs * w  # Int128: the sum cannot wrap
            out.append(xw.sum().alias(f"__s{i}"))
        if c.func in ("var_samp", "var_pop", "stddev_samp", "stddev_pop"):
            if _int_sum(c, spec):  # exact: Σx² in Int128, so the variance has no cancellation error
                xi = xs.cast(pl.Int128)
                out.append((xi * xi * w).sum().alias(f"__q{i}"))
            else:
                xf = xs.cast(pl.Float64)
                out.append((xf * xf * w.cast(pl.Float64)).sum().alias(f"__q{i}"))
    return out


def _int_sum(c: AggCall, spec: AggSpec) -> bool:
    """Whether the call's Σx accumulator is an integer sum (kept in Int128, checked on output)."""
    t = spec.input_schema[c.arg] if c.arg else None
    return t is not None and (t.is_integer() or t == pl.Boolean())


def _check_int_sums(acc: pl.DataFrame, spec: AggSpec) -> None:
    """Raise WeightError if an integer SUM (accumulated in Int128) does not fit its Int64 result."""
    for i, c in enumerate(spec.calls):
        if c.kind == "linear" and c.func == "sum" and _int_sum(c, spec) and acc.height:
            s = acc[f"__s{i}"]
            if not (-INT64_MAX - 1 <= s.min() and s.max() <= INT64_MAX):  # type: ignore[operator]
                bad = s.filter((s > INT64_MAX) | (s < -INT64_MAX - 1))[0]
                raise WeightError(f"{c.describe()} = {bad} does not fit in a 64-bit integer")


def _finalize(acc: pl.DataFrame, spec: AggSpec) -> list[pl.Expr]:
    """Expressions turning accumulators into the linear aggregate columns."""
    _check_int_sums(acc, spec)
    out = []
    for i, c in enumerate(spec.calls):
        if c.kind != "linear":
            continue
        t = result_dtype(c, spec.input_schema)
        if c.func == "count_star":
            e = pl.col(WEIGHT)
        elif c.func == "count":
            e = pl.col(f"__c{i}")
        else:
            n, s = pl.col(f"__c{i}"), pl.col(f"__s{i}")
            nf, sf = n.cast(pl.Float64), s.cast(pl.Float64)
            if c.func == "sum":
                e = pl.when(n > 0).then(s)
            elif c.func == "avg":  # fdiv: IEEE division whatever the batch (exprs' docstring)
                e = pl.when(n > 0).then(fdiv(sf, nf))
            else:
                q = pl.col(f"__q{i}")
                if _int_sum(c, spec):  # n·Σx² - (Σx)² is an exact integer; divide once at the end
                    m2 = fdiv((n.cast(pl.Int128) * q - s * s).cast(pl.Float64), nf).clip(lower_bound=0.0)
                else:
                    m2 = (q - fdiv(sf * sf, nf)).clip(lower_bound=0.0)
                if c.func in ("var_samp", "stddev_samp"):
                    e = pl.when(n > 1).then(fdiv(m2, nf - 1))
                else:
                    e = pl.when(n > 0).then(fdiv(m2, nf))
                if str(c.func).startswith("stddev"):
                    e = e.sqrt()
        out.append(e.cast(t).alias(c.name))
    return out


# ---- ordered and user aggregates: value of one group --------------------------------------------
def _ordered_value(func: str, ms: OrderedMultiset) -> Any:
    """MIN, MAX or MODE of a group; for MEDIAN its middle values and count (`median_frame` finishes it)."""
    if len(ms) == 0:
        return None
    if func == "min":
        return ms.min()
    if func == "max":
        return ms.max()
    if func == "mode":
        return ms.mode()
    return ms.median_low(), ms.median_high(), len(ms)


# ---- from scratch ------------------------------------------------------------------------------
def aggregate_full(z: ZSet, spec: AggSpec) -> ZSet:
    """The aggregate of a whole Z-set (the non-incremental `stream_aggregate`)."""
    df = _with_key(z.consolidate().df, spec)
    keys = _keys(spec)
    acc = df.group_by(keys).agg(_acc_exprs(spec))  # on an empty frame: no rows, but every accumulator column
    if not spec.by and acc.height == 0:
        acc = _empty_global(spec)
    acc = acc.filter(pl.col(WEIGHT) != 0) if spec.by else acc
    if spec.by and (acc[WEIGHT] < 0).any():
        raise NegativeStateError("aggregate over a Z-set with a group of negative count")
    out = acc.select(pl.col(keys), *_finalize(acc, spec))
    for c in spec.calls:
        if c.kind == "linear":
            continue
        vals = _nonlinear_full(df, keys, c, spec)
        out = (
            out.join(vals, on=keys, how="left", nulls_equal=True)
            if vals.height
            else out.with_columns(pl.lit(None, result_dtype(c, spec.input_schema)).alias(c.name))
        )
    out = out.select([*_keys(spec), *[c.name for c in spec.calls]])
    if not spec.by:
        out = out.drop(G)
    return ZSet(out.with_columns(pl.lit(1, pl.Int64).alias(WEIGHT)))


def _empty_global(spec: AggSpec) -> pl.DataFrame:
    cols: dict[str, Any] = {G: pl.Series(G, [0], dtype=pl.Int8), WEIGHT: [0]}
    for e in _acc_exprs(spec)[1:]:
        cols[e.meta.output_name()] = [0]
    return pl.DataFrame(cols)


def _nonlinear_full(df: pl.DataFrame, keys: list[str], c: AggCall, spec: AggSpec) -> pl.DataFrame:
    t = result_dtype(c, spec.input_schema)
    assert c.arg is not None
    x = "__x"  # the argument under a name of its own: it may also be a GROUP BY column
    v = (
        df.filter(pl.col(c.arg).is_not_null())
        .with_columns(pl.col(c.arg).alias(x))
        .group_by([*keys, x])
        .agg(pl.col(WEIGHT).sum())
        .filter(pl.col(WEIGHT) != 0)
    )
    if (v[WEIGHT] < 0).any():
        raise NegativeStateError(f"aggregate {c.name!r} over a Z-set with negative weights")
    if isinstance(c.func, UserAggregate):
        rows = []
        for key, grp in v.group_by(keys, maintain_order=True):
            acc = c.func.fold(grp[x].to_list(), grp[WEIGHT].to_list())
            rows.append((*key, c.func.final(acc)))
        return pl.DataFrame(rows, schema={**{k: df.schema[k] for k in keys}, c.name: t}, orient="row")
    if c.func == "min":
        e = pl.col(x).min()
    elif c.func == "max":
        e = pl.col(x).max()
    elif c.func == "mode":
        v = v.sort([*keys, WEIGHT, x], descending=[False] * len(keys) + [True, False], nulls_last=True)
        return v.group_by(keys, maintain_order=True).agg(pl.col(x).first().cast(t).alias(c.name))
    else:  # median over weighted values: the value at positions (n-1)//2 and n//2
        v = v.sort([*keys, x]).with_columns(
            pl.col(WEIGHT).cum_sum().over(keys).alias("__cum"), pl.col(WEIGHT).sum().over(keys).alias("__n")
        )
        lo = pl.col(x).filter(pl.col("__cum") > (pl.col("__n") - 1) // 2).first()
        hi = pl.col(x).filter(pl.col("__cum") > pl.col("__n") // 2).first()
        mid = v.group_by(keys).agg(lo.alias("__lo"), hi.alias("__hi"), pl.col("__n").first())
        e = median_expr(pl.col("__lo"), pl.col("__hi"), pl.col("__n") % 2 == 1, spec.input_schema[c.arg])
        return mid.select(*keys, e.cast(t).alias(c.name))
    return v.group_by(keys).agg(e.cast(t).alias(c.name))


# ---- incremental -------------------------------------------------------------------------------
class AggregateState:
    """The state of an incremental GROUP BY: accumulators, ordered multisets, user values, rows."""

    def __init__(self, spec: AggSpec) -> None:
        self.spec = spec
        keys = _keys(spec)
        probe = _with_key(pl.DataFrame(schema=spec.input_schema), spec)
        acc_schema = (
            probe.with_columns(pl.lit(0, pl.Int64).alias(WEIGHT)).group_by(keys).agg(_acc_exprs(spec)).schema
        )
        wcols = [c for c in acc_schema if c not in keys]
        self.acc = Spine(keys, acc_schema, wcols)
        self.groups: dict[tuple, list[Any]] = {}  # key -> per-call OrderedMultiset / user accumulator
        self.rows = Spine(keys, with_weight(probe.schema)) if spec.needs_rows else None
        self.started = False
        self.nl = [(i, c) for i, c in enumerate(spec.calls) if c.kind != "linear"]

    def step(self, delta: ZSet, undo: list[Callable[[], None]]) -> ZSet:
        spec, keys = self.spec, _keys(self.spec)
        d = _with_key(delta.df, spec)
        if d.height == 0 and self.started:
            return ZSet.empty(spec.output_schema())
        if d.height:  # the change's sums, and its row counts in floats (an int64 sum may wrap)
            dacc = d.group_by(keys).agg(*_acc_exprs(spec), pl.col(WEIGHT).cast(pl.Float64).sum().alias(_WF))
        else:
            dacc = self.acc.snapshot().empty_frame().with_columns(pl.lit(0.0).alias(_WF))
        if not spec.by and dacc.height == 0:
            dacc = _empty_global(spec).with_columns(pl.lit(0.0).alias(_WF))
        old, new = self._old_new(dacc, keys)
        dacc = dacc.drop(_WF)
        if new.height and new[WEIGHT].min() < 0:  # type: ignore[operator]
            bad = new.filter(pl.col(WEIGHT) < 0).row(0, named=True)
            raise NegativeStateError(
                f"aggregate: group { ({k: bad[k] for k in spec.by}) } would have {bad[WEIGHT]} rows; "
                "a delete of rows that are not there"
            )
        if self.rows is not None:
            saved_rows = list(self.rows.batches)
            undo.append(lambda: setattr(self.rows, "batches", saved_rows))
            self.rows.insert(d)
        old_nl, new_nl = self._nonlinear(d, old.select(keys), undo)
        saved = list(self.acc.batches)
        undo.append(lambda: setattr(self.acc, "batches", saved))
        # one row per group already: consolidated once the groups whose accumulators are all 0 are gone
        self.acc.insert(dacc.filter(_nonzero(self.acc.weight_cols)), consolidated=True)
        was_started = self.started
        self.started = True
        undo.append(lambda: setattr(self, "started", was_started))
        return self._change(old, old_nl, new, new_nl, was_started)

    def _old_new(self, dacc: pl.DataFrame, keys: list[str]) -> tuple[pl.DataFrame, pl.DataFrame]:
        """The changed groups' accumulators before and after the change (row i of both: one group).

        The trace's entries at the groups' key hashes are summed and joined to the change's sums in
        one plan (the join on the keys drops hash collisions); a count that leaves int64 is a WeightError."""
        snap = self.acc.snapshot()
        wcols = list(snap.weight_cols)
        found = snap.seek_frame(dacc.select(keys), exact=False)
        prev = (
            found.lazy()
            .group_by(keys)
            .agg(
                *[pl.col(c).sum().alias(f"{c}__o") for c in wcols],
                pl.col(WEIGHT).cast(pl.Float64).sum().alias("__wfo"),
            )
        )
        j = collect(
            dacc.lazy()
            .join(prev, on=keys, how="left", nulls_equal=True, maintain_order="left")
            .with_columns([pl.col(f"{c}__o").fill_null(0) for c in wcols] + [pl.col("__wfo").fill_null(0.0)])
            .with_columns(
                [(pl.col(f"{c}__o") + pl.col(c)).alias(c) for c in wcols]
                + [(pl.col("__wfo") + pl.col(_WF)).abs().max().alias(_WF)]
            ),
            found.height + dacc.height,
        )
        if j.height and j[_WF][0] > _OVERFLOW:
            raise WeightError("weight overflow in an aggregate: a group's row count left int64")
        old = j.select(*keys, *[pl.col(f"{c}__o").alias(c) for c in wcols])
        return old, j.select(*keys, *wcols)

    def _change(
        self, old: pl.DataFrame, old_nl: dict, new: pl.DataFrame, new_nl: dict, was_started: bool
    ) -> ZSet:
        """The output's change: -1 the groups' old rows, +1 their new rows, without the pairs that are
        equal (a group whose values did not change): consolidated without a group-by, since row i of
        `old` and `new` is one group and different groups are different rows."""
        spec = self.spec
        o, ko = self._rows(old, old_nl, keep_empty=was_started and not spec.by)
        n, kn = self._rows(new, new_nl, keep_empty=not spec.by)
        eq = ko & kn
        if o.width:
            eq &= o.select(pl.all_horizontal([pl.col(c).eq_missing(n[c]) for c in o.columns]).alias("s"))["s"]
        keep_o, keep_n = ko & ~eq, kn & ~eq
        out = pl.concat(
            [
                o.filter(keep_o).with_columns(pl.lit(-1, pl.Int64).alias(WEIGHT)),
                n.filter(keep_n).with_columns(pl.lit(1, pl.Int64).alias(WEIGHT)),
            ],
            how="vertical",
        )
        return ZSet(out, True)

    def _rows(
        self, acc: pl.DataFrame, nl: dict[int, list[Any]], keep_empty: bool
    ) -> tuple[pl.DataFrame, pl.Series]:
        """The output rows of the groups in `acc` (all of them, in order) and which of them exist."""
        spec, keys = self.spec, _keys(self.spec)
        cols = [pl.col(k) for k in keys] + _finalize(acc, spec)
        out = acc.select(cols)
        for i, c in self.nl:
            if c.func == "median":  # (lo, hi, n) per group, or None
                mids = [m or (None, None, None) for m in nl[i]]
                lo, hi, n = ([m[k] for m in mids] for k in range(3))
                col = median_frame(lo, hi, n, spec.input_schema[c.arg], c.name)  # type: ignore[index]
            else:
                col = pl.Series(c.name, nl[i], dtype=result_dtype(c, spec.input_schema))
            out = out.with_columns(col)
        exists = acc[WEIGHT] > 0
        if keep_empty:
            exists = pl.Series(WEIGHT, [True] * acc.height)
        out = out.select([*keys, *[c.name for c in spec.calls]])
        if not spec.by:
            out = out.drop(G)
        return out, exists

    def _nonlinear(self, d: pl.DataFrame, gk: pl.DataFrame, undo: list) -> tuple[dict, dict]:
        """Old and new values of the ordered and user aggregates, for the groups in `gk` (in order)."""
        if not self.nl:
            return {}, {}
        keys = _keys(self.spec)
        groups = gk.rows()
        old = {i: [None] * len(groups) for i, _ in self.nl}
        new = {i: [None] * len(groups) for i, _ in self.nl}
        pos = {g: n for n, g in enumerate(groups)}
        for i, c in self.nl:
            x = c.arg
            assert x is not None
            ch = (
                d.filter(pl.col(x).is_not_null())
                .select(*keys, pl.col(x).alias("__x"), WEIGHT)
                .group_by([*keys, "__x"])
                .agg(pl.col(WEIGHT).sum())
                .filter(pl.col(WEIGHT) != 0)
            )  # x may be a key too
            by_group: dict[tuple, tuple[list, list]] = {}
            for row in ch.iter_rows():
                g = row[: len(keys)]
                vs, ws = by_group.setdefault(g, ([], []))
                vs.append(row[len(keys)])
                ws.append(row[-1])
            for g in groups:
                state = self.groups.get(g)
                cur = state[i] if state is not None else None
                n = pos[g]
                if isinstance(c.func, UserAggregate):
                    old[i][n] = c.func.final(cur[0]) if cur else None
                else:
                    old[i][n] = _ordered_value(c.func, cur) if cur is not None else None
                if g in by_group:
                    cur = self._apply(g, i, c, by_group[g], undo)
                if isinstance(c.func, UserAggregate):
                    new[i][n] = c.func.final(cur[0]) if cur else None
                else:
                    new[i][n] = _ordered_value(c.func, cur) if cur is not None else None
        return old, new

    def _apply(self, g: tuple, i: int, c: AggCall, change: tuple[list, list], undo: list) -> Any:
        state = self.groups.get(g)
        if state is None:
            state = [None] * len(self.spec.calls)
            self.groups[g] = state
            undo.append(lambda: self.groups.pop(g, None))
        vs, ws = change
        if isinstance(c.func, UserAggregate):
            prev = state[i]
            undo.append(lambda: state.__setitem__(i, prev))
            state[i] = self._user_update(g, c.func, prev, vs, ws, c)
            return state[i]
        ms = state[i]
        if ms is None or len(vs) > ms.distinct_count() // 4:
            # a new group or a large change: rebuild in O(n) (bulk load) instead of n O(log n) updates
            counts = dict(ms.items()) if ms is not None else {}
            for v, w in zip(vs, ws, strict=True):
                counts[v] = counts.get(v, 0) + w
            bad = next(((v, n) for v, n in counts.items() if n < 0), None)
            if bad is not None:
                e = NegativeMultiplicityError(*bad)
                raise NegativeStateError(
                    f"aggregate {c.name!r}, group {g}: {e}; a delete of a value not there"
                )
            keys = sorted(v for v, n in counts.items() if n)
            new = OrderedMultiset.from_state(keys, [counts[v] for v in keys])
            undo.append(lambda: state.__setitem__(i, ms))
            state[i] = new
            return new
        try:
            ms.update(vs, ws)
        except NegativeMultiplicityError as e:
            raise NegativeStateError(
                f"aggregate {c.name!r}, group {g}: {e}; a delete of a value not there"
            ) from None
        undo.append(lambda: ms.update(vs, [-w for w in ws]))
        return ms

    def _user_update(self, g: tuple, ua: UserAggregate, prev: Any, vs: list, ws: list, c: AggCall) -> Any:
        acc, n = prev if prev is not None else (None, 0)
        n += sum(ws)
        if n < 0:
            raise NegativeStateError(f"aggregate {c.name!r}, group {g}: more values deleted than present")
        if n == 0:
            return None
        if all(w > 0 for w in ws) or ua.d is not None:
            for v, w in zip(vs, ws, strict=True):
                p = ua.power(ua.f(v), abs(w))
                if w > 0:
                    acc = p if acc is None else ua.g(acc, p)
                else:
                    acc = ua.d(acc, p)  # type: ignore[misc]
            return (acc, n)
        return (self._recompute(g, ua, c), n)

    def _recompute(self, g: tuple, ua: UserAggregate, c: AggCall) -> Any:
        """Fold a group's stored rows again (a user aggregate without an inverse lost rows)."""
        assert self.rows is not None and c.arg is not None
        keys = _keys(self.spec)
        probe = pl.DataFrame([g], schema={k: self.rows.schema[k] for k in keys}, orient="row")
        rows = self.rows.snapshot().seek(probe).df
        v = rows.filter(pl.col(c.arg).is_not_null()).group_by(c.arg).agg(pl.col(WEIGHT).sum())
        return ua.fold(v[c.arg].to_list(), v[WEIGHT].to_list())
