"""MIN / MAX / MEDIAN of a GROUP BY stepped in the driver, over the same integral as its Spark form.

A GROUP BY with MIN / MAX / MEDIAN keeps its input's integral by group (as on Spark); when a step's
change is held in the driver (`engines.spark.placement`), `ordered_step` recomputes the changed groups
from their rows sought in the bucket files, there, no Spark job. Both kinds of steps interleave on one
trace, so the values are computed as Spark's form computes them, bit for bit: a view's row emitted by
one kind of step is retracted exactly by the other. Covered where the result is exact in both: MIN /
MAX of non-floating columns (a selection: no arithmetic, and no NaN or -0.0 ordering to match) beside
COUNT and integer SUM / AVG / VAR / STDDEV (exact sums, `columnar.aggfold`), and MEDIAN of integers,
DATE and TIMESTAMP. A changed group too large to read is ranked over its runs instead (`big_groups`).
MODE, floating MIN / MAX and user aggregates step on Spark. (A spec of linear calls only is folded
above the kernel on every engine: `operators/aggregate.py`.)
"""

from __future__ import annotations

import numpy as np
import polars as pl

from dbspark.algebra.zset import WEIGHT, ZSet
from dbspark.columnar.aggfold import accumulator_exprs, check_group_counts, emit, guard, results
from dbspark.columnar.median import median_frame
from dbspark.errors import NegativeStateError
from dbspark.ir.aggregate import AggCall, AggSpec, result_dtype


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

    guard(spec, found)
    guard(spec, d)
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

    ro, rn = results(spec, o), results(spec, n)
    for i, c, _ in ordered:
        ro[c.name] = pick(o, i, c, [f"__p{i}"], "__old")
        rn[c.name] = pick(n, i, c, [f"__p{i}", f"__p{i}__d"], "__new")
    for i, c, arg in medians:
        ro[c.name] = median(o, i, c, arg, [found], "__old")
        rn[c.name] = median(n, i, c, arg, [found, d], "__new")
    ro = {c.name: ro[c.name] for c in spec.calls}
    rn = {c.name: rn[c.name] for c in spec.calls}
    check_group_counts(spec, n)
    return ZSet(emit(spec, o, n, ro, rn, was), True)


def aggregate_rows(spec: AggSpec, d: pl.DataFrame) -> ZSet | None:
    """The per-step GROUP BY with MIN / MAX / MEDIAN of rows held in the driver (data columns and
    weights), with the values Spark's form computes from the same rows (`ordered_ok` calls, grouped
    specs only); None where the spec must run on Spark."""
    if not spec.by or not ordered_ok(spec):
        return None
    keys = list(spec.by)
    return ordered_step(spec, d.select(*spec.input_schema, WEIGHT), d.clear(), keys, False)
