"""The canary (and every command) follows an upstream's `ci:` source under `--upstream-source ci`
and its embedded default otherwise; a red canary renders one issue per break with a stable key."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from patchctl.loop import pinfile
from patchctl.project import config as config_mod

from .conftest import Project, Repo, make_patch
from .fixtures_sync import add_hello_patch, add_line20_patch, load_json, main_c, write_config


def ci_block(stand_in: Repo, pin: str | None, branch: str = "master") -> str:
    """The `ci:` block of upstream `up`, with a local repository standing in for github.com."""
    return f"ci:\n  url: {stand_in.path}\n  branch: {branch}\n" + (f"  pin: '{pin}'\n" if pin else "")


@pytest.fixture
def github(tmp_path: Path, upstream: Repo) -> Repo:
    """What github.com holds: the same history as the embedded default, on `master`, and
    later commits the embedded default (a frozen snapshot) never gets."""
    git_hub = Repo(tmp_path / "github")
    git_hub.git("fetch", "-q", str(upstream.path), "main")
    git_hub.git("checkout", "-q", "-B", "master", "FETCH_HEAD")
    return git_hub


def canary(cli, project: Project, *args: str | Path, env_source: str | None = None, monkeypatch=None):
    out = project.path.parent / "canary.json"
    issues = project.path.parent / "issues.json"
    for stale in (out, issues):
        stale.unlink(missing_ok=True)
    if monkeypatch is not None and env_source is not None:
        monkeypatch.setenv("PATCHCTL_UPSTREAM_SOURCE", env_source)
    result = cli(*args[:1], "-C", project.path, "canary", *args[1:], "--json-file", out, "--issues", issues)
    return (
        result,
        (load_json(out) if out.exists() else None),
        (json.loads(issues.read_text()) if issues.exists() else None),
    )


def test_default_source_is_the_embedded_url_and_ci_source_is_the_ci_block(
    project: Project, upstream: Repo, github: Repo, cli, monkeypatch
) -> None:
    pin = upstream.head
    add_line20_patch(project, upstream, pin)
    write_config(project, pin, up_extra=ci_block(github, pin))
    frozen_tip = upstream.commit({"src/util.c": "embedded only\n"}, "Embedded snapshot")
    github_tip = github.commit({"include/util.h": "new on github\n"}, "Newer on GitHub")

    result, payload, issues = canary(cli, project, "--upstream-source=default")
    assert result.exit_code == 0, result.output
    assert payload["tip"] == frozen_tip and payload["rev_spec"] == "tip of main" and issues == []

    result, payload, issues = canary(cli, project, "--upstream-source=ci")
    assert result.exit_code == 0, result.output
    assert payload["tip"] == github_tip and payload["rev_spec"] == "tip of master" and payload["pin"] == pin

    result, payload, _ = canary(cli, project, "--debug", env_source="ci", monkeypatch=monkeypatch)  # as the workflow
    assert result.exit_code == 0, result.output
    assert payload["tip"] == github_tip


def test_ci_pin_is_its_own_and_pin_sync_moves_it_with_the_pin(project: Project, upstream: Repo, github: Repo) -> None:
    pin = upstream.head
    github_pin = github.commit({"README.md": "# same tree, other history\n"}, "GitHub's own commit")
    write_config(project, pin, up_extra=ci_block(github, github_pin))
    loaded = config_mod.load(project.path / "matrix.yaml")
    assert loaded.upstreams["up"].url == str(upstream.path) and loaded.upstreams["up"].pin == pin
    ci = config_mod.load(project.path / "matrix.yaml").with_upstream_source("ci")
    assert (ci.upstreams["up"].url, ci.upstreams["up"].branch, ci.upstreams["up"].pin) == (
        str(github.path),
        "master",
        github_pin,
    )
    # Both state the revision: a move under either source moves both (test_pin_everywhere.py).
    [change] = pinfile.pin_changes(ci, "up", "f" * 40)
    text = change.new.decode()
    assert text.count(f"pin: '{'f' * 40}'") == 2 and pin not in text and github_pin not in text


def test_ci_block_without_pin_shares_the_default_pin(project: Project, upstream: Repo, github: Repo) -> None:
    write_config(project, upstream.head, up_extra=ci_block(github, None))
    ci = config_mod.load(project.path / "matrix.yaml").with_upstream_source("ci")
    assert ci.upstreams["up"].pin == upstream.head and ci.upstreams["up"].pin_keypath == ("upstreams", "up", "pin")


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ("ci:\n  branch: master\n", "missing required key"),
        ("ci:\n  url: /x\n  pin: abc\n", "pin must be a full 40-hex lowercase commit id, got 'abc'"),
        ("ci:\n  url: /x\n  tag: v1\n", "tag"),
    ],
)
def test_bad_ci_block_is_one_config_error(project: Project, upstream: Repo, cli, block: str, message: str) -> None:
    write_config(project, upstream.head, up_extra=block)
    result = cli("-C", project.path, "--upstream-source", "ci", "canary")
    assert result.exit_code == 2, result.output
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("patchctl: error: ") and "ci" in line and message in line


def test_unknown_upstream_source_is_a_usage_error(project: Project, upstream: Repo, cli, monkeypatch) -> None:
    write_config(project, upstream.head)
    monkeypatch.setenv("PATCHCTL_UPSTREAM_SOURCE", "github")
    result = cli("-C", project.path, "canary")
    assert result.exit_code == 2 and "github" in result.stderr and "ci" in result.stderr


def test_shipped_matrix_follows_github_master_under_ci_and_pypi_by_default() -> None:
    root = Path(__file__).resolve().parents[2]
    loaded = config_mod.load(root / "matrix.yaml")
    default = loaded.upstreams["llama.cpp"]
    assert default.url.startswith("pypi-sdist:") and default.branch == "main"
    ci = config_mod.load(root / "matrix.yaml").with_upstream_source("ci").upstreams["llama.cpp"]
    assert (ci.url, ci.branch) == ("https://github.com/ggml-org/llama.cpp", "master")
    assert ci.pin != default.pin and len(ci.pin) == 40


# ---------------------------------------------------------------- issues


def test_red_canary_files_one_issue_per_break_with_a_key_stable_across_runs(
    project: Project, upstream: Repo, cli
) -> None:
    pin = upstream.head
    add_line20_patch(project, upstream, pin)
    add_hello_patch(project, upstream, pin)
    write_config(project, pin)
    upstream.commit({"src/util.c": "one\n"}, "Unrelated one")
    breaking = upstream.commit({"src/main.c": main_c({22: "main 22 edited"})}, "Edit near line 20")
    first_tip = upstream.commit({"src/util.c": "two\n"}, "Unrelated two")

    result, payload, issues = canary(cli, project)
    assert result.exit_code == 1
    [issue] = issues
    key = f"up/apply/main/0001-patch-line-twenty.patch/{breaking}"
    assert issue["key"] == key
    assert issue["title"] == "canary up: main/0001-patch-line-twenty.patch no longer applies"
    body = issue["body"]
    assert body.splitlines()[0] == f"<!-- patchctl-canary-key: {key} -->"
    assert f"first bad upstream commit: `{breaking}` `Edit near line 20`" in body
    assert f"tip: `{first_tip}`" in body and "merged 3-way without conflict" in body

    second_tip = upstream.commit({"include/util.h": "three\n"}, "Unrelated three")
    result, _, again = canary(cli, project)
    assert result.exit_code == 1
    assert [i["key"] for i in again] == [key]  # same break, new tip: the same issue
    assert f"tip: `{second_tip}`" in again[0]["body"] and first_tip not in again[0]["body"]


def test_cascade_is_in_its_blockers_issue_and_green_files_none(project: Project, upstream: Repo, cli) -> None:
    pin = upstream.head
    creates = make_patch(
        upstream, pin, {"src/main.c": main_c({20: "MAIN 20 patched"}), "src/extra.c": "e1\ne2\ne3\n"}, "Add extra"
    )
    project.add_patch("0001-add-extra.patch", creates)
    project.add_patch(
        "0002-tune-extra.patch",
        "From: Dev <dev@example.org>\nSubject: [PATCH] Tune extra\n\nWhy.\n---\n"
        "diff --git a/src/extra.c b/src/extra.c\n--- a/src/extra.c\n+++ b/src/extra.c\n@@ -1,3 +1,3 @@\n"
        " e1\n-e2\n+E2\n e3\n",
    )
    write_config(project, pin)
    breaking = upstream.commit({"src/main.c": main_c({20: "main 20 upstream"})}, "Upstream rewrites line 20")
    result, payload, issues = canary(cli, project)
    assert result.exit_code == 1
    assert [p["verdict"] for p in payload["series"][0]["patches"]] == ["conflict", "blocked"]
    [issue] = issues  # the cascade is no break of its own
    assert issue["key"] == f"up/apply/main/0001-add-extra.patch/{breaking}"
    assert "blocked behind it: `0002-tune-extra.patch`" in issue["body"]

    for patch in project.series_dir.glob("*.patch"):  # the series is dropped: green, nothing to file
        patch.unlink()
    write_config(project, pin, series_extra="allow_empty: true\n")  # empty on purpose (fails closed otherwise)
    result, payload, issues = canary(cli, project)
    assert result.exit_code == 0, result.output
    assert issues == []


def test_issue_markdown_is_deterministic(project: Project, upstream: Repo, cli) -> None:
    pin = upstream.head
    add_line20_patch(project, upstream, pin)
    write_config(project, pin)
    upstream.commit({"src/main.c": main_c({20: "main 20 upstream"})}, "Upstream rewrites line 20")
    _, _, first = canary(cli, project)
    _, _, second = canary(cli, project)
    assert first == second and textwrap.dedent(first[0]["body"]) == first[0]["body"]


# ---------------------------------------------------------------- shipped toolchains and bisect skipping


def test_shipped_canary_toolchains_build_with_their_own_command_and_image() -> None:
    from patchctl.matrix import from_config

    root = Path(__file__).resolve().parents[2]
    toolchains = {t.name: t for t in from_config(config_mod.load(root / "matrix.yaml")).canary.toolchains}
    assert set(toolchains) == {"cpu-amd64", "cuda-13"}
    cpu, cuda = toolchains["cpu-amd64"], toolchains["cuda-13"]
    assert "GGML_CUDA" not in cpu.command and "cmake --build build" in cpu.command
    assert "-DGGML_CUDA=ON" in cuda.command and "-DCMAKE_CUDA_ARCHITECTURES=75;80;86;89;90" in cuda.command
    assert "ggml-cuda" in cuda.command  # the CUDA backend itself is a build target
    for toolchain in (cpu, cuda):
        dockerfile = root / toolchain.dockerfile
        assert dockerfile.is_file() and "cmake" in dockerfile.read_text()
        assert toolchain.build_image == f"patchctl-canary-{toolchain.name}:local"


@pytest.mark.parametrize(
    ("verdicts", "expected"),
    [
        ("GGGBB", 3),
        ("GSSBB", 3),  # untestable commits between the last good and the first bad one: the bad one
        ("GGSSB", 4),
        ("BBBBB", 0),
        ("GGGGB", 4),
        ("SSSSB", 4),
        ("GBSSB", 1),
    ],
)
def test_compile_bisect_skips_commits_the_series_does_not_apply_at(verdicts: str, expected: int) -> None:
    from patchctl.loop.compile_bisect import _first_failing_skipping

    line = [f"c{i}" for i in range(len(verdicts))]
    asked: list[str] = []

    def fails(commit: str) -> bool | None:
        asked.append(commit)
        return {"G": False, "B": True, "S": None}[verdicts[line.index(commit)]]

    assert _first_failing_skipping(line, fails) == line[expected]
