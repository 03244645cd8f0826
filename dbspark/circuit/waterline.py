"""Waterlines: how far the time columns of a circuit's streams have advanced, and which state no
future change can reach (`dbsp-paper.txt` §7.6.1, the window operator moved inside the integral;
`docs/lateness.md` derives each rule).

A table declared with a lateness (`operators.source.Lateness`: column c, delay d) has after step t the
waterline W_t = (largest c seen) - d, and the runtime drops (or rejects) a row whose c is below
W_{t-1}: every change of the table after step t has c >= W_t. A *mark* of a column of a change stream
says the same of that column: every row of the stream's changes after step t holds a value at least the
mark's value at t. Marks flow forward through the incremental circuit (`marks`):

- filter, index, neg: as they are; plus: the lesser of the two sides' marks, for a column both mark;
- map: a column copied keeps its mark; a non-decreasing function of one marked column (`time_bucket`,
  `tumble`'s window bounds, a constant added, a cast to a wider type) is marked by the function of
  the mark, evaluated on the mark's value (`nondecreasing` decides which functions are);
- the join of a change with an integral: the change's columns keep their marks, and the integral's key
  columns paired with marked keys of the change take those marks (the values are equal);
- aggregate: the group columns keep theirs (only groups of the input's change change); distinct (H):
  as it is.

A marked column is never NULL: a lateness's column is NOT NULL, and the functions above give no NULL
for a value. Which state is below the marks, and so collected, is `circuit/garbage.py`'s.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import polars as pl

from dbspark.algebra.zset import ZSet
from dbspark.columnar import window_suffix
from dbspark.ir.expr import Binary, Case, Cast, Col, Expr, Func, Lit
from dbspark.operators.aggregate import Aggregate
from dbspark.operators.distinct import DistinctH
from dbspark.operators.join import StreamJoin
from dbspark.operators.linear import Filter, Index, Map, Neg, Plus, Ranges
from dbspark.operators.source import Input
from dbspark.operators.time import Delay, Integrate
from dbspark.operators.window import Window

if TYPE_CHECKING:
    from dbspark.circuit.circuit import Circuit
    from dbspark.engines.base import Kernel


@dataclass(frozen=True)
class Mark:
    """A waterline as a function of the tables' waterlines: a table's own (`table`), a non-decreasing
    `expr` of a column (`column`, of type `dtype`) taken at another mark (`of`), or the least of `least`.
    `at`: other columns the expression reads, each at the value that makes it least ((column, value,
    type): the largest of a bounded column that it subtracts, e.g. a hop's window number)."""

    table: str | None = None
    expr: Expr | None = None
    column: str = ""
    dtype: pl.DataType | None = None
    of: Mark | None = None
    least: tuple[Mark, ...] = ()
    at: tuple[tuple[str, Any, pl.DataType], ...] = ()

    def value(self, tables: dict[str, Any], kernel: Kernel, memo: dict[Mark, Any] | None = None) -> Any:
        """The mark's value after the last step, or None while a table it depends on has no waterline.
        `memo`: the values computed for these `tables` so far (marks share their parts)."""
        if memo is None:
            memo = {}
        if self not in memo:
            memo[self] = self._value(tables, kernel, memo)
        return memo[self]

    def _value(self, tables: dict[str, Any], kernel: Kernel, memo: dict[Mark, Any]) -> Any:
        if self.table is not None:
            return tables.get(self.table)
        if self.least:
            vals = [m.value(tables, kernel, memo) for m in self.least]
            return None if any(v is None for v in vals) else min(vals)
        assert self.of is not None and self.expr is not None and self.dtype is not None
        v = self.of.value(tables, kernel, memo)
        if v is None:
            return None
        schema = pl.Schema([(self.column, self.dtype), *((c, t) for c, _, t in self.at)])
        out = pl.Schema([("v", self.expr.dtype(schema))])
        row = (v, *(x for _, x, _ in self.at))
        z = kernel.map(kernel.from_local(ZSet.from_rows([row], schema)), [("v", self.expr)], out)
        got = kernel.to_local(z).df
        return got["v"][0] if got.height else None


Marks = dict[str, Mark]


Same = dict[str, str]  # column → a representative of the columns equal to it in every row


def marks(circuit: Circuit, order: Sequence[int]) -> dict[int, Marks]:
    """The marks of every change stream of `circuit` (nodes in a topological `order`).

    Beside them, for every stream (integrals too), which marked columns hold equal values in every row
    (`Same`: a copy, a NULL-safe join key `coalesce(c, ...)` of a marked c, a join's key pairs): an
    integral joined with a marked change then takes the mark of its key for the columns equal to it."""
    out: dict[int, Marks] = {}
    same: dict[int, Same] = {}
    # integer columns with a known largest value: constants, and a `ranges` column (a hop's window
    # number), so that a mark subtracting one is the least it can be
    tops: dict[int, dict[str, int]] = {}
    nodes = circuit.nodes
    for nid in order:
        n = nodes[nid]
        op, ins = n.op, [out.get(i, {}) for i in n.inputs]
        eq = [same.get(i, {}) for i in n.inputs]
        top = tops.get(n.inputs[0], {}) if n.inputs else {}
        got: Marks = {}
        sm: Same = {}
        if isinstance(op, (Integrate, Delay)) or (n.shape.trace and len(eq) == 1):
            sm = dict(eq[0]) if eq else {}
        elif isinstance(op, Input):
            if op.lateness is not None:
                got = {op.lateness.column: Mark(table=op.name_)}
        elif isinstance(op, (Filter, Index, Neg, DistinctH)):
            got, sm = dict(ins[-1]), dict(eq[-1])
        elif isinstance(op, Plus):
            got = {c: _least(m, ins[1][c]) for c, m in ins[0].items() if c in ins[1]}
            sm = _both(eq[0], eq[1])
        elif isinstance(op, Map):
            got, sm = _mapped(op, ins[0], eq[0], nodes[n.inputs[0]].shape.schema, top)
            tops[nid] = _tops(op, top)
        elif isinstance(op, Ranges):
            got = {c: m for c, m in ins[0].items() if c not in (op.lo, op.hi, op.step)}
            if (
                all(c in top for c in (op.lo, op.hi, op.step))
                and top[op.step] > 0
                and top[op.hi] > top[op.lo]
            ):
                lo, hi, step = top[op.lo], top[op.hi], top[op.step]
                tops[nid] = {op.column: lo + (hi - lo - 1) // step * step}
        elif isinstance(op, Aggregate):
            got = {c: m for c, m in ins[0].items() if c in op.spec.by}
            sm = _within(eq[0], op.spec.by)
        elif isinstance(op, StreamJoin):
            got, sm = _joined(op, [nodes[i].shape.trace for i in n.inputs], ins, eq)
        elif isinstance(op, Window) and window_suffix.finishes(op.spec, nodes[n.inputs[0]].shape.schema):
            # its change: rows of changed partitions from each one's first changed row on (in the order,
            # ascending, of its first ORDER BY column: `columnar/window_suffix.py`)
            keep = {op.spec.order[0].column, *op.spec.partition}
            got = {c: m for c, m in ins[0].items() if c in keep}
        if n.shape.trace:
            got = {}
        out[nid], same[nid] = got, sm
    return out


def _least(a: Mark, b: Mark) -> Mark:
    return a if a == b else Mark(least=(a, b))


def _classes(sm: Same) -> dict[str, list[str]]:
    got: dict[str, list[str]] = {}
    for c, r in sm.items():
        got.setdefault(r, []).append(c)
    return got


def _within(sm: Same, cols: Sequence[str]) -> Same:
    """`sm` restricted to `cols` (a class keeps its columns among them, under one of them)."""
    out: Same = {}
    for members in _classes(sm).values():
        kept = [c for c in members if c in cols]
        out.update({c: kept[0] for c in kept if len(kept) > 1})
    return out


def _both(a: Same, b: Same) -> Same:
    """The equalities that hold in both of two streams (the rows of a plus)."""
    out: Same = {}
    for c in a:
        if c in b:
            rep = next(x for x in a if a[x] == a[c] and b.get(x) == b[c])
            if rep != c:
                out[c] = out[rep] = rep
    return out


def _merged(sm: Same, pairs: Sequence[tuple[str, str]]) -> Same:
    """`sm` with the columns of each pair equal too (union of classes)."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.get(x, x) != x:
            x = parent[x]
        return x

    for c, r in sm.items():
        parent[find(c)] = find(r)
    for x, y in pairs:
        parent[find(x)] = find(y)
    cols = set(sm) | {c for p in pairs for c in p}
    return {c: find(c) for c in cols}


def _tops(op: Map, top: dict[str, int]) -> dict[str, int]:
    """The largest values of a map's integer columns that are constants or copies of such columns."""
    got: dict[str, int] = {}
    for name, e in op.exprs:
        if isinstance(e, Lit) and isinstance(e.value, int) and not isinstance(e.value, bool):
            got[name] = e.value
        elif isinstance(e, Col) and e.name in top:
            got[name] = top[e.name]
    return got


def _less_bounded(e: Expr, have: Marks, top: dict[str, int], schema: pl.Schema) -> Mark | None:
    """The mark of `a(c) - b(k)`: a non-decreasing in a marked column c, b non-decreasing in a column k
    of known largest value (a hop's window start: its slide's bucket less k slides): a at c's mark
    less b at k's largest."""
    if not (isinstance(e, Binary) and e.op == "sub"):
        return None
    (a_cols, b_cols) = (e.left.columns(), e.right.columns())
    if len(a_cols) != 1 or len(b_cols) != 1:
        return None
    (c,), (k,) = a_cols, b_cols
    if c not in have or k not in top or not nondecreasing(e.left, c) or not nondecreasing(e.right, k):
        return None
    return Mark(expr=e, column=c, dtype=schema[c], of=have[c], at=((k, top[k], schema[k]),))


def _mapped(op: Map, have: Marks, sm: Same, schema: pl.Schema, top: dict[str, int]) -> tuple[Marks, Same]:
    got: Marks = {}
    copies: dict[str, list[str]] = {}  # an input column's class → the output columns equal to it
    for name, e in op.exprs:
        cols = e.columns()
        if len(cols) == 2:
            m = _less_bounded(e, have, top, schema)
            if m is not None:
                got[name] = m
        if len(cols) != 1:
            continue
        (c,) = cols
        if c not in have or not nondecreasing(e, c):
            continue
        got[name] = have[c] if isinstance(e, Col) else Mark(expr=e, column=c, dtype=schema[c], of=have[c])
        if isinstance(e, Col) or (
            isinstance(e, Func) and e.name == "coalesce" and isinstance(e.args[0], Col)
        ):
            copies.setdefault(sm.get(c, c), []).append(name)
        elif isinstance(e, Cast) and isinstance(e.arg, Func) and e.arg.name == "coalesce":
            if isinstance(e.arg.args[0], Col) and e.to == schema[c]:
                copies.setdefault(sm.get(c, c), []).append(name)
    out: Same = {}
    for names in copies.values():
        out.update({x: names[0] for x in names if len(names) > 1})
    return got, out


def _joined(op: StreamJoin, traces: list[bool], ins: list[Marks], eq: list[Same]) -> tuple[Marks, Same]:
    """A join's marks: a change's columns keep theirs; an integral's columns equal to a key paired with a
    marked key of the change take its mark. (Two changes joined: each side's columns keep theirs.)"""
    renamed = dict(op.right_out)
    left, right = ins
    pairs = list(zip(op.left_keys, op.right_keys, strict=True))
    got: Marks = {}
    if not traces[0]:
        got.update(left)
    if not traces[1]:
        got.update({renamed[c]: m for c, m in right.items() if c in renamed})
    if traces[0] and not traces[1]:
        for lk, rk in pairs:
            if rk in right:
                for x in _class_of(eq[0], lk):
                    got.setdefault(x, right[rk])
    elif traces[1] and not traces[0]:
        for lk, rk in pairs:
            if lk in left:
                for x in _class_of(eq[1], rk):
                    if x in renamed:
                        got.setdefault(renamed[x], left[lk])
    right_eq = {renamed[c]: renamed.get(r, r) for c, r in eq[1].items() if c in renamed}
    sm = _merged({**eq[0], **right_eq}, [(lk, renamed[rk]) for lk, rk in pairs if rk in renamed])
    return got, sm


def _class_of(sm: Same, c: str) -> list[str]:
    """The columns equal to `c` in every row (itself included)."""
    return [c] if c not in sm else [x for x in sm if sm[x] == sm[c]]


def nondecreasing(e: Expr, column: str) -> bool:
    """Whether `e`, a function of `column` alone, never decreases as the column grows (a constant
    counts): the functions time windows and buckets are built of (`frontends/sql/temporal.py`)."""
    if isinstance(e, Col):
        return e.name == column
    if isinstance(e, Lit):
        return True
    if isinstance(e, Binary):
        left, right = e.left, e.right
        if e.op == "add":
            return nondecreasing(left, column) and nondecreasing(right, column)
        if e.op == "sub":
            return nondecreasing(left, column) and not right.columns()
        if e.op == "mul":
            return (nondecreasing(left, column) and _positive(right)) or (
                nondecreasing(right, column) and _positive(left)
            )
        if e.op in ("int_div", "floordiv"):
            return nondecreasing(left, column) and _positive(right)
        return False
    if isinstance(e, Cast):
        to = e.to
        return nondecreasing(e.arg, column) and (to.is_numeric() or isinstance(to, (pl.Datetime, pl.Date)))
    if isinstance(e, Func):
        if e.name in ("date_add", "epoch_us"):
            return all(nondecreasing(a, column) for a in e.args)
        if e.name == "date_trunc":
            return not e.args[0].columns() and nondecreasing(e.args[1], column)
        if e.name == "strftime" and len(e.args) == 2 and isinstance(e.args[1], Lit):
            return _ordered_format(e.args[1].value) and nondecreasing(e.args[0], column)
        if e.name == "coalesce":  # a marked column is never NULL: its first argument
            return nondecreasing(e.args[0], column) and not any(a.columns() for a in e.args[1:])
        return False
    if isinstance(e, Case):
        return _floor_div(e, column)
    return False


# strftime fields from the most significant, each of a fixed width (years of four digits)
_FIELDS = "YmdHMS"
_SPELLED = {"F": "Ymd", "T": "HMS"}


def _ordered_format(fmt: object) -> bool:
    """Whether strftime with this format orders its strings as their times: fields from the year down,
    none skipped (`%Y-%m-%d`, `%Y%m%d %H:%M`, `%F`), between constant separators."""
    if not isinstance(fmt, str):
        return False
    fields = ""
    for part in re.findall(r"%(.)", fmt):
        fields += _SPELLED.get(part, part)
    return bool(fields) and _FIELDS.startswith(fields)


def _positive(e: Expr) -> bool:
    return (
        isinstance(e, Lit)
        and isinstance(e.value, (int, float))
        and not isinstance(e.value, bool)
        and e.value > 0
    )


def _floor_div(e: Case, column: str) -> bool:
    """CASE WHEN x % k < 0 THEN x // k - 1 ELSE x // k END (`temporal.floor_div`): floor(x / k)."""
    if len(e.whens) != 1 or e.otherwise is None:
        return False
    (cond, then), q = e.whens[0], e.otherwise
    return (
        isinstance(q, Binary)
        and q.op == "int_div"
        and _positive(q.right)
        and nondecreasing(q.left, column)
        and cond == Binary("lt", Binary("sql_mod", q.left, q.right), Lit(0))
        and isinstance(then, Binary)
        and then.op == "sub"
        and then.left == q
        and isinstance(then.right, Lit)
    )
