"""The CI build matrix: schema, checks, rendering of workflows and the backend index,
and the rows a change touches. `sources.load_project` loads matrix.yaml whole: the
`include`, `includeDarwin`, `index`, `canary` and `backends` sections through `matrix.schema`."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .model import BackendPaths, BuildMatrix, Canary, CanaryToolchain, Meta, Row, Variant
    from .sources import from_config

__all__ = [
    "BackendPaths",
    "BuildMatrix",
    "Canary",
    "CanaryToolchain",
    "Meta",
    "Row",
    "Variant",
    "from_config",
]


def __getattr__(name: str) -> Any:
    """The names above, imported when first used: loading matrix.yaml (`sources.load_project`)
    imports this package, and a project without a build-matrix section never needs the model."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(".sources" if name == "from_config" else ".model", __name__), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
