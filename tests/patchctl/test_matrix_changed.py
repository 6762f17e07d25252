"""`patchctl matrix changed`: rows selected from real git history, shared paths rebuilding
every backend that depends on them, edited rows, and output ready for fromJSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from patchctl import git
from patchctl.project.globs import glob_match

from .matrix_fixtures import make_project


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    project = make_project(tmp_path)
    for name in (
        "backend/cpp/llama-cpp/grpc-server.cpp",
        "backend/go/whisper/main.go",
        "backend/backend.proto",
        "README.md",
        "patches/llama.cpp/0001-a.patch",
    ):
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text("v1\n")
    git.init_repo(project)
    git.commit_all(project, "base")
    return project


def edit_and_commit(repo: Path, *names: str) -> None:
    for name in names:
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text((path.read_text() if path.exists() else "") + "changed\n")
    git.commit_all(repo, "change")


def plan(cli, repo: Path, *args: str) -> dict:
    result = cli("-C", repo, "matrix", "changed", "--json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def suffixes(payload: dict) -> list[str]:
    return [r["tag-suffix"] for r in payload["linux"]["include"]] + [
        r["tag-suffix"] for r in payload["darwin"]["include"]
    ]


def test_a_backend_path_rebuilds_that_backend_only(cli, repo: Path) -> None:
    edit_and_commit(repo, "backend/cpp/llama-cpp/grpc-server.cpp")
    payload = plan(cli, repo, "--base", "HEAD~1")
    assert payload["backends"] == ["llama-cpp"]
    assert suffixes(payload) == [
        "-cpu-llama-cpp",
        "-cpu-llama-cpp",
        "-gpu-nvidia-cuda-13-llama-cpp",
        "-metal-darwin-arm64-llama-cpp",
    ]
    assert payload["pairs"] == ["-cpu-llama-cpp"]
    assert payload["reasons"] == [
        {
            "backend": "llama-cpp",
            "file": "backend/cpp/llama-cpp/grpc-server.cpp",
            "pattern": "backend/cpp/llama-cpp/**",
            "shared": False,
        }
    ]


def test_a_shared_path_rebuilds_every_backend_that_lists_it(cli, repo: Path) -> None:
    edit_and_commit(repo, "backend/backend.proto")
    payload = plan(cli, repo, "--base", "HEAD~1")
    assert payload["backends"] == ["llama-cpp", "whisper"]
    assert len(payload["linux"]["include"]) == 4 and len(payload["darwin"]["include"]) == 1
    assert all(reason["shared"] for reason in payload["reasons"])


def test_shared_glob_reaches_deep_files_and_only_its_backends(cli, repo: Path) -> None:
    edit_and_commit(repo, "build/rules/common.mk")
    payload = plan(cli, repo, "--base", "HEAD~1")
    assert payload["backends"] == ["whisper"] and suffixes(payload) == ["-cpu-whisper"]


def test_unrelated_changes_build_nothing(cli, repo: Path) -> None:
    edit_and_commit(repo, "README.md")
    payload = plan(cli, repo, "--base", "HEAD~1")
    assert payload["linux"] == {"include": []} and payload["darwin"] == {"include": []} and payload["backends"] == []


def test_directory_pattern_and_merge_base(cli, repo: Path) -> None:
    git.run(["checkout", "-q", "-b", "feature"], repo)
    edit_and_commit(repo, "patches/llama.cpp/0002-b.patch")
    git.run(["checkout", "-q", "main"], repo)
    edit_and_commit(repo, "backend/go/whisper/main.go")  # on main after the branch point: not the PR's change
    git.run(["checkout", "-q", "feature"], repo)
    payload = plan(cli, repo, "--base", "main")
    assert payload["files"] == ["patches/llama.cpp/0002-b.patch"] and payload["backends"] == ["llama-cpp"]


def test_an_edited_row_is_rebuilt_alone(cli, repo: Path) -> None:
    matrix = repo / "matrix.yaml"
    matrix.write_text(
        matrix.read_text().replace(
            "    tag-suffix: -cpu-whisper\n    runs-on: ubuntu-latest\n    base-image: ubuntu:24.04",
            "    tag-suffix: -cpu-whisper\n    runs-on: ubuntu-latest\n    base-image: ubuntu:24.10",
        )
    )
    git.commit_all(repo, "bump whisper base image")
    payload = plan(cli, repo, "--base", "HEAD~1")
    assert suffixes(payload) == ["-cpu-whisper"]
    assert payload["reasons"] == [{"matrix": True, "row": "include[3] (-cpu-whisper, linux/amd64)"}]


def test_uncommitted_and_untracked_changes_without_base(cli, repo: Path) -> None:
    (repo / "backend/go/whisper/new.go").write_text("package main\n")
    payload = plan(cli, repo)
    assert payload["files"] == ["backend/go/whisper/new.go"] and payload["backends"] == ["whisper"]


def test_explicit_files_and_text_output(cli, repo: Path) -> None:
    result = cli("-C", repo, "matrix", "changed", "./backend/backend.proto")
    assert result.exit_code == 0
    assert "llama-cpp: backend/backend.proto matches shared path backend/backend.proto" in result.stdout
    assert result.stdout.rstrip().endswith("matrix changed: 5 row(s) of llama-cpp, whisper from 1 changed file(s)")


def test_all_rows(cli, repo: Path) -> None:
    assert len(suffixes(plan(cli, repo, "--all"))) == 5
    assert cli("-C", repo, "matrix", "changed", "--all", "README.md").exit_code == 2


def test_bad_base_is_an_environment_error(cli, repo: Path) -> None:
    result = cli("-C", repo, "matrix", "changed", "--base", "no-such-rev")
    assert result.exit_code == 3 and result.stderr.startswith("patchctl: error:")


@pytest.mark.parametrize(
    "pattern, path, expected",
    [
        ("backend/cpp/llama-cpp/**", "backend/cpp/llama-cpp/a/b/c.cpp", True),
        ("backend/cpp/llama-cpp/**", "backend/cpp/llama-cpp-paged/x.cpp", False),
        ("patches/llama.cpp/", "patches/llama.cpp/0001-x.patch", True),
        ("**/*.mk", "rules.mk", True),
        ("**/*.mk", "a/b/rules.mk", True),
        ("backend/*.proto", "backend/x/y.proto", False),
        ("backend/?.proto", "backend/a.proto", True),
        ("Makefile", "backend/Makefile", False),
        ("backend/Dockerfile.llama-cpp", "backend/DockerfileXllama-cpp", False),
    ],
)
def test_globs(pattern: str, path: str, expected: bool) -> None:
    assert glob_match(path, pattern) is expected


def with_series(repo: Path) -> None:
    """The llama.cpp series (patches/llama.cpp, which backend llama-cpp lists), committed."""
    matrix = repo / "matrix.yaml"
    matrix.write_text(
        matrix.read_text() + "\nseries:\n  llama.cpp:\n    upstream: llama.cpp\n    dir: patches/llama.cpp\n"
    )
    git.commit_all(repo, "the series")


@pytest.mark.parametrize("where", ["pin", "ci-pin"])
def test_a_moved_pin_alone_builds_the_rows_its_series_feeds(cli, repo: Path, where: str) -> None:
    """A pin-sync pull request whose patches did not change (a clean advance) moves only matrix.yaml's
    pins: the images made from that upstream are built at the new pin, the others are not."""
    with_series(repo)
    matrix = repo / "matrix.yaml"
    old = "    pin: 0123456789abcdef0123456789abcdef01234567\n    tracks: llama.cpp\n"
    if where == "ci-pin":
        text = matrix.read_text().replace(
            "    branch: master\n    pin: 0123456789abcdef0123456789abcdef01234567\n  ggml:",
            "    branch: master\n    pin: 0123456789abcdef0123456789abcdef01234567\n"
            "    ci: {url: 'https://example.invalid/ci.git', pin: '" + "1" * 40 + "'}\n  ggml:",
        )
        matrix.write_text(text)
        git.commit_all(repo, "a ci source")
        matrix.write_text(text.replace("1" * 40, "2" * 40))
    else:
        matrix.write_text(matrix.read_text().replace("0123456789abcdef0123456789abcdef01234567", "f" * 40))
        assert old.replace("0123456789abcdef0123456789abcdef01234567", "f" * 40) in matrix.read_text()
    git.commit_all(repo, "pin-sync: move llama.cpp forward")
    payload = plan(cli, repo, "--base", "HEAD~1")
    assert payload["files"] == ["matrix.yaml"]
    assert payload["backends"] == ["llama-cpp"] and "-cpu-whisper" not in suffixes(payload)
    assert payload["reasons"] == [
        {
            "backend": "llama-cpp",
            "upstream": "llama.cpp",
            "series": "llama.cpp",
            "file": "patches/llama.cpp/0001-a.patch",
            "pattern": "patches/llama.cpp/",
        }
    ]
    result = cli("-C", repo, "matrix", "changed", "--base", "HEAD~1")
    assert "llama-cpp: upstream llama.cpp's pin moved, and series llama.cpp" in result.stdout


def test_a_matrix_edit_that_keeps_the_pins_builds_nothing_more(cli, repo: Path) -> None:
    with_series(repo)
    matrix = repo / "matrix.yaml"
    matrix.write_text(matrix.read_text() + "# a comment\n")
    git.commit_all(repo, "comment")
    assert plan(cli, repo, "--base", "HEAD~1")["backends"] == []
