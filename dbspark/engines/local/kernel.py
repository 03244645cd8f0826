"""The local kernel: Z-sets as Polars frames, traces as in-memory LSM spines (`trace.spine`).

Every operator is a vectorized Polars/NumPy computation over the change; traces are touched through
`seek` with the keys of the change only. The only per-row Python is in user callbacks (flat_map, user
aggregates) and in the ordered per-group state of MIN/MAX/MEDIAN/MODE (O(log n) per changed row).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import polars as pl

from dbspark.algebra.consolidate import max_abs, nonzero
from dbspark.algebra.weights import checked_mul
from dbspark.algebra.zset import WEIGHT, IndexedZSet, ZSet, with_weight
from dbspark.columnar.aggfold import Accumulators
from dbspark.columnar.key_index import indexed_join
from dbspark.columnar.plans import all_ones, collect, drop_null_rows, pick
from dbspark.columnar.ranges import range_counts
from dbspark.columnar.rows import input_frame
from dbspark.engines.base import GroupFn
from dbspark.engines.local.exprs import Compiler, evaluate, to_polars
from dbspark.engines.local.memory import MemoryGuard
from dbspark.engines.local.sqlfuncs import raising
from dbspark.errors import SchemaError, WeightError
from dbspark.ir import functions as fn
from dbspark.ir.expr import Binary, Case, Col, Expr, Func, Lit
from dbspark.trace.spine import SMALL, Spine, TraceSnapshot

Value = ZSet | TraceSnapshot
_WR = "__w_r"


def _frame(v: Value) -> pl.DataFrame:
    return v.to_frame() if isinstance(v, TraceSnapshot) else v.df


def _frame_schema(v: Value) -> pl.Schema:
    """The schema of `v`'s frame (data columns, then the weight), without reading a trace."""
    return v.schema if isinstance(v, TraceSnapshot) else v.df.schema


_RELEASE_PARALLEL = 1 << 20  # the rows a step's traces hold pending, together, from which they are
# released two at a time


def _release(traces: list[Spine], parallel: bool = True) -> None:
    """End a step's hold of `traces` (`Spine.release`: each sorts and merges what the step wrote). Where
    they hold many rows, two at a time in threads (`parallel`: not under a memory limit): their sorts
    (NumPy) and gathers (Polars) leave the interpreter, so two traces' work shares the machine's cores
    (same generation at 100,000 nodes: three traces of 10M rows each, sorted one after another in 2.8 s
    of a 5 s first step), for two sorts' scratch memory at once (its RSS growth over a load and three
    batches 4.9 -> 5.3-5.7 GiB)."""
    if not parallel or len(traces) < 2 or sum(t.held_rows() for t in traces) < _RELEASE_PARALLEL:
        for t in traces:
            t.release()
        return
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        for f in [pool.submit(t.release) for t in traces]:
            f.result()


class LocalKernel:
    """Implements `engines.base.Kernel` in process."""

    name = "local"
    state_in_process = True

    def __init__(self, memory_limit: int | str | None = None) -> None:
        self._deferring = 0  # > 0: trace inserts are deferred (`deferring`)
        self._deferred: dict[int, Spine] = {}
        self.memory = MemoryGuard(memory_limit)
        self.traces: weakref.WeakSet[Spine] = weakref.WeakSet()  # every trace, for `state_rows`
        self._owner: str | None = None  # whose traces `new_trace` makes (`owned`)
        self._owners: weakref.WeakKeyDictionary[Spine, str] = weakref.WeakKeyDictionary()

    # ---- group and conversions ---------------------------------------------------------------
    def empty(self, schema: pl.Schema, keys: Sequence[str] | None = None) -> ZSet:
        z = ZSet.empty(schema)
        return IndexedZSet(z.df, keys, True) if keys is not None else z

    def from_frame(self, df: pl.DataFrame) -> ZSet:
        return ZSet(df)

    def as_zset(self, a: Value) -> ZSet:
        return a.to_zset() if isinstance(a, TraceSnapshot) else a

    def plus(self, a: Value, b: Value) -> ZSet:
        a, b = self.as_zset(a), self.as_zset(b)
        out = a + b
        if isinstance(a, IndexedZSet) and not isinstance(out, IndexedZSet):
            out = IndexedZSet(out.df, a.keys)
        return out

    def neg(self, a: Value) -> ZSet:
        return -self.as_zset(a)

    def consolidate(self, a: Value, by_rows: bool = False) -> ZSet:
        return self.as_zset(a).consolidate(by_rows)

    def known_empty(self, a: Value) -> bool:
        return len(a) == 0

    def is_empty(self, a: Value) -> bool:
        """The Z-set is zero (its rows cancel out, or it has none)."""
        return len(a) == 0 if isinstance(a, TraceSnapshot) else a.consolidate().df.height == 0

    def input_batch(
        self,
        rows: Any,
        schema: pl.Schema,
        weights: Any,
        where: str,
        not_null: Sequence[str] = (),
        key: Sequence[str] | None = None,
    ) -> ZSet:
        """Checked rows coerced to `schema`, with weights (a frame may carry its own `weight` column);
        see `convert.input_frame` for `not_null` and a primary `key`."""
        return ZSet(input_frame(rows, schema, weights, where, not_null, key))

    # ---- linear operators ---------------------------------------------------------------------
    def filter(self, a: Value, pred: Expr) -> ZSet:
        z = self.as_zset(a)
        if z.df.height == 0:  # no row to evaluate the predicate on (a constant that fails raises nothing)
            return z
        return z.with_df(evaluate(lambda: z.df.filter(to_polars(pred, z.df.schema))))

    def map(self, a: Value, exprs: Sequence[tuple[str, Expr]], schema: pl.Schema) -> ZSet:
        z = self.as_zset(a)
        df = z.df
        if df.height == 0:  # SQL evaluates expressions per row: a failing constant over no rows is no error
            return ZSet.empty(schema)
        have = df.schema  # (a property that builds the schema on each read)
        if all(isinstance(e, Col) and have.get(e.name) == schema[n] for n, e in exprs):
            # columns as they are (a projection, a renaming): picked, not a query (~9 against ~32 µs)
            cols = [df.get_column(e.name).alias(n) for n, e in exprs if isinstance(e, Col)]
            # every column kept (renamed, reordered): the rows stay distinct, a consolidated input's
            # result is too (a recursive distinct's change renamed for a join: 1.8 s of consolidation at
            # 5,000-node transitive closure's first step)
            kept = {e.name for _, e in exprs if isinstance(e, Col)} >= set(z.columns)
            return ZSet(pl.DataFrame([*cols, df.get_column(WEIGHT)]), z.consolidated and kept)
        sel = [
            pl.col(e.name).alias(n)  # a column as it is
            if isinstance(e, Col) and have.get(e.name) == schema[n]
            else to_polars(e, have).cast(schema[n]).alias(n)
            for n, e in exprs
        ]

        def select() -> pl.DataFrame:
            try:
                return df.select(*sel, pl.col(WEIGHT))
            except pl.exceptions.ShapeError:
                # Polars 2.1: a when/then whose conditions hold on no row is evaluated to its otherwise
                # value as a scalar, and the eager select does not broadcast it (`0 = round(CASE WHEN b
                # THEN i END)` on rows with b NULL); the lazy engine does. (A filter broadcasts such a
                # scalar predicate, which is then the value of every row.)
                return df.lazy().select(*sel, pl.col(WEIGHT)).collect()

        return ZSet(evaluate(select))

    def flat_map(self, a: Value, fn: Callable[[dict], Any], schema: pl.Schema) -> ZSet:
        z = self.as_zset(a)
        cols = list(schema)
        out_rows: list[tuple] = []
        ws: list[int] = []
        for row, w in zip(z.data().iter_rows(named=True), z.df[WEIGHT].to_list(), strict=True):
            for r in fn(row) or ():
                t = tuple(r[c] for c in cols) if isinstance(r, dict) else tuple(r)
                if len(t) != len(cols):
                    raise SchemaError(f"flat_map produced {t!r}, expected {len(cols)} values {cols}")
                out_rows.append(t)
                ws.append(w)
        return ZSet.from_rows(out_rows, schema, ws)

    def ranges(self, a: Value, lo: str, hi: str, step: str, column: str) -> ZSet:
        z = self.as_zset(a)
        keep = [c for c in z.columns if c not in (lo, hi, step)]
        n, k = range_counts(pl.col(lo), pl.col(hi), pl.col(step))
        df = z.df.with_columns(n.alias("__n"), k.alias("__k")).filter(pl.col("__n") > 0)
        df = df.with_columns(pl.int_ranges(0, pl.col("__n"), dtype=pl.Int64).alias("__i")).explode("__i")
        value = (pl.col(lo).cast(pl.Int128) + pl.col("__i") * pl.col("__k").cast(pl.Int128)).cast(pl.Int64)
        return ZSet(df.select(*keep, value.alias(column), WEIGHT))

    def index(self, a: Value, keys: Sequence[str]) -> IndexedZSet:
        z = self.as_zset(a)
        out = IndexedZSet(z.df, keys, z.consolidated)
        out.hashes = getattr(z, "hashes", None)
        if not z.consolidated:  # one consolidation for both (an integral and a seek read the same rows)
            out._src = z
        return out

    # ---- keys and selections ------------------------------------------------------------------
    def support(self, a: Value, cols: Sequence[str]) -> ZSet:
        if len(a) == 0:
            s = _frame_schema(a)
            return ZSet.empty(pl.Schema([(c, s[c]) for c in cols]))
        df = _frame(a).select(list(cols)).unique()
        return ZSet(df.with_columns(pl.lit(1, pl.Int64).alias(WEIGHT)), True)

    def semijoin(self, a: Value, b: Value, on: Sequence[tuple[str, str]], exact: bool) -> ZSet:
        left = _frame(a)
        keys = _frame(b).select([pl.col(r).alias(c) for c, r in on])
        if not exact:
            keys = drop_null_rows(keys)
        if left.height == 0 or keys.height == 0:
            return ZSet(left.clear())
        keys = keys.cast({c: left.schema[c] for c, _ in on}, strict=False)
        return ZSet(left.join(keys, on=[c for c, _ in on], how="semi", nulls_equal=exact))

    def cogroup(
        self,
        parts: Sequence[Value],
        by: Sequence[str],
        fn: GroupFn,
        schema: pl.Schema,
        sums: pl.Schema | None = None,
        consolidated: bool = False,
    ) -> ZSet:
        """Every group is here: `fn` is called once, on all the parts' rows."""
        out = fn([_frame(p) for p in parts])
        return Accumulators(out) if sums is not None else ZSet(out, consolidated)

    def combine(self, parts: Sequence[Value], by: Sequence[str], weight: Expr) -> ZSet:
        """One lazy plan (one collect): the parts' rows with their weight in their own sum column,
        grouped by `by`, the weight computed. Sums are exact while |weight| * rows < 2^62; beyond,
        they are checked in floats first."""
        by = list(by)
        sums = [f"__w{i}" for i in range(len(parts))]
        at = _summed_at(parts, by, sums)
        if at is not None:  # parts sought at the first's rows: summed by position
            grouped, top, n = at
            return self._weighed(grouped, by, sums, grouped.collect_schema(), top, n, weight)
        frames, n, top = [], 0, 0
        for i, p in enumerate(parts):
            df = _frame(p)
            if df.height:
                top = max(top, max_abs(df[WEIGHT]))
                n += df.height
                ws = [
                    (pl.col(WEIGHT) if j == i else pl.lit(0, pl.Int64)).alias(s) for j, s in enumerate(sums)
                ]
                frames.append(df.lazy().select(*by, *ws))
        if not frames:
            first = _frame(parts[0]) if parts else pl.DataFrame()
            return ZSet.empty(pl.Schema([(c, first.schema[c]) for c in by]))
        rows = pl.concat(frames, how="vertical_relaxed")

        def summed(e: Any) -> Any:
            return rows.group_by(by).agg(e) if by else rows.select(e)

        if top * n >= 2**62:  # a sum might leave int64: checked in floats
            f = collect(summed([pl.col(c).cast(pl.Float64).sum() for c in sums]), n)
            if any(float(f[c].abs().max()) > 9.2e18 for c in sums):  # type: ignore[arg-type]
                raise WeightError("weight overflow while grouping Z-sets: a row's weight left int64")
        types = rows.collect_schema()  # (the parts' types as the concatenation relaxed them)
        return self._weighed(summed([pl.col(c).sum() for c in sums]), by, sums, types, top, n, weight)

    @staticmethod
    def _weighed(
        grouped: pl.LazyFrame,
        by: list[str],
        sums: list[str],
        types: pl.Schema,
        top: int,
        n: int,
        weight: Expr,
    ) -> ZSet:
        """`combine`'s result from its groups (`by`, then the sums): the weight computed, 0 left out;
        `top` * `n` bounds the sums."""
        schema = tuple([*((c, types[c]) for c in by), *((c, pl.Int64()) for c in sums)])
        plain = _plain_weight(weight, schema)
        if plain is not None and plain[1][0] * top * n + plain[1][1] < 2.0**62:  # cannot overflow: plain
            w = plain[0]
        else:
            w = to_polars(weight, pl.Schema(schema)).cast(pl.Int64)
        plan = grouped.select(*by, w.alias(WEIGHT))
        return ZSet(evaluate(lambda: collect(plan.filter(pl.col(WEIGHT) != 0), n)), True)

    def ordinal(self, a: Value, column: str) -> ZSet:
        z = self.as_zset(a)
        return ZSet(z.df.select(*z.columns, pl.int_range(pl.len(), dtype=pl.Int64).alias(column), WEIGHT))

    def shifted(
        self, a: Value, by: Sequence[str], order: Sequence[str], outs: Sequence[tuple[str, str, int]]
    ) -> ZSet:
        # sorted by the groups, then the order: the row k places away is in the group iff its `by` are
        by = list(by)
        df = _frame(a).sort([*by, *order], maintain_order=True, nulls_last=False)

        def same(k: int) -> pl.Expr:
            return (
                pl.all_horizontal([pl.col(b).shift(k).eq_missing(pl.col(b)) for b in by])
                if by
                else pl.lit(True)
            )

        new = [
            (pl.col(c) if k == 0 else pl.when(same(k)).then(pl.col(c).shift(k))).alias(n) for n, c, k in outs
        ]
        return ZSet(df.select(*(c for c in df.columns if c != WEIGHT), *new, WEIGHT))

    def split(self, a: Value, column: str) -> list[tuple[Any, ZSet]]:
        if len(a) == 0:
            return []
        df = _frame(a)
        df = df.filter(pl.col(column).is_not_null())
        if df.height == 0:
            return []
        parts = df.partition_by(column, as_dict=True, include_key=False)
        return [(k[0], ZSet(parts[k])) for k in sorted(parts)]

    # ---- bilinear operators -------------------------------------------------------------------
    def join(
        self,
        a: Value,
        b: Value,
        left_keys: Sequence[str],
        right_keys: Sequence[str],
        right_out: Sequence[tuple[str, str]],
    ) -> ZSet:
        """Equi-join, weights multiplied; NULL keys never match (SQL). A trace side is probed by key."""
        lk, rk = list(left_keys), list(right_keys)
        if len(a) == 0 or len(b) == 0:  # no entry on a side (checked before any consolidation)
            return self._empty_join(_frame_schema(a), _frame_schema(b), right_out)
        # a change is consolidated before it is multiplied: a sum of terms that cancel (an outer join's
        # inner part plus its unmatched rows) would otherwise grow each join of a chain (3^n rows)
        a, b = (x.consolidate() if isinstance(x, ZSet) else x for x in (a, b))
        if isinstance(a, TraceSnapshot) and isinstance(b, TraceSnapshot):
            if len(a) <= len(b):  # probe the larger trace with the smaller one (bilinear: no consolidation)
                a = ZSet(a.raw_frame())
            else:
                b = ZSet(b.raw_frame())
        if isinstance(b, TraceSnapshot):
            assert isinstance(a, ZSet)
            left = drop_null_rows(a.df, lk)
            right = b.seek_frame(pick(left, lk, rk), exact=False)
        elif isinstance(a, TraceSnapshot):
            right = drop_null_rows(b.df, rk)
            left = a.seek_frame(pick(right, rk, lk), exact=False)
        else:
            joined = indexed_join(a, b, lk, rk, right_out)  # (a side read by joins before, indexed)
            if joined is not None:
                return joined
            left, right = a.df, b.df
        if left.height == 0 or right.height == 0:
            return self._empty_join(left.schema, right.schema, right_out)
        # every right weight 1 (a set's rows: a recursive distinct's facts, a table's): the product is
        # the left weight, joined as it is, not multiplied (at 5,000-node transitive closure's first
        # step, 96M derivations' right weights gathered and their products: 16 bytes a row)
        ones = all_ones(right[WEIGHT])
        r = pick(  # (a column taken twice, a key also in the output, makes `pick` a query)
            right,
            [*rk, *(src for src, _ in right_out), *(() if ones else (WEIGHT,))],
            [*(f"__k{i}" for i in range(len(rk))), *(dst for _, dst in right_out), *(() if ones else (_WR,))],
        )
        j = left.join(r, left_on=lk, right_on=[f"__k{i}" for i in range(len(rk))], how="inner", coalesce=True)
        if ones:
            data = [c for c in left.columns if c != WEIGHT] + [d for _, d in right_out]
            return ZSet(pl.DataFrame([j.get_column(c) for c in (*data, WEIGHT)]))
        return self._weigh(j, left, right_out)

    def product(self, a: Value, b: Value, right_out: Sequence[tuple[str, str]]) -> ZSet:
        a, b = (x.consolidate() if isinstance(x, ZSet) else x for x in (a, b))  # as `join`
        left, right = _frame(a), _frame(b)
        r = right.select([pl.col(s).alias(d) for s, d in right_out] + [pl.col(WEIGHT).alias(_WR)])
        j = left.join(r, how="cross")
        return self._weigh(j, left, right_out)

    def _weigh(self, j: pl.DataFrame, left: pl.DataFrame, right_out: Sequence[tuple[str, str]]) -> ZSet:
        w = checked_mul(j[WEIGHT].to_numpy(), j[_WR].to_numpy())
        data = [c for c in left.columns if c != WEIGHT] + [d for _, d in right_out]
        return ZSet(j[data].hstack([pl.Series(WEIGHT, w, dtype=pl.Int64)]))

    def _empty_join(self, left: pl.Schema, right: pl.Schema, right_out: Sequence[tuple[str, str]]) -> ZSet:
        schema = [(c, t) for c, t in left.items() if c != WEIGHT]
        schema += [(d, right[s]) for s, d in right_out]
        return ZSet.empty(pl.Schema(schema))

    # ---- non-linear operators -----------------------------------------------------------------
    def distinct(self, a: Value) -> ZSet:
        return self.as_zset(a).distinct()

    # ---- traces -------------------------------------------------------------------------------
    def new_trace(
        self, schema: pl.Schema, keys: Sequence[str], sums: pl.Schema | None = None, order: str | None = None
    ) -> Spine:
        if sums is None:
            trace = Spine(keys, with_weight(schema), order=order)
        else:
            data = [(c, t) for c, t in schema.items() if c != WEIGHT]
            trace = Spine(keys, pl.Schema([*data, *sums.items()]), list(sums))
        self.memory.track(trace)
        self.traces.add(trace)
        if self._owner is not None:
            self._owners[trace] = self._owner
        return trace

    @contextlib.contextmanager
    def owned(self, owner: str) -> Iterator[None]:
        before, self._owner = self._owner, owner
        try:
            yield
        finally:
            self._owner = before

    def release(self, owners: Iterable[str]) -> None:
        """The traces leave `state_rows` and the memory guard at once (they hold no files)."""
        gone = set(owners)
        for t in [t for t, o in list(self._owners.items()) if o in gone]:
            self.traces.discard(t)
            self.memory.traces.discard(t)

    def trace_insert(self, trace: Spine, delta: Value, undo: list) -> TraceSnapshot:
        if len(delta) == 0:  # nothing to add (an unconsolidated change with entries may still cancel)
            return trace.snapshot()
        undo.append(_restorer(trace))
        before = trace.nbytes() if self.memory.limit is not None else 0
        defer = self._deferring > 0
        if defer and id(trace) not in self._deferred:
            self._deferred[id(trace)] = trace
            trace.hold()
        if isinstance(delta, Accumulators):  # one row per group; a group whose sums are all 0 adds nothing
            trace.insert(delta.df.filter(nonzero(trace.weight_cols)), consolidated=True, defer=defer)
        elif isinstance(delta, ZSet):  # consolidated once: the same change may feed a join too
            z = delta.consolidate(by_rows=trace.by_rows(delta.df.columns))
            trace.insert(z.df, consolidated=True, defer=defer, hashes=getattr(z, "hashes", None))
        else:
            trace.insert(delta.to_frame(), consolidated=True, defer=defer)
        if self.memory.limit is not None:
            self.memory.grew(trace, before, undo)
        return trace.snapshot()

    def trace_drop(self, drops: Sequence[tuple[Spine, Sequence[tuple[str, Any]]]], undo: list) -> None:
        for trace, below in drops:
            back = _restorer(trace)
            if trace.drop(below):
                undo.append(back)

    def trace_clear(self, trace: Spine, undo: list) -> None:
        undo.append(_restorer(trace))
        trace.__dict__.update(batches=[], pending=[], _last=None)

    def state_rows(self) -> int:
        return sum(len(t) for t in list(self.traces))

    def known_rows(self, a: Value) -> int | None:
        return len(a) if hasattr(a, "__len__") else None

    def trace_stats(self, trace: Spine) -> tuple[int, int | None]:
        return len(trace), trace.nbytes()

    @contextlib.contextmanager
    def deferring(self) -> Iterator[None]:
        """Inside, trace inserts are deferred until a trace is read (a seek of a snapshot taken since)
        or the block ends (`Spine.insert(defer=True)`): a recursive scope's step. The batches they
        make merge among themselves, and into the trace's older batches once, at the end
        (`Spine.hold`)."""
        self._deferring += 1
        try:
            yield
        finally:
            self._deferring -= 1
            if not self._deferring:
                traces, self._deferred = self._deferred, {}
                _release(list(traces.values()), parallel=self.memory.limit is None)

    def empty_snapshot(self, schema: pl.Schema, keys: Sequence[str]) -> TraceSnapshot:
        return TraceSnapshot((), keys, with_weight(schema))

    def seek(self, snap: Value, probe: Value, on: Sequence[tuple[str, str]], exact: bool) -> ZSet:
        """The snapshot's entries at the probe's keys (a hash seek in each batch, then an exact match)."""
        assert isinstance(snap, TraceSnapshot)
        if len(probe) == 0 or len(snap) == 0:
            return self._found(snap, snap.empty_frame())
        keys = pick(_frame(probe), [c for c, _ in on], [k for _, k in on])
        if not exact:
            keys = drop_null_rows(keys)
        # a consolidated probe by all its columns, in order: its rows' hashes are the probe's, and
        # the rows found are matched to its rows by position (a Z-set's; an aggregate's sums are not)
        h = None
        if isinstance(probe, ZSet) and probe.consolidated and exact and probe.hashes is not None:
            if [c for c, _ in on] == probe.columns and [k for _, k in on] == list(snap.keys):
                h = probe.hashes
                got = snap.seek_rows(keys, h) if snap.weight_cols == (WEIGHT,) else None
                if got is not None:
                    found = ZSet(pick(got[0], list(snap.schema)))
                    found.at = (probe, got[1])
                    return found
        return self._found(snap, pick(snap.seek_frame(keys, exact=True, hashes=h), list(snap.schema)))

    def key_runs(self, snap: Value, probe: pl.DataFrame, min_rows: int) -> dict[int, list[pl.DataFrame]]:
        assert isinstance(snap, TraceSnapshot)
        return snap.key_runs(probe, min_rows)

    @staticmethod
    def _found(snap: TraceSnapshot, rows: pl.DataFrame) -> ZSet:
        """Rows sought in a trace: a Z-set's, or an aggregate's accumulators (sums, no weight)."""
        return ZSet(rows) if snap.weight_cols == (WEIGHT,) else Accumulators(rows)

    def scratch(self) -> contextlib.AbstractContextManager[None]:
        """Every trace of this engine is in memory already: scratch traces are ordinary spines."""
        return contextlib.nullcontext()

    def flush_step(self, undo: list) -> None:
        """Nothing to write: the local engine's traces are updated as the step goes."""

    def trace_keys(self, trace: Spine, names: Sequence[str]) -> ZSet | None:
        if (
            trace.pending
            or len(trace.batches) != 1
            or trace.order is not None
            or trace.weight_cols != (WEIGHT,)
        ):
            return None
        (b,) = trace.batches
        cols = [b.df.get_column(c).alias(n) for c, n in zip(trace.keys, names, strict=True)]
        z = ZSet(pl.DataFrame([*cols, b.df.get_column(WEIGHT)]), consolidated=True)
        z.hashes = b.hashes  # (of the key columns, in their order: the value's data columns)
        return z

    def commit_output(self, trace: Spine, delta: Value, name: str, undo: list) -> ZSet:
        z = self.consolidate(delta)
        if isinstance(z, ZSet) and len(z) > SMALL and trace.by_rows(z.df.columns):
            z = z.by_row_hash()  # (the view's new batch is the step's output: their columns shared)
        self.trace_insert(trace, z, undo)
        return z

    # ---- steps (the local engine keeps no files) --------------------------------------------------
    def place(self, batches: Sequence[Value], loop: bool = False) -> list[Value]:
        """Everything runs in this process: the pushed changes stay where they are."""
        return list(batches)

    def begin_step(self, t: int) -> None:
        self.memory.measure()

    def end_step(self, t: int) -> None:
        pass

    def abort_step(self) -> None:
        pass

    def sweep_uncommitted(self, committed_steps: int) -> None:
        pass

    def hold(self, a: Any) -> Any:
        return a

    def save_value(self, a: Any) -> Any:
        return a

    def load_value(self, saved: Any) -> Any:
        return saved

    def to_local(self, a: Value) -> ZSet:
        return self.as_zset(a)

    def from_local(self, z: ZSet) -> ZSet:
        return z

    def is_local(self, a: Value) -> bool:
        return True

    def close(self) -> None:
        pass

    def weigh(self, a: Value, column: str) -> ZSet:
        """Each row's weight times its value in `column` (dropped); overflow is a WeightError."""
        z = self.as_zset(a)
        df = z.df.filter(pl.col(column).is_not_null() & (pl.col(column) != 0))
        w = checked_mul(df[WEIGHT].to_numpy(), df[column].cast(pl.Int64).to_numpy())
        return ZSet(df.drop(column).with_columns(pl.Series(WEIGHT, w, pl.Int64)))

    # ---- top-k ----------------------------------------------------------------------------------
    def topk(self, a: Value, order: Any, limit: int | None, offset: int) -> ZSet:
        """Rows [offset, offset + limit) of `a` in `order` (see `operators.topk`)."""
        from dbspark.operators.topk import topk_frame

        z = self.as_zset(a).consolidate()
        return ZSet(topk_frame(z.df, order, limit, offset), True)


def _summed_at(
    parts: Sequence[Value], by: list[str], sums: list[str]
) -> tuple[pl.LazyFrame, int, int] | None:
    """`combine`'s groups when the first part is a consolidated Z-set over `by` and every other part
    holds rows sought at its rows (`ZSet.at`): one group per row of the first, each part's weights
    added at the row they equal; with a bound (top, rows) on the sums. None otherwise, or when a sum
    might leave int64 (`combine` checks those)."""
    first = parts[0] if parts else None
    if not (isinstance(first, ZSet) and first.consolidated and first.columns == by and len(first)):
        return None
    found = [(p, p.at[1]) for p in parts[1:] if isinstance(p, ZSet) and p.at is not None and p.at[0] is first]
    if len(found) < len(parts) - 1:
        return None
    df = first.df
    n = df.height + sum(len(j) for _, j in found)
    top = max([max_abs(df[WEIGHT]), *(max_abs(p.df[WEIGHT]) for p, j in found if len(j))])
    if top * n >= 2**62:
        return None
    cols = [df[WEIGHT].alias(sums[0])]
    for s, (p, j) in zip(sums[1:], found, strict=True):
        w = np.zeros(df.height, dtype=np.int64)
        np.add.at(w, j, p.df[WEIGHT].to_numpy())
        cols.append(pl.Series(s, w))
    return df.select(by).with_columns(cols).lazy(), top, n


@functools.lru_cache(maxsize=256)
def _plain_weight(e: Expr, schema: tuple = ()) -> tuple[pl.Expr, tuple[int, int]] | None:
    """A weight expression of `combine` made of integer columns and literals, + and -, comparisons and
    CASE (distinct's H and the nested distinct are), as plain Polars arithmetic, with a bound on its
    magnitude: (k, c) such that |value| <= k * M + c when every column is at most M in magnitude (the
    caller checks that this cannot overflow, then skips the checked arithmetic). A CASE branch that
    raises (`__fail`: the checks of `operators.checks`) is compiled against `schema` (the grouped
    frame's columns and types), its message made only for the failing row. None otherwise."""
    if isinstance(e, Col):
        return pl.col(e.name), (1, 0)
    if isinstance(e, Lit):
        if isinstance(e.value, bool) or not isinstance(e.value, int):
            return None
        return pl.lit(e.value, pl.Int64), (0, abs(e.value))
    if isinstance(e, Binary) and e.op in ("add", "sub", "gt", "ge", "lt", "le", "eq"):
        a, b = _plain_weight(e.left, schema), _plain_weight(e.right, schema)
        if a is None or b is None:
            return None
        if e.op == "add":
            return a[0] + b[0], (a[1][0] + b[1][0], a[1][1] + b[1][1])
        if e.op == "sub":
            return a[0] - b[0], (a[1][0] + b[1][0], a[1][1] + b[1][1])
        cmp = {
            "gt": a[0] > b[0],
            "ge": a[0] >= b[0],
            "lt": a[0] < b[0],
            "le": a[0] <= b[0],
            "eq": a[0] == b[0],
        }
        return cmp[e.op], (a[1][0] + b[1][0], a[1][1] + b[1][1])  # (operands bounded as for a sum)
    if isinstance(e, Case) and e.otherwise is not None:
        out = _plain_weight(e.otherwise, schema)
        if out is None:
            return None
        expr, (k, c) = out
        for cond, val in reversed(e.whens):
            pc = _plain_weight(cond, schema)
            if pc is None:
                return None
            if isinstance(val, Func) and val.name == "__fail":
                fail = raising(Compiler(pl.Schema(schema)), val.args[1], pc[0], fn.error_class(val.args[0]))
                pv: tuple[pl.Expr, tuple[int, int]] | None = (fail, (0, 0))
            else:
                pv = _plain_weight(val, schema)
            if pv is None:
                return None
            expr = pl.when(pc[0]).then(pv[0]).otherwise(expr)
            k, c = max(k, pc[1][0], pv[1][0]), max(c, pc[1][1], pv[1][1])
        return expr, (k, c)
    return None


def _restorer(trace: Spine) -> Callable[[], None]:
    """An undo that puts the trace back as it is now: its batches, deferred inserts and floor (its seek
    memo cleared)."""
    saved = list(trace.batches), list(trace.pending), trace.floor
    return lambda: trace.__dict__.update(batches=saved[0], pending=saved[1], floor=saved[2], _last=None)
