"""Bad input gets a clear error and changes nothing.

Each case: a runtime of an incremental circuit with state (a join, a distinct, aggregates, a linear
view) has taken some good steps; a bad push or step raises a dbspark error whose message names what
is wrong; the views, the last outputs and the step counter are exactly as before; and a following
good step gives what the non-incremental query gives on the good contents only (the failed input
left no trace anywhere, including in the integrals and delays).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import numpy as np
import polars as pl
import pytest

import dbspark
from dbspark import col
from dbspark.errors import NegativeStateError, SchemaError, UnknownNameError, WeightError
from dbspark.testing.queries import assert_zsets_close

T_SCHEMA = {"k": "int64", "x": "float64", "s": "str"}
U_SCHEMA = {"k": "int64", "y": "int64"}
GOOD_T = [(1, 1.0, "a"), (1, 2.0, "b"), (2, 3.0, None), (None, 4.0, "c")]
GOOD_U = [(1, 10), (2, 20), (3, 30)]


def query(t_kind: str = "bag", u_kind: str = "zset") -> dbspark.Circuit:
    """Q with lifted operators; the tests run Q^Δ and use Q as the oracle."""
    c = dbspark.Circuit()
    t = c.input("t", T_SCHEMA, kind=t_kind)
    u = c.input("u", U_SCHEMA, kind=u_kind)
    c.output("raw", t.filter(col("x") > 0))
    c.output("joined", t.stream_join(u, on="k"))
    c.output("keys", t.map("k").stream_distinct())
    c.output("agg", t.stream_aggregate(by="k", n="count", lo=("min", "x"), total=("sum", "x")))
    c.output("uagg", u.stream_aggregate(by="k", n="count", hi=("max", "y")))
    return c


class Session:
    """Q^Δ's runtime plus the integrated contents of the good steps, for the oracle."""

    def __init__(self, engine: Any = "local", t_kind: str = "bag", u_kind: str = "zset") -> None:
        self.engine = engine
        self.q = query(t_kind, u_kind)
        self.r = self.q.incrementalize().run(engine)
        self.contents = {"t": Counter(), "u": Counter()}
        self.pending: list[tuple[str, list[tuple], list[int]]] = []

    def push(self, name: str, rows: list[tuple], weights: list[int] | int = 1) -> None:
        ws = [weights] * len(rows) if isinstance(weights, int) else list(weights)
        self.r.push(name, rows, ws)
        self.pending.append((name, rows, ws))

    def step(self) -> None:
        self.r.step()
        for name, rows, ws in self.pending:
            for row, w in zip(rows, ws, strict=True):
                self.contents[name][row] += w
        self.pending = []
        self.check_oracle()

    def failed_step(self) -> None:
        """The step raised: its pending pushes are gone."""
        self.pending = []

    def state(self) -> dict[str, Any]:
        return {
            "time": self.r.time,
            **{f"view {o}": self.r.view(o).to_dict() for o in self.q.outputs},
            **{f"output {o}": self.r.output(o).to_dict() for o in self.q.outputs},
        }

    def check_oracle(self) -> None:
        ref = self.q.run()  # the oracle Q runs on the local engine; Q^Δ on the engine under test
        for name, cur in self.contents.items():
            live = {r: w for r, w in cur.items() if w}
            if live:
                ref.push(name, list(live), list(live.values()))
        expected = ref.step()
        for o in self.q.outputs:
            assert_zsets_close(self.r.view(o), expected[o], f"output {o!r}")


@pytest.fixture
def session(engine: Any) -> Session:
    s = Session(engine)
    s.push("t", GOOD_T)
    s.push("u", GOOD_U)
    s.step()
    s.push("t", [(1, 1.0, "a")], -1)
    s.push("t", [(3, 5.0, "d")], 2)
    s.step()
    return s


def good_followup(s: Session) -> None:
    s.push("t", [(2, 6.0, "e"), (3, 5.0, "d")], [1, -1])
    s.push("u", [(3, 30)], [-1])
    s.step()
    assert s.r.view("agg").to_dict()  # not trivially empty
    assert s.r.view("joined").to_dict()


# ---- rejected at push --------------------------------------------------------------------------------------
def on_engines(cases: list[Any], spark: tuple[int, ...] = (0,)) -> list[Any]:
    """Parameters (engine, *case): every case on the local engine, and the cases at `spark` on the spark
    engine too. A push is validated before any engine sees it (`input_batch` converts Python rows and
    frames with the same code on both engines), so the other cases would only repeat that code; the
    spark cases check that the spark runtime is left untouched and steps on correctly."""
    out = []
    for engine in ("local", "spark"):
        for i, case in enumerate(cases):
            if engine == "local" or i in spark:
                values = case if isinstance(case, tuple) else (case,)
                out.append(
                    pytest.param(
                        engine,
                        *values,
                        id=f"{engine}-{i}",
                        marks=[pytest.mark.spark] if engine == "spark" else [],
                    )
                )
    return out


@pytest.mark.parametrize(
    "engine, rows, match",
    on_engines(
        [
            ([(1, 2.0)], r"row 0 \(1, 2\.0\) has 2 values, the schema has 3 columns"),
            ([(1, 2.0, "a", 4)], r"has 4 values"),
            ([(1, 2.0, "a"), (5, 1.0)], r"row 1 \(5, 1\.0\) has 2 values"),
            ([{"k": 1, "x": 2.0}], r"missing \['s'\]"),
            ([{"k": 1, "x": 2.0, "s": "a", "z": 0}], r"unknown \['z'\]"),
            (pl.DataFrame({"k": [1], "x": [2.0]}), r"frame columns"),
        ],
        spark=(0, 5),
    ),
    indirect=["engine"],
)
def test_row_of_wrong_width(session, rows, match):
    before = session.state()
    with pytest.raises(SchemaError, match=match) as e:
        session.r.insert("t", rows)
    assert "input 't'" in str(e.value)
    assert session.state() == before
    session.step()  # nothing was queued: an empty step
    assert {k: v for k, v in session.state().items() if k.startswith("view")} == {
        k: v for k, v in before.items() if k.startswith("view")
    }
    good_followup(session)


@pytest.mark.parametrize(
    "engine, rows, column, value",
    on_engines(
        [
            ([("abc", 1.0, "a")], "k", "'abc'"),
            ([(1.5, 1.0, "a")], "k", "1.5"),  # an int column does not silently truncate 1.5 to 1
            ([(1, 1.0, "a"), (2, "x", "b")], "x", "'x'"),
            ([(1, [1.0], "a")], "x", "[1.0]"),
            (pl.DataFrame({"k": [1.0, 2.5], "x": [1.0, 2.0], "s": ["a", "b"]}), "k", "2.5"),
        ],
        spark=(0, 4),
    ),
    indirect=["engine"],
)
def test_value_that_cannot_be_coerced(session, rows, column, value):
    before = session.state()
    with pytest.raises(SchemaError) as e:
        session.r.insert("t", rows)
    msg = str(e.value)
    assert "input 't'" in msg and f"column {column!r}" in msg and value in msg, msg
    assert session.state() == before
    good_followup(session)


def test_coercible_values_are_accepted(session):
    session.push("t", [(2.0, 7, "f")])  # integral float into int64, int into float64
    session.step()
    assert (2, 7.0, "f") in session.r.view("raw").to_dict()


@pytest.mark.parametrize(
    "engine, weights",
    on_engines(
        [
            [1.5],
            ["x"],
            [True],
            1.5,
            True,
            "x",
            np.float64(2.5),
            np.bool_(True),
            np.array([1.5]),
            [None],
            [2**70],
        ],
        spark=(0, 3),
    ),
    indirect=["engine"],
)
def test_non_integer_weight(session, weights):
    before = session.state()
    with pytest.raises(WeightError) as e:
        session.r.push("t", [(1, 9.0, "z")], weights)
    assert "input 't'" in str(e.value)
    assert session.state() == before
    session.step()
    assert (1, 9.0, "z") not in session.r.view("raw").to_dict()
    good_followup(session)


@pytest.mark.parametrize("engine, wcol", on_engines([[1.5], [True], ["x"]]), indirect=["engine"])
def test_non_integer_weight_column_of_a_frame(session, wcol):
    before = session.state()
    with pytest.raises(WeightError):
        session.r.push("t", pl.DataFrame({"k": [1], "x": [9.0], "s": ["z"], "weight": wcol}))
    assert session.state() == before
    good_followup(session)


def test_integer_weights_in_any_form_are_accepted(session):
    session.push("t", [(5, 1.0, "w")], 2)
    session.step()
    for ws in ((w for w in [1]), range(3, 4), np.array([2], dtype=np.int32), [np.int64(1)]):
        rows = [(5, 1.0, "w")]
        session.r.push("t", rows, ws)
        session.pending.append(("t", rows, [int(w) for w in ([1] if not hasattr(ws, "__len__") else ws)]))
    session.r.push("t", [(5, 1.0, "w")], np.int32(-2))
    session.pending.append(("t", [(5, 1.0, "w")], [-2]))
    session.step()
    assert session.r.view("raw").to_dict()[(5, 1.0, "w")] == 2 + 1 + 3 + 2 + 1 - 2


def test_weight_count_must_match_rows(session):
    with pytest.raises(WeightError, match="2 weights for 1 rows"):
        session.r.push("t", [(1, 9.0, "z")], [1, 1])
    good_followup(session)


@pytest.mark.parametrize("engine, method", on_engines(["push", "insert", "delete"]), indirect=["engine"])
def test_unknown_input_name(session, method):
    before = session.state()
    args: tuple = ([(1, 2.0, "a")], [1]) if method == "push" else ([(1, 2.0, "a")],)
    with pytest.raises(UnknownNameError, match=r"unknown input 'nope'; the inputs are \['t', 'u'\]") as e:
        getattr(session.r, method)("nope", *args)
    assert isinstance(e.value, KeyError)  # and still a KeyError
    assert session.state() == before
    good_followup(session)


@pytest.mark.parametrize("engine, method", on_engines(["view", "output"], spark=(0, 1)), indirect=["engine"])
def test_unknown_output_name(session, method):
    with pytest.raises(UnknownNameError, match=r"unknown output 'nope'; the outputs are \['agg', 'joined'"):
        getattr(session.r, method)("nope")
    good_followup(session)


# ---- rejected at step: the whole step is undone -------------------------------------------------------------
@pytest.mark.parametrize(
    "bad_row, weight, present",
    [
        ((7, 1.0, "q"), -1, 0),  # absent row
        ((2, 3.0, None), -2, 1),  # more copies than present (a NULL in the row too)
    ],
)
def test_delete_of_absent_row_on_a_bag_input(session, bad_row, weight, present):
    before = session.state()
    session.r.push("u", [(9, 90)], [1])  # a good change in the same step: discarded with it
    session.r.push("t", [(2, 6.0, "e")], [1])
    session.r.push("t", [bad_row], [weight])
    with pytest.raises(NegativeStateError) as e:
        session.r.step()
    session.failed_step()
    msg = str(e.value)
    assert "input 't'" in msg and f"row {bad_row!r}" in msg and "rejected, nothing applied" in msg, msg
    assert f"present {present} time(s)" in msg
    assert session.state() == before
    session.step()  # the discarded pushes do not come back
    assert 9 not in {row[0] for row in session.r.view("uagg").to_dict()}
    good_followup(session)


def test_row_twice_in_a_set_input(engine):
    s = Session(engine, t_kind="set")
    s.push("t", [(1, 1.0, "a")])
    s.step()
    before = s.state()
    s.r.insert("t", [(1, 1.0, "a")])
    with pytest.raises(NegativeStateError, match=re.escape("row (1, 1.0, 'a') would occur 2 times")):
        s.r.step()
    s.failed_step()
    assert s.state() == before
    s.push("t", [(1, 1.0, "a"), (2, 2.0, "b")], [-1, 1])
    s.step()


def test_delete_making_an_aggregate_group_negative(engine):
    # 'u' is a plain Z-set input (no input check): the aggregate must refuse a group of negative count,
    # and the whole step -- the linear views and the join included -- must be undone
    s = Session(engine, t_kind="zset", u_kind="zset")
    s.push("t", GOOD_T)
    s.push("u", GOOD_U)
    s.step()
    before = s.state()
    s.r.push("t", [(2, 7.0, "g")], [1])
    s.r.push("u", [(5, 50)], [-1])  # group k=5 does not exist
    with pytest.raises(NegativeStateError) as e:
        s.r.step()
    s.failed_step()
    msg = str(e.value)
    assert "aggregate" in msg and "rejected, nothing applied" in msg and "5" in msg, msg
    assert s.state() == before
    s.push("u", [(5, 50), (1, 10)], [1, -1])
    s.step()
    assert s.r.view("uagg").to_dict() == {(2, 1, 20): 1, (3, 1, 30): 1, (5, 1, 50): 1}


def test_delete_of_a_value_not_there_in_an_ordered_aggregate(engine):
    # the group keeps a positive count (2 -> 1), but MAX's multiset would hold y=99 -1 times
    s = Session(engine, t_kind="zset", u_kind="zset")
    s.push("u", [(1, 10), (1, 11)])
    s.step()
    before = s.state()
    s.r.push("u", [(1, 99)], [-1])
    with pytest.raises(NegativeStateError) as e:
        s.r.step()
    s.failed_step()
    assert "99" in str(e.value) and "'hi'" in str(e.value), str(e.value)
    assert s.state() == before
    s.push("u", [(1, 11)], [-1])
    s.step()
    assert s.r.view("uagg").to_dict() == {(1, 1, 10): 1}


def test_non_incremental_aggregate_of_a_negative_zset(engine):
    c = dbspark.Circuit()
    u = c.input("u", U_SCHEMA)
    c.output("a", u.stream_aggregate(by="k", n="count"))
    r = c.run(engine)
    r.push("u", [(1, 10)], [-1])
    with pytest.raises(NegativeStateError):
        r.step()
    assert r.time == 0
    r.push("u", [(1, 10)], [2])
    assert r.step()["a"].to_dict() == {(1, 2): 1}


def test_failed_step_leaves_integrals_and_delays_alone(engine):
    # after a failure, several good steps in a row still match the oracle (a half-applied integral or
    # delay would show up as a wrong change later, not necessarily at once)
    s = Session(engine)
    s.push("t", GOOD_T)
    s.push("u", GOOD_U)
    s.step()
    for bad in ([(7, 1.0, "q")], [(1, 2.0, "b"), (1, 2.0, "b")]):
        s.r.push("u", [(1, 12)], [1])
        s.r.push("t", bad, [-1] * len(bad))
        with pytest.raises(NegativeStateError):
            s.r.step()
        s.failed_step()
        s.push("t", [(1, 2.0, "b")], -1)
        s.step()
        s.push("t", [(1, 2.0, "b")], 1)
        s.push("u", [(1, 13)], 1)
        s.step()
        s.step()  # an empty step


@pytest.mark.parametrize(
    "pred",
    [
        lambda: (col("x") > 0) & (col("k") != col("x")),
        lambda: (col("k") == col("x")) | (col("x") > 0),
        lambda: col("k") == col("x"),
    ],
)
def test_python_equality_of_expressions_is_refused_in_a_predicate(pred):
    """`==` / `!=` between expressions compare the expressions (a Python bool): used in a predicate it
    would filter on a constant, silently; it is a TypeError that says to write `.eq()` / `.ne()`."""
    t = dbspark.Circuit().input("t", T_SCHEMA)
    with pytest.raises(TypeError, match=r"\.eq\(b\)` / `a\.ne\(b\)"):
        t.filter(pred())


def test_a_check_failing_inside_polars_shows_dbspark_s_message_only():
    """A check raised inside a Polars expression (a set input's delete of a fact that is not there)
    comes out with dbspark's message only, not Polars' plan of the expression that raised it."""
    p = dbspark.Pipeline(engine="local")
    p.datalog(".decl e(x: number, y: number)\n.input e\n.decl r(x: number)\n.output r\nr(x) :- e(x, _).\n")
    p.insert("e", [(1, 2)])
    p.step()
    p.delete("e", [(1, 3)])
    with pytest.raises(NegativeStateError) as ei:
        p.step()
    msg = str(ei.value)
    assert msg.startswith("step 2 rejected, nothing applied: ") and "(1, 3)" in msg, msg
    assert "This error occurred" not in msg and "col(" not in msg, msg
    p.close()
