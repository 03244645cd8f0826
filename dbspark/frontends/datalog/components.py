"""Soufflé's components, expanded before the checks: `.comp` templates and their `.init` instances.

    .comp Graph<T> {                       .init g = Graph<number>
      .decl edge(x: T, y: T)               g.edge(1, 2).
      .decl path(x: T, y: T)               .output g.path
      path(x, y) :- edge(x, y).
      path(x, z) :- path(x, y), edge(y, z).
    }

An instance `g` copies its component's declarations, types, rules, facts and directives, the relations
and types declared in the component renamed `g.<name>` wherever they occur (relations it does not
declare are the enclosing program's), its type parameters replaced by the instance's arguments. A
component `C : B<...>` has B's body before its own (bases first, recursively); `.override r` in C
drops the rules B gives r, keeping its declaration. A component's own `.comp`s are local to it, and
its `.init`s make nested instances, named `g.<inner>.<name>`.
"""

from __future__ import annotations

from collections.abc import Callable

from dbspark.errors import SchemaError, UnknownNameError, UnsupportedError
from dbspark.frontends.datalog.ast import (
    Aggregate,
    Atom,
    Component,
    CompRef,
    Constraint,
    Decl,
    Directive,
    GroupBy,
    Init,
    Literal,
    Negation,
    Pos,
    Program,
    Rule,
    Subsumption,
    TypeDecl,
)
from dbspark.frontends.datalog.check import at

Templates = dict[str, Component]


def expand_components(prog: Program) -> Program:
    """`prog` with every `.init` instance expanded and the templates gone."""
    if prog.overrides:
        raise at(SchemaError, f".override {prog.overrides[0]} outside a component", Pos(0, 0))
    if not prog.comps and not prog.inits:
        return prog
    out = Program(list(prog.decls), list(prog.types), list(prog.directives), list(prog.rules))
    out.functors, out.subsumptions, out.records = (
        list(prog.functors),
        list(prog.subsumptions),
        list(prog.records),
    )
    templates = {c.name: c for c in prog.comps}
    for init in prog.inits:
        _instantiate(init, templates, "", out, ())
    return out


def _body(ref: CompRef, templates: Templates, pos: Pos, chain: tuple[str, ...]) -> tuple[Program, Templates]:
    """The component's body with its bases' bodies first and its type arguments substituted, and the
    templates its body sees (the enclosing ones and its own)."""
    c = templates.get(ref.name)
    if c is None:
        raise at(UnknownNameError, f"unknown component {ref.name!r} (declare it with .comp)", pos)
    if ref.name in chain:
        raise at(SchemaError, f"component {ref.name} inherits from itself ({' -> '.join(chain)})", pos)
    if len(ref.args) != len(c.params):
        raise at(
            SchemaError,
            f"component {c.name} takes {len(c.params)} type argument(s) ({', '.join(c.params)}), "
            f"{ref} gives {len(ref.args)}",
            pos,
        )
    subst = dict(zip(c.params, ref.args, strict=True))
    seen = {**templates, **{x.name: x for x in c.body.comps}}
    body = Program()
    for base in c.bases:
        b, _ = _body(
            CompRef(base.name, tuple(subst.get(a, a) for a in base.args)), seen, c.pos, (*chain, c.name)
        )
        dropped = set(c.body.overrides)
        body.decls += b.decls
        body.types += b.types
        body.directives += b.directives
        body.rules += [r for r in b.rules if r.head.pred not in dropped]
        body.subsumptions += [x for x in b.subsumptions if x.dominated.pred not in dropped]
        body.inits += b.inits
    own = c.body
    if own.records:
        raise at(
            UnsupportedError,
            f".type {own.records[0].name} in component {c.name}: record and ADT types are declared at the "
            "top level of a program (a component's relations may use them)",
            own.records[0].pos,
        )
    body.decls += [
        Decl(d.name, tuple((a, subst.get(t, t)) for a, t in d.attrs), d.pos, d.qualifiers) for d in own.decls
    ]
    body.types += [
        TypeDecl(t.name, subst.get(t.base, t.base), t.pos, tuple(subst.get(m, m) for m in t.more))
        for t in own.types
    ]
    body.directives += own.directives
    body.rules += own.rules
    body.subsumptions += own.subsumptions
    body.inits += [
        Init(i.instance, CompRef(i.comp.name, tuple(subst.get(a, a) for a in i.comp.args)), i.pos)
        for i in own.inits
    ]
    return body, seen


def _instantiate(init: Init, templates: Templates, outer: str, out: Program, chain: tuple[str, ...]) -> None:
    prefix = f"{outer}{init.instance}."
    body, seen = _body(init.comp, templates, init.pos, chain)
    rels = {d.name for d in body.decls}
    types = {t.name for t in body.types}
    inner = {i.instance for i in body.inits}

    def rel(name: str) -> str:  # its own relations, and its nested instances' (`inner.edge`)
        return prefix + name if name in rels or name.split(".")[0] in inner else name

    def typ(name: str) -> str:
        return prefix + name if name in types else name

    out.types += [TypeDecl(typ(t.name), typ(t.base), t.pos, tuple(map(typ, t.more))) for t in body.types]
    out.decls += [
        Decl(rel(d.name), tuple((a, typ(t)) for a, t in d.attrs), d.pos, d.qualifiers) for d in body.decls
    ]
    out.directives += [Directive(d.kind, rel(d.name), d.params, d.pos) for d in body.directives]
    for r in body.rules:
        head = Atom(rel(r.head.pred), r.head.args, r.head.pos)
        out.rules.append(Rule(head, tuple(_renamed(x, rel) for x in r.body), r.pos))
    for x in body.subsumptions:
        a, b = x.dominated, x.dominating
        ra, rb = Atom(rel(a.pred), a.args, a.pos), Atom(rel(b.pred), b.args, b.pos)
        out.subsumptions.append(Subsumption(ra, rb, tuple(_renamed(y, rel) for y in x.body), x.pos))
    for nested in body.inits:
        _instantiate(nested, seen, prefix, out, (*chain, init.comp.name))


def _renamed(lit: Literal, rel: Callable[[str], str]) -> Literal:
    """`lit` with its relations renamed by `rel`."""
    if isinstance(lit, Atom):
        return Atom(rel(lit.pred), lit.args, lit.pos)
    if isinstance(lit, Negation):
        return Negation(Atom(rel(lit.atom.pred), lit.atom.args, lit.atom.pos), lit.pos)
    if isinstance(lit, Aggregate):
        return Aggregate(lit.var, lit.func, lit.expr, tuple(_renamed(x, rel) for x in lit.body), lit.pos)
    if isinstance(lit, GroupBy):
        return GroupBy(
            Atom(rel(lit.atom.pred), lit.atom.args, lit.atom.pos),
            lit.keys,
            lit.var,
            lit.func,
            lit.expr,
            lit.pos,
        )
    assert isinstance(lit, Constraint)
    return lit
