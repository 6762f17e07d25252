"""docs/guides/reading-a-stop.md stays true: its two stops are what pin-sync prints.

* The realistic one (`fixtures_stops.buffer_bump`) is made again and compared byte for byte.
* The real one is Electron's nan bump (electron/electron 418b8235bc, "chore: bump nan to 2.23.0":
  its series at 471a14432f, nodejs/nan e14bdcd1f72d to 675cefebca42). It is made again from
  clones of both repositories where this machine has them (PATCHCTL_ELECTRON_GIT and
  PATCHCTL_NAN_GIT, or the `fetch` mirrors under /work/.mirror) and compared byte for byte;
  everywhere, each line of it the guide explains must have the form pin-sync prints today
  (checked against the realistic stop, made here)."""

from __future__ import annotations

import os
import re
import subprocess
import textwrap
from pathlib import Path

import pytest

from patchctl import git

from .conftest import Project, Repo
from .fixtures_stops import buffer_bump

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "guides" / "reading-a-stop.md"
MIRRORS = Path(os.environ.get("PATCHCTL_TEST_MIRRORS", "/work/.mirror"))
ELECTRON_GIT = Path(os.environ.get("PATCHCTL_ELECTRON_GIT", MIRRORS / "electron+electron" / "repo"))
NAN_GIT = Path(os.environ.get("PATCHCTL_NAN_GIT", MIRRORS / "nodejs+nan" / "repo"))
ELECTRON_SERIES_AT = "471a14432f"  # the commit before Electron's bump: its nan series and pin
NAN_OLD = "e14bdcd1f72d62bca1d541b66da43130384ec213"
NAN_NEW = "675cefebca42410733da8a454c8d9391fcebfbc2"  # nan 2.23.0, where Electron moved

# The lines the guide explains, in the form pin-sync prints them (a stop's report and its error line).
SHAPES = {
    "error": r"patchctl: error: pin-sync of \S+ stops at a conflict: \S+/\S+: conflict \(3-way merge conflict in .+; "
    r"the patch's .+ hunk #\d+ @@ .+ @@ \(line \d+ of \S+\).*\); see the report for what to do",
    "headline": r"## pin-sync \S+: ❌ stopped at a conflict",
    "pins": r"- old pin: `[0-9a-f]{12}`",
    "count": r"- upstream commits in between: \d+",
    "patch row": r"\| \S+ \| .+ \| conflict \| 3-way merge conflict in .+; the patch's .+ hunk #\d+ @@ .+ @@ "
    r"\(line \d+ of .+\).*; markers at .+:\d+-\d+ \|",
    "why": r"### Why it stopped",
    "hunk": r"- `[^`]+` hunk #\d+ `@@ -\d+,\d+ \+\d+,\d+ @@` \(lines \d+-\d+ at the old pin\), "
    r"changed upstream by:",
    "commit": r"  - `[0-9a-f]{12}` `.+` \(\d{4}-\d\d-\d\d\)( <https://github\.com/[^/]+/[^/]+/commit/[0-9a-f]{40}>)?",
    "range-diff": r"git range-diff: at the end: computed once, when every patch is carried and the gates pass",
    "resolve": r"- resolve the conflict in \.patchctl/sync/\S+: edit .+ and remove the markers",
    "drop": r"- to drop the patch instead: `patchctl pin-sync \S+ --continue --drop` \(it undoes the patch's merge; "
    r"said in the report\)",
}


def guide_block(name: str) -> str:
    """The fenced block that follows `<!-- stop: NAME -->` in the guide."""
    found = re.search(rf"<!-- stop: {re.escape(name)} -->\n(`{{3,}})\w*\n(.*?)\n\1\n", GUIDE.read_text(), re.DOTALL)
    assert found, f"no block {name} in {GUIDE}"
    return found.group(2) + "\n"


def printed(result) -> str:
    """What a terminal shows of a stop: the error line (stderr), then the report (stdout)."""
    return result.stderr + "\n" + result.stdout


def realistic_stop(tmp_path: Path, cli) -> str:
    upstream = Repo(tmp_path / "upstream")
    upstream.commit({"README.md": "# upstream\n"}, "initial")
    project = Project(tmp_path / "project", upstream, upstream.head)
    buffer_bump(project, upstream)
    result = cli("-C", project.path, "pin-sync", "up", "--latest")
    assert result.exit_code == 1, result.output
    return printed(result)


def test_the_realistic_stop_is_what_pin_sync_prints(tmp_path: Path, cli) -> None:
    assert guide_block("buffer") == realistic_stop(tmp_path, cli)


def test_every_line_the_guide_explains_has_the_form_pin_sync_prints(tmp_path: Path, cli) -> None:
    real, made = guide_block("nan").splitlines(), realistic_stop(tmp_path, cli).splitlines()
    for name, shape in SHAPES.items():
        pattern = re.compile(shape)
        assert any(pattern.fullmatch(line) for line in real), f"the guide's nan stop has no {name} line: {shape}"
        assert any(pattern.fullmatch(line) for line in made), f"pin-sync no longer prints a {name} line: {shape}"


def nan_project(path: Path) -> Path:
    """A project carrying Electron's nan series as it was before its bump, pinned where it was."""
    series = path / "patches" / "nan"
    series.mkdir(parents=True)

    def show(spec: str) -> bytes:  # a bare clone, named as such (git refuses to find one by itself)
        return subprocess.run(
            ["git", "--git-dir", str(ELECTRON_GIT), "show", spec], check=True, capture_output=True
        ).stdout

    names = show(f"{ELECTRON_SERIES_AT}:patches/nan/.patches").decode()
    for name in names.split():
        (series / name).write_bytes(show(f"{ELECTRON_SERIES_AT}:patches/nan/{name}"))
    (series / "series").write_text(names)
    (path / "matrix.yaml").write_text(
        textwrap.dedent(
            f"""\
            version: 1
            upstreams:
              nan:
                url: {NAN_GIT}
                branch: main
                pin: {NAN_OLD}
                ci:
                  url: https://github.com/nodejs/nan
                  branch: main
            series:
              nan:
                upstream: nan
                dir: patches/nan
                naming: quilt
            """
        )
    )
    git.init_repo(path)
    git.commit_all(path, "Electron's nan patches")
    return path


@pytest.mark.skipif(
    not (ELECTRON_GIT / "HEAD").exists() or not (NAN_GIT / "HEAD").exists(),
    reason="needs clones of electron/electron and nodejs/nan (PATCHCTL_ELECTRON_GIT, PATCHCTL_NAN_GIT)",
)
def test_the_real_stop_is_what_pin_sync_prints(tmp_path: Path, cli) -> None:
    project = nan_project(tmp_path / "electron")
    result = cli("-C", project, "pin-sync", "nan", "--to", NAN_NEW)
    assert result.exit_code == 1, result.output
    assert guide_block("nan") == printed(result)
