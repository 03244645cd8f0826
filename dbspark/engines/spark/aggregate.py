"""GROUP BY aggregation on Spark: from scratch, and incrementally through the keys of a change.

The results equal the local engine's (`engines/local/aggregate.py`): COUNT/SUM/AVG/VAR/STDDEV from
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
accumulators (an abelian group: a change's accumulators are added; a bucketed trace,
`engines.spark.buckets`), seeks the old accumulators of the changed groups only, and emits old rows
with weight -1 and new ones with +1. With ordered or user aggregates it keeps the integral of its input indexed by the group keys and
recomputes the changed groups from their rows: work follows the changed groups' sizes (the local
engine's ordered trees give O(log n) per change; a Spark-side equivalent is left for later).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import polars as pl

from dbspark.algebra.zset import WEIGHT, ZSet
from dbspark.engines.spark.convert import col_list, spark_type, sql_name
from dbspark.engines.spark.convert import sql_str as _lit
from dbspark.engines.spark.median import median_sql
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


def _array_args(spec: AggSpec) -> list[str]:
    """The arguments of the ordered and user calls, each once: calls on one column share its entries."""
    out: list[str] = []
    for _, c in _array_calls(spec):
        assert c.arg is not None
        if c.arg not in out:
            out.append(c.arg)
    return out


_SCAN = ("cx", "cw", "cum", "mn", "mx", "bx", "bw", "lo", "hi", "badx", "badw")


def _fields(spec: AggSpec, arg: str) -> tuple[str, ...]:
    """The `_scan` fields the calls on `arg` need (the run being scanned, and the check, always)."""
    need = {"cx", "cw", "badx", "badw"}
    for _, c in _array_calls(spec):
        if c.arg == arg:
            need |= {"min": {"mn"}, "max": {"mx"}, "mode": {"bx", "bw"}, "median": {"cum", "lo", "hi"}}.get(
                c.func if isinstance(c.func, str) else "", set()
            )
    return tuple(f for f in _SCAN if f in need)


# ---- SQL text: each column is one expression for Spark to parse, not dozens of Column calls ------------
_q = sql_name  # a quoted column name


def _t(t: pl.DataType) -> str:
    """The SQL name of the Spark type of a Polars type."""
    return spark_type(t).simpleString()


def _repr_sql(e: str, t: pl.DataType) -> str:
    """A string expression showing a value as Python's repr does (for error messages)."""
    if t == pl.String():
        s = f"concat('\\'', {e}, '\\'')"
    elif t == pl.Boolean():
        s = f"IF({e}, 'True', 'False')"
    else:
        s = f"CAST({e} AS string)"
    return f"IF({e} IS NULL, 'None', {s})"


def _group_repr(spec: AggSpec, as_dict: bool) -> str:
    """The group's key as the local engine prints it: {'k': 1} or the tuple (1,)."""
    types = {**dict(spec.input_schema.items()), G: pl.Int8()}
    parts: list[str] = []
    if as_dict:
        for n, k in enumerate(spec.by):
            parts += [_lit(("{" if n == 0 else ", ") + f"{k!r}: "), _repr_sql(_q(k), types[k])]
        return f"concat({', '.join(parts)}, '}}')" if parts else "'{}'"
    keys = keys_of(spec)
    for n, k in enumerate(keys):
        parts += [_lit("(" if n == 0 else ", "), _repr_sql(_q(k), types[k])]
    return f"concat({', '.join(parts)}, {_lit(',)' if len(keys) == 1 else ')')})"


# ---- accumulators ------------------------------------------------------------------------------------
def _acc_sql(spec: AggSpec, w: str, s: str = "", arrays: bool = False) -> list[str]:
    """Aggregate expressions over raw rows of weight `w` (SQL): the group's row count, the accumulators
    of the linear calls (columns suffixed `s`) and, with `arrays`, the sorted (x, w) entries of the
    ordered and user calls, one array per argument."""
    out = [f"sum({w}) AS {_q(CNT + s)}"]
    for i, c in _linear_calls(spec):
        if c.arg is None:
            continue
        x = _q(c.arg)
        out.append(f"sum(IF({x} IS NOT NULL, {w}, 0)) AS {_q(f'__c{i}{s}')}")
        if _is_int(spec, c):  # exact: DECIMAL(38) sums, an overflow is an error
            xs, wd = f"CAST(CAST({x} AS bigint) AS decimal(38,0))", f"CAST({w} AS decimal(38,0))"
        elif isinstance(spec.input_schema[c.arg], pl.Decimal):
            xs, wd = x, f"CAST({w} AS decimal(20,0))"
        else:
            xs, wd = f"CAST({x} AS double)", f"CAST({w} AS double)"
        if c.func != "count":
            out.append(f"sum({xs} * {wd}) AS {_q(f'__s{i}{s}')}")
        if c.func in VAR:
            if _is_int(spec, c):
                out.append(f"sum({xs} * {xs} * {wd}) AS {_q(f'__q{i}{s}')}")
            else:
                xv = f"CAST({xs} AS double)"
                out.append(f"sum({xv} * {xv} * CAST({w} AS double)) AS {_q(f'__q{i}{s}')}")
    if arrays:
        for j, arg in enumerate(_array_args(spec)):
            x = _q(arg)
            entry = (
                f"IF({x} IS NOT NULL AND {w} != 0, named_struct('x', {x}, 'w', CAST({w} AS bigint)), NULL)"
            )
            out.append(f"array_sort(collect_list({entry})) AS {_q(f'__a{j}{s}')}")
    return out


def _aggs(exprs: list[str]) -> list[Any]:
    return [_F().expr(e) for e in exprs]


def _acc_names(spec: AggSpec) -> list[str]:
    """The linear accumulator columns (unsuffixed) of `_acc_sql`, row count first."""
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


def _finalize(spec: AggSpec, s: str) -> list[str]:
    """The linear aggregates of side `s`, as SQL columns `__r<i><s>`."""
    out = []
    for i, c in _linear_calls(spec):
        t = _t(result_dtype(c, spec.input_schema))
        if c.func == "count_star":
            e = _q(CNT + s)
        elif c.func == "count":
            e = _q(f"__c{i}{s}")
        else:
            n, sx = _q(f"__c{i}{s}"), _q(f"__s{i}{s}")
            nf = f"CAST({n} AS double)"
            if c.func == "sum" and _is_int(spec, c):  # a DECIMAL(38) sum that must fit a BIGINT
                too_big = _lit(f"DBSPARK[WeightError] {c.describe()} = ")
                fits = f"{sx} BETWEEN -9223372036854775808 AND 9223372036854775807"
                msg = f"concat({too_big}, CAST({sx} AS string), ' does not fit in a 64-bit integer')"
                e = f"IF({n} > 0, IF({fits}, {sx}, raise_error({msg})), NULL)"
            elif c.func == "sum":
                e = f"IF({n} > 0, {sx}, NULL)"
            elif c.func == "avg":
                e = f"IF({n} > 0, CAST({sx} AS double) / {nf}, NULL)"
            else:
                q = _q(f"__q{i}{s}")
                if _is_int(spec, c):  # n·Σx² - (Σx)² exactly, divided once at the end
                    m2 = f"CAST(CAST({n} AS decimal(38,0)) * {q} - {sx} * {sx} AS double) / {nf}"
                else:
                    m2 = f"{q} - {sx} * {sx} / {nf}"
                m2 = f"greatest({m2}, CAST(0.0 AS double))"
                if c.func in ("var_samp", "stddev_samp"):
                    e = f"IF({n} > 1, {m2} / ({nf} - 1), NULL)"
                else:
                    e = f"IF({n} > 0, {m2} / {nf}, NULL)"
                if str(c.func).startswith("stddev"):
                    e = f"sqrt({e})"
        out.append(f"CAST({e} AS {t}) AS {_q(f'__r{i}{s}')}")
    return out


# ---- ordered and user calls: one pass over the sorted (x, w) entries of a group ----------------------------
def _scan(arr: str, xt: str, n: str, fields: tuple[str, ...] = _SCAN) -> str:
    """A struct of the group's ordered statistics over the entries (column `arr`) sorted by x (an x
    may repeat: its count is the sum of its entries' weights): mn/mx the least/greatest x of positive
    count, bx the most frequent (ties to the least), lo/hi the x at positions (n-1)//2 and n//2 of the
    sorted multiset of `n` values, badx/badw the first x of negative count and that count. Only
    `fields` are computed."""
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

    def struct(values: dict[str, str]) -> str:
        return "named_struct(" + ", ".join(f"'{k}', {values[k]}" for k in fields) + ")"

    zero = struct(
        {
            f: (
                "CAST(0 AS bigint)"
                if f in ("cw", "cum")
                else f"CAST(NULL AS {'bigint' if f in ('bw', 'badw') else xt})"
            )
            for f in fields
        }
    )
    ends = "(a.cx IS NOT NULL AND e.x != a.cx)"
    closed = close("a")
    merge = struct(
        {
            "cx": "e.x",
            "cw": f"IF({ends} OR a.cx IS NULL, e.w, a.cw + e.w)",
            **{f: f"IF({ends}, {closed[f]}, a.{f})" for f in fields[2:]},
        }
    )
    finish = struct(
        {"cx": "a.cx", "cw": "a.cw", **{f: f"IF(a.cx IS NOT NULL, {closed[f]}, a.{f})" for f in fields[2:]}}
    )
    return f"aggregate({_q(arr)}, {zero}, (a, e) -> {merge}, a -> {finish})"


def _user_value(c: AggCall, t: pl.DataType) -> Any:
    """A Python UDF folding a group's sorted (x, w) entries with the user aggregate's (f, g, r)."""
    from dbspark.engines.spark.udf import user_fold_entries

    F = _F()
    ua = c.func
    assert isinstance(ua, UserAggregate)
    return F.udf(lambda entries: user_fold_entries(ua, entries, t), spark_type(t))


def _ordered(spec: AggSpec, s: str, incremental: bool) -> tuple[list[Any], list[tuple[str, str]]]:
    """(result columns `__r<i><s>`, [(condition, error message)] in SQL) of the ordered and user calls
    of side `s`, from the columns `__a<j><s>` (sorted entries of argument j), `__m<j><s>` (their total
    weight) and `__st<j><s>` (their `_scan`)."""
    F = _F()
    cols: list[Any] = []
    checks: list[tuple[str, str]] = []
    args = _array_args(spec)
    for i, c in _array_calls(spec):
        assert c.arg is not None
        j = args.index(c.arg)
        arr, n, st = f"__a{j}{s}", _q(f"__m{j}{s}"), _q(f"__st{j}{s}")
        xdt = spec.input_schema[c.arg]
        t = result_dtype(c, spec.input_schema)
        out = _q(f"__r{i}{s}")
        if isinstance(c.func, UserAggregate):
            col = F.col(arr)
            cols.append(
                F.when(F.size(col) > 0, _user_value(c, t)(col)).cast(spark_type(t)).alias(f"__r{i}{s}")
            )
            if incremental:
                checks.append(
                    (
                        f"{n} < 0",
                        f"concat({_lit(f'aggregate {c.name!r}, group ')}, "
                        f"{_group_repr(spec, False)}, ': more values deleted than present')",
                    )
                )
            else:
                checks.append(
                    (
                        f"{st}.badx IS NOT NULL",
                        _lit(f"aggregate {c.name!r} over a Z-set with negative weights"),
                    )
                )
            continue
        if c.func == "min":
            v = f"{st}.mn"
        elif c.func == "max":
            v = f"{st}.mx"
        elif c.func == "mode":
            v = f"{st}.bx"
        else:  # DuckDB's MEDIAN, in the type's storage (`median_sql`)
            v = median_sql(f"{st}.lo", f"{st}.hi", n, xdt)
        cols.append(F.expr(f"CAST({v} AS {_t(t)}) AS {out}"))
        if incremental:
            msg = (
                f"concat({_lit(f'aggregate {c.name!r}, group ')}, {_group_repr(spec, False)}, ': multiplicity of ', "
                f"{_repr_sql(f'{st}.badx', xdt)}, ' would become ', CAST({st}.badw AS string), "
                f"' (below zero); a delete of a value not there')"
            )
        else:
            msg = _lit(f"aggregate {c.name!r} over a Z-set with negative weights")
        checks.append((f"{st}.badx IS NOT NULL", msg))
    return cols, checks


def _results(g: Any, spec: AggSpec, sides: Sequence[str], incremental: bool) -> tuple[Any, dict[str, list]]:
    """Per group: the keys, each side's row count `__cnt<s>` and results `__r<i><s>`; and per side the
    checks of its values, [(condition, error message)] in SQL (over columns kept in the frame)."""
    F = _F()
    keys = keys_of(spec)
    args = _array_args(spec)
    kept: list[str] = []
    if args:  # per group and argument: the total weight of its entries (the n of MEDIAN), then one scan
        g = g.select(
            "*",
            *[
                F.expr(
                    f"aggregate({_q(f'__a{j}{s}')}, CAST(0 AS bigint), (a, e) -> a + e.w) "
                    f"AS {_q(f'__m{j}{s}')}"
                )
                for s in sides
                for j in range(len(args))
            ],
        )
        g = g.select(
            "*",
            *[
                F.expr(
                    _scan(f"__a{j}{s}", _t(spec.input_schema[a]), f"__m{j}{s}", _fields(spec, a))
                    + f" AS {_q(f'__st{j}{s}')}"
                )
                for s in sides
                for j, a in enumerate(args)
            ],
        )
        kept = [f"__{p}{j}{s}" for s in sides for j in range(len(args)) for p in ("a", "m", "st")]
    cols: list[Any] = []
    checks: dict[str, list] = {}
    for s in sides:
        ordered, checks[s] = _ordered(spec, s, incremental)
        cols += [F.col(CNT + s), *_aggs(_finalize(spec, s)), *ordered]
    return g.select(*col_list(keys), *cols, *kept), checks


def _checked(flag: str, checks: Sequence[tuple[str, str]]) -> str:
    """`flag` (SQL), unless a check fails: then evaluating it raises that check's NegativeStateError.

    The checks sit where the optimizer cannot drop them (the first argument of a COALESCE whose value
    is used), not in a condition it could simplify away."""
    if not checks:
        return flag
    tag = _lit(f"DBSPARK[{NegativeStateError.__name__}] ")
    case = " ".join(f"WHEN {cond} THEN raise_error(concat({tag}, {msg}))" for cond, msg in checks)
    return f"coalesce(CAST(CASE {case} END AS boolean), {flag})"


def _emit(r: Any, spec: AggSpec, rows: Sequence[tuple[str, int, str]]) -> Any:
    """The output rows: for each (side, weight, SQL condition), the side's result row where the
    condition holds (one pass: an array of candidate rows per group, filtered and exploded)."""
    F = _F()
    names = [c.name for c in spec.calls]
    structs = []
    for s, w, cond in rows:
        fields = [f"{_lit(k)}, {_q(k)}" for k in spec.by]
        fields += [f"{_lit(c.name)}, {_q(f'__r{i}{s}')}" for i, c in enumerate(spec.calls)]
        structs.append(
            f"named_struct({', '.join(fields)}, {_lit(WEIGHT)}, CAST({w} AS bigint), '__e', {cond})"
        )
    out = r.select(F.expr(f"explode(filter(array({', '.join(structs)}), x -> x.__e)) AS __row"))
    return out.select(*[F.col("__row")[n].alias(n) for n in [*spec.by, *names, WEIGHT]])


def _dummy_group(df: Any, spec: AggSpec, weights: Sequence[str]) -> Any:
    """df plus a row of weight 0 in the global group, so that a global aggregate has a row even when
    there are no rows (SQL)."""
    F = _F()
    row = df.sparkSession.range(1).select(
        *[
            (
                F.lit(0).cast("byte") if n == G else F.lit(0).cast(t) if n in weights else F.lit(None).cast(t)
            ).alias(n)
            for n, t in ((f.name, f.dataType) for f in df.schema.fields)
        ]
    )
    return df.unionByName(row)


def aggregate_full(kernel: SparkKernel, z: SparkZSet, spec: AggSpec) -> Any:
    """The aggregate of a whole Z-set (the non-incremental `stream_aggregate`); `z` need not be
    consolidated. Groups of negative count, and values of negative count, are errors."""
    df = with_key(z.frame, spec)
    if not spec.by:
        df = _dummy_group(df, spec, [WEIGHT])
    g = df.groupBy(*col_list(keys_of(spec))).agg(*_aggs(_acc_sql(spec, _q(WEIGHT), "", arrays=True)))
    r, checks = _results(g, spec, [""], incremental=False)
    cnt = _q(CNT)
    group = [(f"{cnt} < 0", _lit("aggregate over a Z-set with a group of negative count"))] if spec.by else []
    keep = f"{cnt} > 0" if spec.by else "true"
    return _emit(r, spec, [("", 1, _checked(keep, [*group, *checks[""]]))])


class AggregateState:
    """The state of an incremental GROUP BY with ordered or user calls on Spark: the input's integral
    indexed by the group keys (a spec of linear calls only folds above the kernel,
    `operators/aggregate.py`)."""

    def __init__(self, kernel: SparkKernel, spec: AggSpec) -> None:
        from dbspark.engines.spark.aggfold import ordered_ok

        self.kernel, self.spec = kernel, spec
        # a change held in the driver steps there: MIN / MAX / MEDIAN over the sought rows
        self.in_driver = ordered_ok(spec)
        keys = keys_of(spec)
        rows_schema = pl.Schema([*spec.input_schema.items(), *([] if spec.by else [(G, pl.Int8())])])
        self.trace = kernel.bucket_trace(rows_schema, tuple(keys), pl.Schema([(WEIGHT, pl.Int64())]))
        self.started = False

    def step(self, delta: SparkZSet, undo: list) -> SparkZSet:
        k, spec = self.kernel, self.spec
        out_schema = spec.output_schema()
        if delta.known_empty and (self.started or spec.by):
            return k.empty(out_schema)
        was = self.started
        prev = self.trace.snapshot()
        if self.in_driver and not delta.known_empty and delta._df is None:
            local = self._ordered_in_driver(delta, prev, was, undo)
            if local is not None:
                return local
        self.started = True
        undo.append(lambda: setattr(self, "started", was))
        lineage = 1
        if delta.known_empty:  # the first step of a global aggregate: its row exists without input
            dz = k.spark.createDataFrame([], self._schema())
        else:
            d = with_key(delta.frame, spec).select(*col_list([*self.trace.schema, WEIGHT]))
            dzz = k._z(
                self.trace.schema, d.select(*col_list(self.trace.layout.frame_schema)), lineage=delta.lineage
            )
            dz, lineage = dzz.frame, dzz.lineage
            self.trace.add(dzz, undo)
        out = self._step(prev, dz, was, lineage)
        # the change's rows and the old ones sought at its groups
        return k._z(out_schema, out, consolidated=True, lineage=2 * lineage)

    def _ordered_in_driver(self, delta: SparkZSet, prev: Any, was: bool, undo: list) -> SparkZSet | None:
        """MIN / MAX / MEDIAN (`aggfold.ordered_step`) of a change held in the driver: the changed groups'
        rows sought in the input's integral, the values recomputed there; a group too large to read
        ranked over its runs instead (`big_groups`). None when the trace has a change on Spark pending."""
        from dbspark.engines.spark import aggfold, big_groups
        from dbspark.engines.spark.values import SparkZSet

        spec, keys = self.spec, keys_of(self.spec)
        assert delta.local is not None
        d = delta.local.df
        if not spec.by:
            d = d.with_columns(pl.lit(0, pl.Int8).alias(G))
        d = d.select(*self.trace.schema, WEIGHT)
        pend = prev.pending_local()
        if pend is None:
            return None
        groups, small = d.select(keys).unique(), d
        split = big_groups.ranked(spec, keys, groups, d, prev, pend, was)
        if split is not None:  # the big groups ranked over their runs; the others read
            big, groups = split
            small = d.join(groups, on=keys, how="semi", nulls_equal=True)
        if split is not None and groups.height == 0:
            out = split[0]
        else:
            found = prev.seek_local(groups, True)
            assert found is not None
            out = aggfold.ordered_step(spec, small, found, keys, was)
            if split is not None:
                out = ZSet(pl.concat([split[0].df, out.df], how="vertical"), True)
        self.started = True
        undo.append(lambda: setattr(self, "started", was))
        self.trace.add(SparkZSet(self.kernel.spark, self.trace.schema, local=ZSet(d)), undo)
        return SparkZSet(self.kernel.spark, spec.output_schema(), local=out, consolidated=True)

    def _schema(self) -> Any:
        from dbspark.engines.spark.convert import spark_schema

        return spark_schema(self.trace.layout.frame_schema, weight=False)

    def _step(self, prev: Any, dz: Any, was: bool, lineage: int) -> Any:
        """-old and +new rows of the groups of the change `dz` (the input's rows)."""
        F, spec, keys = _F(), self.spec, keys_of(self.spec)
        k = self.kernel
        old = None
        if prev.batches:  # the old state of the changed groups only, read by their keys
            probe = k._z(self.trace.schema, dz, lineage=lineage)
            old = k.seek(prev, probe, [(c, c) for c in keys], exact=True).frame
        # rows with their weight before (__wo) and after (__wn) the change
        data = list(self.trace.schema)
        rows = dz.select(*col_list(data), F.lit(0).cast("long").alias("__wo"), F.col(WEIGHT).alias("__wn"))
        if old is not None:
            rows = old.select(
                *col_list(data), F.col(WEIGHT).alias("__wo"), F.col(WEIGHT).alias("__wn")
            ).unionByName(rows)
        if not spec.by:
            rows = _dummy_group(rows, spec, ["__wo", "__wn"])
        g = rows.groupBy(*col_list(keys)).agg(
            *_aggs(
                _acc_sql(spec, _q("__wo"), OLD, arrays=True) + _acc_sql(spec, _q("__wn"), NEW, arrays=True)
            )
        )
        r, checks = _results(g, spec, [OLD, NEW], incremental=True)
        n_old, n_new = _q(CNT + OLD), _q(CNT + NEW)
        bad_group = (
            f"concat('aggregate: group ', {_group_repr(spec, True)}, ' would have ', "
            f"CAST({n_new} AS string), ' rows; a delete of rows that are not there')"
        )
        glob = not spec.by
        e_old = f"({n_old} > 0)" if not glob else ("true" if was else "false")
        e_new = f"({n_new} > 0)" if not glob else "true"
        same = " AND ".join(
            f"({_q(f'__r{i}{OLD}')} <=> {_q(f'__r{i}{NEW}')})" for i in range(len(spec.calls))
        )
        cancel = f"({e_old} AND {e_new} AND {same})"
        new_flag = _checked(f"({e_new} AND NOT {cancel})", [(f"{n_new} < 0", bad_group), *checks[NEW]])
        return _emit(r, spec, [(OLD, -1, f"({e_old} AND NOT {cancel})"), (NEW, 1, new_flag)])

    def checkpoint(self) -> Any:
        return (self.trace.to_state(), self.started)

    def restore(self, saved: Any) -> None:
        self.trace.restore(saved[0])
        self.started = saved[1]
