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
would go below zero a `NegativeStateError` naming it. Floating sums (SUM, AVG, VAR, STDDEV of a DOUBLE,
and VAR / STDDEV of a DECIMAL, in doubles) are exact too (`columnar/exactsum.py`): Σx and Σx² are kept
by powers of two, one accumulator row per (group, power) besides the group's row, and each value is
the correctly rounded double of its exact formula over the current multiset, whatever the order of the
inserts and deletes. AVG of an integer or DECIMAL is the correctly rounded double of the sum divided
by the count.
"""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import polars as pl

from dbspark.algebra.zset import WEIGHT, ZSet
from dbspark.columnar import exactsum
from dbspark.columnar.exactsum import LIMB, MAIN
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


SPECIALS = ("__nan", "__pinf", "__ninf")  # a floating call's counts of NaN, +inf and -inf


def float_calls(spec: AggSpec) -> list[tuple[int, AggCall]]:
    """The linear calls whose sums are floating (`mode_of` "float"), kept exactly in limbs."""
    return [
        (i, c)
        for i, c in enumerate(spec.calls)
        if c.kind == "linear" and c.arg is not None and c.func != "count" and mode_of(spec, c) == "float"
    ]


def has_floats(spec: AggSpec) -> bool:
    """Whether the accumulators have limb rows (`exactsum`): some floating sum."""
    return bool(float_calls(spec))


def sum_owner(spec: AggSpec) -> dict[int, int]:
    """Per floating call, the floating call whose Σx (and Σx²) it reads: the first on its argument (SUM
    and AVG of one column share their sums)."""
    first: dict[str, int] = {}
    return {i: first.setdefault(str(c.arg), i) for i, c in float_calls(spec)}


def limb_columns(spec: AggSpec) -> list[str]:
    """The accumulator columns summed per (group, power of two): per argument of floating calls its Σx,
    and its Σx² if one of them is a VAR / STDDEV."""
    owner, out = sum_owner(spec), []
    for i, c in float_calls(spec):
        j = owner[i]
        out += [n for n in (f"__s{j}", *((f"__q{j}",) if c.func in VAR else ())) if n not in out]
    return out


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
        if mode == "float":
            out.extend((f"{p}{i}", pl.Int64()) for p in SPECIALS)
            continue
        if mode == "dec":
            assert isinstance(t, pl.Decimal)
            out.append((f"__s{i}", pl.Decimal(38, t.scale or 0)))
        else:  # (an integer's sum: Int128)
            out.append((f"__s{i}", pl.Decimal(38, 0)))
        if c.func in VAR:
            out.append((f"__q{i}", pl.Decimal(38, 0)))
    out += [(c, pl.Decimal(38, 0)) for c in limb_columns(spec)]  # (Int128 sums by power of two)
    return pl.Schema(out)


def key_schema(spec: AggSpec) -> pl.Schema:
    """The accumulator rows' data columns: the group keys (or `G`), and `LIMB` with floating sums."""
    keys = [(k, spec.input_schema[k]) for k in spec.by] if spec.by else [(G, pl.Int8())]
    return pl.Schema([*keys, *([(LIMB, pl.Int16())] if has_floats(spec) else [])])


def empty_global(spec: AggSpec) -> pl.DataFrame:
    """The accumulators of an aggregate without GROUP BY over no rows: its one group, all sums 0."""
    sums = accumulator_schema(spec)
    limb = [pl.Series(LIMB, [MAIN], pl.Int16())] if has_floats(spec) else []
    return pl.DataFrame(
        [
            pl.Series(G, [0], pl.Int8()),
            *limb,
            *[pl.Series(c, [0], pl.Int64()).cast(t) for c, t in sums.items()],
        ]
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
    return stored(spec, with_limbs(spec, d.group_by(keys).agg(accumulator_exprs(spec)), d))


def limbs_of(spec: AggSpec, rows: pl.DataFrame) -> pl.DataFrame:
    """The floating calls' limb sums of `rows` (the input's columns and the weight) per (group, limb):
    the keys, `LIMB` and the limb columns as Int128 (`exactsum.limb_rows`)."""
    args = {int(col[3:]): str(spec.calls[int(col[3:])].arg) for col in limb_columns(spec)}
    calls = [(args[int(col[3:])], col, col.startswith("__q")) for col in limb_columns(spec)]
    return exactsum.limb_rows(rows, keys_of(spec), calls)


def with_limbs(spec: AggSpec, acc: pl.DataFrame, d: pl.DataFrame) -> pl.DataFrame:
    """A change's accumulators per group (`acc`, no limb sums) as rows of `LIMB` `MAIN`, and its floating
    calls' rows by power of two (`exactsum.limb_rows`) after them, each 0 in the columns it does not hold."""
    lcols = limb_columns(spec)
    if not lcols:
        return acc
    keys, limbs = keys_of(spec), limbs_of(spec, d)
    main = acc.with_columns(
        pl.lit(MAIN, pl.Int16).alias(LIMB), *[pl.lit(0, pl.Int128).alias(c) for c in lcols]
    )
    others = [c for c in main.columns if c not in (*keys, LIMB, *lcols)]
    limbs = limbs.with_columns([pl.lit(0, main.schema[c]).alias(c) for c in others])
    return pl.concat([main, limbs.select(main.columns)], how="vertical")


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
        else:  # the counts of the values a floating sum does not add (its sums are limb rows)
            xf = x.cast(pl.Float64)
            flags = (xf.is_nan(), xf == float("inf"), xf == float("-inf"))
            for p, flag in zip(SPECIALS, flags, strict=True):
                aggs.append(pl.when(flag).then(w128).otherwise(0).sum().alias(f"{p}{i}"))
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
    at those groups `frames[1]` (not consolidated). `was`: whether a global aggregate's row exists."""
    dacc, found = frames[0], frames[1]
    if dacc.height == 0:
        return pl.DataFrame(schema=pl.Schema([*spec.output_schema().items(), (WEIGHT, pl.Int64())]))
    o, n = old_new(spec, dacc, found)
    return emit(spec, o, n, results(spec, o), results(spec, n), was)


def old_new(spec: AggSpec, dacc: pl.DataFrame, found: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The accumulators of the change's groups (`dacc`, stored types) before and after it, one row per
    group and computable (`computable`), from the trace's rows at those groups (`found`); a floating
    call's exact value as `__v<i>` (`with_values`). A sum that leaves its type is a `WeightError`, a
    group whose row count would go below zero a `NegativeStateError`."""
    keys, sums, lcols = keys_of(spec), accumulator_schema(spec), limb_columns(spec)
    plain = [c for c in sums if c not in lcols]
    d, f = computable(dacc, sums), computable(found, sums)
    old = f.group_by(keys).agg([pl.col(c).sum() for c in plain])
    d1 = d.group_by(keys, maintain_order=True).agg([pl.col(c).sum() for c in plain]) if lcols else d
    j = d1.join(old, on=keys, how="left", nulls_equal=True, suffix="__o").with_columns(
        [pl.col(f"{c}__o").fill_null(0) for c in plain]
    )
    o = j.select(*keys, *[pl.col(f"{c}__o").alias(c) for c in plain])
    n = j.select(*keys, *[(pl.col(f"{c}__o") + pl.col(c)).alias(c) for c in plain])
    check_fits(spec, n)
    if lcols:
        limbs = pl.concat([f.select(*keys, LIMB, *lcols), d.select(*keys, LIMB, *lcols)], how="vertical")
        new_limbs = limbs.filter(pl.col(LIMB) != MAIN).group_by([*keys, LIMB]).agg(pl.col(lcols).sum())
        for c in lcols:
            _wide(new_limbs[c], c)
        o = with_values(spec, o, f.filter(pl.col(LIMB) != MAIN))
        n = with_values(spec, n, new_limbs)
    return o, n


def with_values(spec: AggSpec, acc: pl.DataFrame, limbs: pl.DataFrame) -> pl.DataFrame:
    """`acc` (computable accumulators, one row per group) with each floating call's value as `__v<i>`,
    read from the group's rows by power of two `limbs` (keys, `LIMB`, the limb columns as Int128; not
    necessarily one row per power): SUM and AVG vectorized where they can be (`exactsum.quick`), the
    rest from the groups' exact integers (`exactsum.assemble`, `exactsum.read`)."""
    keys, lcols = keys_of(spec), limb_columns(spec)
    idx = acc.select(keys).with_row_index("__row")
    rows = idx.join(limbs.group_by([*keys, LIMB]).agg(pl.col(lcols).sum()), on=keys, nulls_equal=True)
    g, k, m = rows["__row"].cast(pl.Int64), rows[LIMB], acc.height
    owner, out, per = sum_owner(spec), [], {}
    for i, c in float_calls(spec):
        j = owner[i]
        func = str(c.func)
        n, nan, pos, neg = (acc[f"{p}{i}"].cast(pl.Int64) for p in ("__c", *SPECIALS))
        plain = ((nan == 0) & (pos == 0) & (neg == 0) & (n > 0)).to_numpy()
        vals, found = np.full(m, np.nan), np.zeros(m, dtype=bool)
        if func in ("sum", "avg"):
            if j not in per:  # (SUM and AVG of one column share it)
                per[j] = exactsum.windows(g, k, rows[f"__s{j}"])
            vals, found = exactsum.quick(m, per[j], n if func == "avg" else None)
        found &= plain
        rest = np.flatnonzero(~found & (n > 0).to_numpy())
        if rest.size:
            sel = pl.Series(np.isin(g.to_numpy(), rest))
            gs, ks = g.filter(sel), k.filter(sel)
            s = exactsum.assemble(m, gs, ks, rows[f"__s{j}"].filter(sel))
            q = exactsum.assemble(m, gs, ks, rows[f"__q{j}"].filter(sel)) if f"__q{j}" in lcols else None
            nl, a, b, d = n.to_list(), nan.to_list(), pos.to_list(), neg.to_list()
            for j in rest.tolist():
                v = exactsum.read(func, nl[j], s[j], q[j] if q is not None else 0, a[j], b[j], d[j])
                vals[j] = np.nan if v is None else v
        out.append(pl.Series(f"__v{i}", vals).set((n <= 0) | _null_samp(func, n), None))
    return acc.with_columns(out)


def _null_samp(func: str, n: pl.Series) -> pl.Series:
    """The groups whose VAR_SAMP / STDDEV_SAMP is NULL (a single value)."""
    return (n == 1) if func in ("var_samp", "stddev_samp") else pl.Series([False] * n.len())


def check_fits(spec: AggSpec, n: pl.DataFrame) -> None:
    """Computable accumulators of groups (`computable`) that fit their stored types (else a
    `WeightError`) and have no fewer than zero rows (else `check_group_counts`'s error)."""
    for c, t in accumulator_schema(spec).items():
        if c not in n.columns:  # (limb sums: checked per limb)
            continue
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
            if not t.is_float() and c in acc.columns
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
            mode = mode_of(spec, c)
            if mode == "float":  # exact, read from the limbs (`with_values`)
                out[c.name] = acc[f"__v{i}"].cast(t)
                continue
            some, nf, sx = (n > 0).to_numpy(), _to_double(n), acc[f"__s{i}"]
            if mode == "dec":  # SUM exact; AVG the nearest double of the sum, divided by the count
                at = spec.input_schema[str(c.arg)]
                scale = (at.scale or 0) if isinstance(at, pl.Decimal) else 0
                if c.func == "sum":
                    v = _units_to_decimal(sx, scale, c.name)
                else:
                    v = pl.Series(c.name, _units_to_double(sx, scale) / nf, pl.Float64)
                out[c.name] = _where(some, v, t)
                continue
            if c.func == "sum":  # (an integer's: exact)
                bad = sx.filter((n > 0) & ((sx < INT64[0]) | (sx > INT64[1])))
                if bad.len():
                    raise WeightError(f"{c.describe()} = {bad[0]} does not fit in a 64-bit integer")
                out[c.name] = _where(some, pl.Series(c.name, sx.cast(pl.Int64, strict=False)), t)
                continue
            sf = _to_double(sx)
            if c.func == "avg":
                val, ok = sf / nf, some
            else:  # (n·Σx² - (Σx)²) exact, rounded once to a double, / n
                m2 = _exact_m2(n, acc[f"__q{i}"], sx) / nf
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
