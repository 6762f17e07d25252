"""Electron-style downstreams for the suite: real patch directories of electron/electron, on
small synthetic upstreams that stand in for the real repositories (which the suite cannot
fetch: GitHub is not reachable from where it runs, and no upstream source is committed).

A fixture (`fixtures/electron/NAME/`) holds:

* `SOURCE`: the repositories and commits everything was taken from;
* `before/patches/...`: Electron's patch directory (`.patches`, the patch files) and its
  `config.json` (reduced to that directory's entry) at the commit before a real bump of the
  upstream in Electron's history; `after/...`: the same directory as Electron committed it
  with the bump (the patches it kept, as its own exporter rewrote them on the new upstream);
* `upstream.json`: a skeleton of the upstream at the old and at the new commit, for the files
  the patches touch. A line of the real file is kept when its text stands in one of the
  patches (a hunk line, or a hunk header's function name), so the skeleton holds no upstream
  text the patch files do not already hold; every other line is a filler (`//~N`), the same
  filler on both sides where the real line did not change. Line numbers are the real ones, so
  the patches' hunks apply where they do upstream, and the upstream's change between the two
  commits stays where it was (lines inserted, removed or moved around the patches).

The skeleton's blobs are not the real ones, so the patch files' `index` lines are rewritten
for it (`adapted`): every other byte is Electron's (`regenerate` checks that, running Electron's
import and export on the skeleton). `regenerate` is run by hand where the three repositories
are at hand (`python -m tests.patchctl.electron_fixture DIR...`); the suite only reads.
"""

from __future__ import annotations

import difflib
import json
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from patchctl import git

from . import electron_check

FIXTURES = Path(__file__).parent / "fixtures" / "electron"
FILLER = "//~"


@dataclass(frozen=True)
class Bump:
    """One real bump in Electron's history: its patch directory before and after it."""

    name: str  # the fixture's directory
    patch_dir: str  # Electron's directory (patches/NAME)
    electron_commit: str  # the commit of electron/electron that bumps it
    upstream_repo: str  # owner/name on GitHub
    old: str  # the upstream commit before the bump (Electron's DEPS)
    new: str  # and after it
    keep: tuple[str, ...] = ()  # a subset of the patches, when the directory is cut down


BUMPS = {
    "nan": Bump(
        "nan",
        "patches/nan",
        "418b8235bcc230ad88e27674b6cf3698c4339221",
        "nodejs/nan",
        "e14bdcd1f72d62bca1d541b66da43130384ec213",
        "675cefebca42410733da8a454c8d9391fcebfbc2",
    ),
    "squirrel.mac": Bump(
        "squirrel.mac",
        "patches/squirrel.mac",
        "ea095423804d195870a7371bda11a6aed1402fc3",
        "Squirrel/Squirrel.Mac",
        "0e5d146ba13101a1302d59ea6e6e0b3cace4ae38",
        "8d808803bc89ec0e2aa1450474856dfee3b00c6b",
    ),
}


# ---------------------------------------------------------------- the suite's side


def build_upstream(fixture: Path, into: Path) -> tuple[str, str]:
    """The skeleton upstream as a git repository: (old commit, new commit); HEAD at the new one,
    branch `main`."""
    files = json.loads((fixture / "upstream.json").read_text())["files"]
    into.mkdir(parents=True)
    git.init_repo(into)
    commits = []
    for side in ("old", "new"):
        for path, entry in files.items():
            target = into / path
            text = materialize(entry, side)
            if text is None:
                if target.exists():
                    target.unlink()
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        commits.append(git.commit_all(into, f"upstream skeleton ({side} commit)"))
    git.run(["branch", "-q", "-M", "main"], into)
    return commits[0], commits[1]


def materialize(entry: dict, side: str) -> str | None:
    """The skeleton file ENTRY on SIDE (`old` or `new`), or None when it is absent there."""
    old = _expand(entry["old"], None) if entry["old"] is not None else None
    if side == "old":
        lines = old
    else:
        lines = _expand(entry["new"], old) if entry["new"] is not None else None
    if lines is None:
        return None
    eol = entry[f"{side}_eol"]
    return "\n".join(lines) + ("\n" if eol and lines else "")


def _expand(tokens: list, old: list[str] | None) -> list[str]:
    lines: list[str] = []
    for token in tokens:
        if isinstance(token, str):
            lines.append(token)
        elif isinstance(token, int):  # fillers for lines the patches never show
            start = len(lines) + 1
            lines += [f"{FILLER}{'n' if old is not None else ''}{start + i}" for i in range(token)]
        else:  # [a, b]: the old skeleton's lines a..b-1, unchanged upstream
            assert old is not None
            lines += old[token[0] : token[1]]
    return lines


# ---------------------------------------------------------------- regenerating (by hand)


def kept_lines(patch_texts: list[str]) -> tuple[set[str], set[str]]:
    """The line texts the patches show (hunk lines without their prefix) and their hunk
    headers' function names."""
    kept, sections = set(), set()
    for text in patch_texts:
        in_hunk = False
        for line in text.split("\n"):
            if line.startswith("@@ "):
                in_hunk = True
                match = re.match(r"^@@ [^@]* @@ ?(.*)$", line)
                if match and match[1]:
                    sections.add(match[1])
                continue
            if line.startswith("diff --git "):
                in_hunk = False
            elif in_hunk and line[:1] in (" ", "+", "-"):
                kept.add(line[1:])
    return kept, sections


def _keep(line: str, kept: set[str], sections: set[str]) -> bool:
    return line in kept or line.rstrip()[:80] in sections or any(line.startswith(s) for s in sections if len(s) > 8)


def skeleton_entry(old_text: str | None, new_text: str | None, kept: set[str], sections: set[str]) -> dict:
    old_real = old_text.split("\n") if old_text is not None else None
    new_real = new_text.split("\n") if new_text is not None else None
    entry: dict = {
        "old_eol": bool(old_text and old_text.endswith("\n")),
        "new_eol": bool(new_text and new_text.endswith("\n")),
    }
    for real, eol in ((old_real, entry["old_eol"]), (new_real, entry["new_eol"])):
        if real is not None and eol:
            real.pop()
    entry["old"] = _fresh_tokens(old_real, kept, sections) if old_real is not None else None
    if new_real is None:
        entry["new"] = None
    elif old_real is None:
        entry["new"] = _fresh_tokens(new_real, kept, sections)
    else:
        tokens: list = []
        matcher = difflib.SequenceMatcher(None, old_real, new_real, autojunk=False)
        for tag, a1, a2, b1, b2 in matcher.get_opcodes():
            if tag == "equal":
                tokens.append([a1, a2])
            elif tag in ("replace", "insert"):
                tokens += _fresh_tokens(new_real[b1:b2], kept, sections)
        entry["new"] = tokens
    return entry


def _fresh_tokens(lines: list[str], kept: set[str], sections: set[str]) -> list:
    tokens: list = []
    for line in lines:
        if _keep(line, kept, sections):
            tokens.append(line)
        elif tokens and isinstance(tokens[-1], int):
            tokens[-1] += 1
        else:
            tokens.append(1)
    return tokens


def regenerate(bump: Bump, electron: Path, upstream: Path) -> None:
    """Write `fixtures/electron/NAME/` from the repositories ELECTRON and UPSTREAM (clones)."""
    out = FIXTURES / bump.name
    shutil.rmtree(out, ignore_errors=True)

    def show(repo: Path, rev: str, path: str) -> str | None:
        result = git.run(["show", f"{rev}:{path}"], repo, check=False, binary=True)
        return result.stdout.decode("utf-8") if result.ok else None

    sides = {"before": f"{bump.electron_commit}^", "after": bump.electron_commit}
    texts: dict[str, dict[str, str]] = {}
    for side, rev in sides.items():
        names = show(electron, rev, f"{bump.patch_dir}/.patches").split()  # type: ignore[union-attr]
        if bump.keep and side == "before":
            names = [n for n in names if n in bump.keep]
        texts[side] = {name: show(electron, rev, f"{bump.patch_dir}/{name}") for name in names}  # type: ignore[misc]
    every = [t for side in texts.values() for t in side.values()]
    kept, sections = kept_lines(every)
    paths = sorted({m for t in every for m in re.findall(r"^diff --git a/(\S+) b/", t, re.M)})
    files = {}
    for path in paths:
        old, new = show(upstream, bump.old, path), show(upstream, bump.new, path)
        if old is None and new is None:
            continue  # a file the patches create
        files[path] = skeleton_entry(old, new, kept, sections)
    out.mkdir(parents=True)
    (out / "upstream.json").write_text(json.dumps({"files": files}, indent=None, separators=(",", ":")) + "\n")
    with tempfile.TemporaryDirectory() as scratch:
        tree = Path(scratch) / "up"
        old_commit, new_commit = build_upstream(out, tree)
        for side, base in (("before", old_commit), ("after", new_commit)):
            directory = out / side / bump.patch_dir
            directory.mkdir(parents=True)
            (directory / ".patches").write_text("".join(f"{n}\n" for n in texts[side]))
            for name, text in texts[side].items():
                (directory / name).write_text(text)
            git.run(["checkout", "-q", "--detach", base], tree)
            electron_check.import_patches(tree, directory)
            attributes = Path(scratch) / "attributes"
            attributes.write_text(electron_check.ATTRIBUTES)
            adapted = electron_check.exported(tree, base, attributes)
            assert list(adapted) == list(texts[side]), (side, list(adapted))
            for name, text in adapted.items():
                assert _without_index(text) == _without_index(texts[side][name]), (side, name)
                (directory / name).write_text(text)
    config = json.loads(show(electron, sides["before"], "patches/config.json"))  # type: ignore[arg-type]
    entry = [e for e in config if e["patch_dir"].endswith("/" + bump.patch_dir)]
    (out / "before" / "patches" / "config.json").write_text(json.dumps(entry, indent=2) + "\n")
    (out / "SOURCE").write_text(
        f"Patch directory: https://github.com/electron/electron/tree/{sides['before']}/{bump.patch_dir}\n"
        f"  before: electron/electron {bump.electron_commit}^ (the commit before the bump)\n"
        f"  after:  electron/electron {bump.electron_commit} (the bump: patches as Electron rewrote them)\n"
        f"Upstream: https://github.com/{bump.upstream_repo}, {bump.old} -> {bump.new}\n"
        "upstream.json: a skeleton of the files the patches touch at both commits (lines the patches show, the\n"
        "rest fillers); the patches' index lines are rewritten for its blobs (tests/patchctl/electron_fixture.py).\n"
        + (f"Cut down to the patches: {', '.join(bump.keep)}\n" if bump.keep else "")
    )


def _without_index(text: str) -> str:
    return re.sub(r"^index [0-9a-f]+\.\.[0-9a-f]+", "index", text, flags=re.M)


if __name__ == "__main__":  # python -m tests.patchctl.electron_fixture ELECTRON_CLONE NAME=UPSTREAM_CLONE...
    electron_repo = Path(sys.argv[1])
    for argument in sys.argv[2:]:
        name, _, upstream_repo = argument.partition("=")
        regenerate(BUMPS[name], electron_repo, Path(upstream_repo))
        subprocess.run(["du", "-sh", str(FIXTURES / name)], check=False)
