"""The change between two sets of rows, by their packed keys: what a recompute of a recursive scope
reports, the new fixpoint less the old (`operators/auto_scope.py`).

Both sets' rows are packed into int64 keys of one layout (`row_set.RowSet.packed`: exact, no hashing),
then compared by a bool per key where the layout is small (BOOL_BITS), else by sorting each set's keys
and searching the other's; only the rows that differ are unpacked. Against a group-by of both sets'
rows by the local kernel's `combine` (measured 2026-12-06, two random sets of pairs sharing 94% of
their rows): 632k and 614k pairs of 10-bit values 9-13 against 51-65 ms, 2.0M and 2.0M of 15-bit values
(sorted) 111-127 against 171-223 ms.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from dbspark.algebra.consolidate import WEIGHT, sorted_member, sorted_unique
from dbspark.columnar.row_set import BOOL_BITS, Bools, RowSet


def set_change(new: pl.DataFrame, old: pl.DataFrame, cols: list[str]) -> pl.DataFrame | None:
    """The rows of `new` not in `old` (weight 1) and those of `old` not in `new` (weight -1), each once:
    `cols` and WEIGHT. `new` holds each row once, `old` any number of times. None where the rows do not
    pack into one key (a NULL in an integer column, more than 62 bits) or `new` holds a row twice: the
    caller groups them instead."""
    schema = pl.Schema([(c, new.schema[c]) for c in cols])
    rows = RowSet(schema)
    keys = rows.packed(pl.concat([new.select(cols), old.select(cols)], how="vertical"))
    if keys is None:
        return None
    kn, ko = keys[: new.height], keys[new.height :]
    bits = sum(rows.bits)
    if bits <= BOOL_BITS:
        in_new, in_old = Bools(bits), Bools(bits)
        in_new.add(kn)
        if int(np.count_nonzero(in_new.bools)) != len(kn):
            return None
        in_old.add(ko)
        added = np.flatnonzero(in_new.bools & ~in_old.bools)
        removed = np.flatnonzero(in_old.bools & ~in_new.bools)
    else:
        sn = np.sort(kn)
        if len(sn) > 1 and bool((sn[1:] == sn[:-1]).any()):
            return None
        so = sorted_unique(ko)
        added, removed = sn[~sorted_member(sn, so)], so[~sorted_member(so, sn)]
    return pl.concat(
        [
            rows.unpacked(added.astype(np.int64)).with_columns(pl.lit(1, dtype=pl.Int64).alias(WEIGHT)),
            rows.unpacked(removed.astype(np.int64)).with_columns(pl.lit(-1, dtype=pl.Int64).alias(WEIGHT)),
        ],
        how="vertical",
    )
