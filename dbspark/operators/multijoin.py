"""The multiway natural join: n Z-sets joined at once by the leapfrog join (`columnar/leapfrog.py`).

`StreamMultiJoin` is the lifted natural join of its inputs (columns of one name are equal; weights
multiply; a NULL matches nothing), multilinear: linear in each input with the others fixed, so its
incremental form is the sum over inputs k of ΔR_k joined with the integrals of the others, those before
k up to this step, those after up to the previous one (`incremental/multilinear.py`; `dbsp-paper.txt`
Thm 3.4 generalized, the delta-join of DBSP). Each term is a `MultiJoinTerm`: the change, and the other
inputs' traces read only at the keys it reaches (`fetch_plan`: each trace is sought by one column the
rows fetched before it share with it), then joined by the leapfrog join in this process. Where a change
is not held in this process (a large one on the cluster: the first step of a view over big tables on
Spark), the term is the same joins done by the engine, one input after the other (`_chained`).

Why a multiway join: on a cyclic body (a triangle, a 4-cycle, a clique) over skewed data a chain of
binary joins builds intermediate results far larger than the output, which the leapfrog join never
does (`lftj-incremental-maintenance.txt` §4.1; `is_cyclic` decides, and the front ends choose it for
cyclic bodies).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl

from dbspark.algebra.zset import WEIGHT, ZSet
from dbspark.columnar.leapfrog import leapfrog_join, output_schema, variable_order
from dbspark.errors import SchemaError
from dbspark.ir.expr import col
from dbspark.operators.base import MULTILINEAR, NONLINEAR, Operator, Shape

if TYPE_CHECKING:
    from dbspark.engines.base import Kernel, Value


MAINTENANCE = ("delta", "sensitivity", "indexed")  # see StreamMultiJoin and operators/maintained_join.py


def is_cyclic(atoms: Sequence[Sequence[str]]) -> bool:
    """Whether the hypergraph of the atoms' variables is cyclic (GYO reduction: drop a variable only one
    atom has, or an atom another contains, until nothing changes; acyclic iff at most one atom is left)."""
    edges = [set(a) for a in atoms]
    changed = True
    while changed and len(edges) > 1:
        changed = False
        for e in edges:
            lone = {v for v in e if sum(v in f for f in edges) == 1}
            if lone:
                e -= lone
                changed = True
        for i, e in enumerate(edges):
            if any(j != i and (e < f or (e == f and j < i)) for j, f in enumerate(edges)):
                del edges[i]
                changed = True
                break
    return len(edges) > 1


def connected(atoms: Sequence[Sequence[str]]) -> bool:
    """Whether the atoms are connected through shared variables."""
    if not atoms:
        return True
    reached, grown = {0}, True
    while grown:
        grown = False
        for i, a in enumerate(atoms):
            if i not in reached and any(set(a) & set(atoms[j]) for j in reached):
                reached.add(i)
                grown = True
    return len(reached) == len(atoms)


def fetch_plan(atoms: Sequence[Sequence[str]], first: int) -> list[tuple[int, str]]:
    """For the term of input `first`'s change: the other inputs in the order they are read, each with the
    column it is sought by (one the inputs read before share with it; the change's own if it can)."""
    known, plan, left = set(atoms[first]), [], [i for i in range(len(atoms)) if i != first]
    while left:
        j = max(left, key=lambda i: (len(known & set(atoms[i])), -i))
        shared = [v for v in atoms[j] if v in known]
        if not shared:
            raise SchemaError(
                f"a multiway join's inputs must share columns; input {j} shares none with the others"
            )
        on = next((v for v in shared if v in atoms[first]), shared[0])
        plan.append((j, on))
        known |= set(atoms[j])
        left.remove(j)
    return plan


def check_inputs(ins: Sequence[Shape]) -> pl.Schema:
    """The multiway join's output schema; a column of two inputs must have one type in both."""
    seen: dict[str, pl.DataType] = {}
    for k, s in enumerate(ins):
        for c, t in s.schema.items():
            if c in seen and seen[c] != t:
                raise SchemaError(
                    f"multiway join: column {c} is {seen[c]} in one input and {t} in input {k}; cast one to "
                    "the other's type first"
                )
            seen.setdefault(c, t)
    if not connected([list(s.schema) for s in ins]):
        raise SchemaError("a multiway join's inputs must be connected through shared columns")
    schema = output_schema([s.schema for s in ins])
    return pl.Schema([(c, t) for c, t in schema.items() if c != WEIGHT])


def projected(schema: pl.Schema, project: Sequence[str]) -> pl.Schema:
    """The join's columns that `project` keeps, in the join's order; a name it lacks is an error."""
    missing = [c for c in project if c not in schema]
    if missing or not project:
        raise SchemaError(
            f"a multiway join's projection names {missing or 'no columns'}; the join's columns are {list(schema)}"
        )
    return pl.Schema([(c, t) for c, t in schema.items() if c in project])


@dataclass(frozen=True)
class Columns:
    """What a multiway join's evaluation needs of its inputs' shapes: each input's columns (by
    position) and the output schema."""

    atoms: tuple[tuple[str, ...], ...]
    schema: pl.Schema


@dataclass(frozen=True)
class StreamMultiJoin(Operator):
    """The lifted natural join of `inputs` Z-sets (two or more), by the leapfrog join."""

    inputs: int
    maintenance: str = "delta"  # its incremental form: "delta" (the delta join), "sensitivity" or "indexed"
    # what a front end calls columns it named itself (SQL's join variables: "r.y = s.x"), for the errors
    # of the joins held in this process; not part of what the node computes
    names: tuple[tuple[str, str], ...] = field(default=(), compare=False)
    name = "stream_multijoin"
    kind = MULTILINEAR

    @property
    def arity(self) -> int:  # type: ignore[override]
        return self.inputs

    def __post_init__(self) -> None:
        if self.maintenance not in MAINTENANCE:
            raise SchemaError(
                f"unknown maintenance {self.maintenance!r} for a multiway join; use one of {', '.join(MAINTENANCE)}"
            )

    def shape(self, ins: list[Shape]) -> Shape:
        return Shape(check_inputs(ins))

    def label(self) -> str:
        extra = "" if self.maintenance == "delta" else f", {self.maintenance}"
        return f"stream_multijoin[{self.inputs}{extra}]"

    def init(self, kernel: Kernel, shape: Shape, in_shapes: list[Shape]) -> Columns:
        return Columns(tuple(tuple(s.schema) for s in in_shapes), shape.schema)

    def eval(self, kernel: Kernel, state: Columns, inputs: list[Any], undo: list) -> Any:
        if all(kernel.is_local(v) for v in inputs):
            frames = [kernel.to_local(v).df for v in inputs]
            return kernel.from_local(ZSet(leapfrog_join(frames)))
        steps = [(inputs[j], on, state.atoms[j]) for j, on in fetch_plan(state.atoms, 0)]
        return _chained(kernel, inputs[0], state.atoms[0], steps, state.schema)


@dataclass(frozen=True)
class MultiJoinTerm(Operator):
    """One term of the multiway join's change: input `positions[0]`'s change (the operator's first
    input) joined with the traces of the others (inputs 1.., of `positions[1:]`, each indexed by its
    `fetch` column and read only at the values the rows read before it have there)."""

    positions: tuple[int, ...]
    fetch: tuple[str, ...]
    name = "multijoin_term"
    kind = MULTILINEAR

    @property
    def arity(self) -> int:  # type: ignore[override]
        return len(self.positions)

    def shape(self, ins: list[Shape]) -> Shape:
        return Shape(check_inputs([Shape(s.schema) for s in self._by_position(ins)]))

    def label(self) -> str:
        return f"multijoin_term[Δ{self.positions[0]}]"

    def _by_position(self, ins: list[Any]) -> list[Any]:
        return [v for _, v in sorted(zip(self.positions, ins, strict=True), key=lambda p: p[0])]

    def init(self, kernel: Kernel, shape: Shape, in_shapes: list[Shape]) -> Columns:
        return Columns(tuple(tuple(s.schema) for s in self._by_position(in_shapes)), shape.schema)

    def eval(self, kernel: Kernel, state: Columns, inputs: list[Any], undo: list) -> Any:
        delta, traces = inputs[0], inputs[1:]
        if kernel.known_empty(delta) or any(kernel.known_empty(t) for t in traces):
            return kernel.empty(state.schema)
        atoms, order = state.atoms, self.positions
        if not kernel.is_local(delta):
            steps = [(t, on, atoms[j]) for t, on, j in zip(traces, self.fetch, order[1:], strict=True)]
            return _chained(kernel, delta, atoms[order[0]], steps, state.schema)
        frames = {order[0]: kernel.to_local(delta).df}  # (a join needs no consolidated input)
        for t, on, j in zip(traces, self.fetch, order[1:], strict=True):
            holder = next(f for f in frames.values() if on in f.schema)
            keys = holder.select(on).drop_nulls().unique().with_columns(pl.lit(1, pl.Int64).alias(WEIGHT))
            found = kernel.to_local(kernel.seek(t, kernel.from_local(ZSet(keys, True)), [(on, on)], False))
            frames[j] = found.df.select([*atoms[j], WEIGHT])
            if frames[j].height == 0:
                return kernel.empty(state.schema)
        ordered = [frames[i] for i in range(len(atoms))]
        variables = variable_order(atoms, [f.height for f in ordered], atoms[order[0]])
        return kernel.from_local(ZSet(leapfrog_join(ordered, variables)))


def _chained(
    kernel: Kernel,
    first: Value,
    first_cols: Sequence[str],
    rest: Sequence[tuple[Value, str, Sequence[str]]],
    schema: pl.Schema,
) -> Value:
    """The natural join as the engine's binary joins, one input after the other: each joined on its
    `on` column (a trace's index key), its other shared columns compared after; the columns in the
    order of `schema` (the join's)."""
    cur = first
    have = list(first_cols)
    for v, on, cols in rest:
        shared = [c for c in cols if c in have and c != on]
        cur = kernel.join(
            cur, v, [on], [on], [(c, c if c not in have else f"__mj_{c}") for c in cols if c != on]
        )
        if shared:
            cond = col(shared[0]).eq(col(f"__mj_{shared[0]}"))
            for c in shared[1:]:
                cond = cond & col(c).eq(col(f"__mj_{c}"))
            cur = kernel.filter(cur, cond)
        have += [c for c in cols if c not in have]
        cur = kernel.map(cur, [(c, col(c)) for c in have], pl.Schema([(c, schema[c]) for c in have]))
    return kernel.map(cur, [(c, col(c)) for c in schema], schema)


@dataclass(frozen=True)
class StreamExistsJoin(Operator):
    """↑ the bindings of `project` that some binding of the join's other columns completes, each once:
    `distinct(π_project(⋈ of the inputs))` where the inputs' weights are positive (as Datalog's relations
    are); in general a row of weight <= 0 counts as absent. Its incremental form is the join maintained
    by sensitivity indices with short-circuit evaluation (`lftj-incremental-maintenance.txt` §2.2.1,
    `columnar/short_circuit.py`): a head binding's search stops at its first completion."""

    inputs: int
    project: tuple[str, ...]
    name = "stream_exists_join"
    kind = NONLINEAR

    @property
    def arity(self) -> int:  # type: ignore[override]
        return self.inputs

    def shape(self, ins: list[Shape]) -> Shape:
        return Shape(projected(check_inputs(ins), self.project))

    def label(self) -> str:
        return f"stream_exists_join[{self.inputs}, {', '.join(self.project)}]"

    def init(self, kernel: Kernel, shape: Shape, in_shapes: list[Shape]) -> Columns:
        return Columns(tuple(tuple(s.schema) for s in in_shapes), check_inputs(in_shapes))

    def eval(self, kernel: Kernel, state: Columns, inputs: list[Any], undo: list) -> Any:
        sets = [kernel.distinct(v) for v in inputs]  # each input's rows of positive weight, once
        out = projected(state.schema, self.project)
        if all(kernel.is_local(v) for v in sets):
            joined = kernel.from_local(ZSet(leapfrog_join([kernel.to_local(v).df for v in sets])))
        else:
            steps = [(sets[j], on, state.atoms[j]) for j, on in fetch_plan(state.atoms, 0)]
            joined = _chained(kernel, sets[0], state.atoms[0], steps, state.schema)
        return kernel.distinct(kernel.map(joined, [(c, col(c)) for c in out], out))
