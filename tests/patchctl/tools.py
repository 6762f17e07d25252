"""Console scripts the test extra installs (actionlint, zizmor, pre-commit), found beside the
running interpreter first: `.venv/bin/python -m pytest` works without activating the venv."""

from __future__ import annotations

import shutil
import sysconfig
from pathlib import Path

import pytest


def installed_tool(name: str) -> str:
    beside = Path(sysconfig.get_path("scripts")) / name
    path = str(beside) if beside.is_file() else shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed: pip install -e '.[test]'")
    return path
