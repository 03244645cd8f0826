"""Exactly rounded sums of doubles under inserts and deletes (`lftj-incremental-maintenance.txt` §2.3.4).

A sum of doubles kept as a double drifts: floating addition is not associative, so adding a value and
later subtracting it leaves rounding residue, and the result depends on the order of the additions. The
seed's answer is an arbitrary-precision accumulator that adds and subtracts exactly (the abelian-group
update of §2.3.2), from which the double is read by one correct rounding (its `toFloat`). Here the exact
sum is kept by powers of two: a finite double is m · 2^e with m an integer of at most 53 bits, so a
group's Σ x·w is Σ_e M_e · 2^e with M_e = Σ m·w over its values of exponent e, an Int128 (`LIMB` holds
e); a square m² · 2^2e is two such terms, m² split at bit 53. A group's entries add up like any other
accumulator, and its values usually share a few exponents, so the state is a few rows per group (the
seed's "segments that differ from X"), whatever its number of values.

Reading a group (`values`): its exact sum is an integer in units of 2^-OFFSET. Python's integer division
is correctly rounded, so SUM is the double nearest the multiset's exact sum, AVG the double nearest Σx /
n, VAR the double nearest (n·Σx² - (Σx)²) / (n·(n - 1)) (or / n²), STDDEV its square root; NaN and the
infinities are counted, not summed (any NaN, or both infinities, give NaN; one infinity gives it), and a
zero sum is +0.0 (as DuckDB's and `math.fsum`). SUM and AVG of a group whose terms span fewer than
about 120 bits are read without Python integers: the terms as one Int128, whose cast to a double rounds
correctly (and, for AVG, an exact Int128 quotient with its sticky bit); the others, and VAR, one Python
step per accumulator row.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from dbspark.algebra.zset import WEIGHT
from dbspark.errors import WeightError

LIMB = "__limb"  # an accumulator row's power of two (-32768: the group's other accumulators)
MAIN = -32768
OFFSET = 2304  # units of 2^-OFFSET: a square of the least subnormal (2^52 · 2^-1126, squared) is 2^-2148
SAFE = 1e37  # an Int128 sum of terms of at most this magnitude in all cannot wrap


def limb_rows(d: pl.DataFrame, keys: Sequence[str], calls: Sequence[tuple[str, str, bool]]) -> pl.DataFrame:
    """The exact sums of the rows `d` (the keys, the arguments and the weight) per (group, power of
    two): the keys, `LIMB` (Int16) and, for each (argument, sum column, square), the Int128 Σ m·w of
    the argument's (or its square's) terms at that power; NULL, NaN, infinite and zero arguments add
    nothing. Only the powers some call has; a column another call does not have there is 0."""
    w = pl.col(WEIGHT).cast(pl.Int128)
    frames = []
    for arg, name, square in calls:
        x = d[arg].cast(pl.Float64).fill_null(0.0).to_numpy()
        keep = np.flatnonzero(np.isfinite(x) & (x != 0.0))
        f, ex = np.frexp(x[keep])
        m = np.ldexp(f, 53).astype(np.int64)  # x = m · 2^e exactly
        e = ex.astype(np.int64) - 53
        part = d[keep].select(*keys, WEIGHT).with_columns(pl.Series("__m", m), pl.Series("__e", e))
        mm = pl.col("__m").cast(pl.Int128)
        if square:  # m² = hi · 2^53 + lo, each below 2^53
            sq = mm * mm
            hi = sq // pl.lit(2**53, pl.Int128)
            terms = [(hi, 2 * pl.col("__e") + 53), (sq - hi * pl.lit(2**53, pl.Int128), 2 * pl.col("__e"))]
        else:
            terms = [(mm, pl.col("__e"))]
        frames += [
            part.select(*keys, p.cast(pl.Int16).alias(LIMB), (t * w).alias(name), _bound(t, w).alias("__b"))
            for t, p in terms
        ]
    names = [name for _, name, _ in calls]
    if not frames:
        return pl.DataFrame(
            schema={**d.select(keys).schema, LIMB: pl.Int16(), **{n: pl.Int128() for n in names}}
        )
    both = pl.concat(frames, how="diagonal").with_columns([pl.col(n).fill_null(0) for n in names])
    out = both.group_by([*keys, LIMB]).agg(*[pl.col(n).sum() for n in names], pl.col("__b").sum())
    if out.height and out["__b"].max() >= SAFE:  # type: ignore[operator]
        raise WeightError("a floating sum's exact accumulator would overflow 128 bits (weights too large)")
    return out.drop("__b")


def _bound(t: pl.Expr, w: pl.Expr) -> pl.Expr:
    return t.cast(pl.Float64).abs() * w.cast(pl.Float64).abs()


def assemble(groups: int, g: pl.Series, k: pl.Series, v: pl.Series) -> list[int]:
    """The exact value of each of `groups` groups, in units of 2^-OFFSET, from accumulator rows (group
    index `g`, power `k`, Int128 value `v`; several rows of a power add up). One Python step per row."""
    out = [0] * groups
    for gi, ki, vi in zip(g.to_list(), k.to_list(), v.to_list(), strict=True):
        if vi:
            out[gi] += vi << (ki + OFFSET)
    return out


def windows(g: pl.Series, k: pl.Series, v: pl.Series) -> pl.DataFrame:
    """Per group index `g` with a non-zero term (one row per group and power `k`), its terms as one
    Int128 `w` in units of 2^`lo` where they span fewer than 124 bits (`fits`): |W| is below
    max|v| · 2^(spread + 1), within Int128."""
    f = pl.DataFrame({"g": g, "k": k.cast(pl.Int32), "v": v}).filter(pl.col("v") != 0)
    lo = pl.col("k").min()
    return f.group_by("g").agg(
        lo.alias("lo"),
        ((pl.col("k").max() - lo + pl.col("v").cast(pl.Float64).abs().max().log(2)) < 124).alias("fits"),
        (pl.col("v") * pl.lit(2, pl.Int128).pow(pl.col("k") - lo)).sum().alias("w"),
    )


@np.errstate(over="ignore", divide="ignore")
def quick(groups: int, per: pl.DataFrame, n: pl.Series | None) -> tuple[np.ndarray, np.ndarray]:
    """SUM (`n` None) or AVG (the counts `n`) of each group, correctly rounded, where it is found
    without Python integers from its `windows` row (else False in the second array). SUM is W's
    double scaled by 2^lo (exact unless the result is subnormal); AVG is the exact quotient q of W·2^s
    by n, with s making q at least 2^54, its remainder as a sticky bit: (2q + sticky) / 2 rounds as W /
    n does. A group without a row, or whose terms cancel, is 0.0."""
    out, found = np.zeros(groups), np.ones(groups, dtype=bool)
    found[per.filter(pl.col("w") != 0)["g"].to_numpy()] = False
    ok = per.filter(pl.col("fits") & (pl.col("w") != 0))
    if n is None:  # (past the double range ldexp gives the infinity IEEE rounding gives)
        val = np.ldexp(ok["w"].cast(pl.Float64).to_numpy(), ok["lo"].to_numpy())
    else:  # (W / n): scale W by 2^s so that the quotient has 54 bits or more, and W·2^s stays below 2^126
        cnt = pl.Series(n.to_numpy()[ok["g"].to_numpy()]).cast(pl.Int128)
        wb = np.log2(np.abs(ok["w"].cast(pl.Float64).to_numpy()))
        s = np.maximum(0, np.ceil(56 + np.log2(cnt.cast(pl.Float64).to_numpy()) - wb)).astype(np.int64)
        fits = wb + s < 124
        ok, cnt, s = ok.filter(pl.Series(fits)), cnt.filter(pl.Series(fits)), s[fits]
        a, c = pl.col("a") * pl.lit(2, pl.Int128).pow(pl.Series(s)), pl.col("n")
        twice = (a // c) * pl.lit(2, pl.Int128) + (a % c != 0).cast(pl.Int128)  # 2q + sticky
        mag = pl.DataFrame({"a": ok["w"].abs(), "n": cnt}).select(twice.cast(pl.Float64)).to_series()
        val = np.ldexp(
            np.sign(ok["w"].cast(pl.Float64).to_numpy()) * mag.to_numpy() / 2, ok["lo"].to_numpy() - s
        )
    normal = (np.abs(val) >= np.finfo(np.float64).tiny) | np.isinf(val)  # (subnormal: rounded twice)
    at = ok["g"].to_numpy()[normal]
    out[at], found[at] = val[normal], True
    return out, found


def rounded(numerator: int, denominator: int) -> float:
    """The double nearest numerator / denominator (Python's integer division rounds correctly); past
    the double range an infinity, as IEEE arithmetic overflows."""
    try:
        return numerator / denominator
    except OverflowError:
        return float("inf") if (numerator < 0) == (denominator < 0) else float("-inf")


def special(nan: int, pos: int, neg: int) -> float | None:
    """The value of a sum that holds NaN or an infinity (as IEEE addition gives it), or None."""
    if nan or (pos and neg):
        return float("nan")
    if pos:
        return float("inf")
    if neg:
        return float("-inf")
    return None


def read(func: str, n: int, s: int, q: int, nan: int, pos: int, neg: int) -> float | None:
    """A call's value from a group's exact sums: `s` = Σx and `q` = Σx² in units of 2^-OFFSET, over
    `n` non-NULL values of which `nan`, `pos`, `neg` are NaN, +inf and -inf. None: SQL's NULL (no
    values, or VAR_SAMP of one)."""
    if n <= 0 or (n == 1 and func in ("var_samp", "stddev_samp")):
        return None
    sp = special(nan, pos, neg)
    if func in ("sum", "avg"):
        if sp is not None:
            return sp
        return rounded(s, (1 << OFFSET) * (n if func == "avg" else 1))
    if sp is not None:  # a variance of an infinity is NaN
        return float("nan")
    num = n * q * (1 << OFFSET) - s * s  # n²·VAR_POP in units of 2^-2·OFFSET: exact, >= 0
    den = (n * n if func in ("var_pop", "stddev_pop") else n * (n - 1)) << (2 * OFFSET)
    v = rounded(num, den)
    return float(np.sqrt(v)) if func.startswith("stddev") else v
