"""Incrementalization (`dbsp-paper.txt` §3, Algorithm 4.8): Q -> Q^Δ by rewrite rules.

Whole-circuit passes run in the order of `PASSES`: column pruning (`prune.py`: a join's sides carry
only the columns read after it), distinct consolidation (step 2 of Algorithm 4.8), the chain rule
with its per-operator rules (steps 3-5; `chain.NODE_RULES`), then I/D cancellation.
"""

from __future__ import annotations

from collections.abc import Callable

from dbspark.circuit.circuit import Circuit
from dbspark.incremental.cancel import cancel
from dbspark.incremental.chain import chain
from dbspark.incremental.distinct_consolidation import consolidate_distincts
from dbspark.incremental.fixpoint import with_strategy
from dbspark.incremental.prune import prune_columns

PASSES: tuple[tuple[str, Callable[[Circuit], Circuit]], ...] = (
    ("prune_columns", prune_columns),
    ("distinct_consolidation", consolidate_distincts),
    ("chain", chain),
    ("cancel", cancel),
)


def incrementalize(c: Circuit, recursion: str | None = None) -> Circuit:
    """Q^Δ: a circuit that consumes input changes and produces output changes. `recursion` ("auto",
    "nested" or "dred") maintains every recursive scope by that strategy, whatever the scope chose."""
    if recursion is not None:
        c = with_strategy(c, recursion)
    for _, apply in PASSES:
        c = apply(c)
    return c


__all__ = ["PASSES", "incrementalize"]
