"""A Spark Declarative Pipelines spec (`spark-pipeline.yml`), read as `spark-pipelines` reads it.

    name: orders                  # required
    storage: file:///data/state   # required: where the pipeline keeps its state
    catalog: spark_catalog        # optional defaults for the names of the datasets
    database: default             # (or `schema:`)
    configuration: {key: value}   # strings
    libraries:
      - glob:
          include: transformations/**

The keys, their checks and the library globs follow `pyspark.pipelines.cli` (Spark 4.3): a glob is a
file path or a folder path ending in `/**` (every file under it), matched relative to the spec's
folder, `__pycache__` left out; a library file is `.py` or `.sql`. Errors are `SchemaError`s naming
the spec file and the key.
"""

from __future__ import annotations

import glob
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from dbspark.errors import SchemaError, UnsupportedError

SPEC_NAMES = ("spark-pipeline.yml", "spark-pipeline.yaml")
FIELDS = {"name", "storage", "catalog", "database", "schema", "configuration", "libraries"}


@dataclass(frozen=True)
class Spec:
    path: Path
    name: str
    storage: Path  # a local folder (a `file://` URI or a path, relative to the spec's folder)
    catalog: str | None
    database: str | None
    configuration: Mapping[str, str]
    libraries: tuple[str, ...]

    @property
    def root(self) -> Path:
        return self.path.parent

    def files(self) -> list[Path]:
        """The library files, in the order of the globs and then of their paths."""
        out: list[Path] = []
        for pattern in self.libraries:
            found = sorted(p for p in self.root.glob(pattern) if p.is_file() and "__pycache__" not in p.parts)
            for p in found:
                if p.suffix not in (".py", ".sql"):
                    raise SchemaError(
                        f"{self.path}: library file {p} is neither a .py nor a .sql file (the glob {pattern!r})"
                    )
                if p not in out:
                    out.append(p)
        return out


def is_spec(path: Path) -> bool:
    return path.name in SPEC_NAMES or path.suffix in (".yml", ".yaml")


def load_spec(path: Path) -> Spec:
    """The spec at `path`, checked as `spark-pipelines` checks it."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        raise SchemaError(f"{path}: not a YAML file: {e}") from None
    if not isinstance(data, dict):
        raise SchemaError(f"{path}: a pipeline spec is a YAML mapping (name, storage, libraries, ...)")
    unknown = sorted(set(data) - FIELDS)
    if unknown:
        raise SchemaError(f"{path}: unexpected field {unknown[0]!r} (the fields are {sorted(FIELDS)})")
    for key in ("name", "storage"):
        if key not in data:
            raise SchemaError(f"{path}: the required field {key!r} is missing")
    conf = data.get("configuration") or {}
    if not isinstance(conf, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in conf.items()
    ):
        raise SchemaError(f"{path}: configuration is a mapping of strings to strings")
    libs: list[str] = []
    for entry in data.get("libraries") or []:
        try:
            include = entry["glob"]["include"]
        except (TypeError, KeyError):
            raise SchemaError(f"{path}: a library is `- glob: {{include: PATTERN}}`, not {entry!r}") from None
        libs.append(_checked_glob(path, str(include)))
    return Spec(
        path=path.resolve(),
        name=str(data["name"]),
        storage=_storage(path, str(data["storage"])),
        catalog=data.get("catalog"),
        database=data.get("database", data.get("schema")),
        configuration=dict(conf),
        libraries=tuple(libs),
    )


def _checked_glob(path: Path, pattern: str) -> str:
    """A file path, or a folder path ending in `/**` (then every file under it), as SDP allows."""
    if not glob.has_magic(pattern):
        return pattern
    if pattern.endswith("/**") and not glob.has_magic(pattern[:-3]):
        return pattern + "/*"
    raise SchemaError(
        f"{path}: the library glob {pattern!r} is not allowed: give a file path or a folder path ending "
        "in /** (as spark-pipelines)"
    )


def _storage(path: Path, storage: str) -> Path:
    u = urlparse(storage)
    if u.scheme in ("", "file"):
        p = Path(unquote(u.path) if u.scheme else storage)
        return p if p.is_absolute() else (path.parent / p).resolve()
    raise UnsupportedError(
        f"{path}: storage {storage!r}: dbspark keeps its state and tables on a local (or mounted) file "
        "system: a path or a file:// URI"
    )


def find(directory: Path) -> Path:
    """The spec in `directory` (as `spark-pipelines run` without --spec looks in the current folder)."""
    found = [directory / n for n in SPEC_NAMES if (directory / n).is_file()]
    if len(found) != 1:
        raise SchemaError(
            f"{directory}: {'no' if not found else 'more than one'} pipeline spec ({' or '.join(SPEC_NAMES)})"
        )
    return found[0]
