"""Adopting Electron-style downstreams on their own terms (issue 42), on real patch directories
of electron/electron (`fixtures/electron/`, see `electron_fixture.py` for what they hold and
where they come from).

For each: `init --from electron` keeps `.patches` as the one list (no `series` beside it) and
chooses `naming: electron` and `form: electron`; `apply` takes the order of `.patches`; a no-op
`export` changes no byte and `export --check` passes; one real bump (`pin-sync` to the commit
Electron moved to), its stops resolved as Electron's maintainers did (a patch Electron dropped
is dropped, a patch it kept is resolved to Electron's own post-bump version), leaves `.patches`
naming exactly the files present, in order, and every carried patch byte for byte what
Electron committed; Electron's own CI check (`electron_check.py`) passes on the result. A new
patch from `export` lands in `.patches` under the name Electron's exporter gives it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from patchctl import git

from . import electron_check
from .conftest import ok, run_cli
from .electron_fixture import FIXTURES, build_upstream

# Per fixture: the series, and how Electron's maintainers handled each patch in the bump:
# `carried` ones were kept (resolved to their post-bump version where the replay stops), every
# other one was dropped where the replay stopped at it; `after_sync`: the list pin-sync leaves
# (a patch that still applies cleanly is carried: Electron dropped one such by hand, `removed`);
# `added`: a patch they added in the same change (exported here).
CASES = {
    "nan": {
        "series": "nan",
        "carried": [
            "fix_correct_usages_of_v8_returnvalue_void_set_nonempty_for_new.patch",
            "fix_replace_deprecated_get_setprototype.patch",
            "fix_replace_usage_of_removed_writeutf8_with_writeutf8v2.patch",
        ],
        "after_sync": [
            "fix_correct_usages_of_v8_returnvalue_void_set_nonempty_for_new.patch",
            "fix_replace_deprecated_get_setprototype.patch",
            "fix_replace_usage_of_removed_writeutf8_with_writeutf8v2.patch",
        ],
        "added": "test_use_v8_version_check_instead_of_node_version_check.patch",
    },
    "squirrel.mac": {
        "series": "squirrel.mac",
        "carried": ["build_add_gn_config.patch"],
        "after_sync": ["build_add_gn_config.patch", "use_uttype_class_instead_of_deprecated_uttypeconformsto.patch"],
        "removed": "use_uttype_class_instead_of_deprecated_uttypeconformsto.patch",
    },
}


def files_of(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


def downstream(tmp_path: Path, name: str) -> tuple[Path, Path, str, str]:
    """(project, upstream, old pin, new pin): the fixture's patch directory committed in a
    repository with a real .gitignore, its skeleton upstream beside it."""
    fixture = FIXTURES / name
    upstream = tmp_path / "upstream"
    old, new = build_upstream(fixture, upstream)
    root = tmp_path / "electron"
    shutil.copytree(fixture / "before", root)
    (root / ".gitignore").write_text("node_modules\n.patchctl/\n")
    git.init_repo(root)
    git.commit_all(root, "electron at the commit before the bump")
    return root, upstream, old, new


def adopt(root: Path, upstream: Path, old: str, series: str) -> str:
    out = ok("-C", root, "init", "--from", "electron", f"patches/{series}", "--upstream-url", upstream, "--pin", old)
    git.commit_all(root, "adopt patchctl")
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_adopt_apply_and_a_no_op_export_keep_every_byte(tmp_path: Path, name: str) -> None:
    case = CASES[name]
    root, upstream, old, _ = downstream(tmp_path, name)
    directory = root / "patches" / case["series"]
    before = files_of(directory)
    out = adopt(root, upstream, old, case["series"])
    listed = (directory / ".patches").read_text().split()
    assert f"found: order: patches/{case['series']}/.patches ({len(listed)} patch(es), kept as the one list)" in out
    assert "found: form: electron" in out and "found: naming: electron" in out
    series = yaml.safe_load((root / "matrix.yaml").read_text())["series"][case["series"]]
    assert (series["naming"], series["form"], "list" in series) == ("electron", "electron", False)
    assert not (directory / "series").exists() and files_of(directory) == before  # nothing beside their list

    result = run_cli("-C", root, "apply")
    assert result.exit_code == 0, result.output
    applied = [line.split(":")[0].strip() for line in result.stdout.splitlines()[1:]]
    assert applied == listed  # the order of .patches, not name order
    assert "lint: no findings" in ok("-C", root, "lint")
    ok("-C", root, "export", "--check", case["series"])
    payload = json.loads(ok("-C", root, "export", case["series"], "--json"))
    assert (payload["written"], payload["deleted"], payload["unchanged"]) == ([], [], listed)
    assert files_of(directory) == before  # every byte, .patches included


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_real_bump_keeps_their_list_and_their_canonical_form(tmp_path: Path, name: str) -> None:
    case = CASES[name]
    series = case["series"]
    root, upstream, old, new = downstream(tmp_path, name)
    adopt(root, upstream, old, series)
    after = FIXTURES / name / "after" / "patches" / series
    directory = root / "patches" / series
    stops = resolve_like_electron(root, series, new, after, case["carried"])
    assert stops, "the bump stopped nowhere: nothing was resolved as Electron did"
    listed = (directory / ".patches").read_text()
    assert listed.split() == case["after_sync"]
    assert sorted(p.name for p in directory.glob("*.patch")) == sorted(case["after_sync"])  # exactly the files present
    for patch in case["carried"]:  # each as Electron's exporter wrote it on the new upstream
        assert (directory / patch).read_bytes() == (after / patch).read_bytes(), patch
    assert f"pin: {new}" in (root / "matrix.yaml").read_text()
    assert electron_check.stale(clone(upstream, tmp_path / "check"), new, directory, tmp_path) == []
    git.commit_all(root, "bump")

    # What Electron did by hand in the same change: a patch added (made as a commit in the applied
    # tree and exported: it joins .patches under the name Electron's exporter gives it) or one
    # removed (its commit dropped: it leaves .patches).
    ok("-C", root, "apply", series)
    tree = root / ".patchctl" / "trees" / series
    if "added" in case:
        git.run(["am", "--keep-non-patch", "-q", str(after / case["added"])], tree)
        written = f"wrote   {case['added']}"
    else:
        position = case["after_sync"].index(case["removed"])
        git.run(
            [
                "rebase",
                "-q",
                "--onto",
                f"HEAD~{len(case['after_sync']) - position}",
                f"HEAD~{len(case['after_sync']) - position - 1}",
            ],
            tree,
        )
        written = f"deleted {case['removed']}"
    out = ok("-C", root, "export", series)
    assert written in out and "wrote   .patches" in out
    assert (directory / ".patches").read_bytes() == (after / ".patches").read_bytes()
    assert files_of(directory) == files_of(after)
    assert electron_check.stale(clone(upstream, tmp_path / "check2"), new, directory, tmp_path) == []


def test_without_the_canonical_form_electrons_check_calls_the_carried_patches_stale(tmp_path: Path) -> None:
    """What issue 42 saw: patchctl kept the carried patches' old index lines, and Electron's check
    failed. The same bump with `form: own` (each patch keeping its own bytes where its change did
    not move) leaves patches Electron's exporter would rewrite."""
    case = CASES["nan"]
    root, upstream, old, new = downstream(tmp_path, "nan")
    adopt(root, upstream, old, "nan")
    config = root / "matrix.yaml"
    config.write_text(config.read_text().replace("    form: electron", "    form: own"))
    git.commit_all(root, "form: own")
    after = FIXTURES / "nan" / "after" / "patches" / "nan"
    resolve_like_electron(root, "nan", new, after, case["carried"])
    directory = root / "patches" / "nan"
    assert (directory / ".patches").read_text().split() == case["after_sync"]  # the list is kept in step either way
    assert electron_check.stale(clone(upstream, tmp_path / "check"), new, directory, tmp_path) != []


def resolve_like_electron(root: Path, series: str, target: str, after: Path, carried: list[str]) -> list[str]:
    """`pin-sync --to TARGET`, each stop resolved as Electron's maintainers did; the stopped
    patches, in order."""
    report = root.parent / "sync.json"
    result = run_cli("-C", root, "pin-sync", "--to", target, "--json-file", report)
    stops = []
    tree = root / ".patchctl" / "sync" / series / series
    while result.exit_code != 0:
        assert result.exit_code == 1, result.output
        stopped = [
            r
            for r in json.loads(report.read_text())["patches"]
            if r["classification"] == "conflict" or r["classification"].startswith("needs")
        ]
        assert stopped, result.output
        patch = stopped[0]["patch"]
        stops.append(patch)
        assert len(stops) < 40, stops
        git.run(["reset", "-q", "--hard"], tree)
        if patch in carried:  # Electron's own post-bump version of it, with its message
            git.run(["am", "-3", "--keep-non-patch", "-q", str(after / patch)], tree)
            options = []
        else:
            options = [] if stopped[0]["classification"] == "conflict" else ["--drop"]
        result = run_cli("-C", root, "pin-sync", series, "--continue", *options, "--json-file", report)
    return stops


def clone(upstream: Path, into: Path) -> Path:
    git.run(["clone", "-q", str(upstream), str(into)], upstream.parent)
    return into
