"""Change batches in and out: read rows with weights from files and Delta tables, write view changes."""

from dbspark.io.sinks import write_changes
from dbspark.io.sources import list_batches, read_changes, read_delta_cdf

__all__ = ["list_batches", "read_changes", "read_delta_cdf", "write_changes"]
