"""The spark engine: Z-sets as lazy Spark DataFrames, traces as Parquet files (`kernel`, `trace`)."""
