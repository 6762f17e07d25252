"""The downstream's own manifests: the files where it states which release of an upstream it
builds, in its own format. An upstream's `manifests:` in matrix.yaml names them:

    openwrt      an OpenWrt package Makefile: PKG_VERSION, PKG_SOURCE_VERSION, PKG_SOURCE_DATE,
                 PKG_RELEASE, and the checksums PKG_HASH / PKG_MIRROR_HASH
    conda-forge  a conda-forge recipe: meta.yaml (`{% set version = "..." %}`) or recipe.yaml
                 (`context: version:`), its `source:` sha256 or git revision, `build: number:`
    gclient      a gclient DEPS file: the `vars` entry (`var:`) a dependency's revision is read from

Each format's module reads a manifest (`read`), says where it disagrees with the pin
(`disagreements`, lint's PC010), rewrites it for a new pin (`moved`: only the values it states,
in place, every other byte kept), and names its checksums and the archives they are the
digests of (`checksums`); `formats` calls the right one. Nothing here runs git or writes a
file: `patchctl.loop.versionpin` rebuilds archives from the upstream's mirror and writes
through the journal.
"""

from __future__ import annotations

from .base import (
    FORMATS,
    HEX40_RE,
    VERSION_RE,
    Archive,
    Checksum,
    Literal,
    Manifest,
    ManifestError,
    PinState,
    Source,
    github_archive_ref,
    github_prefix,
    github_repo,
    is_abbreviation,
    replace_literals,
    state_of,
    tag_for,
    version_of_tag,
)

__all__ = [
    "Archive",
    "Checksum",
    "FORMATS",
    "HEX40_RE",
    "Literal",
    "Manifest",
    "ManifestError",
    "PinState",
    "Source",
    "VERSION_RE",
    "github_archive_ref",
    "github_prefix",
    "github_repo",
    "is_abbreviation",
    "replace_literals",
    "state_of",
    "tag_for",
    "version_of_tag",
]
