"""The fold of a GROUP BY whose calls are linear or user aggregates with an inverse: O(change).

A user aggregate defined by structural recursion (f, g) with an inverse `d` of g
(`incremental-aggregation-monotonic-programs.txt` §2.3) is maintained from its accumulated value per
group, as COUNT and SUM are from their sums: a change's values are folded into the group's
accumulator by g (inserts) and d (deletes), without reading the group's other values. The
accumulators are kept in a trace of their own, a Z-set of one row per group: the group's keys and,
per user call, its accumulated value (`codec.dumps`: JSON, no pickle) and its count of non-NULL values. A step seeks the
changed groups' rows there and in the linear accumulators' trace, and one `cogroup` of `fold` gives
both the output's change (`K` 0) and the accumulator trace's change (`K` 1: -old row, +new row).

A group whose count of values for a call goes below zero is a `NegativeStateError`; a call whose
count returns to 0 forgets its accumulator (a later insert starts from f again). User aggregates
without an inverse are folded by scan trees (`scan_fold`, which computes their new values and hands
them to `fold_groups`); specs with ordered calls or floating sums are folded from the group's rows
(`ordered_fold`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import polars as pl

from dbspark import codec
from dbspark.algebra.zset import WEIGHT
from dbspark.columnar.aggfold import (
    CNT,
    G,
    emit,
    has_floats,
    key_schema,
    keys_of,
    linear,
    old_new,
    results,
)
from dbspark.columnar.plans import collect
from dbspark.errors import NegativeStateError, UnsupportedError
from dbspark.ir.aggregate import AggSpec, UserAggregate, result_dtype

K = "__k"  # 0: a row of the output's change; 1: an entry of the accumulator trace's change


def invertible(spec: AggSpec) -> bool:
    """Whether the spec is folded here: user calls, each with an inverse, beside linear calls whose
    sums are not floating (a floating sum's limb rows, `aggfold.has_floats`: it is folded from the
    group's rows with the ordered calls instead)."""
    if linear(spec) or has_floats(spec):
        return False
    return all(
        c.kind == "linear" or (isinstance(c.func, UserAggregate) and c.func.d is not None) for c in spec.calls
    )


def _user_calls(spec: AggSpec) -> list[tuple[int, Any]]:
    return [(i, c) for i, c in enumerate(spec.calls) if isinstance(c.func, UserAggregate)]


def user_schema(spec: AggSpec) -> pl.Schema:
    """The accumulator trace's rows: the group's keys, per user call its value and count."""
    cols: list[tuple[str, pl.DataType]] = [(f"__u{i}", pl.Binary()) for i, _ in _user_calls(spec)]
    cols += [(f"__n{i}", pl.Int64()) for i, _ in _user_calls(spec)]
    return pl.Schema([*key_schema(spec).items(), *cols])


def out_schema(spec: AggSpec, accs: pl.Schema | None = None) -> pl.Schema:
    """`fold`'s rows: the kind `K`, the output's columns, and the accumulator trace's (`accs`, default
    `user_schema`)."""
    out = spec.output_schema()
    acc = accs if accs is not None else user_schema(spec)
    rest = [(c, t) for c, t in acc.items() if c not in out]
    return pl.Schema([(K, pl.Int8()), *out.items(), *rest])


def fold(spec: AggSpec, was: bool, frames: list[pl.DataFrame]) -> pl.DataFrame:
    """`cogroup` function: from the change's linear accumulators per group `frames[0]`, its rows
    `frames[1]` (the input's columns, `G` without GROUP BY, the weight), and the two traces' entries at
    those groups (`frames[2]`: linear accumulators; `frames[3]`: `user_schema`, with weights), the
    output's change and the accumulator trace's change, tagged by `K` (`out_schema`, with weights)."""
    dacc, d, lin_found, user_found = frames
    return fold_groups(spec, was, dacc, d, lin_found, user_found)


Tree = Callable[[pl.DataFrame, pl.DataFrame], tuple[dict[int, list[Any]], dict[str, pl.Series]]]


def fold_groups(
    spec: AggSpec,
    was: bool,
    dacc: pl.DataFrame,
    d: pl.DataFrame,
    lin_found: pl.DataFrame,
    user_found: pl.DataFrame,
    tree: Tree | None = None,
    accs: pl.Schema | None = None,
) -> pl.DataFrame:
    """`fold` on its frames. `tree` (for calls without an inverse, `scan_fold`): given the groups'
    keys and their accumulators after the change (`old_new`'s n, with `CNT`), the new accumulated
    value of each such call by its index (row for row with the groups) and the new values of the
    accumulator trace's further columns `accs` (default `user_schema`); a group's row is then kept while
    it has rows at all (its count), not only while a call has values."""
    accs = accs if accs is not None else user_schema(spec)
    schema = pl.Schema([*out_schema(spec, accs).items(), (WEIGHT, pl.Int64())])
    if dacc.height == 0:
        return pl.DataFrame(schema=schema)
    keys = keys_of(spec)
    o, n = old_new(spec, dacc, lin_found)
    ro, rn = results(spec, o), results(spec, n)
    groups = o.select(keys)
    kept = (
        user_found.group_by(list(accs)).agg(pl.col(WEIGHT).sum()).filter(pl.col(WEIGHT) != 0)
        if user_found.height
        else user_found.select(*accs, WEIGHT)
    )
    old = groups.join(kept, on=keys, how="left", nulls_equal=True, maintain_order="left")
    at = groups.with_row_index("__j")  # a row's group by a join: NaN keys are equal there, not in a dict
    new_cols: dict[str, pl.Series] = {}
    roots, extra = tree(groups, n) if tree is not None else ({}, {})
    for i, c in _user_calls(spec):
        ua: UserAggregate = c.func
        before = [codec.loads(b) if b is not None else None for b in old[f"__u{i}"].to_list()]
        counts = [int(m) if m is not None else 0 for m in old[f"__n{i}"].to_list()]
        after, after_n = list(before), list(counts)
        plan = (
            d.lazy()
            .filter(pl.col(str(c.arg)).is_not_null())
            .group_by([*keys, str(c.arg)])
            .agg(pl.col(WEIGHT).sum())
            .filter(pl.col(WEIGHT) != 0)
            .sort(WEIGHT, descending=True)  # inserts before deletes: d undoes what g did
            .join(at.lazy(), on=keys, how="left", nulls_equal=True, maintain_order="left")
            .select("__j", str(c.arg), WEIGHT)
        )
        ch = collect(plan, d.height + at.height)
        for j, v, w in ch.iter_rows():
            after_n[j] += w
            if i in roots:
                continue
            p = ua.power(ua.f(v), abs(w))
            if w > 0:
                after[j] = p if after[j] is None else ua.g(after[j], p)
            elif after_n[j] >= 0 and after[j] is not None:
                assert ua.d is not None
                after[j] = ua.d(after[j], p)
        for j, m in enumerate(after_n):
            if m < 0:
                group = groups.row(j) if spec.by else ()
                raise NegativeStateError(
                    f"aggregate {c.name!r}, group {group}: more values deleted than present"
                )
            if m == 0:
                after[j] = None
        if i in roots:
            after = [a if m > 0 else None for a, m in zip(roots[i], after_n, strict=True)]
        t = result_dtype(c, spec.input_schema)
        ro[c.name] = pl.Series(c.name, [ua.final(a) if a is not None else None for a in before], dtype=t)
        rn[c.name] = pl.Series(c.name, [ua.final(a) if a is not None else None for a in after], dtype=t)
        new_cols[f"__u{i}"] = pl.Series(f"__u{i}", _stored(ua, after), dtype=pl.Binary())
        new_cols[f"__n{i}"] = pl.Series(f"__n{i}", after_n, dtype=pl.Int64())
    new_cols.update(extra)
    outs = spec.output_schema()
    view = emit(spec, o, n, ro, rn, was).with_columns(
        pl.lit(0, pl.Int8).alias(K),
        *([] if spec.by else [pl.lit(0, pl.Int8).alias(G)]),
        *[pl.lit(None, t).alias(c) for c, t in accs.items() if c not in outs and c != G],
    )
    had = old[WEIGHT].is_not_null()
    counts_left = [new_cols[f"__n{i}"] > 0 for i, _ in _user_calls(spec)]
    has = pl.any_horizontal(counts_left + ([n[CNT] > 0] if tree is not None else []))
    nulls = [pl.lit(None, t).alias(c) for c, t in outs.items() if c not in accs]
    gone = old.lazy().filter(had).select(*accs, pl.lit(-1, pl.Int64).alias(WEIGHT))
    made = groups.lazy().with_columns(list(new_cols.values())).filter(has)
    made = made.select(*accs, pl.lit(1, pl.Int64).alias(WEIGHT))
    trace = pl.concat([gone, made], how="vertical").with_columns(pl.lit(1, pl.Int8).alias(K), *nulls)
    plan = pl.concat([view.lazy().select(list(schema)), trace.select(list(schema))], how="vertical")
    return collect(plan, view.height + old.height + groups.height)


def _stored(ua: UserAggregate, values: list[Any]) -> list[bytes | None]:
    """A user aggregate's accumulated values as kept in its trace (`codec.dumps`)."""
    return [stored_value(ua, a) for a in values]


def stored_value(ua: UserAggregate, value: Any) -> bytes | None:
    """A user aggregate's accumulated value as kept in a trace (`codec.dumps`; None for None)."""
    if value is None:
        return None
    try:
        return codec.dumps(value)
    except codec.CodecError as e:
        raise UnsupportedError(
            f"user aggregate {ua.name!r}: its accumulated value cannot be kept in dbspark's state ({e}); "
            "accumulate plain values (numbers, strings, DECIMALs, dates, tuples, lists, dicts)"
        ) from None
