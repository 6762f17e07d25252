"""A manifest read, checked and moved by its format's module (`patchctl.project.manifests`)."""

from __future__ import annotations

from pathlib import Path

from ...confined import Refused, Root
from . import conda, gclient, openwrt
from .base import Checksum, Manifest, ManifestError, PinState

MAX_MANIFEST_BYTES = 4 * 1024 * 1024  # a Makefile, a recipe or a DEPS file: far below this


def read_manifest(root: Path, manifest: Manifest) -> str:
    """The text of MANIFEST (relative to ROOT, matrix.yaml's directory), read through `Root`:
    no link followed, bounded; ManifestError when it is missing or unreadable."""
    try:
        if Root(root).kind(manifest.path) == "directory":  # (Root.read_bytes does not refuse one in one line)
            raise Refused(f"refusing to read {manifest.path}: it is a directory, not a regular file")
        data = Root(root).read_bytes(manifest.path, MAX_MANIFEST_BYTES)
    except Refused as exc:
        raise ManifestError(f"{manifest.where}: {exc}") from None
    if data is None:
        raise ManifestError(f"{manifest.where}: {manifest.path} does not exist")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ManifestError(f"{manifest.where}: {manifest.path} is not UTF-8 text") from None


def disagreements(manifest: Manifest, text: str, state: PinState) -> list[tuple[int, str]]:
    """(line, message) for each value MANIFEST (holding TEXT) states that is not STATE's."""
    if manifest.format == "openwrt":
        return openwrt.disagreements(openwrt.read(manifest.path, text), state)
    if manifest.format == "conda-forge":
        return conda.disagreements(conda.read(manifest.path, text), state)
    return gclient.disagreements(gclient.read(manifest.path, text), manifest.var or "", state)


def moved(manifest: Manifest, text: str, old: PinState, new: PinState) -> str:
    """TEXT of MANIFEST with the pin moved from OLD to NEW (checksums are `checksums`' business)."""
    if manifest.format == "openwrt":
        return openwrt.moved(openwrt.read(manifest.path, text), old, new)
    if manifest.format == "conda-forge":
        return conda.moved(conda.read(manifest.path, text), old, new)
    return gclient.moved(gclient.read(manifest.path, text), manifest.var or "", old, new)


def checksums(manifest: Manifest, text: str) -> list[Checksum]:
    """MANIFEST's checksums of the upstream's sources (none for gclient)."""
    if manifest.format == "openwrt":
        return openwrt.checksums(openwrt.read(manifest.path, text))
    if manifest.format == "conda-forge":
        return conda.checksums(conda.read(manifest.path, text))
    return []
