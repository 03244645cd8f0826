"""Soufflé's `autoinc()` (`frontends/datalog/autoinc.py`) and the numbering operator under it
(`operators/numbering.py`): numbers that are a function of the program's contents, so the same after any
order of changes; checked against the naive evaluator (which numbers a rule's bindings itself) after
every step of inserts and deletes, on both engines; refusals naming the rule.
"""

from __future__ import annotations

import pytest
from hypothesis import strategies as st

from dbspark.errors import ParseError, UnsupportedError
from dbspark.testing.datalog import evaluate, run_against_oracle
from dbspark.testing.engines import engine_given, pipeline_on

MANUAL = """
.decl A(x: symbol)
A("a"). A("b"). A("c"). A("d").
.decl B(x: symbol, y: number)
B(x, autoinc()) :- A(x).
.output B
"""


def test_autoinc_as_the_manual_shows(engine):
    """One call: the numbers 0 .. n - 1, in the order of the rule's bindings."""
    p = pipeline_on(engine)
    try:
        p.datalog(MANUAL)
        p.step()
        assert set(p.view("B").to_dict()) == {("a", 0), ("b", 1), ("c", 2), ("d", 3)}
    finally:
        p.close()


PROGRAM = """
.decl e(x: number, y: number) .input e
.decl blocked(x: number) .input blocked
.decl node(x: number, id: number) .output node
node(x, autoinc()) :- e(x, _), !blocked(x).
.decl pair(a: number, b: number, id: number) .output pair
pair(a, b, autoinc() + 1000) :- node(x, a), node(y, b), e(x, y).
.decl named(s: symbol, id: number) .output named
named(cat("n", to_string(x)), i) :- node(x, i), i < 4.
"""


@engine_given(
    st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4)), min_size=1, max_size=10),
    st.lists(st.integers(0, 4), max_size=2),
    st.lists(st.integers(0, 9), max_size=3),
    local=30,
    spark=1,
    spark_strategies=(st.just([(0, 1), (1, 2), (1, 3), (2, 0), (3, 3)]), st.just([2]), st.just([0, 3])),
)
def test_autoinc_under_inserts_and_deletes(engine, edges, blocked, drop):
    """A binding counted as often as the body finds it (the wildcard), numbers read by other rules
    (joined on, compared), two calls in the program; after every step as the naive evaluator."""
    rows = sorted(set(edges))
    gone = [r for i, r in enumerate(rows) if i in drop]
    steps = [
        ({"e": rows[::2]}, {}),
        ({"e": rows[1::2], "blocked": [(b,) for b in set(blocked)]}, {}),
        ({}, {"e": gone}),
        ({}, {"blocked": [(b,) for b in set(blocked)]}),
    ]
    p = pipeline_on(engine)
    p.datalog(PROGRAM)
    run_against_oracle(p, PROGRAM, ["node", "pair", "named"], ["e", "blocked"], steps)


def test_autoinc_numbers_do_not_depend_on_the_order_of_changes():
    """The same contents reached by two histories: the same numbers."""
    rows = [(3, 1), (1, 2), (2, 2), (0, 4)]
    views = []
    for history in ([rows], [rows[2:], rows[:2]], [[*rows, (9, 9)]]):
        p = pipeline_on("local")
        p.datalog(PROGRAM)
        for batch in history:
            p.insert("e", batch)
            p.step()
        if (9, 9) in history[-1]:
            p.delete("e", [(9, 9)])
            p.step()
        views.append(set(p.view("node").to_dict()))
        p.close()
    # two autoinc() calls in the program: node's numbers are 2i (pair's 2i + 1, plus 1000)
    assert views[0] == views[1] == views[2] == {(0, 0), (1, 2), (2, 4), (3, 6)}


def test_a_bound_query_on_an_autoinc_relation_is_not_rewritten():
    """Magic Sets would number only the bindings a query asks for: a program with autoinc() is evaluated
    whole (same result with and without the rewriting switched on)."""
    text = MANUAL + '.decl C(y: number) .output C\nC(y) :- B("c", y).\n'
    got = []
    for magic in (True, False):
        p = pipeline_on("local")
        p.datalog(text, magic_sets=magic)
        p.step()
        got.append(set(p.view("C").to_dict()))
        p.close()
    assert got == [{(2,)}, {(2,)}]


@pytest.mark.parametrize(
    "rule, message",
    [
        ("r(x, i) :- e(x, _), i = autoinc().", "autoinc\\(\\) in the body of rule"),
        ("r(x, 1) :- e(x, y), y < autoinc().", "autoinc\\(\\) in the body of rule"),
        ("r(x, n) :- e(x, _), n = sum autoinc() : { e(x, _) }.", "autoinc\\(\\) in the body of rule"),
        ("r(x, autoinc()) :- e(x, _).\nr(y, i) :- r(x, i), e(x, y).", "autoinc\\(\\) in the recursive rule"),
        ("r(x, autoinc(1)) :- e(x, _).", "autoinc\\(...\\) takes 0 argument"),
    ],
)
def test_autoinc_errors(rule, message):
    text = f".decl e(x: number, y: number) .input e\n.decl r(x: number, i: number) .output r\n{rule}\n"
    p = pipeline_on("local")
    try:
        with pytest.raises((UnsupportedError, ParseError), match=message):
            p.datalog(text)
    finally:
        p.close()


@engine_given(
    st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["a", "b", ""])), max_size=8),
    st.lists(st.integers(0, 7), max_size=4),
    local=30,
    spark=1,
    spark_strategies=(st.just([(1, "b"), (0, "a"), (1, "b"), (3, "")]), st.just([1, 2])),
)
def test_numbering_a_bag(engine, rows, drop):
    """`stream_number`: every unit of the integral (duplicates counted) numbered in the order of the
    given columns then the others, after every step of inserts and deletes."""
    p = pipeline_on(engine)
    try:
        t = p.table("t", {"k": "int64", "s": "string"})
        p.create_view("v", t.stream_number(["s"], "n"))
        state: list[tuple] = []
        gone = [r for i, r in enumerate(rows) if i in drop]
        for ins, dels in ((rows, []), ([], gone)):
            if ins:
                p.insert("t", ins)
            if dels:
                p.delete("t", dels)
            p.step()
            state = sorted([*state, *ins])
            for r in dels:
                state.remove(r)
            want = {(k, s, i) for i, (s, k) in enumerate(sorted((s, k) for k, s in state))}
            assert p.view("v").to_dict() == dict.fromkeys(want, 1)
    finally:
        p.close()


def test_the_evaluator_numbers_as_the_engine():
    assert evaluate(MANUAL, {})["B"] == {("a", 0), ("b", 1), ("c", 2), ("d", 3)}
