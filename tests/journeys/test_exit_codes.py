"""One exit code per meaning, from the real executable: a revision named on the command line
that the upstream does not have is a usage error (exit 2) for apply, pin-sync and canary alike
(the upstream answered: not an environment error), and `--debug` adds the traceback without
changing the exit code."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.patchctl.conftest import Repo

from .shell import downstream, tune_main_patch

pytestmark = pytest.mark.journey

NO_SUCH_REV = "v9.9.9-no-such-tag"


@pytest.mark.parametrize(
    "command, option",
    [
        ("patchctl apply --rev {rev}", "--rev"),
        ("patchctl pin-sync up --to {rev}", "--to"),
        ("patchctl canary up --rev {rev}", "--rev"),
    ],
)
def test_an_unknown_revision_is_exit_2_everywhere(
    command: str, option: str, tmp_path: Path, upstream: Repo, user_in
) -> None:
    pin = upstream.head
    project = downstream(
        tmp_path / "project", upstream, pin, patches={"0001-Tune-main.patch": tune_main_patch(upstream, pin)}
    )
    user = user_in(project.path)
    line = (
        f"patchctl: error: {option} '{NO_SUCH_REV}': no such revision in upstream up ({upstream.path}); "
        "the upstream was reachable (fetched just now)\n"
    )
    seen = user.fails(command.format(rev=NO_SUCH_REV), 2)
    assert seen.stderr == line

    debug = user.run("patchctl --debug " + command.format(rev=NO_SUCH_REV).removeprefix("patchctl "))
    assert debug.exit_code == 2, str(debug)
    assert debug.stderr.startswith("Traceback (most recent call last):") and debug.stderr.endswith(line)
    assert user.run("git status --porcelain").stdout == ""  # nothing written


def test_debug_keeps_the_exit_code_of_a_usage_error(tmp_path: Path, upstream: Repo, user_in) -> None:
    project = downstream(tmp_path / "project", upstream, upstream.head)
    user = user_in(project.path)
    plain = user.fails("patchctl export", 2)
    assert plain.stderr == "patchctl: error: export: missing argument SERIES (see 'patchctl export --help')\n"
    debug = user.run("patchctl --debug export")
    assert debug.exit_code == 2 and debug.stderr.startswith("Traceback") and debug.stderr.endswith(plain.stderr)
