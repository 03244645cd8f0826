"""Following a Spark Structured Streaming source: each micro-batch of a streaming DataFrame is one step.

    query = p.follow_stream("bids", spark.readStream.format("kafka")...., checkpoint="chk/bids")
    query.awaitTermination()

The micro-batch is pushed as the table's change (its `weight` column, if the stream has one, weighs
each row; else every row is an insert) and the pipeline steps inside Spark's `foreachBatch`. The batch
id is committed with the step as the pipeline's offset `stream:<table>` (`Pipeline.offsets`): Spark
delivers a micro-batch again when a query restarts from its checkpoint after a failure, and one already
committed is skipped, so each is applied once (keep the query's checkpoint with the pipeline's state
directory: the ids are the query's). Several streams into one pipeline take turns, each micro-batch a
step of its own. A step that is rejected fails the streaming query with its error, nothing applied.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dbspark.errors import UnknownNameError

if TYPE_CHECKING:
    from dbspark.pipeline import Pipeline


def follow_stream(
    p: Pipeline,
    table: str,
    stream: Any,
    checkpoint: str | Path | None = None,
    trigger: dict[str, Any] | None = None,
    sink: Callable[[int, dict[str, Any]], None] | None = None,
) -> Any:
    """Start a streaming query feeding `stream` (a streaming Spark DataFrame with the table's columns)
    into `table`, one step per micro-batch; returns the `StreamingQuery`. `trigger`: the keyword
    arguments of `DataStreamWriter.trigger` (e.g. `{"availableNow": True}`); `sink` as `Pipeline.step`'s."""
    if table not in p.tables:
        raise UnknownNameError(f"follow_stream: no table {table!r}; the tables are {sorted(p.tables)}")
    if not getattr(stream, "isStreaming", False):
        raise TypeError(f"follow_stream({table!r}): {type(stream).__name__} is not a streaming DataFrame")
    lock = p.step_lock
    key = f"stream:{table}"
    weighted = "weight" in stream.columns

    def step(batch: Any, batch_id: int) -> None:
        with lock:
            done = p.offsets.get(key)
            if done is not None and batch_id <= done:  # delivered again after a restart: applied already
                return
            p.push(table, batch, None if weighted else 1)
            p.step(sink=sink, offsets={key: batch_id})

    writer = stream.writeStream.foreachBatch(step)
    if checkpoint is not None:
        writer = writer.option("checkpointLocation", str(checkpoint))
    if trigger:
        writer = writer.trigger(**trigger)
    return writer.start()
