"""A naive bottom-up Datalog evaluator (the oracle of the Datalog front end) and hypothesis strategies
for random stratified programs and change streams.

`evaluate(text, inputs)` computes every relation of a program from scratch with plain Python sets:
strata by a simple relaxation (a relation sits at least as high as what it reads positively, and
strictly higher than what it negates or aggregates), then, stratum by stratum, every rule is applied
to the current relations until nothing changes (naive iteration, no semi-naive tricks). Rule bodies
are evaluated by extending a list of variable bindings literal by literal. It shares only the parser
with `dbspark.frontends.datalog`, not the checks, stratification or lowering.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from dbspark.errors import DataError
from dbspark.frontends.datalog.ast import (
    Aggregate,
    Atom,
    BinOp,
    Call,
    Const,
    Constraint,
    Decl,
    GroupBy,
    Literal,
    Neg,
    Negation,
    Program,
    Rule,
    Term,
    Var,
    Wild,
    has_wild,
    outer_vars,
    term_vars,
)
from dbspark.frontends.datalog.autoinc import in_head, place
from dbspark.frontends.datalog.parser import parse
from dbspark.frontends.datalog.records import decode, encode, is_record_term, is_structured
from dbspark.frontends.datalog.resolve import type_bases
from dbspark.frontends.datalog.stratify import recursive_relations
from dbspark.testing.functors import functor, in_range, souffle_range

Rel = set[tuple]
Binding = dict[str, Any]


# ---- the evaluator -----------------------------------------------------------------------------------
def _value(t: Term, b: Binding) -> Any:
    if isinstance(t, Var):
        return b[t.name]
    if isinstance(t, Const):
        return t.value
    if isinstance(t, Call) and t.name == "autoinc":  # the binding's number (`autoinc.py`)
        k, n = place(t)
        return b["#rank"] * n + k
    if is_record_term(t):  # a record a tuple, nil None, a branch (name, tuple) (`records.decode`)
        assert isinstance(t, Call)
        args = tuple(_value(a, b) for a in t.args)
        return args if t.name == "[]" else None if t.name == "nil" else (t.name[1:], args)
    if isinstance(t, Neg):
        return in_range(-_value(t.arg, b), t)
    if isinstance(t, Call):
        return in_range(functor(t, [_value(a, b) for a in t.args]), t)
    assert isinstance(t, BinOp)
    x, y = _value(t.left, b), _value(t.right, b)
    if t.op in ("+", "-", "*"):
        return in_range(x + y if t.op == "+" else x - y if t.op == "-" else x * y, t)
    if isinstance(x, float) or isinstance(y, float):
        return x / y if t.op == "/" else x % y
    if y == 0:
        raise DataError(f"oracle: {t} by zero")
    q = abs(x) // abs(y) * (1 if (x >= 0) == (y >= 0) else -1)  # C++: toward zero
    return q if t.op == "/" else x - q * y


def _is_range(t: Term) -> bool:
    return isinstance(t, Call) and t.name == "range"


def _values(gen: Call, b: Binding) -> list[int]:
    return souffle_range(*[_value(a, b) for a in gen.args])


def _bound(t: Term, b: Binding) -> bool:
    return term_vars(t) <= set(b)


def _unify(t: Term, v: Any, b: Binding) -> Binding | None:
    """`b` extended so that the pattern `t` (a record's, nil, a branch's, or any term) is the value v."""
    if isinstance(t, Wild):
        return b
    if isinstance(t, Var) and t.name not in b:
        return {**b, t.name: v}
    if not is_record_term(t) or (term_vars(t) <= set(b) and not has_wild(t)):
        return b if _value(t, b) == v else None
    assert isinstance(t, Call)
    if t.name == "[]":
        args = v
    elif t.name.startswith("$") and v is not None and v[0] == t.name[1:]:
        args = v[1]
    else:
        return None
    if args is None or len(args) != len(t.args):
        return None
    out: Binding | None = b
    for x, y in zip(t.args, args, strict=True):
        out = _unify(x, y, out) if out is not None else None
    return out


def _match(a: Atom, row: tuple, b: Binding) -> Binding | None:
    out = dict(b)
    for t, v in zip(a.args, row, strict=True):
        if isinstance(t, Wild):
            continue
        if is_record_term(t):
            m = _unify(t, v, out)
            if m is None:
                return None
            out = m
            continue
        if isinstance(t, Var) and t.name not in out:
            out[t.name] = v
        elif _is_range(t):  # a generator as an argument: the row's value is one of its values
            if v not in _values(t, out):  # type: ignore[arg-type]
                return None
        elif _value(t, out) != v:
            return None
    return out


CMP = {
    "=": lambda x, y: x == y,
    "!=": lambda x, y: x != y,
    "<": lambda x, y: x < y,
    "<=": lambda x, y: x <= y,
    ">": lambda x, y: x > y,
    ">=": lambda x, y: x >= y,
}


class _Eval:
    def __init__(self, rels: dict[str, Rel]) -> None:
        self.rels = rels

    def body(self, rule: Rule, body: tuple[Literal, ...], start: list[Binding]) -> list[Binding]:
        """All bindings (a bag: one per combination of matched tuples) that satisfy `body`."""
        bs = start
        rest = []
        for lit in body:
            if isinstance(lit, Atom):
                bs = [m for b in bs for row in self.rels[lit.pred] if (m := _match(lit, row, b)) is not None]
            elif isinstance(lit, GroupBy):
                bs = [m for b in bs for m in self.groupby(lit, b)]
            else:
                rest.append(lit)
        while rest:
            for i, lit in enumerate(rest):
                done = self.other(rule, lit, bs)
                if done is not None:
                    bs = done
                    del rest[i]
                    break
            else:
                raise AssertionError(f"oracle: cannot order {rest} in {rule}")
        return bs

    def other(self, rule: Rule, lit: Literal, bs: list[Binding]) -> list[Binding] | None:
        if not bs:
            return bs
        known = set(bs[0])
        if isinstance(lit, Constraint) and lit.op == "=" and _is_range(lit.left) != _is_range(lit.right):
            gen, other = (lit.left, lit.right) if _is_range(lit.left) else (lit.right, lit.left)
            assert isinstance(gen, Call)
            if not term_vars(gen) <= known:
                return None
            if term_vars(other) <= known:
                return [b for b in bs if _value(other, b) in _values(gen, b)]
            if isinstance(other, Var):
                return [{**b, other.name: x} for b in bs for x in _values(gen, b)]
            return None
        if isinstance(lit, Constraint):
            if lit.vars() <= known:
                return [b for b in bs if CMP[lit.op](_value(lit.left, b), _value(lit.right, b))]
            if lit.op == "=":
                for v, e in ((lit.left, lit.right), (lit.right, lit.left)):
                    if isinstance(v, Var) and v.name not in known and term_vars(e) <= known:
                        return [{**b, v.name: _value(e, b)} for b in bs]
                    if is_record_term(v) and term_vars(e) <= known:
                        return [m for b in bs if (m := _unify(v, _value(e, b), b)) is not None]
            return None
        if isinstance(lit, Negation):
            if not lit.vars() <= known:
                return None
            return [
                b
                for b in bs
                if not any(_match(lit.atom, row, b) is not None for row in self.rels[lit.atom.pred])
            ]
        assert isinstance(lit, Aggregate)
        outside = set(rule.head.vars())
        for o in rule.body:
            if o is not lit:
                outside |= outer_vars(o)
        group = (lit.inner_vars() - {lit.var}) & outside
        if not group <= known:
            return None
        out = []
        for b in bs:
            inner = self.body(rule, lit.body, [{g: b[g] for g in group}])
            vals = [_value(lit.expr, ib) for ib in inner] if lit.expr is not None else [1] * len(inner)
            r = _aggregate(lit.func, vals)
            if r is None:
                continue
            if lit.var in b:
                if b[lit.var] == r:
                    out.append(b)
            else:
                out.append({**b, lit.var: r})
        return out

    def groupby(self, g: GroupBy, b: Binding) -> list[Binding]:
        groups: dict[tuple, list] = {}
        for row in self.rels[g.atom.pred]:
            m = _match(g.atom, row, {})
            if m is None:
                continue
            key = tuple(m[k] for k in g.keys)
            groups.setdefault(key, []).append(_value(g.expr, m) if g.expr is not None else 1)
        out = []
        for key, vals in groups.items():
            cand = dict(zip(g.keys, key, strict=True))
            r = _aggregate(g.func, vals)
            if r is None or any(k in b and b[k] != v for k, v in cand.items()):
                continue
            if g.var in b and b[g.var] != r:
                continue
            out.append({**b, **cand, g.var: r})
        return out


def _aggregate(func: str, vals: list) -> Any:
    if func == "count":
        return len(vals)
    if func == "sum":
        return sum(vals)
    if not vals:
        return None
    if func == "min":
        return min(vals)
    if func == "max":
        return max(vals)
    return sum(vals) / len(vals)  # mean


def _reads(body: Iterable[Literal], negative: bool) -> list[tuple[str, bool]]:
    out = []
    for lit in body:
        if isinstance(lit, Atom):
            out.append((lit.pred, negative))
        elif isinstance(lit, Negation):
            out.append((lit.atom.pred, True))
        elif isinstance(lit, GroupBy):
            out.append((lit.atom.pred, True))
        elif isinstance(lit, Aggregate):
            out += _reads(lit.body, True)
    return out


def strata(prog: Program, filtered: frozenset[str] = frozenset()) -> dict[str, int]:
    """Stratum numbers by relaxation; raises ValueError if the program is not stratifiable. A relation
    in `filtered` (subsumption, choice) is read only from a higher stratum, as a negation is."""
    preds = {d.name for d in prog.decls} | {r.head.pred for r in prog.rules}
    s = dict.fromkeys(preds, 0)
    for _ in range(len(preds) + 2):
        changed = False
        for r in prog.rules:
            for q, neg in _reads(r.body, False):  # (autoinc numbers a rule's complete bindings)
                need = s.get(q, 0) + (1 if neg or q in filtered or in_head(r) else 0)
                if s[r.head.pred] < need:
                    s[r.head.pred] = need
                    changed = True
        if not changed:
            return s
    raise ValueError("not stratifiable")


# reachability from the nodes of `root` (the recursion benchmarks' and the Spark placement tests')
REACH_FROM_ROOTS = """
.decl edge(x: number, y: number)
.decl root(x: number)
.input edge, root
.decl reach(x: number)
.output reach
reach(x) :- root(x).
reach(y) :- reach(x), edge(x, y).
"""

# reachability from node 1 through the closure `path` (a bound call: Magic Sets' example)
REACH_FROM_1 = """
.decl edge(x: number, y: number)
.input edge
.decl path(x: number, y: number)
path(x, y) :- edge(x, y).
path(x, y) :- path(x, z), edge(z, y).
.decl reach1(y: number)
.output reach1
reach1(y) :- path(1, y).
"""


def program_of(checked: Any) -> Program:
    """A checked program (`frontends.datalog.check.Checked`, e.g. rewritten by Magic Sets) as a program
    tree `evaluate` runs: its relations declared, its facts as rules without a body."""
    decls = [Decl(n, tuple(zip(r.columns, r.types, strict=True))) for n, r in checked.relations.items()]
    facts = [
        Rule(
            Atom(
                n,
                tuple(
                    Const(v, "number" if t == "unsigned" else t)
                    for v, t in zip(row, checked.relations[n].types, strict=True)
                ),
            ),
            (),
        )
        for n, rows in checked.facts.items()
        for row in rows
    ]
    return Program(decls=decls, rules=[*facts, *checked.rules])


def text_of(checked: Any) -> str:
    """A checked program (e.g. rewritten by Magic Sets) as program text with every derived relation an
    output: the pipeline that runs it shows the facts of each (the Magic Sets bench counts them)."""
    lines = []
    for n, r in checked.relations.items():
        cols = ", ".join(f"{c}: {t}" for c, t in zip(r.columns, r.types, strict=True))
        lines.append(f".decl {n}({cols})")
        lines.append(f".output {n}" if r.origin == "derived" else f".input {n}")
    for n, rows in checked.facts.items():
        for row in rows:
            lines.append(f"{n}({', '.join(json.dumps(v) for v in row)}).")
    lines += [str(r) for r in checked.rules]
    return "\n".join(lines) + "\n"


def evaluate(
    text: str | Program,
    inputs: Mapping[str, Iterable[tuple]],
    external: Mapping[str, Iterable[tuple]] | None = None,
    max_rounds: int = 10_000,
) -> dict[str, Rel]:
    """Every relation of the program, from scratch: `inputs` are the `.input` relations' facts,
    `external` the relations of the pipeline the program reads."""
    prog = parse(text) if isinstance(text, str) else text
    keys = type_bases(prog) if prog.records else {}
    types = {d.name: [keys.get(t, t) for _, t in d.attrs] for d in prog.decls}
    rels: dict[str, Rel] = {d.name: set() for d in prog.decls}
    for k, v in {**(external or {}), **inputs}.items():
        rels[k] = set(map(tuple, v))
        if k in types and any(map(is_structured, types[k])):  # records as Python values, here
            rels[k] = {_coded(row, types[k], decode) for row in rels[k]}
    filtered = frozenset(
        {x.dominated.pred for x in prog.subsumptions}
        | {d.name for d in prog.decls if d.choice}
        | {d.name for d in prog.directives if d.kind == "limitsize"}
    )
    looped = filtered & recursive_relations(prog.rules)  # filtered while the recursion runs, as Soufflé does
    level = strata(prog, filtered - looped)
    ev = _Eval(rels)
    eqrel = {d.name for d in prog.decls if "eqrel" in d.qualifiers}
    for stratum in sorted(set(level.values())):
        rules = [r for r in prog.rules if level[r.head.pred] == stratum]
        here = {r.head.pred for r in rules}
        for _ in range(max_rounds):
            before = {n: frozenset(rels[n]) for n in here} if looped & here else {}
            new = False
            for name in eqrel & {r.head.pred for r in rules}:  # Soufflé's eqrel: the equivalence closure
                closed = equivalence_closure(rels[name])
                new |= closed != rels[name]
                rels[name] = closed
            for r in rules:
                for b in _numbered(r, ev.body(r, r.body, [{}])):
                    row = tuple(
                        float(x) if t == "float" else x
                        for x, t in zip((_value(a, b) for a in r.head.args), types[r.head.pred], strict=True)
                    )
                    if row not in rels[r.head.pred]:
                        rels[r.head.pred].add(row)
                        new = True
            if looped & here:  # a round's dominated tuples dropped: done when a round changes nothing
                for name in looped & here:
                    rels[name] = _kept(prog, name, rels[name], ev)
                new = any(frozenset(rels[n]) != before[n] for n in here)
            if not new:
                break
        else:
            raise RuntimeError(f"oracle: stratum {stratum} did not converge")
        for name in filtered - looped:
            if level[name] == stratum:
                rels[name] = _kept(prog, name, rels[name], ev)
    for k, ts in types.items():
        if any(map(is_structured, ts)):
            rels[k] = {_coded(row, ts, encode) for row in rels[k]}
    return rels


def _numbered(rule: Rule, bs: list[Binding]) -> list[Binding]:
    """With autoinc() in the head: each binding with its number, in the order of the rule's variables
    by name (those written first)."""
    if not in_head(rule):
        return bs
    names = sorted({v for b in bs for v in b}, key=lambda v: ("#" in v, v))
    ordered = sorted(bs, key=lambda b: tuple(b[v] for v in names))
    return [{**b, "#rank": i} for i, b in enumerate(ordered)]


def _coded(row: tuple, types: list[str], f: Any) -> tuple:
    return tuple(f(v, t) if is_structured(t) else v for v, t in zip(row, types, strict=True))


def _kept(prog: Program, name: str, every: Rel, ev: _Eval) -> Rel:
    """The tuples of a relation no subsumptive clause drops and that each choice domain keeps (the
    least of the tuples agreeing on it, in the order of the other columns), at most a `.limitsize`'s
    number of them (the least)."""
    keep = set(every)
    for x in (x for x in prog.subsumptions if x.dominated.pred == name):
        rule = Rule(x.dominated, x.body, x.pos)
        for t1 in every:
            b1 = _match(x.dominated, t1, {})
            for t2 in every:
                b2 = _match(x.dominating, t2, b1) if b1 is not None and t2 != t1 else None
                if b2 is not None and ev.body(rule, x.body, [b2]):
                    keep.discard(t1)
                    break
    decl = next(d for d in prog.decls if d.name == name)
    cols = [a for a, _ in decl.attrs]
    for domain in decl.choice:
        key = [cols.index(c) for c in domain]
        rest = [i for i in range(len(cols)) if i not in key]
        least: dict[tuple, tuple] = {}
        for t in every:
            k = tuple(t[i] for i in key)
            if k not in least or [t[i] for i in rest] < [least[k][i] for i in rest]:
                least[k] = t
        keep &= set(least.values())
    for d in prog.directives:  # .limitsize r(n=N): the N least tuples
        if d.kind == "limitsize" and d.name == name:
            keep = set(sorted(keep)[: dict(d.params)["n"]])
    return keep


def equivalence_closure(pairs: Rel) -> Rel:
    """The least equivalence relation holding `pairs` (on the elements they mention), by union-find."""
    parent: dict[Any, Any] = {}

    def find(a: Any) -> Any:
        while parent.setdefault(a, a) != a:
            a = parent[a]
        return a

    for a, b in pairs:
        parent[find(a)] = find(b)
    classes: dict[Any, list] = {}
    for a in list(parent):
        classes.setdefault(find(a), []).append(a)
    return {(a, b) for members in classes.values() for a in members for b in members}


# ---- strategies ----------------------------------------------------------------------------------------
DOMAIN = 4
EDB = {"a": 2, "b": 2, "u": 1}  # input relations: name -> arity (all number, values 0..DOMAIN-1)
VARS = ("X", "Y", "Z", "W")


@dataclass
class GenProgram:
    text: str
    inputs: dict[str, int]  # name -> arity
    outputs: list[str]

    def __repr__(self) -> str:
        return f"GenProgram(\n{self.text})"


@st.composite
def _rule(
    draw: st.DrawFn, head: str, arity: int, lower: list[tuple[str, int]], same: list[tuple[str, int]]
) -> str:
    """One safe rule for `head`: positive atoms over `lower` and `same` (recursion), optional
    comparison, assignment (modulo DOMAIN, so recursion stays finite), negation and aggregate over
    `lower` only (stratified)."""
    pos_pool = lower + same
    atoms = []
    bound: list[str] = []

    def arg(allow_new: bool = True) -> str:
        kind = draw(st.sampled_from(["var", "var", "var", "const", "wild"]))
        if kind == "const":
            return str(draw(st.integers(0, DOMAIN - 1)))
        if kind == "wild":
            return "_"
        return draw(st.sampled_from(VARS[:3]))

    for _ in range(draw(st.integers(1, 3))):
        name, ar = draw(st.sampled_from(pos_pool))
        args = [arg() for _ in range(ar)]
        atoms.append(f"{name}({', '.join(args)})")
        bound += [x for x in args if x in VARS]
    bound = sorted(set(bound))
    extras: list[str] = []
    if draw(st.booleans()) and bound:
        x = draw(st.sampled_from(bound))
        y = draw(st.sampled_from([*bound, str(draw(st.integers(0, DOMAIN - 1)))]))
        extras.append(f"{x} {draw(st.sampled_from(['<', '<=', '!=', '=', '>']))} {y}")
    if bound and draw(st.integers(0, 3)) == 0:
        x = draw(st.sampled_from(bound))
        extras.append(f"W = ({x} + {draw(st.integers(1, 3))}) % {DOMAIN}")
        bound = [*bound, "W"]
    if bound and lower and draw(st.integers(0, 2)) == 0:
        name, ar = draw(st.sampled_from(lower))
        args = [draw(st.sampled_from([*bound, "_", "0", "1"])) for _ in range(ar)]
        extras.append(f"!{name}({', '.join(args)})")
    if lower and "W" not in bound and draw(st.integers(0, 2)) == 0:
        name, ar = draw(st.sampled_from(lower))
        kind = draw(st.sampled_from(["count", "sum", "min", "max", "groupby"]))
        g = draw(st.sampled_from(bound)) if bound else None
        inner = [g if g is not None and i == 0 else "Q" for i in range(ar)] if ar > 1 or g is None else [g]
        if ar == 1 and g is not None:
            inner = [g]
        if kind == "groupby":
            keys = [x for x in inner if x != "Q"][:1]
            val = "Q" if "Q" in inner else (keys[0] if keys else None)
            fn = draw(st.sampled_from(["count", "sum", "min", "max"]))
            agg_inner = [x if x in keys or x == val else "_" for x in inner]
            extras.append(
                f"groupby({name}({', '.join(agg_inner)}), [{', '.join(keys)}], W = {fn}<{val if fn != 'count' else ''}>)"
            )
        elif kind == "count":
            extras.append(f"W = count : {{ {name}({', '.join(x if x != 'Q' else '_' for x in inner)}) }}")
        else:
            val = "Q" if "Q" in inner else inner[0]
            extras.append(f"W = {kind} {val} : {{ {name}({', '.join(inner)}) }}")
        bound = [*bound, "W"]
    if not bound:
        bound_pool = [str(draw(st.integers(0, DOMAIN - 1)))]
    else:
        bound_pool = bound
    head_args = [draw(st.sampled_from(bound_pool)) for _ in range(arity)]
    body = ", ".join(atoms + extras)
    return f"{head}({', '.join(head_args)}) :- {body}."


@st.composite
def programs(draw: st.DrawFn, max_relations: int = 4) -> GenProgram:
    """A random stratified program over the inputs a(2), b(2), u(1) (u sometimes extended by rules):
    relations r0..rk, level i // 2 (two relations on a level may be mutually recursive); negation and
    aggregates read lower levels."""
    n = draw(st.integers(1, max_relations))
    arities = [draw(st.integers(1, 2)) for _ in range(n)]
    lines = [
        f".decl {k}({', '.join(f'c{i}: number' for i in range(ar))})\n.input {k}" for k, ar in EDB.items()
    ]
    rules = []
    for i in range(n):
        lines.append(f".decl r{i}({', '.join(f'c{j}: number' for j in range(arities[i]))})\n.output r{i}")
        lower = [*EDB.items(), *[(f"r{j}", arities[j]) for j in range(n) if j // 2 < i // 2]]
        same = [(f"r{j}", arities[j]) for j in range(n) if j // 2 == i // 2]
        for _ in range(draw(st.integers(1, 3))):
            rules.append(draw(_rule(f"r{i}", arities[i], lower, same)))
        if draw(st.integers(0, 4)) == 0:
            rules.append(
                f"r{i}({', '.join(str(draw(st.integers(0, DOMAIN - 1))) for _ in range(arities[i]))})."
            )
    if draw(st.integers(0, 2)) == 0:  # an input relation that rules extend (here: recursively)
        rules.append(
            draw(
                st.sampled_from(
                    ["u(Y) :- u(X), a(X, Y).", "u(X) :- b(X, X).", "u(Y) :- u(X), b(X, Y), !a(X, Y)."]
                )
            )
        )
    return GenProgram("\n".join(lines + rules) + "\n", dict(EDB), [f"r{i}" for i in range(n)])


@st.composite
def change_streams(
    draw: st.DrawFn, inputs: Mapping[str, int], max_steps: int = 4, domain: int = DOMAIN
) -> list[tuple[dict[str, list[tuple]], dict[str, list[tuple]]]]:
    """Steps of (inserts, deletes) per input relation: inserts of absent facts, deletes of present ones;
    later steps delete more, and the stream may end by deleting everything."""
    import itertools

    state: dict[str, set[tuple]] = {k: set() for k in inputs}
    steps = []
    for t in range(draw(st.integers(1, max_steps))):
        ins: dict[str, list[tuple]] = {}
        dels: dict[str, list[tuple]] = {}
        for k, ar in inputs.items():
            universe = sorted(itertools.product(range(domain), repeat=ar))
            absent = [r for r in universe if r not in state[k]]
            present = sorted(state[k])
            i = (
                draw(st.lists(st.sampled_from(absent), max_size=6 if t == 0 else 3, unique=True))
                if absent
                else []
            )
            d = draw(st.lists(st.sampled_from(present), max_size=3, unique=True)) if present and t else []
            state[k] = (state[k] - set(d)) | set(i)
            if i:
                ins[k] = i
            if d:
                dels[k] = d
        steps.append((ins, dels))
    if draw(st.booleans()):
        steps.append(({}, {k: sorted(v) for k, v in state.items() if v}))
    return steps


# ---- running a pipeline against the evaluator ------------------------------------------------------
def as_set(z: Any) -> set[tuple]:
    d = z.to_dict()
    assert all(w == 1 for w in d.values()), f"a derived relation is a set, got weights {d}"
    return set(d)


def run_against_oracle(
    p: Any,
    text: str,
    outputs: list[str],
    inputs: list[str],
    steps: list[tuple[dict, dict]],
    external: dict[str, set] | None = None,
) -> None:
    """Feed `steps` to the pipeline (which already holds the program) and compare with the oracle."""
    state: dict[str, set[tuple]] = {k: set() for k in inputs}
    prev: dict[str, set[tuple]] = {o: set() for o in outputs}
    try:
        for t, (ins, dels) in enumerate(steps):
            for k, rows in ins.items():
                p.insert(k, rows)
                state[k] |= set(rows)
            for k, rows in dels.items():
                p.delete(k, rows)
                state[k] -= set(rows)
            changes = p.step()
            want = evaluate(text, state, external)
            for o in outputs:
                got = as_set(p.view(o))
                assert got == want[o], (
                    f"step {t}: view {o}\n{text}\ninputs {state}\nmissing {want[o] - got}, extra {got - want[o]}"
                )
                ch = changes[o].to_dict()
                expected = {r: 1 for r in want[o] - prev[o]} | {r: -1 for r in prev[o] - want[o]}
                assert ch == expected, f"step {t}: change of {o} is not the difference of the oracle results"
            prev = {o: want[o] for o in outputs}
    finally:
        p.close()
