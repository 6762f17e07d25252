"""Validation of the upstream values that reach git: URLs and branch names; the `pypi-sdist:` URL form.

Both come from matrix.yaml or the command line and end up as git arguments, so they are
checked when the configuration is loaded (a configuration error, exit 2), not when git
trips over them later (which would read as an environment failure, exit 3).
"""

from __future__ import annotations

import re
import urllib.parse
from pathlib import Path

from ..errors import UsageError
from ..patterns import lazy
from ..records import dataclass

# Transports git handles itself. `ext::`/`fd::` and other `HELPER::` remote helpers run
# programs, so any other scheme is refused.
ALLOWED_SCHEMES = ("https", "http", "ssh", "git", "file")
ALLOWED_URL_FORMS = "https://, http://, ssh://, git://, file://, user@host:path, a local path or pypi-sdist:"
_SCHEME_RE = lazy(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://")
_HELPER_RE = lazy(r"^[A-Za-z][A-Za-z0-9+.-]*::")
_SCP_RE = lazy(r"^[\w.-]+@[\w.-]+:")
_REF_FORBIDDEN_RE = lazy(r"[\x00-\x20\x7f~^:?*\[\\]")


def url_problem(url: str) -> str | None:
    """Why URL cannot name an upstream, or None when it can."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in url):
        return "control characters in the URL"
    if url.startswith("-"):
        return f"a URL cannot start with '-' (allowed: {ALLOWED_URL_FORMS})"
    if _HELPER_RE.match(url):
        return f"git remote helpers ({url.split('::')[0]}::) are not allowed (allowed: {ALLOWED_URL_FORMS})"
    if m := _SCHEME_RE.match(url):
        if m["scheme"].lower() not in ALLOWED_SCHEMES:
            return f"URL scheme {m['scheme']!r} is not allowed (allowed: {ALLOWED_URL_FORMS})"
        if url[m.end() :].startswith("-"):
            return "a URL's host cannot start with '-'"  # ssh would read it as an option
        return None
    if is_sdist_url(url):
        try:
            parse_url(url)
        except UsageError as exc:
            return str(exc)
        return None
    if _SCP_RE.match(url):
        return None
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", url) and not re.match(r"^[A-Za-z]:[\\/]", url):
        return f"unknown URL form {url.split(':')[0]!r} (allowed: {ALLOWED_URL_FORMS})"
    return None  # a local path


def ref_name_problem(name: str) -> str | None:
    """Why NAME is not a valid branch name under `git check-ref-format --branch`, or None."""
    if not name:
        return "empty branch name"
    if name.startswith("-"):
        return "a branch name cannot start with '-'"
    if _REF_FORBIDDEN_RE.search(name):
        return "a branch name cannot contain spaces, control characters or any of ~ ^ : ? * [ \\"
    if ".." in name or "@{" in name or "//" in name or name == "@":
        return "a branch name cannot contain '..', '@{' or '//', nor be '@'"
    if name.startswith("/") or name.endswith(("/", ".")):
        return "a branch name cannot start with '/' nor end with '/' or '.'"
    if any(part.startswith(".") or part.endswith(".lock") for part in name.split("/")):
        return "a branch name component cannot start with '.' nor end with '.lock'"
    return None


def env_name_problem(name: str) -> str | None:
    """Why NAME cannot be an environment variable name, or None."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        return f"invalid environment variable name {name!r}: use letters, digits and '_', not starting with a digit"
    return None


SCHEME = "pypi-sdist:"


@dataclass(frozen=True)
class SdistSpec:
    package: str
    versions: tuple[str, ...]
    subdir: str

    @property
    def url(self) -> str:
        query = urllib.parse.urlencode({"versions": ",".join(self.versions), "subdir": self.subdir}, safe=",/")
        return f"{SCHEME}{self.package}?{query}"


SDIST_BRANCH = "main"  # the branch a pypi-sdist: upstream's commits are on (`sdist.materialize`)


def is_sdist_url(url: str) -> bool:
    return url.startswith(SCHEME)


def parse_url(url: str) -> SdistSpec:
    if not is_sdist_url(url):
        raise UsageError(f"not a {SCHEME} URL: {url!r}")
    package, _, query = url[len(SCHEME) :].partition("?")
    params = urllib.parse.parse_qs(query)
    versions = tuple(v for v in ",".join(params.get("versions", [])).split(",") if v)
    subdir = params.get("subdir", ["vendor/llama.cpp"])[0].strip("/")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", package or ""):
        raise UsageError(f"bad package name in {url!r}")
    if not versions:
        raise UsageError(f"{url!r} lists no versions (add ?versions=A,B)")
    for version in versions:
        if not re.fullmatch(r"[0-9A-Za-z.+!-]+", version):
            raise UsageError(f"bad version {version!r} in {url!r}")
    if ".." in Path(subdir).parts or subdir.startswith("/"):
        raise UsageError(f"bad subdir {subdir!r} in {url!r}")
    return SdistSpec(package, versions, subdir)
