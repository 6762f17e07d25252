"""Real downstreams' fixtures (`fixtures/downstreams/`, each with a FIXTURE.md naming its source
repository and commit) and the upstream repositories they patch, synthesized at test time: no
upstream source is committed. Each file a series touches is rebuilt from the series itself:
every hunk's preimage at its line, unique filler lines between, patch after patch (a later
patch's context taken back to the pristine file through the fillers, which stay unique). The
upstream repository gets that tree at one tag and, at the next, what the fixture says its next
release changed (lines inserted above a hunk, a backport taken in).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from patchctl import git

FIXTURES = Path(__file__).parent / "fixtures" / "downstreams"
_HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@ ?(.*)$")
# Indented: git's default funcname pattern (a line that starts with a letter, `_` or `$`) skips
# them, and takes the hunk's own context line, put above the hunk, as the patch has it.
_FILLER_RE = re.compile(r"^  filler \d+ of the upstream's file$")


@dataclass
class Hunk:
    old_start: int
    old: list[str]
    new: list[str]
    function: str = ""  # the text after the hunk header's second @@
    old_ends_without_newline: bool = False


@dataclass
class FileDiff:
    old_path: str | None  # None: a new file
    new_path: str | None  # None: a deleted file
    hunks: list[Hunk] = field(default_factory=list)


def file_diffs(text: str) -> list[FileDiff]:
    """The file diffs of a unified diff (header-less, quilt or format-patch), in order."""
    diffs: list[FileDiff] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            old = _path(lines[i][4:])
            new = _path(lines[i + 1][4:])
            diffs.append(FileDiff(old, new))
            i += 2
            continue
        match = _HUNK_RE.match(lines[i])
        if match and diffs:
            old_len = int(match.group(2) or 1)
            new_len = int(match.group(4) or 1)
            hunk = Hunk(int(match.group(1)), [], [], match.group(5))
            i += 1
            while i < len(lines) and (len(hunk.old) < old_len or len(hunk.new) < new_len):
                line = lines[i]
                if line.startswith("\\"):
                    hunk.old_ends_without_newline |= lines[i - 1][:1] in (" ", "-")
                    i += 1
                    continue
                tag, body = (line[:1], line[1:]) if line else (" ", "")
                if tag in " -":
                    hunk.old.append(body)
                if tag in " +":
                    hunk.new.append(body)
                i += 1
            if i < len(lines) and lines[i].startswith("\\"):  # the hunk's last line
                hunk.old_ends_without_newline |= lines[i - 1][:1] in (" ", "-")
                i += 1
            diffs[-1].hunks.append(hunk)
            continue
        i += 1
    return diffs


def _path(text: str) -> str | None:
    text = text.split("\t", 1)[0].strip()
    return None if text == "/dev/null" else text.split("/", 1)[1]


def pristine_files(patches: list[str]) -> dict[str, str]:
    """The files PATCHES touch, before the first of them: each preimage at its place."""
    pristine: dict[str, list[str]] = {}
    current: dict[str, list[str]] = {}
    unterminated: set[str] = set()
    counter = iter(range(1, 1_000_000))

    def filler() -> str:
        return f"  filler {next(counter)} of the upstream's file"

    for text in patches:
        for diff in file_diffs(text):
            if diff.old_path is None:
                current[diff.new_path or ""] = diff.hunks[0].new if diff.hunks else []
                continue
            path = diff.old_path
            if diff.new_path is None and path not in current:  # a deleted file: its whole text is the preimage
                pristine[path] = [line for hunk in diff.hunks for line in hunk.old]
                if diff.hunks and diff.hunks[-1].old_ends_without_newline:
                    unterminated.add(path)
                continue
            if path not in current:
                pristine[path] = [filler() for _ in range(3)]
                current[path] = list(pristine[path])
            lines, base = current[path], pristine[path]
            for hunk in diff.hunks:
                start = max(hunk.old_start - 1, 0)
                while len(lines) < start + len(hunk.old) + 3:  # the end: a filler more in both
                    extra = filler()
                    lines.append(extra)
                    base.append(extra)
                region = lines[start : start + len(hunk.old)]
                if region != hunk.old:
                    if not all(_FILLER_RE.match(line) for line in region):
                        raise AssertionError(f"{path}: a hunk at line {hunk.old_start} overlaps an earlier patch's")
                    for line, wanted in zip(region, hunk.old, strict=True):
                        base[base.index(line)] = wanted
                    lines[start : start + len(hunk.old)] = hunk.old
                if hunk.function and start > 0 and _FILLER_RE.match(lines[start - 1]):
                    base[base.index(lines[start - 1])] = hunk.function
                    lines[start - 1] = hunk.function
            offset = 0
            for hunk in diff.hunks:
                start = max(hunk.old_start - 1, 0) + offset
                lines[start : start + len(hunk.old)] = hunk.new
                offset += len(hunk.new) - len(hunk.old)
            if diff.new_path is None:
                current.pop(path)
    return {path: "\n".join(lines) + ("" if path in unterminated else "\n") for path, lines in pristine.items()}


def insert_lines(files: dict[str, str], path: str, before_line: int, count: int, what: str) -> dict[str, str]:
    """FILES with COUNT new lines (WHAT, numbered) inserted above line BEFORE_LINE of PATH."""
    lines = files[path].splitlines(keepends=True)
    added = [f"{what} {n}\n" for n in range(1, count + 1)]
    return {**files, path: "".join(lines[: before_line - 1] + added + lines[before_line - 1 :])}


def applied(files: dict[str, str], patch: str) -> dict[str, str]:
    """FILES with PATCH applied (git apply, strictly), as an upstream that took it in."""
    scratch = Path(subprocess.run(["mktemp", "-d"], capture_output=True, text=True, check=True).stdout.strip())
    try:
        for path, text in files.items():
            (scratch / path).parent.mkdir(parents=True, exist_ok=True)
            (scratch / path).write_text(text)
        subprocess.run(["git", "apply", "-p1", "-"], input=patch.encode(), cwd=scratch, check=True, capture_output=True)
        return {path: (scratch / path).read_text() for path in files if (scratch / path).exists()}
    finally:
        shutil.rmtree(scratch)


@dataclass
class Upstream:
    path: Path
    tags: dict[str, str]  # tag -> commit

    @property
    def url(self) -> str:
        return str(self.path)


def build_upstream(path: Path, releases: list[tuple[str, dict[str, str]]]) -> Upstream:
    """A git repository at PATH (branch main) with one commit per release, each tagged."""
    git.init_repo(path)
    tags = {}
    for number, (tag, files) in enumerate(releases):
        for old in [p for p in path.rglob("*") if p.is_file() and ".git" not in p.relative_to(path).parts]:
            old.unlink()
        for name, text in files.items():
            (path / name).parent.mkdir(parents=True, exist_ok=True)
            (path / name).write_text(text)
        tags[tag] = git.commit_all(path, f"release {tag}", date=f"2025-0{number + 1}-01T12:00:00+00:00")
        git.run(["tag", tag], path)
    return Upstream(path, tags)


def checkout(name: str, into: Path, edit: Callable[[Path], None] | None = None) -> Path:
    """The fixture NAME as a git repository at INTO (one commit), after EDIT when given. A
    fixture's `.gitignore` is kept as `dot-gitignore` (a feedstock's ignores `*`: in this
    repository it would hide the fixture's own files) and committed as a feedstock has it."""
    shutil.copytree(FIXTURES / name, into, ignore=shutil.ignore_patterns("FIXTURE.md"))
    git.init_repo(into)
    if (into / "dot-gitignore").exists():
        (into / "dot-gitignore").rename(into / ".gitignore")
        git.run(["add", "--force", "--", ".gitignore"], into)
    if edit is not None:
        edit(into)
    git.commit_all(into, f"{name} as its maintainers keep it")
    return into


def patches_of(root: Path, directory: str, names: list[str] | None = None) -> list[str]:
    folder = root / directory
    chosen = names or sorted(p.name for p in folder.iterdir() if p.suffix in (".patch", ".diff"))
    return [(folder / name).read_text() for name in chosen]
