"""Shared helpers for the matrix tests: fixture paths, a project with matrix.yaml and the
repository's templates, and the `# <- RULE` markers the invariant fixtures carry."""

from __future__ import annotations

import re
import shutil
from collections import Counter
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "matrix"
GOOD = FIXTURES / "good" / "matrix.yaml"
GOLDEN = FIXTURES / "good" / "golden"
INVARIANTS = FIXTURES / "invariants"
LOCALAI = FIXTURES / "localai"
MARKER = re.compile(r"#\s*<-\s*((?:MX\d{3}\s*)+)$")


def make_project(tmp_path: Path, matrix_text: str | None = None) -> Path:
    """A directory with matrix.yaml (the good fixture unless given) and the repo's templates."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "matrix.yaml").write_text(GOOD.read_text() if matrix_text is None else matrix_text)
    shutil.copytree(REPO / "templates", project / "templates")
    return project


def expected_markers(case: Path) -> Counter:
    """(file, line, rule) for every `# <- RULE ...` marker in the case's files."""
    expected: Counter = Counter()
    for path in sorted(p for p in case.rglob("*") if p.is_file()):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            match = MARKER.search(line)
            if match:
                for rule in match.group(1).split():
                    expected[(path.name, number, rule)] += 1
    return expected


def check_args(case: Path) -> list[str]:
    if (case / "matrix.yaml").exists():
        args = ["--matrix", str(case / "matrix.yaml")]
    else:
        args = ["--matrix", str(case / "backend-matrix.yml")]
    if (case / "index.yaml").exists():
        args += ["--index", str(case / "index.yaml")]
    return args


def write_build_inputs(root: Path, matrix_file: Path) -> None:
    """The files MATRIX_FILE's rows build from (MX701), created under ROOT: each Linux row's
    dockerfile and context, and a Makefile with the macOS job's `backends/%-darwin` rule."""
    try:
        data = yaml.safe_load(matrix_file.read_text())
    except yaml.YAMLError:  # a test of a broken matrix.yaml: there is nothing to build
        return
    if not isinstance(data, dict):
        return
    for row in data.get("include") or []:
        if not isinstance(row, dict):
            continue
        if row.get("dockerfile"):
            dockerfile = root / row["dockerfile"]
            dockerfile.parent.mkdir(parents=True, exist_ok=True)
            dockerfile.write_text(f"# a fixture: what rows with dockerfile {row['dockerfile']} build from\n")
        if row.get("context"):
            (root / row["context"]).mkdir(parents=True, exist_ok=True)
    if data.get("includeDarwin"):
        (root / "Makefile").write_text("# a fixture: the macOS job's target\nbackends/%-darwin:\n\ttrue\n")
