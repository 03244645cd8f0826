"""Names resolved before the checks of each rule: every type name's primitive type (`.type` subtypes,
equivalences, unions), user-defined functors' signatures, `as(x, T)`'s type, and `range` generators
made assignments of variables of their own, and the witnesses of min / max aggregates grounded."""

from __future__ import annotations

from collections.abc import Callable

from dbspark.errors import SchemaError, UnknownNameError, UnsupportedError
from dbspark.frontends.datalog import records
from dbspark.frontends.datalog.ast import (
    TYPES,
    Aggregate,
    Atom,
    Call,
    Constraint,
    GroupBy,
    Literal,
    Program,
    Rule,
    Term,
    Var,
    at,
    literal_vars,
    map_vars,
    outer_vars,
    rebuild,
    rebuild_literal,
    subterms,
    term_vars,
)


def type_bases(prog: Program) -> dict[str, str]:
    """Every type name's base type (the primitive types map to themselves, a record or ADT type to its
    key in `records.REGISTRY`), and every ADT branch "$B" its ADT's key."""
    aliases: dict[str, str] = {t: t for t in TYPES}
    _subtypes(prog, aliases, lenient=True)  # (a record's fields may be of a subtype)
    aliases.update(records.declare(prog.records, aliases))
    _subtypes(prog, aliases, lenient=False)  # (a subtype may name a record type)
    return aliases


def _subtypes(prog: Program, aliases: dict[str, str], lenient: bool) -> None:
    for td in prog.types:
        bases = []
        for t in (td.base, *td.more):
            base = aliases.get(t, t)
            if base not in TYPES and not records.is_structured(base):
                if lenient:
                    break
                known = [n for n in aliases if not n.startswith("$")]
                raise at(
                    SchemaError,
                    f".type {td.name}: unknown type {t!r}; the types are {known} (a type is "
                    "declared before it is used)",
                    td.pos,
                )
            bases.append(base)
        else:
            if len(set(bases)) > 1:  # a union's members share one primitive type (Soufflé's rule)
                members = ", ".join(
                    f"{t} ({records.shown(b)})" for t, b in zip((td.base, *td.more), bases, strict=True)
                )
                raise at(SchemaError, f".type {td.name}: a union of different base types: {members}", td.pos)
            aliases[td.name] = bases[0]


def functor_signatures(prog: Program, aliases: dict[str, str]) -> dict[str, str]:
    """Each declared functor's signature as `Call.type` carries it: "result:arg,arg" in base types."""
    out: dict[str, str] = {}
    for d in prog.functors:
        for t in (d.result, *(t for _, t in d.args)):
            if t not in aliases:
                raise at(SchemaError, f".functor {d.name}: unknown type {t!r}", d.pos)
        out[d.name] = aliases[d.result] + ":" + ",".join(aliases[t] for _, t in d.args)
    return out


def resolve_calls(rule: Rule, aliases: dict[str, str], functors: dict[str, str]) -> Rule:
    """The rule with the type T of every `as(x, T)` resolved to its base type, and every user-defined
    functor's call given its declared signature."""

    def f(t: Term) -> Term:
        if isinstance(t, Call) and t.name.startswith("$"):  # an ADT's branch: typed by its ADT
            key = aliases.get(t.name)
            if key is None:
                raise at(UnknownNameError, f"{t}: no .type declares the branch {t.name[1:]}", t.pos)
            fields = records.field_types(key, t)
            if len(fields) != len(t.args):
                raise at(
                    SchemaError,
                    f"{t}: branch {t.name[1:]} of {records.shown(key)} has {len(fields)} field(s), "
                    f"got {len(t.args)}",
                    t.pos,
                )
            return Call(t.name, t.args, t.pos, key)
        if isinstance(t, Call) and t.name.startswith("@"):
            sig = functors.get(t.name[1:])
            if sig is None:
                raise at(
                    UnknownNameError,
                    f"{t}: functor {t.name} is not declared (.functor {t.name[1:]}(x: T, ...): T)",
                    t.pos,
                )
            n = len(sig.split(":")[1].split(",")) if sig.split(":")[1] else 0
            if n != len(t.args):
                raise at(
                    SchemaError, f"{t}: functor {t.name} takes {n} argument(s), got {len(t.args)}", t.pos
                )
            return Call(t.name, t.args, t.pos, sig)
        if not (isinstance(t, Call) and t.name == "as"):
            return t
        if t.type not in aliases:
            raise at(SchemaError, f"{t}: unknown type {t.type!r}; the types are {list(aliases)}", t.pos)
        return Call(t.name, t.args, t.pos, aliases[t.type])

    head = Atom(rule.head.pred, tuple(rebuild(a, f) for a in rule.head.args), rule.head.pos)
    return Rule(head, tuple(rebuild_literal(x, f) for x in rule.body), rule.pos, rule.shown)


def is_range(t: Term) -> bool:
    return isinstance(t, Call) and t.name == "range"


def has_range(t: Term) -> bool:
    return is_range(t) or any(map(has_range, subterms(t)))


def generators(body: list[Literal], fresh: Callable[[str], str]) -> list[Literal]:
    """`x = range(a, b)` (either side) becomes `g = range(a, b), g = x` with g fresh, so that a range
    is always an assignment to a variable of its own (a bound x then filters); a range anywhere else
    is refused."""
    out: list[Literal] = []
    for lit in body:
        if isinstance(lit, Constraint) and lit.op == "=" and (is_range(lit.left) or is_range(lit.right)):
            gen, other = (lit.left, lit.right) if is_range(lit.left) else (lit.right, lit.left)
            if not has_range(other) and not any(map(has_range, subterms(gen))):
                g = Var(fresh("range"), lit.pos)
                out += [Constraint("=", g, gen, lit.pos), Constraint("=", g, other, lit.pos)]
                continue
        if isinstance(lit, Constraint) and (has_range(lit.left) or has_range(lit.right)):
            raise at(
                UnsupportedError,
                f"{lit}: range(...) generates values only bound to a variable (x = range(a, b)) or as "
                "an argument of a body atom",
                lit.pos,
            )
        out.append(lit)
    return out


def ground_witnesses(
    head: Atom, body: tuple[Literal, ...], fresh: Callable[[str], str]
) -> tuple[Literal, ...]:
    """Soufflé's witnesses of min / max (its GroundWitnesses transform): a variable of the aggregate's
    body that the rest of the rule uses but nothing else binds takes the values of the tuples that
    attain the extreme. `youngest(p, n) :- n = min x : { family(p, x) }.` becomes
    `n = min x : { family(p', x) }, family(p, x'), x' = n` (every tied tuple a witness)."""
    grounded: set[str] = set()
    for lit in body:
        if isinstance(lit, (Atom, GroupBy)):
            grounded |= outer_vars(lit)
        elif isinstance(lit, Aggregate):
            grounded.add(lit.var)
    for _ in body:  # assignments from what is grounded (in any order)
        for lit in body:
            if isinstance(lit, Constraint) and lit.op == "=":
                for v, e in ((lit.left, lit.right), (lit.right, lit.left)):
                    if isinstance(v, Var) and term_vars(e) <= grounded:
                        grounded.add(v.name)
    out: list[Literal] = []
    extra: list[Literal] = []
    for lit in body:
        if not (isinstance(lit, Aggregate) and lit.func in ("min", "max") and lit.expr is not None):
            out.append(lit)
            continue
        outside = head.vars() | set().union(*[literal_vars(x) for x in body if x is not lit])
        witnesses = (lit.inner_vars() - {lit.var}) & outside - grounded
        if not witnesses:
            out.append(lit)
            continue
        inside = {w: fresh(w) for w in witnesses}
        out.append(
            Aggregate(lit.var, lit.func, lit.expr, tuple(_renamed(x, inside) for x in lit.body), lit.pos)
        )
        local = {v: fresh(v) for v in lit.inner_vars() - outside}  # the copy's own variables
        copy = tuple(_renamed(x, local) for x in lit.body)
        value = _renamed_term(lit.expr, local)
        extra += [*copy, Constraint("=", value, Var(lit.var, lit.pos), lit.pos)]
    return (*out, *extra)


def _renamed_term(t: Term, names: dict[str, str]) -> Term:
    return map_vars(t, lambda v: Var(names.get(v.name, v.name), v.pos))


def _renamed(lit: Literal, names: dict[str, str]) -> Literal:
    def f(t: Term) -> Term:
        return Var(names[t.name], t.pos) if isinstance(t, Var) and t.name in names else t

    return rebuild_literal(lit, f)
