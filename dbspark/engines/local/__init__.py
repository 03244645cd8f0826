"""The local engine: in-process, columnar (Polars on Arrow memory), no JVM."""
