"""Soufflé's `eqrel` relations: `.decl same(x: T, y: T) eqrel` holds the equivalence relation generated
by the pairs its rules and facts derive (reflexive on the elements they mention, symmetric, transitive).

The program is rewritten before the checks: the rules and facts of `same` derive `same__pairs`, and

    same__sym(x, y) :- same__pairs(x, y).    same__sym(y, x) :- same__pairs(x, y).
    same__sym(x, x) :- same__pairs(x, _).    same__sym(y, y) :- same__pairs(_, y).
    same(x, y) :- same__sym(x, y).           same(x, z) :- same(x, y), same__sym(y, z).

so `same` is the transitive closure of one relation, which the transitive closure operator maintains
incrementally under inserts and deletes (Soufflé's union-find cannot delete). A `.input` eqrel relation
is refused: its input table and its closure would share one name.
"""

from __future__ import annotations

from dbspark.errors import SchemaError, UnsupportedError
from dbspark.frontends.datalog.ast import Atom, Decl, Program, Rule, Var, Wild
from dbspark.frontends.datalog.check import at


def expand_eqrel(prog: Program) -> Program:
    """`prog` with every eqrel relation rewritten as the module describes (others unchanged)."""
    eq = {d.name: d for d in prog.decls if "eqrel" in d.qualifiers}
    if not eq:
        return prog
    for d in eq.values():
        types = [t for _, t in d.attrs]
        if len(types) != 2 or types[0] != types[1]:
            raise at(
                SchemaError,
                f".decl {d.name}: an eqrel relation has two attributes of one type, not ({', '.join(types)})",
                d.pos,
            )
    for dr in prog.directives:
        if dr.name in eq and dr.kind == "input":
            raise at(
                UnsupportedError,
                f".input {dr.name}: an eqrel relation cannot be an input (its input table and its "
                f"closure would share one name); read the pairs into another relation and derive "
                f"{dr.name} from it",
                dr.pos,
            )
    out = Program(
        types=list(prog.types),
        directives=list(prog.directives),
        functors=list(prog.functors),
        records=list(prog.records),
    )
    for d in prog.decls:
        if d.name not in eq:
            out.decls.append(d)
            continue
        out.decls.append(Decl(d.name, d.attrs, d.pos))
        for suffix in ("__pairs", "__sym"):
            out.decls.append(Decl(d.name + suffix, d.attrs, d.pos))
    for r in prog.rules:
        if r.head.pred in eq:
            head = Atom(r.head.pred + "__pairs", r.head.args, r.head.pos)
            r = Rule(head, r.body, r.pos, r.shown)
        out.rules.append(r)
    x, y, z, w = Var("x"), Var("y"), Var("z"), Wild()
    for name, d in eq.items():
        pairs, sym = name + "__pairs", name + "__sym"
        out.rules += [
            Rule(Atom(sym, (x, y)), (Atom(pairs, (x, y)),), d.pos),
            Rule(Atom(sym, (y, x)), (Atom(pairs, (x, y)),), d.pos),
            Rule(Atom(sym, (x, x)), (Atom(pairs, (x, w)),), d.pos),
            Rule(Atom(sym, (y, y)), (Atom(pairs, (w, y)),), d.pos),
            Rule(Atom(name, (x, y)), (Atom(sym, (x, y)),), d.pos),
            Rule(Atom(name, (x, z)), (Atom(name, (x, y)), Atom(sym, (y, z))), d.pos),
        ]
    return out
