"""Random change streams for the inputs of a multiway join (tests of `columnar/sensitivity.py` and
`columnar/short_circuit.py`): the join shapes, the streams and a Z-set frame's consolidation."""

from __future__ import annotations

from typing import Any

import polars as pl
from hypothesis import strategies as st

from dbspark.algebra.zset import WEIGHT

QUERIES: dict[str, list[tuple[str, ...]]] = {
    "triangle": [("a", "b"), ("b", "c"), ("a", "c")],
    "4-cycle": [("a", "b"), ("b", "c"), ("c", "d"), ("d", "a")],
    "4-clique": [("a", "b"), ("b", "c"), ("c", "d"), ("d", "a"), ("a", "c"), ("b", "d")],
    "payload": [("a", "b", "p"), ("b", "c"), ("c", "a", "q")],
    "unary": [("x",), ("x",), ("x", "y")],
}


@st.composite
def change_streams(draw: Any, query: str, strings: bool) -> list[list[pl.DataFrame | None]]:
    """Steps of changes to each atom: inserts over a domain that grows (past the codes' first bits),
    deletes of present rows, duplicates, NULLs, large weights (10^2-10^5, by the number of atoms), atoms left
    unchanged."""
    atoms = QUERIES[query]
    t = pl.Utf8 if strings else pl.Int64
    big = 10 ** (17 // len(atoms))  # large, yet a product over every atom stays within 64 bits
    current: list[dict[tuple, int]] = [{} for _ in atoms]
    steps = []
    domain = 3
    for _ in range(draw(st.integers(1, 5))):
        domain += draw(st.sampled_from([0, 1, 1, 2, 16]))  # mostly values between those there; a jump
        step: list[pl.DataFrame | None] = []
        for i, atom in enumerate(atoms):
            if draw(st.integers(0, 4)) == 0:
                step.append(None)
                continue
            value = (
                st.one_of(st.none(), st.integers(0, domain))
                if draw(st.booleans())
                else st.integers(0, domain)
            )
            rows = draw(st.lists(st.tuples(*[value] * len(atom)), max_size=10))
            weights = draw(
                st.lists(st.sampled_from([1, 1, 2, -1, big]), min_size=len(rows), max_size=len(rows))
            )
            present = sorted(current[i], key=repr)
            gone = draw(st.lists(st.sampled_from(present), max_size=4, unique=True)) if present else []
            change: dict[tuple, int] = {}
            for r, w in [*zip(rows, weights, strict=True), *((r, -current[i][r]) for r in gone)]:
                change[r] = change.get(r, 0) + w
            for r, w in change.items():
                current[i][r] = current[i].get(r, 0) + w
                if current[i][r] == 0:
                    del current[i][r]
            cols = {
                v: [None if r[k] is None else (f"s{r[k]:03d}" if strings else r[k]) for r in change]
                for k, v in enumerate(atom)
            }
            step.append(
                pl.DataFrame(
                    {**cols, WEIGHT: list(change.values())},
                    schema={**dict.fromkeys(atom, t), WEIGHT: pl.Int64},
                )
            )
        steps.append(step)
    return steps


def consolidated(f: pl.DataFrame) -> dict[tuple, int]:
    out: dict[tuple, int] = {}
    for *row, w in f.iter_rows():
        out[tuple(row)] = out.get(tuple(row), 0) + w
    return {k: v for k, v in out.items() if v}
