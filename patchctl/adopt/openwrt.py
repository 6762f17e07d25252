"""`patchctl init --from openwrt [DIR]`: an OpenWrt package (openwrt/packages: DIR/Makefile and
its DIR/patches/). The Makefile's PKG_SOURCE_* are expanded as OpenWrt's download.mk reads them
(`patchctl.project.manifests.openwrt`) into the upstream's git URL and the revision it fetches:
a tag (`v$(PKG_VERSION)`) becomes `version:` + `tag:`, and the Makefile a `manifests:` entry,
so that `pin-sync` moves PKG_VERSION, PKG_SOURCE_VERSION and the checksums with the pin.
"""

from __future__ import annotations

import posixpath
from pathlib import Path

from ..errors import UsageError
from ..project.manifests import HEX40_RE, Manifest, ManifestError, Source
from ..project.manifests import openwrt as owrt
from ..project.manifests.formats import checksums
from .layout import Layout, checked_pin, expand_pin, has_patches, inside_path, naming_of, read_text, safe_name


def detect_openwrt(root: Path, directory: str | None, url: str | None, pin: str | None, name: str | None) -> Layout:
    directory = inside_path(root, (directory or ".").strip("/") or ".", "--from openwrt DIR")
    makefile = posixpath.normpath(f"{directory}/Makefile")
    text = read_text(root, makefile)
    if text is None:
        raise UsageError(f"{makefile}: no such file (give the package directory: --from openwrt DIR)")
    if not owrt.is_package_makefile(text):
        raise UsageError(f"{makefile}: not an OpenWrt package Makefile (no `include $(INCLUDE_DIR)/package.mk`)")
    try:
        package = owrt.read(makefile, text)
        source = owrt.source(package)
        package_name = package.value("PKG_NAME")
    except ManifestError as exc:
        raise UsageError(str(exc)) from None
    return release_layout(
        root,
        found_source=source,
        what=f"{makefile} (PKG_SOURCE_URL, PKG_SOURCE_VERSION)",
        url=url,
        pin=pin,
        name=name or package_name,
        manifest=Manifest(makefile, "openwrt"),
        manifest_text=text,
        patch_dir=posixpath.normpath(f"{directory}/patches"),
        version_where=package.where("PKG_VERSION"),
    )


def release_layout(
    root: Path,
    *,
    found_source: Source,
    what: str,
    url: str | None,
    pin: str | None,
    name: str,
    manifest: Manifest,
    manifest_text: str,
    patch_dir: str,
    version_where: str,
) -> Layout:
    """The layout of a downstream that names its upstream in a manifest (an OpenWrt Makefile, a
    conda-forge recipe): upstream, pin and release from FOUND_SOURCE, the manifest to move."""
    found: list[str] = []
    notes: list[str] = []
    upstream_url = url or found_source.url
    if not upstream_url:
        raise UsageError(
            f"{found_source.where}: {found_source.problem or 'no upstream'}; patchctl cannot tell the upstream's git "
            f"repository from {what}: give --upstream-url URL and --pin SHA"
        )
    found.append(f"upstream: {upstream_url} ({'--upstream-url' if url else found_source.where})")
    if pin is not None:
        commit = checked_pin(pin, upstream_url, root)
        found.append(f"pin: {commit} (--pin)")
    elif not found_source.revision:
        raise UsageError(f"{found_source.where}: no revision to pin: give --pin SHA")
    else:
        commit = expand_pin(found_source.revision, upstream_url, root, found_source.where)
        shown = "" if found_source.revision == commit else f" = {found_source.revision}"
        found.append(f"pin: {commit}{shown} ({found_source.where})")
    version = None
    if found_source.tag_pattern is not None and found_source.version and not HEX40_RE.match(found_source.revision):
        version = found_source.version
        found.append(f"version: {version} ({version_where}), the upstream's tag {found_source.tag_pattern!r}")
    elif not HEX40_RE.match(found_source.revision):
        notes.append(
            f"{found_source.where}: the revision {found_source.revision!r} does not follow the version: no `version:`; "
            "pin-sync moves the manifest's commit only"
        )
    found.append(f"manifest: {manifest.path} ({manifest.format}): pin-sync moves it with the pin")
    for checksum in checksums(manifest, manifest_text):
        if checksum.archive is None:
            notes.append(
                f"{manifest.path}:{checksum.literal.line}: {checksum.literal.name}: {checksum.why}: pin-sync lists "
                "it to refresh after each bump"
            )
    naming, naming_notes, extra = naming_of(root, patch_dir)
    safe = safe_name(name)
    layout = Layout(safe, upstream_url, commit, safe, patch_dir, naming)
    layout.version, layout.tag_pattern = version, found_source.tag_pattern or "{version}"
    layout.manifests = [manifest]
    layout.found = [*found, f"patches: {patch_dir}", f"naming: {naming}"]
    layout.unmapped = notes + naming_notes
    layout.extra_files = extra
    layout.allow_empty = not has_patches(root, patch_dir)
    return layout
