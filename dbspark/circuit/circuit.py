"""The circuit builder: a graph of operator nodes, hash-consed so that a derived stream is built once.

A node is (operator, input node ids); `Circuit.add` returns the existing node for an equal
(operator, inputs) pair — the circuit cache. The cache also cancels D∘I and I∘D (Thm 2.22), so
`s.integrate().differentiate()` is `s`. Feedback edges go through a delay: `fb = c.feedback(schema)`
gives the delayed stream `fb.stream` to use, and `fb.connect(s)` closes the loop (§2.2, §5).
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import polars as pl

from dbspark.errors import CircuitError, UnknownNameError
from dbspark.ir.schema import to_schema
from dbspark.operators.base import Operator, Shape
from dbspark.operators.source import Constant, Input, Lateness
from dbspark.operators.time import Delay, Differentiate, Integrate

if TYPE_CHECKING:
    from dbspark.circuit.runtime import Runtime
    from dbspark.circuit.stream import Stream

_feedback_tags = itertools.count(1)


@dataclass
class Node:
    id: int
    op: Operator
    inputs: tuple[int, ...]
    shape: Shape


class Feedback:
    """An open feedback edge: `stream` is z^-1 of whatever `connect` is later given."""

    def __init__(self, circuit: Circuit, node_id: int) -> None:
        self.circuit = circuit
        self.node_id = node_id
        self.connected = False

    @property
    def stream(self) -> Stream:
        return self.circuit.stream(self.node_id)

    def connect(self, s: Stream) -> None:
        if self.connected:
            raise CircuitError("this feedback edge is already connected")
        if s.circuit is not self.circuit:
            raise CircuitError("a feedback edge must be connected to a stream of its own circuit")
        node = self.circuit.nodes[self.node_id]
        if list(s.shape.schema.items()) != list(node.shape.schema.items()):
            raise CircuitError(f"feedback expects schema {node.shape.schema}, got {s.shape.schema}")
        node.inputs = (s.node_id,)
        node.shape = Shape(s.shape.schema, s.shape.keys, s.shape.trace)
        self.connected = True


class Circuit:
    """A DBSP circuit under construction; `run()` evaluates it step by step."""

    def __init__(self) -> None:
        self.nodes: dict[int, Node] = {}
        self.inputs: dict[str, int] = {}
        self.outputs: dict[str, int] = {}
        self._cache: dict[tuple[Operator, tuple[int, ...]], int] = {}
        self._feedbacks: list[Feedback] = []

    # ---- building -----------------------------------------------------------------------------
    def add(self, op: Operator, *inputs: Stream) -> Stream:
        """The stream `op(inputs)`, reusing an equal node if one exists (the circuit cache)."""
        for s in inputs:
            if s.circuit is not self:
                raise CircuitError(f"{op.label()}: input stream belongs to another circuit")
        ids = tuple(s.node_id for s in inputs)
        if len(ids) != op.arity:
            raise CircuitError(f"{op.name} takes {op.arity} inputs, got {len(ids)}")
        if isinstance(op, Differentiate) and self.nodes[ids[0]].op == Integrate():
            return self.stream(self.nodes[ids[0]].inputs[0])  # D(I(s)) = s
        if isinstance(op, Integrate) and isinstance(self.nodes[ids[0]].op, Differentiate):
            return self.stream(self.nodes[ids[0]].inputs[0])  # I(D(s)) = s
        key = (op, ids)
        if key in self._cache:
            return self.stream(self._cache[key])
        shape = op.shape([self.nodes[i].shape for i in ids])
        nid = len(self.nodes)
        self.nodes[nid] = Node(nid, op, ids, shape)
        self._cache[key] = nid
        return self.stream(nid)

    def stream(self, node_id: int) -> Stream:
        from dbspark.circuit.stream import Stream

        return Stream(self, node_id)

    def input(
        self,
        name: str,
        schema: Mapping[str, Any] | pl.Schema,
        kind: str = "zset",
        primary_key: str | Sequence[str] | None = None,
        not_null: Sequence[str] = (),
        unique: Sequence[str | Sequence[str]] = (),
        lateness: Lateness | None = None,
    ) -> Stream:
        """A named input of the given schema. kind: 'zset' (any weights), 'bag' (its integral must stay
        non-negative: a delete of an absent row is rejected) or 'set' (weights of the integral 0 or 1).

        `primary_key` (a column or columns; kind 'bag' or 'set') makes it a keyed table: an insert of a
        key that is there replaces its row, a delete is by key; `not_null` columns reject NULLs. Each of
        `unique` (a column or columns; kind 'bag' or 'set') is a UNIQUE constraint: a step after which
        two rows hold the same values in them, none NULL, is rejected. `lateness` declares how late rows
        may arrive (`operators.source.Lateness`); its column is NOT NULL."""
        if name in self.inputs:
            raise CircuitError(f"input {name!r} is already declared")
        if kind not in ("zset", "bag", "set"):
            raise CircuitError(f"input kind must be 'zset', 'bag' or 'set', not {kind!r}")
        sch = to_schema(schema)
        key = (primary_key,) if isinstance(primary_key, str) else tuple(primary_key or ())
        nn = (not_null,) if isinstance(not_null, str) else tuple(not_null)
        uniq = tuple((u,) if isinstance(u, str) else tuple(u) for u in unique)
        if uniq and kind == "zset":
            raise CircuitError(f"input {name!r}: a table with a UNIQUE constraint is a 'bag' or 'set'")
        for what, cols in (("primary key", key), ("NOT NULL", nn), *(("UNIQUE", u) for u in uniq)):
            unknown = [c for c in cols if c not in sch]
            if unknown:
                raise UnknownNameError(
                    f"input {name!r}: {what} column(s) {unknown} are not in its columns {list(sch)}"
                )
            if len(set(cols)) != len(cols):
                raise CircuitError(f"input {name!r}: {what} columns {list(cols)} repeat a name")
        if key and kind == "zset":
            raise CircuitError(
                f"input {name!r}: a table with a primary key is a 'bag' or 'set', not a 'zset'"
            )
        if lateness is not None:
            check_lateness(name, sch, lateness)
            if key and lateness.column not in key:
                raise CircuitError(
                    f"input {name!r}: a table with a primary key takes a lateness on a key column only (an "
                    f"update by key retracts the old row, whose {lateness.column} may be long past)"
                )
            nn = (*nn, lateness.column)
        s = self.add(Input(name, sch, kind, key, tuple(c for c in sch if c in nn), uniq, lateness))
        self.inputs[name] = s.node_id
        return s

    def constant(self, schema: Mapping[str, Any] | pl.Schema, rows: Sequence[Sequence[Any]]) -> Stream:
        """A constant stream: `rows` (tuples in column order, weight 1 each) at every step. It belongs to
        this circuit, so a recursive scope's body builds its own constants (`Circuit.recursive`)."""
        sch = to_schema(schema)
        rows_ = tuple(tuple(r) for r in rows)
        bad = [r for r in rows_ if len(r) != len(sch)]
        if bad:
            raise CircuitError(f"constant: row {bad[0]!r} does not have the {len(sch)} columns {list(sch)}")
        return self.add(Constant(sch, rows_))

    def output(self, name: str, s: Stream) -> Stream:
        """Name a stream as an output: `step()` returns its value, `view()` its integral."""
        if s.circuit is not self:
            raise CircuitError(f"output {name!r}: the stream belongs to another circuit")
        if name in self.outputs:
            raise CircuitError(f"output {name!r} is already declared")
        self.outputs[name] = s.node_id
        return s

    def feedback(
        self, schema: Mapping[str, Any] | pl.Schema, keys: tuple[str, ...] | None = None
    ) -> Feedback:
        """An open loop through z^-1: use `fb.stream`, then `fb.connect(result)`."""
        nid = len(self.nodes)
        sch = schema if isinstance(schema, pl.Schema) else to_schema(schema)
        self.nodes[nid] = Node(nid, Delay(next(_feedback_tags)), (), Shape(sch, keys))
        fb = Feedback(self, nid)
        self._feedbacks.append(fb)
        return fb

    def recursive(self, body: Any, inputs: Any, schemas: Any = None, **options: Any) -> Any:
        """A recursive scope: the fixpoint of `body` over `inputs` (see `circuit.scope.recursive`)."""
        from dbspark.circuit.scope import recursive

        return recursive(
            self, body, list(inputs) if not hasattr(inputs, "circuit") else [inputs], schemas, **options
        )

    # ---- inspection ---------------------------------------------------------------------------
    def check(self) -> None:
        for fb in self._feedbacks:
            if not fb.connected:
                raise CircuitError(f"feedback node n{fb.node_id} was never connected")

    def input_stream(self, name: str) -> Stream:
        if name not in self.inputs:
            raise UnknownNameError(f"unknown input {name!r}; the inputs are {sorted(self.inputs)}")
        return self.stream(self.inputs[name])

    def consumers(self) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {i: [] for i in self.nodes}
        for n in self.nodes.values():
            for i in n.inputs:
                out[i].append(n.id)
        return out

    def live(self) -> set[int]:
        """Inputs and the nodes the outputs depend on; anything else (an I whose D cancelled) is dead."""
        seen = set(self.inputs.values())
        stack = list(self.outputs.values())
        while stack:
            nid = stack.pop()
            if nid in seen:
                continue
            seen.add(nid)
            stack.extend(self.nodes[nid].inputs)
        return seen

    def explain(self) -> str:
        """The circuit as text, one node per line, inputs by node id."""
        from dbspark.circuit.explain import explain

        return explain(self)

    def __repr__(self) -> str:
        return self.explain()

    # ---- transformation and running -----------------------------------------------------------
    def incrementalize(self, recursion: str | None = None) -> Circuit:
        """Q^Δ: the circuit computing on changes (Algorithm 4.8), built by the rules of `incremental/`.
        `recursion` ("auto", "nested" or "dred") maintains every recursive scope by that strategy
        (default: each scope's own, `Circuit.recursive(..., strategy=)`)."""
        from dbspark.incremental import incrementalize

        return incrementalize(self, recursion)

    def run(self, engine: Any = "local", *, snapshots: bool = False, **options: Any) -> Runtime:
        """A runtime that evaluates this circuit step by step on the named engine.

        Inputs carry changes to their relations, so a 'bag' or 'set' input constrains the sum of what
        was pushed. With `snapshots=True` each step's push is the whole relation instead (how the
        non-incremental Q of Algorithm 4.8 is fed), and the kind constrains each step's value."""
        from dbspark.circuit.runtime import Runtime
        from dbspark.engines import get_kernel

        return Runtime(self, get_kernel(engine, **options), snapshots=snapshots)


def check_lateness(name: str, schema: pl.Schema, lateness: Lateness) -> None:
    """A lateness's column is a TIMESTAMP, DATE or numeric column of the input and its delay a
    non-negative `timedelta` (temporal) or number (numeric); a CircuitError names the fault."""
    c = lateness.column
    if c not in schema:
        raise UnknownNameError(f"input {name!r}: lateness column {c!r} is not in its columns {list(schema)}")
    t = schema[c]
    temporal = isinstance(t, (pl.Datetime, pl.Date))
    if not temporal and not t.is_numeric():
        raise CircuitError(
            f"input {name!r}: lateness column {c!r} is {t}; it must be a TIMESTAMP, DATE or numeric column"
        )
    d = lateness.delay
    ok = isinstance(d, dt.timedelta) if temporal else isinstance(d, (int, float)) and not isinstance(d, bool)
    if not ok:
        want = "an INTERVAL (datetime.timedelta)" if temporal else "a number"
        raise CircuitError(f"input {name!r}: the lateness of {c!r} ({t}) must be {want}, not {d!r}")
    if d < (dt.timedelta(0) if temporal else 0):
        raise CircuitError(f"input {name!r}: the lateness of {c!r} is negative ({d})")
    if lateness.late not in ("drop", "error"):
        raise CircuitError(
            f"input {name!r}: late rows are 'drop'ped (and counted) or an 'error', not {lateness.late!r}"
        )
