"""Export writes new and rewritten patches in the series' own conventions, read from its files:
diffstat or not, index line length, signature, From line and subject prefix. A rewritten patch
keeps its old file's; a new one takes the series' most common (the first file's on a tie);
the output is deterministic and unchanged patches keep their bytes."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from patchctl import git
from patchctl.series.patchset import PatchFile
from patchctl.series.patchstyle import PATCHCTL_STYLE, PatchStyle, detect, series_style

from .conftest import Project, Repo, numbered, ok

GIT_DEFAULT = ["--abbrev=10", "--signature=2.47.1"]  # what `git format-patch` writes with a git 2.47 (stat on)
PATCHCTL = ["--zero-commit", "--no-signature", "--full-index", "--no-stat"]


def mail(upstream: Repo, base: str, files: dict[str, str], subject: str, args: list[str]) -> str:
    """`git format-patch ARGS` of FILES committed on BASE in a scratch clone."""
    scratch = upstream.path.parent / f"mail-{abs(hash((base, subject)))}"
    shutil.rmtree(scratch, ignore_errors=True)
    git.run(["clone", "-q", str(upstream.path), str(scratch)], upstream.path.parent)
    try:
        git.run(["checkout", "-q", "--detach", base], scratch)
        Repo(scratch).write(files)
        git.commit_all(scratch, f"{subject}\n\nWhy.")
        return git.run(["format-patch", "-1", "--stdout", *args, "HEAD"], scratch).stdout
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main_c(changes: dict[int, str]) -> str:
    lines = numbered(40, "main").splitlines()
    for number, text in changes.items():
        lines[number - 1] = text
    return "\n".join(lines) + "\n"


def index_lengths(text: str) -> set[int]:
    return {len(m) for m in re.findall(r"^index ([0-9a-f]+)\.\.", text, re.MULTILINE)}


def recommit(project: Project, commits: list[tuple[str, dict[str, str]]]) -> None:
    """Replace the applied tree's commits on the pin with COMMITS (subject, files)."""
    tree = project.path / ".patchctl" / "trees" / "main"
    pin = re.search(r"pin: (\S+)", (project.path / "matrix.yaml").read_text())[1]
    git.run(["reset", "-q", "--hard", pin], tree)
    for subject, files in commits:
        Repo(tree).write(files)
        git.commit_all(tree, f"{subject}\n\nWhy.")


def export(project: Project) -> dict:
    return json.loads(ok("-C", project.path, "export", "main", "--json"))


def test_rewritten_and_new_patches_take_git_defaults_from_the_series(project: Project, upstream: Repo) -> None:
    pin = upstream.head
    first = mail(upstream, pin, {"src/main.c": main_c({5: "MAIN 5"})}, "Tune five", GIT_DEFAULT)
    second = mail(
        upstream, pin, {"src/util.c": numbered(30, "util").replace("util 7\n", "UTIL 7\n")}, "Tune util", GIT_DEFAULT
    )
    project.add_patch("0001-Tune-five.patch", first)
    project.add_patch("0002-Tune-util.patch", second)
    assert detect(PatchFile(Path("x.patch"), first.encode())) == PatchStyle(True, 10, "2.47.1", False, "PATCH")
    ok("-C", project.path, "apply")
    recommit(
        project,
        [
            ("Tune five", {"src/main.c": main_c({5: "MAIN 5"})}),
            ("Tune util", {"src/util.c": numbered(30, "util").replace("util 7\n", "UTIL SEVEN\n")}),
            ("Add hello", {"src/hello.c": "int hello;\n"}),
        ],
    )
    payload = export(project)
    assert payload["unchanged"] == ["0001-Tune-five.patch"]
    assert payload["written"] == ["0002-Tune-util.patch", "0003-Add-hello.patch"]
    assert (project.series_dir / "0001-Tune-five.patch").read_text() == first
    for name in payload["written"]:
        text = (project.series_dir / name).read_text()
        assert re.search(r"^ 1 file changed, ", text, re.MULTILINE), text  # the diffstat
        assert index_lengths(text) == {10}, text
        assert text.endswith("\n-- \n2.47.1\n\n") and text.count("\n-- \n") == 1
        assert not text.startswith("From 0000000000000000000000000000000000000000 ")
        assert re.search(r"^Subject: \[PATCH\] ", text, re.MULTILINE)
    assert " create mode 100644 src/hello.c" in (project.series_dir / "0003-Add-hello.patch").read_text()
    written = {name: (project.series_dir / name).read_bytes() for name in payload["written"]}
    # Deterministic: exporting again writes nothing; the check passes; the series applies.
    again = export(project)
    assert again["written"] == [] and len(again["unchanged"]) == 3
    assert {name: (project.series_dir / name).read_bytes() for name in written} == written
    assert ok("-C", project.path, "export", "main", "--check")
    assert ok("-C", project.path, "apply", "--force")


def test_a_mixed_series_keeps_each_files_style_and_a_tie_goes_to_the_first(project: Project, upstream: Repo) -> None:
    pin = upstream.head
    project.add_patch(
        "0001-Tune-five.patch", mail(upstream, pin, {"src/main.c": main_c({5: "MAIN 5"})}, "Tune five", PATCHCTL)
    )
    project.add_patch(
        "0002-Tune-thirty.patch",
        mail(
            upstream,
            pin,
            {"src/main.c": main_c({30: "MAIN 30"})},
            "Tune thirty",
            ["--abbrev=7", "--subject-prefix=", "--signature=2.43.0"],
        ),
    )
    existing = [PatchFile(p, p.read_bytes()) for p in sorted(project.series_dir.glob("*.patch"))]
    assert series_style(existing) == PATCHCTL_STYLE  # one each way: the first file's conventions
    ok("-C", project.path, "apply")
    recommit(
        project,
        [
            ("Tune five", {"src/main.c": main_c({5: "MAIN FIVE"})}),
            ("Tune thirty", {"src/main.c": main_c({5: "MAIN FIVE", 30: "MAIN THIRTY"})}),
            ("Tune forty", {"src/main.c": main_c({5: "MAIN FIVE", 30: "MAIN THIRTY", 40: "MAIN FORTY"})}),
        ],
    )
    payload = export(project)
    assert payload["written"] == ["0001-Tune-five.patch", "0002-Tune-thirty.patch", "0003-Tune-forty.patch"]
    own, bare, new = (project.series_dir / name for name in payload["written"])
    for path in (own, new):  # patchctl's conventions: the old file's, and the tie's for the new one
        text = path.read_text()
        assert index_lengths(text) == {40} and " 1 file changed" not in text and "\n-- \n" not in text
        assert text.startswith("From 0000000000000000000000000000000000000000 ") and "Subject: [PATCH] " in text
    text = bare.read_text()
    assert index_lengths(text) == {7} and " 1 file changed" in text and text.endswith("\n-- \n2.43.0\n\n")
    assert "\nSubject: Tune thirty\n" in text and not text.startswith("From 0000000000000000000000000000000000000000 ")
    assert ok("-C", project.path, "export", "main", "--check")
