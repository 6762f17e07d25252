"""The environment gates and build steps run with: an allowlist, never patchctl's whole
environment.

Gates and build steps are commands from matrix.yaml; in CI, patchctl itself may hold
secrets (GITHUB_TOKEN, cloud credentials, registry passwords) in its environment. A
command sees only:

* what a shell and a toolchain need: PATH, HOME, LANG, LC_*, TZ, TMPDIR, TERM, and
  PYTHONPATH (so that $PATCHCTL_PYTHON imports what patchctl's own interpreter imports);
* the build variables compilers and build systems read: CC, CXX, CPP, CFLAGS, CXXFLAGS,
  CPPFLAGS, LDFLAGS, MAKEFLAGS, CMAKE_*, CCACHE_*;
* the PATCHCTL_* variables patchctl sets for it (gates: PATCHCTL_TREE, PATCHCTL_ROOT,
  PATCHCTL_SERIES, PATCHCTL_OUT, PATCHCTL_PYTHON, PATCHCTL_UPSTREAM_REV), never PATCHCTL_*
  inherited from outside (a gate that needs one, such as PATCHCTL_CACHE, lists it in pass_env);
* the names its `pass_env:` lists in matrix.yaml, when they are set;
* for build steps, the values of its `env:`.

A Docker build runs in its image's own environment: from this set the container gets
only what does not name a host path or the host's toolchain (LANG, LC_*, TZ, TERM), then
`pass_env:` and `env:`, with HOME=/tmp.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from ..patterns import lazy

ALLOWED_NAMES = ("PATH", "HOME", "LANG", "TZ", "TMPDIR", "TERM", "PYTHONPATH")
BUILD_NAMES = ("CC", "CXX", "CPP", "CFLAGS", "CXXFLAGS", "CPPFLAGS", "LDFLAGS", "MAKEFLAGS")
ALLOWED_PREFIXES = ("LC_", "CMAKE_", "CCACHE_")
# Meaningful inside any container: no host path, no host compiler.
CONTAINER_NAMES = ("LANG", "TZ", "TERM")
CONTAINER_PREFIXES = ("LC_",)
CONTAINER_HOME = "/tmp"

_NAME_RE = lazy(r"[A-Za-z_][A-Za-z0-9_]*")


def pass_env_problem(name: object) -> str | None:
    """Why NAME cannot be a `pass_env:` entry, or None."""
    if not isinstance(name, str) or not name:
        return "pass_env entries must be non-empty variable names"
    if "=" in name or "\0" in name:
        return f"invalid variable name {name!r} in pass_env: no '=' or NUL"
    if not _NAME_RE.fullmatch(name):
        return f"invalid variable name {name!r} in pass_env: use letters, digits and '_', not starting with a digit"
    return None


def _allowed(name: str, names: Iterable[str], prefixes: tuple[str, ...]) -> bool:
    return name in names or name.startswith(prefixes)


def scrubbed(
    source: Mapping[str, str] | None = None,
    *,
    pass_env: Iterable[str] = (),
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment of a gate or a local build step: the allowlisted part of SOURCE
    (default: os.environ), the PASS_ENV names SOURCE has, then EXTRA (which wins)."""
    source = os.environ if source is None else source
    passed = set(pass_env)
    env = {
        name: value
        for name, value in source.items()
        if _allowed(name, (*ALLOWED_NAMES, *BUILD_NAMES), ALLOWED_PREFIXES) or name in passed
    }
    return {**env, **(extra or {})}


def container(
    source: Mapping[str, str] | None = None,
    *,
    pass_env: Iterable[str] = (),
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment a Docker build step gets inside its container."""
    source = os.environ if source is None else source
    passed = set(pass_env)
    env = {
        name: value
        for name, value in source.items()
        if _allowed(name, CONTAINER_NAMES, CONTAINER_PREFIXES) or name in passed
    }
    return {"HOME": CONTAINER_HOME, **env, **(extra or {})}
