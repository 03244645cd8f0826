"""Magic Sets: goal-directed evaluation of the outputs' bound calls (`incremental-aggregation-monotonic-
programs.txt` §6; Bancilhon, Maier, Sagiv, Ullman 1986; Beeri and Ramakrishnan 1991).

A rule that calls a derived relation with bound arguments, `reach1(y) :- path(1, y).`, needs only the
facts of `path` whose first argument is 1, and those they are derived from. The rewrite gives every
such call an *adorned* copy of the relation (`path__bf`: first argument bound, second free) whose rules
start from a *magic* relation holding the bindings asked for (`path__bf__magic`), and derives those
bindings the way a top-down evaluation would pass them sideways, left to right through each rule's body
(its atoms in the order `check.plan` joins them):

    path__bf__magic(1).
    path__bf(x, y) :- path__bf__magic(x), edge(x, y).
    path__bf(x, y) :- path__bf__magic(x), path__bf(x, z), edge(z, y).
    reach1(y) :- path__bf(1, y).

The rewritten program is an ordinary program: the pipeline maintains it incrementally, the magic
relations with the rest. Relations no output reads any more are dropped.

What is rewritten (the rest is read whole, as before, which keeps the program stratified):

- a call is a positive atom of a relation that rules derive, without facts or input rows of its own:
  an atom of a body, a groupby's atom (bound at its group variables only), or an atom inside an
  aggregate's body (bound at the variables the aggregate shares with its rule); an argument is bound
  when it is a constant or a variable bound before it, except a cost argument of a relation recursive
  through aggregation, which is never bound (cost-restricted sips, the paper's Theorem 6.1: a magic
  relation of non-cost values, and the rewritten program must be monotonic itself, checked below);
- a position is bound in an adornment only where every rule of the relation has a variable or a
  constant in its head there (an expression in the head cannot be inverted);
- a relation computed whole anyway is read whole (`_whole`): the outputs, and what such a relation
  reads under negation, in an aggregate, with no argument bound, or within its own component;
- one magic relation collects the bindings of every call with the same adornment, so a call's
  bindings may come to depend on a negation or an aggregate the calling relation sits under; where
  the rewritten program is then not stratified (or not monotonic), the program is evaluated whole;
- a relation's own rules are rewritten as they are only where something reads it as it is, from the
  outputs down (else its recursive rules would feed its adorned copy's magic relation from the whole
  relation).
"""

from __future__ import annotations

from collections import deque
from dataclasses import replace

from dbspark.frontends.datalog.ast import (
    Aggregate,
    Atom,
    Const,
    Constraint,
    GroupBy,
    Literal,
    Negation,
    Rule,
    Var,
)
from dbspark.frontends.datalog.check import Checked, Relation, StratificationError, plan
from dbspark.frontends.datalog.stratify import Component, stratify

SEP = "__"


def magic_sets(checked: Checked, comps: list[Component]) -> Checked:
    """`checked` rewritten for its outputs' bound calls (unchanged if it has none)."""
    rels = checked.relations
    by_head: dict[str, list[Rule]] = {}
    for r in checked.rules:
        by_head.setdefault(r.head.pred, []).append(r)
    cost_at = {p: c.index for comp in comps if comp.costs for p, c in comp.costs.items()}
    callable_ = {p for p in by_head if rels[p].origin == "derived" and p not in checked.facts}
    bindable = {  # (cost-restricted sips: a cost argument is never bound, Theorem 6.1)
        p: [
            i != cost_at.get(p) and all(isinstance(r.head.args[i], (Var, Const)) for r in by_head[p])
            for i in range(len(rels[p].columns))
        ]
        for p in callable_
    }
    whole = _whole(checked, by_head, comps, bindable)
    w = _Rewriter(checked, by_head, callable_ - whole, bindable)
    for n, rel in rels.items():  # the relations read as they are, from the outputs down
        if rel.output:
            w.need(n)
    rules: list[Rule] = []
    while w.todo:
        p, ad = w.todo.popleft()
        for r in by_head.get(p, []):
            rules.append(w.rule(r, ad))
    if not w.made:
        return checked
    facts = {k: list(v) for k, v in checked.facts.items()}
    for k, rows in w.seeds.items():
        facts.setdefault(k, []).extend(rows)
    out = _pruned(Checked({**rels, **w.made}, rules + w.magic_rules, facts))
    try:  # the bindings of a call may come through a negation or an aggregate: then the rewritten
        stratify(sorted(out.relations), out.rules)  # program is not stratified, and the program is
    except StratificationError:  # evaluated whole (the paper's §6 keeps components in modules)
        return checked
    return out


def _whole(
    checked: Checked, by_head: dict[str, list[Rule]], comps: list[Component], bindable: dict[str, list[bool]]
) -> set[str]:
    """The relations computed whole anyway, whose calls gain nothing from an adorned copy (it would
    compute a part twice): the outputs, and what a relation computed whole reads under negation, in an
    aggregate, with no argument bound, or in its own component (a recursive rule of a relation computed
    whole: `p(x, y) :- e(x, z), p(z, y).` binds z, but p is needed at every z)."""
    comp_of = {p: i for i, c in enumerate(comps) for p in c.preds}
    whole = {n for n, r in checked.relations.items() if r.output}
    stack = list(whole)
    while stack:
        h = stack.pop()
        for r in by_head.get(h, []):
            for q in _read_whole(r.body, set(), r, comp_of, comp_of.get(h), bindable):
                if q not in whole:
                    whole.add(q)
                    stack.append(q)
    return whole


def _read_whole(
    body: tuple[Literal, ...],
    bound: set[str],
    r: Rule,
    comp_of: dict[str, int],
    comp: int | None,
    bindable: dict[str, list[bool]],
) -> set[str]:
    """The relations a rule body of a relation computed whole reads whole: under negation, with no
    argument bound, or within the relation's own component (`_whole`); the calls inside aggregates too."""
    reads: set[str] = set()
    for _, lit in plan(body, bound, r):
        if isinstance(lit, Negation):
            reads.add(lit.atom.pred)
        elif isinstance(lit, (Atom, GroupBy)):
            a, b = (lit, bound) if isinstance(lit, Atom) else (lit.atom, bound & set(lit.keys))
            if "b" not in _adornment(a, b, bindable) or comp_of.get(a.pred) == comp:
                reads.add(a.pred)
        elif isinstance(lit, Aggregate):
            reads |= _read_whole(lit.body, bound & lit.inner_vars(), r, comp_of, comp, bindable)
        bound = bound | _binds(lit, bound)
    return reads


def _adornment(a: Atom, bound: set[str], bindable: dict[str, list[bool]]) -> str:
    """'b' for each argument of a call bound (a constant, or a variable bound before it) at a position
    its relation can take bound, 'f' for the others."""
    ok = bindable.get(a.pred, [False] * len(a.args))
    return "".join(
        "b" if can and (isinstance(t, Const) or (isinstance(t, Var) and t.name in bound)) else "f"
        for t, can in zip(a.args, ok, strict=True)
    )


class _Rewriter:
    def __init__(
        self,
        checked: Checked,
        by_head: dict[str, list[Rule]],
        callable_: set[str],
        bindable: dict[str, list[bool]],
    ) -> None:
        self.rels = checked.relations
        self.by_head = by_head
        self.callable = callable_
        self.bindable = bindable
        self.todo: deque[tuple[str, str | None]] = deque()  # relations whose rules to rewrite (None:
        self.needed: set[str] = set()  # as they are, `needed`; else with that adornment)
        self.made: dict[str, Relation] = {}  # the adorned and magic relations
        self.seeds: dict[str, list[tuple]] = {}  # facts of magic relations (calls with constants)
        self.magic_rules: list[Rule] = []  # the rules passing bindings to the magic relations
        self.names: dict[tuple[str, str, bool], str] = {}
        self._taken = set(self.rels)

    def name(self, p: str, ad: str, magic: bool) -> str:
        key = (p, ad, magic)
        if key not in self.names:
            base = f"{p}{SEP}{ad}" + (f"{SEP}magic" if magic else "")
            n = base
            while n in self._taken:
                n += "_"
            self._taken.add(n)
            self.names[key] = n
        return self.names[key]

    def need(self, p: str) -> None:
        """p is read as it is (not adorned): its rules are rewritten too (once)."""
        if p not in self.needed:
            self.needed.add(p)
            self.todo.append((p, None))

    def adorned(self, p: str, ad: str) -> str:
        """The adorned relation of p for `ad`, made (with its magic relation) on first use."""
        n = self.name(p, ad, False)
        if n not in self.made:
            r = self.rels[p]
            self.made[n] = Relation(n, list(r.columns), list(r.types), "derived", r.pos)
            bound = [i for i, c in enumerate(ad) if c == "b"]
            m = self.name(p, ad, True)
            self.made[m] = Relation(
                m, [r.columns[i] for i in bound], [r.types[i] for i in bound], "derived", r.pos
            )
            self.todo.append((p, ad))
        return n

    def rule(self, r: Rule, ad: str | None) -> Rule:
        """Rule r with its bound calls adorned (their magic rules and seeds made); for an adorned
        relation (`ad`), its head renamed and its body started from the head's magic relation."""
        head = r.head
        prefix: list[Literal] = []
        bound: set[str] = set()
        if ad is not None:
            p = head.pred
            args = tuple(t for t, c in zip(head.args, ad, strict=True) if c == "b")
            prefix.append(Atom(self.name(p, ad, True), args, head.pos))
            bound = {t.name for t in args if isinstance(t, Var)}
            head = Atom(self.name(p, ad, False), head.args, head.pos)
        body = self._body(r.body, bound, prefix, r)
        return replace(r, head=head, body=tuple(prefix + body), shown="")

    def _body(
        self, body: tuple[Literal, ...], bound: set[str], before: list[Literal], r: Rule
    ) -> list[Literal]:
        """A body (of rule r, or of an aggregate in it) planned, its bound calls adorned: atoms, the
        atom of a groupby (bound at its group variables only: the others are local to it), and the
        calls inside an aggregate (bound at the variables it shares with the rule, its group); `before`:
        the literals evaluated before the body, whose bindings a magic rule passes on."""
        out: list[Literal] = []
        for _, lit in plan(body, bound, r):
            if isinstance(lit, Atom):
                call = _adornment(lit, bound, self.bindable)
                if lit.pred in self.callable and "b" in call:
                    lit = self._call(lit, call, before + out)
                else:
                    self.need(lit.pred)
            elif isinstance(lit, GroupBy):
                call = _adornment(lit.atom, bound & set(lit.keys), self.bindable)
                if lit.atom.pred in self.callable and "b" in call:
                    lit = replace(lit, atom=self._call(lit.atom, call, before + out))
                else:
                    self.need(lit.atom.pred)
            elif isinstance(lit, Negation):
                self.need(lit.atom.pred)
            elif isinstance(lit, Aggregate):
                lit = replace(
                    lit, body=tuple(self._body(lit.body, bound & lit.inner_vars(), before + out, r))
                )
            out.append(lit)
            bound = bound | _binds(lit, bound)
        return out

    def _call(self, a: Atom, call: str, before: list[Literal]) -> Atom:
        """The adorned atom for a bound call, with the magic rule (or seed fact) passing its bindings."""
        name = self.adorned(a.pred, call)
        m = self.name(a.pred, call, True)
        args = tuple(t for t, c in zip(a.args, call, strict=True) if c == "b")
        if not before:  # every bound argument is a constant: a seed
            assert all(isinstance(t, Const) for t in args)
            self.seeds.setdefault(m, []).append(tuple(t.value for t in args))  # type: ignore[union-attr]
        elif Atom(m, args) not in before:  # (else the rule derives nothing new: m(x) :- m(x), ...)
            self.magic_rules.append(Rule(Atom(m, args, a.pos), tuple(before), a.pos))
        return Atom(name, a.args, a.pos)


def _binds(lit: Literal, bound: set[str]) -> set[str]:
    """The variables a literal of a planned body binds, given those bound before it."""
    if isinstance(lit, Atom):
        return lit.vars()
    if isinstance(lit, GroupBy):
        return {*lit.keys, lit.var}
    if isinstance(lit, Aggregate):
        return {lit.var}
    if isinstance(lit, Constraint) and lit.op == "=":
        return {v for v in lit.vars() if v not in bound}
    assert isinstance(lit, (Negation, Constraint))
    return set()


def _pruned(c: Checked) -> Checked:
    """`c` without the derived relations no output reads (directly or through other relations)."""
    reads: dict[str, set[str]] = {}
    for r in c.rules:
        reads.setdefault(r.head.pred, set()).update(_preds(r.body))
    keep = {n for n, r in c.relations.items() if r.output or r.origin != "derived"}
    stack = list(keep)
    while stack:
        for q in reads.get(stack.pop(), ()):
            if q not in keep:
                keep.add(q)
                stack.append(q)
    rels = {n: r for n, r in c.relations.items() if n in keep}
    return Checked(
        rels,
        [r for r in c.rules if r.head.pred in keep],
        {k: v for k, v in c.facts.items() if k in keep},
    )


def _preds(body: tuple[Literal, ...]) -> set[str]:
    out: set[str] = set()
    for lit in body:
        if isinstance(lit, Atom):
            out.add(lit.pred)
        elif isinstance(lit, (Negation, GroupBy)):
            out.add(lit.atom.pred)
        elif isinstance(lit, Aggregate):
            out |= _preds(lit.body)
    return out
