"""The CI build matrix: schema, checks, rendering of workflows and the backend index,
and the rows a change touches. `sources.load_project` loads matrix.yaml whole: the
`include`, `includeDarwin`, `index`, `canary` and `backends` sections through `matrix.schema`."""

from __future__ import annotations

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
