"""Transitive closure maintained incrementally (`dbsp-paper.txt` §6.1), deletions included.

    path(x, y) :- edge(x, y).
    path(x, y) :- path(x, z), edge(z, y).

Prints the closure's change at every step, including a deletion that breaks a cycle, and checks the
maintained closure against recomputation from scratch. The same changes come out of the transitive
closure operator (`edge.transitive_closure`, strongly connected components instead of a fixpoint),
which is checked too. Run: python examples/transitive_closure.py
"""

from __future__ import annotations

import dbspark


def build() -> dbspark.Circuit:
    c = dbspark.Circuit()
    edge = c.input("edge", {"src": "int64", "dst": "int64"}, kind="set")

    def body(edge: dbspark.Stream, path: dbspark.Stream) -> dbspark.Stream:
        step = path.stream_join(edge, left_on="dst", right_on="src").map("src", dst="dst_right")
        return (edge + step).stream_distinct()

    c.output("path", c.recursive(body, [edge], name="closure"))
    return c


def build_operator() -> dbspark.Circuit:
    c = dbspark.Circuit()
    edge = c.input("edge", {"src": "int64", "dst": "int64"}, kind="set")
    c.output("path", edge.transitive_closure("src", "dst"))
    return c


def closure(edges: set[tuple[int, int]]) -> set[tuple[int, int]]:
    """The closure from scratch, in plain Python (the oracle)."""
    reach = set(edges)
    while True:
        new = {(a, d) for (a, b) in reach for (c, d) in edges if b == c} - reach
        if not new:
            return reach
        reach |= new


def main() -> None:
    q = build().incrementalize()
    print(q.explain() + "\n")
    r = q.run()
    op = build_operator().run()
    edges: set[tuple[int, int]] = set()
    steps = [
        ("a chain 1 -> 2 -> 3 -> 4", [(1, 2), (2, 3), (3, 4)], []),
        ("close a cycle 4 -> 1", [(4, 1)], []),
        ("add a tail 4 -> 5", [(4, 5)], []),
        ("delete 2 -> 3: the cycle breaks", [], [(2, 3)]),
        ("add 1 -> 3 back around", [(1, 3)], []),
        ("delete everything", [], [(1, 2), (3, 4), (4, 1), (4, 5), (1, 3)]),
    ]
    for what, ins, dels in steps:
        for rt in (r, op):
            if ins:
                rt.insert("edge", ins)
            if dels:
                rt.delete("edge", dels)
        edges = (edges | set(ins)) - set(dels)
        change = r.step()["path"]
        if op.step()["path"].to_dict() != change.to_dict():
            raise SystemExit(f"the closure operator's change differs at {what!r}")
        added = sorted(row for row, w in change.to_rows() if w > 0)
        removed = sorted(row for row, w in change.to_rows() if w < 0)
        view = set(r.view("path").to_dict())
        ok = view == closure(edges)
        print(
            f"{what}:\n  + {added}\n  - {removed}\n  closure has {len(view)} pairs; matches recomputation: {ok}"
        )
        if not ok:
            raise SystemExit(f"mismatch: {sorted(view)} != {sorted(closure(edges))}")


if __name__ == "__main__":
    main()
