"""The checks of a table's change, written once above the kernel: a bag's or a set's counts, UNIQUE.

Each check is one `combine` (`engines.base.ZSetKernel.combine`) of the change with the state's rows at
the change's rows (a `seek`), whose weight expression raises the error where the check fails (the
internal function `__fail`, evaluated only on the failing rows) and is otherwise the change's weight. So
the checked change is what is added to the state: on the local engine the check runs as the change is
grouped; on Spark it runs inside the plan that writes the state (no Spark action of its own), and in
the driver for a change held there. A change held in this process none of whose rows the state holds
(a first load, rows never seen) is checked by its consolidated weights alone, and grouped with the
check's expression only when that check fails, to name the row. A failing check rejects the step (the
runtime undoes it).

- A bag: no row's count may turn negative (a delete of a row that is not there).
- A set: no row's count may exceed 1 either.
- A UNIQUE constraint on columns `cols`: its index is a trace of the table's rows with no NULL in `cols`,
  projected on them (NULLs are distinct in SQL, as DuckDB: such rows never conflict); a key that two
  rows would hold after the change is an error in DuckDB's words.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache, reduce
from typing import TYPE_CHECKING, Any

import polars as pl

from dbspark.ir.expr import Case, Cast, Expr, Func, col, lit

if TYPE_CHECKING:
    from dbspark.engines.base import Kernel

CHANGE, HELD = col("__w0"), col("__w1")  # `combine`'s sums: the change's weight, the state's


def concat(parts: Sequence[Expr | str]) -> Expr:
    """The text of `parts` (string literals and VARCHAR expressions) one after the other."""
    return Func("concat", tuple(lit(p) if isinstance(p, str) else p for p in parts))


def fail(error: str, *parts: Expr | str) -> Expr:
    """NULL, raising dbspark's error class `error` with the message `parts` where it is evaluated."""
    return Func("__fail", (lit(error), concat(parts)))


def _text(e: Expr) -> Expr:
    return Cast(e, pl.String())


def values_text(cols: Sequence[str], named: bool = False) -> list[Expr | str]:
    """A row's values as Python shows a tuple of them, (1, 'a') or (1,); `named`: (a=1, b='a')."""
    parts: list[Expr | str] = ["("]
    for i, c in enumerate(cols):
        parts += [(", " if i else "") + (f"{c}=" if named else ""), Func("__repr", (col(c),))]
    parts.append(",)" if len(cols) == 1 and not named else ")")
    return parts


@lru_cache(maxsize=1024)
def kind_weight(kind: str, where: str, cols: tuple[str, ...]) -> Expr:
    """The checked change's weight for a bag (`kind` "bag") or a set ("set") input (one object per
    input, so an engine compiles it once)."""
    new = HELD + CHANGE
    row = concat(values_text(cols))
    whens = [
        (
            new < 0,
            fail(
                "NegativeStateError",
                f"{where}: delete of row ",
                row,
                " that is not there (present ",
                _text(HELD),
                " time(s), change ",
                _text(CHANGE),
                ")",
            ),
        )
    ]
    if kind == "set":
        whens.append(
            (
                new > 1,
                fail(
                    "NegativeStateError",
                    f"{where} is a set: row ",
                    row,
                    " would occur ",
                    _text(new),
                    " times",
                ),
            )
        )
    return Case(tuple(whens), CHANGE)


def insert_checked(kernel: Kernel, trace: Any, z: Any, kind: str, where: str, undo: list) -> None:
    """Add a change `z` to an input's integral `trace`, checked against the input's kind."""
    cols = list(z.schema)
    found = kernel.seek(trace.snapshot(), z, [(c, c) for c in cols], exact=True)
    if kernel.is_local(z) and kernel.is_local(found) and kernel.is_empty(found):
        # none of the change's rows is held (a first load, new rows): a row's count is its weight in
        # the consolidated change, checked by NumPy; where the check fails, `combine` names the row
        # (100k new rows: the grouping with the check's expression cost more than the rest of a fresh
        # reachability step's indexing)
        z = kernel.consolidate(z)
        w = kernel.to_local(z).weights()
        if not len(w) or (w.min() > 0 and (kind != "set" or w.max() == 1)):
            kernel.trace_insert(trace, z, undo)
            return
    checked = kernel.combine([z, found], cols, kind_weight(kind, where, tuple(cols)))
    kernel.trace_insert(trace, checked, undo)


def checked_relation(kernel: Kernel, z: Any, kind: str, where: str) -> Any:
    """A relation `z` given whole (each step of a snapshot circuit), checked against its kind: the
    value to use in its place (on Spark the check runs where the value is computed)."""
    cols = list(z.schema)
    return kernel.combine([z, kernel.empty(z.schema)], cols, kind_weight(kind, where, tuple(cols)))


@lru_cache(maxsize=1024)
def unique_weight(where: str, cols: tuple[tuple[str, bool], ...]) -> Expr:
    """The checked weight of a UNIQUE index's change (`cols`: each column and whether it is a string):
    an error at a key two rows would hold."""
    shown: list[Expr | str] = []
    for i, (c, text) in enumerate(cols):
        shown += [f"{', ' if i else ''}{c}: ", col(c) if text else Func("__repr", (col(c),))]
    error = fail(
        "DataError",
        f'{where}: Duplicate key "',
        *shown,
        f'" violates unique constraint UNIQUE ({", ".join(c for c, _ in cols)})',
    )
    return Case(((HELD + CHANGE > 1, error),), CHANGE)


def unique_checked(kernel: Kernel, index: Any, z: Any, cols: Sequence[str], where: str, undo: list) -> None:
    """Check a table's change `z` against a UNIQUE constraint on `cols` and add it to the constraint's
    index (the seek reads the index at the change's keys only; a NULL key is left out)."""
    cols = list(cols)
    keyed = kernel.filter(z, reduce(lambda a, b: a & b, [col(c).is_not_null() for c in cols]))
    found = kernel.seek(index.snapshot(), keyed, [(c, c) for c in cols], exact=False)
    weight = unique_weight(where, tuple((c, z.schema[c] == pl.String()) for c in cols))
    kernel.trace_insert(index, kernel.combine([keyed, found], cols, weight), undo)
