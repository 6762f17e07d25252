"""`patchctl gate`: ordered gates with timeouts, per-case reports and digest baselines."""

from __future__ import annotations

import json
import shutil
import textwrap

import pytest

from .conftest import Project, Repo, make_patch

CHECKER = textwrap.dedent(
    """\
    #include <stdio.h>
    #include <string.h>
    int main(int argc, char **argv) {
        const char *cases[] = {"alloc", "evict", "salt"};
        for (int i = 0; i < 3; i++) {
            if (argc > 1 && strcmp(argv[1], cases[i]) == 0) { printf("FAIL %s: block 3 != 4\\n", cases[i]); return 1; }
            printf("PASS %s\\n", cases[i]);
        }
        return 0;
    }
    """
)


def with_gates(project: Project, upstream: Repo, gates: str) -> Project:
    project.add_patch(
        "0001-add-checker.patch", make_patch(upstream, upstream.head, {"src/checker.c": CHECKER}, "Add checker")
    )
    project.write_config(upstream.head, "    gates:\n" + textwrap.indent(textwrap.dedent(gates), "      "))
    return project


COMPILE = """\
- name: compile-and-run
  command: cc -O1 -o "$PATCHCTL_OUT/checker" src/checker.c && "$PATCHCTL_OUT/checker" $FAIL_CASE
  pass_env: [FAIL_CASE]
"""


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_gate_compiles_for_real_and_reports_cases(project: Project, upstream: Repo, cli) -> None:
    with_gates(project, upstream, COMPILE)
    assert cli("-C", project.path, "apply").exit_code == 0
    result = cli("-C", project.path, "gate", "main")
    assert result.exit_code == 0, result.output
    assert "PASS compile-and-run" in result.stdout and "3/3 cases passed" in result.stdout


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_failing_gate_names_the_case_and_stops(project: Project, upstream: Repo, monkeypatch, cli) -> None:
    with_gates(project, upstream, COMPILE + "- name: never-runs\n  command: touch $PATCHCTL_ROOT/ran\n")
    assert cli("-C", project.path, "apply").exit_code == 0
    monkeypatch.setenv("FAIL_CASE", "evict")
    result = cli("-C", project.path, "gate", "main", "--json")
    assert result.exit_code == 1
    payload = json.loads(result.stdout)
    assert [g["name"] for g in payload["gates"]] == ["compile-and-run"]
    assert payload["gates"][0]["cases"][-1] == {"name": "evict", "ok": False, "detail": "block 3 != 4"}
    assert "gate compile-and-run of series main failed: exit 1, first failing case evict: block 3 != 4" in result.stderr
    assert not (project.path / "ran").exists()


def test_gate_timeout_kills_the_command(project: Project, upstream: Repo, cli) -> None:
    with_gates(
        project, upstream, "- name: hangs\n  command: sleep 30; echo done > $PATCHCTL_ROOT/finished\n  timeout: 1\n"
    )
    assert cli("-C", project.path, "apply").exit_code == 0
    result = cli("-C", project.path, "gate", "main")
    assert result.exit_code == 1 and "timed out after 1 s" in result.stderr
    assert not (project.path / "finished").exists()


def test_baseline_digest_mismatch_and_update_keep_the_file(project: Project, upstream: Repo, monkeypatch, cli) -> None:
    gate = """\
    - name: vectors
      command: mkdir -p "$PATCHCTL_OUT/vec" && echo "$VECTOR" > "$PATCHCTL_OUT/vec/a.txt"
      baseline: {path: vec, sha256: ''}  # filled by --update-baseline
      pass_env: [VECTOR]
    """
    with_gates(project, upstream, gate)
    assert cli("-C", project.path, "apply").exit_code == 0
    monkeypatch.setenv("VECTOR", "one")
    config = project.path / "matrix.yaml"
    before = config.read_text()
    assert cli("-C", project.path, "gate", "main").exit_code == 1
    updated = cli("-C", project.path, "gate", "main", "--update-baseline")
    assert updated.exit_code == 0 and "baseline updated" in updated.stdout
    after = config.read_text()
    changed = [(a, b) for a, b in zip(before.splitlines(), after.splitlines()) if a != b]
    assert len(changed) == 1 and changed[0][1].endswith("}  # filled by --update-baseline")
    assert "baseline match" in cli("-C", project.path, "gate", "main").stdout
    monkeypatch.setenv("VECTOR", "two")
    drift = cli("-C", project.path, "gate", "main")
    assert drift.exit_code == 1 and "rerun with --update-baseline" in drift.stderr


def test_gate_needs_an_applied_tree(project: Project, upstream: Repo, cli) -> None:
    with_gates(project, upstream, "- name: noop\n  command: 'true'\n")
    result = cli("-C", project.path, "gate", "main")
    assert result.exit_code == 2 and "run `patchctl apply main` first" in result.stderr


SLOW_AND_CHEAP = """\
- name: cheap
  command: echo cheap > "$PATCHCTL_ROOT/cheap-ran"
- name: expensive
  command: echo expensive > "$PATCHCTL_ROOT/expensive-ran"
  slow: true
"""


def test_skip_slow_runs_the_cheap_gates_and_lists_the_slow_ones(project: Project, upstream: Repo, cli) -> None:
    with_gates(project, upstream, SLOW_AND_CHEAP)
    assert cli("-C", project.path, "apply").exit_code == 0
    result = cli("-C", project.path, "gate", "main", "--skip-slow")
    assert result.exit_code == 0, result.output
    assert "PASS cheap" in result.stdout and "SKIP expensive (slow: true, --skip-slow)" in result.stdout
    assert (project.path / "cheap-ran").exists() and not (project.path / "expensive-ran").exists()
    payload = json.loads(cli("-C", project.path, "gate", "main", "--skip-slow", "--json").stdout)
    assert [(g["name"], g["skipped"]) for g in payload["gates"]] == [("cheap", False), ("expensive", True)]
    assert cli("-C", project.path, "gate", "main").exit_code == 0  # without the flag: every gate
    assert (project.path / "expensive-ran").exists()


def test_skip_slow_with_only_slow_gates_checks_nothing_and_fails(project: Project, upstream: Repo, cli) -> None:
    with_gates(project, upstream, "- name: expensive\n  command: 'true'\n  slow: true\n")
    assert cli("-C", project.path, "apply").exit_code == 0
    result = cli("-C", project.path, "gate", "main", "--skip-slow")
    assert result.exit_code == 2
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("patchctl: error: every gate of series main is marked slow: --skip-slow would check nothing")


def test_slow_must_be_a_boolean(project: Project, upstream: Repo, cli) -> None:
    with_gates(project, upstream, "- name: expensive\n  command: 'true'\n  slow: sometimes\n")
    result = cli("-C", project.path, "lint", "--no-apply")
    assert result.exit_code == 2 and "slow" in result.stderr and len(result.stderr.strip().splitlines()) == 1
