"""Soufflé's subsumptive clauses and choice domains, rewritten before the checks into negation.

    r(x, d1) <= r(x, d2) :- d1 >= d2.       // keep, per x, the tuple no other tuple dominates
    .decl s(x: number, y: number) choice-domain x      // one tuple per x (one domain per relation)

A relation `r` with either has its rules and facts derive `r__all`, and

    r(v...) :- r__all(v...), !r__out(v...).
    r__out(a...) :- r__all(a...), r__all(b...), <body>, a_i != b_i.     (one rule per column i)

for each subsumptive clause `r(a...) <= r(b...) :- <body>` (a tuple is dropped when another tuple
dominates it). A choice domain D keeps, of the tuples that agree on D, the least in the order of the
other columns (Soufflé keeps one it chose while evaluating; dbspark's choice is this one, so that it is
the same whatever the order of the changes, and stays maintained under deletes):

    r__out(x...) :- r__all(x...), r__all(y...), y_D = x_D, y_j = x_j (j < k), y_k < x_k.   (one per k)

A relation read by its own rules through these is a recursion through negation, refused as
unstratifiable (Soufflé applies them while evaluating the recursion; dbspark does not).
"""

from __future__ import annotations

from dbspark.errors import SchemaError, UnsupportedError
from dbspark.frontends.datalog.ast import (
    Atom,
    Constraint,
    Decl,
    Literal,
    Negation,
    Program,
    Rule,
    Term,
    Var,
    at,
)


def expand_subsumption(prog: Program) -> Program:
    """`prog` with its subsumptive clauses and choice domains rewritten as the module describes."""
    decls = {d.name: d for d in prog.decls}
    targets = {s.dominated.pred for s in prog.subsumptions} | {d.name for d in prog.decls if d.choice}
    if not targets:
        return prog
    for s in prog.subsumptions:
        if s.dominated.pred not in decls:
            raise at(SchemaError, f"subsumptive clause on {s.dominated.pred!r}, which is not declared", s.pos)
    out = Program(types=list(prog.types), directives=list(prog.directives), functors=list(prog.functors))
    for d in prog.decls:
        out.decls.append(Decl(d.name, d.attrs, d.pos, d.qualifiers))
        if d.name in targets:
            for suffix in ("__all", "__out"):
                out.decls.append(Decl(d.name + suffix, d.attrs, d.pos))
    for r in prog.rules:
        if r.head.pred in targets:
            r = Rule(Atom(r.head.pred + "__all", r.head.args, r.head.pos), r.body, r.pos, r.shown)
        out.rules.append(r)
    for name in sorted(targets):
        d = decls[name]
        vs: tuple[Term, ...] = tuple(Var(f"v{i}") for i in range(len(d.attrs)))
        every, dropped = Atom(name + "__all", vs, d.pos), Atom(name + "__out", vs, d.pos)
        out.rules.append(Rule(Atom(name, vs, d.pos), (every, Negation(dropped, d.pos)), d.pos))
        out.rules += _choices(d)
    for s in prog.subsumptions:
        a, b = s.dominated, s.dominating
        both: tuple[Literal, ...] = (
            Atom(a.pred + "__all", a.args, a.pos),
            Atom(b.pred + "__all", b.args, b.pos),
        )
        for x, y in zip(a.args, b.args, strict=True):  # two different tuples: they differ somewhere
            differ = Constraint("!=", x, y, s.pos)
            out.rules.append(Rule(Atom(a.pred + "__out", a.args, a.pos), (*both, *s.body, differ), s.pos))
    return out


def _choices(d: Decl) -> list[Rule]:
    """The rules dropping, per choice domain, every tuple but the least of those agreeing on it."""
    cols = [a for a, _ in d.attrs]
    if len(d.choice) > 1:
        raise at(
            UnsupportedError,
            f".decl {d.name}: several choice domains are not supported (the least tuple of each would "
            "not make a maximal choice; one domain, e.g. choice-domain (x, y), is)",
            d.pos,
        )
    out: list[Rule] = []
    for domain in d.choice:
        unknown = [c for c in domain if c not in cols]
        if unknown:
            raise at(
                SchemaError, f".decl {d.name}: choice-domain names unknown attribute(s) {unknown}", d.pos
            )
        rest = [i for i, c in enumerate(cols) if c not in domain]
        if not rest:
            continue  # the whole tuple: a set already holds one of each
        x = tuple(Var(f"x{i}") for i in range(len(cols)))
        y = tuple(x[i] if cols[i] in domain else Var(f"y{i}") for i in range(len(cols)))
        for k, col in enumerate(rest):
            same = [Constraint("=", y[j], x[j], d.pos) for j in rest[:k]]
            less = Constraint("<", y[col], x[col], d.pos)
            body: tuple[Literal, ...] = (
                Atom(d.name + "__all", x, d.pos),
                Atom(d.name + "__all", y, d.pos),
                *same,
                less,
            )
            out.append(Rule(Atom(d.name + "__out", x, d.pos), body, d.pos))
    return out
