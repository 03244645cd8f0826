"""dbspark's benchmark suite: `python -m bench [WORKLOAD ...] [--quick]` (see bench/README.md).

Each workload is a module with `run(quick: bool) -> dict`; shared machinery is in `bench.harness`.
"""

WORKLOADS = (
    "state_scaling",
    "ordered_aggregates",
    "semigroup_aggregates",
    "rollup",
    "short_circuit",
    "join_groupby",
    "topk",
    "tc",
    "spark_scale",
    "datalog",
    "recursion",
    "recursive_aggregates",
    "tpch",
)
# issue 7's names for the workloads: `scale` is the view's growth on the local engine and on Spark
ALIASES = {"scale": ("state_scaling", "spark_scale"), "aggregates": ("ordered_aggregates",)}


def expand(names: list[str], workloads: tuple[str, ...] = WORKLOADS) -> list[str]:
    """Workload names with aliases expanded, in order, without repeats (all workloads when empty)."""
    out: list[str] = []
    for n in names or list(workloads):
        if n not in workloads and n not in ALIASES:
            raise ValueError(f"unknown workload {n!r}; choose from {[*workloads, *ALIASES]}")
        out += [w for w in ALIASES.get(n, (n,)) if w not in out]
    return out
