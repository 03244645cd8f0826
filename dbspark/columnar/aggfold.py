"""The linear GROUP BY aggregate's fold, written once for every engine (`dbsp-paper.txt` §7.2, §7.4).

COUNT(*), COUNT, SUM, AVG, VAR_* and STDDEV_* are functions of per-group *accumulators* that add up
(an abelian group, `algebra.weights`): the row count `__cnt`, and per call `__c<i>` its non-NULL
count, `__s<i>` Σx and `__q<i>` Σx², each weighted by the rows' weights. The incremental aggregate
(`operators/aggregate.py`) keeps them in a trace by group and, per step, folds the change into them
with two columnar functions that the kernel runs wherever the rows are (`ZSetKernel.cogroup`: in this
process, or inside Spark's tasks after one exchange by the group keys):

- `accumulate`: the change's rows → its accumulators per group;
- `fold`: the change's accumulators and the trace's rows at their groups → the output's change (-old
  and +new rows of the changed groups, a group whose row did not change left out).

So the numbers are computed by one piece of code on every engine and every placement. Exactness:
integer sums run in 128 bits and are stored as DECIMAL(38, 0), DECIMAL arguments are summed exactly
in units of their scale (DECIMAL(38, s)), an integer's Σx² exactly too; a sum that leaves DECIMAL(38),
a SUM that leaves BIGINT or a row count that leaves BIGINT is a `WeightError`, a group whose row count
would go below zero a `NegativeStateError` naming it. Floating sums are sums of doubles; VAR / STDDEV
of a DECIMAL run in doubles. AVG is the correctly rounded double of the sum divided by the count.
"""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import polars as pl

from dbspark.algebra.zset import WEIGHT, ZSet
from dbspark.errors import NegativeStateError, WeightError
from dbspark.ir.aggregate import AggCall, AggSpec, result_dtype

G = "__g"  # the constant group key of an aggregate without GROUP BY
CNT = "__cnt"  # a group's row count
VAR = ("var_samp", "var_pop", "stddev_samp", "stddev_pop")
DEC38 = 10**38  # DECIMAL(38, s) holds |units| < 10^38
INT64 = (-(2**63), 2**63 - 1)
EXACT_FLOAT = 2**53  # integers up to this magnitude are exact doubles


class Accumulators(ZSet):
    """Accumulator rows (group keys, then the summed columns) as a value: a trace sums these columns
    where a Z-set's trace sums its weight."""

    def __init__(self, df: pl.DataFrame) -> None:  # (no weight column: the sums are the weights)
        self._df = df
        self.consolidated = True
        self._cons = self._src = self.hashes = self.at = None


def keys_of(spec: AggSpec) -> list[str]:
    """The group keys of the accumulators: the GROUP BY columns, or the constant `G`."""
    return list(spec.by) if spec.by else [G]


def linear(spec: AggSpec) -> bool:
    """Whether every call of the spec folds here (no MIN / MAX / MEDIAN / MODE, no user aggregate)."""
    return all(c.kind == "linear" for c in spec.calls)


def mode_of(spec: AggSpec, c: AggCall) -> str:
    """How a call's Σx and Σx² are kept: "dec" (a DECIMAL's SUM / AVG, exact in units of its scale),
    "int" (an integer or boolean, exact) or "float" (doubles: floats, and VAR / STDDEV of a DECIMAL)."""
    t = spec.input_schema[c.arg] if c.arg else pl.Int64()
    if isinstance(t, pl.Decimal):
        return "float" if c.func in VAR else "dec"
    return "int" if t.is_integer() or t == pl.Boolean() else "float"


def accumulator_schema(spec: AggSpec) -> pl.Schema:
    """The accumulators' columns and the types they are stored in (the trace's summed columns)."""
    out: list[tuple[str, pl.DataType]] = [(CNT, pl.Int64())]
    for i, c in enumerate(spec.calls):
        if c.kind != "linear" or c.arg is None:
            continue
        out.append((f"__c{i}", pl.Int64()))
        if c.func == "count":
            continue
        mode = mode_of(spec, c)
        t = spec.input_schema[c.arg]
        if mode == "dec":
            assert isinstance(t, pl.Decimal)
            out.append((f"__s{i}", pl.Decimal(38, t.scale or 0)))
        else:
            out.append((f"__s{i}", pl.Decimal(38, 0) if mode == "int" else pl.Float64()))
        if c.func in VAR:
            out.append((f"__q{i}", pl.Decimal(38, 0) if mode == "int" else pl.Float64()))
    return pl.Schema(out)


def key_schema(spec: AggSpec) -> pl.Schema:
    if not spec.by:
        return pl.Schema([(G, pl.Int8())])
    return pl.Schema([(k, spec.input_schema[k]) for k in spec.by])


def inexact(spec: AggSpec) -> bool:
    """Whether some accumulator is a floating sum, whose value depends on the order of its additions:
    the trace's entries of a group are summed in whatever runs they sit in, so the group's old row
    recomputed from them may differ in its last bits from the row emitted before. Such an aggregate
    keeps the rows it emitted (`emitted_schema`) and retracts those."""
    return any(
        c.kind == "linear" and c.arg is not None and c.func != "count" and mode_of(spec, c) == "float"
        for c in spec.calls
    )


def emitted_schema(spec: AggSpec) -> pl.Schema:
    """The rows an aggregate emitted, kept by group: its output's columns (after `G` without GROUP BY)."""
    out = spec.output_schema()
    return out if spec.by else pl.Schema([(G, pl.Int8()), *out.items()])


def empty_global(spec: AggSpec) -> pl.DataFrame:
    """The accumulators of an aggregate without GROUP BY over no rows: its one group, all sums 0."""
    sums = accumulator_schema(spec)
    return pl.DataFrame(
        [pl.Series(G, [0], pl.Int8()), *[pl.Series(c, [0], pl.Int64()).cast(t) for c, t in sums.items()]]
    )


# ---- the change's accumulators -------------------------------------------------------------------
def accumulate(spec: AggSpec, frames: list[pl.DataFrame]) -> pl.DataFrame:
    """`cogroup` function: the accumulators per group of the rows `frames[0]` (the input's columns and
    the weight), in the stored types; a group whose sums are all 0 is kept (its row may still change:
    the first step of a global aggregate)."""
    (d,) = frames
    keys, sums = keys_of(spec), accumulator_schema(spec)
    if not spec.by:
        d = d.with_columns(pl.lit(0, pl.Int8).alias(G))
    if d.height == 0:  # (a global aggregate's one group exists without rows)
        return empty_global(spec) if not spec.by else pl.DataFrame(schema={**key_schema(spec), **sums})
    guard(spec, d)
    return stored(spec, d.group_by(keys).agg(accumulator_exprs(spec)))


def stored(spec: AggSpec, acc: pl.DataFrame) -> pl.DataFrame:
    """Computable accumulators (`computable`) in their stored types (`accumulator_schema`); one that
    leaves its type is a `WeightError`."""
    cols: list[pl.Series] = []
    for c, t in accumulator_schema(spec).items():
        s = acc[c]
        if t == pl.Int64():
            _fits_long(s)
            cols.append(s.cast(pl.Int64))
        elif isinstance(t, pl.Decimal):
            cols.append(_units_to_decimal(_wide(s, c), t.scale or 0, c))
        else:
            cols.append(s)
    return acc.with_columns(cols)


def accumulator_exprs(spec: AggSpec) -> list[pl.Expr]:
    """The accumulators of rows with weights, per group: integers (and DECIMAL units) in Int128."""
    w = pl.col(WEIGHT)
    w128 = w.cast(pl.Int128)
    aggs: list[pl.Expr] = [w128.sum().alias(CNT)]
    for i, c in enumerate(spec.calls):
        if c.arg is None or c.kind != "linear":
            continue
        x = pl.col(c.arg)
        aggs.append(pl.when(x.is_not_null()).then(w128).otherwise(0).sum().alias(f"__c{i}"))
        if c.func == "count":
            continue
        mode = mode_of(spec, c)
        if mode == "dec":  # Σ units · w, exact
            aggs.append((x.to_physical() * w128).sum().alias(f"__s{i}"))
        elif mode == "int":
            xi = x.cast(pl.Int64).cast(pl.Int128)
            aggs.append((xi * w128).sum().alias(f"__s{i}"))
            if c.func in VAR:
                aggs.append((xi * xi * w128).sum().alias(f"__q{i}"))
        else:
            xf, wf = x.cast(pl.Float64), w.cast(pl.Float64)
            aggs.append((xf * wf).sum().alias(f"__s{i}"))
            if c.func in VAR:
                aggs.append((xf * xf * wf).sum().alias(f"__q{i}"))
    return aggs


def guard(spec: AggSpec, d: pl.DataFrame) -> None:
    """Raise where an Int128 product or sum of the change could wrap (DECIMAL(38) is left first): the
    magnitudes estimated in doubles, with a wide margin."""
    exact = [
        c
        for c in spec.calls
        if c.arg is not None and c.kind == "linear" and c.func != "count" and mode_of(spec, c) != "float"
    ]
    if not exact or not d.height:
        return
    wf = d[WEIGHT].cast(pl.Float64).abs()
    for c in exact:
        x = d[str(c.arg)]
        x = x.to_physical() if mode_of(spec, c) == "dec" else x
        xf = x.cast(pl.Float64).abs().fill_null(0.0)
        top = float((xf * xf * wf).sum()) if c.func in VAR else float((xf * wf).sum())
        if top >= 1e37:
            raise WeightError(f"integer overflow: {c.describe()} sums past DECIMAL(38) in this change")


def _units_to_decimal(units: pl.Series, scale: int, name: str) -> pl.Series:
    """Int128 units of 10^-scale as DECIMAL(38, scale) values."""
    whole = units.cast(pl.Int128).cast(pl.Decimal(38, 0)).alias(name)
    if scale == 0:
        return whole
    one = pl.lit(Decimal(1).scaleb(-scale), pl.Decimal(38, scale))
    return pl.select((pl.lit(whole) * one).alias(name)).to_series()


def _wide(values: pl.Series, name: str) -> pl.Series:
    """Int128 values checked to fit DECIMAL(38) (else a WeightError)."""
    if values.len() and (values.abs().max() >= DEC38):  # type: ignore[operator]
        raise WeightError(f"integer overflow: an aggregate's sum {name} left DECIMAL(38)")
    return values


def _fits_long(s: pl.Series) -> None:
    if s.len() and (s.min() < INT64[0] or s.max() > INT64[1]):  # type: ignore[operator]
        raise WeightError("weight overflow in an aggregate: a group's row count left BIGINT")


# ---- the fold: old and new accumulators of the changed groups, and the output's change ----------
def fold(spec: AggSpec, was: bool, frames: list[pl.DataFrame]) -> pl.DataFrame:
    """`cogroup` function: the output's change (the output's columns and the weight; -old, +new rows
    of the groups of `frames[0]`, the change's accumulators, whose row changed) from the trace's rows
    at those groups `frames[1]` (not consolidated) and, for an `inexact` aggregate, the rows it emitted
    at those groups `frames[2]` (`emitted_schema`, with weights). `was`: whether a global aggregate's
    row exists."""
    dacc, found = frames[0], frames[1]
    if dacc.height == 0:
        return pl.DataFrame(schema=pl.Schema([*spec.output_schema().items(), (WEIGHT, pl.Int64())]))
    o, n = old_new(spec, dacc, found)
    if len(frames) == 2:
        return emit(spec, o, n, results(spec, o), results(spec, n), was)
    ro, exists = previous(spec, o, frames[2])
    return emit(spec, o, n, ro, results(spec, n), was, old_exists=exists)


def previous(spec: AggSpec, o: pl.DataFrame, kept: pl.DataFrame) -> tuple[dict[str, pl.Series], pl.Series]:
    """The rows emitted before for the groups of `o` (in its order), from the entries of the kept
    output at those groups (`emitted_schema`, with weights): each call's value, and which groups had a
    row. An `inexact` aggregate retracts these as they were emitted, rather than recomputed."""
    keys, names = keys_of(spec), [c.name for c in spec.calls]
    kept = kept.group_by([*keys, *names]).agg(pl.col(WEIGHT).sum()).filter(pl.col(WEIGHT) != 0)
    old = o.select(keys).join(kept, on=keys, how="left", nulls_equal=True, maintain_order="left")
    return {nm: old[nm] for nm in names}, old[WEIGHT].is_not_null()


def old_new(spec: AggSpec, dacc: pl.DataFrame, found: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The accumulators of the change's groups (`dacc`, stored types) before and after it, row for row
    and computable (`computable`), from the trace's rows at those groups (`found`); a sum that leaves
    its type is a `WeightError`, a group whose row count would go below zero a `NegativeStateError`."""
    keys, sums = keys_of(spec), accumulator_schema(spec)
    d, f = computable(dacc, sums), computable(found, sums)
    old = f.group_by(keys).agg([pl.col(c).sum() for c in sums])
    j = d.join(old, on=keys, how="left", nulls_equal=True, suffix="__o").with_columns(
        [pl.col(f"{c}__o").fill_null(0) for c in sums]
    )
    o = j.select(*keys, *[pl.col(f"{c}__o").alias(c) for c in sums])
    n = j.select(*keys, *[(pl.col(f"{c}__o") + pl.col(c)).alias(c) for c in sums])
    check_fits(spec, n)
    return o, n


def check_fits(spec: AggSpec, n: pl.DataFrame) -> None:
    """Computable accumulators of groups (`computable`) that fit their stored types (else a
    `WeightError`) and have no fewer than zero rows (else `check_group_counts`'s error)."""
    for c, t in accumulator_schema(spec).items():
        if isinstance(t, pl.Decimal):
            _wide(n[c], c)
        elif t == pl.Int64():
            _fits_long(n[c])
    check_group_counts(spec, n)


def computable(acc: pl.DataFrame, sums: pl.Schema) -> pl.DataFrame:
    """Stored accumulators as Int128 (counts, and DECIMAL sums as their units) and doubles."""
    return acc.with_columns(
        [
            pl.col(c).to_physical() if isinstance(t, pl.Decimal) else pl.col(c).cast(pl.Int128)
            for c, t in sums.items()
            if not t.is_float()
        ]
    )


def check_group_counts(spec: AggSpec, n: pl.DataFrame) -> None:
    """A group whose row count would go below zero is a `NegativeStateError` naming it."""
    if spec.by and n.height and n[CNT].min() < 0:  # type: ignore[operator]
        neg = n.filter(pl.col(CNT) < 0).row(0, named=True)
        raise NegativeStateError(
            f"aggregate: group { ({k: neg[k] for k in spec.by}) } would have {neg[CNT]} rows; "
            "a delete of rows that are not there"
        )


def _to_double(s: pl.Series) -> np.ndarray:
    """Values as doubles, each rounded to nearest (an Int128's conversion is; floats stay)."""
    return s.cast(pl.Float64).to_numpy().astype(np.float64, copy=False)


def _units_to_double(units: pl.Series, scale: int) -> np.ndarray:
    """DECIMAL units of 10^-scale as the nearest doubles: one IEEE division where both operands are
    exact doubles (|units| <= 2^53, scale <= 22), Python's exact conversion for the others."""
    u = units.cast(pl.Float64).to_numpy()
    out = u / 10.0**scale
    big = np.abs(u) > EXACT_FLOAT
    if big.any() or scale > 22:
        vals = units.to_list()
        for k in np.flatnonzero(big) if scale <= 22 else range(len(vals)):
            out[k] = float(Decimal(int(vals[k])).scaleb(-scale))
    return out


def _where(ok: np.ndarray, v: pl.Series, t: pl.DataType) -> pl.Series:
    """`v` where `ok`, else NULL, as type `t`."""
    return pl.select(pl.when(pl.Series(ok)).then(v).otherwise(None).cast(t)).to_series()


def results(spec: AggSpec, acc: pl.DataFrame) -> dict[str, pl.Series]:
    """The linear calls' values from computable accumulators (`computable`), one per row of `acc`."""
    out: dict[str, pl.Series] = {}
    with np.errstate(divide="ignore", invalid="ignore"):
        for i, c in enumerate(spec.calls):
            if c.kind != "linear":
                continue
            t = result_dtype(c, spec.input_schema)
            if c.func == "count_star":
                out[c.name] = acc[CNT].cast(pl.Int64)
                continue
            n = acc[f"__c{i}"]
            if c.func == "count":
                out[c.name] = n.cast(pl.Int64)
                continue
            some, nf, sx, mode = (n > 0).to_numpy(), _to_double(n), acc[f"__s{i}"], mode_of(spec, c)
            if mode == "dec":  # SUM exact; AVG the nearest double of the sum, divided by the count
                at = spec.input_schema[str(c.arg)]
                scale = (at.scale or 0) if isinstance(at, pl.Decimal) else 0
                if c.func == "sum":
                    v = _units_to_decimal(sx, scale, c.name)
                else:
                    v = pl.Series(c.name, _units_to_double(sx, scale) / nf, pl.Float64)
                out[c.name] = _where(some, v, t)
                continue
            if c.func == "sum":
                if mode == "int":
                    bad = sx.filter((n > 0) & ((sx < INT64[0]) | (sx > INT64[1])))
                    if bad.len():
                        raise WeightError(f"{c.describe()} = {bad[0]} does not fit in a 64-bit integer")
                    v = pl.Series(c.name, sx.cast(pl.Int64, strict=False))
                else:
                    v = pl.Series(c.name, sx.cast(pl.Float64))
                out[c.name] = _where(some, v, t)
                continue
            sf = _to_double(sx)
            if c.func == "avg":
                val, ok = sf / nf, some
            else:
                q = acc[f"__q{i}"]
                if mode == "int":  # (n·Σx² - (Σx)²) exact, rounded once to a double, / n
                    m2 = _exact_m2(n, q, sx) / nf
                else:
                    m2 = _to_double(q) - sf * sf / nf
                m2 = np.where(np.isnan(m2), m2, np.maximum(m2, 0.0))  # cancellation below 0 is 0
                if c.func in ("var_samp", "stddev_samp"):
                    val, ok = m2 / (nf - 1.0), (n > 1).to_numpy()
                else:
                    val, ok = m2 / nf, some
                if str(c.func).startswith("stddev"):
                    val = np.sqrt(val)
            out[c.name] = _where(ok, pl.Series(c.name, val, pl.Float64), t)
    return {k: v.alias(k) for k, v in out.items()}


def _exact_m2(n: pl.Series, q: pl.Series, sx: pl.Series) -> np.ndarray:
    """n·Σx² − (Σx)² per group in Python integers (exact, unbounded), the difference rounded once to a
    double. One Python step per changed group, for VAR / STDDEV of integers only."""
    out = np.empty(n.len(), dtype=np.float64)
    for k, (a, b, c) in enumerate(zip(n.to_list(), q.to_list(), sx.to_list(), strict=True)):
        out[k] = np.nan if a is None or b is None or c is None else float(int(a) * int(b) - int(c) * int(c))
    return out


def emit(
    spec: AggSpec,
    o: pl.DataFrame,
    n: pl.DataFrame,
    ro: dict[str, pl.Series],
    rn: dict[str, pl.Series],
    was: bool,
    old_exists: pl.Series | None = None,
) -> pl.DataFrame:
    """-old and +new rows of the groups (`o`, `n`: their keys and counts, row for row; `ro`, `rn`: the
    calls' values), leaving out the groups whose row is unchanged. `old_exists`: which groups had a
    row (else: those of positive count)."""
    by = bool(spec.by)
    e_old = (o[CNT] > 0) if by else pl.Series([was] * o.height, dtype=pl.Boolean)
    if old_exists is not None:
        e_old = old_exists
    e_new = (n[CNT] > 0) if by else pl.Series([True] * n.height, dtype=pl.Boolean)
    same = pl.Series([True] * n.height, dtype=pl.Boolean)
    for name in ro:
        a, b = ro[name], rn[name]
        eq = a.eq_missing(b)
        if a.dtype.is_float():
            eq = eq | (a.is_nan() & b.is_nan()).fill_null(False)
        same = same & eq
    cancel = e_old & e_new & same
    names = [c.name for c in spec.calls]

    def rows(side: pl.DataFrame, r: dict[str, pl.Series], keep: pl.Series, w: int) -> pl.DataFrame:
        f = pl.DataFrame([*[side[c] for c in spec.by], *[r[nm] for nm in names]])
        return f.with_columns(pl.lit(w, pl.Int64).alias(WEIGHT)).filter(keep)

    return pl.concat([rows(o, ro, e_old & ~cancel, -1), rows(n, rn, e_new & ~cancel, 1)], how="vertical")
