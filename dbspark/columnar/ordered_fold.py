"""The fold of a GROUP BY with MIN / MAX / MEDIAN / MODE or user aggregates, over the changed groups'
rows: written once, run in the driver or inside Spark's tasks (`ZSetKernel.cogroup`).

Such a GROUP BY keeps its input's integral by group. A step seeks the integral's rows at the change's
groups and folds them with the change (`fold`): each side's values (before: the integral's rows;
after: those and the change's) are computed from the group's multiset, a value present when its
multiplicity (the sum of its entries' weights) is positive. A value or a group whose count would go
below zero is a `NegativeStateError` naming it. The linear calls beside them use the accumulators of
`columnar.aggfold`. Work follows the changed groups' sizes: a changed group is read whole (a group too
large to read, of a change held in this process, is ranked over its sorted runs instead where its
calls allow: `columnar/ranked_fold.py`).

Two forms: `ordered_step`, one grouped pass that never consolidates a group (MIN / MAX of
non-floating columns, MEDIAN of integers, DATE and TIMESTAMP, beside COUNT and integer sums: `fast`),
and `_general` (every call: the values' multiplicities per group, then MIN / MAX / MODE / MEDIAN of
any ordered type, NaN the greatest value, and user aggregates folded in Python per changed group).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from dbspark.algebra.zset import WEIGHT, ZSet
from dbspark.columnar.aggfold import (
    G,
    accumulator_exprs,
    check_group_counts,
    emit,
    guard,
    has_floats,
    keys_of,
    limbs_of,
    results,
    with_values,
)
from dbspark.columnar.median import median_expr, median_frame
from dbspark.errors import NegativeStateError
from dbspark.ir.aggregate import AggCall, AggSpec, UserAggregate, result_dtype

X, M = "__x", "__m"  # a call's argument and a value's multiplicity in a group


def fold(spec: AggSpec, was: bool, frames: list[pl.DataFrame]) -> pl.DataFrame:
    """`cogroup` function: the output's change (-old, +new rows of the groups of the change
    `frames[0]` whose row changed; the output's columns and the weight) from the integral's rows at
    those groups, `frames[1]` (both: the input's columns, the group key `G` without GROUP BY, and the
    weight). `was`: whether a global aggregate's row exists (its one group is always folded)."""
    d, found = frames
    keys = keys_of(spec)
    if not spec.by:
        return _general(spec, d, found, keys, was, groups=pl.DataFrame({G: [0]}, schema={G: pl.Int8()}))
    if d.height == 0:
        return pl.DataFrame(schema=pl.Schema([*spec.output_schema().items(), (WEIGHT, pl.Int64())]))
    if fast(spec):
        return ordered_step(spec, d, found, keys, was).df
    return _general(spec, d, found, keys, was)


def whole(spec: AggSpec, frames: list[pl.DataFrame]) -> pl.DataFrame:
    """`cogroup` function: the aggregate of whole groups' rows (the input's columns and the weight)."""
    (rows,) = frames
    if not spec.by:
        rows = rows.with_columns(pl.lit(0, pl.Int8).alias(G))
    return fold(spec, False, [rows, rows.clear()])


def fast(spec: AggSpec) -> bool:
    """Whether `ordered_step` folds the spec (else `_general`)."""
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
    """The output change of a GROUP BY with MIN / MAX (`fast`): the changed groups' rows before
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
    return ZSet(finish(spec, o, n, ro, rn, was), True)


def finish(spec: AggSpec, o: pl.DataFrame, n: pl.DataFrame, ro: dict, rn: dict, was: bool) -> pl.DataFrame:
    """The output change from both sides' accumulators (`o`, `n`) and values of every call (`ro`,
    `rn`), a group whose row count would go below zero an error."""
    check_group_counts(spec, n)
    names = [c.name for c in spec.calls]
    return emit(spec, o, n, {k: ro[k] for k in names}, {k: rn[k] for k in names}, was)


def _general(
    spec: AggSpec,
    d: pl.DataFrame,
    found: pl.DataFrame,
    keys: list[str],
    was: bool,
    groups: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """`fold` of any spec: per changed group (`groups`, else the change's), the linear accumulators of
    both sides, and per ordered or user call the multiplicity of each value on both sides."""
    changed = d.select(keys).unique() if groups is None else groups
    guard(spec, found)
    guard(spec, d)
    o = changed.join(found.group_by(keys).agg(accumulator_exprs(spec)), on=keys, how="left", nulls_equal=True)
    dacc = d.group_by(keys).agg(accumulator_exprs(spec))
    sums = [c for c in dacc.columns if c not in keys]
    j = o.join(dacc, on=keys, how="left", nulls_equal=True, suffix="__d").with_columns(
        [pl.col(c).fill_null(0) for c in sums] + [pl.col(f"{c}__d").fill_null(0) for c in sums]
    )
    o = j.select(*keys, *sums)
    n = j.select(*keys, *[(pl.col(c) + pl.col(f"{c}__d")).alias(c) for c in sums])
    if has_floats(spec):  # exact sums of the group's rows (`exactsum`), as the linear aggregate's
        o = with_values(spec, o, limbs_of(spec, found))
        n = with_values(spec, n, limbs_of(spec, pl.concat([found.select(d.columns), d], how="vertical")))
    ro, rn = results(spec, o), results(spec, n)
    for c in spec.calls:
        if c.kind == "linear":
            continue
        assert c.arg is not None
        before = _multiplicities(found, keys, c.arg)
        after = _multiplicities(pl.concat([found.select(d.columns), d], how="vertical"), keys, c.arg)
        _check_values(spec, c, after, keys)
        ro[c.name] = _values(spec, c, o.select(keys), before, keys)
        rn[c.name] = _values(spec, c, n.select(keys), after, keys)
    return finish(spec, o, n, ro, rn, was)


def _multiplicities(rows: pl.DataFrame, keys: list[str], arg: str) -> pl.DataFrame:
    """Per group and non-NULL value of `arg` (as `X`), its multiplicity `M` (rows of weight 0 left out)."""
    return (
        rows.filter(pl.col(arg).is_not_null())
        .select(*keys, pl.col(arg).alias(X), WEIGHT)
        .group_by([*keys, X])
        .agg(pl.col(WEIGHT).sum().alias(M))
        .filter(pl.col(M) != 0)
    )


def _check_values(spec: AggSpec, c: AggCall, m: pl.DataFrame, keys: list[str]) -> None:
    bad = m.filter(pl.col(M) < 0)
    if not bad.height:
        return
    r = bad.row(0, named=True)
    group = tuple(r[k] for k in spec.by) if spec.by else ()
    if isinstance(c.func, UserAggregate):
        raise NegativeStateError(f"aggregate {c.name!r}, group {group}: more values deleted than present")
    raise NegativeStateError(
        f"aggregate {c.name!r}, group {group}: multiplicity of {r[X]!r} would become {r[M]} "
        "(below zero); a delete of a value not there"
    )


def _values(spec: AggSpec, c: AggCall, side: pl.DataFrame, m: pl.DataFrame, keys: list[str]) -> pl.Series:
    """The call's value for each group of `side` (in its order) from its values' multiplicities `m`."""
    t = result_dtype(c, spec.input_schema)
    m = m.filter(pl.col(M) > 0)
    if isinstance(c.func, UserAggregate):
        ua = c.func
        rows = []
        for key, grp in m.sort([*keys, X]).group_by(keys, maintain_order=True):
            rows.append((*key, ua.final(ua.fold(grp[X].to_list(), grp[M].to_list()))))
        v = pl.DataFrame(rows, schema={**{k: side.schema[k] for k in keys}, "__r": t}, orient="row")
    elif c.func in ("min", "max"):
        x = pl.col(X).sort()  # NaN after every number, as DuckDB orders it
        v = m.group_by(keys).agg((x.first() if c.func == "min" else x.last()).alias("__r"))
    elif c.func == "mode":  # the most frequent value, ties to the least
        v = (
            m.sort([*keys, M, X], descending=[False] * len(keys) + [True, False])
            .group_by(keys, maintain_order=True)
            .agg(pl.col(X).first().alias("__r"))
        )
    else:  # MEDIAN: the values at positions (n-1)//2 and n//2 of the sorted multiset
        s = m.sort([*keys, X]).with_columns(
            pl.col(M).cum_sum().over(keys).alias("__cum"), pl.col(M).sum().over(keys).alias("__n")
        )
        lo = pl.col(X).filter(pl.col("__cum") > (pl.col("__n") - 1) // 2).first()
        hi = pl.col(X).filter(pl.col("__cum") > pl.col("__n") // 2).first()
        mid = s.group_by(keys).agg(lo.alias("__lo"), hi.alias("__hi"), pl.col("__n").first())
        e = median_expr(pl.col("__lo"), pl.col("__hi"), pl.col("__n") % 2 == 1, spec.input_schema[str(c.arg)])
        v = mid.select(*keys, e.alias("__r"))
    out = side.join(v, on=keys, how="left", nulls_equal=True, maintain_order="left")["__r"]
    return out.cast(t).alias(c.name)
