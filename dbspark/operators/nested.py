"""Doubly-incremental operators: the lifted-and-incrementalized body of a recursive scope (§6, Fig. 2).

They run inside a `Fixpoint` scope at nested time t = (t0, t1) and consume changes x[t0][t1]
(`shared/notes/nested-incremental.md`):

- `NestedJoin` (bilinear): out[t] = a[t] ⋈ B[t] + (A[t] - a[t]) ⋈ b[t] + row(A) ⋈ col(B) + col(A) ⋈ row(B),
  with B[t] = prefix_b(t1) + row_b + b[t]: four joins, each probing a trace with a change.
- `NestedKeyed` (distinct, GROUP BY-aggregate: operators that act on each key separately): the 2-D
  difference out[t] = f(X[t]) - f(X[t0, t1-1]) - f(X[t0-1, t1]) + f(X[t0-1, t1-1]), evaluated only
  for the keys of interest: those of x[t], and those with both a this-step change at an earlier
  iteration (w3) and an earlier-step change at this iteration (w2). For distinct this is the w1, w2,
  w3 formula of `rhizome-dbsp-implementation-notes.txt` §2.9.11.

At t0 = 0 the earlier-step parts are empty and these reduce to the semi-naive operators of eq. 5.1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from dbspark.algebra.zset import WEIGHT, ZSet
from dbspark.errors import UnsupportedError
from dbspark.ir.aggregate import AggSpec
from dbspark.operators.base import NONLINEAR, Operator, Shape
from dbspark.operators.join import StreamJoin
from dbspark.trace.nested import NestedTrace
from dbspark.trace.spine import TraceSnapshot


class NestedState:
    """The per-node state of a nested operator; the scope sets `t0`, `t1` before each evaluation."""

    def __init__(self, *traces: NestedTrace) -> None:
        self.traces = traces
        self.t0 = 0
        self.t1 = 0

    @property
    def depth(self) -> int:
        return max((t.depth for t in self.traces), default=0)

    def end_step(self, undo: list) -> None:
        for t in self.traces:
            t.end_step(undo)


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
        return "nested_" + self.join.label()[len("stream_"):]

    def init(self, kernel: Any, shape: Shape, in_shapes: list[Shape]) -> Any:
        a, b = in_shapes
        return NestedState(NestedTrace(a.schema, self.join.left_keys), NestedTrace(b.schema, self.join.right_keys))

    def eval(self, kernel: Any, state: NestedState, inputs: list[Any], undo: list) -> Any:
        ta, tb = state.traces
        t1 = state.t1
        a, b = kernel.as_zset(inputs[0]), kernel.as_zset(inputs[1])
        j = self.join

        def join(x: Any, y: Any) -> ZSet:
            return kernel.join(x, y, j.left_keys, j.right_keys, j.right_out)

        parts: list[ZSet] = []
        ra, rb = ta.row_snapshot(), tb.row_snapshot()
        if len(a):
            parts += [join(a, s) for s in tb.prefix_snapshots(t1)]  # term 1: a ⋈ B[t]
            if len(rb):
                parts.append(join(a, rb))
            if len(b):
                parts.append(join(a, b))
        if len(b):
            parts += [join(s, b) for s in ta.prefix_snapshots(t1)]  # term 2: (A[t] - a[t]) ⋈ b
            if len(ra):
                parts.append(join(ra, b))
        cb, ca = tb.col(t1), ta.col(t1)
        if cb is not None and len(ra):
            parts.append(join(ra, cb))  # term 3: row(A) ⋈ col(B)
        if ca is not None and len(rb):
            parts.append(join(ca, rb))  # term 4: col(A) ⋈ row(B)
        ta.add(t1, a.df, undo)
        tb.add(t1, b.df, undo)
        out = kernel.empty(self.shape([Shape(a.schema), Shape(b.schema)]).schema)
        for p in parts:
            out = kernel.plus(out, p)
        return out


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
        if not self.spec.by:
            raise UnsupportedError("an aggregate without GROUP BY inside a recursive scope is not supported")
        return self.spec.by

    def init(self, kernel: Any, shape: Shape, in_shapes: list[Shape]) -> Any:
        return NestedState(NestedTrace(in_shapes[0].schema, self.keys(in_shapes[0].schema)))

    def f(self, kernel: Any, z: ZSet) -> ZSet:
        return kernel.distinct(z) if self.spec is None else kernel.aggregate(z, self.spec)

    def eval(self, kernel: Any, state: NestedState, inputs: list[Any], undo: list) -> Any:
        (tr,) = state.traces
        t1 = state.t1
        x = kernel.consolidate(inputs[0])
        keys = list(tr.keys)
        row = tr.row_snapshot()  # this step, iterations < t1 (w3)
        probe = x.df.select(keys)
        col = tr.col(t1)
        if col is not None and len(row):  # keys changed at an earlier iteration here and at t1 before
            both = col.seek_frame(row.key_frame()).select(keys)
            probe = pl.concat([probe, both], how="vertical")
        probe = probe.unique()
        tr.add(t1, x.df, undo)
        schema = self.shape([Shape(x.schema)]).schema
        if probe.height == 0:
            return kernel.empty(schema)
        hashes = tr.probe_hashes(probe)
        seeks = tr.seek_cols(t1, hashes)
        w1 = seeks[:t1]  # earlier steps, earlier iterations
        w2 = seeks[t1:]  # earlier steps, this iteration
        w3 = [row.seek_hashes(hashes)] if len(row) else []
        parts = {1: w1, 2: w2, 3: w3, 4: [x.df]}
        if self.spec is None:
            return self._distinct(parts, x.columns)
        return self._corners(kernel, parts, x.columns)

    @staticmethod
    def _tagged(parts: dict[int, list[pl.DataFrame]], cols: list[str]) -> pl.DataFrame:
        frames = [f.select([*cols, WEIGHT]).with_columns(pl.lit(tag, pl.Int8).alias("__tag"))
                  for tag, fs in parts.items() for f in fs if f.height]
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

    def _corners(self, kernel: Any, parts: dict[int, list[pl.DataFrame]], cols: list[str]) -> ZSet:
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
