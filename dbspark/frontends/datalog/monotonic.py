"""Recursion through aggregation: the monotonic programs of Ross and Sagiv, their cost predicates and
cost arguments (`incremental-aggregation-monotonic-programs.txt` §4.1, Definitions 4.1-4.3).

A recursive component whose rules aggregate over its own relations (`d = min x : { ... }`,
`groupby(p(...), [...], s = sum<n>)`) has a meaning when it is *monotonic*: some of its predicates are
*cost predicates*, with one *cost argument* ordered by "better than" (≼), and every rule maps better
facts to better (or more) facts. Its meaning, the monotonic semantics, is then the least fixpoint of
`S -> nf(T_P(S))` from the empty set (§4.1.1 and IncrEvalMonotonic, §5), where the normal form `nf`
keeps, of the facts of a cost predicate that differ only in their cost, the best one.

`cost_predicates` infers them, and refuses a program it cannot show monotonic, naming the rule and why.
The inference, by a fixpoint over the component's rules:

- the value an aggregate aggregates over a predicate of the component is a cost: a plain variable at
  an argument of such an atom makes that argument its predicate's cost argument, ordered by the
  aggregate (`min`: lower is better; `max`, `sum`: higher is better);
- a rule whose head receives a cost (an aggregate's result, or a body atom's cost through `+`, `-` by
  a term without costs, `*` or `/` by a positive constant) makes that head argument its cost argument,
  with the same order (`count`'s result is a cost: higher is better).

A cost may then be used only where a better cost gives a better or the same result: in the head, as
its cost argument (one per head); aggregated by an aggregate of its order (`count` counts any); and in
comparisons that a better cost keeps true (`c < k`, `c <= k` under `min`; `c > k`, `c >= k` under `max`
and `sum`). A cost compared for equality, joined on, grouped by, negated, put in another head argument,
subtracted from something or negated arithmetically is refused, as is `mean` over the component. A sum
in the recursion is monotonic over non-negative values only (the paper's company control sums
fractions of stock); that is a property of the data, checked as it arrives (`lower.py`
`RuleLowering._nonnegative`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
    outer_vars,
    term_vars,
)
from dbspark.frontends.datalog.check import StratificationError, at, group_vars, outside_vars

MIN, MAX = "min", "max"  # lower is better / higher is better
ORDER_OF = {"min": MIN, "max": MAX, "sum": MAX, "count": MAX}


class MonotonicityError(StratificationError):
    """A program recursive through aggregation that is not monotonic (or not shown to be)."""


@dataclass(frozen=True)
class Cost:
    """A cost predicate's cost argument (its position) and order."""

    index: int
    better: str  # MIN or MAX

    def __str__(self) -> str:
        return "lower is better" if self.better == MIN else "higher is better"


class _Refused(Exception):
    def __init__(self, why: str) -> None:
        self.why = why


def cost_predicates(preds: list[str], rules: list[Rule], cycle: str = "") -> dict[str, Cost]:
    """The cost predicates of a component recursive through aggregation (`preds`, its `rules`; `cycle`
    shows one cycle through an aggregate), or MonotonicityError naming the first rule shown not
    monotonic."""
    comp = set(preds)
    costs: dict[str, Cost] = {}
    while True:  # every rule adds the cost arguments it shows, until none does (knowing more cost
        before = dict(costs)  # arguments only finds more uses to check: a refusal is never premature)
        for r in rules:
            try:
                _Rule(r, comp, costs).run()
            except _Refused as e:
                raise at(MonotonicityError, _message(r, e.why, cycle), r.pos) from None
        if costs == before:
            return costs


def _message(r: Rule, why: str, cycle: str) -> str:
    return (
        f"{cycle + ', and ' if cycle else ''}rule {r} is not monotonic: {why} (a recursion through min, "
        "max, sum or count needs better costs to give better or more facts: "
        "incremental-aggregation-monotonic-programs.txt §4.1)"
    )


def _shown(v: str) -> str:
    return v.split("#")[0]


class _Rule:
    """One rule's costs: `taint` maps each variable holding a cost to its order."""

    def __init__(self, rule: Rule, comp: set[str], costs: dict[str, Cost]) -> None:
        self.rule = rule
        self.comp = comp
        self.costs = costs
        self.taint: dict[str, str] = {}

    def run(self) -> None:
        r = self.rule
        self.body(r.body, outside=None)
        self.head(r.head)

    # ---- terms
    def order(self, t: Term) -> str | None:
        """The order of a term in the costs it reads (None: it reads none); refuses a term that is not
        strictly increasing in its costs."""
        if isinstance(t, Var):
            return self.taint.get(t.name)
        if isinstance(t, Neg):
            if self.order(t.arg) is not None:
                raise _Refused(f"-{t.arg} negates the cost {t.arg}")
            return None
        if isinstance(t, Call):
            orders = {o for o in map(self.order, t.args) if o is not None}
            if not orders:
                return None
            if t.name in ("min", "max") and len(orders) == 1:  # increasing in every argument
                return orders.pop()
            cost = next(a for a in t.args if self.order(a) is not None)
            raise _Refused(f"{t} is not increasing in the cost {cost}")
        if not isinstance(t, BinOp):
            return None
        a, b = self.order(t.left), self.order(t.right)
        if a is None and b is None:
            return None
        if t.op == "+":
            if a is not None and b is not None and a != b:
                raise _Refused(f"{t} adds costs of opposite orders")
            return a or b
        if t.op == "-" and b is None:
            return a
        if t.op in ("*", "/") and b is None and _positive(t.right):
            return a
        if t.op == "*" and a is None and _positive(t.left):
            return b
        cost = t.left if a is not None else t.right
        raise _Refused(f"{t} is not increasing in the cost {cost}")

    # ---- bodies
    def body(self, body: tuple[Literal, ...], outside: set[str] | None) -> None:
        """Taints the variables a body binds to costs, then checks every use. `outside`: for an
        aggregate's body, its group variables (which must not be costs)."""
        atoms = [lit for lit in body if isinstance(lit, Atom)]
        seen: dict[str, int] = {}
        for a in atoms:
            for t in a.args:
                for v in term_vars(t):
                    seen[v] = seen.get(v, 0) + 1
        for a in atoms:
            self.atom_costs(a, seen, outside)
        for lit in body:
            if isinstance(lit, GroupBy):
                self.groupby(lit)
        pending = [lit for lit in body if isinstance(lit, (Constraint, Aggregate))]
        bound = set().union(*[outer_vars(x) for x in body if isinstance(x, (Atom, GroupBy))])
        bound |= set(outside or ())
        while pending:  # assignments and aggregates in an order that binds what the next ones read
            for i, lit in enumerate(pending):
                if isinstance(lit, Aggregate):
                    need = set(group_vars(lit, outside_vars(self.rule, lit)))
                    if need <= bound:
                        self.aggregate(lit)
                        bound.add(lit.var)
                        del pending[i]
                        break
                else:
                    target = _assigned(lit, bound)
                    if target is not None or lit.vars() <= bound:
                        self.constraint(lit, target)
                        bound |= lit.vars()
                        del pending[i]
                        break
            else:
                break  # (`check.plan` has refused an unsafe rule already)
        for lit in body:
            if isinstance(lit, Negation):
                used = [v for v in lit.atom.vars() if v in self.taint]
                if used:
                    raise _Refused(f"the cost {_shown(used[0])} is read under the negation {lit}")

    def atom_costs(self, a: Atom, seen: dict[str, int], outside: set[str] | None) -> None:
        cost = self.costs.get(a.pred) if a.pred in self.comp else None
        for i, t in enumerate(a.args):
            vs = term_vars(t)
            if cost is not None and i == cost.index:
                if isinstance(t, Const):
                    raise _Refused(f"{a} compares the cost argument of {a.pred} with the constant {t}")
                if isinstance(t, Var):
                    if seen[t.name] > 1 or (outside is not None and t.name in outside):
                        raise _Refused(f"the cost {t} of {a} is joined on (it occurs in another atom)")
                    self.taint[t.name] = cost.better
            elif any(v in self.taint for v in vs):
                raise _Refused(f"the cost {t} is used as a non-cost argument of {a}")

    def groupby(self, g: GroupBy) -> None:
        a = g.atom
        keys = set(g.keys)
        cost = self.costs.get(a.pred) if a.pred in self.comp else None
        if cost is not None:
            t = a.args[cost.index]
            if isinstance(t, Var) and t.name in keys:
                raise _Refused(f"{g} groups by the cost {t} of {a.pred}")
            if isinstance(t, Const):
                raise _Refused(f"{g} compares the cost argument of {a.pred} with the constant {t}")
        inner: dict[str, str] = {}
        if cost is not None and isinstance(a.args[cost.index], Var):
            inner[a.args[cost.index].name] = cost.better  # type: ignore[union-attr]
        reads_comp = a.pred in self.comp

        def seed(v: str) -> bool:
            i = next((i for i, t in enumerate(a.args) if isinstance(t, Var) and t.name == v), None)
            return reads_comp and i is not None and self._seed(a, i, g.func)

        res = self.aggregated(g.func, g.expr, inner, reads_comp, seed, str(g))
        if res is not None:
            self.taint[g.var] = res

    def aggregate(self, agg: Aggregate) -> None:
        group = set(group_vars(agg, outside_vars(self.rule, agg)))
        costly = [v for v in group if v in self.taint]
        if costly:
            raise _Refused(f"{agg} groups by the cost {_shown(costly[0])}")
        sub = _Rule(self.rule, self.comp, self.costs)
        sub.body(agg.body, outside=group)
        atoms = [x for x in agg.body if isinstance(x, Atom)]
        reads_comp = any(x.pred in self.comp for x in atoms)

        def seed(expr_var: str) -> bool:
            for x in atoms:
                for i, t in enumerate(x.args):
                    if isinstance(t, Var) and t.name == expr_var and x.pred in self.comp:
                        return self._seed(x, i, agg.func)
            return False

        res = self.aggregated(agg.func, agg.expr, sub.taint, reads_comp, seed, str(agg))
        if res is not None:
            self.taint[agg.var] = res

    def aggregated(
        self, func: str, expr: Term | None, inner: dict[str, str], reads_comp: bool, seed: Any, shown: str
    ) -> str | None:
        """The order of an aggregate's result (None: no cost; it reads nothing of the component), after
        checking what it aggregates: a cost of the aggregate's order, or a value that is not a cost
        (the aggregate of a growing set: `seed(v)` makes a plain variable v its atom's cost argument)."""
        if not reads_comp and not inner:
            return None
        if func == "mean":
            raise _Refused(f"{shown}: mean is not monotonic")
        if func == "count" or expr is None:
            return ORDER_OF[func]
        sub = _Rule(self.rule, self.comp, self.costs)
        sub.taint = inner
        got = sub.order(expr)
        if got is None:
            if isinstance(expr, Var):
                seed(expr.name)
            return ORDER_OF[func]
        if got != ORDER_OF[func]:
            raise _Refused(f"{shown} takes the {func} of a cost whose order is {Cost(0, got)}")
        return got

    def _seed(self, a: Atom, i: int, func: str) -> bool:
        """Make argument i of `a` its predicate's cost argument, ordered by `func` (False if it is
        another argument already: then what is aggregated is not the cost)."""
        want = Cost(i, ORDER_OF[func])
        have = self.costs.get(a.pred)
        if have is None:
            self.costs[a.pred] = want
            return True
        if have.index != i:
            return False
        if have.better != want.better:
            raise _Refused(f"{func} over {a} disagrees with the order of its cost argument ({have})")
        return True

    def constraint(self, c: Constraint, target: str | None) -> None:
        if target is not None:  # v = expr: v gets expr's order
            e = c.right if isinstance(c.left, Var) and c.left.name == target else c.left
            o = self.order(e)
            if o is not None:
                self.taint[target] = o
            return
        a, b = self.order(c.left), self.order(c.right)
        if a is None and b is None:
            return
        if a is not None and b is not None:
            raise _Refused(f"the comparison {c} compares two costs")
        if c.op in ("=", "!="):
            raise _Refused(f"the comparison {c} tests a cost for (in)equality")
        # the side that holds the cost, and whether the comparison keeps holding as it gets larger
        larger_ok = (c.op in (">", ">=")) == (a is not None)
        order = a or b
        if larger_ok != (order == MAX):
            raise _Refused(f"the comparison {c} can turn false as the cost gets better ({Cost(0, order)})")  # type: ignore[arg-type]

    def head(self, h: Atom) -> None:
        found = [(i, o) for i, t in enumerate(h.args) if (o := self.order(t)) is not None]
        if len(found) > 1:
            raise _Refused(f"the head {h} has more than one cost argument")
        have = self.costs.get(h.pred)
        if found:
            i, o = found[0]
            if have is None:
                self.costs[h.pred] = Cost(i, o)
            elif have.index != i:
                raise _Refused(
                    f"the head {h} puts a cost at argument {i + 1}, but the cost argument of {h.pred} "
                    f"is argument {have.index + 1}"
                )
            elif have.better != o:
                raise _Refused(
                    f"the head {h} gets a cost whose order ({Cost(0, o)}) is not {h.pred}'s ({have})"
                )


def _assigned(c: Constraint, bound: set[str]) -> str | None:
    """The variable `c` assigns (`v = expr` with v not yet bound and expr's variables bound), or None."""
    if c.op != "=":
        return None
    for a, b in ((c.left, c.right), (c.right, c.left)):
        if isinstance(a, Var) and a.name not in bound and term_vars(b) <= bound:
            return a.name
    return None


def _positive(t: Term) -> bool:
    """A positive constant: multiplying by it keeps a cost strictly increasing (by 0 it would not,
    which the nested scope's convergence check assumes: `operators/fixpoint.py`)."""
    return isinstance(t, Const) and t.type in ("number", "float") and t.value > 0
