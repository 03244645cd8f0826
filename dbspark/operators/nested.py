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

They are written once, above the kernel, as seeks of nested traces (time is a column, `ITER`),
filters on the iteration, joins, semi-joins and per-step distinct / aggregate: on Spark a scope's
iterations run over the engine's own state (hash buckets under the state directory), in the driver
for a change held there and as Spark jobs for a change on Spark.

Each change is looked up in the earlier steps' trace once, when it arrives: the rows found at later
iterations j > t1 are what terms 3-4 of the join (and the w2 ∧ w3 keys of a keyed operator) will need
at iteration j, so they are kept as pending output (join) or pending keys (keyed) for j. The scope
jumps straight to the next iteration with pending work once the feedback is empty, and stops when
there is none (the note's "when an outer step's fixpoint is done"). At t0 = 0 the earlier-step parts
are empty and these reduce to the semi-naive operators of eq. 5.1.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import polars as pl

from dbspark.columnar.nested_extreme import extremes, nested_extreme
from dbspark.errors import UnsupportedError
from dbspark.ir.aggregate import AggSpec
from dbspark.ir.expr import col
from dbspark.operators.aggregate import aggregate
from dbspark.operators.base import NONLINEAR, Operator, Shape
from dbspark.operators.distinct import positive
from dbspark.operators.join import StreamJoin
from dbspark.operators.nested_accumulators import (
    AccumulatorTrace,
    accumulates,
    accumulator_rows,
    nested_fold,
)
from dbspark.operators.nested_trace import ITER, NestedTrace, at_iterations, timed_rows
from dbspark.operators.source import Constant

if TYPE_CHECKING:
    from dbspark.engines.base import Kernel, Value


class NestedState:
    """The per-node state of a nested operator; the scope sets `t0`, `t1` before each evaluation.

    `pending[j]` holds work for iteration j of this step: output changes (joins) or keys (keyed)."""

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

    def defer(self, kernel: Kernel, v: Value, undo: list) -> None:
        """Split the timed value `v` by its iteration and queue its part at each iteration j (its other
        columns, in their order: the callers build `v` so that they are the queued item's) for j."""
        for j, part in kernel.split(v, ITER):
            lst = self.pending.setdefault(int(j), [])
            lst.append(part)
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


@dataclass(frozen=True)
class NestedJoin(Operator):
    """(↑(↑⋈)^Δ)^Δ: the doubly-incremental equi-join.

    `static` tells, per side, that the side does not depend on the scope's feedback (an import, a
    constant, what is computed from them only): it changes at the first iteration of a step and never
    later, so its trace of earlier steps holds iteration 0 only. Then B[t] at t1 >= 0 is all of it, and
    its col(B)(i) for i > t1 is empty: the split by iteration and the deferred terms are skipped."""

    join: StreamJoin
    static: tuple[bool, bool] = (False, False)
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
            NestedTrace(kernel, a.schema, self.join.left_keys, rows=not self.static[1]),
            NestedTrace(kernel, b.schema, self.join.right_keys, rows=not self.static[0]),
        )

    def eval(self, kernel: Kernel, state: NestedState, inputs: list[Any], undo: list) -> Any:
        ta, tb = state.traces
        t1 = state.t1
        k = kernel
        a, b = k.consolidate(inputs[0]), k.consolidate(inputs[1])
        j = self.join
        lk, rk = j.left_keys, j.right_keys
        static_a, static_b = self.static
        out_schema = self.shape([Shape(ta.data), Shape(tb.data)]).schema

        def join(x: Any, y: Any, extra: tuple[tuple[str, str], ...] = ()) -> Any:
            return k.join(x, y, lk, rk, j.right_out + extra)

        parts: list[Any] = state.take(t1, undo)  # terms 3-4 queued by earlier iterations
        # a side without a change contributes no term (inside a scope an import changes at the first
        # iteration only, and a recursive relation's change dies out): its seeks and joins are skipped
        has_a, has_b = not k.known_empty(a), not k.known_empty(b)
        if has_a:
            # term 1: a ⋈ B[t], B[t] = prefix_b(t1) + row_b + b (a join drops the right side's ITER)
            found = tb.seek_cols(a, list(zip(lk, rk, strict=True)), exact=False)
            if found is not None:
                parts.append(join(a, found if static_b else timed_rows(k, found, "<=", t1)))
                if not static_b:  # term 3 later: a is part of row(A) at every later i, meeting col(B)(i)
                    state.defer(k, join(a, timed_rows(k, found, ">", t1), ((ITER, ITER),)), undo)
            rb = tb.row_snapshot()
            if not k.known_empty(rb):
                parts.append(join(a, rb))
            if has_b:
                parts.append(join(a, b))
        if has_b:
            # term 2: (prefix_a(t1) + row_a) ⋈ b
            found = ta.seek_cols(b, list(zip(rk, lk, strict=True)), exact=False)
            if found is not None:
                prefix = (  # (a static side holds iteration 0 only: all of it)
                    k.map(found, [(c, col(c)) for c in ta.data], ta.data)
                    if static_a
                    else at_iterations(k, found, "<=", t1, list(ta.data), ta.data)
                )
                parts.append(join(prefix, b))
                if not static_a:  # term 4 later: col(A)(i) ⋈ row(B)
                    state.defer(k, join(timed_rows(k, found, ">", t1), b), undo)
            ra = ta.row_snapshot()
            if not k.known_empty(ra):
                parts.append(join(ra, b))
            tb.add(t1, b, undo)
        if has_a:
            ta.add(t1, a, undo)
        out = k.empty(out_schema)
        for p in parts:
            out = k.plus(out, p)
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
        if self.spec is not None and accumulates(self.spec):
            return NestedState(AccumulatorTrace(kernel, self.spec))
        return NestedState(NestedTrace(kernel, in_shapes[0].schema, self.keys(in_shapes[0].schema)))

    def f(self, kernel: Kernel, z: Any) -> Any:
        return kernel.distinct(z) if self.spec is None else aggregate(kernel, z, self.spec)

    def eval(self, kernel: Kernel, state: NestedState, inputs: list[Any], undo: list) -> Any:
        (tr,) = state.traces
        t1 = state.t1
        k = kernel
        x = k.consolidate(inputs[0])
        keys = list(tr.keys)
        on = [(c, c) for c in keys]
        row = tr.row_snapshot()  # this step, iterations < t1 (w3)
        # (x is consolidated: when its key is the whole row, its rows are the keys, each once)
        xkeys = x if keys == list(tr.data) else k.support(x, keys)
        # keys changed at an earlier iteration of this step that earlier steps changed at t1 (w2 ∧ w3)
        queued = state.take(t1, undo)
        if not queued and k.known_empty(x):  # no key of interest: no output
            return k.empty(self.shape([Shape(tr.data)]).schema)
        probe = xkeys
        if queued:
            for q in queued:
                probe = k.plus(probe, q)
            probe = k.support(probe, keys)
        acc = tr if isinstance(tr, AccumulatorTrace) else None
        if acc is not None:  # the change's accumulators, one row per group (`nested_accumulators`)
            x = k.cogroup([x], keys, partial(accumulator_rows, acc.spec), tr.data, consolidated=True)
        tr.add(t1, x, undo)
        cols = list(tr.data)
        distinct = self.spec is None
        found = tr.seek_cols(probe, on, exact=True)
        before = at = k.empty(tr.data)  # (`nested_fold` splits what is found by iteration itself)
        if found is not None:
            if distinct:  # (`combine` reads the key columns only: the iteration may stay)
                before, at = timed_rows(k, found, "<", t1), timed_rows(k, found, "==", t1)
            elif acc is None:
                before = at_iterations(k, found, "<", t1, cols, tr.data)
                at = at_iterations(k, found, "==", t1, cols, tr.data)
            # x's keys become keys of interest at the later iterations where earlier steps changed them
            # (with nothing queued the probe is x's keys: every row found is at one of them)
            after = timed_rows(k, found, ">", t1)
            if queued:
                after = k.semijoin(after, xkeys, on, exact=True)
            # (distinct's keys are its rows: queued as they are, a key found in several runs is made
            # one by the support of the probe it joins)
            state.defer(k, after if distinct else k.support(after, [*keys, ITER]), undo)
        w3 = k.seek(row, probe, on, exact=True)
        if distinct:  # [d(w1+w2+w3+x) - d(w1+w3)] - [d(w1+w2) - d(w1)] per row (§2.9.11)
            return k.combine([before, at, w3, x], cols, NESTED_DISTINCT)
        out_schema = self.shape([Shape(tr.data)]).schema
        if acc is not None:  # the same four values of f, from sums of accumulators
            timed = found if found is not None else k.empty(acc.timed)
            fn = partial(nested_fold, acc.spec, t1)
            return k.consolidate(k.cogroup([timed, w3, x], keys, fn, out_schema))
        assert self.spec is not None
        if extremes(self.spec):  # MIN / MAX: the four corners in one pass over the parts
            fn = partial(nested_extreme, self.spec)
            return k.consolidate(k.cogroup([before, at, w3, x], keys, fn, out_schema))
        # out = f(X[t]) - f(X[t0, t1-1]) - f(X[t0-1, t1]) + f(X[t0-1, t1-1]) on the keys of interest,
        # from the parts w1 (before), w2 (at), w3 and x
        p1 = before
        p12 = k.plus(before, at)
        p13 = k.plus(before, w3)
        p1234 = k.plus(k.plus(p12, w3), x)
        out = k.plus(k.neg(self.f(k, p13)), self.f(k, p1234))
        out = k.plus(out, k.neg(self.f(k, p12)))
        out = k.plus(out, self.f(k, p1))
        return k.consolidate(out)


_W = [col(f"__w{i}") for i in range(4)]  # the sums of `combine`'s parts: w1, w2, w3 and the change x
NESTED_DISTINCT = (positive(_W[0] + _W[1] + _W[2] + _W[3]) - positive(_W[0] + _W[2])) - (
    positive(_W[0] + _W[1]) - positive(_W[0])
)
