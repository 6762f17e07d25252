"""The dependency-bot path (.github/renovate.json): Renovate's regex managers find every pin of
matrix.yaml's actions: table and of patchctl's built-in defaults, with the commit and the release
Renovate must move, so that one grouped pull request moves them with the rendered files."""

from __future__ import annotations

import json
import re

import yaml

from patchctl.matrix.actions import DEFAULT_ACTIONS

from .matrix_fixtures import REPO

CONFIG = json.loads((REPO / ".github/renovate.json").read_text())


def python_regex(js: str) -> re.Pattern[str]:
    return re.compile(js.replace("(?<", "(?P<"))


def manager_for(path: str) -> dict:
    for manager in CONFIG["customManagers"]:
        patterns = [python_regex(p.strip("/")) for p in manager["managerFilePatterns"]]
        if any(p.search(path) for p in patterns):
            return manager
    raise AssertionError(f"no custom manager reads {path}")


def found(path: str) -> list[tuple[str, str, str]]:
    text = (REPO / path).read_text()
    manager = manager_for(path)
    assert manager["datasourceTemplate"] == "github-tags"
    return [
        (m["depName"], m["currentDigest"], m["currentValue"])
        for pattern in manager["matchStrings"]
        for m in python_regex(pattern).finditer(text)
    ]


def expected(table: dict) -> list[tuple[str, str, str]]:
    return [("/".join(name.split("/")[:2]), pin["sha"], pin["version"]) for name, pin in table.items()]


def test_renovate_reads_every_pin_of_the_actions_table() -> None:
    table = yaml.safe_load((REPO / "matrix.yaml").read_text())["actions"]
    assert sorted(found("matrix.yaml")) == sorted(expected(table))


def test_renovate_reads_every_built_in_default() -> None:
    table = {name: {"sha": pin.sha, "version": pin.version} for name, pin in DEFAULT_ACTIONS.items()}
    assert sorted(found("patchctl/matrix/actions.py")) == sorted(expected(table))


def test_one_grouped_pull_request_and_no_runner_bumps() -> None:
    assert set(CONFIG["enabledManagers"]) == {"github-actions", "custom.regex"}
    rules = CONFIG["packageRules"]
    assert any(r.get("matchDatasources") == ["github-tags"] and r.get("groupName") for r in rules)
    assert any(r.get("matchDatasources") == ["github-runners"] and r.get("enabled") is False for r in rules)
