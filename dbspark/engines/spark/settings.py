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
- `spark.sql.shuffle.partitions`: from the step's change, `ceil(rows / 100,000)` (a 10-row step: 1),
  never more than the session's own value; the session's value when the size is unknown (a pushed
  Spark DataFrame), and for a trace merge, from the rows merged;
- `spark.sql.adaptive.enabled`: off when the partitions come from a known size (for small steps,
  adaptive planning costs more than it saves); on when they do not, so that AQE coalesces the
  session's partitions to the data.

On classic Spark the ANSI mode and the time zone are fixed into a DataFrame's plan when it is built
(analysis is eager), so they must hold while a step builds its plans, not only at its actions; the
partitions and AQE are read when an action is planned. Only runtime SQL settings are changed, so this
works on Spark Connect too. A user overrides the performance settings with `spark.dbspark.*`:
`shufflePartitions` (a number, or `session`: the session's own value), `rowsPerPartition`, `adaptive`
(`true`, `false` or `session`). Another thread's queries on the same session during a step see
dbspark's values.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from dbspark.engines.spark.session import SessionHandle

ANSI = "spark.sql.ansi.enabled"
TIME_ZONE = "spark.sql.session.timeZone"
PARTITIONS = "spark.sql.shuffle.partitions"
ADAPTIVE = "spark.sql.adaptive.enabled"
SEMANTICS = {ANSI: "true", TIME_ZONE: "UTC"}  # what answers depend on: not a user setting
SPARK_DEFAULT_PARTITIONS = 200
ROWS_PER_PARTITION = 100_000
_UNSET = object()


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
        self._saved: dict[str, Any] | None = None  # the session's own values while applied
        self._current: dict[str, str] = {}  # what is set now

    @property
    def active(self) -> bool:
        return self._saved is not None

    def wanted(self, rows: int | None) -> dict[str, str]:
        """The settings for a step (or action) over a change of `rows` rows (None: unknown)."""
        out = dict(SEMANTICS)
        fixed = self.handle.setting("shufflePartitions", "")
        if fixed and fixed != "session":
            out[PARTITIONS] = fixed
        elif not fixed:
            own = self._own(PARTITIONS)
            cap = int(own) if own is not None else SPARK_DEFAULT_PARTITIONS
            rpp = int(self.handle.setting("rowsPerPartition", str(ROWS_PER_PARTITION)))
            out[PARTITIONS] = str(shuffle_partitions(rows, cap, rpp))
        adaptive = self.handle.setting("adaptive", "")
        if adaptive != "session":
            out[ADAPTIVE] = adaptive or ("false" if rows is not None and not fixed else "true")
        return out

    def _own(self, key: str) -> str | None:
        """The session's own value of `key` (None: not set), also while dbspark's are applied."""
        if self._saved is not None and key in self._saved:
            v = self._saved[key]
            return None if v is _UNSET else v
        return self._get(key)

    def _get(self, key: str) -> str | None:
        v = self.handle.spark.conf.get(key, None)
        return None if v is None else str(v)

    @contextmanager
    def applied(self, rows: int | None = None) -> Iterator[None]:
        """dbspark's settings while the block runs, the session's own ones afterwards. Nested: only a
        given `rows` matters (the shuffle partitions for that part), restored to the outer value after."""
        if self._saved is not None:
            if rows is None:
                yield
                return
            part = self.wanted(rows).get(PARTITIONS)
            outer = self._current.get(PARTITIONS)
            if part is None or outer is None:  # the partitions are the session's own
                yield
                return
            self._set(PARTITIONS, part)
            try:
                yield
            finally:
                self._set(PARTITIONS, outer)
            return
        want = self.wanted(rows)
        saved: dict[str, Any] = {}
        self._saved = saved
        try:
            for k, v in want.items():
                own = self._get(k)
                saved[k] = _UNSET if own is None else own
                if own != v:
                    self.handle.spark.conf.set(k, v)
                self._current[k] = v
            yield
        finally:
            self._restore(saved)

    def _set(self, key: str, value: str) -> None:
        if self._current.get(key) != value:
            self.handle.spark.conf.set(key, value)
            self._current[key] = value

    def _restore(self, saved: dict[str, Any]) -> None:
        conf = self.handle.spark.conf
        try:
            for k, own in saved.items():
                if own is _UNSET:
                    if self._current.get(k) is not None:
                        conf.unset(k)
                elif self._current.get(k) != own:
                    conf.set(k, own)
        finally:
            self._saved = None
            self._current = {}
