"""Programs that recurse through aggregates (`docs/recursive-aggregation.md`), their data and direct
oracles: shared by `tests/test_recursive_aggregates.py` and `bench/recursive_aggregates.py`.

- `CP`: the cheapest-path program of `incremental-aggregation-monotonic-programs.txt` Example 4.1
  (`D41`, its database); `APSP`, all-pairs cheapest paths, `SSSP`, shortest paths from the sources,
  `CC`, connected components by smallest label, in Soufflé's aggregate syntax;
- `COMPANY`: company control (Example 1.1), formatted with the share type `t` and the threshold
  `half`; `figure_1(n)` its dataset, `control(owns, half)` the least fixpoint of its definition.
"""

from __future__ import annotations

# Example 4.1's program. The paper prints r1 as cost(X, X, Y, C), but every fact it lists for r1
# (T_CP^2, and the computations of Example 4.3) is cost(X, Y, Y, C): a direct edge's last hop is Y.
CP = """
.decl edge(s: symbol, d: symbol, c: number)
.input edge
.decl cost(x: symbol, z: symbol, y: symbol, c: number)
.decl mincost(x: symbol, y: symbol, c: number)
.output cost, mincost
cost(X, Y, Y, C) :- edge(X, Y, C).
cost(X, Z, Y, C) :- mincost(X, Z, C1), edge(Z, Y, C2), C = C1 + C2.
mincost(X, Y, C) :- groupby(cost(X, Z, Y, C1), [X, Y], C = min<C1>).
"""
D41 = [("a", "b", 3), ("b", "c", 4), ("a", "c", 9)]

# all-pairs cheapest paths on numbered nodes, in Soufflé's aggregate syntax
APSP = """
.decl edge(x: number, y: number, w: number)
.input edge
.decl mincost(x: number, y: number, c: number)
.output mincost
mincost(x, y, c) :- edge(x, y, _), c = min w : { edge(x, y, w) }.
mincost(x, y, c) :- mincost(x, z, _), edge(z, y, _), c = min d : { mincost(x, z2, c1), edge(z2, y, w), d = c1 + w }.
"""

SSSP = """
.decl edge(x: number, y: number, w: number)
.input edge
.decl source(x: number)
.input source
.decl dist(x: number, d: number)
.output dist
dist(x, 0) :- source(x).
dist(y, d) :- edge(_, y, _), d = min c : { dist(x, d0), edge(x, y, w), c = d0 + w }.
"""

CC = """
.decl edge(x: number, y: number)
.input edge
.decl node(x: number)
node(x) :- edge(x, _).
node(y) :- edge(_, y).
.decl cand(x: number, l: number)
.decl cc(x: number, l: number)
.output cc
cand(x, x) :- node(x).
cand(y, l) :- cc(x, l), edge(x, y).
cand(y, l) :- cc(x, l), edge(y, x).
cc(x, m) :- node(x), m = min l : { cand(x, l) }.
"""

# Example 1.1: company control; percentages (integers) in the oracle tests, fractions for Figure 1
COMPANY = """
.decl owns(x: number, y: number, n: {t})
.input owns
.decl cv(x: number, z: number, y: number, n: {t})
.decl cv1(x: number, y: number, s: {t})
.decl controls(x: number, y: number)
.output controls, cv1
cv(X, X, Y, N) :- owns(X, Y, N).
cv(X, Z, Y, N) :- controls(X, Z), owns(Z, Y, N).
cv1(X, Y, S) :- groupby(cv(X, Z, Y, N), [X, Y], S = sum<N>).
controls(X, Y) :- cv1(X, Y, S), S > {half}.
"""


def figure_1(n: int) -> list[tuple[int, int, float]]:
    """The owns_stock relation of Figure 1."""
    rows = [(0, 1, 0.6)]
    rows += [(i, i + 1, 0.4) for i in range(1, n - 1)]
    rows += [(0, i, 0.2) for i in range(2, n)]
    rows += [(i, n, 1 / (2 * n)) for i in range(0, n - 1)]
    rows += [(n - 1, n, 1 / n)]
    return rows


def control(owns: set[tuple], half: float) -> set[tuple[int, int]]:
    """The least fixpoint of the definition: x controls y when the shares of y held by x and by the
    companies x controls (each counted once) sum to more than `half`."""
    companies = {r[0] for r in owns}
    ctrl: set[tuple[int, int]] = set()
    while True:
        total: dict[tuple[int, int], float] = {}
        for x in companies:
            via = {x} | {z for (x2, z) in ctrl if x2 == x}
            for z, y, n in owns:
                if z in via:
                    total[(x, y)] = total.get((x, y), 0) + n
        nxt = {k for k, s in total.items() if s > half}
        if nxt == ctrl:
            return ctrl
        ctrl = nxt


def figure_1_units(n: int) -> list[tuple[int, int, int]]:
    """`figure_1(n)` in units of 1 / (10 n), integers (sums exact; `COMPANY` with `half` = 5 n)."""
    rows = [(0, 1, 6 * n)]
    rows += [(i, i + 1, 4 * n) for i in range(1, n - 1)]
    rows += [(0, i, 2 * n) for i in range(2, n)]
    rows += [(i, n, 5) for i in range(0, n - 1)]
    rows += [(n - 1, n, 10)]
    return rows
