"""GROUP BY aggregation on Spark: from scratch, and incrementally through the keys of a change.

The results equal the local engine's (`engines.local.aggregate`): COUNT/SUM/AVG/VAR/STDDEV from
per-group accumulators (integer sums exact in DECIMAL(38), overflow an error), MIN/MAX/MEDIAN/MODE over
the group's values with their weights, user aggregates folded by Spark's Python workers.

Every form is one shuffle: a single GROUP BY over the rows (or accumulators) of the groups concerned
computes, per group, the linear accumulators and, per ordered or user call, the sorted array of the
group's (value, weight) entries, which one pass (a higher-order `aggregate`) turns into MIN, MAX,
MODE, MEDIAN and the check that no value has a negative count. An incremental step computes the old
and the new contents of each changed group side by side ("sides": each row carries its weight before
and after the change), and emits -old and +new in the same pass, leaving out groups whose row did not
change, so its output is consolidated without another shuffle.

Incrementally (`dbsp-paper.txt` §7.2, §7.4), a GROUP BY of linear aggregates keeps a trace of
accumulators (an abelian group: a change's accumulators are added, `engines.spark.trace`), looks up
the old accumulators of the changed groups only, and emits old rows with weight -1 and new ones with
+1. With ordered or user aggregates it keeps the integral of its input indexed by the group keys and
recomputes the changed groups from their rows: work follows the changed groups' sizes (the local
engine's ordered trees give O(log n) per change; a Spark-side equivalent is left for later).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import polars as pl

from dbspark.algebra.zset import WEIGHT
from dbspark.engines.spark.convert import spark_type
from dbspark.engines.spark.exprs import py_repr as _py_repr
from dbspark.engines.spark.exprs import py_tuple
from dbspark.errors import NegativeStateError
from dbspark.ir.aggregate import AggCall, AggSpec, UserAggregate, result_dtype

if TYPE_CHECKING:
    from dbspark.engines.spark.kernel import SparkKernel
    from dbspark.engines.spark.values import SparkZSet

G = "__g"  # the constant group key of an aggregate without GROUP BY
VAR = ("var_samp", "var_pop", "stddev_samp", "stddev_pop")
CNT = "__cnt"  # a group's row count (the accumulator of COUNT(*))
OLD, NEW = "_o", "_n"  # the sides of an incremental step: a group before and after the change


def _F() -> Any:
    from pyspark.sql import functions as F

    return F


def keys_of(spec: AggSpec) -> list[str]:
    return list(spec.by) if spec.by else [G]


def with_key(df: Any, spec: AggSpec) -> Any:
    return df if spec.by else df.withColumn(G, _F().lit(0).cast("byte"))


def _is_int(spec: AggSpec, c: AggCall) -> bool:
    t = spec.input_schema[c.arg] if c.arg else None
    return t is not None and (t.is_integer() or t == pl.Boolean())


def _linear_calls(spec: AggSpec) -> list[tuple[int, AggCall]]:
    return [(i, c) for i, c in enumerate(spec.calls) if c.kind == "linear"]


def _array_calls(spec: AggSpec) -> list[tuple[int, AggCall]]:
    return [(i, c) for i, c in enumerate(spec.calls) if c.kind != "linear"]


# ---- accumulators ------------------------------------------------------------------------------------
def _acc_aggs(spec: AggSpec, w: Any, s: str = "", arrays: bool = False) -> list[Any]:
    """Aggregate expressions over raw rows of weight `w`: the group's row count, the accumulators of
    the linear calls (columns suffixed `s`) and, with `arrays`, the sorted (x, w) entries of the others."""
    F = _F()
    out = [F.sum(w).alias(CNT + s)]
    for i, c in _linear_calls(spec):
        if c.arg is None:
            continue
        x = F.col(c.arg)
        out.append(F.sum(F.when(x.isNotNull(), w).otherwise(0)).alias(f"__c{i}{s}"))
        if _is_int(spec, c):
            xs = x.cast("long").cast("decimal(38,0)")
            wd = w.cast("decimal(38,0)")
        elif isinstance(spec.input_schema[c.arg], pl.Decimal):
            xs, wd = x, w.cast("decimal(20,0)")
        else:
            xs, wd = x.cast("double"), w.cast("double")
        if c.func != "count":
            out.append(F.sum(xs * wd).alias(f"__s{i}{s}"))
        if c.func in VAR:
            xv = xs if _is_int(spec, c) else xs.cast("double")
            out.append(F.sum(xv * xv * (wd if _is_int(spec, c) else w.cast("double"))).alias(f"__q{i}{s}"))
    if arrays:
        for i, c in _array_calls(spec):
            assert c.arg is not None
            x = F.col(c.arg)
            entry = F.when(x.isNotNull() & (w != 0), F.struct(x.alias("x"), w.cast("long").alias("w")))
            out.append(F.array_sort(F.collect_list(entry)).alias(f"__a{i}{s}"))
    return out


def _acc_names(spec: AggSpec) -> list[str]:
    """The linear accumulator columns (unsuffixed) of `_acc_aggs`, row count first."""
    out = [CNT]
    for i, c in _linear_calls(spec):
        if c.arg is None:
            continue
        out.append(f"__c{i}")
        if c.func != "count":
            out.append(f"__s{i}")
        if c.func in VAR:
            out.append(f"__q{i}")
    return out


def _finalize(spec: AggSpec, s: str) -> list[Any]:
    """The linear aggregates of side `s`, as columns `__r<i><s>`."""
    F = _F()
    out = []
    for i, c in _linear_calls(spec):
        t = spark_type(result_dtype(c, spec.input_schema))
        if c.func == "count_star":
            e = F.col(CNT + s)
        elif c.func == "count":
            e = F.col(f"__c{i}{s}")
        else:
            n, sx = F.col(f"__c{i}{s}"), F.col(f"__s{i}{s}")
            nf = n.cast("double")
            if c.func == "sum":
                e = F.when(n > 0, sx)
            elif c.func == "avg":
                e = F.when(n > 0, sx.cast("double") / nf)
            else:
                q = F.col(f"__q{i}{s}")
                if _is_int(spec, c):  # n·Σx² - (Σx)² exactly, divided once at the end
                    m2 = (n.cast("decimal(38,0)") * q - sx * sx).cast("double") / nf
                else:
                    m2 = q - sx * sx / nf
                m2 = F.greatest(m2, F.lit(0.0))
                e = F.when(n > 1, m2 / (nf - 1)) if c.func in ("var_samp", "stddev_samp") else F.when(n > 0, m2 / nf)
                if str(c.func).startswith("stddev"):
                    e = F.sqrt(e)
        out.append(e.cast(t).alias(f"__r{i}{s}"))
    return out


# ---- ordered and user calls: one pass over the sorted (x, w) entries of a group ----------------------------
_SCAN = ("cx", "cw", "cum", "mn", "mx", "bx", "bw", "lo", "hi", "badx", "badw")


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _scan(arr: str, xt: Any, n: str) -> Any:
    """A struct of the group's ordered statistics over the entries (column `arr`) sorted by x (an x
    may repeat: its count is the sum of its entries' weights): mn/mx the least/greatest x of positive
    count, bx the most frequent (ties to the least), lo/hi the x at positions (n-1)//2 and n//2 of the
    sorted multiset of `n` values, badx/badw the first x of negative count and that count.

    Built as SQL text: one expression for Spark to parse, instead of hundreds of Column calls."""
    x = xt.simpleString()
    klo, khi = f"floor(({_q(n)} - 1) / 2)", f"floor({_q(n)} / 2)"

    def close(a: str) -> dict[str, str]:
        """The fields after the run of a.cx (count a.cw) ends."""
        cx, cw = f"{a}.cx", f"{a}.cw"
        pos = f"({cw} > 0)"
        cum = f"({a}.cum + {cw})"
        better = f"({pos} AND ({a}.bw IS NULL OR {cw} > {a}.bw))"
        first_bad = f"({a}.badx IS NULL AND {cw} < 0)"
        return {
            "cum": cum,
            "mn": f"coalesce({a}.mn, IF({pos}, {cx}, NULL))",
            "mx": f"IF({pos}, {cx}, {a}.mx)",
            "bx": f"IF({better}, {cx}, {a}.bx)",
            "bw": f"IF({better}, {cw}, {a}.bw)",
            "lo": f"coalesce({a}.lo, IF({pos} AND {cum} > {klo}, {cx}, NULL))",
            "hi": f"coalesce({a}.hi, IF({pos} AND {cum} > {khi}, {cx}, NULL))",
            "badx": f"IF({first_bad}, {cx}, {a}.badx)",
            "badw": f"IF({first_bad}, {cw}, {a}.badw)",
        }

    def struct(fields: dict[str, str]) -> str:
        return "named_struct(" + ", ".join(f"'{k}', {fields[k]}" for k in _SCAN) + ")"

    zero = struct({f: ("CAST(0 AS bigint)" if f in ("cw", "cum") else
                       f"CAST(NULL AS {'bigint' if f in ('bw', 'badw') else x})") for f in _SCAN})
    ends = "(a.cx IS NOT NULL AND e.x != a.cx)"
    closed = close("a")
    merge = struct({"cx": "e.x", "cw": f"IF({ends} OR a.cx IS NULL, e.w, a.cw + e.w)",
                    **{f: f"IF({ends}, {closed[f]}, a.{f})" for f in _SCAN[2:]}})
    fin = close("a")
    finish = struct({"cx": "a.cx", "cw": "a.cw", **{f: f"IF(a.cx IS NOT NULL, {fin[f]}, a.{f})" for f in _SCAN[2:]}})
    return _F().expr(f"aggregate({_q(arr)}, {zero}, (a, e) -> {merge}, a -> {finish})")


def _group_repr(spec: AggSpec, as_dict: bool) -> Any:
    """The group's key as the local engine prints it: {'k': 1} or the tuple (1,)."""
    F = _F()
    types = {**dict(spec.input_schema.items()), G: pl.Int8()}
    if as_dict:
        parts: list[Any] = [F.lit("{")]
        for n, k in enumerate(spec.by):
            parts += [F.lit(("" if n == 0 else ", ") + f"{k!r}: "), _py_repr(F.col(k), types[k])]
        return F.concat(*parts, F.lit("}"))
    keys = keys_of(spec)
    return py_tuple([F.col(k) for k in keys], [types[k] for k in keys])


def _user_value(c: AggCall, t: pl.DataType) -> Any:
    """A Python UDF folding a group's sorted (x, w) entries with the user aggregate's (f, g, r)."""
    from dbspark.engines.spark.udf import user_fold_entries

    F = _F()
    ua = c.func
    assert isinstance(ua, UserAggregate)
    return F.udf(lambda entries: user_fold_entries(ua, entries, t), spark_type(t))


def _ordered(spec: AggSpec, s: str, incremental: bool) -> tuple[list[Any], list[tuple[Any, Any]]]:
    """(result columns `__r<i><s>`, [(condition, error message)]) of the ordered and user calls of side
    `s`, from the columns `__a<i><s>` (sorted entries), `__m<i><s>` (their total weight) and
    `__st<i><s>` (their `_scan`)."""
    F = _F()
    cols, checks = [], []
    for i, c in _array_calls(spec):
        assert c.arg is not None
        arr, n, st = F.col(f"__a{i}{s}"), F.col(f"__m{i}{s}"), F.col(f"__st{i}{s}")
        xdt = spec.input_schema[c.arg]
        t = result_dtype(c, spec.input_schema)
        if isinstance(c.func, UserAggregate):
            cols.append(F.when(F.size(arr) > 0, _user_value(c, t)(arr)).cast(spark_type(t)).alias(f"__r{i}{s}"))
            if incremental:
                checks.append((n < 0, F.concat(F.lit(f"aggregate {c.name!r}, group "), _group_repr(spec, False),
                                                  F.lit(": more values deleted than present"))))
            else:
                checks.append((st["badx"].isNotNull(), F.lit(f"aggregate {c.name!r} over a Z-set with negative weights")))
            continue
        if c.func == "min":
            v = st["mn"]
        elif c.func == "max":
            v = st["mx"]
        elif c.func == "mode":
            v = st["bx"]
        elif xdt.is_numeric():
            v = (st["lo"].cast("double") + st["hi"].cast("double")) / 2
        else:
            v = st["lo"]
        cols.append(v.cast(spark_type(t)).alias(f"__r{i}{s}"))
        if incremental:
            msg = F.concat(F.lit(f"aggregate {c.name!r}, group "), _group_repr(spec, False),
                           F.lit(": multiplicity of "), _py_repr(st["badx"], xdt), F.lit(" would become "),
                           st["badw"].cast("string"), F.lit(" (below zero); a delete of a value not there"))
        else:
            msg = F.lit(f"aggregate {c.name!r} over a Z-set with negative weights")
        checks.append((st["badx"].isNotNull(), msg))
    return cols, checks


def _results(g: Any, spec: AggSpec, sides: Sequence[str], incremental: bool) -> tuple[Any, dict[str, list]]:
    """Per group: the keys, each side's row count `__cnt<s>` and results `__r<i><s>`; and per side the
    checks of its values, [(condition, error message)] (over columns kept in the frame)."""
    F = _F()
    keys = keys_of(spec)
    arrays = _array_calls(spec)
    kept: list[str] = []
    if arrays:  # per group: the total weight of each call's entries (the n of MEDIAN), then one scan
        g = g.select("*", *[F.expr(f"aggregate({_q(f'__a{i}{s}')}, CAST(0 AS bigint), (a, e) -> a + e.w)")
                           .alias(f"__m{i}{s}") for s in sides for i, _ in arrays])
        g = g.select("*", *[_scan(f"__a{i}{s}", spark_type(spec.input_schema[c.arg]), f"__m{i}{s}")
                           .alias(f"__st{i}{s}") for s in sides for i, c in arrays])
        kept = [f"__{p}{i}{s}" for s in sides for i, _ in arrays for p in ("a", "m", "st")]
    cols: list[Any] = []
    checks: dict[str, list] = {}
    for s in sides:
        ordered, checks[s] = _ordered(spec, s, incremental)
        cols += [F.col(CNT + s), *_finalize(spec, s), *ordered]
    return g.select(*keys, *cols, *kept), checks


def _checked(flag: Any, checks: Sequence[tuple[Any, Any]]) -> Any:
    """`flag`, unless a check fails: then evaluating it raises that check's NegativeStateError.

    The checks sit where the optimizer cannot drop them (the first argument of a COALESCE whose value
    is used), not in a condition it could simplify away."""
    from dbspark.engines.spark.kernel import fail

    F = _F()
    if not checks:
        return flag
    case = None
    for cond, msg in checks:
        case = F.when(cond, fail(NegativeStateError, msg)) if case is None else case.when(
            cond, fail(NegativeStateError, msg))
    return F.coalesce(case.cast("boolean"), flag)


def _emit(r: Any, spec: AggSpec, rows: Sequence[tuple[str, int, Any]]) -> Any:
    """The output rows: for each (side, weight, condition), the side's result row where the condition
    holds (one pass: an array of candidate rows per group, filtered and exploded)."""
    F = _F()
    names = [c.name for c in spec.calls]
    structs = []
    for s, w, cond in rows:
        fields = [F.col(k).alias(k) for k in spec.by]
        fields += [F.col(f"__r{i}{s}").alias(c.name) for i, c in enumerate(spec.calls)]
        structs.append(F.struct(*fields, F.lit(w).cast("long").alias(WEIGHT), cond.alias("__e")))
    out = r.select(F.explode(F.filter(F.array(*structs), lambda x: x["__e"])).alias("__row"))
    return out.select(*[F.col("__row")[n].alias(n) for n in [*spec.by, *names, WEIGHT]])


def _dummy_group(df: Any, spec: AggSpec, weights: Sequence[str]) -> Any:
    """df plus a row of weight 0 in the global group, so that a global aggregate has a row even when
    there are no rows (SQL)."""
    F = _F()
    row = df.sparkSession.range(1).select(*[
        (F.lit(0).cast("byte") if n == G else F.lit(0).cast(t) if n in weights else F.lit(None).cast(t)).alias(n)
        for n, t in ((f.name, f.dataType) for f in df.schema.fields)])
    return df.unionByName(row)


def aggregate_full(kernel: SparkKernel, z: SparkZSet, spec: AggSpec) -> Any:
    """The aggregate of a whole Z-set (the non-incremental `stream_aggregate`); `z` need not be
    consolidated. Groups of negative count, and values of negative count, are errors."""
    F = _F()
    df = with_key(z.frame, spec)
    if not spec.by:
        df = _dummy_group(df, spec, [WEIGHT])
    g = df.groupBy(*keys_of(spec)).agg(*_acc_aggs(spec, F.col(WEIGHT), "", arrays=True))
    r, checks = _results(g, spec, [""], incremental=False)
    cnt = F.col(CNT)
    group = [(cnt < 0, F.lit("aggregate over a Z-set with a group of negative count"))] if spec.by else []
    keep = (cnt > 0) if spec.by else F.lit(True)
    return _emit(r, spec, [("", 1, _checked(keep, [*group, *checks[""]]))])


class AggregateState:
    """The state of an incremental GROUP BY on Spark: an accumulator trace, or the input's integral."""

    def __init__(self, kernel: SparkKernel, spec: AggSpec) -> None:
        from dbspark.engines.spark.trace import SparkTrace

        self.kernel, self.spec = kernel, spec
        self.linear = all(c.kind == "linear" for c in spec.calls)
        keys = keys_of(spec)
        rows_schema = pl.Schema([*spec.input_schema.items(), *([] if spec.by else [(G, pl.Int8())])])
        if self.linear:
            probe = with_key(kernel.empty(spec.input_schema).frame, spec)
            probe = probe.groupBy(*keys).agg(*_acc_aggs(spec, _F().col(WEIGHT)))
            sums = tuple(_acc_names(spec))
            types = {f.name: f.dataType for f in probe.schema.fields if f.name in sums}
            self.trace = SparkTrace(kernel, pl.Schema([(k, rows_schema[k]) for k in keys]), tuple(keys), sums, types)
        else:
            self.trace = SparkTrace(kernel, rows_schema, tuple(keys))
        self.started = False

    def step(self, delta: SparkZSet, undo: list) -> SparkZSet:
        k, spec = self.kernel, self.spec
        out_schema = spec.output_schema()
        if delta.known_empty and (self.started or spec.by):
            return k.empty(out_schema)
        was = self.started
        self.started = True
        undo.append(lambda: setattr(self, "started", was))
        prev = self.trace.snapshot()
        schema = self._schema()
        if delta.known_empty:  # the first step of a global aggregate: its row exists without input
            dz = k.spark.createDataFrame([], schema)
        else:
            d = with_key(delta.frame, spec)
            if self.linear:
                d = d.groupBy(*keys_of(spec)).agg(*_acc_aggs(spec, _F().col(WEIGHT)))
                path = self.trace.append(d, undo, consolidated=True)
            else:
                path = self.trace.append(d.select(*self.trace.schema, WEIGHT), undo,
                                         consolidated=delta.consolidated)
            dz = k.spark.read.schema(schema).parquet(path)
        out = self._step(prev, dz, was)
        return k._z(out_schema, out, consolidated=True)

    def _schema(self) -> Any:
        return self.trace.snapshot().frame(self.kernel.spark, self.trace.sum_types).schema

    def _step(self, prev: Any, dz: Any, was: bool) -> Any:
        """-old and +new rows of the groups of the change `dz` (rows, or accumulators)."""
        from dbspark.engines.spark.kernel import ns_join

        F, spec, keys = _F(), self.spec, keys_of(self.spec)
        sums = list(self.trace.sums)
        old = prev.frame(self.kernel.spark, self.trace.sum_types) if prev.batches else None
        if old is not None and spec.by:  # the old state of the changed groups only
            old = ns_join(old, F.broadcast(dz.select(*keys)), keys, "left_semi")
        if self.linear:  # rows are accumulators: the old side sums the trace's, the new one adds the change's
            flag = "__old"
            rows = dz.withColumn(flag, F.lit(False))
            if old is not None:
                rows = old.withColumn(flag, F.lit(True)).unionByName(rows)
            if not spec.by:
                rows = _dummy_group(rows, spec, [*sums, flag])
            aggs = []
            for c in sums:
                zero = F.lit(0).cast(self.trace.sum_types[c])
                aggs += [F.sum(F.when(F.col(flag), F.col(c)).otherwise(zero)).alias(c + OLD),
                         F.sum(F.col(c)).alias(c + NEW)]
            g = rows.groupBy(*keys).agg(*aggs)
        else:  # rows with their weight before (__wo) and after (__wn) the change
            data = list(self.trace.schema)
            rows = dz.select(*data, F.lit(0).cast("long").alias("__wo"), F.col(WEIGHT).alias("__wn"))
            if old is not None:
                rows = old.select(*data, F.col(WEIGHT).alias("__wo"), F.col(WEIGHT).alias("__wn")).unionByName(rows)
            if not spec.by:
                rows = _dummy_group(rows, spec, ["__wo", "__wn"])
            g = rows.groupBy(*keys).agg(*_acc_aggs(spec, F.col("__wo"), OLD, arrays=True),
                                        *_acc_aggs(spec, F.col("__wn"), NEW, arrays=True))
        r, checks = _results(g, spec, [OLD, NEW], incremental=True)
        n_old, n_new = F.col(CNT + OLD), F.col(CNT + NEW)
        bad_group = F.concat(F.lit("aggregate: group "), _group_repr(spec, True), F.lit(" would have "),
                             n_new.cast("string"), F.lit(" rows; a delete of rows that are not there"))
        glob = not spec.by
        e_old = (n_old > 0) if not glob else F.lit(was)
        e_new = (n_new > 0) if not glob else F.lit(True)
        same = F.lit(True)
        for i, _ in enumerate(spec.calls):
            same = same & F.col(f"__r{i}{OLD}").eqNullSafe(F.col(f"__r{i}{NEW}"))
        cancel = e_old & e_new & same
        new_flag = _checked(e_new & ~cancel, [(n_new < 0, bad_group), *checks[NEW]])
        return _emit(r, spec, [(OLD, -1, e_old & ~cancel), (NEW, 1, new_flag)])

    def checkpoint(self) -> Any:
        return (self.trace.to_state(), self.started)

    def restore(self, saved: Any) -> None:
        self.trace.restore(saved[0])
        self.started = saved[1]
