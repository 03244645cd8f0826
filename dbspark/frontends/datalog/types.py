"""Type checking of rules: number, unsigned, float and symbol (`.decl`), plus the column types of
relations declared outside the program ("other:<dtype>", usable only where the same type is expected).

An integer literal fits number, unsigned (if not negative) and float; a float literal fits float; a
string fits symbol. Arithmetic needs two operands of one numeric type; comparisons need one type.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dbspark.errors import SchemaError
from dbspark.frontends.datalog import records
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
    Pos,
    Rule,
    Term,
    Var,
    Wild,
    rebuild_literal,
)
from dbspark.frontends.datalog.check import at

if TYPE_CHECKING:
    from dbspark.frontends.datalog.check import Relation

INT_LIT = "integer literal"
NUMERIC = ("number", "unsigned", "float")


INTEGRAL = ("number", "unsigned", INT_LIT)
WANT = {
    "integers": INTEGRAL,
    "numbers": (*NUMERIC, INT_LIT),
    "symbols": ("symbol",),
    "numbers or symbols": (*NUMERIC, INT_LIT, "symbol"),
    "anything": (*NUMERIC, INT_LIT, "symbol"),
}
# each functor: the kind of its arguments (the last one repeats) and its result ("same": the arguments')
FUNCTOR_TYPES: dict[str, tuple[tuple[str, ...], str]] = {
    **{op: (("integers",), "same") for op in ("band", "bor", "bxor", "bshl", "bshr", "bshru", "bnot")},
    **{op: (("integers",), "same") for op in ("land", "lor", "lxor", "lnot")},
    "^": (("numbers",), "same"),
    "min": (("numbers or symbols",), "same"),
    "max": (("numbers or symbols",), "same"),
    "abs": (("numbers",), "same"),
    "cat": (("symbols",), "symbol"),
    "strlen": (("symbols",), "number"),
    "substr": (("symbols", "integers"), "symbol"),
    "to_number": (("anything",), "number"),
    "to_unsigned": (("anything",), "unsigned"),
    "to_float": (("anything",), "float"),
    "to_string": (("anything",), "symbol"),
    "contains": (("symbols",), "number"),
    "match": (("symbols",), "number"),
    "range": (("integers",), "same"),
    "autoinc": (("integers",), "number"),
}


def fits(value_type: str, want: str) -> bool:
    return value_type == want or (value_type == INT_LIT and want in NUMERIC)


def unify(a: str | None, b: str | None) -> str | None:
    if a is None or a == INT_LIT:
        return b if b is not None else a
    return a


def fact_values(head: Atom, rel: Relation) -> tuple:
    """The Python values of a ground fact `p(1, "a", 2.5)`, checked against the relation's types."""
    out = []
    for i, (a, t) in enumerate(zip(head.args, rel.types, strict=True)):
        assert isinstance(a, Const)
        vt = INT_LIT if a.type == "number" else a.type
        if not fits(vt, t):
            raise at(
                SchemaError,
                f"type mismatch: argument {i + 1} of fact {head} is a {a.type}, column "
                f"{rel.name}.{rel.columns[i]} is {t}",
                a.pos,
            )
        if t == "unsigned" and a.value < 0:
            raise at(
                SchemaError,
                f"fact {head}: {a.value} is negative, column {rel.name}.{rel.columns[i]} is unsigned",
                a.pos,
            )
        out.append(float(a.value) if t == "float" else a.value)
    return tuple(out)


class _Types:
    def __init__(self, rule: Rule, rels: dict[str, Relation]) -> None:
        self.rule = rule
        self.rels = rels
        self.env: dict[str, str] = {}
        self.where: dict[str, str] = {}
        self.typed: dict[Call, str] = {}  # each record, nil and branch term: its type
        self.final = False  # the last pass: what is still unknown is an error

    def bind(self, v: str, t: str, where: str, lit: object) -> None:
        old = self.env.get(v)
        if old is None or old == INT_LIT:
            self.env[v] = t
            self.where[v] = where
        elif t != old and t != INT_LIT:
            raise at(
                SchemaError,
                f"type mismatch in rule {self.rule}: variable {v} is {old} ({self.where[v]}) and "
                f"{t} ({where})",
                getattr(lit, "pos", self.rule.pos),
            )

    def atom(self, a: Atom, positive: bool) -> None:
        rel = self.rels[a.pred]
        for i, (t, ct) in enumerate(zip(a.args, rel.types, strict=True)):
            where = f"argument {i + 1} of {a}"
            if isinstance(t, Var):
                if positive or t.name not in self.env:
                    self.bind(t.name, ct, where, a)
                elif not fits(self.env[t.name], ct):
                    raise at(
                        SchemaError,
                        f"type mismatch in rule {self.rule}: variable {t.name} is "
                        f"{self.env[t.name]} ({self.where[t.name]}), {where} is {ct}",
                        a.pos,
                    )
            elif isinstance(t, Const):
                vt = INT_LIT if t.type == "number" else t.type
                if not fits(vt, ct):
                    raise at(
                        SchemaError,
                        f"type mismatch: {where} is the {t.type} {t}, column "
                        f"{rel.name}.{rel.columns[i]} is {ct}",
                        t.pos,
                    )

    def expr(self, t: Term) -> str | None:
        if isinstance(t, Var):
            return self.env.get(t.name)
        if isinstance(t, Const):
            return INT_LIT if t.type == "number" else t.type
        if isinstance(t, Wild):
            return None
        if isinstance(t, Neg):
            a = self.expr(t.arg)
            if a is not None and a not in (*NUMERIC, INT_LIT):
                raise at(SchemaError, f"type mismatch: '-' on {a} in {t}", t.pos)
            return a
        if isinstance(t, Call) and records.is_record_term(t):
            return t.type or None  # a branch is typed by its ADT; a record or nil by where it is
        if isinstance(t, Call):
            return self.call(t)
        assert isinstance(t, BinOp)
        a, b = self.expr(t.left), self.expr(t.right)
        for x in (a, b):
            if x is not None and x not in (*NUMERIC, INT_LIT):
                raise at(SchemaError, f"type mismatch: arithmetic '{t.op}' on {x} in {t}", t.pos)
        if a is not None and b is not None and a != b and INT_LIT not in (a, b):
            raise at(
                SchemaError, f"type mismatch: '{t.op}' on {a} and {b} in {t} (convert explicitly)", t.pos
            )
        return unify(a, b)

    def call(self, t: Call) -> str | None:
        """The type of a functor's value, checking its arguments' types (`FUNCTOR_TYPES`)."""
        ts = [self.expr(a) for a in t.args]
        if t.name == "as":
            return self.cast(t, ts[0])
        if t.name.startswith("@"):  # a user-defined functor: its declared signature
            result, args = t.type.split(":")
            for i, (a, x, want) in enumerate(zip(t.args, ts, args.split(","), strict=False)):
                if x is not None and not fits(x, want):
                    raise at(
                        SchemaError,
                        f"type mismatch: argument {i + 1} of {t} is {x} ({a}), {t.name} takes {want}",
                        t.pos,
                    )
            return result
        kinds, result = FUNCTOR_TYPES[t.name]
        for i, (a, x) in enumerate(zip(t.args, ts, strict=True)):
            want = kinds[min(i, len(kinds) - 1)]
            ok = WANT[want]
            if x is not None and x not in ok:
                raise at(
                    SchemaError,
                    f"type mismatch: argument {i + 1} of {t} is {x} ({a}), {t.name} takes {want}",
                    t.pos,
                )
        if result != "same":
            return result
        known = {x for x in ts if x not in (None, INT_LIT)}
        if len(known) > 1:
            raise at(
                SchemaError,
                f"type mismatch: {t} on {' and '.join(sorted(known))} (convert explicitly)",
                t.pos,
            )
        return known.pop() if known else (INT_LIT if INT_LIT in ts else None)

    def cast(self, t: Call, x: str | None) -> str:
        """`as(x, T)`: the value as T, for a T of x's own kind (number and unsigned are one kind)."""
        if x is None or x == t.type or (x == INT_LIT and t.type in NUMERIC):
            return t.type
        if {x, t.type} <= {"number", "unsigned", INT_LIT}:
            return t.type
        hint = {"float": "to_float", "symbol": "to_string"}.get(t.type, f"to_{t.type}")
        if t.type in ("number", "unsigned") and x in ("float", "symbol"):
            hint = "to_number" if t.type == "number" else "to_unsigned"
        raise at(
            SchemaError,
            f"{t}: as(...) does not convert a {x} to {t.type} (Soufflé reinterprets the bits); "
            f"use {hint}(...)",
            t.pos,
        )

    def literal(self, lit: Literal) -> None:
        if isinstance(lit, Atom):
            self.atom(lit, True)
        elif isinstance(lit, Negation):
            self.atom(lit.atom, False)
        elif isinstance(lit, GroupBy):
            self.atom(lit.atom, True)
            self.bind(lit.var, self.agg_type(lit.func, lit.expr, lit), f"the result of {lit}", lit)
        elif isinstance(lit, Aggregate):
            for inner in lit.body:
                self.literal(inner)
            self.bind(lit.var, self.agg_type(lit.func, lit.expr, lit), f"the result of {lit}", lit)
        elif isinstance(lit, Constraint):
            a, b = self.expr(lit.left), self.expr(lit.right)
            if (
                records.is_record_term(lit.left)
                or records.is_record_term(lit.right)
                or any(map(records.is_structured, (a, b)))
            ):
                self.record_constraint(lit, a, b)
                return
            if lit.op == "=" and isinstance(lit.left, Var) and a is None and b is not None:
                self.bind(lit.left.name, b, f"assigned {lit.right}", lit)
            elif lit.op == "=" and isinstance(lit.right, Var) and b is None and a is not None:
                self.bind(lit.right.name, a, f"assigned {lit.left}", lit)
            elif a is not None and b is not None and a != b and INT_LIT not in (a, b):
                raise at(SchemaError, f"type mismatch: {lit} compares {a} with {b}", lit.pos)
            elif lit.op not in ("=", "!=") and any(t is not None and t.startswith("other:") for t in (a, b)):
                raise at(SchemaError, f"{lit}: '{lit.op}' on values of type {a or b}", lit.pos)

    def record_constraint(self, lit: Constraint, a: str | None, b: str | None) -> None:
        """`x = [a, b]`, `[a, b] = [c, d]`, `x != nil`, `x = $B(y)`: records are compared for equality
        only; a record or nil takes its type from the other side."""
        if lit.op not in ("=", "!="):
            shown = records.shown(a or b or "record")
            raise at(
                SchemaError,
                f"{lit}: '{lit.op}' on records ({shown}); records compare with = and != only",
                lit.pos,
            )
        for side, other, t in ((lit.left, lit.right, b), (lit.right, lit.left, a)):
            if records.is_record_term(side) and t is not None:
                self.against(side, t, f"{lit}", lit)
                if isinstance(other, Var):
                    self.bind(other.name, t, f"compared with {side}", lit)
                return
        if lit.op == "=" and isinstance(lit.left, Var) and a is None and b is not None:
            self.bind(lit.left.name, b, f"assigned {lit.right}", lit)
            return
        if lit.op == "=" and isinstance(lit.right, Var) and b is None and a is not None:
            self.bind(lit.right.name, a, f"assigned {lit.left}", lit)
            return
        if not self.final:
            return
        if a is not None and b is not None:
            if a != b:
                raise at(
                    SchemaError,
                    f"type mismatch: {lit} compares {records.shown(a)} with {records.shown(b)}",
                    lit.pos,
                )
            return
        raise at(
            SchemaError,
            f"{lit}: cannot tell which record type this is; compare it with a variable of a known "
            "record type, or put it where a relation's column says",
            lit.pos,
        )

    def against(self, t: Term, want: str, where: str, lit: object) -> None:
        """Check that the term `t` is a `want`; a record, nil or branch is checked field by field
        (binding its variables' types) and noted with its type (`typed_records`)."""
        pos: Pos = getattr(t, "pos", None) or getattr(lit, "pos", None) or self.rule.pos
        if isinstance(t, Var):
            if t.name in self.env and self.env[t.name] != want and not fits(self.env[t.name], want):
                raise at(
                    SchemaError,
                    f"type mismatch in rule {self.rule}: variable {t.name} is "
                    f"{records.shown(self.env[t.name])} ({self.where[t.name]}), {where} is {records.shown(want)}",
                    pos,
                )
            self.bind(t.name, want, where, lit)
            return
        if not records.is_record_term(t):
            got = self.expr(t)
            if got is not None and not fits(got, want):
                raise at(
                    SchemaError,
                    f"type mismatch: {t} is {records.shown(got)}, {where} is {records.shown(want)}",
                    pos,
                )
            return
        assert isinstance(t, Call)
        r = records.REGISTRY.get(want)
        if t.name.startswith("$"):
            if t.type != want:
                raise at(
                    SchemaError,
                    f"type mismatch: {t} is {records.shown(t.type)}, {where} is {records.shown(want)}",
                    pos,
                )
        elif not isinstance(r, records.RecordType):
            what = "nil" if t.name == "nil" else f"the record {t}"
            raise at(SchemaError, f"type mismatch: {where} is {records.shown(want)}, not {what}", pos)
        elif t.name == records.RECORD and len(t.args) != len(r.fields):
            raise at(
                SchemaError,
                f"{t}: a record of {len(t.args)} field(s), {r.name} has {len(r.fields)} "
                f"({', '.join(f for f, _ in r.fields)})",
                pos,
            )
        self.typed[t] = want
        if t.name != "nil":
            for k, (a, ft) in enumerate(zip(t.args, records.field_types(want, t), strict=True)):
                self.against(a, ft, f"field {k + 1} of {t}", lit)

    def agg_type(self, func: str, expr: Term | None, lit: object) -> str:
        if func == "count":
            return "number"
        if expr is None:
            raise at(
                SchemaError, f"{lit}: {func} needs a value to aggregate", getattr(lit, "pos", self.rule.pos)
            )
        t = self.expr(expr)
        if t is None:
            return "number"
        if t == INT_LIT:
            t = "number"
        if records.is_structured(t) and func != "count":
            raise at(
                SchemaError,
                f"{func} of the record type {records.shown(t)} in {lit} (records are not ordered)",
                getattr(lit, "pos", self.rule.pos),
            )
        if func in ("sum", "mean") and t not in NUMERIC:
            raise at(
                SchemaError, f"type mismatch: {func} of {t} in {lit}", getattr(lit, "pos", self.rule.pos)
            )
        return "float" if func == "mean" else t


def check_types(rule: Rule, rels: dict[str, Relation]) -> dict[str, str]:
    """Check a (safe, normalised) rule's types; returns each variable's type."""
    return _checked(rule, rels).env


def typed_records(rule: Rule, rels: dict[str, Relation]) -> Rule:
    """The (checked) rule with the type of each record, nil and branch term in its `Call.type`."""
    ts = _checked(rule, rels)
    if not ts.typed:
        return rule

    def down(t: Term) -> Term:
        if isinstance(t, Call) and t in ts.typed:
            return Call(t.name, tuple(down(a) for a in t.args), t.pos, ts.typed[t])
        return t

    head = Atom(rule.head.pred, tuple(down(a) for a in rule.head.args), rule.head.pos)
    return Rule(head, tuple(rebuild_literal(x, down, top_down=True) for x in rule.body), rule.pos, rule.shown)


def _checked(rule: Rule, rels: dict[str, Relation]) -> _Types:
    ts = _Types(rule, rels)
    for final in (False, True):  # assignments may depend on each other's order; two passes settle them
        ts.final = final
        for lit in rule.body:
            if isinstance(lit, (Atom, GroupBy)):
                ts.literal(lit)
        for lit in rule.body:
            if not isinstance(lit, (Atom, GroupBy)):
                ts.literal(lit)
    head = rels[rule.head.pred]
    for i, (a, ct) in enumerate(zip(rule.head.args, head.types, strict=True)):
        where = f"argument {i + 1} of the head {rule.head} (column {head.name}.{head.columns[i]})"
        if records.is_record_term(a) or records.is_structured(ct):
            ts.against(a, ct, where, rule.head)
            continue
        t = ts.expr(a)
        if t is not None and not fits(t, ct):
            raise at(
                SchemaError,
                f"type mismatch: argument {i + 1} of the head {rule.head} is {records.shown(t)}, column "
                f"{head.name}.{head.columns[i]} is {ct}",
                rule.head.pos,
            )
    return ts
