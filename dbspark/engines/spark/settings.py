"""The SQL settings dbspark needs on the session it runs on: set while dbspark works, then put back.

A session passed in (or the active one) keeps its own configuration. While dbspark works on it (a step,
from `begin_step` to `end_step` / `abort_step`; the planning of a pushed Spark DataFrame; a Spark
action outside a step), `SessionSettings.applied` sets these runtime SQL settings, and afterwards puts
back the session's own values (a key the session had not set is unset again), also when the step
fails:

- `spark.sql.ansi.enabled=true`: integer overflow is an error, never a silent wrap (the weights of
  joins and aggregates, SUM, integer arithmetic; `SparkKernel.act` turns the error into dbspark's),
  and ANSI casts and date arithmetic, as DuckDB;
- `spark.sql.session.timeZone=UTC`: the zone of TIMESTAMP WITH TIME ZONE values turned into dates or
  text and of the Arrow conversions, as on the local engine;
- `spark.sql.constraintPropagation.enabled=false`: Catalyst's inference of a plan's constraints, which
  grows with the product of its aliases and constraints (the 22 TPC-H views' joins ran the driver out
  of memory inferring them);
- `spark.sql.shuffle.partitions`: from the rows pushed for the step, `ceil(rows / 100,000)` (a 10-row
  step: 1), never more than the session's own value (Spark's 200 if unset); for a trace merge, from
  the rows merged. When the step's size is not known (a pushed Spark DataFrame), the session's own.

Adaptive execution (`spark.sql.adaptive.enabled`) is left as the session has it: measured on a 10-row
join + GROUP BY step on `local[2]` (`bench/user_session.py`), 200 partitions with AQE on (Spark's
default; AQE coalesces them) cost the same as 1 partition with or without AQE, about 3 s, while 200
partitions with AQE off took 22 s; sizing the partitions removes that case, AQE adds nothing to it.

On classic Spark the ANSI mode and the time zone are fixed into a DataFrame's plan when it is built
(analysis is eager), so they must hold while a step builds its plans, not only at its actions; the
partitions and AQE are read when an action is planned. Only runtime SQL settings are changed, so this
works on Spark Connect too. A user overrides the performance settings with `spark.dbspark.*`:
`shufflePartitions` (a number, or `session`: the session's own value), `rowsPerPartition`, `adaptive`
(`true` or `false`: set it for dbspark's work; default `session`). Another thread's queries on the
same session during a step see dbspark's values.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

from dbspark.engines.spark.session import SessionHandle

ANSI = "spark.sql.ansi.enabled"
TIME_ZONE = "spark.sql.session.timeZone"
PARTITIONS = "spark.sql.shuffle.partitions"
ADAPTIVE = "spark.sql.adaptive.enabled"
CONSTRAINTS = "spark.sql.constraintPropagation.enabled"
SEMANTICS = {ANSI: "true", TIME_ZONE: "UTC"}  # what answers depend on: not a user setting
# Catalyst's constraint propagation grows with the product of a plan's aliases and its constraints: the
# joins of the 22 TPC-H views ran the driver's 4 GiB heap out of memory inferring them, and dbspark's
# plans gain nothing from it
PLANNING = {CONSTRAINTS: "false"}
MANAGED = (ANSI, TIME_ZONE, PARTITIONS, ADAPTIVE, CONSTRAINTS)
SPARK_DEFAULT_PARTITIONS = 200
ROWS_PER_PARTITION = 100_000


def shuffle_partitions(rows: int | None, cap: int, rows_per_partition: int = ROWS_PER_PARTITION) -> int:
    """Shuffle partitions for a change of `rows` rows: one per `rows_per_partition`, at least 1, at most
    `cap` (the session's own number); `cap` when the size is unknown."""
    if rows is None:
        return max(1, cap)
    return max(1, min(cap, math.ceil(rows / max(1, rows_per_partition))))


class SessionSettings:
    """Sets dbspark's SQL settings on a session for the duration of a `with applied(...)` (re-entrant:
    an inner one changes only the shuffle partitions, for a part of the work whose size is known)."""

    def __init__(self, handle: SessionHandle) -> None:
        self.handle = handle
        self._own: dict[str, str | None] | None = None  # the session's own values while applied
        self._current: dict[str, str | None] = {}  # the values on the session now

    @property
    def active(self) -> bool:
        return self._own is not None

    def wanted(self, rows: int | None) -> dict[str, str]:
        """The settings for a step (or action) over a change of `rows` rows (None: unknown size, then
        the session's own partitions and AQE)."""
        out = {**SEMANTICS, **PLANNING}
        fixed = self.handle.setting("shufflePartitions", "")
        if fixed and fixed != "session":
            out[PARTITIONS] = fixed
        elif not fixed and rows is not None:
            own = self._own[PARTITIONS] if self._own is not None else self._get(PARTITIONS)
            cap = int(own) if own is not None else SPARK_DEFAULT_PARTITIONS
            rpp = int(self.handle.setting("rowsPerPartition", str(ROWS_PER_PARTITION)))
            out[PARTITIONS] = str(shuffle_partitions(rows, cap, rpp))
        adaptive = self.handle.setting("adaptive", "session")
        if adaptive != "session":
            out[ADAPTIVE] = adaptive
        return out

    def _get(self, key: str) -> str | None:
        v = self.handle.spark.conf.get(key, None)
        return None if v is None else str(v)

    def _put(self, key: str, value: str | None) -> None:
        """Set `key` to `value` (None: unset it) unless it has that value already."""
        if self._current.get(key) != value:
            if value is None:
                self.handle.spark.conf.unset(key)
            else:
                self.handle.spark.conf.set(key, value)
            self._current[key] = value

    @contextmanager
    def applied(self, rows: int | None = None) -> Iterator[None]:
        """dbspark's settings while the block runs, the session's own ones afterwards. Nested: only a
        given `rows` matters (the shuffle partitions for that part), put back to the outer value after."""
        if self._own is not None:
            part = None if rows is None else self.wanted(rows).get(PARTITIONS)
            if part is None:
                yield
                return
            outer = self._current[PARTITIONS]
            self._put(PARTITIONS, part)
            try:
                yield
            finally:
                self._put(PARTITIONS, outer)
            return
        self._own = own = {k: self._get(k) for k in MANAGED}
        self._current = dict(own)
        try:
            for k, v in self.wanted(rows).items():
                self._put(k, v)
            yield
        finally:
            try:
                for k in MANAGED:
                    self._put(k, own[k])
            finally:
                self._own = None
                self._current = {}
