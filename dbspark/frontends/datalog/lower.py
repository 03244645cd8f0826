"""Lowering a checked, stratified program into circuit streams (`dbsp-paper.txt` §5-§6).

Each rule becomes a relational expression over streams whose columns are the rule's variables:
positive atoms are selections (constants, repeated variables) and projections of their relation,
joined on shared variables (`stream_join`; a product is a join on a constant key); comparisons are
filters, `v = expr` a map, `!q(...)` an anti-join on the bound variables (§7.5), an aggregate a GROUP BY
on its group variables joined back (count and sum of an empty group are 0, as in Soufflé: each group
asked about adds a 0 to its sum), a groupby literal (`incremental-aggregation-monotonic-programs.txt`
§3.1) a GROUP BY joined like an atom. The head is a map to the relation's columns. A relation is the `stream_distinct` of the sum of its rules (set
semantics). A recursive component becomes one nested scope `circuit.recursive(body, imports)`, all
its mutually recursive relations together; the pipeline's incrementalization turns every scope into
the doubly-incremental circuit of §6, so an input change updates all derived relations.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import polars as pl

from dbspark.circuit.stream import Stream
from dbspark.errors import UnsupportedError
from dbspark.frontends.datalog import autoinc, records
from dbspark.frontends.datalog.ast import (
    Aggregate,
    Atom,
    BinOp,
    Call,
    Const,
    Constraint,
    GroupBy,
    Literal,
    Neg,
    Negation,
    Rule,
    Term,
    Var,
    literal_vars,
    term_vars,
)
from dbspark.frontends.datalog.check import DTYPES, Relation, group_vars, outside_vars, plan
from dbspark.frontends.datalog.functors import Functors
from dbspark.frontends.datalog.stratify import Component
from dbspark.frontends.datalog.types import FUNCTOR_TYPES, check_types
from dbspark.ir.expr import Binary, Case, Cast, Col, Expr, Func, Unary, col, lit
from dbspark.ir.order import SortKey
from dbspark.operators.checks import fail
from dbspark.operators.multijoin import connected, is_cyclic
from dbspark.operators.topk import StreamTopK

AGG_FUNCS = {"count": "count", "sum": "sum", "min": "min", "max": "max", "mean": "avg"}
Env = dict[str, Stream]


# how a rule body's atoms are joined: "auto" (the leapfrog join for cyclic bodies of three or more atoms,
# binary joins for the others), "leapfrog" (every body of two or more connected atoms), "binary"
JOIN_PLANS = ("auto", "leapfrog", "binary", "sensitivity", "indexed")


def _and(conds: list[Expr]) -> Expr:
    out = conds[0]
    for c in conds[1:]:
        out = out & c
    return out


class RuleLowering:
    """Lowers one rule against `env` (relation name -> stream with the relation's columns)."""

    def __init__(
        self,
        rule: Rule,
        rels: dict[str, Relation],
        env: Env,
        unit: Callable[[], Stream],
        recursive: frozenset[str] = frozenset(),
        joins: str = "binary",
    ) -> None:
        self.rule = rule
        self.joins = joins  # JOIN_PLANS: how the body's leading atoms are joined
        self.rels = rels
        self.env = env
        self.unit = unit
        # the relations of the rule's component when it recurses through aggregation: a sum over them
        # must sum non-negative values (`_nonnegative`)
        self.recursive = recursive
        self.types = check_types(rule, rels)
        self.functors = Functors(f"rule {rule} ({rule.pos})")
        self.cols: dict[str, str] = {}
        self.n = itertools.count()
        self.rank = ""  # the column of the bindings' numbers, when the head has autoinc()

    def col_of(self, v: str) -> str:
        if v not in self.cols:
            self.cols[v] = f"v{len(self.cols)}"
        return self.cols[v]

    def tmp(self, what: str) -> str:
        return f"{what}{next(self.n)}"

    # ---- expressions
    def expr(self, t: Term) -> Expr:
        if isinstance(t, Var):
            return col(self.col_of(t.name))
        if isinstance(t, Const):
            return lit(t.value)
        if isinstance(t, Neg):
            return Unary("neg", self.expr(t.arg))
        if isinstance(t, Call) and t.name == autoinc.AUTOINC:
            k, n = autoinc.place(t)
            return col(self.rank) * lit(n) + lit(k) if n > 1 else col(self.rank)
        if isinstance(t, Call) and records.is_record_term(t):
            return records.construct(t, [self.expr(a) for a in t.args], [self._type(a) for a in t.args])
        if isinstance(t, Call):
            types = [self._type(a) for a in t.args]
            return self.functors.lower(t, [self.expr(a) for a in t.args], types)
        assert isinstance(t, BinOp)
        a, b = self.expr(t.left), self.expr(t.right)
        if t.op in ("/", "%"):
            return self.functors.divide(t.op, a, b, self._type(t) == "float")
        op = {"+": "add", "-": "sub", "*": "mul"}[t.op]
        return Binary(op, a, b)

    def generate(self, cur: Stream, e: Call, column: str) -> Stream:
        """`column = range(lo, hi[, step])`: each row once per value (the step is 1 upward, -1
        downward when not given, as Soufflé's)."""
        lo, hi, *rest = (self.expr(a) for a in e.args)
        step = rest[0] if rest else Case(((lo <= hi, lit(1)),), lit(-1))
        a, b, k = self.tmp("lo"), self.tmp("hi"), self.tmp("step")
        return cur.map(*cur.columns, (a, lo), (b, hi), (k, step)).ranges(a, b, k, column)

    def _type(self, t: Term) -> str | None:
        """The Datalog type of a term's value (None for an integer literal or an unbound term)."""
        if isinstance(t, Var):
            return self.types.get(t.name)
        if isinstance(t, Const):
            return None if t.type == "number" else t.type
        if isinstance(t, Neg):
            return self._type(t.arg)
        if isinstance(t, BinOp):
            return "float" if "float" in (self._type(t.left), self._type(t.right)) else self._type(t.left)
        if isinstance(t, Call) and records.is_record_term(t):
            return t.type or None
        if isinstance(t, Call):
            if t.name == "as":
                return t.type
            if t.name.startswith("@"):
                return t.type.split(":")[0]
            result = FUNCTOR_TYPES[t.name][1]
            if result != "same":
                return result
            ts = [self._type(a) for a in t.args]
            return next((x for x in ts if x is not None), None)
        return None

    def _cmp(self, c: Constraint) -> Expr:
        a, b = self.expr(c.left), self.expr(c.right)
        return Binary({"=": "eq", "!=": "ne", "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}[c.op], a, b)

    # ---- atoms
    def atom(self, a: Atom) -> Stream:
        """The atom's relation filtered by its constants and repeated variables, one column per variable."""
        s = self.env[a.pred]
        rel_cols = s.columns
        conds: list[Expr] = []
        first: dict[str, str] = {}
        for i, t in enumerate(a.args):
            c = rel_cols[i]
            if isinstance(t, Var):
                if t.name in first:
                    conds.append(col(c).eq(col(first[t.name])))
                else:
                    first[t.name] = c
            elif isinstance(t, Const):
                conds.append(col(c).eq(lit(t.value)))
        if conds:
            s = s.filter(_and(conds))
        items: list[tuple[str, Expr]] = []
        for v, c in first.items():
            e: Expr = Col(c)
            dt = s.schema[c]
            if dt.is_integer() and dt != pl.Int64():
                e = Cast(e, pl.Int64())
            elif dt.is_float() and dt != pl.Float64():
                e = Cast(e, pl.Float64())
            items.append((self.col_of(v), e))
        if not items:
            items = [(self.tmp("u"), lit(0))]
        return s.map(*items)

    def join(self, cur: Stream | None, s: Stream) -> Stream:
        if cur is None:
            return s
        shared = [c for c in s.columns if c in cur.schema]
        if shared:
            return cur.stream_join(s, on=shared)
        # a product, as a join on a constant key (recursive scopes support joins, not products)
        j = self.tmp("j")
        both = cur.map(*cur.columns, (j, lit(0))).stream_join(s.map(*s.columns, (j, lit(0))), on=j)
        return both.map(*cur.columns, *s.columns)

    # ---- bodies
    def body(self, body: tuple[Literal, ...], start: Stream | None, bound: set[str]) -> Stream:
        cur = start
        steps = plan(body, bound, self.rule)
        if start is None:
            cur, steps = self.multiway(steps)
        for step, lit_ in steps:
            if step == "atom":
                assert isinstance(lit_, Atom)
                cur = self.join(cur, self.atom(lit_))
            elif step == "groupby":
                assert isinstance(lit_, GroupBy)
                cur = self.join(cur, self.groupby(lit_))
            else:
                if cur is None:
                    cur = self.unit().map((self.tmp("u"), lit(0)))
                cur = self.other(step, lit_, cur)
        if cur is None:
            cur = self.unit().map((self.tmp("u"), lit(0)))
        return cur

    def multiway(self, steps: list[tuple[str, Literal]]) -> tuple[Stream | None, list[tuple[str, Literal]]]:
        """The body's leading atoms joined at once by the leapfrog join (`stream_multijoin`), when the
        plan says so (`JOIN_PLANS`): "auto" for three or more atoms whose variables form a cyclic
        hypergraph, "leapfrog" for any two or more connected atoms, "sensitivity" as "auto" with the join
        maintained by sensitivity indices (`operators/maintained_join.py`), "indexed" as "auto" with the
        delta join over indexed tries (`columnar/indexed_delta.py`); else (None, steps) as they were."""
        n = 0
        while n < len(steps) and steps[n][0] == "atom":
            n += 1
        auto = self.joins in ("auto", "sensitivity", "indexed")
        if self.joins == "binary" or n < 2 or (auto and n < 3):
            return None, steps
        atoms = [a for _, a in steps[:n] if isinstance(a, Atom)]
        # the columns `atom` gives each (its variables; one without any connects nothing)
        names = [[self.col_of(t.name) for t in a.args if isinstance(t, Var)] for a in atoms]
        if not connected(names) or (auto and not is_cyclic(names)):
            return None, steps
        streams = [self.atom(a) for a in atoms]
        if self.joins != "sensitivity":
            maintenance = "indexed" if self.joins == "indexed" else "delta"
            return streams[0].stream_multijoin(*streams[1:], maintenance=maintenance), steps[n:]
        kept = self.kept(atoms, steps[n:])
        return streams[0].stream_multijoin(*streams[1:], maintenance="sensitivity", project=kept), steps[n:]

    def kept(self, atoms: list[Atom], rest: list[tuple[str, Literal]]) -> list[str] | None:
        """The columns of the joined atoms' variables that the rest of the rule reads (its later literals
        and its head), for short-circuit evaluation (`lftj-incremental-maintenance.txt` §2.2.1): a
        relation is a set (the distinct of its rules, or its best rows), so a binding of those needs
        one completion, not their count. None where the rule reads every variable, none, or numbers its
        bindings (autoinc)."""
        if autoinc.in_head(self.rule):
            return None
        used = set().union(*(term_vars(a) for a in self.rule.head.args), *(literal_vars(x) for _, x in rest))
        mine = list(dict.fromkeys(t.name for a in atoms for t in a.args if isinstance(t, Var)))
        kept = [self.col_of(v) for v in mine if v in used]
        return kept if 0 < len(kept) < len(mine) else None

    def other(self, step: str, lit_: Literal, cur: Stream) -> Stream:
        if step == "filter":
            assert isinstance(lit_, Constraint)
            return cur.filter(self._cmp(lit_))
        if step == "assign":
            assert isinstance(lit_, Constraint)
            free = lit_.vars() - {v for v, c in self.cols.items() if c in cur.schema}
            target, e = (
                (lit_.left, lit_.right)
                if isinstance(lit_.left, Var) and lit_.left.name in free
                else (lit_.right, lit_.left)
            )
            assert isinstance(target, Var)
            if isinstance(e, Call) and e.name == "range":  # a generator: a row per value
                return self.generate(cur, e, self.col_of(target.name))
            return cur.map(*cur.columns, (self.col_of(target.name), self.expr(e)))
        if step == "unpack":
            assert isinstance(lit_, Constraint)
            bound = self.bound(cur)
            pat, value = (
                (lit_.left, lit_.right)
                if records.is_record_term(lit_.left) and term_vars(lit_.right) <= bound
                else (lit_.right, lit_.left)
            )
            assert isinstance(pat, Call)
            v = self.tmp("rec")
            keep = cur.columns
            cur = self.match(cur.map(*keep, (v, self.expr(value))), pat, v)
            return cur.map(*[c for c in cur.columns if c in keep or c in self.cols.values()])
        if step == "negation":
            assert isinstance(lit_, Negation)
            neg = self.atom(lit_.atom)
            keys = [c for c in neg.columns if c in cur.schema]
            if not keys:
                k = neg.columns[0]
                return cur.map(*cur.columns, (k, lit(0))).stream_antijoin(neg, on=k).map(*cur.columns)
            return cur.stream_antijoin(neg, on=keys)
        assert isinstance(lit_, Aggregate)
        return self.aggregate(lit_, cur)

    def bound(self, cur: Stream) -> set[str]:
        return {v for v, c in self.cols.items() if c in cur.schema}

    def match(self, cur: Stream, pat: Call, column: str) -> Stream:
        """The rows whose `column` (a record's or ADT's encoding) matches the pattern `pat`: of its
        shape, each field read (`records.field_steps`) and bound to the pattern's variable there,
        matched against a nested pattern, or compared with a bound value."""
        cur = cur.filter(records.is_shape(col(column), pat))
        if not pat.args:
            return cur
        rest = self.tmp("rest")
        cur = cur.map(*cur.columns, (rest, records.after_prefix(col(column), pat)))
        for arg, ft in zip(pat.args, records.field_types(pat.type, pat), strict=True):
            w, f = self.tmp("w"), self.tmp("f")
            first, second = records.field_steps(rest, w, f)
            cur = cur.map(*cur.columns, *first)
            cur = cur.map(*[c for c in cur.columns if c not in (rest, w)], *second)
            value = records.typed(col(f), ft)
            bound = self.bound(cur)
            if isinstance(arg, Var) and arg.name not in bound:
                cur = cur.map(*cur.columns, (self.col_of(arg.name), value))
            elif records.is_record_term(arg) and not term_vars(arg) <= bound:
                assert isinstance(arg, Call)
                cur = self.match(cur, arg, f)
            else:
                cur = cur.filter(value.eq(self.expr(arg)))
        return cur

    def _nonnegative(self, e: Expr, reads: set[str], func: str) -> Expr:
        """`e`, the value a sum adds, raising a DataError where it is negative if the sum reads its own
        component recursive through aggregation: a sum is monotonic (it only grows as its group
        grows) only over non-negative values (`docs/recursive-aggregation.md`)."""
        if func != "sum" or not reads & self.recursive:
            return e
        msg = fail(
            "DataError",
            f"rule {self.rule} ({self.rule.pos}): sum of ",
            Func("__repr", (e,)),
            ", a negative value, in a recursion through aggregation (a sum there must only grow: its "
            "values must be >= 0)",
        )
        return Case(((e < 0, msg),), e)

    def _agg_value(
        self, s: Stream, keys: list[str], func: str, e: Term | None, var: str, reads: set[str]
    ) -> Stream:
        """GROUP BY `keys` of `s` computing func(e) into the column of `var`, cast to its Datalog type."""
        if e is not None:
            s = s.map(*keys, ("a", self._nonnegative(self.expr(e), reads, func)))
        spec: Any = "count" if func == "count" else (AGG_FUNCS[func], "a")
        agg = s.stream_aggregate(by=keys, r=spec)
        t = self.types.get(var)
        out: Expr = Cast(col("r"), DTYPES[t]) if t is not None and t in DTYPES else col("r")
        return agg.map(*keys, (self.col_of(var), out))

    def groupby(self, g: GroupBy) -> Stream:
        if g.func not in AGG_FUNCS:
            raise UnsupportedError(
                f"unknown aggregate {g.func!r} in {g} ({g.pos}); known: {sorted(AGG_FUNCS)}"
            )
        s = self.atom(g.atom)
        k = self.tmp("k")
        keys = [self.col_of(v) for v in g.keys]
        s = s.map(*s.columns, (k, lit(0)))  # a constant group key: no row for an empty relation
        reads = {g.atom.pred}
        return self._agg_value(s, [*keys, k], g.func, g.expr, g.var, reads).map(*keys, self.col_of(g.var))

    def aggregate(self, a: Aggregate, cur: Stream) -> Stream:
        gv = group_vars(a, outside_vars(self.rule, a))
        gcols = [self.col_of(v) for v in gv]
        k = self.tmp("k")
        keyed = cur.map(*cur.columns, (k, lit(0)))
        seeds = keyed.map(*gcols, k).stream_distinct()  # the groups the rule asks about
        inner = self.body(a.body, seeds, set(gv))
        var = a.var
        already = var in self.cols and self.cols[var] in cur.schema
        res = self.tmp("r") if already else self.col_of(var)
        if already:
            saved, self.cols[var] = self.cols[var], res
        on = [*gcols, k]
        if a.func in ("count", "sum"):
            # an empty group counts 0 and sums to 0 (Soufflé): every asked-for group contributes a 0 row, so
            # one GROUP BY-sum gives every group's value and one join attaches it (no anti-join branch)
            dt = DTYPES.get(self.types.get(var, "number"), pl.Int64())
            val: Expr = lit(1) if a.func == "count" or a.expr is None else self.expr(a.expr)
            val = self._nonnegative(val, set(_reads(a.body)), a.func)
            contrib = inner.map(*on, ("a", Cast(val, dt))) + seeds.map(*on, ("a", Cast(lit(0), dt)))
            agg = contrib.stream_aggregate(by=on, r=("sum", "a")).map(
                *on, (self.col_of(var), Cast(col("r"), dt))
            )
        else:
            agg = self._agg_value(inner, on, a.func, a.expr, var, set(_reads(a.body)))
        if already:
            self.cols[var] = saved
        out = keyed.stream_join(agg, on=on)
        if already:
            return out.filter(col(res).eq(col(self.cols[var]))).map(*cur.columns)
        return out.map(*cur.columns, res)

    def head(self, s: Stream) -> Stream:
        rel = self.rels[self.rule.head.pred]
        items: list[tuple[str, Expr]] = []
        for c, t, a in zip(rel.columns, rel.types, self.rule.head.args, strict=True):
            e = self.expr(a)
            want = DTYPES[t]
            if not (isinstance(e, Col) and s.schema[e.name] == want):
                e = Cast(e, want)
            items.append((c, e))
        return s.map(*items)

    def lower(self) -> Stream:
        s = self.body(self.rule.body, None, set())
        return self.head(self.numbered(s) if autoinc.in_head(self.rule) else s)

    def numbered(self, s: Stream) -> Stream:
        """The body's bindings on the rule's variables, each unit numbered in the order of the
        variables written in the rule (by name), then the others (`autoinc.py`)."""
        bound = sorted((v for v, c in self.cols.items() if c in s.schema), key=lambda v: ("#" in v, v))
        cols = [self.cols[v] for v in bound] or [self.tmp("u")]
        keep = s.map(*cols) if bound else s.map((cols[0], lit(0)))
        self.rank = self.tmp("n")
        return keep.stream_number(cols, self.rank)


def relation_stream(parts: list[Stream]) -> Stream:
    """The set union of a relation's parts (its rules, input table, facts)."""
    return _union(parts).stream_distinct()


def limited(s: Stream, n: int | None) -> Stream:
    """`.limitsize r(n=N)`: r's N least tuples in the order of its columns. Soufflé keeps the first N it
    derives; the least N are the same whatever the order of changes, and maintained by top-k
    (`operators/topk.py`)."""
    if n is None:
        return s
    return s.circuit.add(StreamTopK(tuple(SortKey(c) for c in s.columns), n), s)


def _union(parts: list[Stream]) -> Stream:
    s = parts[0]
    for p in parts[1:]:
        s = s + p
    return s


def normal_form(parts: list[Stream], index: int, better: str) -> Stream:
    """A cost predicate's facts in normal form (`incremental-aggregation-monotonic-programs.txt`
    Definition 4.6): of the facts that differ only in their cost argument (at `index`), the best
    (`better`: "min" or "max"), from the union of its parts (no distinct first: min and max ignore
    duplicates)."""
    s = _union(parts)
    return s.stream_best(s.columns[index], better)


def _cost_consistent(comp: Component, p: str, base: dict[str, list[str]]) -> bool:
    """Whether p's facts are cost-consistent as derived (no normal form needed): p has no facts or
    input rows of its own and one rule, whose head's cost argument is an aggregate's result and whose
    other head arguments include the aggregate's group variables (one cost per group)."""
    rules = [r for r in comp.rules if r.head.pred == p]
    assert comp.costs is not None
    if base.get(p) or len(rules) != 1:
        return False
    (r,) = rules
    i = comp.costs[p].index
    cost = r.head.args[i]
    keys = {a.name for j, a in enumerate(r.head.args) if j != i and isinstance(a, Var)}
    for lit_ in r.body:
        if isinstance(lit_, GroupBy) and isinstance(cost, Var) and lit_.var == cost.name:
            return set(lit_.keys) <= keys
        if isinstance(lit_, Aggregate) and isinstance(cost, Var) and lit_.var == cost.name:
            return set(group_vars(lit_, outside_vars(r, lit_))) <= keys
    return False


def lower_component(
    comp: Component,
    rels: dict[str, Relation],
    env: Env,
    base: dict[str, list[str]],
    unit: Callable[[], Stream],
    max_iterations: int,
    closure_operator: bool = True,
    joins: str = "auto",
) -> dict[str, Stream]:
    """The streams of one component's relations. `env` has the streams of earlier components and of
    the hidden tables (keys in `base[pred]`: an input table, a facts table). A component that is the
    transitive closure of one relation becomes the closure operator when `closure_operator` is set.
    `joins` (`JOIN_PLANS`) chooses how a rule body's atoms are joined outside recursion; inside a
    recursive scope they are binary joins (its doubly-incremental operators are written for those)."""
    for p in comp.preds if comp.recursive else ():
        if rels[p].limit is not None:
            raise UnsupportedError(
                f".limitsize {p}: {p} is recursive ({', '.join(comp.preds)}); a limit inside a recursion "
                "would depend on the order tuples are derived in (Soufflé's first N)"
            )
    tc = closure_pattern(comp, rels, base) if closure_operator else None
    if tc is not None:
        p, e = tc
        (a, b), (x, y) = list(rels[e].schema), list(rels[p].schema)
        edges = env[e] if (a, b) == (x, y) else env[e].map((x, col(a)), (y, col(b)))
        return {p: edges.stream_transitive_closure(x, y)}
    for rule in comp.rules:
        autoinc.check_rule(rule, comp.recursive)
    if not comp.recursive:
        (p,) = comp.preds
        parts = [env[k] for k in base.get(p, [])]
        if len(parts) == 1 and not comp.rules and rels[p].origin == "input" and rels[p].limit is None:
            return {p: parts[0]}  # an input table is a set already
        parts += [RuleLowering(r, rels, env, unit, joins=joins).lower() for r in comp.rules]
        return {p: limited(relation_stream(parts), rels[p].limit)}

    preds = comp.preds
    reads: list[str] = []
    for r in comp.rules:
        for name in _reads(r.body):
            if name not in preds and name not in reads:
                reads.append(name)
    for p in preds:
        reads += [k for k in base.get(p, []) if k not in reads]
    uses_unit = any(_needs_unit(r.body) for r in comp.rules)
    if uses_unit or not reads:
        unit()  # make sure the unit table exists before it is imported
        reads.append("@unit")
    imports = [env[k] for k in reads]

    costly = frozenset(preds) if comp.costs is not None else frozenset()

    def body(*streams: Stream) -> tuple[Stream, ...]:
        inner: Env = dict(zip(reads, streams[: len(reads)], strict=True))
        inner.update(zip(preds, streams[len(reads) :], strict=True))
        out = []
        for p in preds:
            parts = [inner[k] for k in base.get(p, [])]
            parts += [
                RuleLowering(r, rels, inner, lambda: inner["@unit"], costly).lower()
                for r in comp.rules
                if r.head.pred == p
            ]
            if comp.costs is not None and p in comp.costs and not _cost_consistent(comp, p, base):
                out.append(normal_form(parts, comp.costs[p].index, comp.costs[p].better))
            else:
                out.append(relation_stream(parts))
        return tuple(out)

    name = "datalog_" + "_".join(preds)
    bounded = ""
    aggs = [x for r in comp.rules for x in r.body if isinstance(x, (Aggregate, GroupBy))]
    if comp.costs is not None and all(a.func in ("min", "max") for a in aggs):
        # a cost may improve around a cycle without end; with min and max alone (each aggregate picks
        # one input) the scope can tell early (`docs/recursive-aggregation.md`)
        shown = "; ".join(
            str(r) for r in comp.rules if any(isinstance(x, (Aggregate, GroupBy)) for x in r.body)
        )
        bounded = f"a cost keeps getting better around a cycle (under min, a cycle of negative cost) through {shown}"
    result = env[reads[0]].circuit.recursive(
        body,
        imports,
        schemas=[rels[p].schema for p in preds],
        name=name,
        max_iterations=max_iterations,
        bounded=bounded,
    )
    results = result if isinstance(result, tuple) else (result,)
    return dict(zip(preds, results, strict=True))


def closure_pattern(
    comp: Component, rels: dict[str, Relation], base: dict[str, list[str]]
) -> tuple[str, str] | None:
    """(p, e) when the component is exactly `p(X, Y) :- e(X, Y).` and one of `p(X, Y) :- p(X, Z), e(Z, Y).`,
    `p(X, Y) :- e(X, Z), p(Z, Y).` or `p(X, Y) :- p(X, Z), p(Z, Y).` (literals in any order, distinct
    variables), with no facts or input rows of its own: then p is the transitive closure of e."""
    if len(comp.preds) != 1 or len(comp.rules) != 2:
        return None
    (p,) = comp.preds
    if base.get(p) or len(rels[p].schema) != 2:
        return None
    exit_e = step = None
    for r in comp.rules:
        if len(r.head.args) != 2 or not all(isinstance(a, Atom) and len(a.args) == 2 for a in r.body):
            return None
        terms = [r.head.args, *[a.args for a in r.body]]  # type: ignore[union-attr]
        if not all(isinstance(t, Var) for ts in terms for t in ts):
            return None
        x, y = (t.name for t in r.head.args)  # type: ignore[union-attr]
        atoms = [(a.pred, a.args[0].name, a.args[1].name) for a in r.body]  # type: ignore[union-attr]
        if len(atoms) == 1 and atoms[0][0] != p and atoms[0][1:] == (x, y) and x != y:
            exit_e = atoms[0][0]
        elif len(atoms) == 2:
            for (p1, a1, b1), (p2, a2, b2) in (atoms, atoms[::-1]):
                if (a1, b2) == (x, y) and b1 == a2 and len({x, y, b1}) == 3 and p in (p1, p2):
                    step = p2 if p1 == p else p1
                    break
            else:
                return None
        else:
            return None
    if exit_e is None or step is None or step not in (exit_e, p):
        return None
    return p, exit_e


def _reads(body: tuple[Literal, ...]) -> list[str]:
    out: list[str] = []
    for lit_ in body:
        if isinstance(lit_, Atom):
            out.append(lit_.pred)
        elif isinstance(lit_, (Negation, GroupBy)):
            out.append(lit_.atom.pred)
        elif isinstance(lit_, Aggregate):
            out += _reads(lit_.body)
    return out


def _needs_unit(body: tuple[Literal, ...]) -> bool:
    """Whether a body has no positive atom or groupby literal (then it starts from the one-row unit)."""
    return not any(isinstance(x, (Atom, GroupBy)) for x in body)
