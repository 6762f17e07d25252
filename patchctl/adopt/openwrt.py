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
from ..project.manifests import Manifest, ManifestError
from ..project.manifests import openwrt as owrt
from .layout import Layout, inside_path, read_text, release_layout


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
