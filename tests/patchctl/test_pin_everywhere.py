"""One pin, moved everywhere (issue 43, item 3): pin-sync under either `--upstream-source` moves
every place matrix.yaml and the repository state the upstream's revision (`pin`, the `ci:`
block's `pin`, `pin_files`), so that on its branch every check CI runs passes: `lint` and
`export --check` under the source that moved, and under the other source they pass too or say
in one line (exit 3) that this source cannot serve the new pin, never a stale series (PC009).

The sources here: github.com is a live repository (`ci:`), the embedded default a frozen
mirror of it (made at the old pin, as llama-cpp-python's sdists are frozen at a release) or
a mirror that follows it (then both sources serve the new pin).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from patchctl import git

from .conftest import Project, Repo, one_line_error
from .fixtures_sync import add_line20_patch, main_c, write_config

PIN_FILE = "Makefile"


def mirror_of(upstream: Repo, into: Path) -> Path:
    subprocess.run(["git", "clone", "-q", "--bare", str(upstream.path), str(into)], check=True)
    return into


def set_up(project: Project, upstream: Repo, default_url: Path, *, ci_pin: bool) -> str:
    """The line-20 series on an upstream with a `ci:` source; then the upstream inserts lines
    edits a context line of its hunk, so that a pin-sync rewrites the patch."""
    pin = upstream.head
    add_line20_patch(project, upstream, pin)
    (project.path / PIN_FILE).write_text(f"UPSTREAM_COMMIT = {pin}\n")
    ci = f"ci:\n  url: {upstream.path}\n  branch: main\n" + (f"  pin: '{pin}'\n" if ci_pin else "")
    pin_files = f"pin_files:\n  - {{path: {PIN_FILE}, pattern: 'UPSTREAM_COMMIT = (?P<pin>[0-9a-f]{{40}})'}}\n"
    write_config(project, pin, up_extra=ci + pin_files)
    text = (project.path / "matrix.yaml").read_text().replace(f"url: {upstream.path}\n", f"url: {default_url}\n", 1)
    (project.path / "matrix.yaml").write_text(text)
    git.commit_all(project.path, "the series at its pin")
    return upstream.commit({"src/main.c": main_c({18: "main 18 edited"})}, "upstream: a context line edited")


def pins(project: Project) -> dict[str, str]:
    up = yaml.safe_load((project.path / "matrix.yaml").read_text())["upstreams"]["up"]
    found = {"pin": up["pin"], PIN_FILE: (project.path / PIN_FILE).read_text().split()[-1]}
    if "pin" in up["ci"]:
        found["ci.pin"] = up["ci"]["pin"]
    return found


def check(cli, project: Project, source: str):
    lint = cli("-C", project.path, "--upstream-source", source, "lint")
    export = cli("-C", project.path, "--upstream-source", source, "export", "main", "--check")
    return lint, export


@pytest.mark.parametrize("ci_pin", [True, False], ids=["ci-block-with-its-own-pin", "ci-block-sharing-the-pin"])
def test_pin_sync_under_ci_moves_every_pin_and_the_default_source_says_it_cannot_serve_it(
    tmp_path: Path, project: Project, upstream: Repo, cli, ci_pin: bool
) -> None:
    frozen = mirror_of(upstream, tmp_path / "frozen-default.git")
    tip = set_up(project, upstream, frozen, ci_pin=ci_pin)
    old_patch = (project.series_dir / "0001-patch-line-twenty.patch").read_text()

    sync = cli("-C", project.path, "--upstream-source", "ci", "pin-sync", "up", "--latest")
    assert sync.exit_code == 0, sync.output
    assert set(pins(project).values()) == {tip}, pins(project)
    assert (project.series_dir / "0001-patch-line-twenty.patch").read_text() != old_patch  # rewritten
    git.commit_all(project.path, "pin-sync: move up forward")

    lint, export = check(cli, project, "ci")
    assert lint.exit_code == 0, lint.output
    assert export.exit_code == 0, export.output
    # The frozen default has no such commit: one line, exit 3, the source that can serve it named;
    # never PC009 on a patch that is fine, nor "export --check: drift".
    for result in check(cli, project, "default"):
        line = one_line_error(result, 3)
        assert f"cannot serve the pin {tip[:12]}" in line and "--upstream-source ci" in line, line
        assert "PC009" not in result.output


def test_a_default_source_that_has_the_commit_passes_too(tmp_path: Path, project: Project, upstream: Repo, cli) -> None:
    following = mirror_of(upstream, tmp_path / "following-default.git")
    tip = set_up(project, upstream, following, ci_pin=True)
    subprocess.run(["git", "-C", str(upstream.path), "push", "-q", str(following), "HEAD:main"], check=True)
    sync = cli("-C", project.path, "--upstream-source", "ci", "pin-sync", "up", "--latest")
    assert sync.exit_code == 0, sync.output
    git.commit_all(project.path, "pin-sync: move up forward")
    assert set(pins(project).values()) == {tip}
    for source in ("ci", "default"):
        for result in check(cli, project, source):
            assert result.exit_code == 0, (source, result.output)


def test_pin_sync_under_the_default_source_moves_the_ci_pin_too(
    tmp_path: Path, project: Project, upstream: Repo, cli
) -> None:
    following = mirror_of(upstream, tmp_path / "following-default.git")
    tip = set_up(project, upstream, following, ci_pin=True)
    subprocess.run(["git", "-C", str(upstream.path), "push", "-q", str(following), "HEAD:main"], check=True)
    sync = cli("-C", project.path, "pin-sync", "up", "--latest")
    assert sync.exit_code == 0, sync.output
    assert set(pins(project).values()) == {tip}, pins(project)


def test_a_wrong_pin_without_a_second_source_stays_a_configuration_error(project: Project, upstream: Repo, cli) -> None:
    """Only an upstream with two sources can have a pin one of them lacks: elsewhere a pin that is
    no commit of a reachable upstream is matrix.yaml's fault (exit 2, its line named)."""
    add_line20_patch(project, upstream, upstream.head)
    write_config(project, "f" * 40)
    result = cli("-C", project.path, "lint")
    line = one_line_error(result, 2)
    assert "matrix.yaml:" in line and "the pin is wrong" in line
