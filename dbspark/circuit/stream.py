"""Streams: handles on circuit nodes whose methods build operators, reading like the paper.

Per-step ("lifted") operators that are not linear carry the `stream_` prefix, as in DBSP: `stream_join`
is ↑⋈ on each step's whole Z-sets. The plain names are the incremental versions, which consume and
produce changes: `join` is (↑⋈)^Δ, `distinct` is (↑distinct)^Δ, `aggregate` is (↑Agg)^Δ. Linear
operators (filter, map, index, +, -) are their own incremental versions and have one name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import polars as pl

from dbspark.errors import SchemaError, UnknownNameError
from dbspark.ir.aggregate import make_spec
from dbspark.ir.expr import Col, Expr, Lit, as_expr, as_predicate
from dbspark.ir.schema import to_schema
from dbspark.operators.aggregate import Aggregate, StreamAggregate
from dbspark.operators.base import Shape
from dbspark.operators.closure import Closure, StreamClosure
from dbspark.operators.distinct import DistinctH, StreamDistinct
from dbspark.operators.join import StreamJoin, StreamProduct, right_columns
from dbspark.operators.linear import Filter, FlatMap, Index, Map, Neg, Plus, Ranges, Weigh
from dbspark.operators.maintained_join import IndexedMultiJoin, MaintainedMultiJoin
from dbspark.operators.multijoin import MultiJoinTerm, StreamExistsJoin, StreamMultiJoin, fetch_plan
from dbspark.operators.numbering import StreamNumber
from dbspark.operators.time import Delay, Differentiate, Integrate
from dbspark.operators.window import StreamWindow

if TYPE_CHECKING:
    from dbspark.circuit.circuit import Circuit


def _keys(on: str | Sequence[str] | None) -> tuple[str, ...]:
    if on is None:
        return ()
    return (on,) if isinstance(on, str) else tuple(on)


class Stream:
    """A stream of Z-sets: the output of one node of a circuit."""

    __slots__ = ("circuit", "node_id")

    def __init__(self, circuit: Circuit, node_id: int) -> None:
        self.circuit = circuit
        self.node_id = node_id

    @property
    def shape(self) -> Shape:
        return self.circuit.nodes[self.node_id].shape

    @property
    def schema(self) -> pl.Schema:
        return self.shape.schema

    @property
    def columns(self) -> list[str]:
        return list(self.shape.schema)

    def __repr__(self) -> str:
        n = self.circuit.nodes[self.node_id]
        return f"Stream(n{n.id} = {n.op.label()})"

    # ---- linear -------------------------------------------------------------------------------
    def filter(self, pred: Expr) -> Stream:
        """σ: rows where `pred` is TRUE."""
        return self.circuit.add(Filter(as_predicate(pred)), self)

    def map(self, *cols: str | tuple[str, Any], **exprs: Any) -> Stream:
        """Projection / map: `s.map("a", b=col("x") + 1)`; positional names keep a column as is."""
        items: list[tuple[str, Expr]] = []
        for c in cols:
            if isinstance(c, tuple):
                items.append((c[0], as_expr(c[1])))
            else:
                items.append((c, as_expr(c)))
        items += [(n, as_expr(e)) for n, e in exprs.items()]
        if not items:
            raise SchemaError("map needs at least one output column")
        return self.circuit.add(Map(tuple(items)), self)

    select = map

    def flat_map(self, fn: Callable[[dict], Any], schema: Mapping[str, Any]) -> Stream:
        """Each row (as a dict) becomes the rows `fn` yields (tuples in `schema` order, or dicts)."""
        return self.circuit.add(FlatMap(fn, to_schema(schema)), self)

    def ranges(self, lo: str, hi: str, step: str, column: str) -> Stream:
        """Each row once per value of the integer range its columns `lo`, `hi`, `step` give (Soufflé's
        range), in `column`, which replaces the three."""
        return self.circuit.add(Ranges(lo, hi, step, column), self)

    def stream_number(self, order: Sequence[str], column: str) -> Stream:
        """↑number: every unit of each step's Z-set a row of weight 1 with its place 0, 1, ... in the
        order of `order`, then the other columns, in the new `column` (`operators/numbering.py`;
        maintained by recomputing it over the integral)."""
        return self.circuit.add(StreamNumber(tuple(order), column), self)

    def stream_window(self, spec: Any) -> Stream:
        """↑window: every row (one per unit) with the window calls of `spec` (a
        `columnar.window_fold.WindowSpec`; `operators/window.py`)."""
        return self.circuit.add(StreamWindow(spec), self)

    def weigh(self, column: str) -> Stream:
        """Multiply each row's weight by its (integer) value in `column`, dropping the column."""
        return self.circuit.add(Weigh(column), self)

    def index(self, keys: str | Sequence[str]) -> Stream:
        """Group by key columns (§7.3): an indexed Z-set, the input of joins and aggregates."""
        k = _keys(keys)
        if self.shape.keys == k:
            return self
        return self.circuit.add(Index(k), self)

    def plus(self, other: Stream) -> Stream:
        """Z-set addition (UNION ALL)."""
        return self.circuit.add(Plus(), self, other)

    def neg(self) -> Stream:
        return self.circuit.add(Neg(), self)

    def minus(self, other: Stream) -> Stream:
        return self.plus(other.neg())

    __add__ = plus
    __sub__ = minus
    __neg__ = neg

    # ---- time ---------------------------------------------------------------------------------
    def delay(self) -> Stream:
        """z^-1: the previous step's value."""
        return self.circuit.add(Delay(), self)

    def integrate(self) -> Stream:
        """I: the sum of all values so far (a trace)."""
        return self.circuit.add(Integrate(), self)

    def differentiate(self) -> Stream:
        """D: this step's value minus the previous one."""
        return self.circuit.add(Differentiate(), self)

    # ---- lifted (per-step) non-linear and bilinear operators -------------------------------------
    def _join_parts(
        self, other: Stream, on: Any, left_on: Any, right_on: Any
    ) -> tuple[Stream, Stream, StreamJoin]:
        if on is not None:
            lk = rk = _keys(on)
            drop = rk
        else:
            lk, rk = _keys(left_on), _keys(right_on)
            drop = ()
        if not lk or len(lk) != len(rk):
            raise SchemaError("a join needs on= or left_on=/right_on= with the same number of key columns")
        for k in lk:
            if k not in self.schema:
                raise UnknownNameError(f"join: unknown left key {k!r}; the left stream has {self.columns}")
        for k in rk:
            if k not in other.schema:
                raise UnknownNameError(f"join: unknown right key {k!r}; the right stream has {other.columns}")
        # a column equal to two of the other side's (`x0.dst = x1.src AND x0.src = x1.src`): those two are
        # equal, a filter of that side (linear: the join's change is the same); one pair keys the join
        a, b, keep = self, other, []
        by_left: dict[str, str] = {}
        by_right: dict[str, str] = {}
        for lc, rc in dict.fromkeys(zip(lk, rk, strict=True)):
            if rc in by_right:
                a = a.filter(Col(by_right[rc]).eq(Col(lc)))
            elif lc in by_left:
                b = b.filter(Col(by_left[lc]).eq(Col(rc)))
            else:
                by_left[lc], by_right[rc] = rc, lc
                keep.append((lc, rc))
        lk, rk = tuple(lc for lc, _ in keep), tuple(rc for _, rc in keep)
        op = StreamJoin(lk, rk, right_columns(self.schema, other.schema, drop))
        return a.index(lk), b.index(rk), op

    def stream_join(
        self, other: Stream, on: Any = None, *, left_on: Any = None, right_on: Any = None
    ) -> Stream:
        """↑⋈: equi-join of each step's Z-sets."""
        a, b, op = self._join_parts(other, on, left_on, right_on)
        return self.circuit.add(op, a, b)

    def stream_product(self, other: Stream) -> Stream:
        """↑×: Cartesian product of each step's Z-sets."""
        return self.circuit.add(StreamProduct(right_columns(self.schema, other.schema)), self, other)

    def stream_multijoin(
        self,
        *others: Stream,
        maintenance: str = "delta",
        project: Sequence[str] | None = None,
        names: Mapping[str, str] | None = None,
    ) -> Stream:
        """↑⋈ of this stream and `others` at once, natural: columns of one name are equal (a NULL matches
        nothing), each once in the output, in order of first appearance; weights multiply. Evaluated by
        the leapfrog join, worst-case optimal on cyclic joins (`operators/multijoin.py`). `maintenance`:
        how its incremental form keeps it, "delta" (the delta join, `multilinear_delta`),
        "sensitivity" (sensitivity indices and the change oracle, `operators/maintained_join.py`) or
        "indexed" (the delta join over the inputs kept as tries, each change's term in its own variable
        order: `columnar/indexed_delta.py`).
        `project` (with "sensitivity"): the set of the bindings of these columns that some binding of the
        others completes, `distinct(π(⋈))` over inputs of positive weights, by short-circuit evaluation
        (`StreamExistsJoin`). `names`: what the errors of the joins held in this process call columns (a
        front end's own, as SQL's "r.y = s.x" for the variable it made of that equality)."""
        op = StreamMultiJoin(
            1 + len(others), maintenance, tuple((names or {}).items())
        )  # checks the maintenance
        if project is None:
            return self.circuit.add(op, self, *others)
        return self.circuit.add(_exists_join(op, project), self, *others)

    def stream_distinct(self) -> Stream:
        """↑distinct."""
        return self.circuit.add(StreamDistinct(), self)

    def stream_best(self, cost: str, better: str) -> Stream:
        """↑the best row per key: of the rows equal but in `cost`, the one whose `cost` is the least
        (`better` "min") or the greatest ("max"); a cost predicate's normal form
        (`incremental-aggregation-monotonic-programs.txt` Definition 4.6). Duplicates count once."""
        cols = self.columns
        keys = [c for c in cols if c != cost]
        s = self
        if not keys:  # a constant key: no row for no rows (a GROUP BY () would give one)
            keys = ["__best"]
            s = self.map(*cols, ("__best", Lit(0)))
        return s.stream_aggregate(by=keys, **{cost: (better, cost)}).map(*cols)

    def stream_aggregate(self, by: str | Sequence[str] | None = None, **aggs: Any) -> Stream:
        """↑GROUP BY-aggregate: `s.stream_aggregate("g", n="count", total=("sum", "x"))`."""
        spec = make_spec(_keys(by), aggs, self.schema)
        src = self.index(spec.by) if spec.by else self
        return self.circuit.add(StreamAggregate(spec), src)

    def stream_transitive_closure(self, src: str, dst: str) -> Stream:
        """↑TC: each step's pairs (src, dst) joined by a path of one or more edges (rows of positive
        weight); the output has the columns (src, dst) of this stream, which must have no others."""
        return self.circuit.add(StreamClosure(src, dst), self)

    def stream_semijoin(
        self, other: Stream, on: Any = None, *, left_on: Any = None, right_on: Any = None
    ) -> Stream:
        """Rows of this stream (with their weights) whose key occurs in `other`."""
        return self._semijoin(other, on, left_on, right_on, incremental=False)

    def stream_antijoin(
        self, other: Stream, on: Any = None, *, left_on: Any = None, right_on: Any = None
    ) -> Stream:
        """Rows of this stream whose key does not occur in `other` (§7.5: a - semijoin(a, b))."""
        return self - self.stream_semijoin(other, on, left_on=left_on, right_on=right_on)

    # ---- incremental operators (inputs and outputs are changes) ----------------------------------
    def join(self, other: Stream, on: Any = None, *, left_on: Any = None, right_on: Any = None) -> Stream:
        """(↑⋈)^Δ = Δa ⋈ I(b) + z^-1(I(a)) ⋈ Δb (Thm 3.4), probing each trace with the other change."""
        a, b, op = self._join_parts(other, on, left_on, right_on)
        return bilinear_delta(op, a, b)

    def product(self, other: Stream) -> Stream:
        """(↑×)^Δ."""
        return bilinear_delta(StreamProduct(right_columns(self.schema, other.schema)), self, other)

    def multijoin(
        self, *others: Stream, maintenance: str = "delta", project: Sequence[str] | None = None
    ) -> Stream:
        """(↑⋈ of n inputs)^Δ: see `stream_multijoin`, and `multilinear_delta`."""
        op = StreamMultiJoin(1 + len(others), maintenance)  # checks the maintenance's name
        if op.maintenance == "sensitivity" or project is not None:
            keep = None if project is None else _exists_join(op, project).project
            maintained = MaintainedMultiJoin(op.inputs, project=keep)
            maintained.shape([s.shape for s in (self, *others)])  # the inputs' columns checked
            return self.circuit.add(maintained, self, *others)
        if op.maintenance == "indexed":
            indexed = IndexedMultiJoin(op.inputs)
            indexed.shape([s.shape for s in (self, *others)])  # the inputs' columns checked
            return self.circuit.add(indexed, self, *others)
        return multilinear_delta([self, *others])

    def distinct(self) -> Stream:
        """(↑distinct)^Δ = ↑H(z^-1(I(d)), d) (Prop 4.7)."""
        return distinct_delta(self)

    def aggregate(self, by: str | Sequence[str] | None = None, **aggs: Any) -> Stream:
        """(↑GROUP BY-aggregate)^Δ: the change of the aggregate, per changed group."""
        spec = make_spec(_keys(by), aggs, self.schema)
        src = self.index(spec.by) if spec.by else self
        return self.circuit.add(Aggregate(spec), src)

    def transitive_closure(self, src: str, dst: str) -> Stream:
        """(↑TC)^Δ: the change of the transitive closure of the edges (see `stream_transitive_closure`),
        maintained by a graph index (strongly connected components), not by a fixpoint."""
        return self.circuit.add(Closure(src, dst), self)

    def semijoin(self, other: Stream, on: Any = None, *, left_on: Any = None, right_on: Any = None) -> Stream:
        """The change of the semi-join."""
        return self._semijoin(other, on, left_on, right_on, incremental=True)

    def antijoin(self, other: Stream, on: Any = None, *, left_on: Any = None, right_on: Any = None) -> Stream:
        """The change of the anti-join (§7.5)."""
        return self - self.semijoin(other, on, left_on=left_on, right_on=right_on)

    def _semijoin(self, other: Stream, on: Any, left_on: Any, right_on: Any, incremental: bool) -> Stream:
        lk = _keys(on) if on is not None else _keys(left_on)
        rk = _keys(on) if on is not None else _keys(right_on)
        keys = other.map(*[(f"__sj{i}", r) for i, r in enumerate(rk)]) if rk else other
        renamed = [f"__sj{i}" for i in range(len(rk))]
        keys = keys.distinct() if incremental else keys.stream_distinct()
        a = self.index(lk)
        b = keys.index(tuple(renamed))
        op = StreamJoin(lk, tuple(renamed), ())
        return bilinear_delta(op, a, b) if incremental else self.circuit.add(op, a, b)

    # ---- outputs ------------------------------------------------------------------------------
    def output(self, name: str) -> Stream:
        return self.circuit.output(name, self)


def bilinear_delta(op: Any, a: Stream, b: Stream) -> Stream:
    """(a × b)^Δ = a × I(b) + z^-1(I(a)) × b  (Thm 3.4, with I(b) = b + z^-1(I(b)))."""
    c = a.circuit
    return c.add(op, a, b.integrate()) + c.add(op, a.integrate().delay(), b)


def _exists_join(op: StreamMultiJoin, project: Sequence[str]) -> StreamExistsJoin:
    """The projected join of `op`'s inputs; short-circuit evaluation is kept by sensitivity indices only."""
    if op.maintenance != "sensitivity":
        raise SchemaError(
            "a multiway join with project= (short-circuit evaluation) is maintained by sensitivity indices: "
            "use maintenance='sensitivity', or project its rows after the join with map and distinct"
        )
    return StreamExistsJoin(op.inputs, tuple(project))


def multilinear_delta(ins: Sequence[Stream]) -> Stream:
    """(R_1 ⋈ ... ⋈ R_n)^Δ = Σ_k I(R_1) ⋈ ... ⋈ I(R_{k-1}) ⋈ ΔR_k ⋈ z^-1(I(R_{k+1})) ⋈ ... ⋈ z^-1(I(R_n)):
    a multilinear operator's change telescopes input by input (Thm 3.4's proof, n times). Term k reads
    the others' integrals only at the keys its change reaches (`MultiJoinTerm`), each indexed by the
    column it is sought by (the circuit cache shares an integral among the terms that seek it so)."""
    c = ins[0].circuit
    StreamMultiJoin(len(ins)).shape([s.shape for s in ins])  # the inputs' columns checked once
    atoms = [list(s.schema) for s in ins]
    out: Stream | None = None
    for k in range(len(ins)):
        plan = fetch_plan(atoms, k)
        traces = []
        for j, on in plan:
            trace = ins[j].index((on,)).integrate()
            traces.append(trace.delay() if j > k else trace)
        term = c.add(MultiJoinTerm((k, *(j for j, _ in plan)), tuple(on for _, on in plan)), ins[k], *traces)
        out = term if out is None else out + term
    assert out is not None
    return out


def distinct_delta(d: Stream) -> Stream:
    """↑H(z^-1(I(d)), d) (Prop 4.7); the integral is indexed by every column."""
    plain = d.index(tuple(d.schema))
    return d.circuit.add(DistinctH(), plain.integrate().delay(), d)
