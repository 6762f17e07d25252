"""`patchctl init --from conda-forge [DIR]`: a conda-forge feedstock's recipe (DIR, default
`recipe`: `meta.yaml`, or rattler-build's `recipe.yaml`) and the patches its `source:` lists.
The source's URL (with its Jinja variables: `{{ version }}`, `${{ version }}`) gives the upstream's
git repository and the tag; the recipe becomes a `manifests:` entry, so that `pin-sync` moves
its `version` and sha256 with the pin.
"""

from __future__ import annotations

import posixpath
from pathlib import Path

from ..errors import UsageError
from ..project.manifests import Manifest, ManifestError, conda
from .layout import Layout, file_kind, inside_path, read_text, release_layout


def detect_conda_forge(root: Path, directory: str | None, url: str | None, pin: str | None, name: str | None) -> Layout:
    if directory is None:
        directory = "recipe" if file_kind(root, "recipe") == "directory" else "."
    directory = inside_path(root, directory.strip("/") or ".", "--from conda-forge DIR")
    recipe_file = next(
        (
            posixpath.normpath(f"{directory}/{candidate}")
            for candidate in ("recipe.yaml", "meta.yaml")
            if file_kind(root, f"{directory}/{candidate}") == "regular file"
        ),
        None,
    )
    if recipe_file is None:
        raise UsageError(
            f"{directory}: no meta.yaml nor recipe.yaml (give the recipe directory: --from conda-forge DIR)"
        )
    text = read_text(root, recipe_file) or ""
    try:
        recipe = conda.read(recipe_file, text)
        source = conda.source(recipe)
    except ManifestError as exc:
        raise UsageError(str(exc)) from None
    listed = conda.patch_paths(recipe)
    folders = sorted({posixpath.dirname(p) for p in listed})
    patch_dir = posixpath.normpath(f"{directory}/{folders[0] if len(folders) == 1 else 'patches'}")
    feedstock = root.resolve().name.removesuffix("-feedstock")
    layout = release_layout(
        root,
        found_source=source,
        what=f"{recipe_file} (source:)",
        url=url,
        pin=pin,
        name=name or conda.package_name(recipe).removesuffix("-split") or feedstock,
        manifest=Manifest(recipe_file, "conda-forge"),
        manifest_text=text,
        patch_dir=patch_dir,
        version_where=recipe.where(recipe.version),
    )
    layout.unmapped += recipe.notes
    if len(folders) > 1:
        layout.unmapped.append(f"{recipe_file}: patches come from {', '.join(folders)}: the series is {patch_dir}")
    return layout
