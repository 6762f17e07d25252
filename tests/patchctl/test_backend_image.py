"""The backend images: backend.yml's plan step run as GitHub Actions runs it (which rows, and
whether to push), `matrix changed` refusing a matrix GitHub would refuse, backend/Dockerfile
stopping with one clear line on an unpatched tree, and (slow tier) the CPU image built here
from the applied series, the tiny model decoded in it with paged placement off and on.

No registry is reachable from the test machines: the Dockerfile's base images are build
arguments, pointed here at the local Debian images of tests/patchctl/docker_image.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from patchctl import git
from patchctl.matrix.checks import MAX_MATRIX_JOBS

from . import docker_image
from .matrix_fixtures import REPO

WORKFLOW = REPO / ".github/workflows/backend.yml"
DOCKERFILE = REPO / "backend/Dockerfile"
APPLIED_TREE = ".patchctl/trees/llama.cpp"  # where `patchctl apply llama.cpp` puts it; the Dockerfile's default


def plan_step() -> dict:
    steps = yaml.safe_load(WORKFLOW.read_text())["jobs"]["plan"]["steps"]
    return next(step for step in steps if step.get("id") == "plan")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """This repository's matrix.yaml and backend files, committed in a scratch git repository."""
    root = tmp_path / "repo"
    (root / "backend").mkdir(parents=True)
    shutil.copy(REPO / "matrix.yaml", root / "matrix.yaml")
    for name in ("Dockerfile", "Dockerfile.dockerignore"):
        shutil.copy(REPO / "backend" / name, root / "backend" / name)
    (root / "README.md").write_text("v1\n")
    git.init_repo(root)
    git.commit_all(root, "base")
    return root


def run_plan(root: Path, tmp_path: Path, **env: str) -> dict[str, str]:
    """The plan step's script under bash with the Actions environment; its $GITHUB_OUTPUT."""
    output, summary = tmp_path / "github-output", tmp_path / "step-summary"
    output.write_text("")
    step = plan_step()
    environ = {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",  # patchctl, as `uses: ./` installs it
        "HOME": os.environ.get("HOME", "/root"),
        "GITHUB_OUTPUT": str(output),
        "GITHUB_STEP_SUMMARY": str(summary),
        "PATCHCTL_CACHE": os.environ["PATCHCTL_CACHE"],
        **{key: "" for key in step["env"]},
        **env,
    }
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", step["run"]], cwd=root, env=environ, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return dict(line.split("=", 1) for line in output.read_text().splitlines())


def test_the_plan_step_builds_every_row_from_backend_dockerfile_and_pushes_only_from_main_and_tags(
    project: Path, tmp_path: Path
) -> None:
    assert set(plan_step()["env"]) == {"EVENT_NAME", "BASE_SHA", "REF", "REF_TYPE", "DEFAULT_BRANCH"}
    main = run_plan(
        project, tmp_path, EVENT_NAME="push", REF="refs/heads/main", REF_TYPE="branch", DEFAULT_BRANCH="main"
    )
    rows = json.loads(main["linux"])["include"]
    assert main["push"] == "true" and main["has-linux"] == "true" and main["has-darwin"] == "false"
    assert {(r["dockerfile"], r["context"]) for r in rows} == {("./backend/Dockerfile", "./")}
    assert {r["build-type"] for r in rows} == {"", "cublas"}
    assert json.loads(main["pairs"]) == {"suffix": ["-cpu-llama-cpp"]}

    tag = run_plan(project, tmp_path, EVENT_NAME="push", REF="refs/tags/v1.2.0", REF_TYPE="tag", DEFAULT_BRANCH="main")
    assert tag["push"] == "true" and tag["linux"] == main["linux"]

    # A manual run builds everything but pushes only on the default branch.
    other = dict(EVENT_NAME="workflow_dispatch", REF="refs/heads/topic", REF_TYPE="branch", DEFAULT_BRANCH="main")
    assert run_plan(project, tmp_path, **other)["push"] == "false"
    other["REF"] = "refs/heads/main"
    assert run_plan(project, tmp_path, **other)["push"] == "true"

    # A pull request: only the rows its changes touch, never a push (not even from main's ref).
    base = git.run(["rev-parse", "HEAD"], project).stdout.strip()
    pr = dict(EVENT_NAME="pull_request", BASE_SHA=base, REF="refs/heads/main", REF_TYPE="branch", DEFAULT_BRANCH="main")
    (project / "README.md").write_text("v2\n")
    git.commit_all(project, "docs")
    untouched = run_plan(project, tmp_path, **pr)
    assert untouched["push"] == "false" and untouched["has-linux"] == "false"
    (project / "backend/Dockerfile").write_text((project / "backend/Dockerfile").read_text() + "# edited\n")
    git.commit_all(project, "dockerfile")
    touched = run_plan(project, tmp_path, **pr)
    assert touched["push"] == "false" and touched["linux"] == main["linux"]


def test_the_workflow_applies_the_series_before_the_build_and_logs_in_only_to_push() -> None:
    jobs = yaml.safe_load(WORKFLOW.read_text())["jobs"]
    for name, push in (("linux", False), ("linux-publish", True)):
        steps = jobs[name]["steps"]
        uses = [step.get("uses", "").split("@")[0] for step in steps]
        apply, build = uses.index("./"), uses.index("docker/build-push-action")
        # every series; the job that holds the registries' secrets restores no pip cache either
        expected = {"cache": "false", "command": "apply"} | ({"pip-cache": "false"} if push else {})
        assert apply < build and steps[apply]["with"] == expected
        assert steps[build]["with"]["push"] is push
        assert ("docker/login-action" in uses) is push and ("cache-to" in steps[build]["with"]) is push
        assert steps[build]["with"]["cache-from"].startswith("type=gha,")
        meta = steps[uses.index("docker/metadata-action")]["with"]["tags"]
        for kind in ("type=ref,event=branch", "type=sha,format=long", "type=semver,pattern={{version}}"):
            assert kind in meta
    assert jobs["merge"]["needs"] == ["plan", "linux-publish"]
    # The tree the workflow applies into is the one the Dockerfile copies and the only one it lets in.
    assert f"ARG LLAMA_TREE={APPLIED_TREE}\n" in DOCKERFILE.read_text()
    assert f"!{APPLIED_TREE}\n" in (REPO / "backend/Dockerfile.dockerignore").read_text()


def test_matrix_changed_refuses_a_matrix_github_would_refuse(cli, project: Path) -> None:
    text = (project / "matrix.yaml").read_text()
    rows, rest = text.split("\ninclude:\n", 1)[1].split("\n\n", 1)
    first = rows.split("\n  - ")[0] + "\n"  # the amd64 CPU row
    extra = "".join(
        first.replace("tag-suffix: -cpu-llama-cpp", f"tag-suffix: -cpu-x{i}")
        .replace("backend: llama-cpp", f"backend: x{i}")
        .replace("    platform-tag: amd64\n", "")
        for i in range(MAX_MATRIX_JOBS)
    )
    (project / "matrix.yaml").write_text(text.replace("\ninclude:\n", "\ninclude:\n" + extra, 1))
    result = cli("-C", project, "matrix", "changed", "--all", "--json")
    assert result.exit_code == 1 and result.stdout == ""
    assert f"Linux {MAX_MATRIX_JOBS + 4} rows, above GitHub's 256 jobs per matrix" in result.stderr
    check = cli("-C", project, "matrix", "check", "--json")
    assert check.exit_code == 1
    assert "MX702" in {f["rule"] for f in json.loads(check.stdout)["findings"]}


def docker_client():
    docker_image.require_engine("the backend image tests")
    import docker

    return docker.from_env(timeout=600)


def local_base_images() -> tuple[str, str]:
    """(builder, runtime): Debian bookworm with g++/CMake/make, and with g++ (libstdc++)."""
    client = docker_client()
    try:
        builder = docker_image.ensure_toolchain_image(client, docker_image.CMAKE_TOOLCHAIN_IMAGE)
        runtime = docker_image.ensure_toolchain_image(client, docker_image.TOOLCHAIN_IMAGE)
    except docker_image.ToolchainUnavailable as exc:
        pytest.skip(str(exc))
    finally:
        client.close()
    return builder, runtime


def docker_build(context: Path, tag: str, *extra: str, timeout: int) -> subprocess.CompletedProcess:
    builder, runtime = local_base_images()
    command = ["docker", "build", "-f", str(DOCKERFILE), "-t", tag, "--build-arg", f"BUILDER_BASE_IMAGE={builder}"]
    command += ["--build-arg", f"BASE_IMAGE={runtime}", *extra, str(context)]
    # the classic builder: no buildx here (the workflow uses BuildKit, which reads Dockerfile.dockerignore)
    env = {**os.environ, "DOCKER_BUILDKIT": "0"}
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)


@pytest.mark.docker
def test_the_dockerfile_refuses_a_tree_without_the_series(tmp_path: Path) -> None:
    tree = tmp_path / APPLIED_TREE
    (tree / "tests").mkdir(parents=True)
    (tree / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.14)\nproject(llama.cpp CXX)\n")
    done = docker_build(tmp_path, "patchctl-backend-unpatched:test", timeout=600)
    assert done.returncode != 0
    assert f"error: {APPLIED_TREE} has no tests/test-paged-decode.cpp: run 'patchctl apply llama.cpp'" in (
        done.stdout + done.stderr
    )

    # Past the guard, a build type the Dockerfile does not build stops before CMake runs.
    (tree / "tests/test-paged-decode.cpp").write_text("int main() { return 0; }\n")
    bad = docker_build(tmp_path, "patchctl-backend-unpatched:test", "--build-arg", "BUILD_TYPE=hipblas", timeout=600)
    assert bad.returncode != 0
    assert "error: BUILD_TYPE hipblas is not built by this Dockerfile ('' or cublas)" in bad.stdout + bad.stderr


@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.realupstream
def test_the_cpu_image_decodes_the_tiny_model_the_same_with_paged_placement_off_and_on(
    cli, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from engine.llamacpp.model_gate import CASES, DRIVER, compare_engine, compare_paged, run_driver, write_cases
    from engine.model.gguf import write_gguf
    from engine.model.gguf_vocab import llama_spm_vocabulary, tiny_model_for

    # What the workflow does: apply the series (the default tree), then build with the repository as context.
    project = tmp_path / "project"
    (project / "backend").mkdir(parents=True)
    shutil.copy(REPO / "matrix.yaml", project / "matrix.yaml")
    shutil.copytree(REPO / "patches", project / "patches")
    applied = cli("-C", project, "apply", "llama.cpp")
    assert applied.exit_code == 0, applied.output
    tag = "patchctl-backend-cpu:test"
    start = time.monotonic()
    built = docker_build(project, tag, "--build-arg", "JOBS=2", timeout=5400)
    seconds = time.monotonic() - start
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    with capsys.disabled():
        print(f"\nbackend image {tag} built in {seconds:.0f} s")

    server = subprocess.run(["docker", "run", "--rm", tag, "--version"], capture_output=True, text=True, timeout=120)
    assert server.returncode == 0 and "version:" in server.stdout + server.stderr

    # The model gate's pieces: the tiny model as GGUF, its cases, the series' driver, run in the image.
    work = tmp_path / "work"
    work.mkdir()
    vocabulary = llama_spm_vocabulary()
    model = work / "tiny-llama-spm.gguf"
    write_gguf(model, tiny_model_for(vocabulary), vocabulary)
    cases = work / "cases.tsv"
    write_cases(cases, CASES)
    driver = work / DRIVER  # run_driver runs it with LLAMA_KV_PAGED=1 or without; -e passes that on
    driver.write_text(
        f'#!/bin/sh\nexec docker run --rm -e LLAMA_KV_PAGED -v "{work}:{work}" --entrypoint {DRIVER} {tag} "$@"\n'
    )
    driver.chmod(0o755)
    stock = run_driver(driver, model, cases, work / "logits-stock", paged=False, timeout=600)
    paged = run_driver(driver, model, cases, work / "logits-paged", paged=True, timeout=600)
    assert not stock.failures and not paged.failures, (stock.failures, paged.failures)
    assert set(stock.tokens) == {case.name for case in CASES}
    results = compare_paged(CASES, stock, paged) + compare_engine(model, CASES, stock).results
    assert [r.name for r in results if not r.ok] == [], [r.line() if hasattr(r, "line") else r for r in results]


def test_matrix_check_fails_on_a_missing_or_escaping_dockerfile(cli, project: Path, tmp_path: Path) -> None:
    assert cli("-C", project, "matrix", "check").exit_code == 0
    (project / "backend/Dockerfile").unlink()
    result = cli("-C", project, "matrix", "check", "--json")
    assert result.exit_code == 1
    found = json.loads(result.stdout)["findings"]
    assert [f["rule"] for f in found] == ["MX701"] * 4
    assert "dockerfile ./backend/Dockerfile is not a file in the repository" in found[0]["message"]
    outside = tmp_path / "Dockerfile"
    outside.write_text("FROM scratch\n")
    (project / "backend/Dockerfile").symlink_to(outside)
    found = json.loads(cli("-C", project, "matrix", "check", "--json").stdout)["findings"]
    assert [f["rule"] for f in found] == ["MX701"] * 4
    assert "'./backend/Dockerfile' leaves the repository (absolute, .. or a link out)" in found[0]["message"]
