"""`patchctl init --from gclient DIR`: a patch directory whose upstream a gclient `DEPS` file
fetches, as Electron keeps `patches/node` for `src/third_party/electron_node`. The dependency is
found through Electron's `patches/config.json` (`patch_dir` -> `repo`) when there is one, else
by name (`patches/nan` -> `src/third_party/nan`); its URL (the `Var()`s expanded) is the
upstream, and the `vars` entry its revision is read from becomes a `manifests:` entry, so that
`pin-sync` moves it: a commit, or a tag (`v20.18.0`: `version: 20.18.0`, `tag: v{version}`).
"""

from __future__ import annotations

import json
import posixpath
import re
from pathlib import Path

from ..errors import UsageError
from ..project.manifests import HEX40_RE, Manifest, ManifestError, Source
from ..project.manifests import gclient as deps_file
from .layout import Layout, file_kind, inside_path, read_text, release_layout

CONFIG_JSON = "patches/config.json"


def detect_gclient(
    root: Path, directory: str | None, deps: str | None, url: str | None, pin: str | None, name: str | None
) -> Layout:
    if not directory:
        raise UsageError("--from gclient needs the patch directory: patchctl init --from gclient DIR")
    directory = inside_path(root, directory.strip("/"), "--from gclient DIR")
    if file_kind(root, directory) != "directory":
        raise UsageError(f"{directory}: no such directory (--from gclient DIR)")
    deps_path = inside_path(root, deps or "DEPS", "--file")
    text = read_text(root, deps_path)
    if text is None:
        raise UsageError(f"{deps_path}: no such file (give the DEPS file with --file PATH)")
    try:
        parsed = deps_file.read(deps_path, text)
    except ManifestError as exc:
        raise UsageError(str(exc)) from None
    dependency, how = _dependency_for(root, directory, parsed)
    where = f"{deps_path}:{dependency.line}"
    tag_pattern, version = None, ""
    if not HEX40_RE.match(dependency.revision):
        match = re.fullmatch(r"(v?)(\d[A-Za-z0-9._+~-]*)", dependency.revision)
        if match is not None:
            tag_pattern, version = f"{match.group(1)}{{version}}", match.group(2)
    source = Source(dependency.url, dependency.revision, tag_pattern, version, where, "git")
    if dependency.revision_var is None:
        raise UsageError(
            f"{where}: {dependency.path}: its revision is not read from a `vars` entry: patchctl moves a DEPS "
            "revision through its vars entry (write it as Var('NAME'))"
        )
    layout = release_layout(
        root,
        found_source=source,
        what=f"{deps_path} ({dependency.path})",
        url=url,
        pin=pin,
        name=name or posixpath.basename(directory),
        manifest=Manifest(deps_path, "gclient", dependency.revision_var),
        manifest_text=text,
        patch_dir=directory,
        version_where=f"{deps_path}:{parsed.vars[dependency.revision_var].line} ({dependency.revision_var})",
    )
    layout.found.insert(0, f"dependency: {dependency.path} ({how})")
    layout.unmapped += parsed.notes
    return layout


def _dependency_for(root: Path, directory: str, parsed: deps_file.Deps) -> tuple[deps_file.Dependency, str]:
    """The DEPS entry DIRECTORY's patches apply to, and how it was found."""
    config = read_text(root, CONFIG_JSON)
    if config is not None:
        try:
            data = json.loads(config)
        except ValueError as exc:
            raise UsageError(f"{CONFIG_JSON}: not JSON: {exc}") from None
        pairs = data.items() if isinstance(data, dict) else [(e.get("patch_dir"), e.get("repo")) for e in data]
        for patch_dir, repo in pairs:
            if isinstance(patch_dir, str) and (patch_dir == directory or patch_dir.endswith("/" + directory)):
                if repo in parsed.deps:
                    return parsed.deps[repo], f"{CONFIG_JSON}: {patch_dir} -> {repo}"
                raise UsageError(f"{CONFIG_JSON}: {patch_dir} patches {repo!r}, which {parsed.path} does not fetch")
    named = [d for path, d in parsed.deps.items() if posixpath.basename(path) == posixpath.basename(directory)]
    if len(named) == 1:
        return named[0], f"named like {directory}"
    known = ", ".join(sorted(parsed.deps)) or "none"
    raise UsageError(
        f"{directory}: no {CONFIG_JSON} entry and no {parsed.path} dependency named like it (dependencies: {known})"
    )
