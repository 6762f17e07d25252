"""An OpenWrt package Makefile (openwrt/packages: `PKG_NAME`, `PKG_VERSION`, `PKG_SOURCE_URL`...).

Where it fetches its sources from, as OpenWrt's include/download.mk does:

    PKG_SOURCE_PROTO:=git     a git clone of PKG_SOURCE_URL at PKG_SOURCE_VERSION (a commit, or a
                              tag such as v$(PKG_VERSION)), packed into PKG_SOURCE (default
                              $(PKG_SOURCE_SUBDIR).tar.zst, SUBDIR $(PKG_NAME)-$(PKG_VERSION)),
                              checked against PKG_MIRROR_HASH
    otherwise                 $(PKG_SOURCE_URL)/$(PKG_SOURCE_URL_FILE or PKG_SOURCE), checked
                              against PKG_HASH: a GitHub tarball (codeload.github.com/O/R/tar.gz/
                              REF?, github.com/O/R/archive/REF), a release asset, any other server

A pin moves PKG_VERSION, PKG_SOURCE_VERSION (when it holds the commit or the tag itself),
PKG_SOURCE_DATE (for a package pinned by commit), resets PKG_RELEASE to 1 when the version moves
(as OpenWrt's maintainers do), and each checksum is either remade or left to
`make package/NAME/check FIXUP=1`. Only literal values are edited: a value that another
variable computes is reported, never rewritten.
"""

from __future__ import annotations

import posixpath
import re

from ...records import dataclass
from ..makevars import ASSIGNMENT_RE, ExpansionBound, Makefile, expand, parse_makefile
from .base import (
    HEX40_RE,
    Archive,
    Checksum,
    Literal,
    ManifestError,
    PinState,
    Source,
    github_archive_ref,
    github_prefix,
    github_repo,
    replace_literals,
)

_SENTINEL = "\x00version\x00"
_COMPRESSIONS = {".tar.gz": "gz", ".tgz": "gz", ".tar.xz": "xz", ".tar.zst": "zst", ".tar.bz2": "bz2"}


def is_package_makefile(text: str) -> bool:
    """Whether TEXT is an OpenWrt package Makefile (it includes package.mk and names PKG_NAME)."""
    return bool(re.search(r"^\s*include\s+\$\(INCLUDE_DIR\)/package\.mk", text, re.M)) and bool(
        re.search(r"^PKG_NAME\s*:?=", text, re.M)
    )


@dataclass
class Package:
    path: str  # the Makefile, relative to matrix.yaml (for messages)
    text: str
    make: Makefile

    def line(self, name: str) -> int:
        return self.make.lines[name][0] if name in self.make.lines else 1

    def where(self, name: str) -> str:
        return f"{self.path}:{self.line(name)}"

    def value(self, name: str, **overrides: str) -> str:
        """NAME's value as make expands it ('' when unset), with OVERRIDES in place of those variables."""
        variables = {**self.make.variables, **overrides}
        try:
            return expand(variables.get(name, ""), variables).strip()
        except (ValueError, ExpansionBound) as exc:
            raise ManifestError(f"{self.where(name)}: {name}: {exc}") from None

    def raw(self, name: str) -> str | None:
        return self.make.variables.get(name)

    def literal(self, name: str) -> Literal | None:
        """NAME's value when its assignment in effect writes it literally (no `$`, no `+=`), with its offsets."""
        if name not in self.make.lines or name in self.make.conditional:
            return None
        number, raw_line = self.make.lines[name]
        match = ASSIGNMENT_RE.match(raw_line.split("#", 1)[0].rstrip())
        if match is None or match.group(2) == "+=" or "$" in match.group(3) or not match.group(3):
            return None
        offset = _line_offset(self.text, number)
        start = offset + match.start(3)
        return Literal(name, match.group(3), number, start, start + len(match.group(3)))

    @property
    def directory_name(self) -> str:
        """The package's directory name, as `make package/NAME/...` names it."""
        return posixpath.basename(posixpath.dirname(self.path)) or self.value("PKG_NAME")

    @property
    def is_git(self) -> bool:
        return self.value("PKG_SOURCE_PROTO") == "git"


def read(path: str, text: str) -> Package:
    return Package(path, text, parse_makefile(text))


def source(package: Package) -> Source:
    """The git repository and revision the package fetches, as PKG_SOURCE_* say."""
    version = package.value("PKG_VERSION")
    url_text = package.value("PKG_SOURCE_URL")
    where = package.where("PKG_SOURCE_URL")
    if package.is_git:
        revision = package.value("PKG_SOURCE_VERSION")
        pattern = _version_pattern(package, "PKG_SOURCE_VERSION", version)
        url = url_text.split()[0] if url_text.split() else ""
        if not url or not revision:
            missing = "PKG_SOURCE_URL" if not url else "PKG_SOURCE_VERSION"
            return Source("", "", None, version, package.where(missing), "git", f"no {missing}")
        return Source(url, revision, pattern, version, package.where("PKG_SOURCE_VERSION"), "git")
    for url in url_text.split() or [""]:
        download = _download_url(package, url)
        repo = github_repo(download.replace("@GITHUB/", "https://github.com/", 1))
        if repo is None:
            continue
        git_url = f"https://github.com/{repo[0]}/{repo[1]}"
        ref = github_archive_ref(download)
        if ref is not None:
            pattern = _url_version_pattern(package, url, version)
            return Source(git_url, ref, pattern, version, where, "github-archive")
        release = re.search(r"/releases/download/([^/?#\s]+)", download) or re.match(
            r"^@GITHUB/[^/]+/[^/]+/([^/?#\s]+)", url
        )
        if release is not None:
            pattern = _url_version_pattern(package, url, version)
            return Source(git_url, release.group(1), pattern, version, where, "github-release")
    return Source(
        "",
        "",
        None,
        version,
        where,
        "unknown",
        f"PKG_SOURCE_URL {url_text!r} is neither a git repository (PKG_SOURCE_PROTO:=git) nor a GitHub tarball",
    )


def _download_url(package: Package, url: str) -> str:
    """The URL download.pl fetches: PKG_SOURCE_URL, then '/' and the file name."""
    if url.endswith("?"):
        return url
    name = package.value("PKG_SOURCE_URL_FILE") or package.value("PKG_SOURCE")
    return f"{url.rstrip('/')}/{name}" if name else url


def _version_pattern(package: Package, name: str, version: str) -> str | None:
    """NAME's value with PKG_VERSION written as '{version}', when it follows PKG_VERSION."""
    if not version:
        return None
    marked = package.value(name, PKG_VERSION=_SENTINEL)
    return marked.replace(_SENTINEL, "{version}") if marked.count(_SENTINEL) == 1 else None


def _url_version_pattern(package: Package, url: str, version: str) -> str | None:
    if not version:
        return None
    index = package.value("PKG_SOURCE_URL").split().index(url)
    marked_url = package.value("PKG_SOURCE_URL", PKG_VERSION=_SENTINEL).split()[index]
    variables = {**package.make.variables, "PKG_VERSION": _SENTINEL}
    name = (package.make.variables.get("PKG_SOURCE_URL_FILE") or package.make.variables.get("PKG_SOURCE")) or ""
    marked_name = expand(name, variables).strip() if name else ""
    marked = marked_url if marked_url.endswith("?") else f"{marked_url.rstrip('/')}/{marked_name}"
    ref = github_archive_ref(marked) or (
        m.group(1) if (m := re.search(r"/releases/download/([^/?#\s]+)", marked)) else None
    )
    if ref is None:
        at_github = re.match(r"^@GITHUB/[^/]+/[^/]+/([^/?#\s]+)", marked_url)
        ref = at_github.group(1) if at_github else None
    if ref is None or ref.count(_SENTINEL) != 1:
        return None
    return ref.replace(_SENTINEL, "{version}")


# ------------------------------------------------------------------ lint


def disagreements(package: Package, state: PinState) -> list[tuple[int, str]]:
    """(line, message) for each value the Makefile states that is not the pin's."""
    found = []
    if state.version is not None:
        stated = package.value("PKG_VERSION")
        if stated != state.version:
            found.append((package.line("PKG_VERSION"), f"PKG_VERSION is {stated!r}, not the pinned version"))
    revision = package.value("PKG_SOURCE_VERSION") if package.is_git else ""
    if HEX40_RE.match(revision) and revision != state.commit:
        found.append((package.line("PKG_SOURCE_VERSION"), f"PKG_SOURCE_VERSION is {revision}, not the pin"))
    elif revision and state.tag is not None and not HEX40_RE.match(revision) and revision != state.tag:
        found.append((package.line("PKG_SOURCE_VERSION"), f"PKG_SOURCE_VERSION is {revision!r}, not the pinned tag"))
    return found


# ------------------------------------------------------------------ pin-sync


def moved(package: Package, old: PinState, new: PinState) -> str:
    """The Makefile's text with the pin moved from OLD to NEW."""
    edits: dict[Literal, str] = {}
    version_moves = new.version is not None and new.version != old.version
    if new.version is not None:
        version = package.literal("PKG_VERSION")
        if version is None:
            raise ManifestError(
                f"{package.where('PKG_VERSION')}: PKG_VERSION is not written as a plain value "
                f"({package.raw('PKG_VERSION')!r}): patchctl cannot move it to {new.version}"
            )
        if version.value != old.version:
            raise ManifestError(
                f"{package.where('PKG_VERSION')}: PKG_VERSION is {version.value!r}, not {old.version!r} as matrix.yaml "
                "pins it: make them agree before pin-sync moves them"
            )
        edits[version] = new.version
    source_version = package.literal("PKG_SOURCE_VERSION")
    if package.is_git and source_version is not None:
        if source_version.value == old.commit:
            edits[source_version] = new.commit
        elif old.tag is not None and source_version.value == old.tag and new.tag is not None:
            edits[source_version] = new.tag
        elif not HEX40_RE.match(source_version.value) and new.tag is None:
            raise ManifestError(
                f"{package.where('PKG_SOURCE_VERSION')}: PKG_SOURCE_VERSION is {source_version.value!r}, neither the "
                "pinned commit nor its tag"
            )
    elif package.is_git and new.version is None:
        raise ManifestError(
            f"{package.where('PKG_SOURCE_VERSION')}: PKG_SOURCE_VERSION ({package.raw('PKG_SOURCE_VERSION')!r}) "
            "is not the commit itself and matrix.yaml names no version: patchctl cannot move it"
        )
    commit_moves = source_version is not None and source_version in edits and HEX40_RE.match(source_version.value)
    date = package.literal("PKG_SOURCE_DATE")
    if commit_moves and date is not None and new.date:
        edits[date] = new.date
    release = package.literal("PKG_RELEASE")
    derived_version = package.raw("PKG_VERSION") is None and commit_moves
    if release is not None and release.value.isdigit() and (version_moves or derived_version):
        edits[release] = "1"
    return replace_literals(package.text, edits)


def checksums(package: Package) -> list[Checksum]:
    """The Makefile's checksums of its sources, each with the archive it is the digest of."""
    found = []
    refresh = (
        f"make package/{package.directory_name}/download V=s {{skip}} && "
        f"make package/{package.directory_name}/check FIXUP=1 V=s"
    )
    for name in ("PKG_HASH", "PKG_MIRROR_HASH"):
        literal = package.literal(name)
        if literal is None or not re.fullmatch(r"[0-9a-f]{64}", literal.value):
            continue  # unset, `skip`, or computed: nothing stale to say
        command = refresh.replace("{skip}", f"{name}=skip")
        archive, why = _archive(package, name)
        found.append(Checksum(literal, archive, command, why))
    return found


def _archive(package: Package, name: str) -> tuple[Archive | None, str]:
    try:
        if name == "PKG_MIRROR_HASH":
            if not package.is_git:
                return None, "PKG_MIRROR_HASH of a package not fetched with git"
            if package.value("PKG_SOURCE_SUBMODULES") not in ("", "skip"):
                return None, "the tarball holds git submodules"
            subdir = package.value("PKG_SOURCE_SUBDIR") or _default_subdir(package)
            file = package.value("PKG_SOURCE") or f"{subdir}.tar.zst"
            compression = next((c for suffix, c in _COMPRESSIONS.items() if file.endswith(suffix)), None)
            if not subdir or compression is None:
                return None, f"cannot tell the tarball's name and top directory ({file!r})"
            return Archive("openwrt-git", subdir, compression, package.value("PKG_SOURCE_URL")), ""
        src = source(package)
        if src.kind != "github-archive":
            what = "a release asset, uploaded by hand" if src.kind == "github-release" else "not a GitHub tarball"
            return None, f"{package.value('PKG_SOURCE_URL')} is {what}"
        repo = github_repo(src.url)
        assert repo is not None  # a github-archive source has one
        return Archive("github", github_prefix(repo[1], src.revision), "gz", src.url), ""
    except ManifestError as exc:
        return None, str(exc)


def _default_subdir(package: Package) -> str:
    version = package.value("PKG_VERSION")
    return f"{package.value('PKG_NAME')}-{version}" if version else ""


def _line_offset(text: str, number: int) -> int:
    offset = 0
    for _ in range(number - 1):
        offset = text.index("\n", offset) + 1
    return offset
