"""The number of values of Soufflé's `range(lo, hi, step)` and the step they are taken by, as Polars
expressions (`engines.base.ZSetKernel.ranges`): lo, lo + step, ... while short of hi in the step's
direction; a step of 0 gives lo alone unless lo = hi (Soufflé's `runRange`)."""

from __future__ import annotations

import polars as pl


def range_counts(lo: pl.Expr, hi: pl.Expr, step: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """(n, k): how many values, and the step between them (1 for a step of 0). The span is taken in
    128 bits, so bounds far apart do not wrap."""
    a, b, s = (x.cast(pl.Int128) for x in (lo, hi, step))
    up = pl.when(b > a).then((b - a + s - 1) // s).otherwise(0)
    down = pl.when(a > b).then((a - b - s - 1) // (0 - s)).otherwise(0)
    n = pl.when(s > 0).then(up).when(s < 0).then(down).otherwise((a != b).cast(pl.Int128))
    return n.cast(pl.Int64), pl.when(s == 0).then(1).otherwise(s).cast(pl.Int64)
