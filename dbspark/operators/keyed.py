"""Tables with a primary key: one step's upserts and deletes by key as a change of the table, written once
above the kernel.

The step's pushes are a sequence of operations on keys, in push order and, within a push, in row order:
an insert (weight 1) of a key puts its row (replacing the row that was there), a delete (weight -1)
removes the key's row and is valid only if the key is there at that point. A pushed Spark DataFrame has
no row order (`ZSetKernel.ordinal`): its deletes come before its inserts (a delete and an insert of a key
in one DataFrame update the row), and two inserts of one key in it are an error.

Per key, with the table's rows read at the step's keys only (a seek), the table's row at a key (if any)
becomes an operation of its own before the step's (an insert, push -1). Then, over the operations of a
key in order (`ZSetKernel.shifted`: the previous operation's weight and place, whether one follows):

- a delete is valid iff the operation before it is an insert (the table's row, or an insert of the
  step); else it is a NegativeStateError naming the table and the key, and why;
- an insert right after an insert at the same place (push, position) is two inserts of a key in one
  DataFrame: a DataError;
- the key's final row is its last operation's row if that is an insert of the step, and absent
  otherwise; the change is -old + final (an update of a row to itself cancels).

The checks are the weight of the final rows (`weigh`), so they run where the change is computed: on the
local engine at once, on Spark inside the plan that writes the table's integral (no Spark action of its
own), in the driver for rows held there. No per-row Python.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import polars as pl

from dbspark.algebra.zset import WEIGHT
from dbspark.ir.expr import Case, Expr, Func, col, lit
from dbspark.operators.checks import fail, values_text

if TYPE_CHECKING:
    from dbspark.engines.base import Kernel

PUSH, POS = "__push", "__pos"
OP, PREV, PREV_PUSH, PREV_POS, NEXT_PUSH, KEEP = (
    "__op",
    "__prev",
    "__prev_push",
    "__prev_pos",
    "__next",
    "__keep",
)


@lru_cache(maxsize=1024)
def keep_weight(where: str, key: tuple[str, ...]) -> Expr:
    """1 for the operation that puts a key's final row, 0 for every other one; an error where an
    operation is invalid (one object per table: an engine compiles it once)."""
    shown = values_text(key, named=True)
    op, prev = col(OP), col(PREV)
    no_key = op.eq(-1) & ~Func("coalesce", (prev.eq(1), lit(False)))
    twice = (
        op.eq(1)
        & prev.eq(1)
        & Func("coalesce", (col(PREV_PUSH).eq(col(PUSH)) & col(PREV_POS).eq(col(POS)), lit(False)))
    )
    gone = f"{where}: delete of key "
    return Case(
        (
            (
                no_key & prev.is_null(),
                fail("NegativeStateError", gone, *shown, " that is not there (it is not in the table)"),
            ),
            (
                no_key,
                fail(
                    "NegativeStateError",
                    gone,
                    *shown,
                    " that is not there (it was deleted earlier in this step)",
                ),
            ),
            (
                twice,
                fail(
                    "DataError",
                    f"{where}: one pushed DataFrame inserts key ",
                    *shown,
                    " twice (a DataFrame has no row order: push the rows in order, or one per key)",
                ),
            ),
            (col(NEXT_PUSH).is_null() & op.eq(1) & (col(PUSH) >= 0), lit(1)),
        ),
        lit(0),
    )


def keyed_change(
    kernel: Kernel,
    trace: Any,
    batches: Sequence[Any],
    schema: pl.Schema,
    key: Sequence[str],
    where: str,
    undo: list,
) -> Any:
    """The change that one step's pushes `batches` (in push order, weights 1 / -1) make to a table with
    primary key `key` and columns `schema`, added to its integral `trace`."""
    key, cols = list(key), list(schema)
    placed = pl.Schema([*schema.items(), (PUSH, pl.Int64()), (POS, pl.Int64())])
    ops = None
    for i, b in enumerate(batches):
        o = kernel.map(
            kernel.ordinal(b, POS),
            [*((c, col(c)) for c in cols), (PUSH, lit(i)), (POS, col(POS))],
            placed,
        )
        ops = o if ops is None else kernel.plus(ops, o)
    if ops is None:
        return kernel.empty(schema)
    old = kernel.consolidate(kernel.seek(trace.snapshot(), ops, [(k, k) for k in key], exact=True))
    held = kernel.map(old, [*((c, col(c)) for c in cols), (PUSH, lit(-1)), (POS, lit(0))], placed)
    seq = kernel.shifted(
        kernel.plus(held, ops),
        key,
        [PUSH, POS],
        [(OP, WEIGHT, 0), (PREV, WEIGHT, 1), (PREV_PUSH, PUSH, 1), (PREV_POS, POS, 1), (NEXT_PUSH, PUSH, -1)],
    )
    final = kernel.weigh(
        kernel.map(
            seq,
            [*((c, col(c)) for c in cols), (KEEP, keep_weight(where, tuple(key)))],
            pl.Schema([*schema.items(), (KEEP, pl.Int64())]),
        ),
        KEEP,
    )
    change = kernel.consolidate(kernel.plus(final, kernel.neg(old)))
    kernel.trace_insert(trace, change, undo)
    return change
