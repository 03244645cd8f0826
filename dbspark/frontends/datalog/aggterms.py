"""Aggregates written as terms, as Soufflé allows: `r(x, count : { p(x, _) }) :- q(x).`,
`q(x) :- p(x, y), y < min z : { p(x, z) } + 1.` Each aggregate term becomes a fresh variable bound by an
aggregate literal of the rule's body (`v = count : { ... }`), so the checks, the lowering and the naive
evaluator see only the one form; `x = count : { ... }` itself stays that literal."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from dbspark.frontends.datalog.ast import (
    NOPOS,
    Aggregate,
    Atom,
    Constraint,
    Literal,
    Pos,
    Term,
    Var,
    Wild,
    rebuild,
    rebuild_literal,
)


@dataclass(frozen=True)
class AggTerm:
    """`func [expr] : { body }` where a value is expected (only until `lift` replaces it)."""

    func: str
    expr: Any
    body: tuple[Literal, ...]
    pos: Pos = field(default=NOPOS, compare=False)

    def __str__(self) -> str:
        e = f" {self.expr}" if self.expr is not None else ""
        return f"{self.func}{e} : {{ {', '.join(map(str, self.body))} }}"


def lift(head: Atom, body: list[Literal], counter: itertools.count) -> tuple[Atom, tuple[Literal, ...]]:
    """The rule with its aggregate terms replaced by fresh variables bound by aggregate literals."""
    extra: list[Literal] = []

    def fresh(t: Term) -> Term:
        if not isinstance(t, AggTerm):
            return t
        v = Var(f"@agg#{next(counter)}?", t.pos)  # ('@' cannot start a written variable)
        extra.append(Aggregate(v.name, t.func, t.expr, t.body, t.pos))
        return v

    out: list[Literal] = []
    for lit in body:
        if isinstance(lit, Constraint) and lit.op == "=":
            for v, a in ((lit.left, lit.right), (lit.right, lit.left)):
                if isinstance(v, (Var, Wild)) and isinstance(a, AggTerm):  # x = count : { ... }
                    name = v.name if isinstance(v, Var) else f"@agg#{next(counter)}?"  # (_ = min ...)
                    out.append(Aggregate(name, a.func, a.expr, a.body, lit.pos))
                    break
            else:
                out.append(rebuild_literal(lit, fresh))
            continue
        out.append(rebuild_literal(lit, fresh))
    new_head = Atom(head.pred, tuple(rebuild(a, fresh) for a in head.args), head.pos)
    return new_head, (*out, *extra)
