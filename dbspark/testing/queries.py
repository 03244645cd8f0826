"""Random query circuits and change streams for oracle tests (hypothesis strategies).

The correctness statement of DBSP (`dbsp-paper.txt` §3, Def 3.1 and Algorithm 4.8): for a circuit Q
built from lifted operators, Q^Δ = D ∘ Q ∘ I, so the integral of what `Q.incrementalize()` outputs on
a change stream equals Q evaluated on the integrated inputs, at every step. This module generates the
two sides of that statement:

* `queries()`: a random circuit Q over 1-3 inputs with generated schemas, built from filter
  (comparisons, AND/OR/NOT, IS NULL), map (projection with arithmetic), plus/minus of streams of equal
  schema, stream_join, stream_product (on small inputs only), stream_distinct, stream_semijoin,
  stream_antijoin and stream_aggregate (COUNT/SUM/AVG/MIN/MAX/MEDIAN/MODE/VAR/STDDEV, with or without
  GROUP BY). Every circuit is valid by construction: the generator consults each stream's schema.
  Aggregates only read streams that stay positive (bags), as SQL aggregates do.
* `change_streams(tables)`: per step and input, inserts of fresh rows, duplicates, deletions of rows
  that are present (so the integrated inputs stay bags; sets stay sets), empty steps, and large
  weights (10**9) when the query is linear.
* `run_against_oracle(q, changes)`: runs Q^Δ on the changes and, at every step, a fresh runtime of Q on
  the full current contents, comparing `view(out)` with Q's output (floats with a tolerance).

Every generated object prints as Python code that rebuilds it, so a failing example is a reproducer.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl
from hypothesis import strategies as st

import dbspark
from dbspark.ir.expr import Binary, Cast, Col, Expr, Lit, Unary, col, lit

# ---- value domains: small, so that joins match, groups repeat and deletions hit ----------------------
DOMAINS: dict[str, tuple[str, list[Any]]] = {
    "k": ("int64", [0, 1, 2, 3]),
    "a": ("int64", [-3, -1, 0, 1, 2, 5]),
    "b": ("int32", [0, 1, 2, 3]),
    "s": ("str", ["p", "q", "r", ""]),
    "f": ("float64", [-1.5, -0.5, 0.0, 0.25, 1.0, 2.5]),  # dyadic: sums are exact in any order
    "t": ("bool", [True, False]),
}
OPTIONAL_COLUMNS = ("a", "b", "s", "f", "t")
LARGE_WEIGHT = 10**9

# hypothesis favours the first entries of a sampled_from: the operators most worth testing come first
FAMILIES = (
    "aggregate",
    "join",
    "distinct",
    "filter",
    "map",
    "antijoin",
    "semijoin",
    "minus",
    "plus",
    "product",
)
LINEAR_FAMILIES = frozenset({"filter", "map", "plus", "minus"})
NUMERIC_AGGS = ("sum", "avg", "var_samp", "var_pop", "stddev_samp", "stddev_pop")
ORDERED_AGGS = ("min", "max", "median", "mode")


# ---- schemas and rows --------------------------------------------------------------------------------
@dataclass(frozen=True)
class TableSpec:
    """One input: its name, columns (name -> type name) and kind ('zset', 'bag' or 'set')."""

    name: str
    columns: tuple[tuple[str, str], ...]
    kind: str = "bag"

    @property
    def schema(self) -> dict[str, str]:
        return dict(self.columns)

    def __repr__(self) -> str:
        return f"c.input({self.name!r}, {self.schema!r}, kind={self.kind!r})"


@st.composite
def table_specs(draw: st.DrawFn, name: str, kinds: Sequence[str] = ("bag", "zset", "set")) -> TableSpec:
    """A schema: the int key `k` (domain 0..3) and 1-3 of a (int64), b (int32), s (str), f (float64), t (bool)."""
    extra = draw(st.lists(st.sampled_from(OPTIONAL_COLUMNS), min_size=1, max_size=3, unique=True))
    cols = (("k", DOMAINS["k"][0]), *((c, DOMAINS[c][0]) for c in extra))
    return TableSpec(name, cols, draw(st.sampled_from(kinds)))


def values(column: str, null_probability: bool = True) -> st.SearchStrategy[Any]:
    """Values of a generated column (NULL sometimes)."""
    base = st.sampled_from(DOMAINS[column][1])
    return st.one_of(st.none(), base, base, base) if null_probability else base


def rows(table: TableSpec) -> st.SearchStrategy[tuple]:
    return st.tuples(*(values(c) for c, _ in table.columns))


# ---- change streams ------------------------------------------------------------------------------------
Step = dict[str, list[tuple[tuple, int]]]


@dataclass
class ChangeStream:
    """Per step, per input: the (row, weight) changes pushed in that step (a row may repeat)."""

    tables: tuple[TableSpec, ...]
    steps: list[Step]

    def contents(self) -> list[dict[str, Counter]]:
        """The integrated inputs after each step: {input: Counter(row -> weight)} (zero weights dropped)."""
        cur: dict[str, Counter] = {t.name: Counter() for t in self.tables}
        out = []
        for step in self.steps:
            for name, changes in step.items():
                for row, w in changes:
                    cur[name][row] += w
                    if cur[name][row] == 0:
                        del cur[name][row]
            out.append({n: Counter(c) for n, c in cur.items()})
        return out

    def __repr__(self) -> str:
        lines = []
        for i, step in enumerate(self.steps):
            parts = [f"{n}: {ch!r}" for n, ch in step.items() if ch]
            lines.append(f"  step {i}: " + ("; ".join(parts) if parts else "(empty)"))
        return "ChangeStream(\n" + "\n".join(lines) + "\n)"


@st.composite
def change_streams(
    draw: st.DrawFn,
    tables: Sequence[TableSpec],
    *,
    max_steps: int = 6,
    max_changes: int = 5,
    large_weights: bool = False,
    row_strategies: Mapping[str, st.SearchStrategy[tuple]] | None = None,
) -> ChangeStream:
    """A change stream over `tables` whose integrated inputs stay bags (sets for kind='set').

    Deletions pick rows present at that point of the step; weights are 1-3 (or LARGE_WEIGHT if
    `large_weights`), a delete removes 1..all copies; some steps are empty for some or all inputs.
    Fresh rows come from `row_strategies[table name]` if given, else from the column domains."""
    n_steps = draw(st.integers(min(2, max_steps), max_steps))
    cur: dict[str, Counter] = {t.name: Counter() for t in tables}
    steps: list[Step] = []
    for _ in range(n_steps):
        step: Step = {}
        empty_step = draw(st.integers(0, 5)) == 0
        for t in tables:
            changes: list[tuple[tuple, int]] = []
            state = cur[t.name]
            n = 0 if empty_step else draw(st.integers(0, max_changes))
            for _ in range(n):
                present = [r for r, w in state.items() if w > 0]
                op = draw(st.sampled_from(("insert", "insert", "duplicate", "delete", "delete")))
                if op == "delete" and present:
                    row = draw(st.sampled_from(present))
                    w = -draw(st.integers(1, state[row]))
                elif op == "duplicate" and present and t.kind != "set":
                    row = draw(st.sampled_from(present))
                    w = draw(st.integers(1, 2))
                else:
                    row = draw(
                        row_strategies[t.name] if row_strategies and t.name in row_strategies else rows(t)
                    )
                    if t.kind == "set":
                        if state[row] > 0:
                            continue
                        w = 1
                    elif large_weights and draw(st.booleans()):
                        w = LARGE_WEIGHT
                    else:
                        w = draw(st.integers(1, 3))
                state[row] += w
                if state[row] == 0:
                    del state[row]
                changes.append((row, w))
            step[t.name] = changes
        steps.append(step)
    return ChangeStream(tuple(tables), steps)


# ---- expressions as code ---------------------------------------------------------------------------------
_OPS = {
    "add": "+",
    "sub": "-",
    "mul": "*",
    "truediv": "/",
    "floordiv": "//",
    "mod": "%",
    "lt": "<",
    "le": "<=",
    "gt": ">",
    "ge": ">=",
    "and": "&",
    "or": "|",
}


def expr_code(e: Expr) -> str:
    """Python source that rebuilds the expression with `col` and `lit`."""
    if isinstance(e, Col):
        return f"col({e.name!r})"
    if isinstance(e, Lit):
        return f"lit({e.value!r})"
    if isinstance(e, Binary):
        if e.op in ("eq", "ne"):
            return f"{expr_code(e.left)}.{e.op}({expr_code(e.right)})"
        return f"({expr_code(e.left)} {_OPS[e.op]} {expr_code(e.right)})"
    if isinstance(e, Unary):
        if e.op == "neg":
            return f"(-{expr_code(e.arg)})"
        if e.op == "not":
            return f"(~{expr_code(e.arg)})"
        return f"{expr_code(e.arg)}.{e.op}()"
    if isinstance(e, Cast):
        return f"Cast({expr_code(e.arg)}, pl.{e.to!r})"
    return repr(e)


def _is_int(t: pl.DataType) -> bool:
    return t.is_integer()


def _is_num(t: pl.DataType) -> bool:
    return t.is_integer() or t.is_float()


def _literal_for(t: pl.DataType) -> st.SearchStrategy[Any]:
    if t.is_integer():
        return st.integers(-2, 4)
    if t.is_float():
        return st.sampled_from([-1.0, -0.5, 0.0, 0.25, 1.0, 2.0])
    if t == pl.String():
        return st.sampled_from(["", "p", "q", "r", "z"])
    if t == pl.Boolean():
        return st.booleans()
    return st.none()


@st.composite
def predicates(draw: st.DrawFn, schema: pl.Schema, depth: int = 2) -> Expr:
    """A boolean predicate over `schema`: comparisons, IS [NOT] NULL, NOT, AND, OR (SQL three-valued)."""
    if depth > 0 and draw(st.integers(0, 2)) == 0:
        left = draw(predicates(schema, depth - 1))
        right = draw(predicates(schema, depth - 1))
        e = (left & right) if draw(st.booleans()) else (left | right)
        return ~e if draw(st.integers(0, 4)) == 0 else e
    name = draw(st.sampled_from(list(schema)))
    t = schema[name]
    c = col(name)
    kind = draw(st.integers(0, 5))
    if kind == 0:
        return c.is_null()
    if kind == 1:
        return c.is_not_null()
    if t == pl.Boolean():
        return draw(st.sampled_from([c, ~c, c.eq(lit(True)), c.ne(lit(False))]))
    others = [
        n for n, u in schema.items() if n != name and ((_is_num(t) and _is_num(u)) or (t == u == pl.String()))
    ]
    rhs: Expr = col(draw(st.sampled_from(others))) if kind == 2 and others else lit(draw(_literal_for(t)))
    op = draw(st.sampled_from(["eq", "ne", "lt", "le", "gt", "ge"]))
    return Binary(op, c, rhs)


@st.composite
def derived_columns(draw: st.DrawFn, schema: pl.Schema) -> Expr:
    """An arithmetic (or boolean) expression over `schema` for a map."""
    nums = [n for n, t in schema.items() if _is_num(t)]
    ints = [n for n, t in schema.items() if _is_int(t)]
    if not nums or draw(st.integers(0, 5)) == 0:
        return draw(predicates(schema, 1))
    a = col(draw(st.sampled_from(nums)))
    choice = draw(st.integers(0, 7))
    if choice == 0:
        return a + lit(draw(st.integers(-2, 3)))
    if choice == 1:
        return a * col(draw(st.sampled_from(nums)))
    if choice == 2:
        return a - col(draw(st.sampled_from(nums)))
    if choice == 3:
        return -a
    if choice == 4:
        return a.abs()
    if choice == 5:
        return a / lit(draw(st.sampled_from([2, 4])))  # powers of two: exact
    if choice == 6 and ints:
        i = col(draw(st.sampled_from(ints)))
        return (i // lit(2)) if draw(st.booleans()) else (i % lit(3))
    return a * lit(draw(st.integers(-2, 3))) + lit(1)


# ---- query circuits ---------------------------------------------------------------------------------------
@dataclass
class _Node:
    var: str
    stream: dbspark.Stream
    positive: bool  # every value is a bag (needed by aggregates)
    size: int  # a rough bound on the rows per step, to keep products and joins small


@dataclass
class GeneratedQuery:
    """A random circuit Q (non-incremental, lifted operators) with the code that builds it."""

    circuit: dbspark.Circuit
    tables: tuple[TableSpec, ...]
    outputs: tuple[str, ...]
    families: frozenset[str]
    code: list[str] = field(default_factory=list)

    @property
    def linear(self) -> bool:
        """Built from linear operators only (filter, map, plus, minus): any weights are fine."""
        return self.families <= LINEAR_FAMILIES

    def __repr__(self) -> str:
        head = ["c = dbspark.Circuit()"]
        head += [f"s{i} = {t!r}" for i, t in enumerate(self.tables)]
        return "GeneratedQuery(\n    " + "\n    ".join(head + self.code) + "\n)"


class _Builder:
    def __init__(self, tables: Sequence[TableSpec]) -> None:
        self.c = dbspark.Circuit()
        self.tables = tuple(tables)
        self.nodes: list[_Node] = []
        self.code: list[str] = []
        self.families: set[str] = set()
        self.fresh = 0
        for i, t in enumerate(tables):
            s = self.c.input(t.name, t.schema, kind=t.kind)
            self.nodes.append(_Node(f"s{i}", s, True, 12))

    def name(self, prefix: str) -> str:
        self.fresh += 1
        return f"{prefix}{self.fresh}"

    def add(self, stream: dbspark.Stream, code: str, positive: bool, size: int, family: str) -> _Node:
        var = f"s{len(self.nodes)}"
        self.code.append(f"{var} = {code}")
        self.families.add(family)
        n = _Node(var, stream, positive, size)
        self.nodes.append(n)
        return n


def _common_columns(a: pl.Schema, b: pl.Schema) -> list[str]:
    return [n for n, t in a.items() if n in b and b[n] == t]


def _key_pair(draw: st.DrawFn, a: pl.Schema, b: pl.Schema) -> tuple[str, Any] | None:
    """Join keys: on=<shared int column> or (left_on, right_on) over int columns; None if there is none."""
    shared = [n for n, t in a.items() if _is_int(t) and n in b and _is_int(b[n])]
    li = [n for n, t in a.items() if _is_int(t)]
    ri = [n for n, t in b.items() if _is_int(t)]
    if shared and draw(st.integers(0, 2)) > 0:
        return ("on", draw(st.sampled_from(shared)))
    if li and ri:
        return ("lr", (draw(st.sampled_from(li)), draw(st.sampled_from(ri))))
    return None


def _join_args(kp: tuple[str, Any]) -> tuple[dict[str, Any], str]:
    if kp[0] == "on":
        return {"on": kp[1]}, f"on={kp[1]!r}"
    lo, ro = kp[1]
    return {"left_on": lo, "right_on": ro}, f"left_on={lo!r}, right_on={ro!r}"


def _agg_calls(draw: st.DrawFn, b: _Builder, schema: pl.Schema, by: list[str]) -> dict[str, Any]:
    calls: dict[str, Any] = {}
    for _ in range(draw(st.integers(1, 3))):
        func = draw(st.sampled_from(("count", "count", *NUMERIC_AGGS, *ORDERED_AGGS, *ORDERED_AGGS)))
        if func == "count":
            arg = draw(st.sampled_from([None, *schema]))
        elif func in NUMERIC_AGGS:
            nums = [n for n, t in schema.items() if _is_num(t) or t == pl.Boolean()]
            if not nums:
                func, arg = "count", None
            else:
                arg = draw(st.sampled_from(nums))
        else:
            arg = draw(st.sampled_from(list(schema)))
        calls[b.name("g")] = func if arg is None else (func, arg)
    return calls


def _apply(draw: st.DrawFn, b: _Builder, family: str, max_size: int) -> bool:
    """Add one operator of `family` on streams of the pool; False if no valid instance exists."""
    pick = st.sampled_from(b.nodes)
    x = draw(pick)
    sx = x.stream.schema
    if family == "filter":
        p = draw(predicates(sx))
        b.add(x.stream.filter(p), f"{x.var}.filter({expr_code(p)})", x.positive, x.size, family)
        return True
    if family == "map":
        keep = draw(st.lists(st.sampled_from(list(sx)), unique=True, max_size=len(sx)))
        derived = {
            b.name("m"): draw(derived_columns(sx)) for _ in range(draw(st.integers(0 if keep else 1, 2)))
        }
        s = x.stream.map(*keep, **derived)
        args = [repr(k) for k in keep] + [f"{n}={expr_code(e)}" for n, e in derived.items()]
        b.add(s, f"{x.var}.map({', '.join(args)})", x.positive, x.size, family)
        return True
    if family in ("plus", "minus"):
        y = draw(pick)
        common = _common_columns(sx, y.stream.schema)
        if y is x or not common:
            p = draw(predicates(sx))
            other, ocode = x.stream.filter(p), f"{x.var}.filter({expr_code(p)})"
            lhs, lcode = x.stream, x.var
            # x - filter(x) stays a bag when x is one
            positive = x.positive
        else:
            cols = draw(st.lists(st.sampled_from(common), min_size=1, unique=True))
            lhs, lcode = x.stream.map(*cols), f"{x.var}.map({', '.join(map(repr, cols))})"
            other = y.stream.map(*cols)
            ocode = f"{y.var}.map({', '.join(map(repr, cols))})"
            positive = x.positive and y.positive and family == "plus"
        if family == "plus":
            b.add(lhs + other, f"{lcode} + {ocode}", positive, x.size + y.size, family)
        else:
            b.add(lhs - other, f"{lcode} - {ocode}", positive, x.size + y.size, family)
        return True
    if family == "distinct":
        b.add(x.stream.stream_distinct(), f"{x.var}.stream_distinct()", True, x.size, family)
        return True
    if family == "product":
        y = draw(pick)
        if x.size * y.size > max_size or len(sx) + len(y.stream.schema) > 8:
            return False
        b.add(
            x.stream.stream_product(y.stream),
            f"{x.var}.stream_product({y.var})",
            x.positive and y.positive,
            x.size * y.size,
            family,
        )
        return True
    if family in ("join", "semijoin", "antijoin"):
        y = draw(pick)
        kp = _key_pair(draw, sx, y.stream.schema)
        if kp is None:
            return False
        kwargs, kcode = _join_args(kp)
        if family == "join":
            if x.size * y.size > max_size or len(sx) + len(y.stream.schema) > 9:
                return False
            s = x.stream.stream_join(y.stream, **kwargs)
            b.add(
                s,
                f"{x.var}.stream_join({y.var}, {kcode})",
                x.positive and y.positive,
                x.size * y.size,
                family,
            )
        else:
            s = getattr(x.stream, f"stream_{family}")(y.stream, **kwargs)
            b.add(s, f"{x.var}.stream_{family}({y.var}, {kcode})", x.positive, x.size, family)
        return True
    if family == "aggregate":
        bags = [n for n in b.nodes if n.positive]
        x = draw(st.sampled_from(bags))
        sx = x.stream.schema
        by = draw(st.lists(st.sampled_from(list(sx)), unique=True, max_size=min(2, len(sx))))
        calls = _agg_calls(draw, b, sx, by)
        s = x.stream.stream_aggregate(by=by or None, **calls)
        args = ([f"by={by!r}"] if by else []) + [f"{n}={a!r}" for n, a in calls.items()]
        b.add(s, f"{x.var}.stream_aggregate({', '.join(args)})", True, x.size if by else 1, family)
        return True
    raise ValueError(f"unknown operator family {family!r}")


@st.composite
def queries(
    draw: st.DrawFn,
    *,
    families: Sequence[str] = FAMILIES,
    max_inputs: int = 3,
    max_ops: int = 4,
    max_size: int = 150,
    kinds: Sequence[str] = ("bag", "zset", "set"),
) -> GeneratedQuery:
    """A random, valid circuit Q over 1..max_inputs generated inputs with 1..max_ops operators.

    The last operator is output 'out'; sometimes an earlier stream is also output 'aux' (outputs stop
    the distinct consolidation of Prop 4.5/4.6, so both shapes are exercised)."""
    n_in = draw(st.integers(1, max_inputs))
    tables = [draw(table_specs(f"t{i}", kinds)) for i in range(n_in)]
    b = _Builder(tables)
    n_ops = draw(st.integers(1, max_ops))
    done = 0
    attempts = 0
    while done < n_ops and attempts < 4 * n_ops:
        attempts += 1
        if _apply(draw, b, draw(st.sampled_from(list(families))), max_size):
            done += 1
    if done == 0:
        _apply(draw, b, "filter", max_size)
    root = b.nodes[-1]
    b.c.output("out", root.stream)
    b.code.append(f"c.output('out', {root.var})")
    outputs = ["out"]
    derived = b.nodes[len(tables) : -1]
    if derived and draw(st.integers(0, 3)) == 0:
        aux = draw(st.sampled_from(derived))
        b.c.output("aux", aux.stream)
        b.code.append(f"c.output('aux', {aux.var})")
        outputs.append("aux")
    return GeneratedQuery(b.c, b.tables, tuple(outputs), frozenset(b.families), b.code)


@st.composite
def queries_with_changes(draw: st.DrawFn, **query_options: Any) -> tuple[GeneratedQuery, ChangeStream]:
    """A query and a change stream over its inputs (large weights only for linear queries)."""
    q = draw(queries(**query_options))
    ch = draw(change_streams(q.tables, large_weights=q.linear))
    return q, ch


# ---- comparing Z-sets with a float tolerance ------------------------------------------------------------
def _close(a: Any, b: Any, rel: float, abs_: float) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=rel, abs_tol=abs_)
    return type(a) is type(b) and a == b


def _exact_part(row: tuple) -> tuple:
    """The row with its floats masked, each value tagged with its type (True is not 1)."""
    return tuple((type(v).__name__, None if isinstance(v, float) else v) for v in row)


def zset_diff(
    actual: dict[tuple, int], expected: dict[tuple, int], rel: float = 1e-9, abs_tol: float = 1e-9
) -> tuple[list, list]:
    """(unmatched actual entries, unmatched expected entries), matching rows whose non-float values and
    weights are equal and whose floats are close."""
    buckets: dict[tuple, list[tuple[tuple, int]]] = {}
    for row, w in actual.items():
        buckets.setdefault((_exact_part(row), w), []).append((row, w))
    missing = []
    for row, w in expected.items():
        cands = buckets.get((_exact_part(row), w), [])
        for i, (r2, _) in enumerate(cands):
            if len(r2) == len(row) and all(_close(x, y, rel, abs_tol) for x, y in zip(r2, row, strict=True)):
                del cands[i]
                break
        else:
            missing.append((row, w))
    extra = [e for cands in buckets.values() for e in cands]
    return extra, missing


def assert_zsets_close(
    actual: dbspark.ZSet, expected: dbspark.ZSet, context: str = "", rel: float = 1e-9, abs_tol: float = 1e-9
) -> None:
    """Equal as Z-sets (same columns; rows consolidated), floats compared with math.isclose."""
    if list(actual.schema.items()) != list(expected.schema.items()):
        raise AssertionError(f"{context}: schema {actual.schema} != expected {expected.schema}")
    extra, missing = zset_diff(actual.to_dict(), expected.to_dict(), rel, abs_tol)
    if extra or missing:
        raise AssertionError(
            f"{context}: Z-sets differ\n  unexpected (row, weight): {sorted(extra, key=repr)}\n"
            f"  missing (row, weight):    {sorted(missing, key=repr)}\n"
            f"  actual:   {actual!r}\n  expected: {expected!r}"
        )


# ---- the oracle: Q^Δ on changes vs Q on the integrated inputs ---------------------------------------------
def _push_all(
    r: dbspark.Runtime, name: str, entries: Sequence[tuple[tuple, int]], split: bool = False
) -> None:
    if not entries:
        return
    if split and len(entries) > 1:  # several pushes in one step accumulate
        half = len(entries) // 2
        _push_all(r, name, entries[:half])
        _push_all(r, name, entries[half:])
        return
    r.push(name, [row for row, _ in entries], [w for _, w in entries])


def run_against_oracle(
    circuit: dbspark.Circuit,
    outputs: Sequence[str],
    changes: ChangeStream,
    compare: Callable[[dbspark.ZSet, dbspark.ZSet, str], None] = assert_zsets_close,
    incremental: dbspark.Circuit | None = None,
    engine: Any = "local",
    oracle_engine: Any = None,
) -> dict[str, list[dbspark.ZSet]]:
    """At every step: view(out) of Q^Δ (fed `changes`) equals Q's output on the integrated inputs.

    Q is evaluated by a fresh runtime per step, pushed the full current contents as that step's value
    (`snapshots=True`: the input kinds constrain each step's value). Q^Δ runs on `engine` (a name, a
    kernel or a kernel factory, as `Circuit.run` takes), Q on `oracle_engine` (default: the same
    engine). Returns {output: [Q^Δ's view after each step]}, as local Z-sets."""
    inc_circuit = incremental if incremental is not None else circuit.incrementalize()
    ref_engine = engine if oracle_engine is None else oracle_engine
    inc = inc_circuit.run(engine)
    seen: dict[str, list[dbspark.ZSet]] = {o: [] for o in outputs}
    for t, (step, contents) in enumerate(zip(changes.steps, changes.contents(), strict=True)):
        for name, entries in step.items():
            _push_all(inc, name, entries, split=t % 2 == 1)
        inc.step()
        ref = circuit.run(ref_engine, snapshots=True)
        for name, cur in contents.items():
            _push_all(ref, name, list(cur.items()))
        expected = ref.step()
        for o in outputs:
            view = _local(inc, inc.view(o))
            compare(view, _local(ref, expected[o]), f"step {t}, output {o!r}")
            seen[o].append(view)
    return seen


def _local(r: dbspark.Runtime, z: Any) -> dbspark.ZSet:
    """A runtime's value as a local Z-set (the spark engine's values are collected once)."""
    to_local = getattr(r.kernel, "to_local", None)
    return to_local(z) if to_local is not None else z


__all__ = [
    "DOMAINS",
    "FAMILIES",
    "LARGE_WEIGHT",
    "ChangeStream",
    "GeneratedQuery",
    "TableSpec",
    "assert_zsets_close",
    "change_streams",
    "derived_columns",
    "expr_code",
    "predicates",
    "queries",
    "queries_with_changes",
    "rows",
    "run_against_oracle",
    "table_specs",
    "values",
    "zset_diff",
]
