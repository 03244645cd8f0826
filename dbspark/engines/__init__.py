"""Engines: each implements the small kernel of `engines.base`; nothing above knows which one runs."""

from __future__ import annotations

from dbspark.engines.base import Kernel


def get_kernel(engine: str | Kernel = "local", **options: object) -> Kernel:
    """The kernel for an engine name ('local'; 'spark' arrives with the Spark engine issue)."""
    if not isinstance(engine, str):
        return engine
    if engine == "local":
        from dbspark.engines.local.kernel import LocalKernel

        return LocalKernel(**options)
    if engine == "spark":
        from dbspark.errors import UnsupportedError

        raise UnsupportedError("engine 'spark' is not available in this version; use engine='local'")
    from dbspark.errors import UnknownNameError

    raise UnknownNameError(f"unknown engine {engine!r}; the engines are 'local' and 'spark'")
