"""Pictures of circuits (`dbspark explain --format dot|mermaid|svg|png`, `Pipeline.picture`): each circuit
a box of its own (the circuit and its incremental form side by side), its operators coloured by family
(`operators/base.py`'s kinds: tables, linear, bilinear, nonlinear, time), the operators that keep state
— integrals, traces, a window's rows, an aggregate's groups — drawn as cylinders, a recursive scope's
body as a box inside its circuit, the views as their own nodes. DOT is built with the `graphviz`
package and drawn by Graphviz's `dot` program; Mermaid is text for Markdown pages."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from typing import TYPE_CHECKING

from dbspark.circuit.explain import evaluation_order
from dbspark.errors import UnsupportedError
from dbspark.operators.base import BILINEAR, LINEAR, MULTILINEAR, NONLINEAR, SOURCE, TIME

if TYPE_CHECKING:
    import graphviz

    from dbspark.circuit.circuit import Circuit

FORMATS = ("text", "dot", "mermaid", "svg", "png")
COLOURS = {
    SOURCE: "#dbeafe",
    LINEAR: "#dcfce7",
    BILINEAR: "#fef3c7",
    MULTILINEAR: "#fde68a",
    NONLINEAR: "#fee2e2",
    TIME: "#ede9fe",
}
OUTPUT = "#e5e7eb"
LABEL = 60  # longest label drawn; the text format has the whole


def _label(text: str) -> str:
    return text if len(text) <= LABEL else text[: LABEL - 1] + "…"


def _add(g: graphviz.Digraph, c: Circuit, prefix: str) -> None:
    order = evaluation_order(c)
    num = {nid: i for i, nid in enumerate(order)}  # numbered as `explain` numbers them
    for nid in order:
        n = c.nodes[nid]
        name = f"{prefix}n{num[nid]}"
        shape = "cylinder" if n.op.stateful else "box"
        fill = COLOURS.get(n.op.kind, "#ffffff")
        g.node(name, _label(f"n{num[nid]} {n.op.label()}"), shape=shape, style="filled", fillcolor=fill)
        for i in n.inputs:
            g.edge(f"{prefix}n{num[i]}", name)
        inner = getattr(n.op, "inner", None)
        if inner is not None:  # a recursive scope: its body in a box, linked to the scope's node
            with g.subgraph(name=f"cluster_{name}") as s:
                s.attr(label=f"scope n{num[nid]}", style="rounded,dashed")
                _add(s, inner, f"{name}_")
            if inner.nodes:  # (the body's first node: n0)
                g.edge(name, f"{name}_n0", style="dashed", arrowhead="none")
    for view, nid in c.outputs.items():
        g.node(f"{prefix}{view}", view, shape="note", style="filled", fillcolor=OUTPUT)
        g.edge(f"{prefix}n{num[nid]}", f"{prefix}{view}")


def dot(circuits: Sequence[tuple[str, Circuit]]) -> graphviz.Digraph:
    """One graph, a box per (title, circuit)."""
    import graphviz

    g = graphviz.Digraph("dbspark", graph_attr={"rankdir": "TB", "fontname": "Helvetica"})
    g.attr("node", fontname="Helvetica", fontsize="10")
    for i, (title, c) in enumerate(circuits):
        with g.subgraph(name=f"cluster_c{i}") as s:
            s.attr(label=title, style="rounded")
            _add(s, c, f"c{i}_")
    return g


def mermaid(circuits: Sequence[tuple[str, Circuit]]) -> str:
    """The same picture as Mermaid flowchart text."""
    lines = ["flowchart TB"]
    for kind, fill in [*COLOURS.items(), ("output", OUTPUT)]:
        lines.append(f"    classDef {kind} fill:{fill},stroke:#555")

    def add(c: Circuit, prefix: str, indent: str) -> None:
        order = evaluation_order(c)
        num = {nid: i for i, nid in enumerate(order)}
        for nid in order:
            n = c.nodes[nid]
            name = f"{prefix}n{num[nid]}"
            text = _label(f"n{num[nid]} {n.op.label()}").replace('"', "#quot;")
            shape = f'[("{text}")]' if n.op.stateful else f'["{text}"]'
            lines.append(f"{indent}{name}{shape}:::{n.op.kind}")
            lines.extend(f"{indent}{prefix}n{num[i]} --> {name}" for i in n.inputs)
            inner = getattr(n.op, "inner", None)
            if inner is not None:
                lines.append(f'{indent}subgraph {name}_scope ["scope n{num[nid]}"]')
                add(inner, f"{name}_", indent + "    ")
                lines.append(f"{indent}end")
                lines.append(f"{indent}{name} -.- {name}_scope")
        for view, nid in c.outputs.items():
            lines.append(f'{indent}{prefix}{view}[/"{view}"/]:::output')
            lines.append(f"{indent}{prefix}n{num[nid]} --> {prefix}{view}")

    for i, (title, c) in enumerate(circuits):
        lines.append(f'    subgraph c{i} ["{title}"]')
        add(c, f"c{i}_", "        ")
        lines.append("    end")
    return "\n".join(lines) + "\n"


def render(circuits: Sequence[tuple[str, Circuit]], fmt: str) -> str | bytes:
    """The picture in `fmt` (`FORMATS` less text): DOT or Mermaid text, SVG text, PNG bytes."""
    if fmt == "mermaid":
        return mermaid(circuits)
    g = dot(circuits)
    if fmt == "dot":
        return str(g.source)
    if fmt not in ("svg", "png"):
        raise UnsupportedError(f"the picture format {fmt!r} (the formats are {', '.join(FORMATS)})")
    if shutil.which("dot") is None:
        raise UnsupportedError(
            f"the {fmt} format needs Graphviz's `dot` program, which is not installed (apt install graphviz; "
            "the dot and mermaid formats need nothing)"
        )
    out = g.pipe(format=fmt)
    return out.decode() if fmt == "svg" else out
