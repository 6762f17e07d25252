"""`patchctl init`: detect an existing patch layout and plan the files that adopt it.

Three layouts are read without moving a file:

* `makefile-sync`: a vendoring Makefile (`UPSTREAM=`, `FETCH_HEAD=`, `WORKDIR=`, a
  `PATCHES=$(wildcard DIR/*.patch)` line, and `rsync` recipes that copy parts of the patched
  upstream checkout into the repository, filtered by a `.rsync-filter` merge file per
  destination). Each rsync copy becomes a `vendor:` entry of the series; its filter rules
  become include/exclude/protect globs.
* `quilt`: a `series` file (default `debian/patches/series`); the upstream is given.
* `git-dir`: a directory of format-patch files and a pin found in a Makefile variable
  (`LLAMA_VERSION?=<sha>`) or in a version file; the place it was found becomes a
  `pin_files` entry when it holds the full commit id.

The result is a `Plan`: the files to write (contents as bytes), what was found and what
could not be mapped, one line each. Nothing here writes or prints.

The repository is untrusted input: every file is read through `patchctl.confined.Root` (no
link followed, bounded), every directory a layout names must be inside the repository (no
`..`, no `.git`), and Makefile expansion is bounded in depth, size and work (`MakeBudget`).
"""

from __future__ import annotations

import posixpath
import re
import shlex
import stat
from dataclasses import dataclass, field
from pathlib import Path

from .. import git
from ..confined import Refused, Root, is_dotgit
from ..errors import UsageError
from ..project.config import VendorCopy, VendorFile
from ..project.rsyncfilter import FilterError
from ..project.rsyncfilter import load as load_filter
from ..series.patchset import FORMAT_PATCH_SLUG_MAX, PATCH_NAME_RE, STRICT_NAME_RE, PatchFile

LAYOUTS = ("makefile-sync", "quilt", "git-dir")
CONFIG_NAME = "matrix.yaml"
PRE_COMMIT_NAME = ".pre-commit-config.yaml"
TEMPLATES_DIR = "templates"
_HEX_RE = re.compile(r"^[0-9a-f]{7,40}$")
_FULL_RE = re.compile(r"^[0-9a-f]{40}$")
_PLAIN_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_./@+-]*$")
_YAML_WORDS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "~"}
MAX_LAYOUT_FILE_BYTES = 16 * 1024 * 1024  # a Makefile, a filter or series file, a patch: far below this


@dataclass(frozen=True)
class PinFileEntry:
    path: str
    pattern: str


@dataclass
class Layout:
    """What was detected: one upstream and one series on it."""

    upstream: str
    url: str
    pin: str
    series: str
    dir: str
    naming: str
    branch: str = "master"
    pin_files: list[PinFileEntry] = field(default_factory=list)
    vendor: list[VendorCopy] = field(default_factory=list)
    allow_empty: bool = False
    undescribed: int = 0  # patches without a subject or a description (lint PC007/PC008)
    upstream_statuses: int = 0  # patches with a well-formed `Upstream-Status:` header (lint PC014)
    patch_count: int = 0
    found: list[str] = field(default_factory=list)
    unmapped: list[str] = field(default_factory=list)
    extra_files: dict[str, bytes] = field(default_factory=dict)  # e.g. a quilt `series` file


@dataclass(frozen=True)
class Plan:
    files: dict[str, bytes]  # repository-relative path -> content
    found: tuple[str, ...]
    unmapped: tuple[str, ...]
    pre_commit: str  # the .pre-commit-config.yaml snippet
    pre_commit_written: bool  # False: it exists, the snippet is to be printed


# ------------------------------------------------------------------ entry point


def plan(
    root: Path,
    templates: Path,
    layout: str | None,
    *,
    path: str | None = None,
    upstream_url: str | None = None,
    pin: str | None = None,
    name: str | None = None,
    action: str | None = None,
) -> Plan:
    """The files `patchctl init` writes in ROOT (nothing is written here). ACTION is the `uses:` of
    patchctl's action for the rendered workflows (OWNER/patchctl@COMMIT); None: unknown, left to fill in."""
    root = Path(root)
    if layout is None:
        detected = _new_repository(upstream_url, pin, name)
    elif layout == "makefile-sync":
        detected = detect_makefile_sync(root, path or "Makefile.sync", upstream_url, pin)
    elif layout == "quilt":
        detected = detect_quilt(root, path, upstream_url, pin, name)
    elif layout == "git-dir":
        if not path:
            raise UsageError("--from git-dir needs the patch directory: patchctl init --from git-dir DIR")
        detected = detect_git_dir(root, path, upstream_url, pin, name)
    else:
        raise UsageError(f"unknown layout {layout!r} (choose: {', '.join(LAYOUTS)})")
    if detected.url and (local := _local_repository(detected.url)) is not None:
        head = git.run(["symbolic-ref", "--quiet", "--short", "HEAD"], local, check=False)
        if head.ok and head.stdout.strip():
            detected.branch = head.stdout.strip()
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
    if action is None:
        detected.unmapped.append(
            f"workflows: action: which commit of patchctl's action the workflows call is unknown (this patchctl "
            f"was not installed from git): set it in {CONFIG_NAME} to OWNER/patchctl@COMMIT before "
            "`patchctl matrix render`"
        )
    files: dict[str, bytes] = {CONFIG_NAME: render_config(detected, layout, action).encode()}
    files.update(detected.extra_files)
    for template in sorted(Path(templates).glob("*.j2")):
        files[f"{TEMPLATES_DIR}/{template.name}"] = template.read_bytes()
    snippet = pre_commit_snippet(detected)
    exists = (root / PRE_COMMIT_NAME).exists() or (root / PRE_COMMIT_NAME).is_symlink()
    if not exists:
        files[PRE_COMMIT_NAME] = snippet.encode()
    return Plan(files, tuple(detected.found), tuple(detected.unmapped), snippet, not exists)


# ------------------------------------------------------------------ new repository


def _new_repository(url: str | None, pin: str | None, name: str | None) -> Layout:
    if (url is None) != (pin is None):
        raise UsageError("give both --upstream-url and --pin (or neither, for a matrix.yaml to fill in)")
    if url is None:
        return Layout("", "", "", "", "", "format-patch")
    upstream = name or _name_from_url(url)
    layout = Layout(upstream, url, _checked_pin(pin, url), upstream, f"patches/{upstream}", "format-patch")
    layout.allow_empty = True
    return layout


# ------------------------------------------------------------------ makefile-sync


@dataclass
class _Makefile:
    variables: dict[str, str]
    lines: dict[str, tuple[int, str]]  # variable -> (line number, raw line)
    rules: list[tuple[str, list[str], list[str]]]  # target, prerequisites, recipe lines


def parse_makefile(text: str) -> _Makefile:
    """Variables (last `=` wins, `?=` only when unset), and rules with their recipes."""
    variables: dict[str, str] = {}
    lines: dict[str, tuple[int, str]] = {}
    rules: list[tuple[str, list[str], list[str]]] = []
    logical: list[tuple[int, str]] = []
    buffer, start = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        if not buffer:
            start = number
        if raw.endswith("\\"):
            buffer += raw[:-1] + " "
            continue
        logical.append((start, buffer + raw))
        buffer = ""
    if buffer:
        logical.append((start, buffer))
    assign = re.compile(r"^(?:export\s+|override\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*(\?=|::=|:=|\+=|=)\s*(.*?)\s*$")
    rule_re = re.compile(r"^([^\s:=#][^:=]*?)\s*::?(?!=)\s*([^=]*)$")
    current: tuple[str, list[str], list[str]] | None = None
    for number, line in logical:
        if line.startswith("\t"):
            if current is not None:
                current[2].append(line.strip())
            continue
        current = None
        stripped = line.split("#", 1)[0].rstrip() if not line.lstrip().startswith("\t") else line
        if not stripped.strip():
            continue
        if match := assign.match(stripped):
            var, op, value = match.groups()
            if op == "?=" and var in variables:
                continue
            variables[var] = (variables.get(var, "") + " " + value).strip() if op == "+=" else value
            lines[var] = (number, line)
            continue
        if match := rule_re.match(stripped):
            target, prereqs = match.groups()
            current = (target.strip(), prereqs.split(), [])
            rules.append(current)
    return _Makefile(variables, lines, rules)


def _split_args(text: str) -> list[str]:
    depth, parts, current = 0, [], ""
    for char in text:
        if char in "({":
            depth += 1
        elif char in ")}":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return parts


MAX_EXPANSION_DEPTH = 64  # make itself stops a variable that refers to itself; real Makefiles nest a few levels
MAX_EXPANSION_BYTES = 1024 * 1024  # a value far past any URL, pin or path a vendoring Makefile holds
MAX_EXPANSION_STEPS = 100_000  # references and calls in one expansion: `A2=$(A1)$(A1)` doubles at each level


class ExpansionBound(Exception):  # noqa: N818 - a bound reached, not an error of the Makefile's syntax
    """A Makefile whose expansion goes past a bound (a variable that refers to itself, or that
    doubles at each level): `patchctl init` stops in one line."""


def expand(text: str, variables: dict[str, str], target: str = "", prereqs: list[str] | None = None) -> str:
    """Make's expansion of TEXT, for the variables and the few functions vendoring Makefiles
    use; raises ValueError naming anything else, ExpansionBound past the bounds above."""
    return _Expansion(variables, target, prereqs or []).expand(text, 0)


@dataclass
class _Expansion:
    variables: dict[str, str]
    target: str
    prereqs: list[str]
    steps: int = 0

    def expand(self, text: str, depth: int) -> str:
        out, i = "", 0
        while i < len(text):
            char = text[i]
            if char != "$" or i + 1 >= len(text):
                out += char
                i += 1
                continue
            nxt = text[i + 1]
            if nxt in "({":
                close = ")" if nxt == "(" else "}"
                level, j = 1, i + 2
                while j < len(text) and level:
                    level += {nxt: 1, close: -1}.get(text[j], 0)
                    j += 1
                if level:
                    raise ValueError(f"unbalanced {text[i:]!r}")
                out += self.call(text[i + 2 : j - 1], depth)
                i = j
            else:
                auto = {"@": self.target, "<": self.prereqs[0] if self.prereqs else "", "^": " ".join(self.prereqs)}
                if nxt in auto or nxt == "$":
                    out += auto.get(nxt, "$")
                elif nxt.isalnum():
                    out += self.variable(nxt, depth)
                else:
                    raise ValueError(f"make variable ${nxt} is not supported")
                i += 2
            if len(out) > MAX_EXPANSION_BYTES:
                raise ExpansionBound(f"expanding it gives more than {MAX_EXPANSION_BYTES:,} bytes")
        return out

    def variable(self, name: str, depth: int) -> str:
        self.steps += 1
        if depth >= MAX_EXPANSION_DEPTH:
            raise ExpansionBound(
                f"$({name}) nests more than {MAX_EXPANSION_DEPTH} levels deep (a variable that refers to itself?)"
            )
        if self.steps > MAX_EXPANSION_STEPS:
            raise ExpansionBound(f"expanding $({name}) takes more than {MAX_EXPANSION_STEPS:,} steps")
        return self.expand(self.variables.get(name, ""), depth + 1)

    def call(self, body: str, depth: int) -> str:
        def ex(value: str) -> str:
            return self.expand(value, depth + 1)

        function, _, rest = body.partition(" ")
        if not rest and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", body):
            return self.variable(body, depth)
        self.steps += 1
        if depth >= MAX_EXPANSION_DEPTH or self.steps > MAX_EXPANSION_STEPS:
            raise ExpansionBound(f"$({function} ...) nests more than {MAX_EXPANSION_DEPTH} levels or takes too long")
        args = _split_args(rest)
        if function == "addprefix" and len(args) == 2:
            return " ".join(ex(args[0]).strip() + w for w in ex(args[1]).split())
        if function == "addsuffix" and len(args) == 2:
            return " ".join(w + ex(args[0]).strip() for w in ex(args[1]).split())
        if function in ("realpath", "abspath", "strip"):
            return " ".join(w for a in args for w in ex(a).split())
        if function in ("lastword", "firstword") and len(args) == 1:
            items = ex(args[0]).split()
            return (items[-1] if function == "lastword" else items[0]) if items else ""
        if function == "notdir" and len(args) == 1:
            return " ".join(posixpath.basename(w) for w in ex(args[0]).split())
        if function == "dir" and len(args) == 1:
            return " ".join(posixpath.dirname(w) + "/" for w in ex(args[0]).split())
        if function == "wildcard" and len(args) == 1:
            return ex(args[0])
        raise ValueError(f"make function $({function} ...) is not supported")


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
    file = _inside(root, file, "--file")
    text = _text(root, file)
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
    pin, pin_note = _expand_pin(raw_pin, url)
    found.append(f"pin: {pin} (" + ("--pin" if pin_override else f"{file}: FETCH_HEAD") + ")")
    if pin_note:
        notes.append(pin_note)
    pin_files: list[PinFileEntry] = []
    if "FETCH_HEAD" in make.lines and _FULL_RE.match(value("FETCH_HEAD")) and value("FETCH_HEAD") == pin:
        line = make.lines["FETCH_HEAD"][1]
        prefix = line[: line.index(pin)]
        pin_files.append(PinFileEntry(file, "^" + _line_prefix(prefix) + "(?P<pin>[0-9a-f]{40})"))
        found.append(f"pin file: {file}:{make.lines['FETCH_HEAD'][0]} (FETCH_HEAD)")
    else:
        notes.append(f"{file}: FETCH_HEAD is not the full commit id: no pin_files entry (write the full id there)")
    patch_dir = ""
    for name, raw in var.items():
        match = re.search(r"\$\(wildcard\s+(\S+?)/\*\.(?:patch|diff)\s*\)", raw)
        if match:
            try:
                patch_dir = expand(match.group(1), var).strip().rstrip("/")
            except ValueError as exc:
                raise UsageError(f"{file}: {name}: {exc}") from None
            patch_dir = _inside(root, patch_dir, f"{file}: {name}")
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
    upstream = _name_from_url(url)
    series = posixpath.basename(posixpath.dirname(patch_dir)) or upstream
    naming, naming_notes, extra = _naming(root, patch_dir)
    layout = Layout(upstream, url, pin, series, patch_dir, naming, "master", pin_files, vendor)
    layout.found = found + [f"naming: {naming}"]
    layout.unmapped = notes + naming_notes
    layout.extra_files = extra
    layout.allow_empty = not _has_patches(root, layout.dir)
    return layout


def _line_prefix(prefix: str) -> str:
    """PREFIX (a line up to the pin) as a regex, any run of blanks as `\\s*`."""
    return re.sub(r"(?:\\[ \t])+", r"\\s*", re.escape(prefix))


def _kind_of(url: str, pin: str, path: str) -> str | None:
    """'blob' or 'tree' for PATH at PIN when the upstream is a local repository, else None."""
    local = _local_repository(url)
    if local is None or not _FULL_RE.match(pin):
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
        dest = _inside(root, dest, f"{file}: rule {target}: rsync destination")
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


# ------------------------------------------------------------------ quilt


def detect_quilt(root: Path, directory: str | None, url: str | None, pin: str | None, name: str | None) -> Layout:
    if directory is None:
        candidates = ["debian/patches", "patches"]
        directory = next((c for c in candidates if _kind(root, f"{c}/series") == "regular file"), "debian/patches")
    directory = _inside(root, directory.strip("/"), "--from quilt DIR")
    series_text = _text(root, f"{directory}/series")
    if series_text is None:
        raise UsageError(f"{directory}/series: no such file (give the quilt directory: --from quilt DIR)")
    if url is None or pin is None:
        raise UsageError(
            "--from quilt needs --upstream-url and --pin: the series applies to the package's upstream tree "
            "(a git repository of the original sources, e.g. one commit made from the orig tarball)"
        )
    entries = []
    notes = []
    for words in _quilt_lines(series_text):
        if len(words) > 1:
            notes.append(f"{directory}/series: {words[0]} has quilt options {' '.join(words[1:])!r}: ignored")
        if words[1:] and words[1:] != ["-p1"]:
            notes.append(f"{directory}/series: {words[0]}: patchctl applies every patch with -p1")
        entries.append(words[0])
        if _kind(root, f"{directory}/{words[0]}") != "regular file":
            notes.append(f"{directory}/series: {words[0]} is listed but missing")
    package = name or _debian_package(root) or root.resolve().name
    upstream = _safe_name(package)
    layout = Layout(upstream, url, _checked_pin(pin, url), upstream, directory, "quilt")
    layout.found = [
        f"series: {directory}/series ({len(entries)} patch(es))",
        f"upstream: {url} (--upstream-url)",
        f"pin: {layout.pin} (--pin)",
        "naming: quilt",
    ]
    layout.unmapped = notes
    layout.allow_empty = not entries
    return layout


def _quilt_lines(text: str) -> list[list[str]]:
    """The words of each line of a quilt `series` file (a patch name, then its options), comments dropped."""
    return [words for line in text.splitlines() if (words := line.split("#", 1)[0].split())]


def _debian_package(root: Path) -> str | None:
    changelog = _text(root, "debian/changelog")
    if changelog is not None:
        first = changelog.split("\n", 1)[0]
        match = re.match(r"^([a-z0-9][a-z0-9.+-]+) \(", first)
        if match:
            return match.group(1)
    return None


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


# ------------------------------------------------------------------ git-dir

_PIN_VAR_RE = re.compile(
    r"^(?:export\s+|override\s+)?(?P<name>[A-Za-z_][A-Za-z0-9_]*(?:VERSION|COMMIT|SHA|REV|REVISION|PIN|REF|HASH)"
    r"[A-Za-z0-9_]*)\s*(?:\?=|:=|::=|=)\s*(?P<value>[^\s#]+)\s*(?:#.*)?$",
    re.IGNORECASE,
)
_URL_VAR_RE = re.compile(
    r"^(?:export\s+|override\s+)?(?P<name>[A-Za-z_][A-Za-z0-9_]*(?:REPO|URL|UPSTREAM|REMOTE|GIT)[A-Za-z0-9_]*)"
    r"\s*(?:\?=|:=|::=|=)\s*(?P<value>\S+)\s*$",
    re.IGNORECASE,
)


def _makefiles(root: Path, directory: str) -> list[str]:
    names = []
    for folder in _unique([".", posixpath.dirname(directory) or "."]):
        for name in _files(root, folder):
            if name in ("Makefile", "GNUmakefile", "makefile") or name.endswith(".mk"):
                names.append(posixpath.normpath(f"{folder}/{name}"))
    return names


def _version_files(root: Path, directory: str) -> list[str]:
    names = []
    for folder in _unique([".", posixpath.dirname(directory) or "."]):
        for name in _files(root, folder):
            if re.fullmatch(r"[A-Za-z0-9_.-]*(VERSION|COMMIT|REV|PIN)[A-Za-z0-9_.-]*", name):
                info = Root(root).lstat(f"{folder}/{name}")
                if info is not None and info.st_size <= 200:
                    names.append(posixpath.normpath(f"{folder}/{name}"))
    return names


def detect_git_dir(root: Path, directory: str, url: str | None, pin: str | None, name: str | None) -> Layout:
    directory = _inside(root, directory.strip("/"), "--from git-dir DIR")
    if _kind(root, directory) != "directory":
        raise UsageError(f"{directory}: no such directory (--from git-dir DIR)")
    found: list[str] = []
    notes: list[str] = []
    pin_files: list[PinFileEntry] = []
    candidates: list[tuple[str, int, str, str, str]] = []  # file, line, variable, value, prefix
    url_found: tuple[str, str] | None = None
    for makefile in _makefiles(root, directory):
        text = _text(root, makefile) or ""
        for number, line in enumerate(text.splitlines(), 1):
            if match := _PIN_VAR_RE.match(line):
                candidates.append((makefile, number, match["name"], match["value"], line[: match.start("value")]))
            elif (match := _URL_VAR_RE.match(line)) and url_found is None:
                if re.match(r"^(https?://|git@|ssh://|git://|file://)", match["value"]):
                    url_found = (match["value"], f"{makefile}:{number} ({match['name']})")
            if url_found is None and (clone := re.search(r"\bgit clone\s+(?:-\S+\s+)*(\S+://\S+|git@\S+)", line)):
                url_found = (clone.group(1), f"{makefile}:{number} (git clone)")
    for version_file in _version_files(root, directory):
        words = (_text(root, version_file) or "").split()
        if len(words) == 1:
            candidates.append((version_file, 1, "", words[0], ""))
    hex_first = sorted(candidates, key=lambda c: (not _FULL_RE.match(c[3]), not _HEX_RE.match(c[3])))
    if url is None:
        if url_found is None:
            raise UsageError(f"no upstream URL found in the Makefiles beside {directory}: give --upstream-url")
        url = url_found[0]
        found.append(f"upstream: {url} ({url_found[1]})")
    else:
        found.append(f"upstream: {url} (--upstream-url)")
    if pin is None:
        if not hex_first:
            raise UsageError(
                "no pin found (a Makefile variable like LLAMA_VERSION?=<sha> or a version file): give --pin"
            )
        file, number, variable, value, prefix = hex_first[0]
        where = f"{file}:{number}" + (f" ({variable})" if variable else "")
        resolved, pin_note = _expand_pin(value, url)
        found.append(f"pin: {resolved} ({where})")
        if pin_note:
            notes.append(pin_note)
        if _FULL_RE.match(value) and value == resolved:
            pattern = "^" + _line_prefix(prefix) + "(?P<pin>[0-9a-f]{40})" + ("" if prefix else "$")
            pin_files.append(PinFileEntry(file, pattern))
            found.append(f"pin file: {where}")
        else:
            notes.append(f"{where}: holds {value!r}, not the full commit id: no pin_files entry")
        for other in hex_first[1:]:
            notes.append(f"{other[0]}:{other[1]}: {other[2] or 'value'} {other[3]!r} also looks like a pin: not used")
        pin = resolved
    else:
        pin = _checked_pin(pin, url)
        found.append(f"pin: {pin} (--pin)")
    upstream = name or _name_from_url(url)
    series = posixpath.basename(directory)
    if series in ("patches", "patch"):
        series = posixpath.basename(posixpath.dirname(directory)) or upstream
    naming, naming_notes, extra = _naming(root, directory)
    layout = Layout(_safe_name(upstream), url, pin, _safe_name(series), directory, naming, "master", pin_files)
    layout.found = found + [f"patches: {directory}", f"naming: {naming}"]
    layout.unmapped = notes + naming_notes
    layout.extra_files = extra
    layout.allow_empty = not _has_patches(root, layout.dir)
    return layout


# ------------------------------------------------------------------ shared


def _naming(root: Path, directory: str) -> tuple[str, list[str], dict[str, bytes]]:
    """The `naming:` the directory's files follow, notes, and a `series` file to add when
    only `quilt` (with a series file written in name order) describes them."""
    if _kind(root, f"{directory}/series") == "regular file":
        return "quilt", [], {}
    names = [n for n in _files(root, directory) if n.endswith((".patch", ".diff"))]
    if not names:
        return "format-patch", [f"{directory}: no *.patch file (allow_empty: true until the first one)"], {}
    numbers = [int(n[:4]) for n in names if PATCH_NAME_RE.match(n)]
    well_named = all(
        (m := PATCH_NAME_RE.match(n)) and len(m["slug"]) <= FORMAT_PATCH_SLUG_MAX and n.endswith(".patch")
        for n in names
    )
    if well_named and len(set(numbers)) == len(numbers) and 0 not in numbers:
        if all(STRICT_NAME_RE.match(n) for n in names) and sorted(numbers) == list(range(1, len(numbers) + 1)):
            return "strict", [], {}
        return "format-patch", [], {}
    series = "".join(f"{n}\n" for n in names).encode()
    return (
        "quilt",
        [f"{directory}: names are not NNNN-slug.patch with unique numbers: naming quilt, a series file lists them"],
        {f"{directory}/series": series},
    )


def _undescribed(root: Path, layout: Layout) -> tuple[int, int, int]:
    """(patches, those without a subject or a description, those with a well-formed
    `Upstream-Status:` header) in the layout's patch directory."""
    listed = layout.extra_files.get(f"{layout.dir}/series")
    if layout.naming == "quilt" and listed is None:
        listed = (_text(root, f"{layout.dir}/series") or "").encode()
    if layout.naming == "quilt" and listed is not None:
        names = [words[0] for words in _quilt_lines(listed.decode(errors="replace"))]
    else:
        names = [n for n in _files(root, layout.dir) if n.endswith(".patch")]
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


def _has_patches(root: Path, directory: str) -> bool:
    return any(n.endswith((".patch", ".diff")) for n in _files(root, directory))


def _inside(root: Path, path: str, what: str) -> str:
    """PATH (named by WHAT) as a path inside the repository ROOT, or UsageError: a layout
    never makes patchctl read or write outside it (`../victim`) or in `.git`."""
    if not path or path.startswith("/"):
        raise UsageError(f"{what}: {path!r} is not a path inside the repository")
    try:
        return "/".join(Root(root).parts(path, "use")) or "."
    except Refused as exc:
        raise UsageError(f"{what}: {exc}; a layout lives inside the repository") from None


def _text(root: Path, path: str) -> str | None:
    """The text of the repository file PATH (read through `Root`: no link, bounded), or None."""
    data = Root(root).read_bytes(path, MAX_LAYOUT_FILE_BYTES)
    return None if data is None else data.decode("utf-8", errors="replace")


def _kind(root: Path, path: str) -> str | None:
    try:
        return Root(root).kind(path)
    except Refused:
        return None


def _files(root: Path, directory: str) -> list[str]:
    """The names of the regular files in the repository directory DIRECTORY, sorted ([] when absent)."""
    confined = Root(root)
    names = [n for n in confined.listdir(directory) or [] if not is_dotgit(n)]
    return [n for n in names if (info := confined.lstat(f"{directory}/{n}")) and stat.S_ISREG(info.st_mode)]


def _expand_pin(value: str, url: str) -> tuple[str, str | None]:
    """VALUE as a full commit id when it is one or the upstream (a local repository) can
    expand it; else VALUE unchanged and a note saying it must be expanded."""
    if _FULL_RE.match(value):
        return value, None
    local = _local_repository(url)
    if local is not None:
        result = git.run(["rev-parse", "--verify", "--quiet", f"{value}^{{commit}}"], local, check=False)
        if result.ok and _FULL_RE.match(result.stdout.strip()):
            return result.stdout.strip(), None
    return value, (
        f"pin {value!r} is not a full 40-hex commit id and the upstream is not a local repository to expand it: "
        "replace it in matrix.yaml (git rev-parse it in a clone) or rerun with --pin"
    )


def _local_repository(url: str) -> Path | None:
    path = Path(url.removeprefix("file://")) if url.startswith("file://") or url.startswith("/") else None
    if path is not None and path.is_dir():
        return path
    return None


def _checked_pin(pin: str, url: str) -> str:
    resolved, note = _expand_pin(pin, url)
    if note is not None:
        raise UsageError(f"--pin {pin!r}: {note.split(': ', 1)[0]} must be a full 40-hex commit id")
    return resolved


def _name_from_url(url: str) -> str:
    tail = url.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
    return _safe_name(tail.removesuffix(".git") or "upstream")


def _safe_name(text: str) -> str:
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-._")
    return name or "upstream"


def q(text: str) -> str:
    """TEXT as a YAML scalar: plain where that reads back as the same string, else single-quoted."""
    if _PLAIN_RE.match(text) and text.lower() not in _YAML_WORDS and not re.fullmatch(r"[0-9.eE+-]+", text):
        return text
    return "'" + text.replace("'", "''") + "'"


def _flow(items: tuple[str, ...] | list[str]) -> str:
    return "[" + ", ".join(q(i) for i in items) + "]"


def workflows_section(action: str | None) -> list[str]:
    """matrix.yaml's `workflows:`: the published patchctl action the rendered workflows call."""
    lines = [
        "# The rendered workflows (`patchctl matrix render`) call patchctl's GitHub Action at this commit.",
        "# pin-sync can push with a GitHub App's token, so that its pull requests run CI (README:",
        '# "pin-sync as a bot"): add `pin_sync: {github_app: {client_id_var: VAR, private_key_secret: SECRET}}`.',
    ]
    if action is None:
        return lines + [
            "# workflows:",
            "#   action: OWNER/patchctl@COMMIT  # set the commit of the patchctl you use",
            "",
        ]
    return lines + ["workflows:", f"  action: {q(action)}", ""]


def render_config(layout: Layout, source: str | None, action: str | None = None) -> str:
    """matrix.yaml for LAYOUT, with a comment on every key."""
    out = [
        "# patchctl's single source of truth: upstream pins, patch series, CI build matrix.",
        "# Written by `patchctl init" + (f" --from {source}" if source else "") + "`; schema v1 (see the README).",
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
            *workflows_section(action),
        ]
        return "\n".join(out)
    out += [
        "upstreams:",
        f"  {q(layout.upstream)}:",
        f"    url: {q(layout.url)}  # where the upstream is fetched from (--upstream-url NAME=URL overrides it)",
        f"    branch: {q(layout.branch)}  # the branch `pin-sync --latest` and the canary follow",
        f"    pin: {q(layout.pin)}  # the commit the series apply to: a full 40-hex commit id",
    ]
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
        f"    naming: {layout.naming}  # format-patch: NNNN-slug.patch in name order; strict: no gaps,"
        " lower-case; quilt: the order of DIR/series",
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
                out.append(f"        filter: {q(merge) if merge else _flow(given)}")
            if copy.files:
                out.append("        # single upstream files rsync copies into it from elsewhere in the upstream")
                out.append("        files:")
                out += [f"          - {{from: {q(f.source)}, to: {q(f.dest)}}}" for f in copy.files]
    out += ["", *workflows_section(action)]
    return "\n".join(out)


def pre_commit_snippet(layout: Layout) -> str:
    """A .pre-commit-config.yaml running the installed patchctl (a `local` repo: no rev to pin)."""
    files = r"^(matrix\.yaml|templates/.*"
    if layout.dir:
        files += "|" + re.escape(layout.dir) + "/.*"
    files += ")$"
    lines = [
        "# patchctl's checks before each commit (https://pre-commit.com), run by the installed patchctl.",
        "repos:",
        "  - repo: local",
        "    hooks:",
        "      - id: patchctl-lint",
        "        name: patchctl lint",
        "        entry: patchctl lint --no-apply",
        "        language: system",
        "        pass_filenames: false",
        f"        files: {q(files)}",
    ]
    if layout.series:
        lines += [
            "      - id: patchctl-export-check",
            "        name: patchctl export --check",
            f"        entry: patchctl export --check {layout.series}",
            "        language: system",
            "        pass_filenames: false",
            f"        files: {q(files)}",
        ]
    if layout.vendor:
        lines += [
            "      - id: patchctl-vendor-check",
            "        name: patchctl vendor --check",
            "        entry: patchctl vendor --check",
            "        language: system",
            "        pass_filenames: false",
            "        always_run: true  # an edit anywhere in a vendored directory counts",
        ]
    return "\n".join(lines) + "\n"
