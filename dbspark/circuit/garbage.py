"""Garbage: the state no future change reaches, given the marks of `circuit/waterline.py`
(`dbsp-paper.txt` §7.6.1; `docs/lateness.md` derives each rule). `plan` finds it; the runtime drops it
after each step through `Kernel.trace_drop`:

- an integral read only by joins with a marked change (directly or through z^-1) and by distinct's H:
  its rows whose key column is below the mark of what is sought in it, for every reader; or, for a
  join on a time range, below the bound a filter after the join puts on them (`_filtered`);
- an aggregate's state: its groups whose group column is below the input's mark;
- a view's contents: its rows below the view's mark (a finished window: `Pipeline.view` keeps the
  live rows, while every step's change still carries each row);
- a window's rows below the mark of its first ORDER BY column (ascending; calls folded by key): they
  leave its state for their partitions' totals (`Window.finish`);
- a table's integral of its kind checks: its rows below the table's waterline (a delete of such a row
  is a late row).

Any other reader of an integral keeps all of it (its state is not collected).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import polars as pl

from dbspark.circuit.waterline import Mark, Marks, marks, nondecreasing
from dbspark.columnar import window_suffix
from dbspark.ir.expr import Binary, Col, Expr, Func, Lit
from dbspark.operators.aggregate import Aggregate
from dbspark.operators.distinct import DistinctH
from dbspark.operators.join import StreamJoin
from dbspark.operators.linear import Filter, Plus
from dbspark.operators.source import Input
from dbspark.operators.time import Delay, Integrate
from dbspark.operators.window import Window

if TYPE_CHECKING:
    from dbspark.circuit.circuit import Circuit


@dataclass(frozen=True)
class Garbage:
    """State a step may drop: in `where` ('node': an operator's state, 'view', 'input': a table's kind
    checks, 'unique': its UNIQUE indexes, 'window': a window's rows, into its totals), of `target` (a
    node id or a name), the rows whose columns are all below their marks (`below`)."""

    where: str
    target: int | str
    below: tuple[tuple[str, Mark], ...]


def plan(circuit: Circuit, order: Sequence[int]) -> list[Garbage]:
    """The state each step may collect (empty when no table has a lateness)."""
    nodes = circuit.nodes
    if not any(isinstance(n.op, Input) and n.op.lateness is not None for n in nodes.values()):
        return []
    got = marks(circuit, order)
    readers = circuit.consumers()
    out: list[Garbage] = []
    for nid in order:
        op = nodes[nid].op
        if isinstance(op, Integrate):
            below = _unread(circuit, nid, readers, got)
            if below:
                out.append(Garbage("node", nid, below))
        elif isinstance(op, Aggregate):
            m = got.get(nodes[nid].inputs[0], {})
            by = [c for c in op.spec.by if c in m]
            if by:
                out.append(Garbage("node", nid, ((by[0], m[by[0]]),)))
        elif isinstance(op, Window):
            m = got.get(nodes[nid].inputs[0], {})
            first = op.spec.order[0].column if op.spec.order else None
            if first in m and window_suffix.finishes(op.spec, nodes[nodes[nid].inputs[0]].shape.schema):
                out.append(Garbage("window", nid, ((first, m[first]),)))
        elif isinstance(op, Input) and op.lateness is not None:
            c, mark = op.lateness.column, Mark(table=op.name_)
            if not op.primary_key or c in op.primary_key:
                out.append(Garbage("input", op.name_, ((c, mark),)))
            if any(c in cols for cols in op.unique):  # (`Runtime` takes each index holding c once)
                out.append(Garbage("unique", op.name_, ((c, mark),)))
    for name, nid in circuit.outputs.items():
        view = got.get(nid, {})
        if view:
            c = next(iter(view))
            out.append(Garbage("view", name, ((c, view[c]),)))
    return out


def _unread(
    circuit: Circuit, nid: int, readers: dict[int, list[int]], got: dict[int, Marks]
) -> tuple[tuple[str, Mark], ...]:
    """The rows of integral `nid` that no reader will seek again: for each reader (through delays), a
    key column and the mark below which it is never sought; () if some reader may read any row."""
    below: list[tuple[str, Mark]] = []
    todo, seen = [nid], set()
    while todo:
        src = todo.pop()
        for r in readers.get(src, []):
            if r in seen:
                continue
            seen.add(r)
            node = circuit.nodes[r]
            if isinstance(node.op, Delay):
                todo.append(r)
                continue
            cond = _sought(node.op, node.inputs, src, got)
            if cond is None and isinstance(node.op, StreamJoin):
                cond = _filtered(circuit, r, src, readers, got)
            if cond is None:
                return ()
            below.append(cond)
    return tuple(dict.fromkeys(below))


def _sought(op: Any, inputs: tuple[int, ...], src: int, got: dict[int, Marks]) -> tuple[str, Mark] | None:
    """(column of `src`'s rows, mark) such that `op` never seeks a row of `src` below the mark."""
    if isinstance(op, StreamJoin) and len(inputs) == 2 and inputs[0] != inputs[1]:
        mine, other = (op.left_keys, op.right_keys) if inputs[0] == src else (op.right_keys, op.left_keys)
        m = got.get(inputs[1] if inputs[0] == src else inputs[0], {})
        for a, b in zip(mine, other, strict=True):
            if b in m:
                return a, m[b]
        return None
    if isinstance(op, DistinctH) and inputs[0] == src:
        m = got.get(inputs[1], {})
        return next(iter(m.items()), None)
    return None


def _filtered(
    circuit: Circuit, join: int, src: int, readers: dict[int, list[int]], got: dict[int, Marks]
) -> tuple[str, Mark] | None:
    """(column of `src`, mark) when every row the join of integral `src` with a change makes is kept only
    by a filter (reached through plus and other filters) that needs a column t of `src` to be at least a
    non-decreasing function f of a marked column c of the change (`t >= f(c)`, `f(c) <= t`, strict or
    not): a row of `src` with t below f(M_c) passes no later step's filter. A join on time ranges."""
    op = circuit.nodes[join].op
    inputs = circuit.nodes[join].inputs
    assert isinstance(op, StreamJoin)
    renamed = dict(op.right_out)
    if inputs[0] == src:  # the join's output columns that hold `src`'s columns
        mine = {c: c for c in circuit.nodes[src].shape.schema}
    else:
        mine = {renamed[c]: c for c in circuit.nodes[src].shape.schema if c in renamed}
    marked = {c: m for c, m in got.get(join, {}).items() if c not in mine}
    found: list[tuple[str, Mark]] = []
    todo, seen = [join], set()
    while todo:
        n = todo.pop()
        for r in readers.get(n, []):
            if r in seen:
                continue
            seen.add(r)
            rop = circuit.nodes[r].op
            cond = (
                _bound(rop.pred, mine, marked, circuit.nodes[n].shape.schema)
                if isinstance(rop, Filter)
                else None
            )
            if cond is not None:
                found.append(cond)
            elif isinstance(rop, (Plus, Filter)):
                todo.append(r)
            else:
                return None
    return found[0] if found and all(f == found[0] for f in found) else None


def _shifted(big: Expr, small: Expr) -> tuple[Expr, Expr]:
    """`t + k >= s` as `t >= s - k` for a constant k (an INTERVAL of days and time, or a number)."""
    if isinstance(big, Func) and big.name == "date_add" and isinstance(big.args[0], Col):
        months, days, micros = big.args[1:]
        if all(isinstance(a, Lit) for a in (months, days, micros)) and months == Lit(0):
            assert isinstance(days, Lit) and isinstance(micros, Lit)
            return big.args[0], Func("date_add", (small, Lit(0), Lit(-days.value), Lit(-micros.value)))
    if (
        isinstance(big, Binary)
        and big.op in ("add", "sub")
        and isinstance(big.left, Col)
        and isinstance(big.right, Lit)
    ):
        return big.left, Binary("sub" if big.op == "add" else "add", small, big.right)
    return big, small


def _bound(pred: Expr, mine: dict[str, str], marked: Marks, schema: pl.Schema) -> tuple[str, Mark] | None:
    """A conjunct of `pred` holding `t >= f(c)` with t a column of the integral (`mine`: output name →
    its name there) and f non-decreasing in the marked change column c: (t's name, f at c's mark)."""
    if isinstance(pred, Binary) and pred.op == "and":
        return _bound(pred.left, mine, marked, schema) or _bound(pred.right, mine, marked, schema)
    if not isinstance(pred, Binary) or pred.op not in ("ge", "gt", "le", "lt"):
        return None
    big, small = (pred.left, pred.right) if pred.op in ("ge", "gt") else (pred.right, pred.left)
    big, small = _shifted(big, small)
    if not isinstance(big, Col) or big.name not in mine:
        return None
    cols = small.columns()
    if len(cols) != 1:
        return None
    (c,) = cols
    if c not in marked or not nondecreasing(small, c):
        return None
    m = marked[c] if isinstance(small, Col) else Mark(expr=small, column=c, dtype=schema[c], of=marked[c])
    return mine[big.name], m
