"""GROUP BY aggregation with MIN / MAX / MEDIAN / MODE or user aggregates on the local engine.

A spec of linear calls only is folded above the kernel on every engine (`operators/aggregate.py`); a
spec with ordered or user calls is folded here. Its linear calls keep the same accumulators, folded by
the same code (`columnar.aggfold`: a trace of per-group sums, sought at the change's groups, `dbsp-paper.txt`
§7.2, §7.4). MIN/MAX/MEDIAN/MODE keep an `OrderedMultiset` per group and call
(`incremental-aggregation-monotonic-programs.txt` §2.4, Table 2). User aggregates keep their
accumulated value; without an inverse `d` a group that loses rows is recomputed from its stored rows
(§2.3). Only groups present in the change are recomputed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import polars as pl

from dbspark.algebra.consolidate import nonzero
from dbspark.algebra.zset import WEIGHT, ZSet, with_weight
from dbspark.columnar.aggfold import (
    G,
    accumulate,
    accumulator_schema,
    emit,
    emitted_schema,
    inexact,
    key_schema,
    keys_of,
    old_new,
    previous,
    results,
)
from dbspark.columnar.median import median_frame
from dbspark.errors import NegativeStateError
from dbspark.ir.aggregate import AggCall, AggSpec, UserAggregate, result_dtype
from dbspark.trace.ordered import NegativeMultiplicityError, OrderedMultiset
from dbspark.trace.spine import Spine


def _with_key(df: pl.DataFrame, spec: AggSpec) -> pl.DataFrame:
    return df if spec.by else df.with_columns(pl.lit(0, pl.Int8).alias(G))


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


# ---- incremental -------------------------------------------------------------------------------
class AggregateState:
    """The state of an incremental GROUP BY with ordered or user calls: accumulators, ordered
    multisets, user values, rows."""

    def __init__(self, spec: AggSpec) -> None:
        self.spec = spec
        keys = keys_of(spec)
        self.sums = accumulator_schema(spec)
        self.acc = Spine(keys, pl.Schema([*key_schema(spec).items(), *self.sums.items()]), list(self.sums))
        self.groups: dict[tuple, list[Any]] = {}  # key -> per-call OrderedMultiset / user accumulator
        probe = _with_key(pl.DataFrame(schema=spec.input_schema), spec)
        self.rows = Spine(keys, with_weight(probe.schema)) if spec.needs_rows else None
        self.started = False
        self.nl = [(i, c) for i, c in enumerate(spec.calls) if c.kind != "linear"]
        # floating sums: the rows emitted, retracted as they were (`aggfold.inexact`)
        self.emitted = Spine(keys, with_weight(emitted_schema(spec))) if inexact(spec) else None

    def step(self, delta: ZSet, undo: list[Callable[[], None]]) -> ZSet:
        spec, keys = self.spec, keys_of(self.spec)
        if delta.df.height == 0 and (self.started or spec.by):
            return ZSet.empty(spec.output_schema())
        d = _with_key(delta.df, spec)
        dacc = accumulate(spec, [delta.df])
        old, new = old_new(spec, dacc, self.acc.snapshot().seek_frame(dacc.select(keys), exact=True))
        if self.rows is not None:
            saved_rows = list(self.rows.batches)
            undo.append(lambda: setattr(self.rows, "batches", saved_rows))
            self.rows.insert(d)
        old_nl, new_nl = self._nonlinear(d, old.select(keys), undo)
        saved = list(self.acc.batches)
        undo.append(lambda: setattr(self.acc, "batches", saved))
        # one row per group already: consolidated once the groups whose accumulators are all 0 are gone
        self.acc.insert(dacc.filter(nonzero(list(self.sums))), consolidated=True)
        was_started = self.started
        self.started = True
        undo.append(lambda: setattr(self, "started", was_started))
        ro = {**results(spec, old), **self._values(old_nl)}
        rn = {**results(spec, new), **self._values(new_nl)}
        if self.emitted is None:
            return ZSet(emit(spec, old, new, ro, rn, was_started), True)
        kept = self.emitted.snapshot().seek_frame(old.select(keys), exact=True)
        ro, exists = previous(spec, old, kept)
        out = emit(spec, old, new, ro, rn, was_started, old_exists=exists)
        saved_emitted = list(self.emitted.batches)
        undo.append(lambda: setattr(self.emitted, "batches", saved_emitted))
        self.emitted.insert(out if spec.by else out.with_columns(pl.lit(0, pl.Int8).alias(G)))
        return ZSet(out, True)

    def _values(self, nl: dict[int, list[Any]]) -> dict[str, pl.Series]:
        """The ordered and user calls' values, one per group (`_nonlinear`'s lists) as columns."""
        spec = self.spec
        out: dict[str, pl.Series] = {}
        for i, c in self.nl:
            if c.func == "median":  # (lo, hi, n) per group, or None
                mids = [m or (None, None, None) for m in nl[i]]
                lo, hi, n = ([m[k] for m in mids] for k in range(3))
                out[c.name] = median_frame(lo, hi, n, spec.input_schema[c.arg], c.name)  # type: ignore[index]
            else:
                out[c.name] = pl.Series(c.name, nl[i], dtype=result_dtype(c, spec.input_schema))
        return out

    def _nonlinear(self, d: pl.DataFrame, gk: pl.DataFrame, undo: list) -> tuple[dict, dict]:
        """Old and new values of the ordered and user aggregates, for the groups in `gk` (in order)."""
        if not self.nl:
            return {}, {}
        keys = keys_of(self.spec)
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
        keys = keys_of(self.spec)
        probe = pl.DataFrame([g], schema={k: self.rows.schema[k] for k in keys}, orient="row")
        rows = self.rows.snapshot().seek(probe).df
        v = rows.filter(pl.col(c.arg).is_not_null()).group_by(c.arg).agg(pl.col(WEIGHT).sum())
        return ua.fold(v[c.arg].to_list(), v[WEIGHT].to_list())
