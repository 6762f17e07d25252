"""The core promises on patch series that others wrote: Debian's rsync and tar patches.

Sources and licences (fetched at test time into the test cache, never committed; see
`realseries.py`): rsync 3.2.7 and its Debian patches (GPL-3),
https://deb.debian.org/debian/pool/main/r/rsync/; tar 1.34 and its Debian patches (GPL-3),
https://deb.debian.org/debian/pool/main/t/tar/.

* rsync: 53 `git format-patch` patches with numbering gaps, capitals and format-patch slugs.
  apply + export changes zero files; lint accepts the names. The same series as bare
  `git diff` output (no public header-less `git diff` series is reachable from here, so it
  is made from the applied commits with `git diff`) also applies and exports back unchanged.
* tar: quilt `Index:` diffs, a plain `---`/`+++` diff, DEP-3 headers and mails, ordered by a
  quilt `series` file: they apply with sensible subjects and export back byte for byte.
* A red canary and a pin-sync on rsync give the same verdicts with a fresh cache and with a
  cache an earlier `apply` and `lint` filled (the 3-way blobs are created every time).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from patchctl import git
from patchctl.series.patchset import PatchFile
from patchctl.series.patchstyle import detect

from . import realseries
from .conftest import Repo, ok, run_cli

pytestmark = pytest.mark.realseries

# The upstream change that breaks rsync's 0041 (a patch stacked on earlier patches' changes to
# util1.c): a context line of its second util1.c hunk, three lines away from what it changes.
BREAKING_FILE = "util1.c"
BREAKING_LINE = "int robust_unlink(const char *fname)"
BROKEN_PATCH = "0041-"


def make_project(path: Path, upstream: Path, pin: str, patches: dict[str, bytes], *, naming: str) -> Path:
    path.mkdir(parents=True)
    git.init_repo(path)
    (path / "matrix.yaml").write_text(
        f"version: 1\nupstreams:\n  up:\n    url: {upstream}\n    branch: main\n    pin: {pin}\n"
        f"series:\n  s:\n    upstream: up\n    naming: {naming}\n"
    )
    directory = path / "patches" / "s"
    for name, data in patches.items():
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_bytes(data)
    if naming == "quilt":
        (directory / "series").write_text("".join(f"{name}\n" for name in patches))
    return path


def files_of(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def test_rsync_apply_and_export_change_zero_files_also_as_bare_git_diffs(tmp_path: Path) -> None:
    series = realseries.rsync_series()
    assert len(series.patches) == 53 and "0051" not in "".join(series.patches)
    project = make_project(tmp_path / "proj", series.upstream, series.pin, series.patches, naming="format-patch")
    lint = json.loads(run_cli("-C", project, "lint", "--no-apply", "--json").stdout)["findings"]
    assert not [f for f in lint if f["rule"] in ("PC001", "PC002", "PC003", "PC007")]
    before = files_of(project / "patches")
    ok("-C", project, "apply")
    payload = json.loads(ok("-C", project, "export", "s", "--json"))
    assert (payload["written"], payload["renamed"], payload["deleted"]) == ([], [], [])
    assert len(payload["unchanged"]) == 53
    assert files_of(project / "patches") == before  # zero files changed, byte for byte

    # The same series as `git diff` prints it: no mail header, abbreviated index lines.
    tree = project / ".patchctl" / "trees" / "s"
    commits = git.run(["rev-list", "--reverse", f"{series.pin}..HEAD"], tree).stdout.split()
    bare = {
        name: git.run(["diff", f"{commit}^", commit], tree, binary=True).stdout
        for name, commit in zip(series.patches, commits)
    }
    assert not any(data.startswith((b"From ", b"Subject:")) for data in bare.values())
    plain = make_project(tmp_path / "plain", series.upstream, series.pin, bare, naming="format-patch")
    ok("-C", plain, "apply")
    subjects = git.run(["log", "--format=%s", "--reverse", f"{series.pin}..HEAD"], plain / ".patchctl/trees/s").stdout
    assert subjects.splitlines()[2] == "bool is a keyword in C23"  # from 0003-bool-is-a-keyword-in-C23.patch
    payload = json.loads(ok("-C", plain, "export", "s", "--json"))
    assert (payload["written"], payload["renamed"], payload["deleted"]) == ([], [], [])
    assert files_of(plain / "patches" / "s") == bare


def test_rsync_rewritten_patch_keeps_its_own_style(tmp_path: Path) -> None:
    """Debian's rsync mails have a diffstat, 10-digit index lines, a `2.51.0` signature, commit
    ids in their From lines and numbered subjects: a rewritten one keeps all of it."""
    series = realseries.rsync_series()
    project = make_project(tmp_path / "proj", series.upstream, series.pin, series.patches, naming="format-patch")
    ok("-C", project, "apply")
    tree = project / ".patchctl" / "trees" / "s"
    last = sorted(series.patches)[-1]
    touched = git.run(["diff-tree", "--no-commit-id", "--name-only", "-r", "HEAD"], tree).stdout.split()[0]
    (tree / touched).write_text((tree / touched).read_text(errors="surrogateescape") + "/* local */\n")
    git.run(["commit", "-q", "-a", "--amend", "--no-edit"], tree)
    payload = json.loads(ok("-C", project, "export", "s", "--json"))
    assert payload["written"] == [last] and len(payload["unchanged"]) == 52
    old = series.patches[last].decode()
    new = (project / "patches" / "s" / last).read_text()
    assert "+/* local */" in new
    assert detect(PatchFile(Path(last), new.encode())) == detect(PatchFile(Path(last), old.encode()))
    assert re.search(r"^Subject: \[PATCH 55/56\] popt: fix", new, re.MULTILINE)
    assert re.search(r"^ \d+ files? changed, ", new, re.MULTILINE) and new.endswith("\n-- \n2.51.0\n\n")
    assert ok("-C", project, "export", "s", "--check")


def test_tar_header_less_forms_apply_with_sensible_subjects_and_export_byte_identical(tmp_path: Path) -> None:
    series = realseries.tar_series()
    assert series.quilt_names[:3] == ["gcc-10-warnings.diff", "pristine-tar.diff", "listed03-linux-only"]
    project = make_project(tmp_path / "proj", series.upstream, series.pin, series.patches, naming="quilt")
    before = files_of(project / "patches")
    ok("-C", project, "apply")
    tree = project / ".patchctl" / "trees" / "s"
    log = git.run(["log", "--format=%s|%an", "--reverse", f"{series.pin}..HEAD"], tree).stdout.splitlines()
    assert log == [
        "gcc 10 warnings|patchctl",  # quilt Index: diff, no header: from the file name
        "pristine tar|patchctl",
        "listed03 linux only|patchctl",  # plain ---/+++ diff, no header, no extension
        "Do not encode unknown mode bits with oldgnu format.|Guillem Jover",  # DEP-3
        "Proper translation for cowardly|Salvo Tomaselli",  # DEP-3
        "Fix boundary checking in base-256 decoder|Sergey Poznyakoff",  # mail
        "Fix handling of extended header prefixes|Sergey Poznyakoff",
    ]
    body = git.run(["log", "-1", "--format=%b", "HEAD~3"], tree).stdout
    assert body.startswith("The oldgnu format can encode large header fields in base-256.")
    payload = json.loads(ok("-C", project, "export", "s", "--json"))
    assert payload["unchanged"] == series.quilt_names and payload["written"] == []
    assert files_of(project / "patches") == before
    findings = json.loads(run_cli("-C", project, "lint", "--json").stdout)["findings"]
    assert {f["rule"] for f in findings} <= {"PC007", "PC008"}
    assert {f["file"] for f in findings if f["rule"] == "PC008"} == {
        "patches/s/gcc-10-warnings.diff",
        "patches/s/pristine-tar.diff",
        "patches/s/listed03-linux-only",
    }


def red_upstream(series: realseries.RealSeries, path: Path) -> tuple[Path, str]:
    """Four upstream commits after the pin; the second breaks 0041's context."""
    upstream = Repo(realseries.clone_upstream(series, path))
    text = upstream.read(BREAKING_FILE)
    assert text.count(BREAKING_LINE + "\n") == 1
    upstream.commit({"NEWS.upstream": "one\n"}, "Upstream: add a news file")
    breaking = upstream.commit(
        {BREAKING_FILE: text.replace(BREAKING_LINE + "\n", BREAKING_LINE + " /* upstream */\n")}, "Upstream: util1.c"
    )
    upstream.commit({"NEWS.upstream": "one\ntwo\n"}, "Upstream: more news")
    upstream.commit({"NEWS.upstream": "one\ntwo\nthree\n"}, "Upstream: even more news")
    return upstream.path, breaking


def verdicts(payload: dict) -> list[tuple]:
    return [
        (p["patch"], p["strict"], p["strict_detail"], p.get("trial"), p["verdict"], p.get("blocked_by"))
        for s in payload["series"]
        for p in s["patches"]
    ]


@pytest.fixture
def red_project(tmp_path: Path) -> tuple[Path, str, realseries.RealSeries]:
    series = realseries.rsync_series()
    upstream, breaking = red_upstream(series, tmp_path / "up")
    return (
        make_project(tmp_path / "proj", upstream, series.pin, series.patches, naming="format-patch"),
        breaking,
        series,
    )


def used_cache(project: Path, cache: Path, monkeypatch) -> None:
    """What the issue saw: an earlier `apply` left the stacked patches' blobs in the mirror."""
    monkeypatch.setenv("PATCHCTL_CACHE", str(cache))
    ok("-C", project, "apply")
    shutil.rmtree(project / ".patchctl")


def test_canary_verdicts_do_not_depend_on_the_cache(red_project, tmp_path: Path, monkeypatch) -> None:
    project, breaking, _ = red_project

    def canary(cache: str, *args: str) -> dict:
        monkeypatch.setenv("PATCHCTL_CACHE", str(tmp_path / cache))
        out = tmp_path / f"canary-{cache}.json"
        result = run_cli("-C", project, "canary", "--json-file", out, *args)
        assert result.exit_code == 1, result.output
        return json.loads(out.read_text())

    fresh = canary("fresh")
    used_cache(project, tmp_path / "used", monkeypatch)
    used = canary("used", "--no-bisect")
    assert verdicts(fresh) == verdicts(used)
    failing = [p for p in fresh["series"][0]["patches"] if p["verdict"] != "ok"]
    assert [p["patch"][:5] for p in failing] == [BROKEN_PATCH]
    assert failing[0]["trial"] == "merged 3-way without conflict" and failing[0]["verdict"] == "mechanical"
    assert "context drift in util1.c hunk #2" in failing[0]["strict_detail"]
    assert failing[0]["breaking_commit"]["sha"] == breaking


def test_pin_sync_verdicts_do_not_depend_on_the_cache(red_project, tmp_path: Path, monkeypatch) -> None:
    project, _, series = red_project

    def sync(cache: str) -> list[tuple[str, str]]:
        monkeypatch.setenv("PATCHCTL_CACHE", str(tmp_path / cache))
        out = tmp_path / f"sync-{cache}.json"
        result = run_cli("-C", project, "pin-sync", "--latest", "--dry-run", "--json-file", out)
        assert result.exit_code == 0, result.output
        return [(p["patch"], p["classification"]) for p in json.loads(out.read_text())["patches"]]

    fresh = sync("fresh")
    used_cache(project, tmp_path / "used", monkeypatch)
    assert sync("used") == fresh
    assert dict(fresh)[next(n for n in series.patches if n.startswith(BROKEN_PATCH))] == "merged 3-way"
    assert not any(c.startswith("needs a hand") for _, c in fresh)


def test_unreachable_archive_uses_the_cache_then_skips_or_fails_under_require_network(
    tmp_path: Path, monkeypatch
) -> None:
    real = realseries.fetch(*realseries.TAR_DEBIAN)
    cache = tmp_path / "cache"
    monkeypatch.setattr(realseries, "POOL", "http://127.0.0.1:9/debian/pool/main")
    monkeypatch.setattr(realseries, "data_dir", lambda: cache)
    monkeypatch.setenv("PATCHCTL_REQUIRE_NETWORK", "1")
    cache.mkdir()
    shutil.copy(real, cache / real.name)
    assert realseries.fetch(*realseries.TAR_DEBIAN) == cache / real.name  # cached and sha-checked: no network
    (cache / real.name).write_bytes(b"tampered")
    with pytest.raises(pytest.fail.Exception, match="unreachable and PATCHCTL_REQUIRE_NETWORK=1"):
        realseries.fetch(*realseries.TAR_DEBIAN)
    monkeypatch.delenv("PATCHCTL_REQUIRE_NETWORK")
    with pytest.raises(pytest.skip.Exception, match="unreachable and nothing is cached"):
        realseries.fetch(*realseries.TAR_DEBIAN)
