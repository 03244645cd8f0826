"""Building recursive scopes: `Circuit.recursive(body, inputs)` (`dbsp-paper.txt` §5, §6.1).

    closure = c.recursive(
        lambda e, path: (e + path.stream_join(e, left_on="dst", right_on="src").map("src", dst="dst_right"))
                        .stream_distinct(),
        [edges])

`body` receives the imported inputs, then one stream per recursive relation (its value at the previous
iteration, through a feedback z^-1), and returns the relations' new values. Several relations make a
mutually recursive scope; `schemas` gives their schemas (default: the first input's schema).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import polars as pl

from dbspark.errors import CircuitError
from dbspark.ir.schema import to_schema
from dbspark.operators.fixpoint import DEFAULT_MAX_ITERATIONS, Fixpoint, Pick

if TYPE_CHECKING:
    from dbspark.circuit.circuit import Circuit
    from dbspark.circuit.stream import Stream

_scope_ids = itertools.count()


def recursive(
    c: Circuit,
    body: Callable[..., Any],
    inputs: Sequence[Stream],
    schemas: Sequence[Mapping[str, Any] | pl.Schema] | Mapping[str, Any] | pl.Schema | None = None,
    *,
    name: str | None = None,
    max_iterations: int = DEFAULT_MAX_ITERATIONS,
    mode: str = "naive",
    strategy: str = "auto",
    bounded: str = "",
) -> Any:
    """The fixpoint of `body` as stream(s) of `c`: one stream per recursive relation. `strategy`: how
    `incrementalize()` maintains it ("auto", the default, "nested" or "dred"; `incremental/fixpoint.py`).
    `bounded`: the results are sets of a monotonic program, which converges within about as many
    iterations as its results hold facts, or never; a step past that is refused with this reason
    (`operators/fixpoint.py` `ScopeState`)."""
    from dbspark.circuit.circuit import Circuit
    from dbspark.circuit.stream import Stream

    if not inputs:
        raise CircuitError("a recursive scope needs at least one input stream")
    if mode not in ("naive", "seminaive"):
        raise CircuitError("mode must be 'naive' or 'seminaive' (incrementalize() makes it incremental)")
    if strategy not in ("auto", "nested", "dred"):
        raise CircuitError(f"strategy must be 'auto', 'nested' or 'dred', not {strategy!r}")
    if max_iterations < 1:
        raise CircuitError("max_iterations must be at least 1")
    if schemas is None:
        sch = [inputs[0].schema]
    elif isinstance(schemas, (Mapping, pl.Schema)) and not isinstance(schemas, Sequence):
        sch = [schemas if isinstance(schemas, pl.Schema) else to_schema(schemas)]
    else:
        sch = [s if isinstance(s, pl.Schema) else to_schema(s) for s in schemas]
    scope = name or f"scope{next(_scope_ids)}"
    inner = Circuit()
    imports = [inner.input(f"import{i}", s.schema) for i, s in enumerate(inputs)]
    feedbacks = [inner.feedback(s) for s in sch]
    result = body(*imports, *[fb.stream for fb in feedbacks])
    results = list(result) if isinstance(result, (tuple, list)) else [result]
    if len(results) != len(feedbacks):
        raise CircuitError(
            f"scope {scope!r}: the body returned {len(results)} relation(s) for {len(feedbacks)} recursive relation(s)"
        )
    for i, (fb, r) in enumerate(zip(feedbacks, results, strict=True)):
        if not isinstance(r, Stream):
            raise CircuitError(
                f"scope {scope!r}: result {i} of the body is {type(r).__name__}, not a stream built from its arguments"
            )
        if r.circuit is not inner:
            raise CircuitError(f"scope {scope!r}: result {i} is not built from the body's arguments")
        fb.connect(r)
        inner.output(f"rel{i}", r)
    plain = None
    if mode == "seminaive":
        from dbspark.incremental.fixpoint import nested_delta

        plain, inner = inner, nested_delta(inner)
    op = Fixpoint(
        inner,
        tuple(f"import{i}" for i in range(len(inputs))),
        tuple(f"rel{i}" for i in range(len(results))),
        scope,
        mode,
        max_iterations,
        strategy,
        plain,
        bounded=bounded,
    )
    fix = c.add(op, *inputs)
    picks = [c.add(Pick(i, r.schema), fix) for i, r in enumerate(results)]
    return picks[0] if len(picks) == 1 else tuple(picks)
