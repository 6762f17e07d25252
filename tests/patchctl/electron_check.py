"""Electron's own patch check, redone here: what `script/check-patch-diff.ts` (electron/electron,
main: it runs `script/export_all_patches.py --dry-run`) says about a patch directory.

Electron imports a directory with `git am --keep-non-patch --keep-cr` (script/lib/git.py
`am`), each patch of `.patches` in order, with two lines (`Patch-Dir: DIR`, `Patch-Filename:
NAME`) put before the patch's first `diff -`/`---` line so that the file name survives an edit
of the subject. Its exporter runs `git format-patch --keep-subject --no-stat --stdout
--no-signature --zero-commit --full-index` with rename detection on and an attributes file
giving `*.m`/`*.mm` the objc diff driver, splits the output at `From <sha> ` lines, drops
the location lines (and the blank line before them, except right after `Subject:`), cuts
trailing newlines to one, and names each patch by its `Patch-Filename:` (or by its subject,
munged). The dry run fails naming every patch whose file differs.

These are the facts of Electron's scripts, written anew for the tests: a patch directory that
passes here passes Electron's CI check on the same upstream tree.
"""

from __future__ import annotations

import re
from pathlib import Path

from patchctl import git

ATTRIBUTES = "*.mm diff=objc\n*.m diff=objc\n"
_EXPORT = [
    "format-patch",
    "--keep-subject",
    "--no-stat",
    "--stdout",
    "--no-signature",
    "--zero-commit",
    "--full-index",
]
_LOCATION = ("Patch-Dir: ", "Patch-Filename: ")


def import_patches(repo: Path, patch_dir: Path, label: str = "src/electron/patches/x") -> None:
    """`git-import-patches PATCH_DIR` in REPO (raises on a patch git am refuses)."""
    names = [line.rstrip("\n") for line in (patch_dir / ".patches").read_text().splitlines(keepends=True)]
    mails = []
    for name in names:
        out, placed = [], False
        for line in (patch_dir / name).read_text().splitlines(keepends=True):
            if not placed and (line.startswith("diff -") or line.startswith("---")):
                out += [f"Patch-Dir: {label}\n", f"Patch-Filename: {name}\n"]
                placed = True
            out.append(line)
        mails.append("".join(out))
    git.run(
        ["-c", "user.name=Electron Scripts", "-c", "user.email=scripts@electron", "-c", "commit.gpgsign=false"]
        + ["am", "--keep-non-patch", "--keep-cr"],
        repo,
        input="".join(mails),
    )


def exported(repo: Path, since: str, attributes: Path) -> dict[str, str]:
    """What Electron's exporter writes for SINCE..HEAD in REPO: file name -> text, in order."""
    out = git.run(
        ["-c", f"core.attributesfile={attributes}", "-c", "diff.renames=true", *_EXPORT, since], repo, binary=True
    ).stdout.decode("utf-8")
    patches: list[list[str]] = []
    for line in out.splitlines(keepends=True):
        if re.match(r"^From [0-9a-f]+ ", line):
            patches.append([])
        patches[-1].append(line)
    files = {}
    for lines in patches:
        files[_file_name(lines)] = "".join(_without_location(lines)).rstrip("\n") + "\n"
    return files


def stale(repo: Path, base: str, patch_dir: Path, scratch: Path) -> list[str]:
    """Electron's dry run on PATCH_DIR after importing it onto BASE in REPO: the names of the
    patches it calls stale (a file that differs, or one the directory lacks), [] when it passes."""
    git.run(["checkout", "-q", "--detach", base], repo)
    import_patches(repo, patch_dir)
    attributes = scratch / "electron.gitattributes"
    attributes.write_text(ATTRIBUTES)
    bad = []
    for name, text in exported(repo, base, attributes).items():
        path = patch_dir / name
        if not path.is_file() or path.read_text() != text:
            bad.append(name)
    return bad


def _file_name(lines: list[str]) -> str:
    for line in lines:
        if line.startswith("Patch-Filename: "):
            return line[len("Patch-Filename: ") :].rstrip("\n")
    for line in lines:
        if line.startswith("Subject: "):
            subject = line[len("Subject: ") :].rstrip("\n").removesuffix(".patch")
            return re.sub(r"[^A-Za-z0-9-]+", "_", subject).strip("_").lower() + ".patch"
    raise AssertionError("a mail without a subject")


def _without_location(lines: list[str]):
    keep_next = False
    for number, line in enumerate(lines):
        following = lines[number + 1] if number + 1 < len(lines) else ""
        drop = line.startswith(_LOCATION) or (following.startswith(_LOCATION) and not line.rstrip())
        if keep_next or not drop:
            yield line
        keep_next = line.startswith("Subject: ")
