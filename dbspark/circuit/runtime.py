"""The scheduler and the runtime handle: evaluate a circuit one step at a time.

Each step evaluates the nodes in a topological order in which delays are sources (their output, the
previous step's input, is known before the step: this is how feedback loops through z^-1 are
well-defined, `dbsp-paper.txt` §2.2.2 strictness). A step is atomic: every state change registers an
undo, and a step that raises is rolled back, leaving the circuit at its previous step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from dbspark.algebra.zset import WEIGHT, ZSet
from dbspark.circuit import garbage, waterline
from dbspark.circuit.checkpoint import FrameFiles, fingerprint
from dbspark.circuit.circuit import Circuit
from dbspark.circuit.identity import identity_hash, node_keys
from dbspark.circuit.metrics import Metrics
from dbspark.circuit.schedule import advance_delays, evaluate, schedule
from dbspark.errors import CheckpointError, DataError, DbsparkError, EngineError, UnknownNameError
from dbspark.ir.expr import col, lit
from dbspark.ir.order import SortKey
from dbspark.operators import checks, keyed
from dbspark.operators.source import Input
from dbspark.operators.time import Delay, DelayState
from dbspark.operators.window import Window

if TYPE_CHECKING:
    from dbspark.engines.base import Kernel


# what Polars appends to an error raised inside an expression's UDF (the checks of `operators.checks`):
# its plan, not the user's
POLARS_CONTEXT = "This error occurred in the following expression:"


class Runtime:
    """A running circuit: push changes to inputs, `step()`, read outputs and their integrals."""

    def __init__(
        self, circuit: Circuit, kernel: Kernel, snapshots: bool = False, adopt: Runtime | None = None
    ) -> None:
        """`adopt`: a running runtime on the same kernel whose circuit this one's replaces (a view added
        or dropped): the state of every node both circuits have (by key, `circuit/identity.py`), the
        tables' and the views' carry over, with the step count, waterlines, offsets and queued changes;
        the nodes and views that are new start empty and are backfilled (`backfill`)."""
        self.circuit = circuit
        self.snapshots = snapshots
        self.kernel = kernel
        alive = circuit.live()
        self.order = [n for n in schedule(circuit) if n in alive]
        self.keys = node_keys(circuit)
        self.time = 0
        self.metrics: Metrics | None = None  # per operator and step, when asked for (`circuit/metrics.py`)
        kept = adopt.owned_states() if adopt is not None else {}
        self.states: dict[int, Any] = {
            nid: kept[self.keys[nid]] if self.keys[nid] in kept else self._new_state(nid)
            for nid in self.order
        }
        self._pending: dict[str, list[Any]] = {name: [] for name in circuit.inputs}
        self._frames: FrameFiles | None = None
        self._input_traces: dict[str, Any] = {}  # kind checks of bag and set inputs, per input
        self._unique_traces: dict[str, list[tuple[tuple[str, ...], Any]]] = {}  # UNIQUE indexes, per input
        self._views: dict[str, Any] = {}
        same = adopt.same if adopt is not None else lambda what, name, owner: False
        for name in circuit.inputs:
            if same("input", name, self.owner("input", name)):
                assert adopt is not None
                self._pending[name] = adopt._pending[name]
                for mine, theirs in (
                    (self._input_traces, adopt._input_traces),
                    (self._unique_traces, adopt._unique_traces),
                ):
                    if name in theirs:
                        mine[name] = theirs[name]
            else:
                self._new_table(name)
        for name, nid in circuit.outputs.items():
            if same("view", name, self.owner("view", name)):
                assert adopt is not None
                self._views[name] = adopt._views[name]
            else:
                with kernel.owned(self.owner("view", name)):
                    sch = circuit.nodes[nid].shape.schema
                    self._views[name] = kernel.new_trace(sch, tuple(sch))
        self._last: dict[str, ZSet] = {}
        # stateful nodes and views that started empty after steps ran (`backfill` fills them), and the
        # views' contents a backfill computed, reported as part of their next step's change
        self.fresh: set[int] = set()
        self.fresh_views: set[str] = set()
        self.backfilled: dict[str, Any] = {}
        # lateness (`circuit/waterline.py`): each table's waterline after the last step, the late rows
        # each dropped, and the state each step collects (`circuit/garbage.py`)
        self.waterlines: dict[str, Any] = {}
        self.late_rows: dict[str, int] = {}
        # how far the sources a step reads have been read (a feed's versions: `io/feeds.py`), committed
        # with the step's checkpoint
        self.offsets: dict[str, Any] = {}
        self.garbage = [] if snapshots else garbage.plan(circuit, self.order)
        self._marks: dict[int, waterline.Marks] | None = None
        self.input_noun = "input"  # how messages name an input ("table" in a Pipeline)
        if adopt is not None:
            self.time, self.offsets = adopt.time, adopt.offsets
            self.waterlines, self.late_rows = adopt.waterlines, adopt.late_rows
            self.backfilled = {
                n: v
                for n, v in adopt.backfilled.items()
                if n in self._views and n in adopt._views and self._views[n] is adopt._views[n]
            }
            if self.time > 0:
                self.fresh = {
                    nid for nid in self.order if self.keys[nid] not in kept and self.states[nid] is not None
                }
                self.fresh_views = {n for n in circuit.outputs if not same("view", n, self.owner("view", n))}

    def _new_state(self, nid: int) -> Any:
        """A node's state, empty (its traces owned by its key)."""
        n, k = self.circuit.nodes[nid], self.kernel
        with k.owned(self.keys[nid]):
            if isinstance(n.op, Delay):
                sh = n.shape
                return DelayState(
                    k.empty_snapshot(sh.schema, sh.index_keys) if sh.trace else k.empty(sh.schema)
                )
            return n.op.init(k, n.shape, [self.circuit.nodes[i].shape for i in n.inputs])

    def _new_table(self, name: str) -> None:
        """A table's traces, empty: its bag / set check (a keyed table's by its key), its UNIQUE indexes."""
        op = self.circuit.nodes[self.circuit.inputs[name]].op
        assert isinstance(op, Input)
        if self.snapshots:
            return
        with self.kernel.owned(self.owner("input", name)):
            if op.positive:
                self._input_traces[name] = self.kernel.new_trace(
                    op.schema, op.primary_key or tuple(op.schema)
                )
            for cols in op.unique:  # a UNIQUE constraint's index: its columns
                key_schema = pl.Schema([(c, op.schema[c]) for c in cols])
                self._unique_traces.setdefault(name, []).append(
                    (cols, self.kernel.new_trace(key_schema, cols))
                )

    # ---- owners of state, and a changed circuit ---------------------------------------------------
    def owner(self, what: str, name: str) -> str:
        """The owner of a table's or a view's traces (`Kernel.owned`): a table by its declaration, a
        view by its name and what it computes, so that a view defined anew gets new state."""
        if what == "input":
            ident = repr(self.circuit.nodes[self.circuit.inputs[name]].op)
        else:
            ident = self.keys[self.circuit.outputs[name]]
        return identity_hash([what, name, ident])

    def owners(self) -> set[str]:
        """Every owner of this runtime's state."""
        return {
            *(self.keys[nid] for nid in self.order),
            *(self.owner("input", n) for n in self.circuit.inputs),
            *(self.owner("view", n) for n in self.circuit.outputs),
        }

    def owned_states(self) -> dict[str, Any]:
        """Each node's state by the node's key."""
        return {self.keys[nid]: st for nid, st in self.states.items()}

    def same(self, what: str, name: str, owner: str) -> bool:
        """Whether this runtime has the table or view `name` (`what`: "input" or "view") with `owner`."""
        names = self.circuit.inputs if what == "input" else self.circuit.outputs
        return name in names and self.owner(what, name) == owner

    # ---- inputs -------------------------------------------------------------------------------
    def _input(self, name: str) -> Input:
        if name not in self.circuit.inputs:
            raise UnknownNameError(f"unknown input {name!r}; the inputs are {sorted(self.circuit.inputs)}")
        op = self.circuit.nodes[self.circuit.inputs[name]].op
        assert isinstance(op, Input)
        return op

    def push(self, name: str, rows: Any, weights: Sequence[int] | np.ndarray | int | None = None) -> None:
        """Queue rows with weights for the next step (a frame may carry a `weight` column instead).

        The rows are coerced to the input's column types and checked (width, NULLs in NOT NULL columns;
        for a keyed input, weights 1 / -1) before anything is queued: a bad push raises and queues nothing.
        A Spark DataFrame stays lazy and is checked when the step runs (a bad value rejects the step)."""
        op = self._input(name)
        key = op.primary_key or None
        self._pending[name].append(
            self.kernel.input_batch(rows, op.schema, weights, self._where(name), op.required, key)
        )

    def _where(self, name: str) -> str:
        return f"{self.input_noun} {name!r}"

    def insert(self, name: str, rows: Any) -> None:
        """Queue rows with weight 1 (see `push`)."""
        self.push(name, rows, 1)

    def delete(self, name: str, rows: Any) -> None:
        """Queue rows with weight -1 (see `push`)."""
        self.push(name, rows, -1)

    # ---- stepping -----------------------------------------------------------------------------
    def step(self, commit: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
        """Evaluate one step; returns each output's value (for an incremental circuit, its change).

        `commit(outputs)` (e.g. writing the outputs to a sink, then a checkpoint) runs once the step
        succeeded; if it raises, the step is rolled back like a failed one. Files the step replaced are deleted only after the commit."""
        pending = {n: v for n, v in self._pending.items() if v}
        for name in self._pending:
            self._pending[name] = []
        undo: list = []
        self.kernel.begin_step(self.time)
        try:
            values = self._evaluate(self._placed(pending), undo)
            out = {}
            for name, nid in self.circuit.outputs.items():
                change = values[nid]
                if name in self.backfilled:  # a view new since the last step: its contents come first
                    change = self.kernel.plus(self.backfilled[name], change)
                out[name] = self.kernel.commit_output(self._views[name], change, name, undo)
            if self.backfilled:
                was, self.backfilled = self.backfilled, {}
                undo.append(lambda: setattr(self, "backfilled", was))
            self.kernel.flush_step(undo)
            if self.garbage:
                self._collect(undo)
            self.time += 1
            undo.append(lambda: setattr(self, "time", self.time - 1))
            if commit is not None:
                commit(out)
        except BaseException as e:
            if self.metrics is not None:
                self.metrics.abort()
            for fn in reversed(undo):
                fn()
            self.kernel.abort_step()
            if isinstance(e, EngineError) or not isinstance(e, DbsparkError):
                # not the data's fault: the changes stay queued, so that the step can be run again
                for name, batches in pending.items():
                    self._pending[name] = batches + self._pending[name]
            if isinstance(e, EngineError):
                e.args = (
                    f"step {self.time + 1} failed on the engine, nothing applied (its changes stay queued: "
                    f"run the step again): {e.args[0] if e.args else e}",
                )
            elif isinstance(e, DbsparkError):
                msg = str(e.args[0] if e.args else e).split(POLARS_CONTEXT)[0].rstrip()
                e.args = (f"step {self.time + 1} rejected, nothing applied: {msg}",)
            raise
        self._last = out
        self.kernel.end_step(self.time)
        if self.metrics is not None:
            self.metrics.end_step(self.time)
        return out

    def _placed(self, pending: dict[str, list[Any]]) -> dict[str, list[Any]]:
        """The step's pushed changes placed by the engine, all together (on Spark: small ones read
        into the driver in one job, `engines.spark.placement`); the queue keeps them as pushed."""
        names = [(n, len(v)) for n, v in pending.items()]
        flat = self.kernel.place([b for v in pending.values() for b in v])
        out, i = {}, 0
        for n, k in names:
            out[n], i = flat[i : i + k], i + k
        return out

    def _evaluate(self, pending: dict[str, list[Any]], undo: list) -> dict[int, Any]:
        def source(op: Input) -> Any:
            return self._input_value(op, pending.get(op.name_, []), undo)

        record = self.metrics.record if self.metrics is not None else None
        values = evaluate(self.order, self.circuit, self.states, self.kernel, source, undo, record)
        advance_delays(self.order, self.circuit, self.states, values, undo, self.kernel.hold)
        return values

    def _input_value(self, op: Input, batches: list[Any], undo: list) -> Any:
        if not batches:
            return self.kernel.empty(op.schema)
        if op.lateness is not None and not self.snapshots:
            batches = [self._on_time(op, b, undo) for b in batches]
        z = self._input_change(op, batches, undo)
        if op.lateness is not None and not self.snapshots:
            self._advance(op, z, undo)
        for cols, index in self._unique_traces.get(op.name_, ()):  # after the kind checks: a valid change
            checks.unique_checked(self.kernel, index, z, cols, self._where(op.name_), undo)
        return z

    def _on_time(self, op: Input, batch: Any, undo: list) -> Any:
        """The rows of a pushed batch that are not late (`operators.source.Lateness`): a late row is
        counted and dropped, or rejects the step, naming it."""
        late = op.lateness
        assert late is not None
        w = self.waterlines.get(op.name_)
        if w is None:
            return batch
        k, c = self.kernel, col(late.column)
        behind = k.to_local(k.filter(batch, c < lit(w)))
        if len(behind) == 0:
            return batch
        if late.late == "error":
            row = behind.df.row(0, named=True)
            raise DataError(
                f"{self._where(op.name_)}: a late row, {late.column} = {row[late.column]} is below the "
                f"waterline {w} (the largest {late.column} seen minus the lateness {late.delay}): "
                f"{ {c: v for c, v in row.items() if c != WEIGHT} }"
            )
        n = int(behind.df[WEIGHT].abs().sum())
        before = self.late_rows.get(op.name_, 0)
        self.late_rows[op.name_] = before + n
        undo.append(lambda: self.late_rows.__setitem__(op.name_, before))
        return k.filter(batch, c >= lit(w))

    def _advance(self, op: Input, z: Any, undo: list) -> None:
        """The table's waterline after this step's change `z`: its largest time seen, less the lateness."""
        late = op.lateness
        assert late is not None
        k = self.kernel
        top = k.to_local(k.topk(z, (SortKey(late.column, descending=True),), 1, 0)).df
        if top.height == 0:
            return
        w = top[late.column][0] - late.delay
        before = self.waterlines.get(op.name_)
        if before is not None and w <= before:
            return
        self.waterlines[op.name_] = w
        undo.append(lambda: self.waterlines.__setitem__(op.name_, before))

    def _collect(self, undo: list) -> None:
        """Drop the state below the waterlines (`garbage.plan`)."""
        k, drops, memo = self.kernel, list[tuple[Any, list[tuple[str, Any]]]](), dict[waterline.Mark, Any]()
        totaled = False
        for g in self.garbage:
            bounds = [(c, m.value(self.waterlines, k, memo)) for c, m in g.below]
            if all(v is not None for _, v in bounds):
                if g.where == "window":  # its rows into their totals first, then dropped
                    assert isinstance(g.target, int)
                    op = self.circuit.nodes[g.target].op
                    assert isinstance(op, Window)
                    more = op.finish(k, self.states[g.target], bounds, undo)
                    totaled |= bool(more)
                    drops.extend(more)
                else:
                    drops.extend((trace, bounds) for trace in self._traces_of(g))
        if totaled:
            k.flush_step(undo)  # the totals written before their rows go
        if drops:
            k.trace_drop(drops, undo)

    def _traces_of(self, g: garbage.Garbage) -> list[Any]:
        if g.where == "view":
            return [self._views[str(g.target)]]
        if g.where == "input":
            return [self._input_traces[str(g.target)]] if g.target in self._input_traces else []
        if g.where == "unique":
            return [t for cols, t in self._unique_traces.get(str(g.target), []) if g.below[0][0] in cols]
        assert isinstance(g.target, int)
        state = self.states[g.target]
        return state.traces() if hasattr(state, "traces") else [state]

    def waterline(self, name: str) -> dict[str, Any]:
        """The waterlines of a table's or an output's columns after the last step ({column: value};
        a column whose waterline is not known yet is left out): every later change of it holds at
        least these values, and its integral drops its rows below them."""
        nid = self.circuit.outputs.get(name, self.circuit.inputs.get(name))
        if nid is None:
            raise UnknownNameError(f"unknown input or output {name!r}")
        if self._marks is None:
            self._marks = waterline.marks(self.circuit, self.order)
        memo: dict[waterline.Mark, Any] = {}
        got = {c: m.value(self.waterlines, self.kernel, memo) for c, m in self._marks.get(nid, {}).items()}
        return {c: v for c, v in got.items() if v is not None}

    def state_rows(self) -> int:
        """The rows held in all the state (every operator's, the views', the tables' checks)."""
        return self.kernel.state_rows()

    def _input_change(self, op: Input, batches: list[Any], undo: list) -> Any:
        trace = self._input_traces.get(op.name_)
        if op.primary_key and trace is not None:  # upserts and deletes by key, in push order
            return keyed.keyed_change(
                self.kernel, trace, batches, op.schema, op.primary_key, self._where(op.name_), undo
            )
        z = batches[0]
        for b in batches[1:]:
            z = self.kernel.plus(z, b)
        if op.positive:  # the kind checks need each row once; operators consolidate where they must
            z = self.kernel.consolidate(z)
        if trace is not None:
            checks.insert_checked(self.kernel, trace, z, op.kind_, self._where(op.name_), undo)
            return z
        if op.positive and self.snapshots:  # each step's value is the relation itself
            return checks.checked_relation(self.kernel, z, op.kind_, self._where(op.name_))
        return z

    # ---- reading ------------------------------------------------------------------------------
    def view(self, name: str) -> ZSet:
        """The integral of an output: for an incremental circuit, the view's current contents."""
        if name not in self._views:
            raise UnknownNameError(f"unknown output {name!r}; the outputs are {sorted(self._views)}")
        now = self.kernel.as_zset(self._views[name].snapshot())
        if name in self.backfilled:  # (a view added since the last step: its backfill)
            return self.kernel.consolidate(self.kernel.plus(now, self.backfilled[name]))
        return now

    def output(self, name: str) -> ZSet:
        """The last step's value of an output."""
        if name not in self.circuit.outputs:
            raise UnknownNameError(f"unknown output {name!r}; the outputs are {sorted(self.circuit.outputs)}")
        return self._last.get(name) or self.kernel.empty(
            self.circuit.nodes[self.circuit.outputs[name]].shape.schema
        )

    # ---- checkpoints --------------------------------------------------------------------------
    def checkpoint(self, path: str | Path) -> None:
        """Write every operator's state (by node key, `circuit/identity.py`), the tables' and views'
        (with their owners) and the step number."""
        if self.backfilled:
            raise CheckpointError("a checkpoint is written by a step, after the views' backfill is reported")
        data = {
            "engine": self.kernel.name,
            "ops": {self.keys[nid]: self._save(nid) for nid in self.order},
            "tables": {n: self.owner("input", n) for n in self.circuit.inputs},
            "views": {n: [self.owner("view", n), s.to_state()] for n, s in self._views.items()},
            "inputs": {n: s.to_state() for n, s in self._input_traces.items()},
            "unique": {n: [t.to_state() for _, t in ts] for n, ts in self._unique_traces.items()},
            "waterlines": dict(self.waterlines),
            "late_rows": dict(self.late_rows),
            "offsets": dict(self.offsets),
        }
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        # the large frames written once; the commit: one rename
        self._frame_files(p).dump(data, circuit=self._fingerprint(), step=self.time)

    def _frame_files(self, path: Path) -> FrameFiles:
        """The frame files of checkpoints at `path` (one per path: it knows which frames are written)."""
        if self._frames is None or self._frames.path != path:
            self._frames = FrameFiles(path)
        return self._frames

    def _save(self, nid: int) -> Any:
        st = self.states[nid]
        if isinstance(st, DelayState):  # z^-1 and D keep the previous value
            return ("delay", self.kernel.save_value(st.value))
        return ("op", self.circuit.nodes[nid].op.checkpoint(self.kernel, st))

    def _fingerprint(self) -> str:
        """The circuit's fingerprint, computed once (a running circuit does not change; checkpoints
        record it)."""
        fp = getattr(self, "_circuit_fingerprint", None)
        if fp is None:
            fp = self._circuit_fingerprint = fingerprint(self.circuit.explain())
        return fp

    def restore(self, path: str | Path) -> None:
        """Load a checkpoint written by `checkpoint` (a `CheckpointError` naming the file if it is not
        one, before anything is changed). The circuit may have changed since (views added, dropped or
        defined anew): the state of the nodes and views it still has is restored, the others' is left
        out (their files deleted once the next step commits), and the new ones are `fresh`, to be
        backfilled. A table must be declared as it was: its rows cannot carry over otherwise."""
        data, time = self._frame_files(Path(path)).load()
        if data.get("engine") != self.kernel.name:
            raise CheckpointError(
                f"checkpoint {path} was written by the {data.get('engine')} engine; this pipeline runs on "
                f"{self.kernel.name}: open it with engine={data.get('engine')!r}, or use an empty directory"
            )
        tables = data["tables"]
        for name in self.circuit.inputs:
            if name in tables and tables[name] != self.owner("input", name):
                raise CheckpointError(
                    f"checkpoint {path}: table {name!r} was declared otherwise when it was written (its "
                    "columns, their types, its kind, keys or lateness changed), so its rows cannot carry "
                    "over; declare it as it was, or use a new name or an empty directory"
                )
        ops = data["ops"]
        for nid in self.order:
            key = self.keys[nid]
            if key not in ops:
                if time > 0 and self.states[nid] is not None:
                    self.fresh.add(nid)
                continue
            kind, saved = ops[key]
            if kind == "delay":
                self.states[nid].value = self.kernel.load_value(saved)
            else:
                op = self.circuit.nodes[nid].op
                self.states[nid] = op.restore(self.kernel, self.states[nid], saved)
        for n in self._views:
            owner, frames = data["views"].get(n, (None, None))
            if owner == self.owner("view", n):
                self._views[n].restore(frames)
            elif time > 0:
                self.fresh_views.add(n)
        for n, frames in data["inputs"].items():
            if n in self._input_traces:
                self._input_traces[n].restore(frames)
        for n, states in data["unique"].items():
            for (_, t), st in (
                zip(self._unique_traces[n], states, strict=True) if n in self._unique_traces else ()
            ):
                t.restore(st)
        known = self.circuit.inputs
        self.waterlines = {n: v for n, v in data.get("waterlines", {}).items() if n in known}
        self.late_rows = {n: v for n, v in data.get("late_rows", {}).items() if n in known}
        self.offsets = dict(data.get("offsets", {}))
        self.time = time
