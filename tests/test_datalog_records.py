"""Soufflé's records and algebraic data types in the Datalog front end (`frontends/datalog/records.py`).

The manual's examples ("Types": records, recursive records, ADTs) with the outputs it gives, written as
Soufflé writes them; then programs that build and take apart records and ADTs under inserts and deletes
of input facts against the naive evaluator (`dbspark.testing.datalog`, which keeps records as Python
tuples and unifies patterns with them) after every step, on both engines; refusals naming the fault.
"""

from __future__ import annotations

import pytest
from hypothesis import strategies as st

from dbspark.errors import DataError, SchemaError, UnknownNameError, UnsupportedError
from dbspark.frontends.datalog import records
from dbspark.testing.datalog import evaluate, run_against_oracle
from dbspark.testing.engines import engine_given, pipeline_on


def derived(engine, text: str, inputs: dict[str, list[tuple]], out: str) -> list[str]:
    """The view `out` as Soufflé prints it (records rendered), checked against the naive evaluator."""
    p = pipeline_on(engine)
    try:
        p.datalog(text)
        for k, rows in inputs.items():
            p.insert(k, rows)
        p.step()
        got = set(p.view(out).to_dict())
        types = p.datalog_outputs[out].get("@records", {})
        cols = p.view(out).to_zset().schema.names()
    finally:
        p.close()
    assert got == evaluate(text, {k: set(v) for k, v in inputs.items()})[out]
    shown = [
        "\t".join(
            records.render(v, types[c]) if c in types else str(v) for v, c in zip(row, cols, strict=True)
        )
        for row in got
    ]
    return sorted(shown)


PAIRS = """
.type Pair = [a: number, b: number]
.decl A(p: Pair)
A([1, 2]).
A([3, 4]).
A([4, 5]).
.decl Flatten(a: number, b: number) .output Flatten
Flatten(a, b) :- A([a, b]).
"""

INT_LIST = """
.type IntList = [next: IntList, x: number]
.decl L(l: IntList)
L([nil, 10]).
L([r1, x + 10]) :- L(r1), r1 = [r2, x], x < 30.
.decl Flatten(x: number) .output Flatten
Flatten(x) :- L([_, x]).
.decl Lists(l: IntList) .output Lists
Lists(l) :- L(l).
"""

EXPRESSIONS = """
.type Expression = Number { x : number }
                 | Variable { v : symbol }
                 | Add { e_1 : Expression, e_2 : Expression }
                 | Imaginary {}
.decl A(x: Expression) .output A
A($Number(10)).
A($Add($Number(10), $Variable("x"))).
A($Imaginary).
.decl Vars(v: symbol) .output Vars
Vars(v) :- A($Add(_, $Variable(v))).
"""


def test_the_manuals_records_and_adts(engine):
    """A pair taken apart in a body; a recursive list built until x reaches 30 (nil ends it); an ADT
    with a branch without fields, printed as Soufflé prints them."""
    assert derived(engine, PAIRS, {}, "Flatten") == ["1\t2", "3\t4", "4\t5"]
    assert derived(engine, INT_LIST, {}, "Flatten") == ["10", "20", "30"]
    assert derived(engine, INT_LIST, {}, "Lists") == [
        "[[[nil, 10], 20], 30]",
        "[[nil, 10], 20]",
        "[nil, 10]",
    ]
    assert derived(engine, EXPRESSIONS, {}, "A") == [
        "$Add($Number(10), $Variable(x))",
        "$Imaginary",
        "$Number(10)",
    ]
    assert derived(engine, EXPRESSIONS, {}, "Vars") == ["x"]


def test_the_encoding_round_trips():
    """Symbols holding the encoding's own characters, empty symbols, deep nesting, negative numbers."""
    from dbspark.frontends.datalog.parser import parse
    from dbspark.frontends.datalog.resolve import type_bases

    keys = type_bases(parse(".type S = [a: symbol, n: number, rest: S]\n.type T = L {s: symbol} | E {}"))
    s, t = keys["S"], keys["T"]
    for v in [None, ("", -3, None), ("1:[,]", 0, ("$E(", 2**62, ("nil", -1, None)))]:
        code = records.encode(v, s)
        assert records.decode(code, s) == v
    for v in [("E", ()), ("L", ("a, b)",))]:
        assert records.decode(records.encode(v, t), t) == v
    simple = ("a b", 7, ("x", -4, None))
    assert records.parse(records.render(records.encode(simple, s), s), s, "f") == records.encode(simple, s)
    assert records.parse('[ "a, b" , 3, [x, -4, nil]]', s, "f") == records.encode(
        ("a, b", 3, ("x", -4, None)), s
    )
    assert records.parse("$E", t, "f") == records.parse("$E()", t, "f") == "$E"


# ---- under inserts and deletes --------------------------------------------------------------------------
TREES = """
.type Expr = Lit {x: number} | Add {a: Expr, b: Expr} | Mul {a: Expr, b: Expr}
.decl expr(e: Expr) .input expr
.decl sub(e: Expr)
sub(e) :- expr(e).
sub(a), sub(b) :- sub($Add(a, b)) ; sub($Mul(a, b)).
.decl value(e: Expr, v: number) .output value
value($Lit(x), x) :- sub($Lit(x)).
value(e, va + vb) :- sub(e), e = $Add(a, b), value(a, va), value(b, vb).
value(e, va * vb) :- sub(e), e = $Mul(a, b), value(a, va), value(b, vb).
.decl doubled(e: Expr) .output doubled
doubled($Add(e, e)) :- expr(e), !expr($Add(e, e)).
.decl leaves(x: number, n: number) .output leaves
leaves(x, n) :- sub($Lit(x)), n = count : { sub($Add($Lit(x), _)) }.
"""


SAMPLE_TREES = [
    ("Add", (("Lit", (2,)), ("Mul", (("Lit", (3,)), ("Lit", (2,)))))),
    ("Lit", (2,)),
    ("Mul", (("Lit", (-1,)), ("Lit", (2,)))),
    ("Add", (("Lit", (2,)), ("Lit", (2,)))),
]


def _tree(leaf: st.SearchStrategy[int]) -> st.SearchStrategy[object]:
    return st.recursive(
        leaf.map(lambda x: ("Lit", (x,))),
        lambda kids: st.tuples(st.sampled_from(["Add", "Mul"]), st.tuples(kids, kids)),
        max_leaves=5,
    )


@engine_given(
    st.lists(_tree(st.integers(-3, 3)), min_size=1, max_size=6),
    st.lists(st.integers(0, 5), max_size=3),
    local=25,
    spark=1,
    spark_strategies=(st.just(SAMPLE_TREES), st.just([1])),
)
def test_expression_trees_under_inserts_and_deletes(engine, trees, drop):
    """ADT values taken apart recursively (shared subtrees, the same tree twice), made in heads and
    negations, counted; input rows are encodings (`records.encode`)."""
    from dbspark.frontends.datalog.parser import parse
    from dbspark.frontends.datalog.resolve import type_bases

    key = type_bases(parse(TREES))["Expr"]
    rows = sorted({(records.encode(t, key),) for t in trees})
    gone = [r for i, r in enumerate(rows) if i in drop]
    steps = [({"expr": rows[::2]}, {}), ({"expr": rows[1::2]}, {}), ({}, {"expr": gone}), ({}, {})]
    p = pipeline_on(engine)
    p.datalog(TREES)
    run_against_oracle(p, TREES, ["value", "doubled", "leaves"], ["expr"], steps)


PATHS = """
.type Path = [last: number, before: Path]
.decl edge(x: number, y: number) .input edge
.decl path(p: Path) .output path
path([y, [x, nil]]) :- edge(x, y), x < y.
path([z, [y, p]]) :- path([y, p]), edge(y, z), y < z.
.decl ends(x: number, y: number) .output ends
ends(x, y) :- path([y, p]), p = [x, nil].
ends(x, z) :- ends(x, y), path([z, [y, _]]).
.decl second(x: number) .output second
second(x) :- path([_, [x, [_, _]]]), x != 0.
"""


@engine_given(
    st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), min_size=1, max_size=12),
    st.lists(st.integers(0, 11), max_size=4),
    local=25,
    spark=1,
    spark_strategies=(st.just([(0, 1), (1, 2), (2, 3), (1, 3), (3, 4), (0, 2)]), st.just([1, 4])),
)
def test_paths_as_lists_in_a_recursion_under_inserts_and_deletes(engine, edges, drop):
    """Every path of a DAG as a list, built in a recursion and taken apart in it (nested patterns,
    wildcards, a repeated variable across the pattern and the atom)."""
    rows = sorted(set(edges))
    gone = [r for i, r in enumerate(rows) if i in drop]
    steps = [({"edge": rows[::2]}, {}), ({"edge": rows[1::2]}, {}), ({}, {"edge": gone})]
    p = pipeline_on(engine)
    p.datalog(PATHS)
    run_against_oracle(p, PATHS, ["path", "ends", "second"], ["edge"], steps)


WITH_OTHER_FEATURES = """
.type Pair = [a: number, b: number]
.decl src(x: number, y: number) .input src
.decl same(p: Pair, q: Pair) eqrel
same([x, y], [y, x]) :- src(x, y).
.decl twins(p: Pair) .output twins
twins(p) :- same(p, q), p != q.
.decl best(x: number, p: Pair) .output best
best(x, [x, y]) :- src(x, y).
best(x, p1) <= best(x, p2) :- p1 = [_, y1], p2 = [_, y2], y1 > y2.
"""


def test_records_with_components_eqrel_and_subsumption(engine):
    """Record types used by a component's relations, in an equivalence relation, and in a subsumptive
    clause; a record type declared inside a component is refused, naming it."""
    got = {
        v: derived(engine, WITH_OTHER_FEATURES, {"src": [(1, 2), (1, 5), (3, 3)]}, v)
        for v in ("twins", "best")
    }
    assert got["twins"] == ["[1, 2]", "[1, 5]", "[2, 1]", "[5, 1]"]
    assert got["best"] == ["1\t[1, 2]", "3\t[3, 3]"]
    boxed = """
    .type Pair = [a: number, b: number]
    .comp Box { .decl held(p: Pair) .decl firsts(a: number) firsts(a) :- held([a, _]). }
    .init box = Box
    .decl src(x: number, y: number) .input src
    box.held([x, y]) :- src(x, y).
    .decl out(a: number) .output out
    out(a) :- box.firsts(a).
    """
    p = pipeline_on(engine)
    try:
        p.datalog(boxed)
        p.insert("src", [(1, 2), (1, 5), (3, 3)])
        p.step()
        assert set(p.view("out").to_dict()) == {(1,), (3,)}  # (the naive evaluator has no components)
    finally:
        p.close()
    p = pipeline_on("local")
    with pytest.raises(UnsupportedError, match=r".type P in component C: record and ADT types are declared"):
        p.datalog(".comp C { .type P = [a: number] }\n.init c = C\n")
    p.close()


def test_record_fact_files_and_output_files(tmp_path):
    """A fact file's record column in Soufflé's text (bare or quoted symbols, `$B` with or without
    parentheses); `dbspark run` writes records and ADTs as Soufflé does."""
    from typer.testing import CliRunner

    from dbspark.cli.main import app

    (tmp_path / "named.facts").write_text('[1, [2, nil]]\t$Pet("Rex, jr")\n[3, nil]\t$None\nnil\t$None()\n')
    prog = tmp_path / "p.dl"
    prog.write_text(
        """
        .type L = [x: number, rest: L]
        .type Tag = Pet {name: symbol} | None {}
        .decl named(l: L, t: Tag) .input named
        .decl heads(x: number, t: Tag) .output heads
        heads(x, t) :- named([x, _], t).
        .decl tails(l: L) .output tails(filename="tails.tsv", headers=true)
        tails(r) :- named([_, r], _).
        """
    )
    out = tmp_path / "out"
    args = ["run", str(prog), "--engine", "local", "--output", str(out)]  # one step: the facts
    r = CliRunner().invoke(app, args, terminal_width=200)
    assert r.exit_code == 0, r.output
    assert (out / "heads.csv").read_text() == "1\t$Pet(Rex, jr)\n3\t$None\n"
    assert (out / "tails.tsv").read_text() == "l\n[2, nil]\nnil\n"
    (tmp_path / "named.facts").write_text("[1, [x, nil]]\t$None\n")
    r = CliRunner().invoke(app, args, terminal_width=200)
    assert r.exit_code != 0 and "'x' is not a number" in r.output and "named" in r.output


@pytest.mark.parametrize(
    "text, error, message",
    [
        (".type P = [a: float]", SchemaError, "field a is a float"),
        (".type P = [a: nope]", SchemaError, "field a has unknown type 'nope'"),
        (".type P = [a: number]\n.type P = [b: number]", SchemaError, "declared twice"),
        (
            ".type P = [a: number]\n.decl p(x: P)\n.decl q(x: number)\nq(1) :- p(x), x < [1].",
            SchemaError,
            "'<' on records",
        ),
        (
            ".type P = [a: number]\n.decl p(x: P)\np([1, 2]).",
            SchemaError,
            r"\[1, 2\]: a record of 2 field\(s\), P has 1",
        ),
        ('.type P = [a: number]\n.decl p(x: P)\np(["s"]).', SchemaError, "type mismatch"),
        (".type T = A {} | B {}\n.decl p(x: T)\np(nil).", SchemaError, "is T, not nil"),
        (".type T = A {}\n.decl p(x: T)\np($C).", UnknownNameError, "no .type declares the branch C"),
        (
            ".type T = A {x: number}\n.decl p(x: T)\np($A).",
            SchemaError,
            r"branch A of T has 1 field\(s\), got 0",
        ),
        (
            ".type P = [a: number]\n.type Q = [a: number]\n.decl p(x: P)\n.decl q(x: Q)\np(x) :- q(x).",
            SchemaError,
            "type mismatch",
        ),
        (".decl q(x: number)\nq(1) :- [a] = [1].", SchemaError, "cannot tell which record type"),
        (
            ".type P = [a: number]\n.decl p(x: P)\n.decl m(x: P)\nm(y) :- y = max x : { p(x) }.",
            SchemaError,
            "max of the record type P",
        ),
    ],
)
def test_record_errors(text, error, message):
    p = pipeline_on("local")
    try:
        with pytest.raises(error, match=message):
            p.datalog(text)
    finally:
        p.close()


def test_a_bad_record_value_is_a_data_error():
    with pytest.raises(DataError, match=r"f: cannot read '\[1, 2': expected"):
        from dbspark.frontends.datalog.parser import parse
        from dbspark.frontends.datalog.resolve import type_bases

        records.parse("[1, 2", type_bases(parse(".type P = [a: number, b: number]"))["P"], "f")
