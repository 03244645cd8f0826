"""Semantic checks of a parsed program: declarations, directives, predicates, arities, types and safety.

The result, a `Checked` program, has one `Relation` per predicate (declared in the program, or an
existing pipeline relation used as an extensional predicate, its columns taken positionally) and the
rules normalised for lowering: several heads and `;` bodies are already split by the parser; here an
expression argument of a body atom becomes a fresh variable bound by `v = expr`, and the wildcards of
aggregate bodies become fresh variables (an aggregate ranges over whole tuples, as in Soufflé).
Every error names the rule or declaration with its line and column.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from dbspark.errors import ParseError, SchemaError, UnknownNameError, UnsupportedError
from dbspark.frontends.datalog import autoinc, records
from dbspark.frontends.datalog.ast import (
    AGGREGATES,
    TYPES,
    Aggregate,
    Atom,
    Call,
    Const,
    Constraint,
    GroupBy,
    Literal,
    Negation,
    Pos,
    Program,
    Rule,
    Term,
    Var,
    Wild,
    at,
    has_wild,
    literal_vars,
    map_vars,
    outer_vars,
    term_vars,
)
from dbspark.frontends.datalog.resolve import (
    functor_signatures,
    generators,
    ground_witnesses,
    has_range,
    resolve_calls,
    type_bases,
)


class _Dtypes(dict[str, pl.DataType]):
    """A Datalog type's column type: a record's or ADT's is a string (its encoding, `records.py`)."""

    def __missing__(self, t: str) -> pl.DataType:
        if records.is_structured(t):
            return pl.String()
        raise KeyError(t)


DTYPES = _Dtypes(
    {
        "number": pl.Int64(),
        "unsigned": pl.Int64(),
        "float": pl.Float64(),
        "symbol": pl.String(),
    }
)
INPUT_PARAMS = {"IO", "filename", "delimiter", "headers", "format", "rfc4180", "columns"}
OUTPUT_PARAMS = {"IO", "filename", "delimiter", "headers", "compress"}


class UnsafeRuleError(ParseError):
    """A rule with a variable that no positive literal binds (in the head, a negation, a comparison)."""


class StratificationError(ParseError):
    """A program whose recursion goes through negation or aggregation."""


@dataclass
class Relation:
    name: str
    columns: list[str]
    types: list[str]  # Datalog types; an extensional relation's other column types are "other:<dtype>"
    origin: str  # "input" | "derived" | "external" (a relation of the pipeline declared elsewhere)
    pos: Pos
    params: dict[str, Any] = field(default_factory=dict)  # of its .input directive
    output: bool = False
    out_params: dict[str, Any] = field(default_factory=dict)  # of its .output directive
    limit: int | None = None  # .limitsize r(n=N): its N least tuples

    @property
    def schema(self) -> dict[str, pl.DataType]:
        return {c: DTYPES[t] for c, t in zip(self.columns, self.types, strict=True)}


@dataclass
class Checked:
    relations: dict[str, Relation]
    rules: list[Rule]  # normalised, without facts
    facts: dict[str, list[tuple]]  # ground facts of the program, per relation (typed Python values)


def dtype_type(t: pl.DataType) -> str:
    """The Datalog type of an existing relation's column."""
    if t.is_integer():
        return "number"
    if t.is_float():
        return "float"
    if t == pl.String():
        return "symbol"
    return f"other:{t}"


# ---- declarations -----------------------------------------------------------------------------------
def _declare(prog: Program, external: Mapping[str, pl.Schema]) -> dict[str, Relation]:
    aliases = type_bases(prog)
    rels: dict[str, Relation] = {}
    for d in prog.decls:
        if d.name in rels:
            raise at(
                SchemaError, f"relation {d.name!r} is declared twice (first at {rels[d.name].pos})", d.pos
            )
        if not d.attrs:
            raise at(
                UnsupportedError,
                f"relation {d.name!r} has no attributes (nullary relations are not supported)",
                d.pos,
            )
        cols = [a for a, _ in d.attrs]
        if len(set(cols)) != len(cols):
            raise at(SchemaError, f"relation {d.name!r} has duplicate attribute names {cols}", d.pos)
        types = []
        for a, t in d.attrs:
            base = aliases.get(t, t)
            if base not in TYPES and not records.is_structured(base):
                raise at(
                    SchemaError,
                    f"attribute {d.name}.{a}: unknown type {t!r}; the types are {list(TYPES)} "
                    "(or a .type declared before)",
                    d.pos,
                )
            types.append(base)
        rels[d.name] = Relation(d.name, cols, types, "derived", d.pos)
    seen: set[tuple[str, str]] = set()
    for dr in prog.directives:
        if dr.kind not in ("input", "output", "printsize", "limitsize"):
            raise at(UnsupportedError, f".{dr.kind} is not supported", dr.pos)
        if dr.name not in rels:
            raise at(UnknownNameError, f".{dr.kind} {dr.name}: relation {dr.name!r} is not declared", dr.pos)
        if (dr.kind, dr.name) in seen:
            raise at(SchemaError, f".{dr.kind} {dr.name} is given twice", dr.pos)
        seen.add((dr.kind, dr.name))
        r = rels[dr.name]
        params = dict(dr.params)
        if dr.kind == "limitsize":  # the n least tuples (`lower.limited`)
            n = params.get("n")
            if set(params) != {"n"} or not isinstance(n, int) or n < 0:
                raise at(
                    SchemaError, f".limitsize {dr.name}: write .limitsize {dr.name}(n=N), N >= 0", dr.pos
                )
            r.limit = n
            continue
        if dr.kind == "printsize":  # a view whose size `dbspark run` prints (`io/souffle.py`)
            if params:
                raise at(UnsupportedError, f".printsize {dr.name}: it takes no parameters", dr.pos)
            r.output, r.out_params = True, {**r.out_params, "printsize": "true"}
            if dr.name not in {d.name for d in prog.directives if d.kind == "output"}:
                r.out_params["IO"] = "none"
            continue
        if dr.kind == "input":
            unknown = set(params) - INPUT_PARAMS
            if unknown:
                raise at(
                    UnsupportedError,
                    f".input {dr.name}: unknown parameter(s) {sorted(unknown)}; "
                    f"known: {sorted(INPUT_PARAMS)}",
                    dr.pos,
                )
            if params.get("IO", "file") != "file":
                raise at(
                    UnsupportedError,
                    f".input {dr.name}: IO={params['IO']} is not supported (only IO=file)",
                    dr.pos,
                )
            r.origin, r.params = "input", params
        else:
            unknown = set(params) - OUTPUT_PARAMS
            if unknown or params.get("IO", "file") not in ("file", "stdout"):
                what = f"unknown parameter(s) {sorted(unknown)}" if unknown else f"IO={params['IO']}"
                raise at(
                    UnsupportedError,
                    f".output {dr.name}: {what} is not supported (IO=file or stdout, with "
                    f"{sorted(OUTPUT_PARAMS - {'IO'})})",
                    dr.pos,
                )
            r.output, r.out_params = True, {**params, **r.out_params}
    for name, schema in external.items():
        if name not in rels:
            rels[name] = Relation(
                name, list(schema), [dtype_type(t) for t in schema.values()], "external", Pos(0, 0)
            )
    return rels


# ---- normalisation ---------------------------------------------------------------------------------
class _Fresh:
    def __init__(self) -> None:
        self.n = itertools.count()

    def __call__(self, what: str) -> str:
        return f"{what}#{next(self.n)}?"  # '#' and '?' cannot occur in a written variable


def _norm_atom(a: Atom, fresh: _Fresh, wild_to_var: bool) -> tuple[Atom, list[Constraint]]:
    args: list[Term] = []
    extra: list[Constraint] = []
    for t in a.args:
        if isinstance(t, (Var, Const)) or (isinstance(t, Wild) and not wild_to_var):
            args.append(t)
        elif records.is_record_term(t):  # a pattern: its wildcards match anything
            v = Var(fresh("e"), t.pos)
            args.append(v)
            extra.append(Constraint("=", v, _unwild(t, fresh), t.pos))
        elif isinstance(t, Wild):
            args.append(Var(fresh("_"), t.pos))
        else:
            if has_wild(t):
                raise at(SchemaError, f"a wildcard '_' cannot occur in the expression {t}", t.pos)
            v = Var(fresh("e"), t.pos)
            args.append(v)
            extra.append(Constraint("=", v, t, t.pos))
    return Atom(a.pred, tuple(args), a.pos), extra


def _unwild(t: Term, fresh: _Fresh) -> Term:
    """A record pattern with each wildcard a fresh variable (a bare wildcard elsewhere is refused)."""
    if not records.is_record_term(t):
        return t
    assert isinstance(t, Call)
    args = tuple(Var(fresh("_"), a.pos) if isinstance(a, Wild) else _unwild(a, fresh) for a in t.args)
    return Call(t.name, args, t.pos, t.type)


def _norm_body(body: tuple[Literal, ...], fresh: _Fresh, in_agg: bool) -> tuple[Literal, ...]:
    out: list[Literal] = []
    for lit in body:
        if isinstance(lit, Atom):
            a, extra = _norm_atom(lit, fresh, in_agg)
            out += [a, *extra]
        elif isinstance(lit, Negation):
            a, extra = _norm_atom(lit.atom, fresh, False)
            out += [*extra, Negation(a, lit.pos)]
        elif isinstance(lit, Aggregate):
            if lit.func not in AGGREGATES:
                raise at(
                    UnsupportedError, f"unknown aggregate {lit.func!r}; known: {list(AGGREGATES)}", lit.pos
                )
            out.append(Aggregate(lit.var, lit.func, lit.expr, _norm_body(lit.body, fresh, True), lit.pos))
        elif isinstance(lit, GroupBy):
            keep = {*lit.keys}
            ren = {v: fresh(v) for v in lit.atom.vars() - keep}  # local variables: private to the literal
            a, extra = _norm_atom(_rename_atom(lit.atom, ren), fresh, True)
            if extra:
                raise at(
                    UnsupportedError, "an expression argument inside groupby(...) is not supported", lit.pos
                )
            expr = _rename(lit.expr, ren) if lit.expr is not None else None
            out.append(GroupBy(a, lit.keys, lit.var, lit.func, expr, lit.pos))
        elif lit.op == "=" and (records.is_record_term(lit.left) or records.is_record_term(lit.right)):
            out.append(Constraint("=", _unwild(lit.left, fresh), _unwild(lit.right, fresh), lit.pos))
        else:
            if has_wild(lit.left) or has_wild(lit.right):
                raise at(UnsafeRuleError, f"a wildcard '_' cannot occur in the comparison {lit}", lit.pos)
            out.append(lit)
    return tuple(generators(out, fresh))


def _rename(t: Term, ren: dict[str, str]) -> Term:
    return map_vars(t, lambda v: Var(ren.get(v.name, v.name), v.pos))


def _rename_atom(a: Atom, ren: dict[str, str]) -> Atom:
    return Atom(a.pred, tuple(_rename(t, ren) for t in a.args), a.pos)


# ---- safety ---------------------------------------------------------------------------------------
def group_vars(agg: Aggregate, rule_vars_outside: set[str]) -> list[str]:
    """An aggregate's group variables: those of its body that also occur outside it in the rule."""
    return sorted((agg.inner_vars() - {agg.var}) & rule_vars_outside)


def outside_vars(rule: Rule, lit: Literal) -> set[str]:
    out = rule.head.vars()
    for other in rule.body:
        if other is not lit:
            out |= outer_vars(other)
    return out


def plan(body: tuple[Literal, ...], bound: set[str], rule: Rule) -> list[tuple[str, Literal]]:
    """The order a body is evaluated in: positive atoms and groupby literals first (joined), then, as
    their variables become bound, comparisons (filters), assignments `v = expr`, aggregates and
    negations. Raises UnsafeRuleError naming a variable nothing binds."""
    steps: list[tuple[str, Literal]] = []
    bound = set(bound)
    rest: list[Literal] = []
    for lit in _connected(body, bound):
        if isinstance(lit, Atom):
            steps.append(("atom", lit))
            bound |= lit.vars()
        elif isinstance(lit, GroupBy):
            missing = set(lit.keys) - lit.atom.vars()
            if missing:
                raise at(
                    UnsafeRuleError,
                    f"groupby: group variable(s) {sorted(missing)} do not occur in {lit.atom}",
                    lit.pos,
                )
            if lit.expr is not None and not term_vars(lit.expr) <= lit.atom.vars():
                raise at(
                    UnsafeRuleError,
                    f"groupby: the aggregated expression {lit.expr} uses variables not in {lit.atom}",
                    lit.pos,
                )
            steps.append(("groupby", lit))
            bound |= {*lit.keys, lit.var}
        else:
            rest.append(lit)
    while rest:
        for i, lit in enumerate(rest):
            step = _ready(lit, bound, rule)
            if step is not None:
                steps.append((step, lit))
                bound |= outer_vars(lit)
                del rest[i]
                break
        else:
            lit = rest[0]
            need = (
                set(group_vars(lit, outside_vars(rule, lit)))
                if isinstance(lit, Aggregate)
                else literal_vars(lit)
            ) - bound
            raise at(
                UnsafeRuleError,
                f"unsafe rule {rule}: variable(s) {sorted(_shown(need))} in {lit} are not bound "
                "by a positive atom",
                rule.pos,
            )
    return steps


def _connected(body: tuple[Literal, ...], bound: set[str]) -> list[Literal]:
    """The body with its positive atoms and groupby literals in join order: each the first one written
    that shares a variable with those before it (or with `bound`), when there is one, so that a join
    is not a product where the rule has a join (an aggregate's body `dist(x, d), edge(x, y, w)` with
    y bound starts at `edge`); the other literals after them, as written."""
    joined = [x for x in body if isinstance(x, (Atom, GroupBy))]
    seen = set(bound)
    out: list[Literal] = []
    while joined:
        i = next((i for i, x in enumerate(joined) if outer_vars(x) & seen), 0) if seen else 0
        x = joined.pop(i)
        out.append(x)
        seen |= outer_vars(x)
    return out + [x for x in body if not isinstance(x, (Atom, GroupBy))]


def _shown(vs: set[str]) -> set[str]:
    return {v.split("#")[0] for v in vs}


def _ready(lit: Literal, bound: set[str], rule: Rule) -> str | None:
    if isinstance(lit, Constraint):
        free = lit.vars() - bound
        if not free:
            return "filter"
        if lit.op == "=":
            for a, b in ((lit.left, lit.right), (lit.right, lit.left)):
                if isinstance(a, Var) and a.name in free and term_vars(b) <= bound:
                    return "assign"
                if records.is_record_term(a) and term_vars(b) <= bound:
                    return "unpack"  # a record pattern matched against a value (`records.py`)
        return None
    if isinstance(lit, Negation):
        return "negation" if lit.vars() <= bound else None
    if isinstance(lit, Aggregate):
        return "aggregate" if set(group_vars(lit, outside_vars(rule, lit))) <= bound else None
    raise AssertionError(lit)  # pragma: no cover


def check_safety(rule: Rule) -> None:
    steps = plan(rule.body, set(), rule)
    bound: set[str] = set()
    for _, lit in steps:
        bound |= outer_vars(lit)
    for _, lit in steps:
        if isinstance(lit, Aggregate):
            g = set(group_vars(lit, outside_vars(rule, lit)))
            inner = Rule(rule.head, lit.body, rule.pos, str(rule))
            ib: set[str] = set(g)
            for _, il in plan(lit.body, g, inner):
                ib |= outer_vars(il)
            if lit.expr is not None and not term_vars(lit.expr) <= ib:
                raise at(
                    UnsafeRuleError,
                    f"unsafe aggregate {lit}: {sorted(term_vars(lit.expr) - ib)} not bound in its body",
                    lit.pos,
                )
            if lit.var in lit.inner_vars():
                raise at(
                    UnsafeRuleError,
                    f"the result variable {lit.var} of {lit} also occurs in its body",
                    lit.pos,
                )
    free = rule.head.vars() - bound
    if free or any(isinstance(a, Wild) or has_wild(a) for a in rule.head.args):
        what = f"variable(s) {sorted(free)}" if free else "a wildcard '_'"
        raise at(
            UnsafeRuleError,
            f"unsafe rule {rule}: {what} in the head not bound by a positive atom in the body",
            rule.pos,
        )


# ---- the whole program -------------------------------------------------------------------------------
def check(prog: Program, external: Mapping[str, pl.Schema] | None = None) -> Checked:
    """Resolve and check `prog`; `external` are the pipeline's relations a rule may read."""
    from dbspark.frontends.datalog.types import fact_values, typed_records

    rels = _declare(prog, external or {})
    rules: list[Rule] = []
    facts: dict[str, list[tuple]] = {}
    fresh = _Fresh()
    aliases = type_bases(prog)
    functors = functor_signatures(prog, aliases)
    for r in prog.rules:
        autoinc.check_rule(r)
        r = resolve_calls(r, aliases, functors)
        head = r.head
        if head.pred not in rels:
            raise at(
                UnknownNameError,
                f"rule head {head.pred!r} is not declared (add .decl {head.pred}(...))",
                head.pos,
            )
        hr = rels[head.pred]
        if hr.origin == "external":
            raise at(
                SchemaError,
                f"rule head {head.pred!r} is a relation declared outside this program; rules can "
                "only derive relations the program declares",
                head.pos,
            )
        _arity(head, hr)
        if any(map(has_range, head.args)):
            raise at(
                UnsupportedError,
                f"{head}: range(...) in a rule's head; bind it in the body (r(x) :- x = range(a, b).)",
                head.pos,
            )
        body = ground_witnesses(head, _norm_body(r.body, fresh, False), fresh)
        rule = Rule(head, body, r.pos, str(r))
        _check_preds(rule, body, rels)
        if not body and all(isinstance(a, Const) for a in head.args):
            facts.setdefault(head.pred, []).append(fact_values(head, hr))
            continue
        check_safety(rule)
        rules.append(typed_records(rule, rels))
    return Checked(rels, rules, facts)


def _arity(a: Atom, rel: Relation) -> None:
    if len(a.args) != len(rel.columns):
        raise at(
            SchemaError,
            f"arity mismatch: {a} has {len(a.args)} argument(s), {rel.name!r} has "
            f"{len(rel.columns)} ({', '.join(rel.columns)})",
            a.pos,
        )


def _check_preds(rule: Rule, body: tuple[Literal, ...], rels: dict[str, Relation]) -> None:
    for lit in body:
        atoms = [lit] if isinstance(lit, Atom) else [lit.atom] if isinstance(lit, (Negation, GroupBy)) else []
        for a in atoms:
            if a.pred not in rels:
                raise at(
                    UnknownNameError,
                    f"unknown predicate {a.pred!r} in rule {rule}: declare it with .decl, or "
                    "declare a table or view of that name in the pipeline first",
                    a.pos,
                )
            _arity(a, rels[a.pred])
        if isinstance(lit, Aggregate):
            _check_preds(rule, lit.body, rels)
