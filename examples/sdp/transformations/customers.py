"""Python definitions of the shop pipeline: DataFrame chains over the SQL file's views."""

from pyspark import pipelines as dp
from pyspark.sql import functions as F


@dp.temporary_view
def active_customers():
    return spark.table("customers_raw").filter(F.col("active")).select("id", "name", "region")  # noqa: F821


@dp.materialized_view
def top_customers():
    per_customer = (
        spark.read.parquet("data/orders")  # noqa: F821
        .filter("amount > 0")
        .groupBy("cust")
        .agg(F.sum("amount").alias("total"), F.count("*").alias("n"))
    )
    named = per_customer.join(spark.table("active_customers"), per_customer["cust"] == F.col("id"))  # noqa: F821
    return named.filter(F.col("total") > 1500).select("cust", "name", "total", "n")


@dp.materialized_view(name="region_sizes")
def sizes():
    return spark.sql(  # noqa: F821
        "SELECT region, count(*) AS customers FROM active_customers GROUP BY region"
    )


@dp.table
def big_orders():
    """A streaming table: every big order once, as its file arrives."""
    orders = spark.readStream.format("parquet").load("data/orders")  # noqa: F821
    return orders.where(F.col("amount") >= 900).select("order_id", "cust", "amount")
