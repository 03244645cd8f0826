"""Stream-level oracles: run circuits on explicit streams of Z-sets and check Q^Δ = D ∘ Q ∘ I.

A stream prefix is a list of Z-sets, one per step; several named streams are a dict {name: [ZSet]}.

* `run_stream(circuit, {input: [ZSet per step]})` -> {output: [ZSet per step]}: one runtime, one
  step per element (missing or empty elements push nothing).
* `integrate_stream` / `differentiate_stream`: I and D computed numerically on a list of Z-sets
  (`dbsp-paper.txt` Prop 2.20: I(s)[t] = Σ_{i<=t} s[i]; Def 2.17: D(s)[t] = s[t] - s[t-1]).
* `evaluate(circuit, {input: ZSet})`: the circuit's function on one step from a fresh runtime, i.e. the
  scalar function f of a lifted operator ↑f.
* `assert_incremental_matches(circuit, changes)`: Def 3.1 checked numerically: Q^Δ fed the changes
  has, at every step, view == Q(I(changes))[t] and output == D(Q(I(changes)))[t], where Q runs once over
  the whole stream of integrated inputs (so circuits with delays or feedback are covered too).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dbspark.algebra.zset import ZSet
from dbspark.circuit.circuit import Circuit
from dbspark.circuit.runtime import Runtime
from dbspark.operators.source import Input

Streams = Mapping[str, Sequence[ZSet]]


def _plain(z: ZSet) -> ZSet:
    """A consolidated, non-indexed Z-set over the same frame."""
    c = z.consolidate()
    return ZSet(c.df, True)


def push(rt: Runtime, name: str, z: ZSet | None) -> None:
    """Queue a Z-set as the next step's value of input `name` (nothing if it is empty or None)."""
    if z is None or len(z) == 0:
        return
    rt.push(name, z.data(), z.weights())


def relax_inputs(circuit: Circuit) -> Circuit:
    """A copy of `circuit` whose inputs all have kind 'zset'.

    An input kind ('bag', 'set') constrains the integral of what is pushed. To run Q on a stream of
    snapshots (each a bag or a set) the integral of the snapshots is meaningless, so the oracle drops
    the constraint; the kinds matter only to Q^Δ, which is fed changes."""
    from dbspark.incremental.rewrite import copy_circuit, same

    out = copy_circuit(circuit, same)
    for nid in out.inputs.values():
        op = out.nodes[nid].op
        assert isinstance(op, Input)
        if op.kind_ != "zset":
            out.nodes[nid].op = Input(op.name_, op.schema, "zset")
    return out


def stream_length(inputs: Streams) -> int:
    return max((len(v) for v in inputs.values()), default=0)


def run_stream(
    circuit: Circuit,
    inputs: Streams,
    steps: int | None = None,
    runtime: Runtime | None = None,
    engine: Any = "local",
) -> dict[str, list[ZSet]]:
    """Run `circuit` for `steps` steps (default: the longest input), pushing inputs[name][t] at step t.

    Returns {output: [value at step 0, 1, ...]}, each value consolidated (and local: a value of another
    engine is collected). A new runtime runs on `engine` (a name, kernel or kernel factory)."""
    unknown = set(inputs) - set(circuit.inputs)
    if unknown:
        raise KeyError(
            f"run_stream: unknown inputs {sorted(unknown)}; the circuit has {sorted(circuit.inputs)}"
        )
    n = stream_length(inputs) if steps is None else steps
    rt = runtime if runtime is not None else circuit.run(engine)
    out: dict[str, list[ZSet]] = {name: [] for name in circuit.outputs}
    for t in range(n):
        for name, zs in inputs.items():
            push(rt, name, zs[t] if t < len(zs) else None)
        res = rt.step()
        for name in circuit.outputs:
            out[name].append(_plain(_local(rt, res[name])))
    return out


def _local(rt: Runtime, z: Any) -> ZSet:
    """A runtime's value as a local Z-set (the spark engine's values are collected)."""
    to_local = getattr(rt.kernel, "to_local", None)
    return to_local(z) if to_local is not None else z


def evaluate(circuit: Circuit, inputs: Mapping[str, ZSet], engine: Any = "local") -> dict[str, ZSet]:
    """One step of a fresh runtime: for a circuit of lifted operators, the scalar function it lifts."""
    return {
        k: v[0]
        for k, v in run_stream(circuit, {n: [z] for n, z in inputs.items()}, steps=1, engine=engine).items()
    }


def integrate_stream(zs: Sequence[ZSet]) -> list[ZSet]:
    """I(s)[t] = s[0] + ... + s[t] (consolidated)."""
    out: list[ZSet] = []
    acc: ZSet | None = None
    for z in zs:
        acc = _plain(z if acc is None else acc + z)
        out.append(acc)
    return out


def differentiate_stream(zs: Sequence[ZSet]) -> list[ZSet]:
    """D(s)[t] = s[t] - s[t-1], with s[-1] = 0 (consolidated)."""
    return [_plain(z if t == 0 else z - zs[t - 1]) for t, z in enumerate(zs)]


def integrate_streams(streams: Streams) -> dict[str, list[ZSet]]:
    return {k: integrate_stream(v) for k, v in streams.items()}


def differentiate_streams(streams: Streams) -> dict[str, list[ZSet]]:
    return {k: differentiate_stream(v) for k, v in streams.items()}


def _pad(streams: Streams, n: int, circuit: Circuit) -> dict[str, list[ZSet]]:
    """Every input of `circuit` as a list of length n (missing steps are empty Z-sets)."""
    out = {}
    for name, nid in circuit.inputs.items():
        zs = list(streams.get(name, ()))
        schema = circuit.nodes[nid].shape.schema
        out[name] = zs + [ZSet.empty(schema) for _ in range(n - len(zs))]
    return out


def assert_incremental_matches(
    circuit: Circuit,
    changes: Streams,
    incremental: Circuit | None = None,
    outputs: Sequence[str] | None = None,
    engine: Any = "local",
    oracle_engine: Any = None,
) -> dict[str, list[ZSet]]:
    """Check Q^Δ = D ∘ Q ∘ I (Def 3.1) on one stream of changes, at every step and output.

    `incremental` defaults to `circuit.incrementalize()`. Q runs (inputs relaxed to kind 'zset', see
    `relax_inputs`) on the integrated changes; Q^Δ runs on the changes, and at step t must have
    `view(o) == Q(I(changes))[t]` and step output `== D(Q(I(changes)))[t]`. Returns Q^Δ's outputs
    (the changes) per step. Raises AssertionError naming the step, the output and both circuits.
    Q^Δ runs on `engine`, Q on `oracle_engine` (default: the same engine)."""
    q = incremental if incremental is not None else circuit.incrementalize()
    n = stream_length(changes)
    padded = _pad(changes, n, circuit)
    expected = run_stream(
        relax_inputs(circuit),
        integrate_streams(padded),
        steps=n,
        engine=engine if oracle_engine is None else oracle_engine,
    )
    expected_changes = {k: differentiate_stream(v) for k, v in expected.items()}
    rt = q.run(engine)
    names = list(outputs) if outputs is not None else list(circuit.outputs)
    got: dict[str, list[ZSet]] = {name: [] for name in names}
    for t in range(n):
        for name, zs in padded.items():
            push(rt, name, zs[t])
        res = rt.step()
        for name in names:
            view = _local(rt, rt.view(name))
            change = _plain(_local(rt, res[name]))
            got[name].append(change)
            if view != expected[name][t] or change != expected_changes[name][t]:
                raise AssertionError(
                    f"Q^Δ != D∘Q∘I at step {t}, output {name!r}:\n"
                    f"  view(Q^Δ)      = {view!r}\n  Q(I(changes))  = {expected[name][t]!r}\n"
                    f"  Q^Δ output     = {change!r}\n  D(Q(I(changes)))= {expected_changes[name][t]!r}\n"
                    f"  changes so far = { {k: v[: t + 1] for k, v in padded.items()}!r}\n"
                    f"Q:\n{circuit.explain()}\nQ^Δ:\n{q.explain()}"
                )
    return got


def assert_streams_equal(
    actual: Mapping[str, Sequence[ZSet]] | Sequence[ZSet],
    expected: Mapping[str, Sequence[ZSet]] | Sequence[ZSet],
    what: str = "",
) -> None:
    """Pointwise equality of stream prefixes (lists, or dicts of lists), with a readable message."""
    if isinstance(actual, Mapping):
        assert isinstance(expected, Mapping)
        if set(actual) != set(expected):
            raise AssertionError(f"{what}: streams {sorted(actual)} != {sorted(expected)}")
        for k in actual:
            assert_streams_equal(actual[k], expected[k], f"{what}[{k}]")
        return
    assert not isinstance(expected, Mapping)
    if len(actual) != len(expected):
        raise AssertionError(f"{what}: {len(actual)} steps != {len(expected)} steps")
    for t, (a, e) in enumerate(zip(actual, expected, strict=True)):
        if a != e:
            raise AssertionError(f"{what} differs at step {t}:\n  actual   {a!r}\n  expected {e!r}")


__all__ = [
    "assert_incremental_matches",
    "assert_streams_equal",
    "differentiate_stream",
    "differentiate_streams",
    "evaluate",
    "integrate_stream",
    "integrate_streams",
    "push",
    "relax_inputs",
    "run_stream",
]
