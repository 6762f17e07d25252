"""`patchctl init`: detect an existing patch layout and plan the files that adopt it.

Three layout kinds are read without moving a file, one module each: `makefile_sync`, `quilt`
and `git_dir`; with none, a new repository's matrix.yaml is planned to fill in.

The result is a `Plan`: the files to write (contents as bytes: matrix.yaml, the templates, a
pre-commit config), what was found and what could not be mapped, one line each. Nothing here
writes or prints.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..confined import Refused, Root
from ..errors import UsageError
from ..output.escape import shell_word
from ..project.upstream_checks import SDIST_BRANCH, is_sdist_url
from ..series.patchset import PatchFile
from . import CONFIG_NAME, LAYOUTS, PRE_COMMIT_NAME
from .conda_forge import detect_conda_forge
from .electron import detect_electron
from .gclient import detect_gclient
from .git_dir import detect_git_dir
from .layout import (
    MAX_LAYOUT_FILE_BYTES,
    TEMPLATES_DIR,
    Layout,
    Plan,
    checked_pin,
    flow,
    name_from_url,
    q,
    read_text,
    regular_files,
)
from .makefile_sync import detect_makefile_sync
from .openwrt import detect_openwrt
from .quilt import detect_quilt, quilt_lines
from .resolve import default_branch

# ------------------------------------------------------------------ entry point

NAMING_NOTES = {
    "format-patch": "NNNN-slug.patch, as git format-patch names them",
    "strict": "NNNN-slug.patch, no gaps, lower-case",
    "quilt": "any names, in the order of DIR/series",
    "openwrt": "OpenWrt's NNN-slug.patch (a new patch: the next number in its band)",
    "electron": "Electron's underscore_slug.patch, in the order of DIR/.patches",
    "any": "any names",
}


def plan(
    root: Path,
    templates: Path,
    layout: str | None,
    *,
    path: str | None = None,
    file: str | None = None,
    upstream_url: str | None = None,
    pin: str | None = None,
    name: str | None = None,
    action: str | None = None,
    home: str = "patchctl/patchctl",
    prefix: str = "",
) -> Plan:
    """The files `patchctl init` writes in ROOT (nothing is written here). ACTION is the `uses:` of
    patchctl's action for the rendered workflows (OWNER/REPO@COMMIT); None: unknown, left to set.
    HOME is patchctl's repository on github.com, named in the comment that says how to set it.
    PREFIX: ROOT relative to the top of its work tree ('' at the top): pre-commit reads its
    config at the top only, so in a subdirectory its hooks (`patchctl -C PREFIX ...`) are printed."""
    root = Path(root)
    if layout is None:
        detected = _new_repository(root, upstream_url, pin, name)
    elif layout == "makefile-sync":
        detected = detect_makefile_sync(root, path or "Makefile.sync", upstream_url, pin)
    elif layout == "quilt":
        detected = detect_quilt(root, path, upstream_url, pin, name)
    elif layout == "electron":
        detected = detect_electron(root, path or "patches", upstream_url, pin, name)
    elif layout == "git-dir":
        if not path:
            raise UsageError("--from git-dir needs the patch directory: patchctl init --from git-dir DIR")
        detected = detect_git_dir(root, path, upstream_url, pin, name)
    elif layout == "openwrt":
        detected = detect_openwrt(root, path, upstream_url, pin, name)
    elif layout == "conda-forge":
        detected = detect_conda_forge(root, path, upstream_url, pin, name)
    elif layout == "gclient":
        detected = detect_gclient(root, path, file, upstream_url, pin, name)
    else:
        raise UsageError(f"unknown layout {layout!r} (choose: {', '.join(LAYOUTS)})")
    if detected.url and (missing := _missing_local_path(root, detected.url)) is not None:
        given = "--upstream-url" if upstream_url else "the upstream"
        raise UsageError(
            f"{given} {detected.url!r} is a local path where nothing is ({missing}); name an existing clone of "
            "the upstream, or its URL"
        )
    if is_sdist_url(detected.url):
        detected.branch = SDIST_BRANCH
    elif detected.url:
        branch, note = default_branch(detected.url, root)
        detected.branch = branch or detected.branch
        if note:
            detected.unmapped.append(f"{note}: `{detected.branch}` written; set the branch pin-sync --latest follows")
        else:
            detected.found.append(f"branch: {branch} (the upstream's HEAD)")
    if detected.dir:
        total, detected.undescribed, detected.upstream_statuses = _undescribed(root, detected)
        detected.patch_count = total
        if detected.undescribed:
            detected.found.append(
                f"{detected.undescribed} of {total} patch(es) without a subject or a description: allow_undescribed: "
                "true (lint PC007/PC008 stay quiet until they have one)"
            )
        if total:
            detected.found.append(
                f"{detected.upstream_statuses} of {total} patch(es) with a well-formed Upstream-Status: header"
                + (
                    ": upstream_status: required (lint PC014 keeps every new patch saying it)"
                    if detected.upstream_statuses == total
                    else ""
                )
            )
    chosen = [
        "workflows: extras: none: no gate runs patchctl's engine, so the workflows install patchctl alone "
        "(a gate that runs it adds engine)"
    ]
    if detected.upstream:
        chosen.append(f"canary: upstream {detected.upstream}, weekly, apply-only (toolchains: [] compiles nothing)")
    files: dict[str, bytes] = {CONFIG_NAME: render_config(detected, layout, action, home).encode()}
    files.update(detected.extra_files)
    installed = Root(templates, "patchctl's installed templates")
    for name in installed.listdir("") or []:
        if name.endswith(".j2"):
            files[f"{TEMPLATES_DIR}/{name}"] = installed.read_bytes(name, MAX_LAYOUT_FILE_BYTES) or b""
    snippet = pre_commit_snippet(detected, prefix)
    exists = bool(prefix) or (root / PRE_COMMIT_NAME).exists() or (root / PRE_COMMIT_NAME).is_symlink()
    if not exists:
        files[PRE_COMMIT_NAME] = snippet.encode()
    return Plan(files, tuple(detected.found), tuple(detected.unmapped), snippet, not exists, tuple(chosen))


def _missing_local_path(root: Path, url: str) -> str | None:
    """Where URL, a local path (relative ones from ROOT, as matrix.yaml reads them), points, when
    nothing is there; None for an existing path and for every other URL form."""
    if is_sdist_url(url) or re.match(r"^[\w.-]+@[\w.-]+:", url):
        return None
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", url) and not url.startswith("file://"):
        return None
    path = Path(url.removeprefix("file://")).expanduser()
    path = path if path.is_absolute() else root / path
    return None if path.exists() else str(path)


# ------------------------------------------------------------------ new repository


def _new_repository(root: Path, url: str | None, pin: str | None, name: str | None) -> Layout:
    if (url is None) != (pin is None):
        raise UsageError("give both --upstream-url and --pin (or neither, for a matrix.yaml to fill in)")
    if url is None:
        return Layout("", "", "", "", "", "format-patch")
    upstream = name or name_from_url(url)
    layout = Layout(upstream, url, checked_pin(pin, url, root), upstream, f"patches/{upstream}", "format-patch")
    layout.allow_empty = True
    return layout


def _undescribed(root: Path, layout: Layout) -> tuple[int, int, int]:
    """(patches, those without a subject or a description, those with a well-formed
    `Upstream-Status:` header) in the layout's patch directory."""
    if layout.names is not None:
        names = layout.names
    elif layout.naming == "quilt":
        names = [words[0] for words in quilt_lines(read_text(root, f"{layout.dir}/series") or "")]
    else:
        names = [n for n in regular_files(root, layout.dir) if n.endswith(".patch")]
    count = with_status = 0
    confined = Root(root)
    for name in names:
        try:
            data = confined.read_bytes(f"{layout.dir}/{name}", MAX_LAYOUT_FILE_BYTES)
        except Refused:
            continue  # a link, a FIFO or a giant: lint names it; the count is only a hint
        if data is not None:
            patch = PatchFile(root / layout.dir / name, data)
            count += not (patch.message.subject and patch.message.description)
            with_status += patch.upstream_status is not None and patch.upstream_status.ok
    return len(names), count, with_status


def workflows_section(action: str | None, home: str) -> list[str]:
    """matrix.yaml's `workflows:`: the published patchctl action the rendered workflows call."""
    lines = [
        "# The rendered workflows (`patchctl matrix render`) call patchctl's GitHub Action at a commit",
        f"# that github.com has: {home}'s, or your fork's. They install patchctl's extras only where",
        '# a gate runs patchctl\'s engine ("$PATCHCTL_PYTHON" -m engine): add `extras: [engine]` to',
        "# install it anyway. pin-sync can push with a GitHub App's token, so that its pull requests",
        '# run CI (patchctl\'s manual, docs/tutorials/bump.md "pin-sync as a bot"): add',
        "# `pin_sync: {github_app: {client_id_var: VAR, private_key_secret: SECRET}}`.",
    ]
    if action is None:
        return lines + [
            "# workflows:",
            f"#   action: {home}@COMMIT  # set a full commit id github.com has (see the warning init printed)",
            "",
        ]
    return lines + ["workflows:", f"  action: {q(action)}", ""]


def canary_section(layout: Layout) -> list[str]:
    """matrix.yaml's `canary:`: an apply-only weekly canary, which needs no image row."""
    lines = [
        "# The weekly canary (`patchctl canary`, rendered as .github/workflows/canary.yml) applies the",
        "# series to the upstream's tip and opens an issue when a patch stops applying there. To also",
        "# compile, list toolchains: a shipped image row's ({name, tag-suffix, cuda-major-version, image}),",
        "# or the runner's own ({name: host, runs-on: ubuntu-latest, command: 'make -j4'}).",
    ]
    if not layout.upstream:
        return lines + ["# canary:", "#   upstream: NAME", "#   toolchains: []", ""]
    return lines + [
        "canary:",
        f"  upstream: {q(layout.upstream)}",
        "  schedule: '17 3 * * 1'  # weekly (cron, UTC)",
        "  toolchains: []  # apply-only: nothing compiled",
        "",
    ]


def render_config(layout: Layout, source: str | None, action: str | None, home: str) -> str:
    """matrix.yaml for LAYOUT, with a comment on every key."""
    out = [
        "# patchctl's single source of truth: upstream pins, patch series, CI build matrix.",
        "# Written by `patchctl init" + (f" --from {source}" if source else "") + "`; schema v1",
        "# (patchctl's manual: docs/reference/configuration.md).",
        "version: 1",
        "",
    ]
    if not layout.upstream:
        out += [
            "# Each upstream: where it lives and the commit the series apply to. For example:",
            "#   llama.cpp:",
            "#     url: https://github.com/ggml-org/llama.cpp   # or a local path / file:// URL",
            "#     branch: master                              # what pin-sync and the canary follow",
            "#     pin: <40-hex commit id>                     # the exact commit the series apply to",
            "upstreams: {}",
            "",
            "# Each series: a directory of patches applied, in order, to one upstream's pin. For example:",
            "#   llama.cpp:",
            "#     upstream: llama.cpp",
            "#     dir: patches/llama.cpp        # NNNN-slug.patch files (naming: format-patch)",
            "#     exclude: []                   # paths a patch may not touch (default: ['*.md', 'docs/**'])",
            "series: {}",
            "",
            *canary_section(layout),
            *workflows_section(action, home),
        ]
        return "\n".join(out)
    out += [
        "upstreams:",
        f"  {q(layout.upstream)}:",
        f"    url: {q(layout.url)}  # where the upstream is fetched from (--upstream-url NAME=URL overrides it)",
        f"    branch: {q(layout.branch)}  # the branch `pin-sync --latest` and the canary follow",
        f"    pin: {q(layout.pin)}  # the commit the series apply to: a full 40-hex commit id",
    ]
    if layout.version is not None:
        out.append(f"    version: {q(layout.version)}  # the release the pin is, as the downstream names it")
        out.append(f"    tag: {q(layout.tag_pattern)}  # the upstream's tag for a version")
    if layout.manifests:
        out.append("    # the downstream's files that state the release: lint (PC010) checks them, pin-sync moves them")
        out.append("    manifests:")
        for manifest in layout.manifests:
            var = f", var: {q(manifest.var)}" if manifest.var else ""
            out.append(f"      - {{path: {q(manifest.path)}, format: {manifest.format}{var}}}")
    if layout.pin_files:
        out.append("    # other places that hold the same pin; lint (PC010) checks them, pin-sync moves them")
        out.append("    pin_files:")
        for entry in layout.pin_files:
            out.append(f"      - {{path: {q(entry.path)}, pattern: {q(entry.pattern)}}}")
    out += [
        "",
        "series:",
        f"  {q(layout.series)}:",
        f"    upstream: {q(layout.upstream)}  # the upstream whose pin the patches apply to",
        f"    dir: {q(layout.dir)}  # the patch files, relative to this file",
        f"    naming: {layout.naming}  # {_naming_note(layout)}",
    ]
    if layout.list_path is not None:
        out.append(
            f"    list: {{kind: {layout.list_kind}, path: {q(layout.list_path)}}}  # the order: your own list, "
            "edited in place"
        )
    elif layout.list_kind == "none" and layout.naming in ("quilt", "electron"):
        out.append("    list: none  # no list file: the order is the file names' (none is written)")
    if layout.form != "own":
        out.append(f"    form: {layout.form}  # export writes every patch exactly as your own exporter does")
    out += [
        "    exclude: []  # paths no patch may touch (lint PC004); [] allows every path",
    ]
    if layout.allow_empty:
        out.append("    allow_empty: true  # no patch yet: remove once the first one is in")
    if layout.undescribed:
        out.append(
            f"    allow_undescribed: true  # {layout.undescribed} patch(es) lack a subject or a description "
            "(lint PC007/PC008): remove once they have one"
        )
    if layout.patch_count and layout.upstream_statuses == layout.patch_count:
        out.append(
            "    upstream_status: required  # every patch has an Upstream-Status: header: lint keeps it so (PC014)"
        )
    if layout.vendor:
        out.append("    # copies of the patched tree into this repository (`patchctl vendor`; `vendor --check` in CI)")
        out.append("    vendor:")
        for copy in layout.vendor:
            out.append(f"      - from: {q(copy.source)}  # upstream directory ('' = the tree's root)")
            out.append(f"        to: {q(copy.dest)}  # the repository directory it is copied into")
            if copy.filter is not None:
                out.append(
                    "        # rsync's filter rules, as the Makefile's rsync reads them (its filter files stay yours)"
                )
                given = copy.filter.given
                merge = given[0].removeprefix("merge ") if len(given) == 1 and given[0].startswith("merge ") else None
                out.append(f"        filter: {q(merge) if merge else flow(given)}")
            if copy.files:
                out.append("        # single upstream files rsync copies into it from elsewhere in the upstream")
                out.append("        files:")
                out += [f"          - {{from: {q(f.source)}, to: {q(f.dest)}}}" for f in copy.files]
    out += ["", *canary_section(layout), *workflows_section(action, home)]
    return "\n".join(out)


def _naming_note(layout: Layout) -> str:
    note = NAMING_NOTES[layout.naming]
    if layout.list_path is not None:
        return note
    if layout.list_kind == "none" or (layout.list_kind is None and layout.naming not in ("quilt", "electron")):
        return note.split(", in the order of ")[0] + "; in name order (no list file)"
    return note


def pre_commit_snippet(layout: Layout, prefix: str = "") -> str:
    """A .pre-commit-config.yaml running the installed patchctl (a `local` repo: no rev to pin);
    for a matrix.yaml in the subdirectory PREFIX, its commands run there (`-C PREFIX`)."""
    files = r"^" + (re.escape(prefix) + "/" if prefix else "") + r"(matrix\.yaml|templates/.*"
    if layout.dir:
        files += "|" + re.escape(layout.dir) + "/.*"
    outside = [manifest.path for manifest in layout.manifests]
    if layout.list_path and not layout.list_path.startswith(f"{layout.dir}/"):
        outside.append(layout.list_path)  # the downstream's own list, elsewhere (a recipe's meta.yaml)
    for path in dict.fromkeys(outside):
        files += "|" + re.escape(path)
    files += ")$"
    patchctl = f"patchctl -C {shell_word(prefix)}" if prefix else "patchctl"
    lines = [
        "# patchctl's checks before each commit (https://pre-commit.com), run by the installed patchctl.",
        "repos:",
        "  - repo: local",
        "    hooks:",
        "      - id: patchctl-lint",
        "        name: patchctl lint",
        f"        entry: {patchctl} lint --no-apply",
        "        language: system",
        "        pass_filenames: false",
        f"        files: {q(files)}",
    ]
    if layout.series:
        lines += [
            "      - id: patchctl-export-check",
            "        name: patchctl export --check",
            f"        entry: {patchctl} export --check {layout.series}",
            "        language: system",
            "        pass_filenames: false",
            f"        files: {q(files)}",
        ]
    if layout.vendor:
        lines += [
            "      - id: patchctl-vendor-check",
            "        name: patchctl vendor --check",
            f"        entry: {patchctl} vendor --check",
            "        language: system",
            "        pass_filenames: false",
            "        always_run: true  # an edit anywhere in a vendored directory counts",
        ]
    return "\n".join(lines) + "\n"
