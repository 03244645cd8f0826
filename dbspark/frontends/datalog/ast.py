"""The Datalog program tree: small frozen dataclasses built by `parser`, read by `check`, `stratify`,
`lower` and the naive evaluator of `dbspark.testing.datalog`.

Every node keeps the (line, column) where it starts, so semantic errors can point at the text.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dbspark.errors import ParseError

TYPES = ("number", "unsigned", "float", "symbol")
AGGREGATES = ("count", "sum", "min", "max", "mean")
CMP_OPS = ("=", "!=", "<", "<=", ">", ">=")
ARITH_OPS = ("+", "-", "*", "/", "%")


@dataclass(frozen=True)
class Pos:
    line: int
    column: int

    def __str__(self) -> str:
        return f"line {self.line}, column {self.column}"


NOPOS = Pos(0, 0)


def at(cls: type[Exception], msg: str, pos: Pos) -> Exception:
    """An error of class `cls` whose message ends with the position; ParseError subclasses keep it too."""
    if issubclass(cls, ParseError):
        return cls(msg, pos.line, pos.column)
    e = cls(f"{msg} (line {pos.line}, column {pos.column})")
    e.line, e.column = pos.line, pos.column  # type: ignore[attr-defined]
    return e


# ---- terms -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Var:
    name: str  # fresh variables made by the checks are "<shown>#<n>?"
    pos: Pos = field(default=NOPOS, compare=False)

    def __str__(self) -> str:
        return self.name.split("#")[0] if self.name.endswith("?") else self.name


@dataclass(frozen=True)
class Wild:
    pos: Pos = field(default=NOPOS, compare=False)

    def __str__(self) -> str:
        return "_"


@dataclass(frozen=True)
class Const:
    value: Any
    type: str  # "number" (an integer literal), "float" or "symbol"
    pos: Pos = field(default=NOPOS, compare=False)

    def __str__(self) -> str:
        return f'"{self.value}"' if self.type == "symbol" else str(self.value)


@dataclass(frozen=True)
class BinOp:
    op: str
    left: Term
    right: Term
    pos: Pos = field(default=NOPOS, compare=False)

    def __str__(self) -> str:
        return f"({self.left} {self.op} {self.right})"


@dataclass(frozen=True)
class Neg:
    arg: Term
    pos: Pos = field(default=NOPOS, compare=False)

    def __str__(self) -> str:
        return f"-{self.arg}"


# Soufflé's functors written between or before their operands (lowest precedence first in the grammar)
INFIX = ("lor", "lxor", "land", "bor", "bxor", "band", "bshl", "bshr", "bshru", "^")
PREFIX = ("bnot", "lnot")
# the intrinsic functors called by name: name -> (least, most) arguments (None: any number)
FUNCTORS: dict[str, tuple[int, int | None]] = {
    "min": (2, None),
    "max": (2, None),
    "abs": (1, 1),
    "cat": (1, None),
    "strlen": (1, 1),
    "substr": (3, 3),
    "to_number": (1, 1),
    "to_string": (1, 1),
    "to_float": (1, 1),
    "to_unsigned": (1, 1),
    "as": (1, 1),  # as(x, T): the type is `Call.type`
    "contains": (2, 2),  # the tests, in a body as a literal: 1 when it holds, else 0
    "match": (2, 2),
    "range": (2, 3),  # a generator: `x = range(lo, hi[, step])` binds x to each value
    "autoinc": (0, 0),  # a number per binding of a rule's body (`autoinc.py`)
}


@dataclass(frozen=True)
class Call:
    """A functor applied to its arguments: infix (`x band y`, `x ^ y`), prefix (`bnot x`) or called by
    name (`cat(a, b)`, `to_float(x)`, `as(x, T)` with T in `type`, resolved to its base type by the
    checks)."""

    name: str
    args: tuple[Term, ...]
    pos: Pos = field(default=NOPOS, compare=False)
    type: str = ""

    def __str__(self) -> str:
        if self.name == "[]":  # a record (`records.py`)
            return f"[{', '.join(map(str, self.args))}]"
        if self.name == "nil" or (self.name.startswith("$") and not self.args):
            return self.name
        if self.name in INFIX:
            return f"({self.args[0]} {self.name} {self.args[1]})"
        if self.name in PREFIX:
            return f"{self.name} {self.args[0]}"
        extra = f", {self.type}" if self.name == "as" else ""
        return f"{self.name}({', '.join(map(str, self.args))}{extra})"


Term = Var | Wild | Const | BinOp | Neg | Call


def subterms(t: Term) -> tuple[Term, ...]:
    if isinstance(t, BinOp):
        return (t.left, t.right)
    if isinstance(t, Neg):
        return (t.arg,)
    if isinstance(t, Call):
        return t.args
    return ()


def term_vars(t: Term) -> set[str]:
    if isinstance(t, Var):
        return {t.name}
    return set().union(*map(term_vars, subterms(t)))


def has_wild(t: Term) -> bool:
    return isinstance(t, Wild) or any(map(has_wild, subterms(t)))


def rebuild(t: Term, f: Callable[[Term], Term]) -> Term:
    """`t` rebuilt bottom-up, every node (its children rebuilt first) replaced by f(node)."""
    if isinstance(t, BinOp):
        t = BinOp(t.op, rebuild(t.left, f), rebuild(t.right, f), t.pos)
    elif isinstance(t, Neg):
        t = Neg(rebuild(t.arg, f), t.pos)
    elif isinstance(t, Call):
        t = Call(t.name, tuple(rebuild(a, f) for a in t.args), t.pos, t.type)
    return f(t)


def map_vars(t: Term, f: Callable[[Var], Term]) -> Term:
    """`t` with every variable v replaced by f(v)."""
    return rebuild(t, lambda x: f(x) if isinstance(x, Var) else x)


# ---- literals ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Atom:
    pred: str
    args: tuple[Term, ...]
    pos: Pos = field(default=NOPOS, compare=False)

    def vars(self) -> set[str]:
        return set().union(*[term_vars(a) for a in self.args]) if self.args else set()

    def __str__(self) -> str:
        return f"{self.pred}({', '.join(map(str, self.args))})"


@dataclass(frozen=True)
class Negation:
    atom: Atom
    pos: Pos = field(default=NOPOS, compare=False)

    def vars(self) -> set[str]:
        return self.atom.vars()

    def __str__(self) -> str:
        return f"!{self.atom}"


@dataclass(frozen=True)
class Constraint:
    op: str  # one of CMP_OPS
    left: Term
    right: Term
    pos: Pos = field(default=NOPOS, compare=False)

    def vars(self) -> set[str]:
        return term_vars(self.left) | term_vars(self.right)

    def __str__(self) -> str:
        return f"{self.left} {self.op} {self.right}"


@dataclass(frozen=True)
class Aggregate:
    """`var = func [expr] : { body }` (Soufflé): the body's variables that also occur outside the
    aggregate in the rule are its group (correlated) variables; the others are local to it."""

    var: str
    func: str
    expr: Term | None
    body: tuple[Literal, ...]
    pos: Pos = field(default=NOPOS, compare=False)

    def inner_vars(self) -> set[str]:
        out: set[str] = set()
        for lit in self.body:
            out |= literal_vars(lit)
        if self.expr is not None:
            out |= term_vars(self.expr)
        return out

    def __str__(self) -> str:
        e = f" {self.expr}" if self.expr is not None else ""
        return f"{Var(self.var)} = {self.func}{e} : {{ {', '.join(map(str, self.body))} }}"


@dataclass(frozen=True)
class GroupBy:
    """`groupby(p(X, Z, Y), [X], S = sum<Y>)` (`incremental-aggregation-monotonic-programs.txt` §3.1):
    binds the group variables X and the result S; the atom's other variables are local to it."""

    atom: Atom
    keys: tuple[str, ...]
    var: str
    func: str
    expr: Term | None
    pos: Pos = field(default=NOPOS, compare=False)

    def __str__(self) -> str:
        e = "" if self.expr is None else str(self.expr)
        return f"groupby({self.atom}, [{', '.join(self.keys)}], {self.var} = {self.func}<{e}>)"


Literal = Atom | Negation | Constraint | Aggregate | GroupBy


def literal_vars(lit: Literal) -> set[str]:
    """The variables a literal mentions (for an aggregate: its result variable and its body's)."""
    if isinstance(lit, Aggregate):
        return {lit.var} | lit.inner_vars()
    if isinstance(lit, GroupBy):
        return (
            {lit.var, *lit.keys} | lit.atom.vars() | (term_vars(lit.expr) if lit.expr is not None else set())
        )
    return lit.vars()


def outer_vars(lit: Literal) -> set[str]:
    """The variables a literal shares with the rest of its rule (aggregates hide their local ones)."""
    if isinstance(lit, GroupBy):
        return {lit.var, *lit.keys}
    if isinstance(lit, Aggregate):
        return {lit.var}
    return lit.vars()


def rebuild_literal(lit: Literal, f: Callable[[Term], Term], top_down: bool = False) -> Literal:
    """`lit` with every term in it (inside aggregates too) rebuilt by `rebuild(term, f)`, or with
    `top_down` by f(term) (f rebuilds what is under the term itself)."""

    def rb(t: Term) -> Term:
        return f(t) if top_down else rebuild(t, f)

    def atom(a: Atom) -> Atom:
        return Atom(a.pred, tuple(rb(t) for t in a.args), a.pos)

    def opt(t: Term | None) -> Term | None:
        return None if t is None else rb(t)

    if isinstance(lit, Atom):
        return atom(lit)
    if isinstance(lit, Negation):
        return Negation(atom(lit.atom), lit.pos)
    if isinstance(lit, Constraint):
        return Constraint(lit.op, rb(lit.left), rb(lit.right), lit.pos)
    if isinstance(lit, Aggregate):
        body = tuple(rebuild_literal(x, f, top_down) for x in lit.body)
        return Aggregate(lit.var, lit.func, opt(lit.expr), body, lit.pos)
    return GroupBy(atom(lit.atom), lit.keys, lit.var, lit.func, opt(lit.expr), lit.pos)


# ---- clauses and directives --------------------------------------------------------------------------
@dataclass(frozen=True)
class Rule:
    head: Atom
    body: tuple[Literal, ...]
    pos: Pos = field(default=NOPOS, compare=False)
    shown: str = field(default="", compare=False)  # the rule as written (before normalisation)

    def __str__(self) -> str:
        if self.shown:
            return self.shown
        if not self.body:
            return f"{self.head}."
        return f"{self.head} :- {', '.join(map(str, self.body))}."


@dataclass(frozen=True)
class Decl:
    name: str
    attrs: tuple[tuple[str, str], ...]  # (attribute, type name as written)
    pos: Pos = field(default=NOPOS, compare=False)
    qualifiers: tuple[str, ...] = ()  # as written after the attributes: "eqrel", "brie", ...
    choice: tuple[tuple[str, ...], ...] = ()  # `choice-domain x, (y, z)`: each domain's attributes


@dataclass(frozen=True)
class Directive:
    kind: str  # "input" | "output" | "printsize" | ...
    name: str
    params: tuple[tuple[str, Any], ...]
    pos: Pos = field(default=NOPOS, compare=False)


@dataclass(frozen=True)
class TypeDecl:
    """`.type T <: base`, `.type T = base` or the union `.type T = A | B` (`more`: the others)."""

    name: str
    base: str
    pos: Pos = field(default=NOPOS, compare=False)
    more: tuple[str, ...] = ()


@dataclass(frozen=True)
class RecordDecl:
    """`.type Pair = [a: number, b: symbol]` (`records.py`)."""

    name: str
    fields: tuple[tuple[str, str, Pos], ...]  # (field, type as written, where the type is)
    pos: Pos = field(default=NOPOS, compare=False)


@dataclass(frozen=True)
class AdtDecl:
    """`.type Tree = Leaf {x: number} | Node {l: Tree, r: Tree}` (`records.py`)."""

    name: str
    branches: tuple[tuple[str, tuple[tuple[str, str, Pos], ...]], ...]
    pos: Pos = field(default=NOPOS, compare=False)


@dataclass(frozen=True)
class Subsumption:
    """`r(a, d1) <= r(a, d2) :- d1 >= d2.`: a tuple of r matching `dominated` is dropped when a tuple
    matching `dominating` and the body hold (Soufflé's subsumptive clause)."""

    dominated: Atom
    dominating: Atom
    body: tuple[Literal, ...]
    pos: Pos = field(default=NOPOS, compare=False)


@dataclass(frozen=True)
class FunctorDecl:
    """`.functor f(x: number, s: symbol): float`: a user-defined functor `@f`, bound to a Python function
    (`dbspark.functors`)."""

    name: str
    args: tuple[tuple[str, str], ...]
    result: str
    pos: Pos = field(default=NOPOS, compare=False)


@dataclass(frozen=True)
class CompRef:
    """A component named with its type arguments: `Graph<number>`."""

    name: str
    args: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"{self.name}<{', '.join(self.args)}>" if self.args else self.name


@dataclass(frozen=True)
class Init:
    """`.init g = Graph<number>`: an instance of a component."""

    instance: str
    comp: CompRef
    pos: Pos = field(default=NOPOS, compare=False)


@dataclass
class Program:
    decls: list[Decl] = field(default_factory=list)
    types: list[TypeDecl] = field(default_factory=list)
    directives: list[Directive] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)
    comps: list[Component] = field(default_factory=list)
    inits: list[Init] = field(default_factory=list)
    overrides: list[str] = field(default_factory=list)  # (in a component's body) `.override r`
    functors: list[FunctorDecl] = field(default_factory=list)
    subsumptions: list[Subsumption] = field(default_factory=list)
    records: list[RecordDecl | AdtDecl] = field(default_factory=list)  # record and ADT types


@dataclass(frozen=True)
class Component:
    """`.comp Name<T, ...> : Base<...>, ... { body }`: a template of declarations and rules that `.init`
    instantiates (`components.py`)."""

    name: str
    params: tuple[str, ...]
    bases: tuple[CompRef, ...]
    body: Program
    pos: Pos = field(default=NOPOS, compare=False)
