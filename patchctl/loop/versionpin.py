"""A pin that is a release: moving an upstream's `version:` and the downstream's manifests
(an OpenWrt Makefile, a conda-forge recipe, a gclient DEPS) together with its commit.

At the start of a pin-sync, `target_release` tells the version the target is (the tag named by
`--to`, else the one tag on the target commit that fits `tag:`; `--latest` takes the newest such
tag, `latest_release`) and `check_manifests` reads every manifest, so that a manifest patchctl cannot
move stops the sync before anything is replayed. At the end, `with_manifests` adds their edits
to pin-sync's others (one journaled write): matrix.yaml's `version:`, then each manifest's
values, then its checksums. A checksum is remade only when this machine first remakes the one
the manifest holds now from the old pin (`patchctl.loop.archives`: the same recipe, the same
tools); otherwise it is listed "to refresh", with the downstream's own command, in the report
and so in the pull request's body. It is never left stale without a word.
"""

from __future__ import annotations

import datetime
import re
from pathlib import Path

from .. import git
from ..errors import ConfigError, UsageError
from ..project import manifests
from ..project.config import Config, Upstream
from ..project.manifests import ManifestError, PinState, formats, tag_for, version_of_tag
from ..records import dataclass
from ..state.journal import FileChange
from ..upstream.store import Mirror, Store
from . import archives
from .pinfile import read_pin_file

_PRERELEASE_RE = re.compile(r"(?i)(?:rc|alpha|beta|pre|dev|preview|snapshot)|\d[ab]\d")


@dataclass(frozen=True)
class Refresh:
    """A checksum pin-sync could not remake: where, why, and the downstream's command for it."""

    path: str
    line: int
    name: str
    why: str
    command: str

    def __str__(self) -> str:
        how = f"; run `{self.command}`" if self.command else ""
        return f"{self.path}:{self.line}: {self.name} still names the old release ({self.why}){how}"


def has_release(upstream: Upstream) -> bool:
    return upstream.version is not None or bool(upstream.manifests)


def latest_release(store: Store, mirror: Mirror, upstream: Upstream) -> tuple[str, str] | None:
    """(commit, spec) of UPSTREAM's newest release for `--latest`: the newest tag that fits its
    `tag:` (pre-releases left out unless the pin is one); None when it names no version (then
    `--latest` is its branch's tip). The mirror is fetched first."""
    if upstream.version is None:
        return None
    store.fetch(mirror)
    tag = _latest_tag(mirror.path, upstream)
    return store.resolve(mirror, f"refs/tags/{tag}", fetch_if_missing=False), f"--latest ({tag})"


def _latest_tag(repo: Path, upstream: Upstream) -> str:
    listed = git.run(["for-each-ref", "--format=%(refname:strip=2)", "refs/tags"], repo).stdout.split()
    current = upstream.version or ""
    prerelease_ok = bool(_PRERELEASE_RE.search(current))
    candidates = [
        (_version_key(version), tag)
        for tag in listed
        if (version := version_of_tag(upstream.tag, tag)) is not None
        and (prerelease_ok or not _PRERELEASE_RE.search(version))
        and version[:1].isdigit() == current[:1].isdigit()  # `{version}` fits any tag: `list` is none
    ]
    if not candidates:
        raise UsageError(
            f"--latest: upstream {upstream.name} has no tag that fits {upstream.tag!r} "
            f"(matrix.yaml `tag:`); give --to TAG"
        )
    return max(candidates)[1]


def _version_key(version: str) -> tuple:
    parts = re.findall(r"\d+|[^\d.+~_-]+", version)
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in parts)


def target_release(repo: Path, upstream: Upstream, target: str, spec: str) -> PinState:
    """Where UPSTREAM stands once moved to TARGET (asked for as SPEC): its commit, its version
    and tag when it names one, and the commit's date."""
    date = _commit_date(repo, target)
    if upstream.version is None:
        return PinState(target, None, None, date)
    named = spec.removeprefix("--latest (").removesuffix(")").removeprefix("refs/tags/")
    version = version_of_tag(upstream.tag, named)
    if version is not None and _tag_commit(repo, named) == target:
        return PinState(target, version, tag_for(upstream.tag, version), date)
    tags = git.run(["tag", "--points-at", target], repo).stdout.split()
    fitting = sorted({(v, t) for t in tags if (v := version_of_tag(upstream.tag, t)) is not None})
    if len(fitting) == 1:
        return PinState(target, fitting[0][0], fitting[0][1], date)
    if target == upstream.pin:
        return PinState(target, upstream.version, tag_for(upstream.tag, upstream.version), date)
    if not fitting:
        raise UsageError(
            f"upstream {upstream.name} is pinned by release ({upstream.version}, tag {upstream.tag!r}) and "
            f"{target[:12]} has no tag that fits: give --to TAG, so that its version moves with the pin"
        )
    raise UsageError(
        f"{target[:12]} has several tags that fit {upstream.tag!r} ({', '.join(t for _, t in fitting)}): give --to TAG"
    )


def _tag_commit(repo: Path, tag: str) -> str:
    found = git.run(["rev-parse", "--verify", "--quiet", f"refs/tags/{tag}^{{commit}}"], repo, check=False)
    return found.stdout.strip()


def current_release(repo: Path, upstream: Upstream) -> PinState:
    state = manifests.state_of(upstream.pin, upstream.version, upstream.tag)
    return PinState(state.commit, state.version, state.tag, _commit_date(repo, upstream.pin))


def _commit_date(repo: Path, commit: str) -> str:
    seconds = git.run(["show", "-s", "--format=%ct", commit], repo, check=False).stdout.strip()
    if not seconds.isdigit():
        return ""
    return datetime.datetime.fromtimestamp(int(seconds), datetime.timezone.utc).strftime("%Y-%m-%d")


def check_manifests(config: Config, store: Store, name: str, target: str, spec: str) -> None:
    """Tell the release TARGET is and move every manifest of upstream NAME there in memory: one
    that cannot be moved stops the sync now (exit 2), before anything is replayed."""
    upstream = config.get_upstream(name)
    if not has_release(upstream):
        return
    repo = store.mirror(upstream.url, base=config.root).path
    old, new = current_release(repo, upstream), target_release(repo, upstream, target, spec)
    for manifest in upstream.manifests:
        try:
            formats.moved(manifest, formats.read_manifest(config.root, manifest), old, new)
        except ManifestError as exc:
            raise ConfigError(str(exc)) from None


def _read(config: Config, path: Path) -> bytes:
    """A file pin-sync edits (matrix.yaml, a manifest), through the layer (`read_pin_file`)."""
    data = read_pin_file(config, path)
    if data is None:
        raise ConfigError(f"{path}: does not exist")
    return data


def with_manifests(
    config: Config, store: Store, name: str, target: str, spec: str, changes: list[FileChange]
) -> tuple[list[FileChange], list[Refresh]]:
    """CHANGES (pin-sync's other writes) with upstream NAME's `version:` line and its manifests
    moved to TARGET (asked for as SPEC), and the checksums left to refresh."""
    upstream = config.get_upstream(name)
    if not has_release(upstream):
        return changes, []
    repo = store.mirror(upstream.url, base=config.root).path
    old, new = current_release(repo, upstream), target_release(repo, upstream, target, spec)
    edited = {change.path: change for change in changes}

    def text_of(path: Path) -> str:
        if path in edited and edited[path].new is not None:
            return edited[path].new.decode("utf-8", errors="surrogateescape")
        return _read(config, path).decode("utf-8", errors="surrogateescape")

    def write(path: Path, text: str) -> None:
        data = text.encode("utf-8", errors="surrogateescape")
        if path in edited or data != _read(config, path):
            edited[path] = FileChange(path, data)

    if new.version is not None and new.version != old.version:
        write(config.path, _moved_version_line(config, upstream, text_of(config.path), new.version))
    refresh: list[Refresh] = []
    for manifest in upstream.manifests:
        path = config.root / manifest.path
        before = formats.read_manifest(config.root, manifest)
        try:
            after = formats.moved(manifest, text_of(path), old, new)
            after, stale = _remade_checksums(repo, manifest, before, after, old, new)
        except ManifestError as exc:
            raise ConfigError(str(exc)) from None
        refresh += stale
        write(path, after)
    return list(edited.values()), refresh


def _remade_checksums(
    repo: Path, manifest: manifests.Manifest, before: str, after: str, old: PinState, new: PinState
) -> tuple[str, list[Refresh]]:
    """AFTER with each checksum that moved with the release remade, and those that could not be."""
    previous = {c.literal.name: c for c in formats.checksums(manifest, before)}
    edits: dict[manifests.Literal, str] = {}
    stale = []
    for checksum in formats.checksums(manifest, after):
        was = previous.get(checksum.literal.name)
        if was is None or (was.archive == checksum.archive and old.commit == new.commit):
            continue
        why = checksum.why
        if checksum.archive is not None and was.archive is not None:
            try:
                if archives.digest(repo, old.commit, was.archive) == was.literal.value.lower():
                    edits[checksum.literal] = archives.digest(repo, new.commit, checksum.archive)
                    continue
                why = "this machine does not remake the current one from the old pin, so it cannot remake the new one"
            except archives.CannotRebuild as exc:
                why = str(exc)
        stale.append(Refresh(manifest.path, checksum.literal.line, checksum.literal.name, why, checksum.refresh))
    return manifests.replace_literals(after, edits), stale


def _moved_version_line(config: Config, upstream: Upstream, text: str, version: str) -> str:
    keypath = ("upstreams", upstream.name, "version")
    number = config.doc.line_of(keypath)
    lines = text.splitlines(keepends=True)
    line = lines[number - 1]
    colon = line.find("version:")
    found = re.compile(r"""(["']?)""" + re.escape(upstream.version or "") + r"\1(?=\s*(?:#|$))").search(
        line, colon + len("version:") if colon >= 0 else 0
    )
    if found is None:
        raise config.error(keypath, "cannot find the version on its line to update it")
    start, end = found.start() + len(found.group(1)), found.end() - len(found.group(1))
    lines[number - 1] = line[:start] + version + line[end:]
    return "".join(lines)


def refresh_warning(stale: list[Refresh]) -> str:
    files = ", ".join(sorted({r.path for r in stale}))
    return (
        f"{len(stale)} checksum(s) in {files} still name the old release: patchctl could not remake them here; "
        'refresh them before merging (the report\'s "Checksums to refresh" says how)'
    )
