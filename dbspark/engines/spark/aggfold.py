"""A linear GROUP BY's step in the driver, over the same accumulator trace as its Spark form.

When a step's change is held in the driver (`engines.spark.placement`), the aggregate reads the old
accumulators of the changed groups from the bucket files (`BucketSnap.seek_local`), adds the change's
and emits -old / +new rows with Polars, no Spark job. The accumulators are the Spark form's
(`engines.spark.aggregate._acc_sql`: the row count `__cnt`, per call `__c<i>` the non-NULL count,
`__s<i>` Σx, `__q<i>` Σx², integer sums exact in DECIMAL(38)), so steps of either kind interleave on
one trace, and the results are computed from them bit for bit as Spark computes them: a view's row
emitted by one kind of step is retracted exactly by the other. Integer sums run in Int128 with the
DECIMAL(38) bound checked (Spark's overflow error is a `WeightError` here too); an integer→double
conversion rounds to nearest as Java's does; double arithmetic is IEEE in both (no fused operations).

Covered: COUNT(*), COUNT, SUM / AVG / VAR / STDDEV of integer, boolean and floating columns, and
COUNT / SUM / AVG of DECIMALs of scale at most 6, whose Spark sums keep the argument's scale (`_dec`):
summed here exactly in Int128 units, AVG as Spark's double of the sum (correctly rounded, as Java's
BigDecimal.doubleValue) divided by the count. VAR / STDDEV of a DECIMAL, a DECIMAL of a larger scale
and the ordered and user aggregates step on Spark (`local_ok`).

A GROUP BY with MIN / MAX keeps its input's integral by group (as on Spark); `ordered_step` recomputes
the changed groups from their rows sought in the bucket files, in the driver. Covered where the result
is exact in both engines: MIN / MAX of non-floating columns (a selection: no arithmetic, and no NaN or
-0.0 ordering to match) beside COUNT and integer SUM / AVG / VAR / STDDEV (exact sums; a floating sum
recomputed from rows would depend on the order Spark adds them in), and MEDIAN of integers, DATE and
TIMESTAMP. A changed group too large to read is ranked over its runs instead (`big_groups`). MODE,
floating MIN / MAX and user aggregates step on Spark.
"""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import polars as pl

from dbspark.algebra.zset import WEIGHT, ZSet
from dbspark.columnar.median import median_frame
from dbspark.errors import NegativeStateError, WeightError
from dbspark.ir.aggregate import AggCall, AggSpec, result_dtype

G = "__g"
CNT = "__cnt"
VAR = ("var_samp", "var_pop", "stddev_samp", "stddev_pop")
DEC38 = 10**38  # DECIMAL(38, 0) holds |v| < 10^38
INT64 = (-(2**63), 2**63 - 1)


class Accumulators(ZSet):
    """Accumulator rows (group keys, then the summed columns) held in the driver as a trace's pending
    change: the trace sums these columns where a Z-set's trace sums its weight."""

    def __init__(self, df: pl.DataFrame) -> None:  # (no weight column: the sums are the weights)
        self._df = df
        self.consolidated = True
        self._cons = None


def local_ok(spec: AggSpec) -> bool:
    """Whether the spec's calls all fold here: linear calls on integer, boolean or floating arguments,
    and COUNT / SUM / AVG of DECIMALs of scale at most 6 (`_dec`)."""
    for c in spec.calls:
        if c.kind != "linear":
            return False
        if c.arg is not None and c.func != "count":
            t = spec.input_schema[c.arg]
            if _dec(spec, c.arg) is not None:
                if c.func not in ("sum", "avg"):
                    return False
            elif not (t.is_integer() or t == pl.Boolean() or t.is_float()):
                return False
    return True


def _dec(spec: AggSpec, arg: str | None) -> int | None:
    """The scale of a DECIMAL argument whose Spark sum keeps it, else None.

    Spark's accumulator is sum(x * CAST(w AS DECIMAL(20,0))): the product of DECIMAL(p, s) and
    DECIMAL(20, 0) keeps scale s where s <= 6 (Spark's precision-loss rule keeps min(s, 6) digits), so
    the sum is exact in units of 10^-s, as here (Int128 units)."""
    t = spec.input_schema[arg] if arg else None
    if isinstance(t, pl.Decimal) and (t.scale or 0) <= 6:
        return t.scale or 0
    return None


def _units_to_decimal(units: pl.Series, scale: int, name: str) -> pl.Series:
    """Int128 units of 10^-scale as DECIMAL(38, scale) values."""
    one = pl.lit(Decimal(1).scaleb(-scale), pl.Decimal(38, scale))
    return pl.select((pl.lit(units).cast(pl.Decimal(38, 0)) * one).alias(name)).to_series()


def ordered_ok(spec: AggSpec) -> bool:
    """Whether a spec with ordered calls steps in the driver (`ordered_step`)."""
    if not any(c.kind == "ordered" for c in spec.calls):
        return False
    for c in spec.calls:
        if c.kind == "ordered":
            if c.arg is None or spec.input_schema[c.arg].is_float():
                return False
            t = spec.input_schema[c.arg]
            median_ok = t.is_integer() or t in (pl.Date(),) or isinstance(t, pl.Datetime)
            if c.func not in ("min", "max") and not (c.func == "median" and median_ok):
                return False
        elif c.kind != "linear" or (c.arg is not None and c.func != "count" and not _is_int(spec, c.arg)):
            return False
    return True


def _is_int(spec: AggSpec, arg: str | None) -> bool:
    t = spec.input_schema[arg] if arg else None
    return t is not None and (t.is_integer() or t == pl.Boolean())


def _wide(values: pl.Series, name: str) -> pl.Series:
    """Int128 values checked to fit DECIMAL(38, 0), as Spark's sums must (else a WeightError)."""
    if values.len() and (values.abs().max() >= DEC38):  # type: ignore[operator]
        raise WeightError(f"integer overflow on the spark engine: an aggregate's sum {name} left DECIMAL(38)")
    return values


def change_accumulators(
    spec: AggSpec, d: pl.DataFrame, keys: list[str], sums: pl.Schema | None
) -> pl.DataFrame:
    """The change's accumulators per group: `d` holds the rows (group keys, arguments) with weights
    (`sums`: the columns to return after the keys; None: all, the linear calls')."""
    _guard(spec, d)
    acc = d.group_by(keys).agg(accumulator_exprs(spec))
    return acc if sums is None else acc.select(*keys, *[pl.col(c) for c in sums])


def accumulator_exprs(spec: AggSpec) -> list[pl.Expr]:
    """The aggregations of `change_accumulators` (over rows with weights, grouped by the keys)."""
    w = pl.col(WEIGHT)
    w128 = w.cast(pl.Int128)
    aggs: list[pl.Expr] = [w128.sum().alias(CNT)]
    for i, c in enumerate(spec.calls):
        if c.arg is None or c.kind != "linear":
            continue
        x = pl.col(c.arg)
        aggs.append(pl.when(x.is_not_null()).then(w128).otherwise(0).sum().alias(f"__c{i}"))
        if _dec(spec, c.arg) is not None:  # Σ units · w, exact
            if c.func != "count":
                aggs.append((x.to_physical() * w128).sum().alias(f"__s{i}"))
        elif _is_int(spec, c.arg):
            xi = x.cast(pl.Int64).cast(pl.Int128)
            if c.func != "count":
                aggs.append((xi * w128).sum().alias(f"__s{i}"))
            if c.func in VAR:
                aggs.append((xi * xi * w128).sum().alias(f"__q{i}"))
        else:
            xf, wf = x.cast(pl.Float64), w.cast(pl.Float64)
            if c.func != "count":
                aggs.append((xf * wf).sum().alias(f"__s{i}"))
            if c.func in VAR:
                aggs.append((xf * xf * wf).sum().alias(f"__q{i}"))
    return aggs


def _guard(spec: AggSpec, d: pl.DataFrame) -> None:
    """Raise where an Int128 product or sum of the change could wrap (Spark's DECIMAL(38) overflows
    there first): the magnitudes estimated in doubles, with a wide margin."""
    if not d.height:
        return

    def exact(c: AggCall) -> bool:
        return (
            c.arg is not None
            and c.kind == "linear"
            and c.func != "count"
            and (_is_int(spec, c.arg) or _dec(spec, c.arg) is not None)
        )

    if not any(exact(c) for c in spec.calls):
        return
    wf = d[WEIGHT].cast(pl.Float64).abs()
    for c in spec.calls:
        if not exact(c):
            continue
        x = d[str(c.arg)]
        x = x.to_physical() if _dec(spec, c.arg) is not None else x
        xf = x.cast(pl.Float64).abs().fill_null(0.0)
        top = float((xf * xf * wf).sum()) if c.func in VAR else float((xf * wf).sum())
        if top >= 1e37:
            raise WeightError(
                f"integer overflow on the spark engine: {c.describe()} sums past DECIMAL(38) in this change"
            )


def _to_double(s: pl.Series) -> np.ndarray:
    """Values as doubles, each rounded to nearest (an Int128's conversion is; floats stay)."""
    return s.cast(pl.Float64).to_numpy().astype(np.float64, copy=False)


def _where(ok: np.ndarray, v: pl.Series, t: pl.DataType) -> pl.Series:
    """`v` where `ok`, else NULL, as type `t`."""
    return pl.select(pl.when(pl.Series(ok)).then(v).otherwise(None).cast(t)).to_series()


def _results(spec: AggSpec, acc: pl.DataFrame) -> dict[str, pl.Series]:
    """The calls' values from accumulators, as `aggregate._finalize` computes them on Spark."""
    out: dict[str, pl.Series] = {}
    with np.errstate(divide="ignore", invalid="ignore"):
        for i, c in enumerate(spec.calls):
            if c.kind != "linear":
                continue
            t = result_dtype(c, spec.input_schema)
            if c.func == "count_star":
                out[c.name] = acc[CNT].cast(pl.Int64).alias(c.name)
                continue
            n = acc[f"__c{i}"]
            if c.func == "count":
                out[c.name] = n.cast(pl.Int64).alias(c.name)
                continue
            some = (n > 0).to_numpy()
            nf = _to_double(n)
            sx = acc[f"__s{i}"]
            scale = _dec(spec, c.arg)
            if scale is not None:  # Int128 units: SUM exact, AVG as Spark's double(Σ) / double(n)
                if c.func == "sum":
                    v = _units_to_decimal(sx, scale, c.name)
                else:
                    sf = np.array([float(Decimal(int(u)).scaleb(-scale)) for u in sx.to_list()], np.float64)
                    with np.errstate(divide="ignore", invalid="ignore"):
                        v = pl.Series(c.name, sf / nf, pl.Float64)
                out[c.name] = _where(some, v, t)
                continue
            if c.func == "sum":
                if _is_int(spec, c.arg):
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
                if _is_int(spec, c.arg):  # CAST(n * Σx² - (Σx)² AS double) / n, the difference exact
                    m2 = _exact_m2(n, q, sx) / nf
                else:
                    m2 = _to_double(q) - sf * sf / nf
                m2 = np.where(np.isnan(m2), m2, np.maximum(m2, 0.0))  # greatest(m2, 0.0): NaN stays NaN
                if c.func in ("var_samp", "stddev_samp"):
                    val, ok = m2 / (nf - 1.0), (n > 1).to_numpy()
                else:
                    val, ok = m2 / nf, some
                if str(c.func).startswith("stddev"):
                    val = np.sqrt(val)
            s = pl.Series(c.name, val, pl.Float64)
            out[c.name] = _where(ok, s, t)
    return {k: v.alias(k) for k, v in out.items()}


def fold(
    spec: AggSpec, dacc: pl.DataFrame, found: pl.DataFrame, keys: list[str], sums: pl.Schema, was: bool
) -> tuple[ZSet, pl.DataFrame]:
    """The output change (-old, +new rows of the changed groups; unchanged groups left out) and the
    accumulators to add to the trace, from the change's accumulators `dacc` (Int128 integer sums) and
    the trace's rows `found` at their keys (not consolidated)."""
    ints = [c for c, t in sums.items() if not t.is_float()]
    decs = {c: t.scale or 0 for c, t in sums.items() if isinstance(t, pl.Decimal)}  # the trace's DECIMAL sums
    old = (
        found.with_columns(
            [pl.col(c).to_physical() if c in decs else pl.col(c).cast(pl.Int128) for c in ints]
        )
        .group_by(keys)
        .agg([pl.col(c).sum() for c in sums])
    )
    j = dacc.join(old, on=keys, how="left", nulls_equal=True, suffix="__o").with_columns(
        [pl.col(f"{c}__o").fill_null(0) for c in sums]
    )
    o = j.select(*keys, *[pl.col(f"{c}__o").alias(c) for c in sums])
    n = j.select(*keys, *[(pl.col(f"{c}__o") + pl.col(c)).alias(c) for c in sums])
    for c in ints:
        _wide(n[c], c)
        _wide(dacc[c], c)
    _check_group_counts(spec, n)
    for c in ints:
        if c in (CNT,) or c.startswith("__c"):
            _fits_long(n[c])
    out = _emit(spec, o, n, _results(spec, o), _results(spec, n), was)
    acc = dacc.with_columns(
        [_units_to_decimal(dacc[c], decs[c], c) if c in decs else pl.col(c).cast(t) for c, t in sums.items()]
    )
    return out, acc


def _check_group_counts(spec: AggSpec, n: pl.DataFrame) -> None:
    """A group whose row count would go below zero is a `NegativeStateError` naming it."""
    if spec.by and n.height and n[CNT].min() < 0:  # type: ignore[operator]
        neg = n.filter(pl.col(CNT) < 0).row(0, named=True)
        raise NegativeStateError(
            f"aggregate: group { ({k: neg[k] for k in spec.by}) } would have {neg[CNT]} rows; "
            "a delete of rows that are not there"
        )


def _emit(
    spec: AggSpec,
    o: pl.DataFrame,
    n: pl.DataFrame,
    ro: dict[str, pl.Series],
    rn: dict[str, pl.Series],
    was: bool,
) -> ZSet:
    """-old and +new rows of the groups (`o`, `n`: their keys and counts, row for row; `ro`, `rn`: the
    calls' values), leaving out the groups whose row is unchanged."""
    by = bool(spec.by)
    e_old = (o[CNT] > 0) if by else pl.Series([was] * o.height)
    e_new = (n[CNT] > 0) if by else pl.Series([True] * n.height)
    same = pl.Series([True] * n.height)
    for name in ro:
        a, b = ro[name], rn[name]
        eq = a.eq_missing(b)
        if a.dtype.is_float():
            eq = eq | (a.is_nan() & b.is_nan()).fill_null(False)
        same = same & eq
    cancel = e_old & e_new & same
    names = [c.name for c in spec.calls]
    cols = [*spec.by]

    def rows(side: pl.DataFrame, r: dict[str, pl.Series], keep: pl.Series, w: int) -> pl.DataFrame:
        f = pl.DataFrame([*[side[c] for c in cols], *[r[nm] for nm in names]])
        return f.with_columns(pl.lit(w, pl.Int64).alias(WEIGHT)).filter(keep)

    out = pl.concat([rows(o, ro, e_old & ~cancel, -1), rows(n, rn, e_new & ~cancel, 1)], how="vertical")
    return ZSet(out, True)


def ordered_step(spec: AggSpec, d: pl.DataFrame, found: pl.DataFrame, keys: list[str], was: bool) -> ZSet:
    """The output change of a GROUP BY with MIN / MAX (`ordered_ok`): the changed groups' rows before
    (`found`, the input's integral sought at the change's groups, not consolidated) and after (with the
    change `d`), each side's values computed as on Spark (a value is present when its multiplicity, the
    sum of its entries' weights, is positive). A value or a group whose count would go below zero is a
    `NegativeStateError` naming it.

    One grouped pass over `found` (a group of 10^6 rows is read, never consolidated): the linear
    accumulators are sums over the rows as they are, and a value whose entries are all positive is
    present, so only the few values with a negative entry (in `found` or in the change) have their
    multiplicities summed. The new side is the old one plus the change's."""
    data = [c for c in found.columns if c != WEIGHT]
    d = d.select(*data, WEIGHT)
    changed = d.select(keys).unique()
    w = pl.col(WEIGHT)
    calls = [(i, c, c.arg) for i, c in enumerate(spec.calls) if c.kind == "ordered" and c.arg is not None]
    ordered = [(i, c, arg) for i, c, arg in calls if c.func in ("min", "max")]
    medians = [(i, c, arg) for i, c, arg in calls if c.func == "median"]
    both = pl.concat([found, d], how="vertical")
    # per ordered call, the values with a negative entry, and their multiplicities before and after
    negs: dict[int, pl.Series] = {}
    totals: dict[int, pl.DataFrame] = {}
    for i, c, arg in calls:
        x = pl.col(arg)
        nv = both.filter((w < 0) & x.is_not_null())[arg].unique()
        negs[i] = nv
        by_value = list(dict.fromkeys([*keys, arg]))  # (the argument may be a group key)
        if nv.len() == 0:
            continue

        def total(
            f: pl.DataFrame, name: str, x: pl.Expr = x, nv: pl.Series = nv, by_value: list[str] = by_value
        ) -> pl.DataFrame:
            return f.filter(x.is_in(nv.implode())).group_by(by_value).agg(w.sum().alias(name))

        t = total(found, "__old").join(
            total(d, "__dw"), on=by_value, how="full", coalesce=True, nulls_equal=True
        )
        t = t.with_columns(
            pl.col("__old").fill_null(0),
            (pl.col("__old").fill_null(0) + pl.col("__dw").fill_null(0)).alias("__new"),
        )
        bad = t.filter(pl.col("__new") < 0)
        if bad.height:
            r = bad.row(0, named=True)
            raise NegativeStateError(
                f"aggregate {c.name!r}, group {tuple(r[k] for k in spec.by)}: multiplicity of {r[arg]!r} "
                f"would become {r['__new']} (below zero); a delete of a value not there"
            )
        totals[i] = t

    # one pass over the old rows: the linear accumulators, and per ordered call the least / greatest
    # value among the entries of positive weight whose value has no negative entry
    def extreme(f: pl.DataFrame, name: str) -> list[pl.Expr]:
        out = []
        for i, c, arg in ordered:
            x = pl.col(arg)
            keep = (w > 0) & x.is_not_null()
            if negs[i].len():
                keep = keep & ~x.is_in(negs[i].implode())
            v = x.filter(keep)
            out.append((v.min() if c.func == "min" else v.max()).alias(f"__p{i}{name}"))
        return out

    _guard(spec, found)
    _guard(spec, d)
    o = found.group_by(keys).agg([*accumulator_exprs(spec), *extreme(found, "")])
    dacc = d.group_by(keys).agg([*accumulator_exprs(spec), *extreme(d, "")])
    sums = [c for c in dacc.columns if c not in keys and not c.startswith("__p")]
    o = changed.join(o, on=keys, how="left", nulls_equal=True)
    j = o.join(dacc, on=keys, how="left", nulls_equal=True, suffix="__d")
    j = j.with_columns(
        [pl.col(c).fill_null(0) for c in sums] + [pl.col(f"{c}__d").fill_null(0) for c in sums]
    )
    n = j.select(*keys, *[(pl.col(c) + pl.col(f"{c}__d")).alias(c) for c in sums])
    o = j.select(*keys, *sums)

    def pick(side: pl.DataFrame, i: int, c: AggCall, cols: list[str], at: str) -> pl.Series:
        """The call's value per group of `side`: the extreme of its candidates, the passes' extremes
        `cols` of `j` and the present values among those with a negative entry (multiplicity `at`)."""
        cands, names = j.select(*keys, *cols), list(cols)
        if i in totals:
            x = pl.col(str(c.arg))
            present = totals[i].filter(pl.col(at) > 0).group_by(keys)
            cands = cands.join(
                present.agg((x.min() if c.func == "min" else x.max()).alias("__n")),
                on=keys,
                how="left",
                nulls_equal=True,
            )
            names.append("__n")
        fold = pl.min_horizontal if c.func == "min" else pl.max_horizontal
        r = side.select(keys).join(
            cands.select(*keys, fold(names).alias("__r")), on=keys, how="left", nulls_equal=True
        )
        return r["__r"].cast(result_dtype(c, spec.input_schema)).alias(c.name)

    def median(
        side: pl.DataFrame, i: int, c: AggCall, arg: str, rows: list[pl.DataFrame], at: str
    ) -> pl.Series:
        """The call's value per group of `side` from its multiset: the entries of positive weight whose
        value has no negative entry, and the present values among the others with their multiplicity;
        the two middle values selected in O(group) (`np.partition`), DuckDB's interpolation applied."""
        x = pl.col(arg)
        keep = (w > 0) & x.is_not_null()
        if negs[i].len():
            keep = keep & ~x.is_in(negs[i].implode())
        by_value = list(dict.fromkeys([*keys, arg]))
        parts = [f.filter(keep).select(*by_value, WEIGHT) for f in rows]
        if i in totals:
            parts.append(totals[i].filter(pl.col(at) > 0).select(*by_value, pl.col(at).alias(WEIGHT)))
        entries = pl.concat(parts, how="vertical")
        t = spec.input_schema[arg]
        groups, lo, hi = [], [], []
        cnt: list[int | None] = []
        for part in entries.partition_by(keys, maintain_order=False):
            xs = part[arg].to_physical().to_numpy()
            ws = part[WEIGHT].to_numpy()
            if len(ws) and ws.max() > 1:
                xs = np.repeat(xs, ws)
            m = len(xs)
            klo, khi = (m - 1) // 2, m // 2
            sel = np.partition(xs, [klo, khi]) if m > 1 else xs
            groups.append(part.select(keys).head(1))
            lo.append(sel[klo])
            hi.append(sel[khi])
            cnt.append(m)
        phys = pl.Series([], dtype=t).to_physical().dtype
        if groups:
            mid = pl.concat(groups, how="vertical").with_columns(
                median_frame(
                    pl.Series(lo, dtype=phys).cast(t).to_list(),
                    pl.Series(hi, dtype=phys).cast(t).to_list(),
                    cnt,
                    t,
                    "__r",
                )
            )
        else:
            mid = (
                side.select(keys)
                .clear()
                .with_columns(pl.lit(None, result_dtype(c, spec.input_schema)).alias("__r"))
            )
        r = side.select(keys).join(mid, on=keys, how="left", nulls_equal=True)["__r"]
        return r.cast(result_dtype(c, spec.input_schema)).alias(c.name)

    ro, rn = _results(spec, o), _results(spec, n)
    for i, c, _ in ordered:
        ro[c.name] = pick(o, i, c, [f"__p{i}"], "__old")
        rn[c.name] = pick(n, i, c, [f"__p{i}", f"__p{i}__d"], "__new")
    for i, c, arg in medians:
        ro[c.name] = median(o, i, c, arg, [found], "__old")
        rn[c.name] = median(n, i, c, arg, [found, d], "__new")
    ro = {c.name: ro[c.name] for c in spec.calls}
    rn = {c.name: rn[c.name] for c in spec.calls}
    _check_group_counts(spec, n)
    return _emit(spec, o, n, ro, rn, was)


def _exact_m2(n: pl.Series, q: pl.Series, sx: pl.Series) -> np.ndarray:
    """n·Σx² − (Σx)² per group, each product in DECIMAL(38) as Spark computes it (an overflow is an
    error there and here), the difference rounded once to a double (Python's int → float rounds to
    nearest, as Java's BigDecimal → double does). One Python step per changed group."""
    out = np.empty(n.len(), dtype=np.float64)
    for k, (a, b, c) in enumerate(zip(n.to_list(), q.to_list(), sx.to_list(), strict=True)):
        if a is None or b is None or c is None:
            out[k] = np.nan
            continue
        nq, ss = int(a) * int(b), int(c) * int(c)
        if abs(nq) >= DEC38 or abs(ss) >= DEC38:
            raise WeightError("integer overflow on the spark engine: a variance's n·Σx² left DECIMAL(38)")
        out[k] = float(nq - ss)
    return out


def _fits_long(s: pl.Series) -> None:
    if s.len() and (s.min() < INT64[0] or s.max() > INT64[1]):  # type: ignore[operator]
        raise WeightError("integer overflow on the spark engine: a group's row count left BIGINT")


def aggregate_rows(spec: AggSpec, d: pl.DataFrame) -> ZSet | None:
    """The per-step GROUP BY of rows held in the driver (data columns and weights), with the values
    Spark's form computes from the same rows (`local_ok` / `ordered_ok` calls, grouped specs only);
    None where the spec must run on Spark."""
    if not spec.by:
        return None
    keys = list(spec.by)
    d = d.select(*spec.input_schema, WEIGHT)
    if local_ok(spec):
        dacc = change_accumulators(spec, d, keys, None)
        sums = pl.Schema([(c, t) for c, t in dacc.schema.items() if c not in keys])
        out, _ = fold(spec, dacc, dacc.clear(), keys, sums, False)
        return out
    if ordered_ok(spec):
        return ordered_step(spec, d, d.clear(), keys, False)
    return None
