"""The CI build matrix: schema, checks, rendering of workflows and the backend index,
and the rows a change touches. `config.load` validates the `include`, `includeDarwin`,
`index`, `canary` and `backends` sections of matrix.yaml through `matrix.schema`."""

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
