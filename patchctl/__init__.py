"""patchctl: keep a vendored patch series alive on top of a fast-moving upstream.

Importing this package imports nothing else: `patchctl --help` and the read-only commands
load only the modules they use (see patchctl.lazy)."""

from __future__ import annotations

from pathlib import Path

# The one source of the version: pyproject.toml reads it from here (tool.setuptools.dynamic).
__version__ = "0.1.0"


def templates_dir() -> Path:
    """The directory of patchctl's default templates (`*.j2`): what `matrix render` uses when a
    project has no `templates/` beside its matrix.yaml, and what a new project starts from.

    Installed from the wheel, it is `patchctl/templates/` inside the package (package data built
    from the repository's `templates/`); in a checkout (an editable install), the repository's
    `templates/` itself. The directory exists in both cases, or this raises FileNotFoundError."""
    package = Path(__file__).resolve().parent
    installed = package / "templates"
    if installed.is_dir():
        return installed
    checkout = package.parent
    if (checkout / "pyproject.toml").is_file() and (checkout / "templates").is_dir():
        return checkout / "templates"
    raise FileNotFoundError(f"patchctl's default templates are missing: no {installed}, no checkout's templates/")
