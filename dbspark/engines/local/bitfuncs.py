"""Bitwise operations, `regexp_full_match` and user-defined Datalog functors on the local engine (Polars).

And, or, xor and not are Polars' own integer kernels; the shifts run on NumPy over whole batches (Polars
has none). A shift amount is taken modulo 64 (Java's and x86's rule), so both engines agree on every
amount; a left shift wraps in 64 bits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from dbspark.engines.local.sqlfuncs import _args, _impl
from dbspark.functors import REGISTRY, call_functor
from dbspark.ir import functions as fn
from dbspark.ir.expr import Func

if TYPE_CHECKING:
    from dbspark.engines.local.exprs import Compiler, Guard


@_impl("bitwise_and", "bitwise_or", "xor")
def _bitwise(comp: Compiler, e: Func, g: Guard) -> pl.Expr:
    a, b = (x.cast(pl.Int64) for x in _args(comp, e, g))
    return {"bitwise_and": a & b, "bitwise_or": a | b, "xor": a ^ b}[e.name]


@_impl("bitwise_not")
def _bitwise_not(comp: Compiler, e: Func, g: Guard) -> pl.Expr:
    return ~comp.c(e.args[0], g).cast(pl.Int64)


def _shifted(name: str, s: pl.Series) -> pl.Series:
    a = s.struct.field("a").fill_null(0).to_numpy().astype(np.int64)
    k = (s.struct.field("k").fill_null(0).to_numpy().astype(np.int64) & 63).astype(np.uint64)
    if name == "shift_right":
        out = np.right_shift(a, k.astype(np.int64))  # arithmetic: the sign fills in
    else:
        u = a.view(np.uint64)
        out = (np.left_shift(u, k) if name == "shift_left" else np.right_shift(u, k)).view(np.int64)
    return pl.Series(s.name, out, dtype=pl.Int64)


@_impl("shift_left", "shift_right", "shift_right_unsigned")
def _shift(comp: Compiler, e: Func, g: Guard) -> pl.Expr:
    a, k = (x.cast(pl.Int64) for x in _args(comp, e, g))
    value = pl.struct(a.alias("a"), k.alias("k")).map_batches(
        lambda s: _shifted(e.name, s), return_dtype=pl.Int64
    )
    return pl.when(a.is_null() | k.is_null()).then(None).otherwise(value)


@_impl("regexp_full_match")
def _regexp_full_match(comp: Compiler, e: Func, g: Guard) -> pl.Expr:
    s, p = _args(comp, e, g)
    return s.str.contains(pl.concat_str(pl.lit("^(?:"), p, pl.lit(r")\z")))


@_impl("__functor")
def _functor(comp: Compiler, e: Func, g: Guard) -> pl.Expr:
    """A Datalog program's user-defined functor, called per row in Python (`dbspark.functors`)."""
    name, result = (str(fn.literal_value("__functor", a, "argument")) for a in e.args[:2])
    f = REGISTRY[name]
    args = [comp.c(a, g) for a in e.args[2:]]
    dtype = comp.t(e)

    def run(s: pl.Series) -> pl.Series:
        rows = s.struct.unnest().rows() if args else [()] * len(s)
        return pl.Series(s.name, [call_functor(f, name, result, r) for r in rows], dtype=dtype)

    packed = pl.struct([a.alias(f"a{i}") for i, a in enumerate(args)]) if args else pl.lit(0)
    return packed.map_batches(run, return_dtype=dtype)
