"""`patchctl gate` tells a gate which upstream commit its tree is applied on
(PATCHCTL_UPSTREAM_REV): the model gate keys its persistent llama.cpp build by it."""

from __future__ import annotations

import json

from .conftest import Project, Repo
from .test_gate import with_gates

SHOW_ENV = """\
- name: show-env
  command: 'echo "PASS rev-$PATCHCTL_UPSTREAM_REV"; echo "PASS series-$PATCHCTL_SERIES"'
"""


def test_gate_sees_the_upstream_rev_of_its_tree(project: Project, upstream: Repo, cli) -> None:
    with_gates(project, upstream, SHOW_ENV)
    assert cli("-C", project.path, "apply").exit_code == 0
    result = cli("-C", project.path, "gate", "--json")
    assert result.exit_code == 0, result.output
    [gate] = json.loads(result.stdout)["gates"]
    names = [case["name"] for case in gate["cases"]]
    assert names == [f"rev-{upstream.head}", f"series-{project.series_name}"]
    assert len(upstream.head) == 40
