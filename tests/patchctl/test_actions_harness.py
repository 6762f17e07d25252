"""The workflow harness itself: expressions as GitHub evaluates them, the runner's files, step
status. A harness that misread a workflow would make every test built on it pass for nothing."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from .actions_harness import ExpressionError, Harness, read_file_commands


def evaluate(tmp_path: Path, expression: str, **context) -> object:
    h = Harness(tmp_path, tmp_path / "runner")
    return h.evaluate(expression, {"github": h.github, "runner": h.runner, **context}, lambda: "success")


@pytest.mark.parametrize(
    "expression, expected",
    [
        ("'a' == 'A'", True),  # strings compare case-insensitively
        ("1 == '1'", True),
        ("inputs.x && 'yes' || 'no'", "no"),  # && and || return operands, not booleans
        ("inputs.y && 'yes' || 'no'", "yes"),
        ("!inputs.x", True),
        ("format('--to {0}', inputs.y)", "--to v1"),
        ("fromJSON(format('[\"{0}\"]', inputs.y))", ["v1"]),
        ("contains(fromJSON('[\"a\",\"b\"]'), 'B')", True),
        ("startsWith(github.ref, 'refs/heads/')", True),
        ("runner.os == 'Linux'", True),
        ("inputs['y']", "v1"),
        ("steps.one.outputs.missing", None),
        ("'it''s'", "it's"),
    ],
)
def test_expressions(tmp_path: Path, expression: str, expected: object) -> None:
    context = {"inputs": {"x": "", "y": "v1"}, "steps": {"one": {"outputs": {}}}}
    assert evaluate(tmp_path, expression, **context) == expected


@pytest.mark.parametrize("expression", ["nosuch.x", "hashFile('x')", "inputs.x ==", "inputs.x }}"])
def test_what_it_does_not_understand_is_an_error(tmp_path: Path, expression: str) -> None:
    with pytest.raises(ExpressionError):
        evaluate(tmp_path, expression, inputs={"x": ""})


def test_output_files_both_forms(tmp_path: Path) -> None:
    path = tmp_path / "out"
    path.write_text("a=1\nb=x=y\nc<<EOF\nline 1\nline 2\nEOF\n")
    assert read_file_commands(path) == {"a": "1", "b": "x=y", "c": "line 1\nline 2"}
    path.write_text("c<<EOF\nnever closed\n")
    with pytest.raises(ExpressionError):
        read_file_commands(path)


def test_a_job_env_outputs_status_and_conditions(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / "sub").mkdir(parents=True)
    workflow = tmp_path / "wf.yml"
    workflow.write_text(
        textwrap.dedent(
            """\
            name: t
            on: push
            env:
              TOP: top-${{ github.event_name }}
            jobs:
              j:
                runs-on: ubuntu-latest
                defaults:
                  run:
                    working-directory: sub
                steps:
                  - id: a
                    env:
                      WHO: ${{ matrix.who }}
                    run: |
                      echo "greeting=hello $WHO from $(basename "$PWD") $TOP $RUNNER_OS" >> "$GITHUB_OUTPUT"
                      echo "LATER=set" >> "$GITHUB_ENV"
                      echo "summary line" >> "$GITHUB_STEP_SUMMARY"
                  - id: b
                    env:
                      GREETING: ${{ steps.a.outputs.greeting }}
                    run: echo "seen=$GREETING/$LATER" >> "$GITHUB_OUTPUT"
                  - id: fails
                    continue-on-error: true
                    run: exit 3
                  - id: after
                    if: steps.fails.outcome == 'failure'
                    run: echo "ran=yes" >> "$GITHUB_OUTPUT"
                  - id: boom
                    run: false
                  - id: skipped
                    run: echo never
                  - id: cleanup
                    if: always()
                    run: echo "status=$STATUS" >> "$GITHUB_OUTPUT"
                    env:
                      STATUS: ${{ job.status }}
                  - id: on-failure
                    if: failure()
                    run: 'true'
            """
        )
    )
    job = Harness(workspace, tmp_path / "runner").run_job(workflow, "j", matrix={"who": "you"})
    assert job.steps["b"].outputs == {"seen": "hello you from sub top-push Linux/set"}
    assert job.steps["fails"].outcome == "failure" and job.steps["fails"].conclusion == "success"
    assert job.steps["after"].outputs == {"ran": "yes"}
    assert job.steps["boom"].returncode == 1 and job.steps["skipped"].kind == "skipped"
    assert job.steps["cleanup"].outputs == {"status": "failure"}
    assert job.steps["on-failure"].outcome == "success"
    assert job.status == "failure" and job.summary == "summary line\n"
