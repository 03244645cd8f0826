"""The Datalog front end: a Soufflé-style program added to a pipeline, maintained incrementally.

    p = dbspark.Pipeline(engine="local")
    p.datalog('''
        .decl edge(x: number, y: number)
        .input edge
        .decl path(x: number, y: number)
        .output path
        path(x, y) :- edge(x, y).
        path(x, y) :- path(x, z), edge(z, y).
    ''')
    p.insert("edge", [(1, 2), (2, 3)]); p.step(); p.view("path")

`load` parses (`parser`, lark), checks (`check`, `types`: predicates, arities, types, safety),
stratifies (`stratify`) and lowers (`lower`) the program into the pipeline's circuit:

- an `.input` relation is a table of kind "set" (Datalog relations are sets): `p.insert` of a fact
  that is already there and `p.delete` of a fact that is not are rejected with an error naming the
  fact (the step is rolled back); a fact file (`<name>.facts` next to the program, or `filename=`)
  and the program's own facts are the table's first insert;
- an `.output` relation is a view (`p.view`, `p.step()` changes; SQL can read it); an `.input` relation
  that is also an `.output` is both a table and a view of the same name (`Pipeline.output_table`);
- other relations are internal streams; facts of relations that are not inputs go to a hidden table
  `_facts_<name>`, and bodies without a positive atom start from a hidden one-row table `_unit`;
- a predicate not declared in the program but known to the pipeline (a table or view declared before,
  e.g. in SQL) is an extensional predicate, its columns taken positionally (set semantics: distinct).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import polars as pl

from dbspark.errors import CircuitError, DbsparkError, SchemaError, UnknownNameError
from dbspark.frontends.datalog import records
from dbspark.frontends.datalog.autoinc import in_head, number_calls
from dbspark.frontends.datalog.check import Checked, check, dtype_type
from dbspark.frontends.datalog.components import expand_components
from dbspark.frontends.datalog.eqrel import expand_eqrel
from dbspark.frontends.datalog.files import fact_file, read_facts
from dbspark.frontends.datalog.lower import JOIN_PLANS, _reads, lower_component
from dbspark.frontends.datalog.magic import magic_sets as rewrite_magic
from dbspark.frontends.datalog.parser import parse
from dbspark.frontends.datalog.stratify import stratify
from dbspark.frontends.datalog.subsume import expand_subsumption, own_names
from dbspark.functors import REGISTRY as FUNCTOR_REGISTRY
from dbspark.functors import register_functor

__all__ = ["load", "parse", "check", "compile_program"]

UNIT = "_unit"


def compile_program(text: str, external: dict[str, pl.Schema] | None = None) -> Checked:
    """Parse and check a program (no pipeline needed): raises on syntax and semantic errors."""
    checked = check(parse(text), external)
    stratify(sorted(checked.relations), checked.rules)
    return checked


def load(
    pipeline: Any,
    text: str,
    base_dir: str | Path | None = None,
    max_iterations: int | None = None,
    closure_operator: bool = True,
    magic_sets: bool = True,
    functors: Mapping[str, Callable[..., Any]] | None = None,
    joins: str = "auto",
) -> list[str]:
    """Add the Datalog program `text` to `pipeline`; returns the names it declared (its input tables,
    then its output views). `base_dir`: where fact files are looked up (default: none for `.input p`,
    the working directory for relative `filename=`); `max_iterations` bounds each recursive component's
    iterations per step (default: the pipeline's `recursion_limit`); `joins` how a rule body's atoms
    are joined (`lower.JOIN_PLANS`). A program with an error declares nothing."""
    if joins not in JOIN_PLANS:
        raise UnknownNameError(f"joins={joins!r}: the join plans are {', '.join(map(repr, JOIN_PLANS))}")
    if max_iterations is None:
        max_iterations = getattr(pipeline, "recursion_limit", 10_000)
    base = Path(base_dir) if base_dir is not None else None
    external = {n: s.schema for n, s in pipeline.relations.items()}
    prog = expand_eqrel(expand_subsumption(number_calls(expand_components(parse(text)))))
    for name, fn in (functors or {}).items():
        register_functor(name, fn)
    for d in prog.functors:
        if d.name not in FUNCTOR_REGISTRY:
            raise UnknownNameError(
                f".functor {d.name} (line {d.pos.line}, column {d.pos.column}): no Python function is "
                f"registered for it: p.datalog(text, functors={{{d.name!r}: fn}}) or "
                f"dbspark.register_functor({d.name!r}, fn)"
            )
    declared_here = {d.name for d in prog.decls}
    try:
        checked = check(prog, {n: s for n, s in external.items() if n not in declared_here})
        comps = stratify(sorted(checked.relations), checked.rules)
    except DbsparkError as e:  # (a subsumed relation's rules derive `r__all`)
        if e.args and isinstance(e.args[0], str):
            e.args = (own_names(e.args[0]), *e.args[1:])
        raise
    whole = any(map(in_head, checked.rules)) or any(r.limit is not None for r in checked.relations.values())
    if magic_sets and not whole:  # (autoinc numbers, and a limit keeps, from whole relations)
        # the outputs' bound calls evaluated goal-directed (`magic.py`)
        checked = rewrite_magic(checked, comps)
        comps = stratify(sorted(checked.relations), checked.rules)
    rels = checked.relations
    # declared in the program but defined elsewhere: a relation with no rules, facts or .input that the
    # pipeline already has is read from the pipeline
    defined = {r.head.pred for r in checked.rules} | set(checked.facts)
    for name in declared_here & set(pipeline.relations) & set(rels):  # (Magic Sets drops unread ones)
        r = rels[name]
        if r.origin == "derived" and name not in defined and not r.output:
            actual = [dtype_type(t) for t in external[name].values()]
            if [t if t != "unsigned" else "number" for t in r.types] != actual:
                raise SchemaError(
                    f".decl {name}: declared as ({', '.join(r.types)}), but the pipeline's relation "
                    f"{name!r} has ({', '.join(actual)}) (line {r.pos.line}, column {r.pos.column})"
                )
            r.origin = "external"

    new_names = [n for n, r in rels.items() if r.origin == "input" or r.output]
    new_names += [f"_facts_{n}" for n, r in rels.items() if r.origin == "derived"]
    for n in new_names:
        if n in pipeline.relations:
            raise CircuitError(
                f"{n!r} is already declared in the pipeline; the Datalog program declares it again"
            )
    facts_files = {
        n: _initial_rows(r, base, checked.facts.get(n, [])) for n, r in rels.items() if r.origin == "input"
    }

    declared: list[str] = []
    env: dict[str, Any] = {}
    base_parts: dict[str, list[str]] = {}
    pending: list[tuple[str, Any]] = []

    def unit() -> Any:
        if "@unit" not in env:
            if UNIT in pipeline.relations:
                env["@unit"] = pipeline.relation(UNIT)
            else:
                env["@unit"] = pipeline.table(UNIT, {"u": "int64"}, kind="set")
                pending.append((UNIT, [(0,)]))
        return env["@unit"]

    used = {q for rule in checked.rules for q in _reads(rule.body)}
    for name, r in rels.items():
        if r.origin == "external":
            if name in used:
                env[name] = pipeline.relation(name).stream_distinct()  # Datalog reads it as a set
        elif r.origin == "input":
            env[name] = env["@input:" + name] = pipeline.table(name, r.schema, kind="set")
            declared.append(name)
            base_parts[name] = ["@input:" + name]  # a key apart from the relation's (which rules may extend)
            rows = facts_files[name]
            if rows is not None:
                pending.append((name, rows))
        else:
            facts = checked.facts.get(name)
            if facts or not any(rule.head.pred == name for rule in checked.rules):
                key = f"_facts_{name}"
                env["@" + key] = pipeline.table(key, r.schema, kind="set")
                base_parts[name] = ["@" + key]
                if facts:
                    pending.append((key, pl.DataFrame(facts, schema=r.schema, orient="row").unique()))
    for comp in comps:
        if all(rels[p].origin == "external" for p in comp.preds):
            continue
        env.update(
            lower_component(comp, rels, env, base_parts, unit, max_iterations, closure_operator, joins)
        )
    for name, r in rels.items():
        if r.output and r.origin == "input":  # the table, and what rules derive into it
            pipeline.output_table(name, env[name])
            pipeline.datalog_outputs[name] = _output_params(r)
        elif r.output:
            pipeline.create_view(name, env[name])
            declared.append(name)
            pipeline.datalog_outputs[name] = _output_params(r)
    pipeline._pending.extend((t, rows, 1) for t, rows in pending)
    return declared


def _output_params(r: Any) -> dict[str, Any]:
    """An `.output` relation's parameters, and the types of its record columns (written as Soufflé
    writes records: `io/souffle.py`)."""
    structured = {c: t for c, t in zip(r.columns, r.types, strict=True) if records.is_structured(t)}
    return {**r.out_params, **({"@records": structured} if structured else {})}


def _initial_rows(r: Any, base: Path | None, facts: list[tuple]) -> pl.DataFrame | None:
    f = fact_file(r, base)
    frames = [read_facts(f, r)] if f is not None else []
    if facts:
        frames.append(pl.DataFrame(facts, schema=r.schema, orient="row"))
    if not frames:
        return None
    return pl.concat(frames).unique(maintain_order=True)
