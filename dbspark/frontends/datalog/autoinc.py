"""Soufflé's `autoinc()`: a number for each binding of a rule's body, unique across the program.

Soufflé increments one counter each time a rule fires, so its numbers follow its evaluation order. dbspark
makes them a function of the program's current contents instead, so that a result does not depend on the
order of its changes and the incremental and the from-scratch results are one: the bindings of a rule's
body (a binding of weight w counted w times) are numbered 0, 1, ... in the order of the rule's variables
(by name; `operators/numbering.py`), and the k-th of the program's n `autoinc()` calls (in the order
written, after disjunctions are split into rules) gives binding i the number i * n + k. With one call
the numbers are 0 .. count - 1, as Soufflé gives them for a rule evaluated once.

Not incremental by nature: a change renumbers every binding after it, and a step costs the size of the
rule's result. Refused, naming the rule: autoinc() in a body (in an assignment, a comparison or an
aggregate: write it in the head) and in a recursive rule (new numbers at every iteration would never
reach a fixpoint).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from dbspark.errors import UnsupportedError
from dbspark.frontends.datalog.ast import (
    Atom,
    Call,
    Literal,
    Program,
    Rule,
    Term,
    at,
    rebuild,
    rebuild_literal,
    subterms,
)

AUTOINC = "autoinc"


def has_autoinc(t: Term) -> bool:
    return (isinstance(t, Call) and t.name == AUTOINC) or any(map(has_autoinc, subterms(t)))


def in_head(rule: Rule) -> bool:
    return any(map(has_autoinc, rule.head.args))


def number_calls(prog: Program) -> Program:
    """The program with each `autoinc()` call's place "k/n" in its `Call.type` (k-th of n)."""
    k = itertools.count()
    placed = _rebuilt(prog.rules, lambda t: Call(t.name, t.args, t.pos, str(next(k))))
    n = next(k)  # (the calls placed)
    if n:
        prog.rules = _rebuilt(placed, lambda t: Call(t.name, t.args, t.pos, f"{t.type}/{n}"))
    return prog


def _rebuilt(rules: list[Rule], f: Callable[[Call], Term]) -> list[Rule]:
    """The rules with every autoinc() call (heads and bodies) replaced by f(call)."""

    def g(t: Term) -> Term:
        return f(t) if isinstance(t, Call) and t.name == AUTOINC else t

    return [
        Rule(
            Atom(r.head.pred, tuple(rebuild(a, g) for a in r.head.args), r.head.pos),
            tuple(rebuild_literal(x, g) for x in r.body),
            r.pos,
            r.shown,
        )
        for r in rules
    ]


def place(call: Call) -> tuple[int, int]:
    """(k, n): the call is the k-th of the program's n."""
    k, n = call.type.split("/")
    return int(k), int(n)


def check_rule(rule: Rule, recursive: bool = False) -> None:
    """Refuse autoinc() in a body, and in a recursive rule."""
    for lit in rule.body:
        if _in_literal(lit):
            raise at(
                UnsupportedError,
                f"autoinc() in the body of rule {rule}: dbspark numbers a rule's bindings, so autoinc() "
                "may only be an argument of the head",
                rule.pos,
            )
    if recursive and in_head(rule):
        raise at(
            UnsupportedError,
            f"autoinc() in the recursive rule {rule}: a new number at every iteration would never "
            "reach a fixpoint",
            rule.pos,
        )


def _in_literal(lit: Literal) -> bool:
    """Whether an autoinc() call is anywhere in the literal (an aggregate's body too)."""
    seen: list[Call] = []

    def note(t: Term) -> Term:
        if isinstance(t, Call) and t.name == AUTOINC:
            seen.append(t)
        return t

    rebuild_literal(lit, note)
    return bool(seen)
