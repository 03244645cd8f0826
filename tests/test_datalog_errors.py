"""Errors of the Datalog front end: syntax (with line and column), unknown predicates, arity and type
mismatches, unsafe rules (with the rule's line and column), unstratifiable programs (naming the cycle),
unsupported constructs; and that nothing is declared on the pipeline when a program is rejected."""

from __future__ import annotations

import re

import pytest

import dbspark
from dbspark.errors import ParseError, SchemaError, UnknownNameError, UnsupportedError
from dbspark.frontends.datalog import compile_program
from dbspark.frontends.datalog.check import StratificationError, UnsafeRuleError

DECLS = """.decl e(x: number, y: number)
.input e
.decl s(n: symbol)
.input s
.decl p(x: number, y: number)
.output p
"""
OFFSET = DECLS.count("\n")  # the rule under test is on line OFFSET + 1


def err(text: str, cls: type[Exception] = Exception) -> Exception:
    with pytest.raises(cls) as ei:
        compile_program(text)
    return ei.value


@pytest.mark.parametrize(
    "text,line,col,needle",
    [
        ("p(x, y) :- e(x, y)", 1, 19, "the end of the program"),
        ("p(x, y) :- e(x, y),.", 1, 20, "unexpected '.'"),
        ("p(x, y) :- e(x, y) $ e(y, x).", 1, 20, "unexpected character '$'"),
        (".decl q(x number)", 1, 11, "expected ':'"),
        ("p(x, y) :- e(x y).", 1, 16, "unexpected 'y'"),
        ("\n\n  p(x, y) <- e(x, y).", 3, 11, "unexpected '<'"),
        ("p(x, y) :- e(x, y), c < count { e(x, _) }.", 1, 31, "unexpected '{'"),
        ("p(x, y) :- e(x, y), /* unterminated", 1, 21, "unexpected"),
        ('p(x, "a) :- e(x, y).', 1, 6, "unexpected character"),
        (".decl q(x: number)\n.bogus q", 2, 1, "unknown directive .bogus"),
    ],
)
def test_syntax_errors_have_line_and_column(text, line, col, needle):
    e = err(text, ParseError)
    assert (e.line, e.column) == (line, col), str(e)
    assert needle in str(e) and f"line {line}, column {col}" in str(e)


@pytest.mark.parametrize(
    "rule,cls,pattern,col",
    [
        ("p(x, y) :- e(x, y), f(y).", UnknownNameError, "unknown predicate 'f'", 21),
        ("q(x, y) :- e(x, y).", UnknownNameError, "rule head 'q' is not declared", 1),
        (
            "p(x, y) :- e(x, y, 1).",
            SchemaError,
            r"arity mismatch: e\(x, y, 1\) has 3 argument\(s\), 'e' has 2",
            12,
        ),
        ("p(x) :- e(x, _).", SchemaError, "arity mismatch: p\\(x\\)", 1),
        ("p(x, y) :- e(x, y), !e(x).", SchemaError, "arity mismatch", 22),
        ("p(x, y) :- e(x, y), s(x).", SchemaError, "type mismatch .*variable x is number .* and symbol", 21),
        ('p(x, y) :- e(x, y), s("a"), x = "a".', SchemaError, "compares number with symbol", 29),
        ('p(x, x) :- e(x, "b").', SchemaError, 'argument 2 of e\\(x, "b"\\) is the symbol', 17),
        ("p(x, n) :- e(x, _), s(n).", SchemaError, "argument 2 of the head p\\(x, n\\) is symbol", 1),
        ("p(x, y) :- e(x, _), s(n), y = n + 1.", SchemaError, "arithmetic '\\+' on symbol", 31),
        ("p(x, y) :- e(x, _), y = sum n : { s(n) }.", SchemaError, "sum of symbol", 21),
        ("p(2.5, 1).", SchemaError, "argument 1 of fact p\\(2.5, 1\\) is a float", 3),
    ],
)
def test_semantic_errors(rule, cls, pattern, col):
    e = err(DECLS + rule, cls)
    assert re.search(pattern, str(e)), str(e)
    assert (e.line, e.column) == (OFFSET + 1, col), str(e)


@pytest.mark.parametrize(
    "rule,var",
    [
        ("p(x, y) :- e(x, _).", "['y'] in the head"),
        ("p(x, y) :- e(x, x), !e(y, x).", "['y'] in !e(y, x)"),
        ("p(x, y) :- e(x, x), y > x.", "['y'] in y > x"),
        ("p(x, y) :- !e(x, y).", "['x', 'y'] in !e(x, y)"),
        ("p(x, _) :- e(x, x).", "wildcard"),
        ("p(x, y) :- e(x, x), y = z + 1.", "['y', 'z']"),
        ("p(x, 1).", "['x'] in the head"),
        ("p(x, n) :- n = count : { e(x, _) }.", "['x'] in n = count : { e(x, _) }"),
    ],
)
def test_unsafe_rules_name_the_variable_and_the_rule(rule, var):
    e = err(DECLS + rule, UnsafeRuleError)
    assert "unsafe rule" in str(e) and var in str(e), str(e)
    assert (e.line, e.column) == (OFFSET + 1, 1)


@pytest.mark.parametrize(
    "rules,cycle,kind",
    [
        ("p(x, y) :- e(x, y), !p(y, x).", "!p -> p", "negation"),
        ("a(x) :- e(x, _), !b(x).\nb(x) :- c(x).\nc(x) :- a(x).", "a -> c -> !b -> a", "negation"),
        (  # (n > 0 would be monotonic: accepted, tests/test_recursive_aggregates.py)
            "a(x) :- e(x, _), n = count : { b(x) }, n < 1.\nb(x) :- a(x).",
            "a -> aggregate of b -> a",
            "aggregation",
        ),
        ("a(x) :- groupby(a(y), [y], x = max<y>).", "aggregate of a -> a", "aggregation"),
    ],
)
def test_unstratifiable_programs_name_the_cycle(rules, cycle, kind):
    text = DECLS + ".decl a(x: number)\n.decl b(x: number)\n.decl c(x: number)\n" + rules
    e = err(text, StratificationError)
    # recursion through aggregation is refused only when not monotonic
    what = "cannot be stratified" if kind == "negation" else "is not monotonic"
    assert what in str(e) and f"through {kind}" in str(e) and f"({cycle})" in str(e), str(e)
    assert e.line > OFFSET


@pytest.mark.parametrize(
    "text,cls,pattern",
    [
        (".decl q()", UnsupportedError, "nullary"),
        (".decl q(x: number)\n.decl q(y: number)", SchemaError, "declared twice"),
        (".decl q(x: int)", SchemaError, "unknown type 'int'"),
        (".decl q(x: number, x: number)", SchemaError, "duplicate attribute"),
        (".input q", UnknownNameError, "relation 'q' is not declared"),
        (
            ".decl q(x: number)\n.printsize q(IO=file)",
            UnsupportedError,
            ".printsize q: it takes no parameters",
        ),
        (".decl q(x: number)\n.input q(IO=sqlite)", UnsupportedError, "IO=sqlite"),
        (".decl q(x: number)\n.input q(foo=1)", UnsupportedError, "unknown parameter"),
        (".decl q(x: number)\n.output q(IO=sqlite)", UnsupportedError, "IO=sqlite"),
        (".decl q(x: number)\n.output q(foo=1)", UnsupportedError, r"unknown parameter\(s\) \['foo'\]"),
        (".decl q(x: number)\n.output q\n.output q", SchemaError, "given twice"),
        (".type T <: float\n.decl q(x: T)\n.decl r(x: number)\nq(x) :- r(x).", SchemaError, "type mismatch"),
    ],
)
def test_declaration_errors(text, cls, pattern):
    e = err(text, cls)
    assert re.search(pattern, str(e)), str(e)


def test_type_aliases_and_unsigned():
    c = compile_program(".type Node <: number\n.type Id = Node\n.decl q(x: Id, y: unsigned)\nq(1, 2).")
    assert c.relations["q"].types == ["number", "unsigned"] and c.facts == {"q": [(1, 2)]}
    e = err(".decl q(x: unsigned)\nq(-1).", SchemaError)
    assert "negative" in str(e) and (e.line, e.column) == (2, 3)


def test_rejected_program_declares_nothing():
    """Checks run before anything is declared: a bad program leaves the pipeline untouched."""
    p = dbspark.Pipeline(engine="local")
    with pytest.raises(UnknownNameError):
        p.datalog(DECLS + "p(x, y) :- e(x, y), nope(x).")
    assert p.tables == [] and p.views == []
    p.datalog(DECLS + "p(x, y) :- e(x, y).")
    assert p.tables == ["e", "s"] and p.views == ["p"]


def test_redeclaring_a_table():
    p = dbspark.Pipeline(engine="local")
    p.table("t", {"a": "int64"})
    with pytest.raises(Exception, match="'t' is already declared"):
        p.datalog(".decl t(a: number)\n.input t")


def test_reading_a_pipeline_relation_checks_arity_and_types():
    p = dbspark.Pipeline(engine="local")
    p.table("t", {"a": "int64", "b": "str"})
    with pytest.raises(SchemaError, match="arity mismatch"):
        p.datalog(".decl q(x: number)\n.output q\nq(x) :- t(x).")
    with pytest.raises(SchemaError, match="type mismatch"):
        p.datalog(".decl q(x: number)\n.output q\nq(y) :- t(_, y).")
    assert p.datalog(".decl q(x: symbol)\n.output q\nq(y) :- t(_, y).") == ["q"]
    with pytest.raises(
        SchemaError, match="declared as \\(number, number\\), but the pipeline's relation 't' has"
    ):
        p.datalog(".decl t(a: number, b: number)\n.decl r(x: number)\n.output r\nr(x) :- t(x, _).")
    assert p.datalog(".decl t(a: number, b: symbol)\n.decl r(x: number)\n.output r\nr(x) :- t(x, _).") == [
        "r"
    ]


def test_runaway_recursion_is_reported_with_the_scope():
    from dbspark.errors import RecursionLimitError
    from dbspark.frontends.datalog import load

    p = dbspark.Pipeline(engine="local")
    load(
        p,
        ".decl n(x: number)\n.input n\n.decl c(x: number)\n.output c\nc(x) :- n(x).\nc(x + 1) :- c(x).",
        max_iterations=20,
    )
    p.insert("n", [(0,)])
    with pytest.raises(RecursionLimitError, match="datalog_c"):
        p.step()
