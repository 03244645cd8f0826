"""An example pipeline for `dbspark run`: revenue per region and each customer's largest order.

dbspark run examples/orders/pipeline.py --changes examples/orders/changes
"""

from dbspark import Pipeline, col


def define(p: Pipeline) -> None:
    orders = p.table("orders", {"o_id": "int64", "cust": "int64", "total": "decimal(12,2)"})
    customers = p.table("customers", {"cust": "int64", "name": "str", "region": "str"})
    joined = orders.stream_join(customers, on="cust")
    p.create_view(
        "revenue_by_region",
        joined.stream_aggregate(
            "region", orders="count", revenue=("sum", "total"), median=("median", "total")
        ),
    )
    p.create_view("largest_order", orders.stream_aggregate("cust", largest=("max", "total")))
    p.create_view("big_spenders", joined.filter(col("total") >= 500).map("name").stream_distinct())
