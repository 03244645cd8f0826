"""The Datalog program tree: small frozen dataclasses built by `parser`, read by `check`, `stratify`,
`lower` and the naive evaluator of `dbspark.testing.datalog`.

Every node keeps the (line, column) where it starts, so semantic errors can point at the text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

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


Term = Var | Wild | Const | BinOp | Neg


def term_vars(t: Term) -> set[str]:
    if isinstance(t, Var):
        return {t.name}
    if isinstance(t, BinOp):
        return term_vars(t.left) | term_vars(t.right)
    if isinstance(t, Neg):
        return term_vars(t.arg)
    return set()


def has_wild(t: Term) -> bool:
    if isinstance(t, Wild):
        return True
    if isinstance(t, BinOp):
        return has_wild(t.left) or has_wild(t.right)
    if isinstance(t, Neg):
        return has_wild(t.arg)
    return False


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
        return f"{self.var} = {self.func}{e} : {{ {', '.join(map(str, self.body))} }}"


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


@dataclass(frozen=True)
class Directive:
    kind: str  # "input" | "output" | "printsize" | ...
    name: str
    params: tuple[tuple[str, Any], ...]
    pos: Pos = field(default=NOPOS, compare=False)


@dataclass(frozen=True)
class TypeDecl:
    name: str
    base: str
    pos: Pos = field(default=NOPOS, compare=False)


@dataclass
class Program:
    decls: list[Decl] = field(default_factory=list)
    types: list[TypeDecl] = field(default_factory=list)
    directives: list[Directive] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)
