"""A canary for a downstream with no image row (issue 43 item 5): apply-only, or compiling with
the runner's own toolchain. `matrix check` accepts both without a row (MX401 is for toolchains
that stand for a shipped row's image), and `canary --compile` builds on the runner itself."""

from __future__ import annotations

import json

from .conftest import Project, Repo, make_patch, ok, run_cli

APPLY_ONLY = "canary:\n  upstream: up\n  toolchains: []\n"
ON_THE_RUNNER = """\
canary:
  upstream: up
  toolchains:
    - name: host
      command: grep -q 'main patched' src/main.c && wc -l src/util.c > built.txt
"""


def patched(project: Project, upstream: Repo) -> None:
    text = (upstream.path / "src/main.c").read_text().replace("main 1\n", "main patched\n", 1)
    project.add_patch("0001-patch-main.patch", make_patch(upstream, upstream.head, {"src/main.c": text}, "Patch main"))


def test_an_apply_only_canary_checks_clean_and_applies_at_the_tip(project: Project, upstream: Repo) -> None:
    patched(project, upstream)
    project.write_config(upstream.head, APPLY_ONLY)
    assert "matrix check: 0 row(s), no findings" in ok("-C", project.path, "matrix", "check")
    upstream.commit({"src/util.c": "util moved on\n"}, "upstream moves")
    report = json.loads(ok("-C", project.path, "canary", "--latest", "--json"))
    assert report["tip"] == upstream.head and [s["verdict"] for s in report["series"]] == ["ok"]
    assert report["compiles"] == []


def test_a_runner_toolchain_compiles_on_the_runner(project: Project, upstream: Repo) -> None:
    patched(project, upstream)
    project.write_config(upstream.head, ON_THE_RUNNER)
    assert "no findings" in ok("-C", project.path, "matrix", "check")  # no row: no MX401
    result = run_cli("-C", project.path, "canary", "--compile", "--toolchain", "host", "--json")
    assert result.exit_code == 0, result.output
    [record] = json.loads(result.stdout)["compiles"]
    assert (record["toolchain"], record["image"], record["state"]) == ("host", None, "passed")
    # The same toolchain on an unpatched tree fails: the build ran the series' tree, on this machine.
    project.write_config(upstream.head, ON_THE_RUNNER.replace("main patched", "not there"))
    broken = run_cli("-C", project.path, "canary", "--compile", "--toolchain", "host", "--json", "--no-bisect")
    assert broken.exit_code == 1
    assert json.loads(broken.stdout)["compiles"][0]["state"] == "failed"
