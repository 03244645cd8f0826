"""dbspark's benchmark suite: `python -m bench [WORKLOAD ...] [--quick]` (see bench/README.md).

Each workload is a module with `run(quick: bool) -> dict`; shared machinery is in `bench.harness`.
"""

WORKLOADS = ("state_scaling", "ordered_aggregates", "join_groupby", "tc", "spark_scale", "datalog", "tpch")
