"""`workflows: extras:` (issue 43 item 4): the workflows install patchctl's `engine` extra (torch,
triton: a 510 MB download) only where a gate or build step runs the engine; a list written by
hand that leaves it out while one does is MX805."""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path

import pytest

from patchctl.matrix import from_config
from patchctl.matrix.extras import RUNS_ENGINE, resolved_extras
from patchctl.matrix.render import context
from patchctl.matrix.schema import WORKFLOW_EXTRAS
from patchctl.matrix.sources import load_project

from .conftest import Repo, ok, run_cli
from .matrix_fixtures import REPO

ENGINE_GATE = """\
    gates:
      - name: vectors
        command: '"$PATCHCTL_PYTHON" -m engine vectors --out "$PATCHCTL_OUT/v"'
"""


@pytest.mark.parametrize(
    ("command", "runs"),
    [
        ('"$PATCHCTL_PYTHON" -m engine vectors', True),
        ("python3 -m engine.tools.bench", True),
        ("python -m 'engine' model-gate", True),
        ("python -c 'import engine; engine.main()'", True),
        ("python -c 'from engine.kernels import store'", True),
        ("echo search-engine && make engine", False),
        ("python -m engineering", False),
        ("python -m my_engine", False),
        ("c++ -std=c++17 -o engine src/engine.cpp", False),
    ],
)
def test_what_runs_the_engine(command: str, runs: bool) -> None:
    assert (RUNS_ENGINE.search(command) is not None) == runs


def test_the_extras_a_workflow_may_install_are_patchctls() -> None:
    extras = importlib.metadata.metadata("patchctl").get_all("Provides-Extra")
    assert set(WORKFLOW_EXTRAS) <= set(extras) and "engine" in WORKFLOW_EXTRAS


def test_this_repository_installs_the_engine_for_its_gates() -> None:
    config = load_project(REPO / "matrix.yaml")
    assert resolved_extras(config, from_config(config)) == ("engine",)


def test_a_new_downstream_installs_patchctl_alone_until_a_gate_runs_the_engine(tmp_path: Path, upstream: Repo) -> None:
    root = tmp_path / "downstream"
    root.mkdir()
    action = "acme/patchctl@" + "ab" * 20
    ok("-C", root, "init", "--upstream-url", upstream.path, "--pin", upstream.head, "--action", action)
    config = load_project(root / "matrix.yaml")
    matrix = from_config(config)
    assert matrix.workflows.extras is None and resolved_extras(config, matrix) == ()
    assert context(config, matrix)["extras"] == []  # what the templates read
    text = (root / "matrix.yaml").read_text()
    series_line = "    allow_empty: true  # no patch yet: remove once the first one is in\n"
    (root / "matrix.yaml").write_text(text.replace(series_line, series_line + ENGINE_GATE))
    config = load_project(root / "matrix.yaml")
    assert context(config, from_config(config))["extras"] == ["engine"]
    # A list written by hand that leaves the engine out: MX805 on its line.
    gated = (root / "matrix.yaml").read_text()
    (root / "matrix.yaml").write_text(gated + "  extras: [health]\n")
    result = run_cli("-C", root, "matrix", "check", "--json")
    assert result.exit_code == 1, result.output
    [finding] = json.loads(result.stdout)["findings"]
    where = (finding["line"], finding["rule"], finding["subject"])
    assert where == (len(gated.splitlines()) + 1, "MX805", "upstream/vectors")
    assert finding["message"] == (
        "workflows: extras: [health] leaves out engine, but gate vectors of series upstream runs patchctl's "
        "engine: add engine, or remove the key (its default follows the gates)"
    )
    (root / "matrix.yaml").write_text(gated + "  extras: [engine, health]\n")
    assert "no findings" in ok("-C", root, "matrix", "check")
