"""Rule bodies with disjunctions and negated groups, as Soufflé writes them, brought to disjunctive normal
form: `a(x) :- b(x), (c(x) ; !(d(x), x > 2)).` becomes the two bodies `b(x), c(x)` and
`b(x), !d(x) ; b(x), x <= 2`, i.e. two rules with one head (a derived relation is a set, so the rules'
union is the disjunction).

A negation is pushed down to the literals by De Morgan's laws: `!(A ; B)` is `!A, !B`, `!(A, B)` is
`!A ; !B`, `!!A` is `A`; a negated comparison is the opposite comparison, a negated atom a negation.
A negated aggregate or groupby literal is refused.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Union

from dbspark.errors import ParseError
from dbspark.frontends.datalog.ast import Atom, Constraint, Literal, Negation

OPPOSITE = {"=": "!=", "!=": "=", "<": ">=", ">=": "<", ">": "<=", "<=": ">"}


@dataclass(frozen=True)
class Not:
    arg: Formula


@dataclass(frozen=True)
class And:
    args: tuple[Formula, ...]


@dataclass(frozen=True)
class Or:
    args: tuple[Formula, ...]


Formula = Union[Literal, Not, And, Or]  # noqa: UP007 (a forward reference in a runtime alias)
Bodies = list[list[Literal]]


def normal_form(f: Formula, negated: bool = False) -> Bodies:
    """`f` (negated if `negated`) as a disjunction of conjunctions of literals."""
    if isinstance(f, Not):
        return normal_form(f.arg, not negated)
    if isinstance(f, (And, Or)):
        parts = [normal_form(x, negated) for x in f.args]
        if isinstance(f, Or) != negated:  # a disjunction (or a negated conjunction): the union
            return [body for part in parts for body in part]
        return [[lit for body in combo for lit in body] for combo in itertools.product(*parts)]
    return [[_negate(f) if negated else f]]


def _negate(lit: Literal) -> Literal:
    if isinstance(lit, Atom):
        return Negation(lit, lit.pos)
    if isinstance(lit, Negation):
        return lit.atom
    if isinstance(lit, Constraint):
        return Constraint(OPPOSITE[lit.op], lit.left, lit.right, lit.pos)
    raise ParseError(f"Datalog: the negation of {lit} is not supported", lit.pos.line, lit.pos.column)
