"""Engines: each implements the small kernel of `engines.base`; nothing above knows which one runs."""

from __future__ import annotations

from dbspark.engines.base import Kernel


def get_kernel(engine: str | Kernel = "local", **options: object) -> Kernel:
    """The kernel for an engine name ('local' or 'spark'; options go to the kernel).

    A kernel object is used as is; a factory (a callable, e.g. a kernel class or a function building
    one on a given SparkSession) is called with the options, once per runtime."""
    if not isinstance(engine, str):
        if callable(engine):
            return engine(**options)
        return engine
    if engine == "local":
        from dbspark.engines.local.kernel import LocalKernel

        return LocalKernel(**options)  # type: ignore[arg-type]
    if engine == "spark":
        from dbspark.engines.spark.kernel import SparkKernel

        return SparkKernel(**options)  # type: ignore[arg-type]
    from dbspark.errors import UnknownNameError

    raise UnknownNameError(f"unknown engine {engine!r}; the engines are 'local' and 'spark'")
