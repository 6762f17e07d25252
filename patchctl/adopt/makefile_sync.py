"""`patchctl init --from makefile-sync`: a vendoring Makefile (`UPSTREAM=`, `FETCH_HEAD=`,
`WORKDIR=`, a `PATCHES=$(wildcard DIR/*.patch)` line, and `rsync` recipes that copy parts of the
patched upstream checkout into the repository, filtered by a `.rsync-filter` merge file per
destination). Each rsync copy becomes a `vendor:` entry of the series, with its filter file as
`filter:` and single files from elsewhere in the upstream as `files:`.

Makefile expansion is bounded in depth, size and work (`patchctl.project.makevars`): the Makefile is
untrusted.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from pathlib import Path

from .. import git
from ..errors import UsageError
from ..project.config import VendorCopy, VendorFile
from ..project.makevars import ExpansionBound, expand, parse_makefile
from ..project.rsyncfilter import FilterError
from ..project.rsyncfilter import load as load_filter
from .layout import (
    FULL_RE,
    Layout,
    PinFileEntry,
    expand_pin,
    has_patches,
    inside_path,
    local_repository,
    name_from_url,
    naming_of,
    pin_pattern,
    read_text,
)

# ------------------------------------------------------------------ makefile-sync


def _parse_rsync(words: list[str]) -> tuple[list[str], list[str], bool, list[str]]:
    """(sources, filter rules in the command line's order, --delete, notes)."""
    sources: list[str] = []
    rules: list[str] = []
    notes: list[str] = []
    delete = False
    i = 1
    while i < len(words):
        word = words[i]
        value: str | None = None
        if word in ("-f", "--filter", "--include", "--exclude", "--exclude-from", "--include-from", "--files-from"):
            value = words[i + 1] if i + 1 < len(words) else ""
            i += 1
        elif "=" in word and word.startswith("--"):
            word, _, value = word.partition("=")
        if word in ("-f", "--filter"):
            rules.append(value or "")
        elif word in ("--include", "--exclude"):
            rules.append(f"{'+' if word == '--include' else '-'} {value}")
        elif word in ("--exclude-from", "--include-from", "--files-from"):
            notes.append(f"rsync {word}={value}: not mapped")
        elif word.startswith("--delete"):
            delete = True
        elif word == "-F":
            notes.append("rsync -F (per-directory .rsync-filter): not mapped")
        elif not word.startswith("-"):
            sources.append(word)
        i += 1
    return sources, rules, delete, notes


def detect_makefile_sync(root: Path, file: str, url_override: str | None, pin_override: str | None) -> Layout:
    try:
        return _detect_makefile_sync(root, file, url_override, pin_override)
    except ExpansionBound as exc:
        raise UsageError(f"{file}: {exc}; patchctl stops there") from None


def _detect_makefile_sync(root: Path, file: str, url_override: str | None, pin_override: str | None) -> Layout:
    file = inside_path(root, file, "--file")
    text = read_text(root, file)
    if text is None:
        raise UsageError(f"{file}: no such file (give the vendoring Makefile with --file PATH)")
    make = parse_makefile(text)
    found: list[str] = []
    notes: list[str] = []
    var = make.variables

    def value(name: str) -> str:
        try:
            return expand(var.get(name, ""), var).strip()
        except ValueError as exc:
            notes.append(f"{file}: {name}: {exc}")
            return ""

    url = url_override or value("UPSTREAM")
    if not url:
        raise UsageError(f"{file}: no UPSTREAM= line: give --upstream-url")
    found.append(f"upstream: {url} (" + ("--upstream-url" if url_override else f"{file}: UPSTREAM") + ")")
    raw_pin = pin_override or value("FETCH_HEAD")
    if not raw_pin:
        raise UsageError(f"{file}: no FETCH_HEAD= line: give --pin")
    where = "--pin" if pin_override else f"{file}: FETCH_HEAD"
    pin = expand_pin(raw_pin, url, root, where)
    found.append(f"pin: {pin} ({where})")
    pin_files: list[PinFileEntry] = []
    stated = value("FETCH_HEAD")
    line = make.lines["FETCH_HEAD"][1] if "FETCH_HEAD" in make.lines else ""
    if stated and stated in line and (pattern := pin_pattern(line[: line.index(stated)], stated, pin)) is not None:
        pin_files.append(PinFileEntry(file, pattern))
        found.append(
            f"pin file: {file}:{make.lines['FETCH_HEAD'][0]} (FETCH_HEAD"
            + (")" if stated == pin else f", the pin abbreviated to {len(stated)})")
        )
    else:
        notes.append(f"{file}: FETCH_HEAD is not the pin (nor the pin abbreviated): no pin_files entry")
    patch_dir = ""
    for name, raw in var.items():
        match = re.search(r"\$\(wildcard\s+(\S+?)/\*\.(?:patch|diff)\s*\)", raw)
        if match:
            try:
                patch_dir = expand(match.group(1), var).strip().rstrip("/")
            except ValueError as exc:
                raise UsageError(f"{file}: {name}: {exc}") from None
            patch_dir = inside_path(root, patch_dir, f"{file}: {name}")
            found.append(f"patches: {patch_dir} ({file}: {name})")
            break
    if not patch_dir:
        raise UsageError(f"{file}: no PATCHES=$(wildcard DIR/*.patch) line: cannot tell the patch directory")
    workdir = value("WORKDIR").rstrip("/")
    if not workdir:
        for target, _prereqs, recipe in make.rules:
            if any(re.search(r"\bgit clone\b", line) for line in recipe):
                try:
                    workdir = expand(target, var).strip().rstrip("/")
                except ValueError as exc:
                    raise UsageError(f"{file}: rule {target}: {exc}") from None
        if not workdir:
            raise UsageError(f"{file}: no WORKDIR= line nor a `git clone` rule: cannot tell the upstream checkout")
    found.append(f"upstream checkout: {workdir}")
    vendor: list[VendorCopy] = []
    for target, prereqs, recipe in make.rules:
        for line in recipe:
            if not re.search(r"(^|[\s;&|@])rsync\s", line):
                continue
            try:
                expanded_target = expand(target, var)
                expanded_prereqs = [w for p in prereqs for w in expand(p, var).split()]
                words = shlex.split(expand(line.lstrip("@-+"), var, expanded_target, expanded_prereqs))
            except ValueError as exc:
                notes.append(f"{file}: rule {target}: rsync line not understood: {exc}")
                continue
            words = words[words.index("rsync") :] if "rsync" in words else words
            copies, copy_notes = _rsync_copies(
                root, workdir, words, file, target, lambda path: _kind_of(url, pin, path)
            )
            vendor += copies
            notes += copy_notes
    if not vendor:
        notes.append(f"{file}: no rsync copy from {workdir}: no vendor entry")
    upstream = name_from_url(url)
    series = posixpath.basename(posixpath.dirname(patch_dir)) or upstream
    naming, naming_notes, extra = naming_of(root, patch_dir)
    layout = Layout(upstream, url, pin, series, patch_dir, naming, "master", pin_files, vendor)
    layout.found = found + [f"naming: {naming}"]
    layout.unmapped = notes + naming_notes
    layout.extra_files = extra
    layout.allow_empty = not has_patches(root, layout.dir)
    return layout


def _kind_of(url: str, pin: str, path: str) -> str | None:
    """'blob' or 'tree' for PATH at PIN when the upstream is a local repository, else None."""
    local = local_repository(url)
    if local is None or not FULL_RE.match(pin):
        return None
    result = git.run(["cat-file", "-t", f"{pin}:{path}"], local, check=False)
    return result.stdout.strip() if result.ok else None


def _rsync_copies(
    root: Path, workdir: str, words: list[str], file: str, target: str, kind_of
) -> tuple[list[VendorCopy], list[str]]:
    """The vendor entry of one rsync line: its directory source as `from`, its filter rules
    (`-f`, `--include`, `--exclude`, merge files) as `filter:`, read as rsync reads them, and the
    single files it copies from elsewhere in the upstream (when its filter lets them through)
    as `files:`. A line patchctl cannot read that way gets no entry and a note saying why."""
    sources, rules, delete, notes = _parse_rsync(words)
    if len(sources) < 2:
        return [], [f"{file}: rule {target}: rsync without a source and a destination: not mapped"]
    dest = sources.pop().rstrip("/")
    try:
        dest = inside_path(root, dest, f"{file}: rule {target}: rsync destination")
    except UsageError as exc:
        return [], [*notes, f"{exc}: no vendor entry"]
    try:
        rsync_filter = load_filter(root, rules) if rules else None
    except FilterError as exc:
        return [], [*notes, f"{dest}: {exc}: no vendor entry (patchctl cannot read this rsync's filter)"]
    if not delete:
        notes.append(f"{dest}: rsync runs without --delete; vendor deletes what the copy no longer brings")
    included = (
        {posixpath.basename(r.pattern.rstrip("/")) for r in rsync_filter.rules if r.include} if rsync_filter else set()
    )
    directories, single_files = [], []
    for source in sources:
        if source != workdir and not source.startswith(workdir + "/"):
            notes.append(f"{dest}: rsync source {source} is outside the upstream checkout {workdir}: not mapped")
            continue
        relative = source[len(workdir) :].strip("/")
        if source.endswith("/") or source == workdir:
            directories.append(relative)
        elif (kind := kind_of(relative)) == "blob" or (
            kind is None and _looks_like_a_file(posixpath.basename(relative), included)
        ):
            single_files.append(relative)
        else:
            notes.append(
                f"{dest}: rsync source {source} has no trailing '/': rsync copies the directory itself, as "
                f"{dest}/{posixpath.basename(relative)}: not mapped (a vendor entry copies a directory's contents)"
            )
    if not directories:
        return [], [*notes, f"{dest}: rsync copies no directory of the upstream into it: no vendor entry"]
    relative = directories[0]
    for other in directories[1:]:
        notes.append(f"{dest}: rsync also copies {other or '.'}/ into it: not mapped (one directory per vendor entry)")
    files: list[VendorFile] = []
    for single in single_files:
        name = posixpath.basename(single)
        if posixpath.dirname(single) == relative:
            continue  # the same file the directory's copy brings, at the same place
        if rsync_filter is not None and not rsync_filter.sends(name):
            continue  # given to rsync, hidden by its filter: rsync does not copy it either
        if rsync_filter is not None and (rsync_filter.protects(name) or f"{dest}/{name}" in rsync_filter.files):
            notes.append(f"{dest}: rsync copies the upstream file {single} onto {name}, which its filter protects")
            continue
        files.append(VendorFile(single, f"{dest}/{name}"))
    return [VendorCopy(relative, dest, filter=rsync_filter, files=tuple(files))], notes


def _looks_like_a_file(name: str, included_names: set[str]) -> bool:
    """Without the upstream at hand: a name an include rule names, with a suffix, or in
    capitals (LICENSE, COPYING) is read as a file."""
    return name in included_names or "." in name or name.isupper()
