"""Where a build matrix comes from: patchctl's matrix.yaml, or LocalAI-format files
(`.github/backend-matrix.yml` with top-level `include:`/`includeDarwin:`, and
`backend/index.yaml`, a list of meta backends and concrete variants)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ConfigError
from ..project import config as config_mod
from ..project import yamlloc

if TYPE_CHECKING:
    from .model import BuildMatrix


def display_path(path: Path, base: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(base.resolve()))
    except ValueError:
        return str(path)


def from_config(config: config_mod.Config) -> BuildMatrix:
    """The build-matrix sections of a loaded matrix.yaml (validated; raises ConfigError)."""
    from .schema import from_sections

    display = display_path(config.path, config.root)
    matrix = from_sections(config.doc, display, config.raw, set(config.upstreams))
    matrix.root = config.root
    return matrix


def load_project(path: Path) -> config_mod.Config:
    """matrix.yaml, whole: its upstream and series sections (`config.load`) and the build-matrix
    sections that share the file. Every command loads it here, so a bad row fails whatever runs."""
    config = config_mod.load(path)
    # The build matrix's schema (and its model) only where the file has a build-matrix section:
    # a project of upstreams and series alone starts faster, and a section, even empty, is read.
    if any(section in config.raw for section in config_mod.MATRIX_SECTIONS):
        from_config(config)
    return config


def load_localai_matrix(path: Path, base: Path) -> BuildMatrix:
    from .model import DARWIN, LINUX, BuildMatrix
    from .schema import Section

    doc = yamlloc.load(path, merge_keys=True)
    display = display_path(path, base)
    reader = Section(doc, display)
    reader.mapping(doc.data, (), tuple(doc.data) if isinstance(doc.data, dict) else ())
    if LINUX not in doc.data and DARWIN not in doc.data:
        raise ConfigError(f"{display}:1: neither 'include:' nor 'includeDarwin:' found: not a backend matrix")
    # LocalAI keeps it in .github/: the paths its rows name are relative to the repository root
    root = path.resolve().parent
    matrix = BuildMatrix(matrix_file=display, root=root.parent if root.name == ".github" else root)
    matrix.rows = reader.rows(doc.data.get(LINUX), (LINUX,), LINUX) + reader.rows(
        doc.data.get(DARWIN), (DARWIN,), DARWIN
    )
    return matrix


def attach_localai_index(matrix: BuildMatrix, path: Path, base: Path) -> BuildMatrix:
    from .schema import Section

    doc = yamlloc.load(path, merge_keys=True)
    display = display_path(path, base)
    matrix.metas, matrix.variants = Section(doc, display).localai_index(doc.data)
    matrix.index_file = display
    return matrix


def is_patchctl_config(path: Path) -> bool:
    """matrix.yaml declares `version:`; LocalAI's backend-matrix.yml never does."""
    doc = yamlloc.load(path, merge_keys=True)
    return isinstance(doc.data, dict) and "version" in doc.data
