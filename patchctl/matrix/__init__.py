"""The CI build matrix: schema, checks, rendering of workflows and the backend index,
and the rows a change touches. Importing this package makes `config.load` validate the
`include`, `includeDarwin`, `index`, `canary` and `backends` sections of matrix.yaml."""

from __future__ import annotations

from .. import config as _config
from .model import BackendPaths, BuildMatrix, Canary, CanaryToolchain, Meta, Row, Variant
from .sources import from_config, validate_config

if validate_config not in _config.SECTION_VALIDATORS:
    _config.SECTION_VALIDATORS.append(validate_config)

__all__ = [
    "BackendPaths",
    "BuildMatrix",
    "Canary",
    "CanaryToolchain",
    "Meta",
    "Row",
    "Variant",
    "from_config",
    "validate_config",
]
