"""One test, both engines: helpers for tests that take the `engine` fixture (tests/conftest.py).

The fixture gives "local" or a Spark kernel factory (with the shared session as `.spark`). A Spark step
is a few Spark jobs, so a hypothesis test runs fewer examples (and sometimes shorter streams) there:
`engine_given` is `@given` with one `settings` per engine, the test body written once.

    @engine_given(streams(), local=30, spark=3)
    def test_x(engine, changes): ...

`pipeline_on(engine)` is a `dbspark.Pipeline` on that engine.

Example counts: every property test runs `EXAMPLES` (the environment's `DBSPARK_EXAMPLES`, default
0.3) of the examples its settings name, on Spark `SPARK_SHARE` of that, at least one
(`scale_examples`, applied to every collected test by tests/conftest.py): the default keeps the
README's test command within CI's time; the full lane is `DBSPARK_EXAMPLES=1 pytest` (about twice as
long).
"""

from __future__ import annotations

import inspect
import math
import os
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis.strategies import SearchStrategy

import dbspark

EXAMPLES = float(os.environ.get("DBSPARK_EXAMPLES", "0.3"))
SPARK_SHARE = 0.5  # a Spark example costs several Spark jobs per step: Spark's counts are cut first

BASE = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def is_spark(engine: Any) -> bool:
    """True for the `engine` fixture's Spark value (a kernel factory), False for "local"."""
    return not (isinstance(engine, str) and engine == "local")


def by_engine(engine: Any, local: Any, spark: Any) -> Any:
    """`local` on the local engine, `spark` on the Spark engine."""
    return spark if is_spark(engine) else local


def pipeline_on(engine: Any, directory: Any = None, **options: Any) -> dbspark.Pipeline:
    """A fresh pipeline on the `engine` fixture's engine (Spark: on the kernel factory's shared session)."""
    if is_spark(engine):
        return dbspark.Pipeline(directory, engine="spark", spark=engine.spark, **options)
    return dbspark.Pipeline(directory, engine="local", **options)


def scaled(n: int, share: float = 1.0) -> int:
    """The examples a property test written for n runs: `EXAMPLES` · `share` of them, at least one."""
    return max(1, math.ceil(n * EXAMPLES * share))


def scale_examples(test: Any) -> None:
    """Run `EXAMPLES` of a hypothesis test's examples (its own settings otherwise), and of the two
    inner tests of an `engine_given` test; once per function (parametrized items share it)."""
    inner = getattr(test, "_dbspark_inner", ())
    for fn, share in ((test, 1.0), *zip(inner, (1.0, SPARK_SHARE), strict=False)):
        s = getattr(fn, "_hypothesis_internal_use_settings", None)
        if s is None or getattr(fn, "_dbspark_scaled", False):
            continue
        fn._hypothesis_internal_use_settings = settings(s, max_examples=scaled(s.max_examples, share))
        fn._dbspark_scaled = True


def _settings(s: settings | int) -> settings:
    return settings(BASE, max_examples=s) if isinstance(s, int) else s


def engine_given(
    *strategies: SearchStrategy[Any],
    local: settings | int,
    spark: settings | int,
    spark_strategies: tuple[SearchStrategy[Any], ...] | None = None,
    **kw_strategies: SearchStrategy[Any],
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """`@given(*strategies, **kw_strategies)` for a test taking the `engine` fixture, with `local` settings
    (or a number of examples) on the local engine and `spark` on the Spark engine; `spark_strategies`
    replace the positional strategies on Spark (e.g. shorter change streams). Marks on the test stay."""

    def decorate(test: Callable[..., Any]) -> Callable[..., Any]:
        on_local = _settings(local)(given(*strategies, **kw_strategies)(test))
        sp = spark_strategies if spark_strategies is not None else strategies
        on_spark = _settings(spark)(given(*sp, **kw_strategies)(test))
        sig = inspect.signature(on_local)  # the test's parameters less the drawn ones: its fixtures
        if "engine" not in sig.parameters:
            raise TypeError(f"{test.__name__}: engine_given needs a test that takes the `engine` fixture")

        def run(**fixtures: Any) -> None:
            (on_spark if is_spark(fixtures["engine"]) else on_local)(**fixtures)

        run.__name__, run.__qualname__ = test.__name__, test.__qualname__
        run.__module__, run.__doc__ = test.__module__, test.__doc__
        run.__dict__.update({k: v for k, v in test.__dict__.items() if k == "pytestmark"})
        run.__signature__ = sig  # type: ignore[attr-defined]
        run._dbspark_inner = (on_local, on_spark)  # type: ignore[attr-defined]
        return run

    return decorate
