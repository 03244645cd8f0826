"""Soufflé's expressions in the Datalog front end: the comparison grammar, operators and functors.

Programs and expected outputs worked out from Soufflé's manual (the "Arguments" page's examples and the
operator precedence of its grammar), then every functor under inserts and deletes of input facts against
the naive evaluator (`dbspark.testing.datalog`, whose functors are `dbspark.testing.functors`) after
every step, on both engines.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import strategies as st

from dbspark.errors import DataError, ParseError, SchemaError, UnknownNameError, UnsupportedError
from dbspark.frontends.datalog.check import StratificationError
from dbspark.testing.datalog import evaluate, run_against_oracle
from dbspark.testing.engines import engine_given, pipeline_on


def derive(engine, text: str, inputs: dict[str, list[tuple]], out: str) -> set[tuple]:
    p = pipeline_on(engine)
    try:
        p.datalog(text)
        for k, rows in inputs.items():
            p.insert(k, rows)
        p.step()
        got = set(p.view(out).to_dict())
    finally:
        p.close()
    assert got == evaluate(text, {k: set(v) for k, v in inputs.items()})[out]
    return got


def test_comparisons_with_a_compound_left_operand(engine):
    """Was a syntax error: `x + 1 > y`, `-x > y`, `(x) > y` (the groupby literal's `<` `>` took them)."""
    text = """
    .decl e(x: number, y: number) .input e
    .decl a(x: number, y: number) .output a
    .decl b(x: number, y: number) .output b
    .decl c(x: number, y: number) .output c
    .decl d(x: number, n: number) .output d
    a(x, y) :- e(x, y), x + 1 > y.
    b(x, y) :- e(x, y), -x > y.
    c(x, y) :- e(x, y), (x) >= y, x * 2 < y + 10.
    d(x, n) :- e(x, _), groupby(e(x, y), [x], n = sum<y>), n * 1 > 0.
    """
    rows = [(1, 1), (1, 2), (1, 3), (-5, 2), (4, 4), (6, -1)]
    assert derive(engine, text, {"e": rows}, "a") == {(1, 1), (4, 4), (6, -1)}
    assert derive(engine, text, {"e": rows}, "b") == {(-5, 2)}
    assert derive(engine, text, {"e": rows}, "c") == {(1, 1), (4, 4)}
    assert derive(engine, text, {"e": rows}, "d") == {(1, 6), (4, 4), (-5, 2)}


def test_the_manuals_string_functors(engine):
    """The examples of Soufflé's manual ("Arguments"), with the outputs it lists."""
    text = """
    .decl Y(a: symbol, b: symbol)
    .decl Z(a: symbol, b: symbol, c: symbol) .output Z
    Y("a", "b"). Y("c", "d").
    Z(a, b, cat(cat(a, b), a)) :- Y(a, b).
    .decl length(n: number) .output length
    length(n) :- n = strlen("Hello").
    length(n) :- n = strlen("World!").
    .decl stringTable(t: symbol)
    .decl substringTable(t: symbol)
    .decl outputData(substr: symbol, str: symbol) .output outputData
    outputData(x, y) :- substringTable(x), stringTable(y), contains(x, y).
    stringTable("aaaa"). stringTable("abba"). stringTable("bcab"). stringTable("bdab").
    substringTable("a"). substringTable("ab"). substringTable("cab").
    .decl inputData(t: symbol)
    .decl matched(t: symbol) .output matched
    matched(x) :- inputData(x), match("a.*", x).
    inputData("aaaa"). inputData("abba"). inputData("bcab"). inputData("bdab").
    """
    assert derive(engine, text, {}, "Z") == {("a", "b", "aba"), ("c", "d", "cdc")}
    assert derive(engine, text, {}, "length") == {(5,), (6,)}
    assert derive(engine, text, {}, "outputData") == {
        ("a", "aaaa"),
        ("a", "abba"),
        ("a", "bcab"),
        ("a", "bdab"),
        ("ab", "abba"),
        ("ab", "bcab"),
        ("ab", "bdab"),
        ("cab", "bcab"),
    }
    assert derive(engine, text, {}, "matched") == {("aaaa",), ("abba",)}


def test_operators_precedence_and_literals(engine):
    """Soufflé's precedence (lowest first): lor, lxor, land, bor, bxor, band, shifts, + -, * / %, unary
    - bnot lnot, then ^ (right-associative, above unary minus); hexadecimal, binary and unsigned
    literals; C++'s truncating / and %; true and false."""
    text = """
    .decl r(k: number, v: number) .output r
    r(1, -2^2). r(2, 2^3^2). r(3, 1 + 2 band 3). r(4, 1 bor 2 band 3). r(5, 0x1F + 0b101).
    r(6, 1 bshl 2 + 1). r(7, -7 / 2). r(8, -7 % 3). r(9, 7 % -3). r(10, bnot 0). r(11, lnot 5 lor 0).
    r(12, 3 land 0 lor 2). r(13, 1 lxor 1). r(14, -1 bshru 60). r(15, -16 bshr 2). r(16, 1 bshl 64).
    r(17, min(3, -2, 7)). r(18, max(3, -2, 7)). r(19, abs(-4)). r(20, 2 * 3 ^ 2). r(21, 7 / 2 * 2).
    r(22, x) :- x = 2, true.
    r(23, x) :- x = 2, false.
    .decl u(x: unsigned) .output u
    u(7u). u(0x10u). u(as(5, unsigned)).
    """
    want = {
        (1, -4),
        (2, 512),
        (3, 3),
        (4, 3),
        (5, 36),
        (6, 8),
        (7, -3),
        (8, -1),
        (9, 1),
        (10, -1),
        (11, 0),
        (12, 1),
        (13, 0),
        (14, 15),
        (15, -4),
        (16, 1),
        (17, -2),
        (18, 7),
        (19, 4),
        (20, 18),
        (21, 6),
        (22, 2),
    }
    got = evaluate(text, {})
    assert got["r"] == want
    assert got["u"] == {(7,), (16,), (5,)}
    p = pipeline_on(engine)
    p.datalog(text)
    p.step()
    assert set(p.view("r").to_dict()) == want
    assert set(p.view("u").to_dict()) == {(7,), (16,), (5,)}
    p.close()


def test_conversions_and_substr(engine):
    text = """
    .decl s(x: symbol) .input s
    .decl n(x: symbol, v: number, u: unsigned, f: float) .output n
    n(x, to_number(x), to_unsigned(x), to_float(x)) :- s(x), match("[0-9]+", x).
    .decl f(x: symbol, v: float, back: symbol) .output f
    f(x, to_float(x), to_string(to_number(to_float(x)))) :- s(x), match("-?[0-9]*[.][0-9]+", x).
    .decl sub(x: symbol, a: symbol, b: symbol, c: symbol, d: symbol, e: symbol) .output sub
    sub(x, substr(x, 0, 2), substr(x, 1, 100), substr(x, strlen(x), 1), substr(x, -1, 2), substr(x, 2, -1)) :- s(x).
    .type Id <: number
    .decl t(x: number, y: unsigned, z: Id) .output t
    t(to_number(to_string(v * 10)), as(v, unsigned), as(v, Id)) :- n(_, v, _, _).
    """
    rows = [("12",), ("007",), ("abc",), ("-2.75",), (".5",), ("",)]
    derive(engine, text, {"s": rows}, "n")
    assert derive(engine, text, {"s": rows}, "f") == {("-2.75", -2.75, "-2"), (".5", 0.5, "0")}
    assert ("abc", "ab", "bc", "", "", "c") in derive(engine, text, {"s": rows}, "sub")
    assert ("", "", "", "", "", "") in derive(engine, text, {"s": rows}, "sub")
    assert derive(engine, text, {"s": rows}, "t") == {(120, 12, 12), (70, 7, 7)}


INT64 = st.one_of(
    st.integers(-5, 5),
    st.sampled_from([2**62, -(2**62), 2**63 - 1, -(2**63), 63, 64, 65, -1]),
    st.integers(-(2**63), 2**63 - 1),
)
SMALL = st.integers(-20, 20)
SYMBOLS = st.text(alphabet="ab1-.", max_size=4)

FUNCTOR_PROGRAM = """
.decl w(x: number, y: number) .input w
.decl s(x: number, y: number) .input s
.decl t(x: symbol, y: symbol) .input t
.decl bits(x: number, y: number, a: number, b: number, c: number, d: number, e: number, f: number, g: number) .output bits
bits(x, y, x band y, x bor y, x bxor y, bnot x, x bshl y, x bshr y, x bshru y) :- w(x, y).
.decl logic(x: number, y: number, a: number, b: number, c: number, d: number, m: number, n: number) .output logic
logic(x, y, x land y, x lor y, x lxor y, lnot x, min(x, y), max(x, y)) :- w(x, y), x bxor y != 0.
.decl arith(x: number, y: number, q: number, r: number, p: number, a: number, f: float) .output arith
arith(x, y, x / y, x % y, x ^ 2, abs(x - y), to_float(x) / to_float(y)) :- s(x, y), y != 0, x + 1 > y.
.decl strs(x: symbol, y: symbol, c: symbol, l: number, b: symbol) .output strs
strs(x, y, cat(x, y, x), strlen(x) + strlen(y), substr(cat(x, y), strlen(x) - 1, 2)) :- t(x, y), !contains(x, y).
.decl nums(x: symbol, v: number) .output nums
nums(x, to_number(x) + 1) :- t(x, _), match("-?[0-9]+", x).
"""


@engine_given(
    st.lists(st.tuples(INT64, INT64), max_size=6),
    st.lists(st.tuples(SMALL, SMALL), max_size=6),
    st.lists(st.tuples(SYMBOLS, SYMBOLS), max_size=6),
    st.lists(st.integers(0, 17), max_size=6),
    local=40,
    spark=3,
)
def test_functors_under_inserts_and_deletes(engine, w, s, t, drop):
    """Two steps of inserts, then deletes of some of the facts, then an empty step: every view equals the
    naive evaluator after every step, and each step's change is the difference."""
    everything = {k: sorted(set(rows)) for k, rows in (("w", w), ("s", s), ("t", t))}
    first = {k: rows[::2] for k, rows in everything.items()}
    second = {k: rows[1::2] for k, rows in everything.items()}
    gone = {k: {r for i, r in enumerate(rows) if i in drop} for k, rows in everything.items()}
    steps = [(first, {}), (second, {}), ({}, {k: sorted(v) for k, v in gone.items()}), ({}, {})]
    p = pipeline_on(engine)
    p.datalog(FUNCTOR_PROGRAM)
    run_against_oracle(p, FUNCTOR_PROGRAM, ["bits", "logic", "arith", "strs", "nums"], ["w", "s", "t"], steps)


@pytest.mark.parametrize(
    "rule, fault",
    [
        ("r(x / y) :- e(x, y).", "'/' of 7 by zero"),
        ("r(x % y) :- e(x, y).", "'%' of 7 by zero"),
        ("r((9 - x) ^ 70) :- e(x, _).", "of 1.18.* is not a 64-bit integer"),
        ('r(to_number(s)) :- e(x, _), s = cat(to_string(x), "x"), x < 8.', "of '7x' is not an integer"),
        ("r(as(y - 1, unsigned)) :- e(_, y).", "of -1 is negative"),
        ("r(to_unsigned(y - 1)) :- e(_, y).", "of -1 is negative"),
    ],
)
def test_a_faulty_value_rejects_the_step_naming_the_rule(engine, rule, fault):
    text = f"""
    .decl e(x: number, y: number) .input e
    .decl r(v: number) .output r
    {rule}
    """.replace("r(v: number)", "r(v: unsigned)" if "unsigned" in rule else "r(v: number)")
    p = pipeline_on(engine)
    try:
        p.datalog(text)
        p.insert("e", [(7, 0)])
        with pytest.raises(DataError, match=fault) as e:
            p.step()
        assert "rule r(" in str(e.value) and "(line 4, column 5)" in str(e.value)
        p.insert("e", [(8, 2)])  # the step was rejected whole: the pipeline goes on from before it
        p.step()
        assert set(p.view("r").to_dict()) == evaluate(text, {"e": {(8, 2)}})["r"]
    finally:
        p.close()


@pytest.mark.parametrize(
    "rule, error, message",
    [
        ('r(x) :- e(x, _), x = ord("a").', ParseError, "ord.*symbol table"),
        ("r(x) :- e(x, _), x = foo(1).", ParseError, "unknown functor 'foo'"),
        ("r(x) :- e(x, _), x = cat().", ParseError, r"cat\(...\) takes at least 1"),
        ('r(x) :- e(x, _), x = substr("a", 1).', ParseError, "takes 3 argument"),
        ("r(x) :- e(x, _), x = count(1, 2).", ParseError, "an aggregate, not a functor"),
        ("r(x) :- e(x, _), x = autoinc().", UnsupportedError, r"autoinc\(\) in the body of rule"),
        ("r(x) :- e(x, _), x = as(1.5, number).", SchemaError, "to_number"),
        ("r(x) :- e(x, _), x = as(x, Nope).", SchemaError, "unknown type 'Nope'"),
        ("r(x) :- e(x, _), x = 1.5 band 1.", SchemaError, "band takes integers"),
        ("r(x) :- e(x, _), x = strlen(x).", SchemaError, "strlen takes symbols"),
        ('r(x) :- e(x, _), x = min(x, "a").', SchemaError, "number and symbol"),
    ],
)
def test_bad_functors_are_clear_errors(rule, error, message):
    p = pipeline_on("local")
    with pytest.raises(error, match=message):
        p.datalog(f".decl e(x: number, y: number) .input e\n.decl r(x: number) .output r\n{rule}\n")
    p.close()


# ---- disjunctions and negated groups in bodies ----------------------------------------------------------
LEAVES = st.sampled_from(["p(x)", "q(x)", "r(x)", "x < 3", "x = 2", "x != 4", "x >= 5", "true", "false"])


def _formula(leaf: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.recursive(
        leaf,
        lambda f: st.one_of(
            f.map(lambda a: f"!{a}" if not a.startswith("!") else f"!({a})"),
            st.tuples(f, f).map(lambda ab: f"({ab[0]} ; {ab[1]})"),
            st.tuples(f, f).map(lambda ab: f"({ab[0]}, {ab[1]})"),
        ),
        max_leaves=6,
    )


def holds(formula: str, x: int, facts: dict[str, set[int]]) -> bool:
    """The formula's truth at x, by Python's own logic (not through the front end's normal form)."""
    py = (
        formula.replace(" != ", " NE ")
        .replace(" = ", " == ")
        .replace("!", " not ")
        .replace(" NE ", " != ")
        .replace(";", " or ")
        .replace(",", " and ")
        .replace("true", "True")
        .replace("false", "False")
    )
    for rel in ("p", "q", "r"):
        py = py.replace(f"{rel}(x)", f"(x in facts[{rel!r}])")
    return bool(eval(py, {}, {"x": x, "facts": facts}))  # noqa: S307 (a formula the test generated)


@engine_given(
    _formula(LEAVES),
    st.lists(st.tuples(st.sampled_from("pqr"), st.integers(0, 6), st.booleans()), min_size=1, max_size=12),
    local=60,
    spark=3,
)
def test_disjunctions_and_negated_groups(engine, formula, changes):
    """`a(x) :- dom(x), F.` for a random formula F of atoms, comparisons, true / false, `!`, `;` and
    `,` nested in parentheses: after every step (facts inserted and deleted) the view holds exactly
    the x where F is true, evaluated by Python directly."""
    text = f"""
    .decl dom(x: number)
    dom(0). dom(1). dom(2). dom(3). dom(4). dom(5). dom(6).
    .decl p(x: number) .input p
    .decl q(x: number) .input q
    .decl r(x: number) .input r
    .decl a(x: number) .output a
    a(x) :- dom(x), {formula}.
    """
    p = pipeline_on(engine)
    try:
        p.datalog(text)
        facts: dict[str, set[int]] = {"p": set(), "q": set(), "r": set()}
        for i in range(0, len(changes), 4):
            for rel, x, insert in changes[i : i + 4]:
                if insert and x not in facts[rel]:
                    p.insert(rel, [(x,)])
                    facts[rel].add(x)
                elif not insert and x in facts[rel]:
                    p.delete(rel, [(x,)])
                    facts[rel].discard(x)
            p.step()
            want = {(x,) for x in range(7) if holds(formula, x, facts)}
            assert set(p.view("a").to_dict()) == want, (formula, facts)
    finally:
        p.close()


def test_disjunctions_written_as_soufflé_writes_them():
    text = """
    .decl e(x: number, y: number) .input e
    .decl a(x: number) .output a
    a(x) :- e(x, y), (y = 1 ; y = 3), !(e(y, _) ; x > 5).
    .decl n(x: number, c: number) .output n
    n(x, c) :- e(x, _), c = count : { e(x, y), !(y = 1 ; y = 2) }.
    """
    rows = {(1, 1), (2, 3), (7, 1), (4, 2), (5, 3), (1, 4)}
    got = evaluate(text, {"e": rows})
    assert got["a"] == {(2,), (5,)}  # (1, 1): e(1, _) exists; (7, 1): 7 > 5; (4, 2): y is 2
    assert got["n"] == {(1, 1), (2, 1), (4, 0), (5, 1), (7, 0)}
    p = pipeline_on("local")
    p.datalog(text)
    p.insert("e", sorted(rows))
    p.step()
    assert set(p.view("a").to_dict()) == got["a"] and set(p.view("n").to_dict()) == got["n"]
    p.close()
    with pytest.raises(ParseError, match="disjunction inside an aggregate"):
        pipeline_on("local").datalog(text.replace("!(y = 1 ; y = 2)", "(y = 1 ; y = 2)"))
    with pytest.raises(ParseError, match=r"variable\(s\) \['c'\] in c != @agg are not bound"):
        pipeline_on("local").datalog(text.replace("c = count", "!(c = count").replace("2) }.", "2) })."))


# ---- relation qualifiers and eqrel ------------------------------------------------------------------------
EQREL = """
.decl link(x: number, y: number) .input link
.decl same(x: number, y: number) eqrel
same(x, y) :- link(x, y), x != 3.
same(7, 8).
.decl reach(x: number) btree .output reach
reach(y) :- same(1, y).
.decl classes(x: number, n: number) brie no_magic .output classes
classes(x, n) :- same(x, _), n = count : { same(x, _) }.
.output same
"""


def test_eqrel_as_the_manual_describes(engine):
    """`eqrel` holds the equivalence relation its pairs generate; the other qualifiers are accepted."""
    rows = [(1, 2), (2, 4), (5, 6), (3, 9), (4, 4)]
    same = derive(engine, EQREL, {"link": rows}, "same")
    classes = [{1, 2, 4}, {5, 6}, {7, 8}]
    assert same == {(a, b) for c in classes for a in c for b in c}
    assert derive(engine, EQREL, {"link": rows}, "reach") == {(1,), (2,), (4,)}
    assert derive(engine, EQREL, {"link": rows}, "classes") == {(x, len(c)) for c in classes for x in c}


@engine_given(
    st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), min_size=1, max_size=14),
    st.lists(st.integers(0, 13), max_size=6),
    local=40,
    spark=3,
)
def test_eqrel_under_inserts_and_deletes(engine, pairs, drop):
    """Soufflé's eqrel cannot delete (union-find); here a deleted pair splits its class where nothing
    else holds it together, checked against the naive evaluator's own union-find after every step."""
    rows = sorted(set(pairs))
    first, second = rows[::2], rows[1::2]
    gone = [r for i, r in enumerate(rows) if i in drop]
    steps = [({"link": first}, {}), ({"link": second}, {}), ({}, {"link": gone}), ({"link": gone[:1]}, {})]
    p = pipeline_on(engine)
    p.datalog(EQREL)
    run_against_oracle(p, EQREL, ["same", "reach", "classes"], ["link"], steps)


def test_eqrel_refusals():
    with pytest.raises(SchemaError, match="two attributes of one type"):
        pipeline_on("local").datalog(".decl s(x: number, y: symbol) eqrel\n")
    with pytest.raises(Exception, match="cannot be an input"):
        pipeline_on("local").datalog(".decl s(x: number, y: number) eqrel\n.input s\n")


def test_plan_and_pragma_are_accepted():
    text = """
    .pragma "magic-transform" "*"
    .decl e(x: number, y: number) .input e
    .decl p(x: number, y: number) .output p
    p(x, y) :- e(x, y).
    p(x, z) :- p(x, y), e(y, z).
    .plan 1:(2,1)
    """
    assert derive("local", text, {"e": [(1, 2), (2, 3)]}, "p") == {(1, 2), (2, 3), (1, 3)}
    with pytest.raises(ParseError, match=r"unknown directive .bogus \(the directives are .decl"):
        pipeline_on("local").datalog(text + ".bogus f(x: number): number\n")


LIMITED = """
.decl e(x: number, y: number) .input e
.decl p(x: number, y: number) .output p
p(x, y) :- e(x, y).
p(x, z) :- p(x, y), e(y, z).
.decl few(x: number, y: number) .output few
few(x, y) :- p(x, y), x != y.
.limitsize few(n=3)
.decl seen(x: number) .input seen
.limitsize seen(n=2)
.decl firsts(x: number) .output firsts
firsts(x) :- seen(x), !few(x, _).
"""


@engine_given(
    st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4)), min_size=1, max_size=10),
    st.lists(st.integers(0, 4), max_size=4),
    st.lists(st.integers(0, 9), max_size=3),
    local=30,
    spark=1,
    spark_strategies=(st.just([(0, 1), (1, 2), (2, 0), (3, 4)]), st.just([4, 0, 3]), st.just([0, 2])),
)
def test_limitsize_under_inserts_and_deletes(engine, edges, seen, drop):
    """`.limitsize r(n=N)` keeps r's N least tuples (Soufflé: the first N it derives), on a derived and an
    input relation, read by other rules; a delete lets the next tuple in."""
    rows = sorted(set(edges))
    gone = [r for i, r in enumerate(rows) if i in drop]
    ss = [(x,) for x in sorted(set(seen))]
    steps = [
        ({"e": rows[::2], "seen": ss[:2]}, {}),
        ({"e": rows[1::2], "seen": ss[2:]}, {}),
        ({}, {"e": gone, "seen": ss[:1]}),
    ]
    p = pipeline_on(engine)
    p.datalog(LIMITED)
    run_against_oracle(p, LIMITED, ["p", "few", "firsts"], ["e", "seen"], steps)


def test_limitsize_refusals():
    with pytest.raises(UnsupportedError, match=r".limitsize p: p is recursive"):
        pipeline_on("local").datalog(LIMITED + ".limitsize p(n=5)\n")
    with pytest.raises(SchemaError, match=r"write .limitsize few\(n=N\)"):
        pipeline_on("local").datalog(LIMITED.replace("few(n=3)", "few(size=3)"))


# ---- range(...) generators -------------------------------------------------------------------------------
RANGES = """
.decl b(lo: number, hi: number, s: number) .input b
.decl r(lo: number, x: number) .output r
r(lo, x) :- b(lo, hi, s), x = range(lo, hi, s).
.decl d(lo: number, x: number) .output d
d(lo, x) :- b(lo, hi, _), range(lo, hi) = x.
.decl m(x: number) .output m
m(x) :- b(x, hi, _), x = range(0, hi).
.decl c(lo: number, n: number) .output c
c(lo, n) :- b(lo, _, _), n = count : { b(lo, hi, s), y = range(lo, hi, s) }.
.decl t(x: number, y: number) .output t
t(x, y) :- x = range(0, 3), y = range(x, 3).
.decl g(x: number) .output g
g(x) :- b(x, _, _), x < 3.
g(y) :- g(x), y = range(x, x + 3, 2), y < 12.
"""


@engine_given(
    st.lists(st.tuples(st.integers(-6, 12), st.integers(-6, 12), st.integers(-3, 3)), min_size=1, max_size=8),
    st.lists(st.integers(0, 7), max_size=4),
    local=40,
    spark=3,
)
def test_range_generators_under_inserts_and_deletes(engine, bounds, drop):
    """`x = range(lo, hi[, step])` (either side; x bound: a filter) in rules, aggregates and recursion,
    every step against the naive evaluator, whose ranges are Soufflé's runRange written again."""
    rows = sorted(set(bounds))
    gone = [r for i, r in enumerate(rows) if i in drop]
    steps = [({"b": rows[::2]}, {}), ({"b": rows[1::2]}, {}), ({}, {"b": gone})]
    p = pipeline_on(engine)
    p.datalog(RANGES)
    run_against_oracle(p, RANGES, ["r", "d", "m", "c", "t", "g"], ["b"], steps)


def test_range_as_the_manual_writes_it():
    text = """
    .decl A(x: number) .output A
    A(x) :- x = range(1, 5).
    .decl B(x: number) .output B
    B(x) :- x = range(10, 0, -3).
    .decl C(x: number) .output C
    C(x) :- A(x), A(range(2, 4)), x = range(7, 7, 0) ; C(x) :- x = range(7, 8, 0).
    """.replace("; C(x) :-", ".\n    C(x) :-")
    got = {v: derive("local", text, {}, v) for v in "ABC"}
    assert got == {"A": {(1,), (2,), (3,), (4,)}, "B": {(10,), (7,), (4,), (1,)}, "C": {(7,)}}
    with pytest.raises(UnsupportedError, match="range.*in a rule's head"):
        pipeline_on("local").datalog(".decl A(x: number)\nA(range(1, 3)).\n")
    with pytest.raises(UnsupportedError, match="generates values only bound to a variable"):
        pipeline_on("local").datalog(".decl A(x: number)\nA(x) :- x = range(1, 3) + 1.\n")


@pytest.mark.spark
def test_ranges_in_a_spark_plan(spark_session):
    """With the changes placed on the cluster the ranges run in the step's Spark plan (sequence and
    explode), not in the driver; bounds 2^64 apart do not wrap."""
    import dbspark

    rows = [(1, 5, 1), (5, 1, -1), (3, 3, 0), (3, 7, 0), (0, 10, 3), (10, 0, -4), (0, 5, -1)]
    rows.append((-(2**63), 2**63 - 1, 2**62))
    text = RANGES.split(".decl d(")[0]  # b and r only (g would count up from -2^63)
    spark_session.conf.set("spark.dbspark.placement", "cluster")  # (small: it would run in the driver)
    p = dbspark.Pipeline(engine="spark", spark=spark_session)
    try:
        p.datalog(text)
        p.insert("b", spark_session.createDataFrame(rows, "lo long, hi long, s long"))
        p.step()
        want = evaluate(text, {"b": set(rows)})
        assert set(p.view("r").to_dict()) == want["r"]
        assert (-(2**63), 2**62) in want["r"]
    finally:
        p.close()
        spark_session.conf.unset("spark.dbspark.placement")


# ---- fact files as Soufflé reads them ---------------------------------------------------------------------
FILES = """
.decl s(x: number, n: symbol) .input s
.decl t(x: number, n: symbol) .input t(filename="t.csv", headers=true, columns="0:1")
.decl u(x: number, n: symbol) .input u(filename="u.facts.gz")
.decl c(x: number, n: symbol) .input c(filename="c.txt", delimiter="|", columns="2:3")
.decl q(x: number, n: symbol) .input q(filename="q.tsv", rfc4180=true)
.decl every(x: number, n: symbol) .output every
every(x, n) :- s(x, n) ; t(x, n) ; u(x, n) ; c(x, n) ; q(x, n).
"""


def _fact_files(d) -> None:
    import gzip

    (d / "s.facts").write_text('1\ta b\n2\t\n3\t"q"\n')  # Soufflé's default: raw text, no quoting
    (d / "t.csv").write_text('id,name,x\n4,"a,b",9\n5,"he said ""hi""",8\n6,,7\n')
    (d / "u.facts.gz").write_bytes(gzip.compress(b"7\tz\n"))
    (d / "c.txt").write_text("x|y|8|z\nw|v|9|q\n")
    (d / "q.tsv").write_text('10\t"tab\there"\n')


def test_fact_files_as_souffle_reads_them(engine, tmp_path):
    """Soufflé's fact-file options (`delimiter`, `headers`, `columns`, `rfc4180`, gzip), then the loaded
    facts deleted and inserted like any other, against the naive evaluator."""
    from dbspark.frontends.datalog import load

    _fact_files(tmp_path)
    p = pipeline_on(engine)
    try:
        load(p, FILES, base_dir=tmp_path)
        p.step()
        facts = {
            "s": {(1, "a b"), (2, ""), (3, '"q"')},
            "t": {(4, "a,b"), (5, 'he said "hi"'), (6, "")},
            "u": {(7, "z")},
            "c": {(8, "z"), (9, "q")},
            "q": {(10, "tab\there")},
        }
        assert set(p.view("every").to_dict()) == evaluate(FILES, facts)["every"]
        p.delete("s", [(2, "")])
        p.delete("t", [(5, 'he said "hi"')])
        p.insert("u", [(11, "")])
        p.step()
        facts["s"].discard((2, ""))
        facts["t"].discard((5, 'he said "hi"'))
        facts["u"].add((11, ""))
        assert set(p.view("every").to_dict()) == evaluate(FILES, facts)["every"]
    finally:
        p.close()


@pytest.mark.parametrize(
    "change, message",
    [
        (('delimiter="|"', 'delimiter="||"'), "longer than one byte"),
        (('columns="2:3"', 'columns="2:9"'), r"columns \[2, 9\], but the file has 4 columns"),
        (('columns="2:3"', 'columns="a:b"'), "not a list of column numbers"),
        (('columns="2:3"', 'columns="1:3"'), "cannot read the facts"),
        (('filename="q.tsv", ', 'filename="q.tsv", nope=1, '), r"unknown parameter\(s\) \['nope'\]"),
    ],
)
def test_bad_fact_file_options(tmp_path, change, message):
    from dbspark.frontends.datalog import load

    _fact_files(tmp_path)
    p = pipeline_on("local")
    with pytest.raises((SchemaError, DataError, UnsupportedError), match=message):
        load(p, FILES.replace(*change), base_dir=tmp_path)
    p.close()


def test_type_unions_subtypes_and_equivalences(engine):
    """Soufflé's `.type` forms: subtypes, equivalences and unions all take their primitive type's values
    (records and ADTs: `test_datalog_records.py`)."""
    text = """
    .type Dog <: symbol
    .type Cat <: symbol
    .type Pet = Dog | Cat
    .type Id = number
    .type Small <: Id
    .decl dog(d: Dog) .input dog
    .decl cat(c: Cat) .input cat
    .decl pet(p: Pet, n: Small) .output pet
    pet(d, strlen(d)) :- dog(d).
    pet(c, 0 - strlen(c)) :- cat(c), !dog(c).
    """
    assert derive(engine, text, {"dog": [("rex",), ("tom",)], "cat": [("tom",), ("kit",)]}, "pet") == {
        ("rex", 3),
        ("tom", 3),
        ("kit", -3),
    }
    with pytest.raises(SchemaError, match="a union of different base types: A \\(number\\), B \\(symbol\\)"):
        pipeline_on("local").datalog(".type A <: number\n.type B <: symbol\n.type C = A | B\n")
    with pytest.raises(SchemaError, match="unknown type 'Nope'"):
        pipeline_on("local").datalog(".type C = number | Nope\n")
    with pytest.raises(SchemaError, match="a union of different base types: P \\(P\\), Q \\(number\\)"):
        pipeline_on("local").datalog(".type P = [x: number]\n.type Q <: number\n.type C = P | Q\n")


# ---- components ------------------------------------------------------------------------------------------
COMPONENTS = """
.comp Graph<T> {
  .decl edge(x: T, y: T)
  .decl path(x: T, y: T) overridable
  path(x, y) :- edge(x, y).
  path(x, z) :- path(x, y), edge(y, z).
}
.comp Sym<T> : Graph<T> {
  .override path
  path(x, y) :- edge(x, y) ; edge(y, x).
  path(x, z) :- path(x, y), path(y, z).
}
.comp Pair<A, B> {
  .type Key <: A
  .decl left(k: Key, v: B)
  .init inner = Graph<A>
  inner.edge(x, y) :- link(x, y), x != y.
  left(k, cat("n", to_string(n))) :- inner.path(k, _), n = count : { inner.path(k, _) }.
  .output left
}
.decl link(x: number, y: number) .input link
.init g = Graph<number>
.init h = Sym<number>
.init p = Pair<number, symbol>
g.edge(x, y) :- link(x, y).
h.edge(x, y) :- link(x, y), x < 5.
.decl out(x: number) .output out
out(y) :- g.path(1, y), !h.path(1, y).
.output g.path, h.path
"""
# the same program as Soufflé's manual says the instances expand, written out by hand
FLATTENED = """
.decl link(x: number, y: number) .input link
.decl g.edge(x: number, y: number)
.decl g.path(x: number, y: number) .output g.path
g.path(x, y) :- g.edge(x, y).
g.path(x, z) :- g.path(x, y), g.edge(y, z).
.decl h.edge(x: number, y: number)
.decl h.path(x: number, y: number) .output h.path
h.path(x, y) :- h.edge(x, y) ; h.edge(y, x).
h.path(x, z) :- h.path(x, y), h.path(y, z).
.decl p.left(k: number, v: symbol) .output p.left
.decl p.inner.edge(x: number, y: number)
.decl p.inner.path(x: number, y: number)
p.inner.path(x, y) :- p.inner.edge(x, y).
p.inner.path(x, z) :- p.inner.path(x, y), p.inner.edge(y, z).
p.inner.edge(x, y) :- link(x, y), x != y.
p.left(k, cat("n", to_string(n))) :- p.inner.path(k, _), n = count : { p.inner.path(k, _) }.
g.edge(x, y) :- link(x, y).
h.edge(x, y) :- link(x, y), x < 5.
.decl out(x: number) .output out
out(y) :- g.path(1, y), !h.path(1, y).
"""


@engine_given(
    st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), min_size=1, max_size=12),
    st.lists(st.integers(0, 11), max_size=5),
    local=30,
    spark=2,
)
def test_components_expand_as_the_manual_says(engine, links, drop):
    """Type parameters, inheritance with `.override`, local types, nested instances and `.output`
    inside a component: the instances' relations after every step (inserts, deletes) equal the naive
    evaluator's on the program expanded by hand."""
    rows = sorted(set(links))
    gone = [r for i, r in enumerate(rows) if i in drop]
    steps = [({"link": rows[::2]}, {}), ({"link": rows[1::2]}, {}), ({}, {"link": gone})]
    p = pipeline_on(engine)
    assert sorted(p.datalog(COMPONENTS)) == ["g.path", "h.path", "link", "out", "p.left"]
    run_against_oracle(p, FLATTENED, ["out", "g.path", "h.path", "p.left"], ["link"], steps)


@pytest.mark.parametrize(
    "text, message",
    [
        (".init g = Nope<number>\n", "unknown component 'Nope'"),
        (".comp A<T> { .decl r(x: T) }\n.init a = A\n", "takes 1 type argument"),
        (".comp A : B { }\n.comp B : A { }\n.init a = A\n", "inherits from itself"),
        (".override r\n", "outside a component"),
    ],
)
def test_component_errors(text, message):
    with pytest.raises((SchemaError, UnknownNameError), match=message):
        pipeline_on("local").datalog(text)


# ---- user-defined functors (`dbspark.functors`) -------------------------------------------------------------
USER_FUNCTORS = """
.functor gcd(a: number, b: number): number
.functor up(s: symbol): symbol
.functor hyp(a: float, b: float): float
.functor half(n: number): float
.decl p(x: number, y: number, s: symbol) .input p
.decl r(g: number, u: symbol, h: float) .output r
r(@gcd(x, y), @up(s), @hyp(to_float(x), @half(y))) :- p(x, y, s), @gcd(x, y) > 1.
"""
FUNCS = {"gcd": math.gcd, "up": str.upper, "hyp": math.hypot, "half": lambda n: n / 2}


@engine_given(
    st.lists(st.tuples(st.integers(0, 30), st.integers(0, 30), SYMBOLS), min_size=1, max_size=8),
    st.lists(st.integers(0, 7), max_size=3),
    local=30,
    spark=2,
)
def test_user_functors_under_inserts_and_deletes(engine, rows, drop):
    rows = sorted(set(rows))
    gone = [r for i, r in enumerate(rows) if i in drop]
    steps = [({"p": rows[::2]}, {}), ({"p": rows[1::2]}, {}), ({}, {"p": gone})]
    p = pipeline_on(engine)
    p.datalog(USER_FUNCTORS, functors=FUNCS)
    run_against_oracle(p, USER_FUNCTORS, ["r"], ["p"], steps)


@pytest.mark.spark
def test_user_functors_as_spark_udfs(spark_session):
    """On the cluster path a functor runs as a Python UDF on the executors."""
    import dbspark

    rows = [(12, 18, "ab"), (7, 5, "c"), (9, 6, "")]
    spark_session.conf.set("spark.dbspark.placement", "cluster")
    p = dbspark.Pipeline(engine="spark", spark=spark_session)
    try:
        p.datalog(USER_FUNCTORS, functors=FUNCS)
        p.insert("p", spark_session.createDataFrame(rows, "x long, y long, s string"))
        p.step()
        assert set(p.view("r").to_dict()) == evaluate(USER_FUNCTORS, {"p": set(rows)})["r"]
    finally:
        p.close()
        spark_session.conf.unset("spark.dbspark.placement")


def _boom(x: int) -> int:
    raise ValueError(f"no {x}")


@pytest.mark.parametrize(
    "text, functors, error, message",
    [
        (".functor f(x: number): number\nr(@f(x)) :- e(x).", {}, UnknownNameError, "no Python function"),
        ("r(@g(x)) :- e(x).", {}, UnknownNameError, "functor @g is not declared"),
        (".functor f(x: number): number\nr(@f(x, x)) :- e(x).", {"f": abs}, SchemaError, "takes 1 argument"),
        (".functor f(x: symbol): number\nr(@f(x)) :- e(x).", {"f": len}, SchemaError, "@f takes symbol"),
        (".functor f(x: number): number stateful\n", {}, ParseError, "stateful functors"),
    ],
)
def test_user_functor_errors(text, functors, error, message):
    with pytest.raises(error, match=message):
        pipeline_on("local").datalog(
            f".decl e(x: number) .input e\n.decl r(x: number) .output r\n{text}\n", functors=functors
        )


@pytest.mark.parametrize("fn, message", [(_boom, r"@f\(3,\) raised ValueError: no 3"), (str, "returned '3'")])
def test_a_failing_user_functor_rejects_the_step(engine, fn, message):
    text = ".functor f(x: number): number\n.decl e(x: number) .input e\n.decl r(x: number) .output r\n"
    p = pipeline_on(engine)
    try:
        p.datalog(text + "r(@f(x)) :- e(x).\n", functors={"f": fn})
        p.insert("e", [(3,)])
        with pytest.raises(DataError, match=message):
            p.step()
    finally:
        p.close()


def test_aggregates_as_terms(engine):
    """Soufflé's aggregates where a value is expected: in a head, in a comparison, inside an expression
    and inside a functor; each the same as binding it to a variable first (the naive evaluator's
    program writes that form)."""
    text = """
    .decl e(x: number, y: number) .input e
    .decl node(x: number) .input node
    .decl deg(x: number, n: number) .output deg
    deg(x, count : { e(x, _) }) :- node(x).
    .decl busy(x: number) .output busy
    busy(x) :- node(x), 1 < count : { e(x, _) }.
    .decl top(x: number, m: number) .output top
    top(x, max(0, max y : { e(x, y) } - 1)) :- node(x), e(x, _).
    """
    written = """
    .decl e(x: number, y: number) .input e
    .decl node(x: number) .input node
    .decl deg(x: number, n: number) .output deg
    deg(x, n) :- node(x), n = count : { e(x, _) }.
    .decl busy(x: number) .output busy
    busy(x) :- node(x), n = count : { e(x, _) }, 1 < n.
    .decl top(x: number, m: number) .output top
    top(x, max(0, m - 1)) :- node(x), e(x, _), m = max y : { e(x, y) }.
    """
    rows = {"e": [(1, 2), (1, 5), (2, 0), (3, 3)], "node": [(1,), (2,), (4,)]}
    p = pipeline_on(engine)
    try:
        p.datalog(text)
        for k, v in rows.items():
            p.insert(k, v)
        p.step()
        want = evaluate(written, {k: set(v) for k, v in rows.items()})
        assert {v: set(p.view(v).to_dict()) for v in ("deg", "busy", "top")} == {
            v: want[v] for v in ("deg", "busy", "top")
        }
        assert want["deg"] == {(1, 2), (2, 1), (4, 0)} and want["busy"] == {(1,)}
        assert want["top"] == {(1, 4), (2, 0)}
        p.delete("e", [(1, 5)])
        p.step()
        want = evaluate(written, {"e": {(1, 2), (2, 0), (3, 3)}, "node": set(rows["node"])})
        assert {v: set(p.view(v).to_dict()) for v in ("deg", "busy", "top")} == {
            v: want[v] for v in ("deg", "busy", "top")
        }
    finally:
        p.close()


# ---- subsumption and choice domains ---------------------------------------------------------------------
CHOOSING = """
.decl e(x: number, d: number, s: symbol) .input e
.decl best(x: number, d: number) .output best
best(x, d) :- e(x, d, _).
best(x, d1) <= best(x, d2) :- d1 >= d2.
.decl pick(x: number, d: number, s: symbol) choice-domain x .output pick
pick(x, d, s) :- e(x, d, s).
.decl two(x: number, d: number, s: symbol) choice-domain (x, s) .output two
two(x, d, s) :- e(x, d, s).
.decl after(x: number) .output after
after(x) :- best(x, d), d < 5.
"""


def test_subsumption_and_choice_by_hand():
    rows = {(1, 3, "a"), (1, 2, "b"), (1, 2, "c"), (2, 7, "a"), (3, 9, "z"), (3, 9, "a")}
    got = {v: derive("local", CHOOSING, {"e": sorted(rows)}, v) for v in ("best", "pick", "two", "after")}
    assert got["best"] == {(1, 2), (2, 7), (3, 9)}  # per x, the least d (equal ones dominate each other)
    assert got["pick"] == {(1, 2, "b"), (2, 7, "a"), (3, 9, "a")}  # per x, the least (d, s)
    assert got["two"] == {(1, 3, "a"), (1, 2, "b"), (1, 2, "c"), (2, 7, "a"), (3, 9, "z"), (3, 9, "a")}
    assert got["after"] == {(1,)}


@engine_given(
    st.lists(
        st.tuples(st.integers(0, 4), st.integers(0, 6), st.sampled_from("abc")), min_size=1, max_size=12
    ),
    st.lists(st.integers(0, 11), max_size=5),
    local=30,
    spark=2,
)
def test_subsumption_and_choice_under_inserts_and_deletes(engine, rows, drop):
    """A deleted best tuple brings back the next best: kept against the naive evaluator, whose own
    filter drops dominated tuples and keeps the least per choice domain."""
    rows = sorted(set(rows))
    gone = [r for i, r in enumerate(rows) if i in drop]
    steps = [({"e": rows[::2]}, {}), ({"e": rows[1::2]}, {}), ({}, {"e": gone})]
    p = pipeline_on(engine)
    p.datalog(CHOOSING)
    run_against_oracle(p, CHOOSING, ["best", "pick", "two", "after"], ["e"], steps)


@pytest.mark.parametrize(
    "text, error, message",
    [
        ("r(x, d1) >= r(x, d2) :- d1 >= d2.", ParseError, "written r\\(x, d1\\) <= r\\(x, d2\\)"),
        ("r(x, d1) <= e(x, d2) :- d1 >= d2.", ParseError, "two tuples of one relation"),
        (
            "r(x, d) :- r(d, x).\nr(x1, d1) <= r(x2, d2) :- x1 <= x2, d1 >= d2.",
            UnsupportedError,
            "r reaches itself through its rules, and in a recursion dbspark applies one subsumptive",
        ),
        (  # in a recursion through min: a rule making costs smaller as they grow, named as written
            "r(x, d) :- r(x, d0), d = 10 - d0, d > 0.\nr(x, d1) <= r(x, d2) :- d1 >= d2.",
            StratificationError,
            "rule r\\(x, d\\) :- r\\(x, d0\\), d = \\(10 - d0\\), d > 0. is not monotonic",
        ),
        (
            ".decl q(x: number, y: number) choice-domain x\nq(x, y) :- q(y, x).\nq(x, y) :- e(x, y).",
            UnsupportedError,
            "choice domain on a relation that reaches itself",
        ),
        (".decl q(x: number) choice-domain y\n", SchemaError, "unknown attribute\\(s\\) \\['y'\\]"),
        (".decl q(x: number, y: number) choice-domain x, y\n", UnsupportedError, "several choice domains"),
    ],
)
def test_subsumption_errors(text, error, message):
    head = ".decl e(x: number, d: number) .input e\n.decl r(x: number, d: number) .output r\nr(x, d) :- e(x, d).\n"
    with pytest.raises(error, match=message):
        pipeline_on("local").datalog(head + text + "\n")


# Subsumption inside a recursion, written the Soufflé way: shortest distances (the least d per node)
# and widest paths (the largest bottleneck per node), each a recursion through min / max
SOUFFLE_PATHS = """
.decl edge(x: number, y: number, w: number) .input edge
.decl dist(x: number, d: number) .output dist
dist(0, 0).
dist(y, d + w) :- dist(x, d), edge(x, y, w).
dist(x, d1) <= dist(x, d2) :- d1 >= d2.
.decl wide(x: number, c: number) .output wide
wide(0, 100).
wide(y, min(c, w)) :- wide(x, c), edge(x, y, w).
wide(x, c1) <= wide(x, c2) :- c2 >= c1.
.decl near(x: number) .output near
near(x) :- dist(x, d), d < 6.
"""


def test_subsumption_in_a_recursion_by_hand():
    edges = [(0, 1, 5), (1, 2, 1), (0, 2, 9), (2, 0, 1), (2, 3, 50)]
    got = {v: derive("local", SOUFFLE_PATHS, {"edge": edges}, v) for v in ("dist", "wide", "near")}
    assert got["dist"] == {(0, 0), (1, 5), (2, 6), (3, 56)}
    assert got["wide"] == {(0, 100), (1, 5), (2, 9), (3, 9)}  # 0 -> 2 directly: bottleneck 9
    assert got["near"] == {(0,), (1,)}


@engine_given(
    st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5), st.integers(0, 9)), min_size=1, max_size=14),
    st.lists(st.integers(0, 13), max_size=5),
    local=30,
    spark=2,
)
def test_subsumption_in_a_recursion_under_inserts_and_deletes(engine, rows, drop):
    """Cycles, zero weights, parallel edges of other weights (a cost change is a delete and an insert):
    after every step as the naive evaluator, which drops dominated tuples at each round, as Soufflé."""
    rows = sorted({(x, y, w) for x, y, w in rows})
    gone = [r for i, r in enumerate(rows) if i in drop]
    changed = [(x, y, (w + 3) % 10) for x, y, w in gone if (x, y, (w + 3) % 10) not in rows]
    steps = [({"edge": rows[::2]}, {}), ({"edge": rows[1::2]}, {}), ({"edge": changed}, {"edge": gone})]
    p = pipeline_on(engine)
    p.datalog(SOUFFLE_PATHS)
    run_against_oracle(p, SOUFFLE_PATHS, ["dist", "wide", "near"], ["edge"], steps)


# ---- witnesses of min / max -----------------------------------------------------------------------------
WITNESSES = """
.decl family(name: symbol, age: number) .input family
.decl youngest(name: symbol, age: number) .output youngest
youngest(p, n) :- n = min x : family(p, x).
.decl e(g: number, w: symbol, c: number) .input e
.decl cheapest(g: number, w: symbol) .output cheapest
cheapest(g, w) :- e(g, _, _), _ = min c : { e(g, w, c) }.
.decl dearest(g: number, w: symbol, c: number) .output dearest
dearest(g, w, c + 1) :- e(g, _, _), c = max d : { e(g, w, d), w != "z" }.
"""
# as Soufflé's GroundWitnesses transform writes them (its documentation's example, by hand)
GROUNDED = """
.decl family(name: symbol, age: number) .input family
.decl youngest(name: symbol, age: number) .output youngest
youngest(p, n) :- n = min x : family(q, x), family(p, n).
.decl e(g: number, w: symbol, c: number) .input e
.decl cheapest(g: number, w: symbol) .output cheapest
cheapest(g, w) :- e(g, _, _), m = min c : { e(g, v, c) }, e(g, w, m).
.decl dearest(g: number, w: symbol, c: number) .output dearest
dearest(g, w, c + 1) :- e(g, _, _), c = max d : { e(g, v, d), v != "z" }, e(g, w, c), w != "z".
"""


def test_witnesses_as_the_manual_shows(engine):
    fam = [("Alissa", 10), ("Maria", 46), ("Mark", 50), ("John", 10)]
    p = pipeline_on(engine)
    try:
        p.datalog(WITNESSES.split(".decl e(")[0])
        p.insert("family", fam)
        p.step()
        assert set(p.view("youngest").to_dict()) == {("Alissa", 10), ("John", 10)}  # both tied witnesses
    finally:
        p.close()


@engine_given(
    st.lists(
        st.tuples(st.integers(0, 3), st.sampled_from("abz"), st.integers(0, 5)), min_size=1, max_size=10
    ),
    st.lists(st.tuples(st.sampled_from(["Ann", "Bo", "Cy"]), st.integers(1, 4)), max_size=5),
    st.lists(st.integers(0, 9), max_size=4),
    local=30,
    spark=2,
)
def test_witnesses_under_inserts_and_deletes(engine, es, fam, drop):
    es, fam = sorted(set(es)), sorted(set(fam))
    gone = [r for i, r in enumerate(es) if i in drop]
    steps = [({"e": es[::2], "family": fam}, {}), ({"e": es[1::2]}, {}), ({}, {"e": gone, "family": fam[:1]})]
    p = pipeline_on(engine)
    p.datalog(WITNESSES)
    run_against_oracle(p, GROUNDED, ["youngest", "cheapest", "dearest"], ["family", "e"], steps)


def test_output_files_as_souffle_writes_them(tmp_path):
    """`dbspark run prog.dl --output DIR` writes each `.output` relation after its last step as Soufflé
    does (its parameters: filename, delimiter, headers, compress, IO=stdout), the contents the
    relation has then; other parameters and IO kinds are refused."""
    import gzip

    from typer.testing import CliRunner

    from dbspark.cli.main import app

    prog = tmp_path / "p.dl"
    prog.write_text(
        """
        .decl e(x: number, s: symbol) .input e .output e
        .decl r(x: number, s: symbol) .output r(IO=file, filename="sub/r.tsv", headers=true)
        r(x, s) :- e(x, s), x > 1.
        .decl c(n: number) .output c
        c(n) :- n = count : { e(_, _) }.
        .decl z(s: symbol) .output z(compress=true, filename="z.csv.gz")
        z(s) :- e(_, s).
        .decl t(x: number) .output t(IO=stdout)
        t(x) :- e(x, _), x < 2.
        .decl big(x: number) .printsize big
        big(x) :- e(x, _), x >= 2.
        .printsize c
        """
    )
    changes = tmp_path / "changes"
    for name, body in (("1", "x,s,weight\n1,a,1\n2,b,1\n3,c,1\n"), ("2", "x,s,weight\n3,c,-1\n")):
        (changes / name).mkdir(parents=True)
        (changes / name / "e.csv").write_text(body)
    out = tmp_path / "out"
    args = ["run", str(prog), "--changes", str(changes), "--engine", "local", "--output", str(out)]
    r = CliRunner().invoke(app, args, terminal_width=200)
    assert r.exit_code == 0, r.output
    assert (out / "sub" / "r.tsv").read_text() == "x\ts\n2\tb\n"
    assert (out / "c.csv").read_text() == "2\n"
    assert (out / "e.csv").read_text() == "1\ta\n2\tb\n"  # an input relation, output too
    assert gzip.decompress((out / "z.csv.gz").read_bytes()).decode() == "a\nb\n"
    assert "t\n===============\n1\n===============" in r.output
    assert "big\t1\n" in r.output and "c\t1\n" in r.output  # .printsize: the sizes after the run
    assert not (out / "big.csv").exists()
    with pytest.raises(UnsupportedError, match="IO=sqlite is not supported"):
        pipeline_on("local").datalog(".decl q(x: number)\n.output q(IO=sqlite)\n")
