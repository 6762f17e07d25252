"""Real OpenWrt packages and conda-forge feedstocks adopted on their own terms (issue 42, items
4, 5, 7 and the OpenWrt and conda-forge part of 8), on the fixtures of `fixtures/downstreams/`
(each FIXTURE.md names the repository and commit), against upstreams synthesized from their
own patches (`downstreams.py`): no upstream source is committed.

For each: `init` reads the manifest (the Makefile's PKG_SOURCE_*, the recipe's `source:`) into
a config that loads, with the tag resolved to its commit and the branch the upstream's HEAD
names; `export --check` passes right after; `apply` and a no-op `export` leave every file as
it was; and a bump to the next tag moves the manifest's version (and its release or build
number, as the downstream's own maintainers do) with the pin. The checksum is remade when this
machine remakes the current one first, else named "to refresh" with the downstream's own command
(in the report, and so in the pull request's body), never left stale without a word."""

from __future__ import annotations

import difflib
import hashlib
import json
import posixpath
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from patchctl import git
from patchctl.matrix.sources import load_project

from .conftest import ok, run_cli
from .downstreams import (
    FIXTURES,
    Upstream,
    applied,
    build_upstream,
    checkout,
    insert_lines,
    patches_of,
    pristine_files,
)


@dataclass(frozen=True)
class Downstream:
    fixture: str
    init: tuple[str, ...]  # `patchctl init` arguments (the upstream URL is added)
    manifest: str  # the file that states the release
    patch_dir: str
    old: tuple[str, str]  # (tag, version)
    new: tuple[str, str]
    next_release: Callable[[dict[str, str], Path], dict[str, str]]  # files at the old tag -> at the new
    version_line: Callable[[str], str]  # the manifest's line that states VERSION
    reset_line: str  # the release/build-number line after the bump
    checksum: str  # the checksum's name in the manifest
    naming: str  # the `naming:` init chooses from the file names
    list_file: str | None  # the downstream's own patch list (None: name order, no list file)
    dropped: tuple[str, ...] = ()  # the patches the bump drops (taken upstream)
    patches_from: str = ""  # the fixture whose patches it shares, when it keeps none of its own


def _btop_next(files: dict[str, str], _: Path) -> dict[str, str]:
    # btop 1.4.7 moved the patched lines 24 down (OpenWrt refreshed the hunk from 800 to 824).
    return insert_lines(files, "src/btop_config.cpp", 100, 24, "// added in 1.4.7, line")


def _go2rtc_next(files: dict[str, str], _: Path) -> dict[str, str]:
    return {**files, "main.go": "package main // 1.9.13\n"}


def _sentencepiece_next(files: dict[str, str], root: Path) -> dict[str, str]:
    # 0.2.1 has google/sentencepiece#979, which the feedstock carried as 0007.
    backport = patches_of(root, "recipe/patches", ["0007-move-setting-of-default-CMAKE_INSTALL_-BIN-INCLUDE-L.patch"])
    return insert_lines(applied(files, backport[0]), "python/setup.py", 1, 3, "# added in 0.2.1, line")


def _snappy_next(files: dict[str, str], _: Path) -> dict[str, str]:
    return insert_lines(
        insert_lines(files, "CMakeLists.txt", 2, 5, "# added in 1.2.2, line"), "snappy.cc", 3, 2, "// 1.2.2"
    )


DOWNSTREAMS = {
    "openwrt-btop": Downstream(
        "openwrt-btop",
        ("--from", "openwrt", "admin/btop"),
        "admin/btop/Makefile",
        "admin/btop/patches",
        ("v1.4.6", "1.4.6"),
        ("v1.4.7", "1.4.7"),
        _btop_next,
        lambda version: f"PKG_VERSION:={version}\n",
        "PKG_RELEASE:=1\n",
        "PKG_HASH",
        "openwrt",
        None,  # quilt.mk reads patches/series when it exists: none is written
    ),
    "openwrt-go2rtc": Downstream(
        "openwrt-go2rtc",
        ("--from", "openwrt", "multimedia/go2rtc"),
        "multimedia/go2rtc/Makefile",
        "multimedia/go2rtc/patches",
        ("v1.9.12", "1.9.12"),
        ("v1.9.13", "1.9.13"),
        _go2rtc_next,
        lambda version: f"PKG_VERSION:={version}\n",
        "PKG_RELEASE:=1\n",
        "PKG_MIRROR_HASH",
        "format-patch",  # 0001-, 0002-: git format-patch's names, long slugs kept
        None,
    ),
    "conda-sentencepiece": Downstream(
        "conda-sentencepiece",
        ("--from", "conda-forge"),
        "recipe/meta.yaml",
        "recipe/patches",
        ("v0.2.0", "0.2.0"),
        ("v0.2.1", "0.2.1"),
        _sentencepiece_next,
        lambda version: f'{{% set version = "{version}" %}}\n',
        "  number: 0\n",
        "sha256",
        "format-patch",  # 0003, 0006, 0007, 0008, 0013: numbered with gaps
        "recipe/meta.yaml",
        ("0007-move-setting-of-default-CMAKE_INSTALL_-BIN-INCLUDE-L.patch",),
    ),
    "conda-snappy-v1": Downstream(
        "conda-snappy-v1",
        ("--from", "conda-forge"),
        "recipe/recipe.yaml",
        "recipe/patches",
        ("1.2.2", "1.2.2"),
        ("1.2.3", "1.2.3"),
        _snappy_next,
        lambda version: f"  version: {version}\n",
        "  number: 0\n",
        "sha256",
        "format-patch",
        "recipe/recipe.yaml",
        patches_from="conda-snappy",
    ),
    "conda-snappy": Downstream(
        "conda-snappy",
        ("--from", "conda-forge"),
        "recipe/meta.yaml",
        "recipe/patches",
        ("1.2.1", "1.2.1"),
        ("1.2.2", "1.2.2"),
        _snappy_next,
        lambda version: f'{{% set version = "{version}" %}}\n',
        "  number: 0\n",
        "sha256",
        "format-patch",
        "recipe/meta.yaml",
    ),
}


def synthesized_upstream(case: Downstream, tmp_path: Path) -> Upstream:
    fixture = tmp_path / "fixture-files"
    shutil.copytree(FIXTURES / (case.patches_from or case.fixture), fixture)
    old = pristine_files(patches_of(fixture, case.patch_dir))
    return build_upstream(tmp_path / "upstream", [(case.old[0], old), (case.new[0], case.next_release(old, fixture))])


def adopt(case: Downstream, tmp_path: Path, edit: Callable[[Path, Upstream], None] | None = None):
    """(checkout, upstream, init's output): the fixture adopted with `init` as a maintainer would."""
    upstream = synthesized_upstream(case, tmp_path)

    def prepare(root: Path) -> None:
        if case.patches_from:
            shutil.copytree(FIXTURES / case.patches_from / case.patch_dir, root / case.patch_dir)
        if edit is not None:
            edit(root, upstream)

    root = checkout(case.fixture, tmp_path / case.fixture, prepare)
    result = run_cli("-C", root, "init", *case.init, "--upstream-url", upstream.url)
    assert result.exit_code == 0, result.output
    git.run(["add", "--all", "--force", "--", "matrix.yaml", "templates", ".pre-commit-config.yaml"], root)
    git.commit_all(root, "adopt patchctl")
    return root, upstream, result


def github_digest(upstream: Upstream, tag: str, prefix: str) -> str:
    """GitHub's tarball of TAG, made the way GitHub makes it: `git archive` through `gzip -n`."""
    archive = subprocess.run(
        ["git", "-C", str(upstream.path), "archive", "--format=tar", f"--prefix={prefix}/", tag],
        capture_output=True,
        check=True,
    ).stdout
    return hashlib.sha256(
        subprocess.run(["gzip", "-n"], input=archive, capture_output=True, check=True).stdout
    ).hexdigest()


def openwrt_git_digest(upstream: Upstream, tag: str, subdir: str, tmp_path: Path) -> str:
    """OpenWrt's tarball of a git checkout, as include/download.mk's rawgit and dl_tar_pack make
    it (a shell pipeline of the same commands, written apart from patchctl's own)."""
    work = tmp_path / f"openwrt-dl-{tag}"
    work.mkdir()
    script = (
        'set -e; umask 022; mkdir "$SUBDIR"; git -C "$REPO" -c core.abbrev=8 archive --format=tar "$TAG" | '
        'tar --no-same-owner --no-same-permissions -C "$SUBDIR" -xf -; '
        'ts=$(git -C "$REPO" log -1 --format=@%ct "$TAG"); '
        'tar --numeric-owner --owner=0 --group=0 --mode=a-s --sort=name --mtime="$ts" -c "$SUBDIR" '
        "| zstd -T0 --ultra -20 -c -q"
    )
    env = {"PATH": "/usr/bin:/bin", "REPO": str(upstream.path), "TAG": tag, "SUBDIR": subdir}
    packed = subprocess.run(["sh", "-c", script], cwd=work, env=env, capture_output=True, check=True).stdout
    return hashlib.sha256(packed).hexdigest()


def checksum_of(text: str, name: str) -> str:
    match = re.search(rf"^\s*{name}\s*:?=?\s*([0-9a-f]{{64}})\s*$", text, re.M)
    assert match, (name, text[:400])
    return match.group(1)


def changed(root: Path) -> list[str]:
    return sorted(line[3:] for line in git.run(["status", "--porcelain"], root).stdout.splitlines())


# ------------------------------------------------------------------ init


@pytest.mark.parametrize("name", sorted(DOWNSTREAMS))
def test_init_reads_the_manifest_into_a_config_that_loads(tmp_path: Path, name: str) -> None:
    case = DOWNSTREAMS[name]
    root, upstream, result = adopt(case, tmp_path)
    out = result.stdout
    pin = upstream.tags[case.old[0]]
    assert f"found: pin: {pin} = {case.old[0]} ({case.manifest}:" in out
    assert f"found: version: {case.old[1]} ({case.manifest}:" in out
    assert f"found: manifest: {case.manifest} (" in out
    assert "found: branch: main (the upstream's HEAD)" in out  # not master: the upstream said so
    config = load_project(root / "matrix.yaml")
    (up,) = config.upstreams.values()
    assert (up.pin, up.version, up.branch) == (pin, case.old[1], "main")
    assert up.tag.replace("{version}", case.old[1]) == case.old[0]
    assert [(m.path, m.format) for m in up.manifests] == [
        (case.manifest, name.split("-")[0].replace("conda", "conda-forge"))
    ]
    (series,) = config.series.values()
    assert series.dir == root / case.patch_dir
    assert "lint: no findings" in ok("-C", root, "lint")  # PC010: the manifest states the pin; PC009: it applies
    # the Makefile or recipe is a manifest: pre-commit runs lint when it changes
    hooks = yaml.safe_load((root / ".pre-commit-config.yaml").read_text())["repos"][0]["hooks"]
    assert re.search(hooks[0]["files"], case.manifest)


def test_init_names_the_line_of_a_makefile_it_cannot_map_and_writes_nothing(tmp_path: Path) -> None:
    root = checkout("openwrt-btop", tmp_path / "btop")
    makefile = root / "admin/btop/Makefile"
    makefile.write_text(
        makefile.read_text().replace("https://codeload.github.com/aristocratos/btop/tar.gz", "https://example.org/dl")
    )
    result = run_cli("-C", root, "init", "--from", "openwrt", "admin/btop")
    assert result.exit_code == 2
    assert result.stderr.startswith(
        "patchctl: error: admin/btop/Makefile:8: PKG_SOURCE_URL 'https://example.org/dl/v1.4.6?'"
    )
    assert "give --upstream-url URL and --pin SHA" in result.stderr and result.stderr.count("\n") == 1
    assert not (root / "matrix.yaml").exists()


def test_a_pin_the_upstream_cannot_resolve_stops_init_without_a_config(tmp_path: Path) -> None:
    """The issue's OpenWrt adoption wrote `pin: '0.10.8'` and a config that did not load (exit 2
    on load): now a tag the upstream lacks is one line naming where it was read, and nothing is written."""
    case = DOWNSTREAMS["openwrt-btop"]
    upstream = synthesized_upstream(case, tmp_path)
    git.run(["tag", "-d", "v1.4.6"], upstream.path)
    root = checkout(case.fixture, tmp_path / "btop")
    result = run_cli("-C", root, "init", *case.init, "--upstream-url", upstream.url)
    assert result.exit_code == 2 and not (root / "matrix.yaml").exists()
    assert result.stderr == (
        f"patchctl: error: admin/btop/Makefile:8: 'v1.4.6' is neither a tag, a branch nor a commit of {upstream.url}: "
        "give --pin SHA\n"
    )


# ------------------------------------------------------------------ apply, no-op export, bump


@pytest.mark.parametrize("name", sorted(DOWNSTREAMS))
def test_adopt_apply_a_noop_export_and_a_bump_keep_their_list_and_move_their_version(tmp_path: Path, name: str) -> None:
    """The whole sequence a maintainer runs: adopt, apply, a no-op export (byte-identical), one
    bump; after it the manifest states the new release (its checksum remade or listed to refresh,
    with the downstream's command), and the downstream's own list names exactly the patches left,
    in their order, edited in the same write: no second list beside theirs, ever."""
    case = DOWNSTREAMS[name]
    root, upstream, _ = adopt(case, tmp_path)
    patch_dir = root / case.patch_dir
    names = sorted(p.name for p in patch_dir.iterdir() if p.name.endswith(".patch"))
    config = load_project(root / "matrix.yaml")
    (series,) = config.series.values()
    assert series.naming == case.naming
    if case.list_file is None:  # name order: no list file, and none written (OpenWrt's build would read it)
        assert (series.patch_list.kind, series.patch_list.path) == ("none", None)
    else:
        assert (series.patch_list.kind, series.patch_list.path) == ("conda-forge", root / case.list_file)
        assert _listed(root, case) == names  # the recipe's order is the files' here
    assert not (patch_dir / "series").exists() and not (patch_dir / ".patches").exists()

    # adopt -> apply -> no-op export: every byte as it was
    ok("-C", root, "export", series.name, "--check")  # it applies the series first
    ok("-C", root, "apply")
    ok("-C", root, "export", series.name)
    assert changed(root) == []  # .patchctl/ is ignored (init added it), and no patch was rewritten

    # one bump
    manifest = root / case.manifest
    before = manifest.read_text()
    report = tmp_path / "report.json"
    markdown = tmp_path / "report.md"
    result = run_cli("-C", root, "pin-sync", "--latest", "--json-file", report, "--report", markdown)
    assert result.exit_code == 0, result.output
    data = json.loads(report.read_text())
    assert data["new_pin"] == upstream.tags[case.new[0]] and data["target_spec"] == f"--latest ({case.new[0]})"
    after = manifest.read_text()
    assert case.version_line(case.new[1]) in after and case.version_line(case.old[1]) not in after
    assert case.reset_line in after
    config = load_project(root / "matrix.yaml")
    (up,) = config.upstreams.values()
    assert (up.pin, up.version) == (upstream.tags[case.new[0]], case.new[1])
    # The fixture's checksum is the real release's, which the synthesized upstream cannot remake:
    # it stays, and the report (the pull request's body) says so, with the downstream's command.
    assert checksum_of(after, case.checksum) == checksum_of(before, case.checksum)
    (stale,) = data["to_refresh"]
    assert stale.startswith(f"{case.manifest}:") and f": {case.checksum} still names the old release (" in stale
    command = re.search(r"run `([^`]+)`", stale).group(1)
    if name.startswith("openwrt"):
        package = Path(case.manifest).parent.name
        skip = f"{case.checksum}=skip"
        assert command == f"make package/{package}/download V=s {skip} && make package/{package}/check FIXUP=1 V=s"
    else:
        assert command == f"curl -sL {_expected_url(case, after)} | openssl sha256"
    text = markdown.read_text()
    assert "### Checksums to refresh" in text and f"`{command}`" in text
    assert any("checksum(s) in" in w and "still name the old release" in w for w in data["warnings"])

    # their list after the bump: exactly the patches present, in order; the manifest changed in
    # nothing but the release's lines and the dropped patches' entries (one write of both edits)
    left = [n for n in names if n not in case.dropped]
    assert sorted(p.name for p in patch_dir.iterdir() if p.name.endswith(".patch")) == left
    assert not (patch_dir / "series").exists() and not (patch_dir / ".patches").exists()
    if case.list_file is not None:
        assert _listed(root, case) == left
    removed, added = _line_changes(before, after)
    old_reset = next(line for line in before.splitlines(keepends=True) if line.startswith(case.reset_line[:-2]))
    resets = [(old_reset, case.reset_line)] if old_reset != case.reset_line else []  # go2rtc's was 1 already
    assert sorted(added) == sorted([case.version_line(case.new[1]), *(new for _, new in resets)])
    dropped_entries = [f"    - patches/{n}\n" for n in case.dropped]
    assert sorted(removed) == sorted([case.version_line(case.old[1]), *(old for old, _ in resets), *dropped_entries])
    assert "lint: no findings" in ok("-C", root, "lint", "--no-apply")  # PC010 (the manifest), PC015 (the list)
    assert "up to date" in ok("-C", root, "export", series.name, "--check")  # and the series at the new pin


def _listed(root: Path, case: Downstream) -> list[str]:
    """The patch files the recipe's `patches:` lists, in order, as conda-build reads them."""
    assert case.list_file is not None
    text = (root / case.list_file).read_text()
    # the Jinja statements gone, each expression a placeholder: the YAML conda-build would read
    text = re.sub(r"\$?\{\{.*?\}\}", "x", re.sub(r"\{%.*?%\}", "", text, flags=re.S))
    patches = yaml.safe_load(text)["source"]["patches"]
    return [posixpath.basename(entry) for entry in patches]


def _line_changes(before: str, after: str) -> tuple[list[str], list[str]]:
    """The lines BEFORE loses and AFTER gains, in order."""
    diff = list(difflib.ndiff(before.splitlines(keepends=True), after.splitlines(keepends=True)))
    return [line[2:] for line in diff if line.startswith("- ")], [line[2:] for line in diff if line.startswith("+ ")]


def _expected_url(case: Downstream, recipe: str) -> str:
    version = case.new[1]
    if case.fixture == "conda-sentencepiece":
        return f"https://github.com/google/sentencepiece/archive/refs/tags/v{version}.tar.gz"
    return f"https://github.com/google/snappy/archive/{version}.tar.gz"  # both snappy recipes


@pytest.mark.parametrize("name", ["openwrt-btop", "conda-sentencepiece", "conda-snappy", "conda-snappy-v1"])
def test_a_github_tarball_checksum_this_machine_remakes_is_remade(tmp_path: Path, name: str) -> None:
    """With the checksum of the synthesized upstream's own tarball in the manifest (what the
    downstream has with the real one), pin-sync remakes it first, then writes the new release's."""
    case = DOWNSTREAMS[name]
    prefix = {"openwrt-btop": "btop", "conda-sentencepiece": "sentencepiece"}.get(name, "snappy")

    def consistent(root: Path, upstream: Upstream) -> None:
        manifest = root / case.manifest
        old = checksum_of(manifest.read_text(), case.checksum)
        digest = github_digest(upstream, case.old[0], f"{prefix}-{case.old[1]}")
        manifest.write_text(manifest.read_text().replace(old, digest))

    root, upstream, _ = adopt(case, tmp_path, consistent)
    report = tmp_path / "report.json"
    assert run_cli("-C", root, "pin-sync", "--to", case.new[0], "--json-file", report).exit_code == 0
    data = json.loads(report.read_text())
    assert "to_refresh" not in data
    expected = github_digest(upstream, case.new[0], f"{prefix}-{case.new[1]}")
    assert checksum_of((root / case.manifest).read_text(), case.checksum) == expected
    assert case.manifest in data["files_changed"]


def test_openwrts_mirror_hash_is_remade_as_its_download_rule_packs_it(tmp_path: Path) -> None:
    """go2rtc is fetched with git: PKG_MIRROR_HASH is the digest of OpenWrt's own tarball of the
    checkout, made here by a shell pipeline of OpenWrt's commands for the old and the new tag."""
    case = DOWNSTREAMS["openwrt-go2rtc"]
    have_zstd = shutil.which("zstd") is not None

    def consistent(root: Path, upstream: Upstream) -> None:
        manifest = root / case.manifest
        old = checksum_of(manifest.read_text(), case.checksum)
        digest = openwrt_git_digest(upstream, case.old[0], "go2rtc-1.9.12", tmp_path) if have_zstd else "0" * 64
        manifest.write_text(manifest.read_text().replace(old, digest))

    root, upstream, _ = adopt(case, tmp_path, consistent)
    report = tmp_path / "report.json"
    assert run_cli("-C", root, "pin-sync", "--to", "v1.9.13", "--json-file", report).exit_code == 0
    data = json.loads(report.read_text())
    after = (root / case.manifest).read_text()
    if have_zstd:
        assert "to_refresh" not in data
        assert checksum_of(after, case.checksum) == openwrt_git_digest(upstream, "v1.9.13", "go2rtc-1.9.13", tmp_path)
    else:  # no zstd to pack with: said, never guessed
        (stale,) = data["to_refresh"]
        assert "no zstd on this machine" in stale


def test_a_commit_without_a_fitting_tag_is_refused_before_anything_moves(tmp_path: Path) -> None:
    case = DOWNSTREAMS["openwrt-btop"]
    root, upstream, _ = adopt(case, tmp_path)
    (upstream.path / "later.txt").write_text("untagged\n")
    untagged = git.commit_all(upstream.path, "an untagged commit")
    before = changed(root), (root / case.manifest).read_bytes()
    result = run_cli("-C", root, "pin-sync", "--to", untagged)
    assert result.exit_code == 2
    assert f"{untagged[:12]} has no tag that fits: give --to TAG" in result.stderr
    assert (changed(root), (root / case.manifest).read_bytes()) == before


def test_a_manifest_that_disagrees_with_the_pin_is_lint_pc010_and_stops_pin_sync(tmp_path: Path) -> None:
    case = DOWNSTREAMS["conda-snappy"]
    root, _, _ = adopt(case, tmp_path)
    recipe = root / case.manifest
    recipe.write_text(recipe.read_text().replace('set version = "1.2.1"', 'set version = "1.2.0"'))
    result = run_cli("-C", root, "lint", "--no-apply")
    assert result.exit_code == 1
    assert "recipe/meta.yaml:1: PC010: version is '1.2.0', not the pinned version of snappy (1.2.1, tag 1.2.1," in (
        result.stdout
    )
    result = run_cli("-C", root, "pin-sync", "--latest")
    assert result.exit_code == 2 and "recipe/meta.yaml:1: version is '1.2.0', not '1.2.1' as matrix.yaml pins it" in (
        result.stderr
    )


# ------------------------------------------------------------------ layout


def test_a_feedstock_root_config_warns_of_its_gitignore_and_the_printed_git_add_works(tmp_path: Path) -> None:
    """A feedstock's .gitignore ignores every root file (`*`) and un-ignores every directory
    (`!/**/`): `git add -A` would leave matrix.yaml, templates/ and the pre-commit config out,
    and would take each tree under .patchctl/ as an embedded repository."""
    case = DOWNSTREAMS["conda-snappy"]
    upstream = synthesized_upstream(case, tmp_path)
    root = checkout(case.fixture, tmp_path / "feedstock")
    gitignore = (root / ".gitignore").read_bytes()
    result = run_cli("-C", root, "init", "--from", "conda-forge", "--upstream-url", upstream.url)
    assert result.exit_code == 0, result.output
    assert (root / ".gitignore").read_bytes() == gitignore + b".patchctl/\n"
    (warning,) = [line for line in result.stderr.splitlines() if "init wrote are ignored" in line]
    assert warning.startswith("patchctl: warning: 7 file(s) init wrote are ignored by .gitignore:7 (`*`)")
    command = re.search(r"`(git -C [^`]+)`$", warning).group(1)
    subprocess.run(shlex.split(command), check=True, capture_output=True)  # exactly as printed
    ok("-C", root, "apply")
    git.run(["add", "-A"], root)
    staged = git.run(["diff", "--cached", "--name-only"], root).stdout.split()
    assert set(staged) == {
        ".gitignore",
        ".pre-commit-config.yaml",
        "matrix.yaml",
        *[f"templates/{t.name}" for t in (Path(__file__).parents[2] / "templates").glob("*.j2")],
    }  # and nothing of .patchctl/
    again = run_cli("-C", root, "init", "--from", "conda-forge", "--upstream-url", upstream.url, "--force")
    assert again.exit_code == 0 and (root / ".gitignore").read_bytes() == gitignore + b".patchctl/\n"  # once


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (None, b".patchctl/\n"),
        (b"build", b"build\n.patchctl/\n"),  # no final newline: one first, the entry on its own line
        (b"build\r\n", b"build\r\n.patchctl/\r\n"),
        (b"/.patchctl/\n", b"/.patchctl/\n"),  # already ignored: nothing written
    ],
)
def test_init_adds_patchctl_to_gitignore_once_and_on_its_own_line(tmp_path: Path, before, after) -> None:
    case = DOWNSTREAMS["openwrt-btop"]
    upstream = synthesized_upstream(case, tmp_path)

    def write_gitignore(root: Path) -> None:
        if before is not None:
            (root / ".gitignore").write_bytes(before)

    root = checkout(case.fixture, tmp_path / "packages", write_gitignore)
    ok("-C", root, "init", *case.init, "--upstream-url", upstream.url)
    assert (root / ".gitignore").read_bytes() == after
    ok("-C", root, "init", *case.init, "--upstream-url", upstream.url, "--force")
    assert (root / ".gitignore").read_bytes() == after


def test_a_config_in_recipe_keeps_its_trees_out_of_what_conda_build_copies(tmp_path: Path) -> None:
    """matrix.yaml in recipe/ (where conda-forge wants the maintainers' files): the applied
    trees go to .patchctl/projects/recipe at the feedstock's top, never into recipe/ (conda-build
    copies it whole); patchctl run from inside a tree finds the config; the hooks run with -C."""
    case = DOWNSTREAMS["conda-sentencepiece"]
    upstream = synthesized_upstream(case, tmp_path)
    root = checkout(case.fixture, tmp_path / "feedstock")
    result = run_cli("-C", root / "recipe", "init", "--from", "conda-forge", "--upstream-url", upstream.url)
    assert result.exit_code == 0, result.output
    assert "pre-commit reads " in result.stdout and "entry: patchctl -C recipe lint --no-apply" in result.stdout
    assert "ignored by" not in result.stderr  # recipe/ is un-ignored: nothing hidden
    assert not (root / "recipe" / ".pre-commit-config.yaml").exists()
    config = load_project(root / "recipe" / "matrix.yaml")
    assert [m.path for m in config.upstreams["sentencepiece"].manifests] == ["meta.yaml"]
    assert "applied" in ok("-C", root / "recipe", "apply")
    tree = root / ".patchctl" / "projects" / "recipe" / "trees" / "sentencepiece"
    assert (tree / "python" / "setup.py").is_file()
    assert not (root / "recipe" / ".patchctl").exists()
    assert b".patchctl/" in (root / ".gitignore").read_bytes()
    assert "up to date" in ok("-C", tree, "export", "sentencepiece", "--check")  # found from inside the tree
    assert run_cli("-C", root / "recipe", "pin-sync", "--latest").exit_code == 0
    assert '{% set version = "0.2.1" %}' in (root / "recipe" / "meta.yaml").read_text()


# ------------------------------------------------------------------ gclient


def test_gclient_deps_init_and_pin_sync_move_electrons_vars_in_place(tmp_path: Path) -> None:
    """Electron's own DEPS (fixtures/downstreams/gclient-electron): `init --from gclient
    patches/nan` finds `src/third_party/nan` through patches/config.json, its URL through
    Var('nodejs_git'), and makes `nan_version` (a commit) the manifest; pin-sync moves that
    string and nothing else; node_version (a tag) maps to a version and its tag."""
    deps = (Path(__file__).parent / "fixtures" / "downstreams" / "gclient-electron" / "DEPS").read_text()
    nan = tmp_path / "nan"
    git.init_repo(nan)
    (nan / "nan.h").write_text("".join(f"line {n}\n" for n in range(1, 30)))
    first = git.commit_all(nan, "nan")
    (nan / "nan.h").write_text("new\n" + (nan / "nan.h").read_text())
    second = git.commit_all(nan, "nan, later")
    root = tmp_path / "electron"

    def lay_out(r: Path) -> None:
        (r / "DEPS").write_text(deps.replace("65b32af46e9d7fab2e4ff657751205b3865f4920", first))
        (r / "patches" / "nan").mkdir(parents=True)
        (r / "patches" / "config.json").write_text(
            json.dumps([{"patch_dir": "src/electron/patches/nan", "repo": "src/third_party/nan"}])
        )
        patch = "--- a/nan.h\n+++ b/nan.h\n@@ -10,3 +10,3 @@\n line 10\n-line 11\n+line eleven\n line 12\n"
        (r / "patches" / "nan" / "fix_line_eleven.patch").write_text(patch)

    root.mkdir()
    shutil.rmtree(root)
    root.mkdir()
    git.init_repo(root)
    lay_out(root)
    git.commit_all(root, "electron")
    result = run_cli("-C", root, "init", "--from", "gclient", "patches/nan", "--upstream-url", str(nan))
    assert result.exit_code == 0, result.output
    assert (
        "found: dependency: src/third_party/nan (patches/config.json: src/electron/patches/nan -> src/third_party/nan)"
        in (result.stdout)
    )
    config = load_project(root / "matrix.yaml")
    (up,) = config.upstreams.values()
    assert up.pin == first and up.version is None
    assert [(m.path, m.format, m.var) for m in up.manifests] == [("DEPS", "gclient", "nan_version")]
    # underscore names (naming electron) but no .patches: name order, said so (`list: none`), no list written
    assert (config.series["nan"].naming, config.series["nan"].patch_list.kind) == ("electron", "none")
    assert not (root / "patches" / "nan" / ".patches").exists()
    git.run(["add", "--all"], root)
    git.commit_all(root, "adopt")
    assert run_cli("-C", root, "pin-sync", "--to", second).exit_code == 0
    assert (root / "DEPS").read_text() == deps.replace("65b32af46e9d7fab2e4ff657751205b3865f4920", second)


def test_git_dir_on_an_openwrt_packages_patches_reads_its_makefile(tmp_path: Path) -> None:
    """The issue's adoption ran `init --from git-dir` on an OpenWrt package's patches/ and got an
    upstream named PKG_VERSION and a URL with `$(PKG_VERSION)` in it: the Makefile beside them is
    read as the package's, whatever --from says."""
    case = DOWNSTREAMS["openwrt-btop"]
    upstream = synthesized_upstream(case, tmp_path)
    root = checkout(case.fixture, tmp_path / "packages")
    out = ok("-C", root, "init", "--from", "git-dir", "admin/btop/patches", "--upstream-url", upstream.url)
    assert "found: admin/btop/patches belongs to the OpenWrt package Makefile admin/btop/Makefile" in out
    (up,) = load_project(root / "matrix.yaml").upstreams.values()
    assert (up.name, up.version, up.pin) == ("btop", "1.4.6", upstream.tags["v1.4.6"])


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ("version: 1.10", "version: must be a string: quote it ('1.1'), YAML reads 1.1 as a number"),
        ("version: '1.0'\n    tag: release", "tag: must hold {version} once (e.g. 'v{version}'), got 'release'"),
        ("tag: v{version}", "tag: a tag pattern needs a `version:` to fill it in"),
        ("version: 'a b'", "version: not a version"),
        ("manifests: [{path: Makefile, format: debian}]", "format: unknown format 'debian' (choose: openwrt"),
        ("manifests: [{path: DEPS, format: gclient}]", "a gclient manifest needs `var:`"),
        ("manifests: [{path: ../Makefile, format: openwrt}]", "path must be relative to the config's directory"),
        ("manifests: [{path: Makefile, format: openwrt, var: x}]", "`var:` is only for gclient, not openwrt"),
    ],
)
def test_release_keys_are_validated_in_one_line(tmp_path: Path, keys: str, message: str) -> None:
    root = tmp_path / "project"
    root.mkdir()
    (root / "matrix.yaml").write_text(
        f"version: 1\nupstreams:\n  up:\n    url: /nowhere\n    pin: {'a' * 40}\n    {keys}\nseries: {{}}\n"
    )
    result = run_cli("-C", root, "lint", "--no-apply")
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1 and message in result.stderr, result.stderr
    assert re.match(r"patchctl: error: \S+matrix\.yaml:\d+: upstreams\.up\.", result.stderr)


def test_a_deps_file_is_parsed_never_run(tmp_path: Path) -> None:
    """DEPS is Python syntax from the checkout: a call other than Var() or Str() is a value
    patchctl does not read, named with its line; nothing of it runs."""
    root = tmp_path / "electron"
    git.init_repo(root)
    (root / "patches" / "evil").mkdir(parents=True)
    (root / "patches" / "evil" / "a.patch").write_text("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-x\n+y\n")
    marker = tmp_path / "PWNED"
    (root / "DEPS").write_text(
        "vars = {'v': '" + "b" * 40 + "'}\n"
        f"deps = {{'src/third_party/evil': {{'url': __import__('os').system('touch {marker}') or 'x@' + Var('v')}}}}\n"
    )
    git.commit_all(root, "a hostile DEPS")
    result = run_cli("-C", root, "init", "--from", "gclient", "patches/evil")
    assert result.exit_code == 2 and not marker.exists() and not (root / "matrix.yaml").exists()
    assert result.stderr.count("\n") == 1 and "no patches/config.json entry and no DEPS dependency named like it" in (
        result.stderr
    )
    (root / "DEPS").write_text("vars = {\n")
    result = run_cli("-C", root, "init", "--from", "gclient", "patches/evil")
    assert result.exit_code == 2 and result.stderr.startswith("patchctl: error: DEPS:1: not a DEPS file gclient reads")


def test_a_manifest_reached_through_a_link_is_refused(tmp_path: Path) -> None:
    case = DOWNSTREAMS["openwrt-btop"]
    root, _, _ = adopt(case, tmp_path)
    outside = tmp_path / "outside-Makefile"
    outside.write_bytes((root / case.manifest).read_bytes())
    (root / case.manifest).unlink()
    (root / case.manifest).symlink_to(outside)
    result = run_cli("-C", root, "lint", "--no-apply")
    assert result.exit_code == 1 and "PC010" in result.stdout and "link" in result.stdout, result.output
    result = run_cli("-C", root, "pin-sync", "--latest")
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.output
    assert "refusing to write admin/btop/Makefile: admin/btop/Makefile is a symlink" in result.stderr
    assert (
        outside.read_bytes()
        == (Path(__file__).parent / "fixtures/downstreams/openwrt-btop" / case.manifest).read_bytes()
    )


@pytest.mark.parametrize("what", ["a link out", "a directory"])
def test_a_gitignore_init_cannot_write_stops_it_before_the_first_byte(tmp_path: Path, what: str) -> None:
    root = tmp_path / "project"
    git.init_repo(root)
    outside = tmp_path / "outside"
    outside.write_text("theirs\n")
    if what == "a link out":
        (root / ".gitignore").symlink_to(outside)
    else:
        (root / ".gitignore").mkdir()
    result = run_cli("-C", root, "init")
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.output
    assert "init adds `.patchctl/` there" in result.stderr
    assert not (root / "matrix.yaml").exists() and outside.read_text() == "theirs\n"


def test_a_v1_recipe_version_yaml_would_read_as_a_number_is_quoted_when_moved() -> None:
    """rattler-build's `context:` is YAML: `version: 1.9` moved to 1.10 unquoted would be read
    as the number 1.1. The new value gets quotes where the old had none and YAML would misread it."""
    from patchctl.project.manifests import Manifest, PinState
    from patchctl.project.manifests.formats import moved

    recipe = (FIXTURES / "conda-snappy-v1" / "recipe" / "recipe.yaml").read_text()
    text = recipe.replace("version: 1.2.2", "version: 1.9")
    manifest = Manifest("recipe/recipe.yaml", "conda-forge")
    after = moved(manifest, text, PinState("a" * 40, "1.9", "1.9"), PinState("b" * 40, "1.10", "1.10"))
    assert yaml.safe_load(after)["context"]["version"] == "1.10"
    assert '  version: "1.10"\n' in after and after.count("\n") == text.count("\n")
    again = moved(manifest, after, PinState("b" * 40, "1.10", "1.10"), PinState("c" * 40, "1.11.0", "1.11.0"))
    assert '  version: "1.11.0"\n' in again  # quoted stays quoted, whatever the value


# The source lines of real package Makefiles (openwrt/packages at 0521bb5679, each package's
# PKG_* assignments as written there) and what init maps them to.
_OPENWRT_SOURCES = {
    "libs/cjson": (
        "PKG_NAME:=cJSON\nPKG_VERSION:=1.7.19\nPKG_SOURCE:=$(PKG_NAME)-$(PKG_VERSION).tar.gz\n"
        "PKG_SOURCE_URL:=https://codeload.github.com/DaveGamble/cJSON/tar.gz/v$(PKG_VERSION)?\n",
        ("github-archive", "https://github.com/DaveGamble/cJSON", "v1.7.19", "v{version}", "cJSON-1.7.19"),
    ),
    "libs/gperftools": (
        "PKG_NAME:=gperftools\nPKG_VERSION:=2.17.2\nPKG_SOURCE:=$(PKG_NAME)-$(PKG_VERSION).tar.gz\n"
        "PKG_SOURCE_URL:=https://codeload.github.com/gperftools/gperftools/tar.gz/$(PKG_NAME)-$(PKG_VERSION)?\n",
        (
            "github-archive",
            "https://github.com/gperftools/gperftools",
            "gperftools-2.17.2",
            "gperftools-{version}",
            "gperftools-gperftools-2.17.2",
        ),
    ),
    "utils/mktorrent": (
        "PKG_NAME:=mktorrent\nPKG_VERSION:=1.1\nPKG_SOURCE_PROTO:=git\nPKG_SOURCE:=$(PKG_NAME)-$(PKG_VERSION).tar.xz\n"
        "PKG_SOURCE_URL:=https://github.com/Rudde/$(PKG_NAME)\n"
        "PKG_SOURCE_VERSION:=b20ef699b4ee5ded2f078ead776c7deac969e19a\n",
        (
            "git",
            "https://github.com/Rudde/mktorrent",
            "b20ef699b4ee5ded2f078ead776c7deac969e19a",
            None,
            "mktorrent-1.1",
        ),
    ),
    "lang/lua/luasocket": (
        "PKG_NAME:=luasocket\nPKG_VERSION:=3.1.0\nPKG_SOURCE_PROTO:=git\nPKG_SOURCE_VERSION:=v$(PKG_VERSION)\n"
        "PKG_SOURCE_URL:=https://github.com/lunarmodules/luasocket\n",
        ("git", "https://github.com/lunarmodules/luasocket", "v3.1.0", "v{version}", "luasocket-3.1.0"),
    ),
    "net/mptcpd": (
        "PKG_NAME:=mptcpd\nPKG_VERSION:=0.14\nPKG_SOURCE:=$(PKG_NAME)-$(PKG_VERSION).tar.gz\n"
        "PKG_SOURCE_URL:=https://github.com/multipath-tcp/mptcpd/releases/download/v$(PKG_VERSION)\n",
        ("github-release", "https://github.com/multipath-tcp/mptcpd", "v0.14", "v{version}", None),
    ),
}


@pytest.mark.parametrize("package", sorted(_OPENWRT_SOURCES))
def test_openwrt_source_lines_map_to_the_upstream_and_its_tag(package: str) -> None:
    from patchctl.project.manifests import openwrt

    lines, (kind, url, revision, pattern, archive_top) = _OPENWRT_SOURCES[package]
    text = f"include $(TOPDIR)/rules.mk\n\n{lines}PKG_HASH:={'0' * 64}\n\ninclude $(INCLUDE_DIR)/package.mk\n"
    makefile = openwrt.read(
        f"{package}/Makefile", text.replace("PKG_HASH", "PKG_MIRROR_HASH") if kind == "git" else text
    )
    source = openwrt.source(makefile)
    assert (source.kind, source.url, source.revision, source.tag_pattern) == (kind, url, revision, pattern)
    (checksum,) = openwrt.checksums(makefile)
    assert (checksum.archive.prefix if checksum.archive else None) == archive_top
    name = package.rsplit("/", 1)[1]
    assert checksum.refresh.startswith(f"make package/{name}/download V=s ")
