"""MX802 judges a `run:` step only as the runner would run it (patchctl/matrix/workflow_steps.py):
its runner's system, its shell (pwsh, cmd, python, a custom `{0}`), `defaults.run`, its
working directory and where the job checked this repository out. Each case is one workflow in a
real git repository holding `scripts/build.ps1`, `scripts/build.sh` and `tools/check.sh`."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from patchctl import git

from .conftest import run_cli

CHECKOUT = "      - uses: actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1 # v7.0.1\n"


def workflow(runs_on: str, *steps: str, job: str = "", top: str = "", checkout: str = CHECKOUT) -> str:
    body = "".join(textwrap.indent(textwrap.dedent(step).strip("\n"), "      ") + "\n" for step in steps)
    return (
        f"name: w\non: push\npermissions: {{}}\n{top}jobs:\n  j:\n    runs-on: {runs_on}\n{job}    steps:\n"
        f"{checkout}{body}"
    )


def judged(tmp_path: Path, text: str, files: dict[str, str] | None = None) -> tuple[list[str], dict]:
    """(MX802 subjects, what was read) of `matrix check` on a repository whose one workflow is TEXT."""
    root = tmp_path / "repo"
    for name, content in {
        "matrix.yaml": "version: 1\nupstreams: {}\nseries: {}\n",
        "scripts/build.ps1": "Write-Host build\n",
        "scripts/build.sh": "echo build\n",
        "tools/check.sh": "echo check\n",
        ".github/workflows/w.yml": text,
        **(files or {}),
    }.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(content)
    git.init_repo(root)
    git.commit_all(root, "a repository")
    result = run_cli("-C", root, "matrix", "check", "--json")
    payload = json.loads(result.stdout)
    assert {f["rule"] for f in payload["findings"]} <= {"MX802"}, result.output
    return [f["subject"] for f in payload["findings"]], payload["workflows"]


WINDOWS_CALL = "- run: ./scripts/build -Release"

CASES = {
    # The runner's default shell: pwsh on Windows finds build.ps1; bash elsewhere does not.
    "pwsh on a windows runner finds .ps1": (workflow("windows-latest", WINDOWS_CALL), []),
    "a custom label naming windows": (workflow("[self-hosted, windows, x64]", WINDOWS_CALL), []),
    "bash on ubuntu does not": (workflow("ubuntu-latest", WINDOWS_CALL), ["./scripts/build"]),
    "bash on macos does not": (workflow("macos-15", WINDOWS_CALL), ["./scripts/build"]),
    "shell: pwsh on ubuntu finds .ps1": (workflow("ubuntu-latest", WINDOWS_CALL + "\n  shell: pwsh"), []),
    "shell: powershell": (workflow("windows-2022", WINDOWS_CALL + "\n  shell: powershell"), []),
    "pwsh backslashes and the call operator": (
        workflow("windows-latest", r"- run: '& .\scripts\build.ps1; .\tools\absent.ps1'"),
        ["./tools/absent.ps1"],
    ),
    "pwsh: a quoted ; separates nothing": (
        workflow("windows-latest", """- run: 'Write-Host "built; ./tools/none.ps1 next"'"""),
        [],
    ),
    # Shells whose scripts are not read: nothing judged, whatever they name.
    "shell: cmd is not read": (workflow("windows-latest", "- run: scripts\\absent.bat\n  shell: cmd"), []),
    "shell: python is not read": (workflow("ubuntu-latest", "- run: tools/absent.py\n  shell: python"), []),
    "a custom program is not read": (workflow("ubuntu-latest", "- run: tools/absent\n  shell: perl {0}"), []),
    "a custom bash is read": (
        workflow("ubuntu-latest", "- run: tools/absent.sh\n  shell: bash --noprofile --norc -eo pipefail {0}"),
        ["tools/absent.sh"],
    ),
    # defaults.run of the workflow and of the job.
    "defaults.run.shell of the workflow": (
        workflow("ubuntu-latest", WINDOWS_CALL, top="defaults:\n  run:\n    shell: pwsh\n"),
        [],
    ),
    "defaults.run.shell of the job": (
        workflow("windows-latest", WINDOWS_CALL, job="    defaults:\n      run:\n        shell: bash\n"),
        [],  # Git Bash on Windows: .exe, .cmd, .bat, .com and .ps1 are all looked for
    ),
    "defaults.run.working-directory": (
        workflow(
            "ubuntu-latest",
            "- run: ./check.sh && ./gone.sh",
            job="    defaults:\n      run:\n        working-directory: tools\n",
        ),
        ["./gone.sh"],
    ),
    "working-directory: on the step": (
        workflow("ubuntu-latest", "- run: ./build.sh\n  working-directory: scripts", "- run: ./check.sh"),
        ["./check.sh"],  # the second step, from the root
    ),
    "working-directory from an expression is not read": (
        workflow("ubuntu-latest", "- run: ./absent.sh\n  working-directory: ${{ runner.temp }}"),
        [],
    ),
    # The runner from the job's matrix: a finding only where every runner fails.
    "matrix runs-on, one of them windows": (
        workflow(
            "${{ matrix.os }}",
            WINDOWS_CALL,
            job="    strategy:\n      matrix:\n        os: [ubuntu-latest, windows-latest]\n",
        ),
        [],
    ),
    "matrix runs-on, all linux": (
        workflow(
            "${{ matrix.os }}",
            WINDOWS_CALL,
            job="    strategy:\n      matrix:\n        os: [ubuntu-22.04]\n"
            "        include:\n          - os: ubuntu-24.04-arm\n",
        ),
        ["./scripts/build"],
    ),
    "runs-on from an input: every system is possible": (workflow("${{ inputs.runner }}", WINDOWS_CALL), []),
    # Case: macOS and Windows file systems ignore it.
    "case on macOS": (workflow("macos-latest", "- run: ./Scripts/Build.sh"), []),
    "case on Linux": (workflow("ubuntu-latest", "- run: ./Scripts/Build.sh"), ["./Scripts/Build.sh"]),
    # Where this repository is checked out.
    "no checkout: not read": (workflow("ubuntu-latest", "- run: ./absent.sh", checkout=""), []),
    "checked out at a path": (
        workflow(
            "ubuntu-latest",
            "- run: ./src/me/tools/check.sh && src/me/tools/gone.sh",
            checkout=CHECKOUT + "        with:\n          path: src/me\n",
        ),
        ["src/me/tools/gone.sh"],
    ),
    "another repository over it": (
        workflow(
            "ubuntu-latest",
            "- uses: actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1\n  with:\n    repository: a/b",
            "- run: ./absent.sh",
        ),
        [],
    ),
    "another ref over it": (
        workflow(
            "ubuntu-latest",
            "- uses: actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1\n  with:\n    ref: gh-pages",
            "- run: ./absent.sh",
        ),
        [],
    ),
    # The script read as bash reads it.
    "here-document, continuation, comments, quotes": (
        workflow(
            "ubuntu-latest",
            """\
            - run: |
                # ./commented.sh
                cat <<'EOF' > notes
                ./inside-heredoc.sh
                EOF
                docker run --rm \\
                  ./continued/argument
                echo "./in/quotes.sh"
                VAR=1 sudo -E ./tools/gone.sh
            """,
        ),
        ["./tools/gone.sh"],
    ),
    "after cd, nothing is judged": (workflow("ubuntu-latest", "- run: cd scripts && ./build.sh && ./gone.sh"), []),
    "a subshell's command": (
        workflow("ubuntu-latest", "- run: v=$(tools/gone.sh) && (scripts/gone.sh)"),
        ["scripts/gone.sh", "tools/gone.sh"],
    ),
    "made earlier in the job": (
        workflow(
            "ubuntu-latest", "- run: curl -o tools/get.sh https://example.invalid/get.sh", "- run: ./tools/get.sh"
        ),
        [],
    ),
    "guarded by a test": (workflow("ubuntu-latest", "- run: if [ -x tools/opt.sh ]; then tools/opt.sh; fi"), []),
    "a build output git ignores": (
        workflow("ubuntu-latest", "- run: make && ./out/app"),
        {"files": {".gitignore": "/out/\n"}, "found": []},
    ),
    "made by autoconf": (
        workflow("ubuntu-latest", "- run: autoreconf -fi && ./configure && make"),
        {"files": {"configure.ac": "AC_INIT\n"}, "found": []},
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_step_is_judged_as_its_runner_runs_it(tmp_path: Path, case: str) -> None:
    text, expected = CASES[case]
    files = expected.get("files") if isinstance(expected, dict) else None
    expected = expected["found"] if isinstance(expected, dict) else expected
    found, _ = judged(tmp_path, text, files)
    assert found == expected


def test_steps_that_cannot_be_read_are_counted_as_such(tmp_path: Path) -> None:
    text = workflow(
        "windows-latest",
        "- run: scripts\\build.bat\n  shell: cmd",
        "- run: ./scripts/build",
        "- run: print(1)\n  shell: python",
    )
    found, read = judged(tmp_path, text)
    assert found == [] and (read["files"], read["run_steps"], read["read"]) == (1, 3, 1)
