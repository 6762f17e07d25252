"""Hostile inputs end in one line and a documented exit code, never a traceback:
non-UTF-8 patch messages, giant paths, YAML resource bombs and bad tags, bad URLs,
bad branch names and bad env names."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from patchctl import git

from .conftest import Project, Repo, make_patch, one_line_error


def non_utf8_patch(upstream: Repo) -> bytes:
    text = make_patch(
        upstream,
        upstream.head,
        {"src/main.c": upstream.read("src/main.c").replace("main 20\n", "main twenty\n")},
        "Tune main SUBJ",
        "Why BODY.",
    )
    return text.encode().replace(b"SUBJ", b"\xff\xfe").replace(b"BODY", b"\xc3\x28")


def test_non_utf8_message_through_lint_apply_canary_and_pin_sync(project: Project, upstream: Repo, cli) -> None:
    (project.series_dir / "0001-tune-main.patch").write_bytes(non_utf8_patch(upstream))
    lint = cli("-C", project.path, "lint")
    assert lint.exit_code == 0, lint.output
    apply = cli("-C", project.path, "apply")
    assert apply.exit_code == 0, apply.output
    tree = project.path / ".patchctl/trees/main"
    assert git.run(["log", "-1", "--format=%s"], tree).stdout.startswith("Tune main ")
    upstream.commit({"src/util.c": "util rewritten\n"}, "Rewrite util")
    canary = cli("-C", project.path, "canary")
    assert canary.exit_code == 0 and "Traceback" not in canary.output, canary.output
    sync = cli("-C", project.path, "pin-sync", "up", "--latest")
    assert sync.exit_code == 0 and "Traceback" not in sync.output, sync.output


def test_non_utf8_message_that_fails_to_apply_is_classified(project: Project, upstream: Repo, cli) -> None:
    (project.series_dir / "0001-tune-main.patch").write_bytes(non_utf8_patch(upstream))
    upstream.commit({"src/main.c": upstream.read("src/main.c").replace("main 20\n", "main XX\n")}, "Clash")
    upstream.commit({"src/util.c": "util\n"}, "More")
    canary = cli("-C", project.path, "canary")
    assert canary.exit_code == 1 and "Traceback" not in canary.output, canary.output
    sync = cli("-C", project.path, "pin-sync", "up", "--latest")
    assert sync.exit_code in (1, 2) and "Traceback" not in sync.output, sync.output


@pytest.mark.parametrize(
    "path", ["x" * 4200 + ".c", "/".join(["y" * 200] * 21) + ".c"], ids=["one-component", "many-components"]
)
def test_giant_path_is_refused_before_the_file_system_sees_it(project: Project, cli, path: str) -> None:
    text = (
        "From: A <a@example.com>\nSubject: [PATCH] Add a long file\n\nWhy.\n---\n"
        f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+x\n"
    )
    project.add_patch("0001-add-a-long-file.patch", text)
    before = project.snapshot()
    lint = cli("-C", project.path, "lint")
    assert lint.exit_code == 1 and "PC012" in lint.stdout and "path too long" in lint.stdout, lint.output
    assert "path too long" in one_line_error(cli("-C", project.path, "apply"), 1)
    assert project.snapshot() == before and not (project.path / ".patchctl/trees/main").exists()


ALIAS_BOMB = "".join(
    [
        'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n',
        *(
            f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]\n"
            for prev, name in zip("abcdefgh", "bcdefghi", strict=True)
        ),
    ]
)


@pytest.mark.parametrize(
    ("yaml_text", "message"),
    [
        (ALIAS_BOMB, "aliases expand to more than"),
        ("x: " + "[" * 100_000 + "]" * 100_000 + "\n", "nesting deeper than"),
        ("x:\n" + "".join("  " * i + "a:\n" for i in range(1, 3000)), "nesting deeper than"),
        ("x: !!python/object/apply:os.system ['touch /tmp/pwned']\n", "unsupported tag"),
        ("x: !!python/name:os.system\n", "python/name"),
        ("x: !custom 1\n", "could not determine a constructor"),
        ("x: !!float not-a-number\n", "could not convert"),
        ("x: !!timestamp 2020-13-45\n", "month must be in"),
        ("x: 1\x00\n", "NUL character"),
    ],
    ids=[
        "alias-bomb",
        "deep-flow",
        "deep-block",
        "python-object",
        "python-name",
        "custom-tag",
        "bad-float",
        "bad-timestamp",
        "nul",
    ],
)
def test_hostile_yaml_is_a_fast_one_line_config_error(project: Project, cli, yaml_text: str, message: str) -> None:
    (project.path / "matrix.yaml").write_text(yaml_text)
    start = time.monotonic()
    result = cli("-C", project.path, "lint", "--no-apply")
    assert time.monotonic() - start < 10
    assert message in one_line_error(result, 2)


def _replace(project: Project, old: str, new: str) -> None:
    path = project.path / "matrix.yaml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ('"ext::sh -c touch% /tmp/pwned"', "git remote helpers (ext::) are not allowed"),
        ('"fd::17"', "git remote helpers (fd::)"),
        ("ftp://example.com/repo.git", "URL scheme 'ftp' is not allowed (allowed: https://"),
        ('"-uhttps://example.com/x"', "cannot start with '-'"),
        ('"ssh://-oProxyCommand=touch%20x/y"', "host cannot start with '-'"),
        ('"javascript:alert(1)"', "unknown URL form 'javascript'"),
        ('"pypi-sdist:../etc?versions=1"', "bad package name"),
        ('"https://example.com/\\nx"', "control characters"),
    ],
)
def test_hostile_upstream_url_is_a_config_error(project: Project, cli, url: str, message: str) -> None:
    _replace(project, f"url: {project.upstream.path}", f"url: {url}")
    assert message in one_line_error(cli("-C", project.path, "apply"), 2)


def test_hostile_url_override_is_a_usage_error(project: Project, cli) -> None:
    result = cli("-C", project.path, "--upstream-url", "up=ext::sh -c id", "apply")
    assert "git remote helpers" in one_line_error(result, 2)


@pytest.mark.parametrize("branch", ["-delete", "a..b", "x.lock", "has space", "tip^", "a:b", "@", "x/", ".hidden"])
def test_branch_must_be_a_git_ref_name(project: Project, cli, branch: str) -> None:
    _replace(project, "branch: main", f'branch: "{branch}"')
    assert "upstreams.up.branch" in one_line_error(cli("-C", project.path, "lint", "--no-apply"), 2)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ('{"A=B": "x"}', "invalid environment variable name 'A=B'"),
        ('{"1X": "x"}', "invalid environment variable name"),
        ('{"OK": "a\\0b"}', "NUL character"),
    ],
)
def test_build_env_names_and_values_are_validated(project: Project, cli, env: str, message: str) -> None:
    text = f"    build:\n      - name: b\n        command: 'true'\n        env: {env}\n"
    path = project.path / "matrix.yaml"
    path.write_text(path.read_text() + text)
    assert message in one_line_error(cli("-C", project.path, "lint", "--no-apply"), 2)


def test_huge_timeout_is_a_config_error(project: Project, cli) -> None:
    path = project.path / "matrix.yaml"
    path.write_text(path.read_text() + "    build:\n      - name: b\n        command: 'true'\n        timeout: 1e400\n")
    one_line_error(cli("-C", project.path, "lint", "--no-apply"), 2)
    path.write_text(path.read_text().replace("1e400", str(10**40)))
    assert "integer from 1 to" in one_line_error(cli("-C", project.path, "lint", "--no-apply"), 2)


def test_valid_branches_and_urls_still_load(tmp_path: Path, upstream: Repo, cli) -> None:
    project = Project(tmp_path / "project", upstream, upstream.head)
    _replace(project, "dir: patches/main\n", "dir: patches/main\n    allow_empty: true\n")
    _replace(project, "branch: main", "branch: release/v1.2-rc_3")
    assert cli("-C", project.path, "lint", "--no-apply").exit_code == 0
    _replace(project, f"url: {upstream.path}", f"url: {upstream.path.as_uri()}")
    assert cli("-C", project.path, "lint", "--no-apply").exit_code == 0
