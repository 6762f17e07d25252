"""The rehearsal's own parts, checked against what github.com does: the `gh` stand-in answers as
the API does and keeps its state between runs; every remote action the rendered workflows use
has a stand-in; GitHub's trigger filters decide which workflows an event starts."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from .github_rehearsal import GITHUB_TOKEN, STANDINS, GitHubRehearsal, uses_of
from .week_fixtures import REPO, WeekUpstream, new_downstream, render

pytestmark = pytest.mark.journey


def gh(github: GitHubRehearsal, cwd: Path, *args: str, token: str = GITHUB_TOKEN) -> subprocess.CompletedProcess:
    env = {
        "PATH": f"{github.bin}:/usr/bin:/bin",
        "JOURNEY_STORE": str(github.store),
        "JOURNEY_GITHUB": str(github.git_root),
        "JOURNEY_GITHUB_TOKEN": GITHUB_TOKEN,
        "GH_TOKEN": token,
    }
    return subprocess.run(["gh", *args], cwd=cwd, env=env, capture_output=True, text=True)


@pytest.fixture
def github(tmp_path: Path) -> GitHubRehearsal:
    source = tmp_path / "source"
    source.mkdir()
    (source / "README.md").write_text("# project\n")
    github = GitHubRehearsal(tmp_path / "github", "acme/project")
    github.publish(source)
    return github


def test_gh_files_comments_and_closes_issues_across_runs(github: GitHubRehearsal, tmp_path: Path) -> None:
    clone = github.clone("refs/heads/main", tmp_path / "clone")
    body = tmp_path / "body.md"
    body.write_text("the break\n<!-- patchctl-canary-key: up/apply/0001 -->\n")
    created = gh(github, clone, "issue", "create", "--title", "canary: up", "--body-file", str(body))
    assert created.returncode == 0 and created.stdout == "https://github.com/acme/project/issues/1\n"
    # Another run (another process) sees it: the state is GitHub's, not the run's.
    listed = gh(github, clone, "issue", "list", "--state", "open", "--json", "number,body,author")
    [issue] = json.loads(listed.stdout)
    assert issue["number"] == 1 and "up/apply/0001" in issue["body"]
    assert issue["author"] == {"login": "app/github-actions", "is_bot": True}
    assert (
        gh(
            github, clone, "issue", "list", "--author", "app/github-actions", "--json", "number", "--jq", "length"
        ).stdout
        == "1\n"
    )
    assert gh(github, clone, "issue", "comment", "1", "--body", "still red").returncode == 0
    assert gh(github, clone, "issue", "close", "1", "--comment", "gone").returncode == 0
    assert gh(github, clone, "issue", "list", "--json", "number", "--jq", "length").stdout == "0\n"
    [closed] = github.issues("closed")
    assert [c["body"] for c in closed["comments"]] == ["still red", "gone"]
    # Without a token gh refuses, as in a workflow step that forgot GH_TOKEN; a missing label is refused.
    assert gh(github, clone, "issue", "create", "--title", "t", "--body", "b", token="").returncode == 4
    refused = gh(github, clone, "issue", "create", "--title", "t", "--body", "b", "--label", "canary")
    assert refused.returncode == 1 and "'canary' not found" in refused.stderr
    assert [c["args"][:2] for c in github.gh_calls()] == [
        ["issue", "create"],
        ["issue", "list"],
        ["issue", "list"],
        ["issue", "comment"],
        ["issue", "close"],
        ["issue", "list"],
        ["issue", "create"],
        ["issue", "create"],
    ]


def test_gh_opens_a_pull_request_with_the_refs_github_makes(github: GitHubRehearsal, tmp_path: Path) -> None:
    clone = github.clone("refs/heads/main", tmp_path / "clone")
    (clone / "README.md").write_text("# project, moved\n")
    subprocess.run(
        ["git", "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qam", "move"], cwd=clone, check=True
    )
    subprocess.run(["git", "push", "-q", "origin", "HEAD:refs/heads/topic"], cwd=clone, check=True)
    assert gh(github, clone, "label", "create", "pin-sync", "--force", "--color", "0366d6").returncode == 0
    opened = gh(
        github,
        clone,
        "pr",
        "create",
        "--base",
        "main",
        "--head",
        "topic",
        "--title",
        "t",
        "--body",
        "b",
        "--label",
        "pin-sync",
        token="ghs_rehearsal_app_patchctl-bot",
    )
    assert opened.stdout == "https://github.com/acme/project/pull/1\n", opened.stderr
    assert (
        gh(
            github, clone, "pr", "list", "--head", "topic", "--state", "open", "--json", "number", "--jq", "length"
        ).stdout
        == "1\n"
    )
    [pull] = github.pulls("open")
    assert pull["author"]["login"] == "app/patchctl-bot"
    assert github.sha("refs/pull/1/head") == github.sha("refs/heads/topic")
    merge = github.sha("refs/pull/1/merge")
    assert github.origin_git("rev-parse", f"{merge}^1", f"{merge}^2").split() == [
        github.sha("refs/heads/main"),
        github.sha("refs/heads/topic"),
    ]
    # The same branch again: gh refuses a second pull request, `pr edit` updates the open one.
    again = gh(github, clone, "pr", "create", "--base", "main", "--head", "topic", "--title", "t", "--body", "b")
    assert again.returncode == 1 and "already exists" in again.stderr
    assert gh(github, clone, "pr", "edit", "topic", "--title", "t2").returncode == 0
    assert github.pulls("open")[0]["title"] == "t2"


def test_a_pull_request_made_with_github_token_starts_no_workflow(github: GitHubRehearsal, tmp_path: Path) -> None:
    clone = github.clone("refs/heads/main", tmp_path / "clone")
    (clone / ".github/workflows").mkdir(parents=True)
    (clone / ".github/workflows/ci.yml").write_text("on: pull_request\njobs: {}\n")
    subprocess.run(["git", "-c", "user.name=a", "-c", "user.email=a@b", "add", "-A"], cwd=clone, check=True)
    subprocess.run(["git", "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "ci"], cwd=clone, check=True)
    subprocess.run(["git", "push", "-q", "origin", "HEAD:refs/heads/topic"], cwd=clone, check=True)
    assert (
        gh(github, clone, "pr", "create", "--base", "main", "--head", "topic", "--title", "t", "--body", "b").returncode
        == 0
    )
    assert github.on_pull_request(1) == []


def test_triggers_follow_branch_and_path_filters(github: GitHubRehearsal, tmp_path: Path) -> None:
    clone = github.clone("refs/heads/main", tmp_path / "clone")
    workflows = clone / ".github/workflows"
    workflows.mkdir(parents=True)
    (workflows / "images.yml").write_text(
        "on:\n  push:\n    branches: [main]\n    paths: ['backend/**', '!backend/*.md']\njobs: {}\n"
    )
    (workflows / "tags.yml").write_text("on:\n  push:\n    tags: ['v*']\njobs: {}\n")
    (workflows / "any.yml").write_text("on: [push, pull_request]\njobs: {}\n")

    def push(files: dict[str, str]) -> list[str]:
        for name, text in files.items():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            (clone / name).write_text(text)
        before = github.sha("refs/heads/main")
        env = {
            **os.environ,
            "GIT_AUTHOR_NAME": "a",
            "GIT_AUTHOR_EMAIL": "a@b",
            "GIT_COMMITTER_NAME": "a",
            "GIT_COMMITTER_EMAIL": "a@b",
        }
        subprocess.run(["git", "add", "-A"], cwd=clone, check=True)
        subprocess.run(["git", "commit", "-qm", "change"], cwd=clone, check=True, env=env)
        subprocess.run(["git", "push", "-q", "origin", "HEAD:refs/heads/main"], cwd=clone, check=True)
        after = github.sha("refs/heads/main")
        return github.triggered("push", github.push_payload("refs/heads/main", before, after), after)

    assert push({"README.md": "docs\n"}) == ["any.yml"]
    assert push({"backend/Dockerfile": "FROM scratch\n"}) == ["any.yml", "images.yml"]
    assert push({"backend/notes.md": "only notes\n"}) == ["any.yml"]


def test_every_remote_action_of_the_rendered_workflows_has_a_stand_in(tmp_path: Path) -> None:
    downstream = new_downstream(tmp_path / "downstream", WeekUpstream(tmp_path), "patchctl-journey-base:none")
    texts = [p.read_text() for root in (REPO, downstream) for p in (root / ".github/workflows").glob("*.yml")]
    texts.append((REPO / "action.yml").read_text())
    used = {u.split("@")[0] for text in texts for u in uses_of(text)}
    assert {"actions/checkout", "actions/upload-artifact", "actions/cache/save", "docker/build-push-action"} <= used
    published = {name for name in used if name.endswith("/patchctl")}
    missing = sorted(name for name in used - published if not (STANDINS / name / "action.yml").is_file())
    assert missing == [], f"remote actions with no stand-in under tests/journeys/actions: {missing}"


def test_a_downstream_with_no_registry_builds_its_images_and_pushes_none(tmp_path: Path) -> None:
    import yaml

    downstream = new_downstream(tmp_path / "downstream", WeekUpstream(tmp_path), "patchctl-journey-base:none")
    config = yaml.safe_load((downstream / "matrix.yaml").read_text())
    del config["index"]
    (downstream / "matrix.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    render(downstream)
    backend = yaml.safe_load((downstream / ".github/workflows/backend.yml").read_text())
    [plan] = [s for s in backend["jobs"]["plan"]["steps"] if s.get("id") == "plan"]
    assert "push=true" not in plan["run"] and "images built, not pushed" in plan["run"]
    # Without it the publish job pushed bare tags (`master-cpu-libfoo`) to a registry it never logged in to.
    with_index = yaml.safe_load((REPO / ".github/workflows/backend.yml").read_text())
    [plan] = [s for s in with_index["jobs"]["plan"]["steps"] if s.get("id") == "plan"]
    assert "push=true" in plan["run"]
