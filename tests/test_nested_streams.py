"""Appendix A.1 of `dbsp-paper.txt` reproduced exactly, and Prop 6.1/6.2 on nested streams of numbers.

No engine: the operators here are `dbspark.algebra.streams` on numpy arrays of numbers (the paper's
algebra itself), not circuits, so these tests do not take the `engine` fixture. Nested streams on the
engines are the recursive scopes of tests/test_recursion.py, which run on both."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from dbspark.algebra.streams import delay, differentiate, integrate, lift

# i[t0][t1] = t1 + 2·t0 as printed in A.1: each printed row is one inner stream (outer time t0 = row).
I_ = np.array([[c + 2 * r for c in range(4)] for r in range(4)])


def m(*rows: str) -> np.ndarray:
    return np.array([[int(v) for v in r.split()] for r in rows])


TABLES = {
    "i": (lambda s: s, m("0 1 2 3", "2 3 4 5", "4 5 6 7", "6 7 8 9")),
    "mod2": (lambda s: s % 2, m("0 1 0 1", "0 1 0 1", "0 1 0 1", "0 1 0 1")),
    "I": (integrate, m("0 1 2 3", "2 4 6 8", "6 9 12 15", "12 16 20 24")),
    "↑I": (lift(integrate), m("0 1 3 6", "2 5 9 14", "4 9 15 22", "6 13 21 30")),
    "D": (differentiate, m("0 1 2 3", "2 2 2 2", "2 2 2 2", "2 2 2 2")),
    "↑D": (lift(differentiate), m("0 1 1 1", "2 1 1 1", "4 1 1 1", "6 1 1 1")),
    "z^-1": (delay, m("0 0 0 0", "0 1 2 3", "2 3 4 5", "4 5 6 7")),
    "↑z^-1": (lift(delay), m("0 0 1 2", "0 2 3 4", "0 4 5 6", "0 6 7 8")),
    "↑z^-1 ∘ z^-1": (lambda s: lift(delay)(delay(s)), m("0 0 0 0", "0 0 1 2", "0 2 3 4", "0 4 5 6")),
    "D ∘ ↑D": (
        lambda s: differentiate(lift(differentiate)(s)),
        m("0 1 1 1", "2 0 0 0", "2 0 0 0", "2 0 0 0"),
    ),
    "↑I ∘ I": (
        lambda s: lift(integrate)(integrate(s)),
        m("0 1 3 6", "2 6 12 20", "6 15 27 42", "12 28 48 72"),
    ),
}


def test_appendix_a1_tables() -> None:
    for name, (op, expected) in TABLES.items():
        np.testing.assert_array_equal(op(I_), expected, err_msg=name)


nested = arrays(np.int64, st.tuples(st.integers(1, 6), st.integers(1, 6)), elements=st.integers(-50, 50))


@settings(max_examples=100)
@given(nested)
def test_nested_commutations(s: np.ndarray) -> None:
    """I∘↑I = ↑I∘I, D∘↑D = ↑D∘D, z^-1∘↑z^-1 = ↑z^-1∘z^-1 (A.1), and D, I inverse in both dimensions."""
    for a, b in ((integrate, lift(integrate)), (differentiate, lift(differentiate)), (delay, lift(delay))):
        np.testing.assert_array_equal(a(b(s)), b(a(s)))
    np.testing.assert_array_equal(lift(integrate)(lift(differentiate)(s)), s)
    np.testing.assert_array_equal(differentiate(integrate(s)), s)


@settings(max_examples=100)
@given(nested, nested)
def test_prop_6_1_lifted_delay_is_strict(s: np.ndarray, u: np.ndarray) -> None:
    """↑z^-1 is strict: its output at inner time t1 depends only on inputs at inner times < t1."""
    rows, cols = min(len(s), len(u)), min(s.shape[1], u.shape[1])
    s, u = s[:rows, :cols], u[:rows, :cols].copy()
    for t1 in range(cols):
        v = u.copy()
        v[:, :t1] = s[:, :t1]  # agree with s before t1, differ anywhere at or after t1
        np.testing.assert_array_equal(lift(delay)(s)[:, t1], lift(delay)(v)[:, t1])


@settings(max_examples=100)
@given(nested)
def test_prop_6_2_lifting_a_cycle(s: np.ndarray) -> None:
    """↑(λs. fix α. s + z^-1(α)) = λs. fix α. s + ↑z^-1(α): lifting the cycle lifts each operator.

    The left side is ↑I; the right side is solved column by column (the fixpoint over inner time)."""
    left = lift(integrate)(s)
    right = np.zeros_like(s)
    for t1 in range(s.shape[1]):
        right[:, t1] = s[:, t1] + (right[:, t1 - 1] if t1 else 0)
    np.testing.assert_array_equal(left, right)
