"""Streams as finite prefixes, for stating the theory exactly (`dbsp-paper.txt` §2, §6, Appendix A.1).

A stream over an abelian group is an array whose axis 0 is time; a nested stream (a stream of streams)
is a 2-D array: axis 0 the outer time t0, axis 1 the inner time t1 (each row is a stream). The
operators act on axis 0; their lifted versions (`lift`) act on axis 1, row by row. The property
tests use these to check the propositions on numbers, and the circuits against them.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

StreamOp = Callable[[np.ndarray], np.ndarray]


def delay(s: np.ndarray) -> np.ndarray:
    """z^-1: s[t-1], and 0 at t = 0."""
    out = np.zeros_like(s)
    out[1:] = s[:-1]
    return out


def integrate(s: np.ndarray) -> np.ndarray:
    """I: the running sum, I(s)[t] = Σ_{i<=t} s[i]."""
    return np.cumsum(s, axis=0)


def differentiate(s: np.ndarray) -> np.ndarray:
    """D: s[t] - s[t-1]."""
    return s - delay(s)


def lift(op: StreamOp) -> StreamOp:
    """↑op on a nested stream: op applied to each inner stream (each row, along axis 1)."""

    def lifted(s: np.ndarray) -> np.ndarray:
        return np.swapaxes(op(np.swapaxes(s, 0, 1)), 0, 1)

    return lifted


def incremental(op: StreamOp) -> StreamOp:
    """Q^Δ = D ∘ Q ∘ I (Definition 3.1)."""
    return lambda s: differentiate(op(integrate(s)))


def fixpoint_feedback(t: Callable[[np.ndarray, np.ndarray], np.ndarray], s: np.ndarray) -> np.ndarray:
    """λs. fix α. T(s, z^-1(α)) for a causal T acting pointwise in time (α[t] = T(s, α[t-1]))."""
    out = np.zeros_like(s)
    prev = np.zeros_like(s[0])
    for i in range(len(s)):
        out[i] = t(s[i], prev)
        prev = out[i]
    return out
