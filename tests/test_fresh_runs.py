"""Which changes of a scope's body hold each row once over a fresh run (`operators/fresh.new_once`): the
sums of those changes are indexed as they are, unconsolidated. Hand-built bodies, each case one way a
sum could hold a row twice (the Datalog programs the oracle tests generate build only the safe ones;
`tests/test_datalog.py` checks every batch of their fresh runs' traces consolidated)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import polars as pl
import pytest

from dbspark.ir.expr import col, lit
from dbspark.operators.base import Shape
from dbspark.operators.fresh import new_once
from dbspark.operators.join import StreamJoin
from dbspark.operators.linear import Filter, Map, Plus
from dbspark.operators.source import Input
from dbspark.operators.time import Delay, Integrate

A = pl.Schema({"x": pl.Int64, "y": pl.Int64})
B = pl.Schema({"y": pl.Int64, "z": pl.Int64})
AB = pl.Schema({"x": pl.Int64, "y": pl.Int64, "z": pl.Int64})


def body(*nodes: tuple[Any, tuple[int, ...], pl.Schema, bool]) -> Any:
    """Nodes numbered in order: (operator, inputs, schema, whether a trace)."""
    return SimpleNamespace(
        nodes={
            i: SimpleNamespace(op=op, inputs=ins, shape=Shape(schema, trace=trace))
            for i, (op, ins, schema, trace) in enumerate(nodes)
        }
    )


def join_body(
    join: StreamJoin, out: pl.Schema, a: pl.Schema = A, b: pl.Schema = B, second: StreamJoin | None = None
) -> Any:
    """a, b imports; their integrals; the incremental join Δa ⋈ I(b) + z⁻¹(I(a)) ⋈ Δb at node 7."""
    return body(
        (Input("a", a), (), a, False),  # 0
        (Input("b", b), (), b, False),  # 1
        (Integrate(), (0,), a, True),  # 2: I(a)
        (Integrate(), (1,), b, True),  # 3: I(b)
        (Delay(), (2,), a, True),  # 4: z⁻¹(I(a))
        (join, (0, 3), out, False),  # 5: Δa ⋈ I(b)
        (second or join, (4, 1), out, False),  # 6: z⁻¹(I(a)) ⋈ Δb
        (Plus(), (5, 6), out, False),  # 7
    )


JOIN = StreamJoin(("y",), ("y",), (("z", "z"),))


def test_an_incremental_join_keeping_every_column_holds_each_pair_once() -> None:
    assert 7 in new_once(join_body(JOIN, AB), list(range(8)), [], [])


@pytest.mark.parametrize(
    "why, make",
    [
        (
            "a right column dropped: two pairs give one row",
            lambda: join_body(StreamJoin(("y",), ("y",), ()), A),
        ),
        (
            "float keys: 0.0 and -0.0 join, two right rows name one pair",
            lambda: join_body(
                JOIN,
                pl.Schema({"x": pl.Int64, "y": pl.Float64, "z": pl.Int64}),
                pl.Schema({"x": pl.Int64, "y": pl.Float64}),
                pl.Schema({"y": pl.Float64, "z": pl.Int64}),
            ),
        ),
        (
            "two joins that are not one join's halves",
            lambda: join_body(JOIN, AB, second=StreamJoin(("x",), ("y",), (("z", "z"),))),
        ),
    ],
)
def test_a_join_that_may_give_a_row_twice_is_not_once(why: str, make: Any) -> None:
    assert 7 not in new_once(make(), list(range(8)), [], []), why


def test_linear_operators_keep_once_only_where_rows_stay_apart() -> None:
    b = body(
        (Input("a", A), (), A, False),  # 0: an import enters once, consolidated
        (Plus(), (0, 0), A, False),  # 1: each row twice
        (Map((("u", col("y")), ("v", col("x")))), (0,), pl.Schema({"u": pl.Int64, "v": pl.Int64}), False),
        (Map((("x", col("x")),)), (0,), pl.Schema({"x": pl.Int64}), False),  # 3: a column dropped
        (Filter(col("x") > lit(0)), (0,), A, False),  # 4
        (Map((("x", col("x") + lit(1)), ("y", col("y")))), (0,), A, False),  # 5: a computed column
    )
    assert new_once(b, list(range(6)), [], []) == {0, 2, 4}
