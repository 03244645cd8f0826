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

A relation that reaches itself through its rules (Soufflé applies subsumption while it evaluates the
recursion) is rewritten when its one subsumptive clause orders one column and keeps the others equal,
`r(x, d1) <= r(x, d2) :- d1 >= d2.` (or `>`, or `d2 <= d1`; `<=` / `<` keep the largest): the tuples
no other dominates are then, per x, the least d, a recursion through `min`

    r(x, d) :- r__all(x, _), d = min c : { r__all(x, c) }.

which is maintained under the monotonic semantics of recursive aggregation
(`docs/recursive-aggregation.md`; a rule making d smaller as its inputs grow is refused there, naming
it). Shortest paths written the Soufflé way, `dist(y, d + w) :- dist(x, d), edge(x, y, w).` with that
clause, are this case. Other clauses on a recursive relation, and choice domains in a recursion, are
refused naming the clause or the declaration.
"""

from __future__ import annotations

import re

from dbspark.errors import SchemaError, UnsupportedError
from dbspark.frontends.datalog.ast import (
    Aggregate,
    Atom,
    Constraint,
    Decl,
    Literal,
    Negation,
    Program,
    Rule,
    Subsumption,
    Term,
    Var,
    Wild,
    at,
)
from dbspark.frontends.datalog.stratify import recursive_relations


def expand_subsumption(prog: Program) -> Program:
    """`prog` with its subsumptive clauses and choice domains rewritten as the module describes."""
    decls = {d.name: d for d in prog.decls}
    targets = {s.dominated.pred for s in prog.subsumptions} | {d.name for d in prog.decls if d.choice}
    if not targets:
        return prog
    for s in prog.subsumptions:
        if s.dominated.pred not in decls:
            raise at(SchemaError, f"subsumptive clause on {s.dominated.pred!r}, which is not declared", s.pos)
    ordered: dict[str, tuple[int, str, Subsumption]] = {}  # name: (column, min | max, its clause)
    for name in sorted(targets & recursive_relations(prog.rules)):
        order = _one_ordered_column(prog, decls[name])
        if order is not None:
            ordered[name] = order
            continue
        d = decls[name]
        if d.choice:
            raise at(
                UnsupportedError,
                f".decl {name}: a choice domain on a relation that reaches itself through its rules is "
                "not supported (Soufflé chooses while it evaluates the recursion, so which tuple it "
                "keeps depends on its evaluation order)",
                d.pos,
            )
        clause = next(x for x in prog.subsumptions if x.dominated.pred == name)
        raise at(
            UnsupportedError,
            f"subsumptive clause on {name!r}: {name} reaches itself through its rules, and in a "
            "recursion dbspark applies one subsumptive clause that orders one column and keeps the "
            f"others equal ({name}(x, d1) <= {name}(x, d2) :- d1 >= d2., a recursion through min or "
            "max); not this one, or several",
            clause.pos,
        )
    out = Program(
        types=list(prog.types),
        directives=list(prog.directives),
        functors=list(prog.functors),
        records=list(prog.records),
    )
    for d in prog.decls:
        out.decls.append(Decl(d.name, d.attrs, d.pos, d.qualifiers))
        if d.name in targets:
            for suffix in ("__all",) if d.name in ordered else ("__all", "__out"):
                out.decls.append(Decl(d.name + suffix, d.attrs, d.pos))
    for r in prog.rules:
        if r.head.pred in targets:
            r = Rule(Atom(r.head.pred + "__all", r.head.args, r.head.pos), r.body, r.pos, r.shown or str(r))
        out.rules.append(r)
    for name in sorted(targets):
        d = decls[name]
        vs: tuple[Term, ...] = tuple(Var(f"v{i}") for i in range(len(d.attrs)))
        if name in ordered:  # r(.., d) :- r__all(.., _), d = min c : { r__all(.., c) }.
            k, func, clause = ordered[name]
            any_k = tuple(Wild() if i == k else v for i, v in enumerate(vs))
            each = tuple(Var("c__") if i == k else v for i, v in enumerate(vs))
            agg = Aggregate(f"v{k}", func, Var("c__"), (Atom(name + "__all", each, d.pos),), d.pos)
            shown = f"{clause.dominated} <= {clause.dominating} :- {', '.join(map(str, clause.body))}."
            body = (Atom(name + "__all", any_k, d.pos), agg)
            out.rules.append(Rule(Atom(name, vs, d.pos), body, clause.pos, shown))
            continue
        every, dropped = Atom(name + "__all", vs, d.pos), Atom(name + "__out", vs, d.pos)
        out.rules.append(Rule(Atom(name, vs, d.pos), (every, Negation(dropped, d.pos)), d.pos))
        out.rules += _choices(d)
    for s in prog.subsumptions:
        if s.dominated.pred in ordered:
            continue
        a, b = s.dominated, s.dominating
        both: tuple[Literal, ...] = (
            Atom(a.pred + "__all", a.args, a.pos),
            Atom(b.pred + "__all", b.args, b.pos),
        )
        for x, y in zip(a.args, b.args, strict=True):  # two different tuples: they differ somewhere
            differ = Constraint("!=", x, y, s.pos)
            out.rules.append(Rule(Atom(a.pred + "__out", a.args, a.pos), (*both, *s.body, differ), s.pos))
    return out


def own_names(message: str) -> str:
    """An error's message about the rewritten program in the names of the program as written."""
    message = re.sub(r"aggregate of (\w+)__all\b", r"the subsumptive clause of \1", message)
    return re.sub(r"\b(\w+)__all\b", r"\1", message)


def _one_ordered_column(prog: Program, d: Decl) -> tuple[int, str, Subsumption] | None:
    """(k, "min" | "max", the clause) when `d`'s one subsumptive clause (and no choice domain) drops a tuple for
    one that agrees on every column but k and is less (min) or greater (max) in column k."""
    clauses = [s for s in prog.subsumptions if s.dominated.pred == d.name]
    if d.choice or len(clauses) != 1 or len(clauses[0].body) != 1:
        return None
    s, (c,) = clauses[0], clauses[0].body
    a, b = s.dominated.args, s.dominating.args
    if not all(isinstance(t, Var) for t in (*a, *b)) or not isinstance(c, Constraint):
        return None
    differ = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
    names = [t.name for t in a if isinstance(t, Var)]
    if len(differ) != 1 or len(set(names)) != len(names) or b[differ[0]] in a:
        return None
    k = differ[0]
    lo, hi = a[k], b[k]  # dominated, dominating
    flipped = {">=": "<=", ">": "<", "<=": ">=", "<": ">"}
    op = (
        c.op
        if (c.left, c.right) == (lo, hi)
        else flipped.get(c.op)
        if (c.left, c.right) == (hi, lo)
        else None
    )
    # op relates the dominated value to the dominating one: `lo >= hi` drops larger ones (min)
    func = "min" if op in (">=", ">") else "max" if op in ("<=", "<") else None
    return (k, func, s) if func is not None else None


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
