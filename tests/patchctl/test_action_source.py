"""Where a downstream's workflows get patchctl (issue 43): `init` writes an action github.com has,
or says it cannot; `--action` is refused when it names a placeholder or a commit only ever made
locally; `matrix check` reports both (MX804). The clone patchctl runs from is a real git
repository here, with a github.com remote whose tracking branch holds some of its commits."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from patchctl import git
from patchctl.matrix import action_source
from patchctl.matrix.action_source import choose_action, github_repository, home_repository, unpublished

from .conftest import Repo, ok, one_line_error, run_cli
from .matrix_fixtures import REPO


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """A clone of patchctl: two commits github.com/acme/patchctl has (origin/main), one more only here."""
    path = tmp_path / "patchctl"
    path.mkdir()
    for name in ("action.yml", "pyproject.toml"):
        shutil.copy(REPO / name, path / name)
    git.init_repo(path)
    git.commit_all(path, "patchctl")
    (path / "NEWS").write_text("published\n")
    published = git.commit_all(path, "published")
    git.run(["remote", "add", "origin", "https://github.com/acme/patchctl.git"], path)
    git.run(["update-ref", "refs/remotes/origin/main", published], path)  # what a fetch left
    (path / "NEWS").write_text("local\n")
    git.commit_all(path, "a local change")
    return path


def head(path: Path, rev: str = "HEAD") -> str:
    return git.run(["rev-parse", rev], path).stdout.strip()


# ---------------------------------------------------------------- what can be known offline


@pytest.mark.parametrize(
    ("url", "repository"),
    [
        ("https://github.com/acme/patchctl", "acme/patchctl"),
        ("https://github.com/acme/patchctl.git", "acme/patchctl"),
        ("git+https://github.com/acme/patchctl.git", "acme/patchctl"),
        ("git@github.com:acme/patchctl.git", "acme/patchctl"),
        ("ssh://git@github.com/acme/patchctl", "acme/patchctl"),
        ("https://gitlab.com/acme/patchctl", None),
        ("/srv/git/patchctl", None),
    ],
)
def test_github_urls(url: str, repository: str | None) -> None:
    assert github_repository(url) == repository


def test_the_home_is_the_source_url_of_pyproject() -> None:
    text = (REPO / "pyproject.toml").read_text()
    assert 'Source = "https://github.com/patchctl/patchctl"' in text and "OWNER" not in text
    assert home_repository() == "patchctl/patchctl"
    assert "repo_url: https://github.com/patchctl/patchctl" in (REPO / "mkdocs.yml").read_text()


@pytest.mark.parametrize(
    "action",
    [
        "OWNER/patchctl@" + "ab" * 20,
        "owner/patchctl@" + "ab" * 20,
        "example/patchctl@" + "ab" * 20,
        "Your-Org/patchctl@" + "ab" * 20,
        "username/my-fork@" + "ab" * 20,
    ],
)
def test_a_placeholder_owner_is_never_published(action: str) -> None:
    assert "is a placeholder, not the GitHub account that publishes the action" in unpublished(action, None)


def test_the_null_commit_is_never_published() -> None:
    assert unpublished("acme/patchctl@" + "0" * 40, None) == "the null commit is no commit"


def test_a_commit_only_the_clone_has_is_unpublished(clone: Path) -> None:
    local, published = head(clone), head(clone, "origin/main")
    said = unpublished(f"acme/patchctl@{local}", clone)
    assert said == (
        f"{local[:12]} is a commit of the clone patchctl runs from ({clone}) that none of its github.com remote "
        f"branches (acme/patchctl) holds: push it first; the newest commit of it that github.com has is "
        f"{published} (origin/main)"
    )
    assert unpublished(f"acme/patchctl@{published}", clone) is None  # origin/main holds it
    assert unpublished(f"acme/patchctl@{head(clone, 'HEAD~2')}", clone) is None  # an ancestor of it too
    assert unpublished("acme/patchctl@" + "ab" * 20, clone) is None  # not in this clone: not known
    assert unpublished(f"acme/patchctl@{local}", None) is None  # no clone: not known
    git.run(["update-ref", "-d", "refs/remotes/origin/main"], clone)
    assert unpublished(f"acme/patchctl@{local}", clone) is None  # never fetched: nothing known


def test_a_clone_without_a_github_remote_knows_nothing(clone: Path) -> None:
    git.run(["remote", "set-url", "origin", "/srv/git/patchctl.git"], clone)
    assert unpublished(f"acme/patchctl@{head(clone)}", clone) is None


# ---------------------------------------------------------------- what init chooses


def test_init_chooses_this_patchctl_where_github_has_it(clone: Path) -> None:
    git.run(["update-ref", "refs/remotes/origin/feature", head(clone)], clone)  # pushed, then fetched
    choice = choose_action(None, clone)
    assert choice.action == f"acme/patchctl@{head(clone)}" and not choice.warning
    said = f"workflows: action: acme/patchctl@{head(clone)}: this patchctl's commit, which github.com has"
    assert choice.said == f"{said} (origin/feature)"


def test_init_falls_back_to_the_newest_published_ancestor_and_warns(clone: Path) -> None:
    choice = choose_action(None, clone)
    assert choice.action == f"acme/patchctl@{head(clone, 'origin/main')}" and choice.warning
    assert f"this patchctl runs at {head(clone)[:12]}, whose own commits no workflow can fetch" in choice.said


def test_init_writes_no_action_it_cannot_vouch_for(clone: Path, tmp_path: Path) -> None:
    git.run(["remote", "remove", "origin"], clone)
    choice = choose_action(None, clone)
    assert choice.action is None and choice.warning
    assert choice.said.startswith(
        f"workflows: action: not set: this patchctl runs from a clone ({clone}, no github.com remote)"
    )
    assert "run init again with --action OWNER/REPO@COMMIT" in choice.said
    wheel = choose_action(None, None)
    assert wheel.action is None and "was not installed from a git clone or a github.com URL" in wheel.said


def test_init_takes_pips_record_of_a_github_install(monkeypatch: pytest.MonkeyPatch) -> None:
    commit = "cd" * 20
    monkeypatch.setattr(action_source, "pip_vcs_record", lambda: ("https://github.com/acme/patchctl.git", commit))
    choice = choose_action(None, None)
    assert choice.action == f"acme/patchctl@{commit}" and not choice.warning


# ---------------------------------------------------------------- the commands


@pytest.fixture
def downstream(tmp_path: Path, upstream: Repo) -> tuple[Path, list[str]]:
    root = tmp_path / "downstream"
    git.init_repo(root)
    return root, ["-C", str(root), "init", "--upstream-url", str(upstream.path), "--pin", upstream.head]


@pytest.mark.parametrize(
    ("action", "said"),
    [
        ("OWNER/patchctl@" + "ab" * 20, "'OWNER' is a placeholder"),
        ("acme/patchctl@v1.2.3", "give OWNER/REPO@COMMIT with the full 40-hex commit id"),
        ("acme/patchctl", "give OWNER/REPO@COMMIT"),
        ("acme/patchctl@" + "0" * 40, "the null commit is no commit"),
    ],
)
def test_init_refuses_an_action_no_workflow_can_fetch(downstream, action: str, said: str) -> None:
    root, init = downstream
    line = one_line_error(run_cli(*init, "--action", action), 2)
    assert said in line
    assert not (root / "matrix.yaml").exists()  # refused before anything is written


def test_render_refuses_a_placeholder_owner(downstream) -> None:
    root, init = downstream
    ok(*init, "--action", "acme/patchctl@" + "ab" * 20)
    text = (root / "matrix.yaml").read_text()
    (root / "matrix.yaml").write_text(text.replace("acme/patchctl@", "OWNER/patchctl@"))
    line = one_line_error(run_cli("-C", root, "matrix", "render"), 2)
    assert "workflows: action: OWNER/patchctl@" + "ab" * 20 + ": 'OWNER' is a placeholder" in line
    assert not (root / ".github").exists()  # nothing rendered


def test_init_refuses_a_local_commit_and_check_reports_one(
    downstream, clone: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bar of issue 43: no unpublished ref is written, and `matrix check` refuses one."""
    root, init = downstream
    monkeypatch.setattr("patchctl.matrix.workflow_checks.installed_clone", lambda: clone)
    monkeypatch.setattr("patchctl.matrix.action_source.installed_clone", lambda: clone)
    local, published = head(clone), head(clone, "origin/main")
    line = one_line_error(run_cli(*init, "--action", f"acme/patchctl@{local}"), 2)
    assert "none of its github.com remote branches (acme/patchctl) holds: push it first" in line
    out = ok(*init)  # no --action: the newest commit github.com has, and a warning that says so
    config = yaml.safe_load((root / "matrix.yaml").read_text())
    assert config["workflows"]["action"] == f"acme/patchctl@{published}"
    ok("-C", root, "matrix", "render")
    assert f"uses: acme/patchctl@{published}\n" in (root / ".github/workflows/ci.yml").read_text()
    assert "matrix check: 0 row(s), no findings" in ok("-C", root, "matrix", "check")
    assert "chose: workflows: extras: none" in out
    # A hand edit to the local commit: render refuses it, and matrix check names it, once, on its line.
    text = (root / "matrix.yaml").read_text().replace(published, local)
    (root / "matrix.yaml").write_text(text)
    refused = one_line_error(run_cli("-C", root, "matrix", "render"), 2)
    assert f"matrix.yaml: workflows: action: acme/patchctl@{local}: {local[:12]} is a commit of the clone" in refused
    assert f"uses: acme/patchctl@{published}\n" in (root / ".github/workflows/ci.yml").read_text()  # untouched
    result = run_cli("-C", root, "matrix", "check", "--json")
    assert result.exit_code == 1
    [finding] = json.loads(result.stdout)["findings"]
    line = 1 + text.splitlines().index(f"  action: {'acme/patchctl@' + local}")
    assert (finding["file"], finding["line"], finding["rule"]) == ("matrix.yaml", line, "MX804")
    assert f"newest commit of it that github.com has is {published}" in finding["message"]


def test_init_without_a_known_commit_warns_and_render_says_what_to_set(downstream) -> None:
    """The README's install (a clone of patchctl with no github.com remote here): nothing is made up."""
    root, init = downstream
    result = run_cli(*init)
    assert result.exit_code == 0, result.output
    warning = [line for line in result.stderr.splitlines() if line.startswith("patchctl: warning: workflows: action")]
    assert len(warning) == 1 and "run init again with --action OWNER/REPO@COMMIT" in warning[0]
    assert "\nworkflows:" not in (root / "matrix.yaml").read_text()  # only the commented example
    line = one_line_error(run_cli("-C", root, "matrix", "render"), 2)
    assert "set it to patchctl/patchctl@COMMIT (or your fork's), a commit that github.com has" in line
    # What the warning says to do, done: init again with --action (and --force, its files exist).
    action = "patchctl/patchctl@" + "c0ffee00" * 5
    out = ok(*init, "--action", action, "--force")
    assert f"chose: workflows: action: {action} (--action)" in out
    ok("-C", root, "matrix", "render")
    assert "no findings" in ok("-C", root, "matrix", "check")
