"""Doubly-incremental operators: the lifted-and-incrementalized body of a recursive scope (§6, Fig. 2).

They run inside a `Fixpoint` scope at nested time t = (t0, t1) and consume changes x[t0][t1]
(`shared/notes/nested-incremental.md`):

- `NestedJoin` (bilinear): out[t] = a[t] ⋈ B[t] + (A[t] - a[t]) ⋈ b[t] + row(A) ⋈ col(B) + col(A) ⋈ row(B),
  with B[t] = prefix_b(t1) + row_b + b[t]: four joins, each probing a trace with a change.
- `NestedConstant`: a constant c, doubly differentiated: c at t = (0, 0), 0 elsewhere.
- `NestedKeyed` (distinct, GROUP BY-aggregate: operators that act on each key separately): the 2-D
  difference out[t] = f(X[t]) - f(X[t0, t1-1]) - f(X[t0-1, t1]) + f(X[t0-1, t1-1]), evaluated only
  for the keys of interest: those of x[t], and those with both a this-step change at an earlier
  iteration (w3) and an earlier-step change at this iteration (w2). For distinct this is the w1, w2,
  w3 formula of `rhizome-dbsp-implementation-notes.txt` §2.9.11.

Each change is looked up in the earlier steps' trace once, when it arrives: the rows found at later
iterations j > t1 are what terms 3-4 of the join (and the w2 ∧ w3 keys of a keyed operator) will need
at iteration j, so they are kept as pending output (join) or pending keys (keyed) for j. The scope
jumps straight to the next iteration with pending work once the feedback is empty, and stops when
there is none (the note's "when an outer step's fixpoint is done"). At t0 = 0 the earlier-step parts
are empty and these reduce to the semi-naive operators of eq. 5.1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import polars as pl

from dbspark.algebra.zset import WEIGHT, ZSet
from dbspark.errors import UnsupportedError
from dbspark.ir.aggregate import AggSpec
from dbspark.operators.base import NONLINEAR, Operator, Shape
from dbspark.operators.join import StreamJoin
from dbspark.operators.source import Constant
from dbspark.trace.nested import ITER, NestedTrace

if TYPE_CHECKING:
    from dbspark.engines.base import Kernel


class NestedState:
    """The per-node state of a nested operator; the scope sets `t0`, `t1` before each evaluation.

    `pending[j]` holds work for iteration j of this step: output Z-sets (joins) or key frames (keyed)."""

    def __init__(self, *traces: NestedTrace) -> None:
        self.traces = traces
        self.t0 = 0
        self.t1 = 0
        self.pending: dict[int, list[Any]] = {}

    def take(self, t1: int, undo: list) -> list[Any]:
        items = self.pending.pop(t1, [])
        if items:
            undo.append(lambda: self.pending.__setitem__(t1, items))
        return list(items)  # a copy: callers extend it, and the undo above must restore the queued items only

    def defer(self, frame: pl.DataFrame, cols: list[str], undo: list, to_item: Any) -> None:
        """Split `frame` by its ITER column and queue `to_item(part)` for each of those iterations."""
        if frame.height == 0:
            return
        for (j,), part in frame.group_by([ITER]):
            item = to_item(part.drop(ITER).select(cols))
            lst = self.pending.setdefault(int(j), [])  # type: ignore[arg-type, unused-ignore]
            lst.append(item)
            undo.append(lambda lst=lst: lst.pop())

    def next_pending(self, after: int) -> int | None:
        """The first iteration > `after` with pending work."""
        return min((j for j, items in self.pending.items() if j > after and items), default=None)

    def end_step(self, undo: list) -> None:
        pending = self.pending
        undo.append(lambda: setattr(self, "pending", pending))
        self.pending = {}
        for t in self.traces:
            t.end_step(undo)


def _split(found: pl.DataFrame, t1: int) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Earlier steps' rows before, at and after iteration t1."""
    it = pl.col(ITER)
    return found.filter(it < t1), found.filter(it == t1), found.filter(it > t1)


@dataclass(frozen=True)
class NestedJoin(Operator):
    """(↑(↑⋈)^Δ)^Δ: the doubly-incremental equi-join."""

    join: StreamJoin
    name = "nested_join"
    kind = NONLINEAR
    arity = 2
    stateful = True

    def shape(self, ins: list[Shape]) -> Shape:
        return self.join.shape(ins)

    def label(self) -> str:
        return "nested_" + self.join.label()[len("stream_") :]

    def init(self, kernel: Kernel, shape: Shape, in_shapes: list[Shape]) -> Any:
        a, b = in_shapes
        return NestedState(
            NestedTrace(a.schema, self.join.left_keys), NestedTrace(b.schema, self.join.right_keys)
        )

    def eval(self, kernel: Kernel, state: NestedState, inputs: list[Any], undo: list) -> Any:
        ta, tb = state.traces
        t1 = state.t1
        a, b = kernel.as_zset(inputs[0]), kernel.as_zset(inputs[1])
        j = self.join
        out_cols = list(self.shape([Shape(a.schema), Shape(b.schema)]).schema)

        def join(x: Any, y: Any, extra: tuple[tuple[str, str], ...] = ()) -> ZSet:
            return kernel.join(x, y, j.left_keys, j.right_keys, j.right_out + extra)

        def as_zset(df: pl.DataFrame) -> ZSet:
            return ZSet(df.select([*out_cols, WEIGHT]))

        parts: list[ZSet] = state.take(t1, undo)  # terms 3-4 queued by earlier iterations
        ra, rb = ta.row_snapshot(), tb.row_snapshot()
        if len(a):  # term 1: a ⋈ B[t], B[t] = prefix_b(t1) + row_b + b
            found = tb.seek_cols(
                tb.probe_hashes(
                    a.df.select(list(j.left_keys)).rename(dict(zip(j.left_keys, j.right_keys, strict=True)))
                )
            )
            before, at, after = _split(found, t1)
            now = pl.concat([before, at], how="vertical").drop(ITER)
            parts.append(join(a, ZSet(now)))
            # term 3 later: a is part of row(A) at every later iteration i, meeting col(B)(i)
            later = join(a, ZSet(after.select([*tb.data, ITER, WEIGHT])), ((ITER, ITER),))
            state.defer(later.df, [*out_cols, WEIGHT], undo, as_zset)
            if len(rb):
                parts.append(join(a, rb))
            if len(b):
                parts.append(join(a, b))
        if len(b):  # term 2: (prefix_a(t1) + row_a) ⋈ b
            found = ta.seek_cols(
                ta.probe_hashes(
                    b.df.select(list(j.right_keys)).rename(dict(zip(j.right_keys, j.left_keys, strict=True)))
                )
            )
            before, at, after = _split(found, t1)
            now = pl.concat([before, at], how="vertical").drop(ITER)
            parts.append(join(ZSet(now), b))
            later = join(ZSet(after.select([*ta.data, ITER, WEIGHT])), b)  # term 4 later: col(A)(i) ⋈ row(B)
            state.defer(later.df, [*out_cols, WEIGHT], undo, as_zset)
            if len(ra):
                parts.append(join(ra, b))
        ta.add(t1, a.df, undo)
        tb.add(t1, b.df, undo)
        out = kernel.empty(
            pl.Schema({c: t for c, t in self.shape([Shape(a.schema), Shape(b.schema)]).schema.items()})
        )
        for p in parts:
            out = kernel.plus(out, p)
        return out


@dataclass(frozen=True)
class NestedConstant(Operator):
    """(↑(↑c)^Δ)^Δ for a constant stream c: c at (t0, t1) = (0, 0) and 0 at every other time (its changes
    along both dimensions: it enters the scope's first iteration of the first step, like an import)."""

    constant: Constant
    name = "nested_constant"
    kind = NONLINEAR
    arity = 0
    stateful = True

    def shape(self, ins: list[Shape]) -> Shape:
        return self.constant.shape(ins)

    def label(self) -> str:
        return "nested_" + self.constant.label()

    def init(self, kernel: Kernel, shape: Shape, in_shapes: list[Shape]) -> Any:
        return NestedState()  # no traces: the scope only sets its (t0, t1)

    def eval(self, kernel: Kernel, state: NestedState, inputs: list[Any], undo: list) -> Any:
        if state.t0 == 0 and state.t1 == 0:
            return kernel.from_local(self.constant.value())
        return kernel.empty(self.constant.schema)


@dataclass(frozen=True)
class NestedKeyed(Operator):
    """The doubly-incremental version of a key-local operator: distinct (spec None) or an aggregate."""

    spec: AggSpec | None = None
    name = "nested"
    kind = NONLINEAR
    stateful = True

    def shape(self, ins: list[Shape]) -> Shape:
        return Shape(self.spec.output_schema()) if self.spec is not None else Shape(ins[0].schema)

    def label(self) -> str:
        if self.spec is None:
            return "nested_distinct"
        from dbspark.operators.aggregate import _label

        return _label("nested_aggregate", self.spec)

    def keys(self, schema: pl.Schema) -> tuple[str, ...]:
        if self.spec is None:
            return tuple(schema)
        if not self.spec.by:  # `incremental.fixpoint.nested_global_aggregate` builds it from keyed parts
            raise UnsupportedError("NestedKeyed needs GROUP BY keys")
        return self.spec.by

    def init(self, kernel: Kernel, shape: Shape, in_shapes: list[Shape]) -> Any:
        return NestedState(NestedTrace(in_shapes[0].schema, self.keys(in_shapes[0].schema)))

    def f(self, kernel: Kernel, z: ZSet) -> ZSet:
        return kernel.distinct(z) if self.spec is None else kernel.aggregate(z, self.spec)

    def eval(self, kernel: Kernel, state: NestedState, inputs: list[Any], undo: list) -> Any:
        (tr,) = state.traces
        t1 = state.t1
        x = kernel.consolidate(inputs[0])
        keys = list(tr.keys)
        row = tr.row_snapshot()  # this step, iterations < t1 (w3)
        xkeys = x.df.select(keys)
        # keys changed at an earlier iteration of this step that earlier steps changed at t1 (w2 ∧ w3)
        queued = state.take(t1, undo)
        # x is consolidated, so its rows (hence the keys of a distinct) are unique already
        probe = (
            pl.concat([xkeys, *queued], how="vertical").unique() if queued or self.spec is not None else xkeys
        )
        tr.add(t1, x.df, undo)
        schema = self.shape([Shape(x.schema)]).schema
        if probe.height == 0:
            return kernel.empty(schema)
        hashes = tr.probe_hashes(probe)
        before, at, after = _split(tr.seek_cols(hashes), t1)
        if after.height and xkeys.height:  # x's keys become keys of interest where earlier steps changed
            future = (
                after.select([*keys, ITER])
                .unique()
                .join(xkeys.unique(), on=keys, how="semi", nulls_equal=True)
            )
            state.defer(future, keys, undo, lambda part: part)
        w3 = [row.seek_hashes(hashes)] if len(row) else []
        parts = {1: [before.drop(ITER)], 2: [at.drop(ITER)], 3: w3, 4: [x.df]}
        if self.spec is None:
            return self._distinct(parts, x.columns)
        return self._corners(kernel, parts, x.columns)

    @staticmethod
    def _tagged(parts: dict[int, list[pl.DataFrame]], cols: list[str]) -> pl.DataFrame:
        frames = [
            f.select([*cols, WEIGHT]).with_columns(pl.lit(tag, pl.Int8).alias("__tag"))
            for tag, fs in parts.items()
            for f in fs
            if f.height
        ]
        return pl.concat(frames, how="vertical")

    def _distinct(self, parts: dict[int, list[pl.DataFrame]], cols: list[str]) -> ZSet:
        """out = [d(w1+w2+w3+w) - d(w1+w3)] - [d(w1+w2) - d(w1)] per row, d(v) = 1 if v > 0 (§2.9.11)."""
        df = self._tagged(parts, cols)
        tag, wt = pl.col("__tag"), pl.col(WEIGHT)
        df = df.select(*cols, *[pl.when(tag == k).then(wt).otherwise(0).alias(f"w{k}") for k in (1, 2, 3, 4)])
        g = df.group_by(cols).agg(pl.col(f"w{k}").sum() for k in (1, 2, 3, 4))

        def d(e: pl.Expr) -> pl.Expr:
            return (e > 0).cast(pl.Int64)

        w1, w2, w3, w4 = (pl.col(f"w{k}") for k in (1, 2, 3, 4))
        out = (d(w1 + w2 + w3 + w4) - d(w1 + w3)) - (d(w1 + w2) - d(w1))
        g = g.select(*cols, out.alias(WEIGHT)).filter(pl.col(WEIGHT) != 0)
        return ZSet(g, consolidated=True)

    def _corners(self, kernel: Kernel, parts: dict[int, list[pl.DataFrame]], cols: list[str]) -> ZSet:
        """out = f(X[t]) - f(X[t0, t1-1]) - f(X[t0-1, t1]) + f(X[t0-1, t1-1]) on the keys of interest."""
        empty = pl.DataFrame(schema={c: t for c, t in parts[4][0].schema.items()})

        def frame(tags: tuple[int, ...]) -> ZSet:
            fs = [f.select([*cols, WEIGHT]) for k in tags for f in parts[k] if f.height]
            return ZSet(pl.concat(fs, how="vertical") if fs else empty)

        corners = (((1, 2, 3, 4), 1), ((1, 3), -1), ((1, 2), -1), ((1,), 1))
        out = None
        for tags, sign in corners:
            v = self.f(kernel, frame(tags))
            v = v if sign > 0 else kernel.neg(v)
            out = v if out is None else kernel.plus(out, v)
        assert out is not None
        return kernel.consolidate(out)
