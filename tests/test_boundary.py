"""The engine boundary (DESIGN.md, Engines): nothing above `engines/` reaches an engine except through the
`Kernel` protocol, and one engine never imports another.

mypy (run by CI) checks that only declared kernel methods are called, because every `kernel` above the
engines is typed `Kernel`; these tests check that the typing is there, that the imports respect the
layers, and that both engines implement every method of the protocol with its parameters."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

from dbspark.engines import base

PKG = Path(__file__).resolve().parent.parent / "dbspark"
ENGINES = ("local", "spark")


def _modules(under: Path) -> list[Path]:
    return sorted(p for p in under.rglob("*.py") if "__pycache__" not in p.parts)


def _imports(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.level:  # relative: resolve against the module's package
                pkg = path.relative_to(PKG.parent).with_suffix("").parts[: -node.level]
                out.append(".".join([*pkg, node.module]))
            else:
                out.append(node.module)
    return out


@pytest.mark.parametrize("engine", ENGINES)
def test_an_engine_imports_no_other_engine(engine: str) -> None:
    others = [e for e in ENGINES if e != engine]
    bad = [
        f"{p.relative_to(PKG.parent)} imports {m}"
        for p in _modules(PKG / "engines" / engine)
        for m in _imports(p)
        if any(m == f"dbspark.engines.{o}" or m.startswith(f"dbspark.engines.{o}.") for o in others)
    ]
    assert not bad, "\n".join(bad)


def test_nothing_above_the_engines_imports_an_engine() -> None:
    """Only `engines/__init__.py` (which builds a kernel by name) names an engine's modules."""
    bad = []
    for p in _modules(PKG):
        rel = p.relative_to(PKG)
        if rel.parts[0] == "engines" or rel.parts[0] == "testing":
            continue
        for m in _imports(p):
            if re.match(r"dbspark\.engines\.(local|spark)\b", m):
                bad.append(f"{p.relative_to(PKG.parent)} imports {m}")
    assert not bad, "\n".join(bad)


def test_every_kernel_parameter_is_typed_kernel() -> None:
    """A `kernel` typed `Any` would let a call outside the protocol through mypy unseen: above the engines
    it is a `Kernel`; inside an engine, that engine's kernel class (never `Any`)."""
    bad = []
    for p in _modules(PKG):
        inside = p.relative_to(PKG).parts[0] == "engines"
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.arg) and node.arg == "kernel" and node.annotation is not None:
                ann = ast.unparse(node.annotation)
                if (inside and ann == "Any") or (not inside and ann != "Kernel"):
                    bad.append(f"{p.relative_to(PKG.parent)}:{node.lineno}: {node.arg}: {ann}")
    assert not bad, "\n".join(bad)


def _members(proto: type) -> dict[str, inspect.Signature]:
    out = {}
    for cls in proto.__mro__:
        if cls in (object,) or not getattr(cls, "_is_protocol", False):
            continue
        for name, fn in vars(cls).items():
            if callable(fn) and not name.startswith("_"):
                out.setdefault(name, inspect.signature(fn))
    return out


def _kernel_class(engine: str) -> type:
    if engine == "local":
        from dbspark.engines.local.kernel import LocalKernel

        return LocalKernel
    from dbspark.engines.spark.kernel import SparkKernel

    return SparkKernel


@pytest.mark.parametrize("engine", ENGINES)
def test_each_engine_implements_the_protocol(engine: str) -> None:
    cls = _kernel_class(engine)
    members = _members(base.Kernel)
    assert len(members) > 30
    missing = [n for n in members if not callable(getattr(cls, n, None))]
    assert not missing, f"{cls.__name__} lacks {missing}"
    mismatched = []
    for name, sig in members.items():
        want = [p.name for p in sig.parameters.values()]
        have = [p.name for p in inspect.signature(getattr(cls, name)).parameters.values()]
        if want != have:
            mismatched.append(f"{name}: protocol {want}, {cls.__name__} {have}")
    assert not mismatched, "\n".join(mismatched)
