"""Print a circuit as text: one node per line, `nK = label(inputs)`, outputs last (used by golden tests)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dbspark.circuit.circuit import Circuit


def evaluation_order(c: Circuit) -> list[int]:
    """The nodes in evaluation order (a circuit that does not schedule: in id order), as `explain`,
    pictures and metrics number them."""
    from dbspark.circuit.schedule import schedule

    try:
        return schedule(c)
    except Exception:
        return sorted(c.nodes)


def explain(c: Circuit) -> str:
    order = evaluation_order(c)
    # renumber in evaluation order so that equivalent circuits print the same
    num = {nid: i for i, nid in enumerate(order)}
    lines = []
    for nid in order:
        n = c.nodes[nid]
        args = ", ".join(f"n{num[i]}" for i in n.inputs)
        lines.append(f"n{num[nid]} = {n.op.label()}" + (f"({args})" if n.inputs else ""))
        inner = getattr(n.op, "inner", None)  # a recursive scope: its body, indented
        if inner is not None:
            lines.extend("    " + line for line in explain(inner).splitlines())
    for name, nid in c.outputs.items():
        lines.append(f"output {name} = n{num[nid]}")
    return "\n".join(lines)
