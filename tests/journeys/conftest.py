"""Fixtures of the journey tests: the patchctl tests' own (a cache per test, a real upstream
repository), and a user at a shell in the downstream repository."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.patchctl.conftest import _isolated_cache, upstream  # noqa: F401 - fixtures, used by name

from .shell import User


@pytest.fixture
def user_in(tmp_path: Path):
    """`user_in(project_root)`: a user with a home of their own, standing in the project root."""

    def make(root: Path) -> User:
        return User(root, tmp_path / "home")

    return make
