"""The spark engine's Z-set value: a lazy Spark DataFrame with a weight column, or rows still local.

A change pushed from Python stays a Polars frame until an operator needs it on Spark (so an empty or
small change costs no Spark action to inspect), and a value known to be empty carries no frame at all
(operators on it short-circuit). Reading a value in Python (`to_zset`, `to_dict`, ...) collects it.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from dbspark.algebra.zset import WEIGHT, ZSet


class SparkZSet:
    """A Z-set on the spark engine. `.frame` is the Spark DataFrame (data columns, then `__w`)."""

    __slots__ = (
        "_df",
        "local",
        "schema",
        "keys",
        "consolidated",
        "_session",
        "_collected",
        "path",
        "files",
        "reader",
        "lineage",
        "unordered",
        "_cut",
        "rows",
    )

    def __init__(
        self,
        session: Any,
        schema: pl.Schema,
        df: Any = None,
        local: ZSet | None = None,
        keys: tuple[str, ...] | None = None,
        consolidated: bool = False,
        lineage: int = 1,
    ) -> None:
        self._session = session
        self.schema = schema
        self._df = df
        self.local = local
        self.keys = keys
        self.consolidated = consolidated
        self._collected: ZSet | None = None
        self.path: str | None = None  # the Parquet file the frame reads, if it is one
        # the Parquet files the frame is the union of (data columns and the weight), if it is that: read
        # in Python without a Spark job when they are on this machine (`to_zset`)
        self.files: tuple[str, ...] | None = None
        # reads the value in Python without a Spark job (a bucketed trace's runs), None where it cannot
        self.reader: Any = None
        # how many copies of a leaf (rows, a file read, a checkpoint) the frame's plan holds, estimated:
        # Spark's plans are trees, so an operator that uses its input twice (a join's change against the
        # state sought at its keys) doubles it; the kernel cuts a plan past a limit (`SparkKernel._z`)
        self.lineage = lineage
        # the kernel's cut (a frame -> the frame computed, its plan starting over) of a plan past its
        # limit, made when the plan is first read (`frame`), not when it is made: a value read by no
        # later plan (a scope's feedback, computed by its placement anyway) is then computed once
        self._cut: Any = None
        # the number of rows of a consolidated frame, where the job that computed it counted them
        self.rows: int | None = None
        # rows read from a pushed Spark DataFrame into the driver: their order in `local` is not the
        # user's (a DataFrame has none), so a keyed table orders them as it orders the frame's
        self.unordered = False

    # ---- what operators use -------------------------------------------------------------------
    @property
    def known_empty(self) -> bool:
        return self._df is None and (self.local is None or self.local.df.height == 0)

    @property
    def frame(self) -> Any:
        """The Spark DataFrame (created from the local rows on first use; a plan past the kernel's limit
        computed first, `_cut`)."""
        if self._cut is not None and self._df is not None:
            cut, self._cut = self._cut, None
            self._df, self.lineage = cut(self._df), 1
        if self._df is None:
            from dbspark.engines.spark.convert import to_spark

            df = self.local.df if self.local is not None else ZSet.empty(self.schema).df
            self._df = to_spark(self._session, df)
        return self._df

    @property
    def columns(self) -> list[str]:
        return list(self.schema)

    def with_frame(
        self,
        df: Any,
        schema: pl.Schema | None = None,
        consolidated: bool = False,
        keys: tuple[str, ...] | None = None,
    ) -> SparkZSet:
        return SparkZSet(
            self._session,
            schema if schema is not None else self.schema,
            df,
            keys=keys,
            consolidated=consolidated,
            lineage=self.lineage,
        )

    # ---- reading in Python (collects) ---------------------------------------------------------
    def to_zset(self) -> ZSet:
        """The value collected into a local, consolidated Z-set."""
        if self._collected is None:
            if self.local is not None and self._df is None:
                z = self.local
            elif self._df is None:
                z = ZSet.empty(self.schema)
            else:
                from dbspark.engines.spark.convert import from_spark, read_local_parquet

                read = read_local_parquet(self.files, self.schema) if self.files is not None else None
                if read is None and self.reader is not None:
                    read = self.reader()
                z = read if read is not None else from_spark(self._df, self.schema)
            self._collected = z.consolidate()
        return self._collected

    def to_pandas(self) -> Any:
        return self.to_zset().df.rename({WEIGHT: "weight"}).to_pandas()

    def __getattr__(self, name: str) -> Any:  # to_dict, to_rows, data, weights, ...: on the collected value
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.to_zset(), name)

    def __len__(self) -> int:
        return len(self.to_zset())

    def _repr_html_(self) -> str:
        """A notebook shows the value's rows (read into the driver)."""
        return self.to_zset()._repr_html_()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, SparkZSet):
            other = other.to_zset()
        return self.to_zset() == other

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"SparkZSet({list(self.schema)}, {'empty' if self.known_empty else 'on spark'})"
