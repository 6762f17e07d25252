"""`patchctl init`: a new repository's files, and adopting the three existing layouts
(makefile-sync, quilt, git-dir) without moving a file; lint passes right after.

The vendor copies `--from makefile-sync` writes are checked by their structure here, and by
`lint`, `vendor` and `vendor --check` right after (test_vendor_ollama: on a real project)."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from patchctl import git, templates_dir
from patchctl.matrix.sources import load_project

from . import realseries
from .conftest import Repo, disk_snapshot, numbered, ok, one_line_error, run_cli

OLLAMA_MIRROR = Path("/work/.mirror/ollama+ollama/repo")
OLLAMA_COMMIT = "f63eea3d2"


def files_of(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not {".git", ".patchctl"} & set(p.relative_to(root).parts)
    }


# ------------------------------------------------------------------ a new repository


def test_new_repository_gets_config_templates_and_pre_commit_and_refuses_to_overwrite(tmp_path: Path) -> None:
    root = tmp_path / "new"
    git.init_repo(root)
    out = ok("-C", root, "init")
    assert "wrote matrix.yaml" in out and "wrote .pre-commit-config.yaml" in out
    for template in templates_dir().glob("*.j2"):
        assert (root / "templates" / template.name).read_bytes() == template.read_bytes()
    config = load_project(root / "matrix.yaml")
    assert config.upstreams == {} and config.series == {}
    assert "# Each upstream" in (root / "matrix.yaml").read_text()  # commented for a newcomer
    hooks = yaml.safe_load((root / ".pre-commit-config.yaml").read_text())
    assert [h["id"] for h in hooks["repos"][0]["hooks"]] == ["patchctl-lint"]
    before = files_of(root)

    again = run_cli("-C", root, "init")
    assert again.exit_code == 2
    assert again.stderr.count("\n") == 1
    assert again.stderr.startswith("patchctl: error: refusing to overwrite matrix.yaml, templates/")
    assert files_of(root) == before

    (root / "matrix.yaml").write_text("# mine\n")
    ok("-C", root, "init", "--force")
    assert (root / "matrix.yaml").read_bytes() == before["matrix.yaml"]
    assert not list(root.glob("**/*.patchctl-new-*")) and not list(root.glob("**/.*.tmp"))


def test_existing_pre_commit_config_is_kept_and_the_snippet_printed(tmp_path: Path, upstream: Repo) -> None:
    root = tmp_path / "new"
    git.init_repo(root)
    (root / ".pre-commit-config.yaml").write_text("repos: []\n")
    out = ok("-C", root, "init", "--upstream-url", upstream.path, "--pin", upstream.head, "--name", "up")
    assert (root / ".pre-commit-config.yaml").read_text() == "repos: []\n"
    assert ".pre-commit-config.yaml exists; add these hooks to it:" in out
    snippet = yaml.safe_load(out.split("add these hooks to it:\n", 1)[1])
    entries = [h["entry"] for h in snippet["repos"][0]["hooks"]]
    assert entries == ["patchctl lint --no-apply", "patchctl export --check up"]
    config = load_project(root / "matrix.yaml")
    assert config.upstreams["up"].pin == upstream.head and config.upstreams["up"].branch == "main"
    assert config.series["up"].allow_empty
    assert "lint: no findings" in ok("-C", root, "lint")  # the empty series is declared, the pin reachable


def test_bad_arguments_are_one_line_exit_2(tmp_path: Path, upstream: Repo) -> None:
    root = tmp_path / "r"
    git.init_repo(root)
    cases = [
        (["init", "--upstream-url", upstream.path], "give both --upstream-url and --pin"),
        (["init", "--upstream-url", upstream.path, "--pin", "abc"], "'abc' is neither a tag, a branch nor a commit"),
        (["init", "--from", "quilt"], "debian/patches/series: no such file"),
        (["init", "--from", "git-dir"], "--from git-dir needs the patch directory"),
        (["init", "--from", "makefile-sync"], "Makefile.sync: no such file"),
        (["init", "somedir"], "DIR is for --from quilt, git-dir, electron, openwrt, conda-forge or gclient"),
        # An upstream path where nothing is (a typo, a clone elsewhere): refused, nothing written.
        (
            ["init", "--upstream-url", "../nowhere", "--pin", "0" * 40],
            f"--upstream-url '../nowhere' is a local path where nothing is ({root}/../nowhere)",
        ),
        (["init", "--upstream-url", f"file://{tmp_path}/gone", "--pin", "0" * 40], f"({tmp_path}/gone)"),
    ]
    for args, message in cases:
        result = run_cli("-C", root, *args)
        assert result.exit_code == 2, (args, result.output)
        assert result.stderr.count("\n") == 1 and message in result.stderr, (args, result.stderr)
        assert files_of(root) == {}, args
    (root / "debian" / "patches").mkdir(parents=True)
    (root / "debian" / "patches" / "series").write_text("a.patch\n")
    result = run_cli("-C", root, "init", "--from", "quilt")
    assert result.exit_code == 2 and "needs --upstream-url and --pin" in result.stderr
    assert files_of(root) == {"debian/patches/series": b"a.patch\n"}  # nothing written


# ------------------------------------------------------------------ git-dir


def _series_of_patches(upstream: Repo, into: Path, count: int = 3) -> list[str]:
    """COUNT format-patch files on top of UPSTREAM's head, each from the one before (real git)."""
    scratch = upstream.path.parent / "scratch"
    git.run(["clone", "-q", str(upstream.path), str(scratch)], upstream.path.parent)
    for i in range(1, count + 1):
        (scratch / "src" / f"extra{i}.c").write_text(numbered(i + 2, f"extra{i}"))
        git.commit_all(scratch, f"Add extra{i}\n\nThe reason for extra{i}.")
    into.mkdir(parents=True, exist_ok=True)
    git.run(["format-patch", "-q", "--zero-commit", "--no-signature", "-o", str(into), upstream.head], scratch)
    shutil.rmtree(scratch)
    return sorted(p.name for p in into.iterdir())


def test_git_dir_with_a_makefile_pin_adopts_it_and_lint_passes(tmp_path: Path, upstream: Repo) -> None:
    root = tmp_path / "proj"
    git.init_repo(root)
    names = _series_of_patches(upstream, root / "patches" / "llama.cpp")
    (root / "Makefile").write_text(
        f"LLAMA_REPO ?= file://{upstream.path}\nLLAMA_VERSION?={upstream.head}\n\nall:\n\techo $(LLAMA_VERSION)\n"
    )
    before = files_of(root)
    out = ok("-C", root, "init", "--from", "git-dir", "patches/llama.cpp")
    assert f"found: pin: {upstream.head} (Makefile:2 (LLAMA_VERSION))" in out
    assert "found: pin file: Makefile:2 (LLAMA_VERSION)" in out
    assert "found: naming: format-patch" in out
    after = files_of(root)
    assert {k: v for k, v in after.items() if k in before} == before  # no file moved or changed
    config = load_project(root / "matrix.yaml")
    up = config.upstreams["upstream"]
    assert up.url == f"file://{upstream.path}" and up.pin == upstream.head
    (pin_file,) = up.pin_files
    assert pin_file.path == "Makefile"
    assert [m["pin"] for m in pin_file.pattern.finditer((root / "Makefile").read_text())] == [upstream.head]
    series = config.series["llama.cpp"]
    assert series.naming == "format-patch" and series.exclude == () and len(names) == 3
    assert "lint: no findings" in ok("-C", root, "lint", "--no-apply")
    assert "lint: no findings" in ok("-C", root, "lint")  # PC009 applies the series to the local upstream
    # the Makefile line is a real pin file: a different sha there is PC010
    (root / "Makefile").write_text((root / "Makefile").read_text().replace(upstream.head, "0" * 40))
    result = run_cli("-C", root, "lint", "--no-apply")
    assert result.exit_code == 1 and "PC010" in result.stdout


def test_git_dir_with_a_version_file_holding_a_tag_resolves_it_from_a_local_upstream(
    tmp_path: Path, upstream: Repo
) -> None:
    upstream.git("tag", "b1234")
    root = tmp_path / "proj"
    git.init_repo(root)
    _series_of_patches(upstream, root / "patches", 2)
    (root / "LLAMA_CPP_VERSION").write_text("b1234\n")
    (root / "patches" / "0002-Add-extra2.patch").rename(root / "patches" / "0007-Add-extra2.patch")
    out = ok("-C", root, "init", "--from", "git-dir", "patches", "--upstream-url", upstream.path, "--name", "llama")
    assert f"found: pin: {upstream.head} (LLAMA_CPP_VERSION:1)" in out
    assert "not mapped: LLAMA_CPP_VERSION:1: holds 'b1234', not the full commit id: no pin_files entry" in out
    config = load_project(root / "matrix.yaml")
    assert config.series["llama"].naming == "format-patch"  # a gap: not strict
    assert config.upstreams["llama"].pin_files == ()
    assert "lint: no findings" in ok("-C", root, "lint")


def test_git_dir_names_that_fit_no_numbering_keep_name_order_and_no_list_is_written(
    tmp_path: Path, upstream: Repo
) -> None:
    """Issue 42: a directory without a list is applied in name order (as OpenWrt's quilt.mk does):
    init writes no `series` beside it (that would change the downstream's build)."""
    root = tmp_path / "proj"
    git.init_repo(root)
    _series_of_patches(upstream, root / "p", 2)
    (root / "p" / "0002-Add-extra2.patch").rename(root / "p" / "zz-second.patch")
    out = ok("-C", root, "init", "--from", "git-dir", "p", "--upstream-url", upstream.path, "--pin", upstream.head)
    assert "found: naming: any" in out and "found: order: file names (2 patch(es)); no list file is written" in out
    assert not (root / "p" / "series").exists()
    assert "wrote p/" not in out
    assert "lint: no findings" in ok("-C", root, "lint")


# ------------------------------------------------------------------ makefile-sync

MAKEFILE_SYNC = """\
UPSTREAM={url}
WORKDIR=third_party/work
FETCH_HEAD={pin}

.PHONY: sync
sync: vendored/core vendored/lib

.PHONY: vendored/core
vendored/core: third_party/work
\trsync -arvzc --delete -f "include COPYING" -f "merge $@/.rsync-filter" $(addprefix $<,/COPYING /) $@

.PHONY: vendored/lib
vendored/lib: third_party/work
\trsync -arvzc --delete -f "merge $@/.rsync-filter" $(addprefix $<,/COPYING /lib/) $@

PATCHES=$(wildcard vendor-patches/*.patch)

$(WORKDIR):
\tgit clone $(UPSTREAM) $(WORKDIR)
"""

CORE_FILTER = """\
# the project's own files in vendored/core
protect .rsync-filter
P *.go
include /src/
include /src/*.c
include /include/
include /include/util.h
- *
"""

LIB_FILTER = """\
protect /BUILD
hide /internal.h
+ /sub/
+ *.h
+ *.c
-! *.c
exclude *
"""


def _sync_project(tmp_path: Path, upstream: Repo, pin: str | None = None) -> Path:
    """A vendoring project on UPSTREAM; PIN defaults to the upstream commit that adds lib/."""
    upstream.commit(
        {"lib/a.c": "a\n", "lib/a.h": "a\n", "lib/internal.h": "i\n", "lib/sub/b.h": "b\n", "COPYING": "c\n"}
    )
    pin = pin or upstream.head
    root = tmp_path / "proj"
    git.init_repo(root)
    _series_of_patches(upstream, root / "vendor-patches", 2)
    (root / "Makefile.sync").write_text(MAKEFILE_SYNC.format(url=upstream.path, pin=pin))
    (root / "vendored" / "core").mkdir(parents=True)
    (root / "vendored" / "core" / ".rsync-filter").write_text(CORE_FILTER)
    (root / "vendored" / "core" / "bind.go").write_text("package core\n")
    (root / "vendored" / "lib").mkdir(parents=True)
    (root / "vendored" / "lib" / ".rsync-filter").write_text(LIB_FILTER)
    return root


def test_makefile_sync_maps_upstream_pin_patches_and_each_rsync_copy(tmp_path: Path, upstream: Repo) -> None:
    root = _sync_project(tmp_path, upstream, "PLACEHOLDER")
    pin = upstream.head
    (root / "Makefile.sync").write_text((root / "Makefile.sync").read_text().replace("PLACEHOLDER", pin))
    before = files_of(root)
    out = ok("-C", root, "init", "--from", "makefile-sync")
    assert {k: v for k, v in files_of(root).items() if k in before} == before
    lines = out.splitlines()
    assert f"found: upstream: {upstream.path} (Makefile.sync: UPSTREAM)" in lines
    assert f"found: pin: {pin} (Makefile.sync: FETCH_HEAD)" in lines
    assert "found: pin file: Makefile.sync:3 (FETCH_HEAD)" in lines
    assert "found: patches: vendor-patches (Makefile.sync: PATCHES)" in lines
    assert [line for line in lines if line.startswith("not mapped:")] == []
    data = yaml.safe_load((root / "matrix.yaml").read_text())
    assert data["upstreams"]["upstream"] == {
        "url": str(upstream.path),
        "branch": "main",
        "pin": pin,
        "pin_files": [{"path": "Makefile.sync", "pattern": r"^FETCH_HEAD=(?P<pin>[0-9a-f]{40})"}],
    }
    series = data["series"]["upstream"]  # the patch directory has no parent to name it: the upstream's name
    assert series["dir"] == "vendor-patches" and series["naming"] == "format-patch" and series["exclude"] == []
    # Each rsync line's own filter, as rsync reads it: the command line's rules, then its merge file.
    # The COPYING rsync is given for vendored/lib is hidden by that filter: no `files:` item.
    assert series["vendor"] == [
        {"from": "", "to": "vendored/core", "filter": ["include COPYING", "merge vendored/core/.rsync-filter"]},
        {"from": "lib", "to": "vendored/lib", "filter": "vendored/lib/.rsync-filter"},
    ]
    assert "lint: no findings" in ok("-C", root, "lint", "--no-apply")
    hooks = yaml.safe_load((root / ".pre-commit-config.yaml").read_text())["repos"][0]["hooks"]
    assert [h["id"] for h in hooks] == ["patchctl-lint", "patchctl-export-check", "patchctl-vendor-check"]
    assert hooks[2]["entry"] == "patchctl vendor --check" and hooks[2]["always_run"] is True


def test_makefile_sync_short_pin_is_expanded_and_moved_as_short(tmp_path: Path, upstream: Repo) -> None:
    """Ollama's Makefile.sync held `FETCH_HEAD=ec98e2002`: the pin is the full id the upstream
    expands it to, and the line a pin_files entry of 9 hex digits, which lint (PC010) accepts as
    the pin abbreviated and pin-sync moves to the new pin abbreviated as long."""
    root = _sync_project(tmp_path, upstream, "PLACEHOLDER")
    short = upstream.head[:9]
    (root / "Makefile.sync").write_text((root / "Makefile.sync").read_text().replace("PLACEHOLDER", short))
    out = ok("-C", root, "init", "--from", "makefile-sync")
    assert f"found: pin: {upstream.head} (Makefile.sync: FETCH_HEAD)" in out
    assert "found: pin file: Makefile.sync:3 (FETCH_HEAD, the pin abbreviated to 9)" in out
    data = yaml.safe_load((root / "matrix.yaml").read_text())["upstreams"]["upstream"]
    assert data["pin"] == upstream.head
    assert data["pin_files"] == [{"path": "Makefile.sync", "pattern": r"^FETCH_HEAD=(?P<pin>[0-9a-f]{9})(?![0-9a-f])"}]
    assert "lint: no findings" in ok("-C", root, "lint", "--no-apply")
    (root / "Makefile.sync").write_text((root / "Makefile.sync").read_text().replace(short, "0123456789"))
    result = run_cli("-C", root, "lint", "--no-apply")
    assert result.exit_code == 1 and "PC010" in result.stdout  # another commit: not the pin abbreviated


UPSTREAM_TREE = {
    "src/a.c": "a\n",
    "src/b.h": "b\n",
    "src/deep/c.c": "c\n",
    "include/util.h": "u\n",
    "include/other.h": "o\n",
    "docs/x.c": "x\n",
    "lib/CMakeLists.txt": "cmake\n",
    "lib/other/e.h": "e\n",
    "lib/sub/c.c": "c\n",
    "lib/sub/d.txt": "d\n",
    "lib/sub/deeper/f.h": "f\n",
}


@pytest.mark.skipif(not (shutil.which("rsync") and shutil.which("make")), reason="needs rsync and make")
@pytest.mark.parametrize(
    "lib_filter",
    [
        LIB_FILTER,  # a whitelist, with a negated rule
        "protect keep.me\n- *.txt\nexclude /other/\n- deeper/\n",  # exclusions only: COPYING comes along
        "+ /sub/***\n+ CMakeLists.txt\n- /*\n",  # a directory and all below it, one root file
    ],
    ids=["whitelist", "exclusions", "subtree"],
)
def test_vendor_writes_exactly_what_the_makefiles_rsync_copies(tmp_path: Path, upstream: Repo, lib_filter: str) -> None:
    """The real Makefile.sync, run by make with the real rsync on the patched checkout, against
    what `patchctl vendor` writes after `init`: the same files, byte for byte."""
    upstream.commit(UPSTREAM_TREE)
    root = _sync_project(tmp_path, upstream, "PLACEHOLDER")
    pin = upstream.head
    (root / "Makefile.sync").write_text((root / "Makefile.sync").read_text().replace("PLACEHOLDER", pin))
    (root / "vendored" / "lib" / ".rsync-filter").write_text(lib_filter)
    git.commit_all(root, "a vendoring project")
    by_rsync = tmp_path / "by-rsync"
    git.run(["clone", "-q", str(root), str(by_rsync)], tmp_path)
    git.run(["clone", "-q", str(upstream.path), "third_party/work"], by_rsync)
    git.run(["checkout", "-q", pin], by_rsync / "third_party/work")
    patches = sorted((by_rsync / "vendor-patches").glob("*.patch"))
    git.run(["am", "-q", *map(str, patches)], by_rsync / "third_party/work")
    make = ["make", "-s", "-f", "Makefile.sync", "vendored/core", "vendored/lib"]
    subprocess.run(make, cwd=by_rsync, check=True, capture_output=True)

    ok("-C", root, "init", "--from", "makefile-sync")
    ok("-C", root, "vendor")
    for copy in ("vendored/core", "vendored/lib"):
        ours, theirs = files_of(root / copy), files_of(by_rsync / copy)
        # rsync --delete removes a filter file its own rules leave unprotected (its next run then
        # fails); patchctl never writes nor deletes the filter file a copy reads.
        assert ours.pop(".rsync-filter") == (root / copy / ".rsync-filter").read_bytes()
        theirs.pop(".rsync-filter", None)
        assert ours == theirs, copy
        assert len(set(ours) - {".rsync-filter", "bind.go"}) >= 3
    assert "src/extra1.c" in files_of(root / "vendored/core")  # from the series
    assert ("COPYING" in files_of(root / "vendored/lib")) == lib_filter.startswith("protect keep.me")


def test_makefile_sync_overrides_and_another_file(tmp_path: Path, upstream: Repo) -> None:
    root = _sync_project(tmp_path, upstream, "ec98e2002")
    (root / "Makefile.sync").rename(root / "sync.mk")
    out = ok(
        "-C",
        root,
        "init",
        "--from",
        "makefile-sync",
        "--file",
        "sync.mk",
        "--upstream-url",
        "https://example.org/u.git",
        "--pin",
        upstream.head,
    )
    assert "found: upstream: https://example.org/u.git (--upstream-url)" in out
    assert f"found: pin: {upstream.head} (--pin)" in out
    data = yaml.safe_load((root / "matrix.yaml").read_text())
    assert data["upstreams"]["u"]["pin"] == upstream.head and "pin_files" not in data["upstreams"]["u"]
    assert data["upstreams"]["u"]["branch"] == "master"  # not a local repository: the usual default


@pytest.mark.parametrize("kind", ["link to a directory outside", "directory"])
def test_init_force_over_a_matrix_yaml_that_is_no_file(tmp_path: Path, kind: str) -> None:
    """Found by the property test (tests/patchctl/test_property_whole.py): `init --force` where
    matrix.yaml is a link to a directory gave a ValueError traceback (the journal's check followed
    the link). A link is replaced, never followed; a directory is refused in one line."""
    root, elsewhere = tmp_path / "r", tmp_path / "elsewhere"
    git.init_repo(root)
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("mine\n")
    if kind == "directory":
        (root / "matrix.yaml").mkdir()
    else:
        (root / "matrix.yaml").symlink_to(elsewhere)
    result = run_cli("-C", root, "init", "--force")
    assert "Traceback" not in result.output
    if kind == "directory":
        line = one_line_error(result, 2)
        assert "matrix.yaml: it is a directory, where matrix.yaml belongs" in line, line
        assert (root / "matrix.yaml").is_dir() and not (root / "templates").exists()
    else:
        assert result.exit_code == 0, result.output
        assert (root / "matrix.yaml").is_file() and not (root / "matrix.yaml").is_symlink()
    assert sorted(p.name for p in elsewhere.iterdir()) == ["keep.txt"]
    assert (elsewhere / "keep.txt").read_text() == "mine\n"


def test_a_symlinked_templates_directory_leading_out_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "r"
    git.init_repo(root)
    (tmp_path / "elsewhere").mkdir()
    (root / "templates").symlink_to(tmp_path / "elsewhere")
    result = run_cli("-C", root, "init", "--force")
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.output
    assert "outside the repository" in result.stderr
    assert list((tmp_path / "elsewhere").iterdir()) == [] and not (root / "matrix.yaml").exists()


def test_makefile_sync_adoption_lints_and_vendor_check_passes(tmp_path: Path, upstream: Repo) -> None:
    root = _sync_project(tmp_path, upstream)
    ok("-C", root, "init", "--from", "makefile-sync")
    assert "lint: no findings" in ok("-C", root, "lint")
    ok("-C", root, "vendor")
    ok("-C", root, "vendor", "--check")
    assert (root / "vendored" / "core" / "bind.go").read_text() == "package core\n"  # protected


# ------------------------------------------------------------------ real data


@pytest.mark.realseries
def test_quilt_adopts_debians_tar_series_and_apply_and_export_check_pass(tmp_path: Path) -> None:
    series = realseries.tar_series()
    root = tmp_path / "tar"
    git.init_repo(root)
    directory = root / "debian" / "patches"
    directory.mkdir(parents=True)
    for name, data in series.patches.items():
        (directory / name).write_bytes(data)
    (directory / "series").write_text("".join(f"{n}\n" for n in series.quilt_names))
    (root / "debian" / "changelog").write_text("tar (1.34+dfsg-1.2+deb12u1) bookworm; urgency=medium\n")
    before = files_of(root)
    out = ok("-C", root, "init", "--from", "quilt", "--upstream-url", series.upstream, "--pin", series.pin)
    assert f"found: series: debian/patches/series ({len(series.quilt_names)} patch(es))" in out
    assert {k: v for k, v in files_of(root).items() if k in before} == before
    config = load_project(root / "matrix.yaml")
    assert config.series["tar"].naming == "quilt" and config.series["tar"].dir == root / "debian" / "patches"
    # Debian's header-less patches have no subject or description, which adopting cannot fix
    # without editing them: init says so and writes allow_undescribed, so lint passes right after.
    assert re.search(r"found: \d+ of 7 patch\(es\) without a subject or a description: allow_undescribed", out)
    assert config.series["tar"].allow_undescribed
    assert "lint: no findings" in ok("-C", root, "lint")
    text = (root / "matrix.yaml").read_text().replace("    allow_undescribed: true", "    allow_undescribed: false")
    (root / "matrix.yaml").write_text(text)
    result = run_cli("-C", root, "lint")
    rules = sorted({line.split(": ")[1] for line in result.stdout.splitlines()})
    assert result.exit_code == 1 and rules == ["PC007", "PC008"], result.output  # and nothing else
    ok("-C", root, "apply")
    ok("-C", root, "export", "tar", "--check")
    assert files_of(root) == {**before, **{k: v for k, v in files_of(root).items() if k not in before}}


@pytest.mark.slow
@pytest.mark.skipif(not OLLAMA_MIRROR.is_dir(), reason=f"no mirror of ollama at {OLLAMA_MIRROR} (CI has none)")
def test_makefile_sync_on_ollamas_last_vendoring_commit(tmp_path: Path) -> None:
    root = tmp_path / "ollama"
    root.mkdir()
    paths = ["Makefile.sync", "llama/patches", "llama/llama.cpp/.rsync-filter", "ml/backend/ggml/ggml/.rsync-filter"]
    archive = subprocess.run(
        ["git", "-C", str(OLLAMA_MIRROR), "archive", OLLAMA_COMMIT, *paths], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(root)], input=archive, check=True)
    git.init_repo(root)
    out = ok("-C", root, "init", "--from", "makefile-sync")
    print(out)  # what it could not map: shown with -s
    assert "found: upstream: https://github.com/ggml-org/llama.cpp.git (Makefile.sync: UPSTREAM)" in out
    # The short FETCH_HEAD is expanded by llama.cpp itself (init mirrors it: this needs the network).
    assert re.search(r"found: pin: ec98e2002[0-9a-f]{31} \(Makefile.sync: FETCH_HEAD\)", out)
    assert "(FETCH_HEAD, the pin abbreviated to 9)" in out
    data = yaml.safe_load((root / "matrix.yaml").read_text())
    series = data["series"]["llama"]
    assert series["dir"] == "llama/patches" and series["naming"] == "format-patch"
    assert len(list((root / "llama" / "patches").glob("*.patch"))) == 36
    assert len(list((root / "llama" / "patches").iterdir())) == 37  # and .gitignore
    first, second = series["vendor"]
    assert first == {
        "from": "",
        "to": "llama/llama.cpp",
        "filter": ["include LICENSE", "merge llama/llama.cpp/.rsync-filter"],
    }
    assert second == {
        "from": "ggml",
        "to": "ml/backend/ggml/ggml",
        "filter": ["include LICENSE", "merge ml/backend/ggml/ggml/.rsync-filter"],
        "files": [{"from": "LICENSE", "to": "ml/backend/ggml/ggml/LICENSE"}],  # llama.cpp has no ggml/LICENSE
    }
    assert "not mapped: ml/backend" not in out and "not mapped: llama/llama.cpp" not in out


# ------------------------------------------------------------------ hostile Makefiles


def _hostile_sync_project(tmp_path: Path, upstream: Repo, makefile: str) -> tuple[Path, Path]:
    """A repository whose Makefile.sync is MAKEFILE, and a victim directory beside it."""
    root = tmp_path / "proj"
    git.init_repo(root)
    (root / "Makefile.sync").write_text(makefile.replace("URL", str(upstream.path)).replace("PIN", upstream.head))
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "0001-theirs.patch").write_text("not ours\n")
    (victim / "x.patch").write_text("not ours either\n")  # a name no numbering fits: init would add a series file
    return root, victim


@pytest.mark.parametrize(
    ("patches", "said"),
    [
        ("../victim", "'..' component"),
        ("sub/../../victim", "'..' component"),
        (".git/hooks", "a path inside .git"),
        (".Git/hooks", "is .git in another case"),
    ],
)
def test_a_patch_directory_outside_the_repository_or_in_git_is_refused(
    tmp_path: Path, upstream: Repo, patches: str, said: str
) -> None:
    makefile = f"UPSTREAM=URL\nWORKDIR=work\nFETCH_HEAD=PIN\nPATCHES=$(wildcard {patches}/*.patch)\n"
    root, victim = _hostile_sync_project(tmp_path, upstream, makefile)
    before_root, before_victim = disk_snapshot(root), disk_snapshot(victim)
    line = one_line_error(run_cli("-C", root, "init", "--from", "makefile-sync"), 2)
    assert f"Makefile.sync: PATCHES: refusing to use {patches}" in line and said in line, line
    assert disk_snapshot(root) == before_root and disk_snapshot(victim) == before_victim


@pytest.mark.parametrize(
    ("variables", "said"),
    [
        ("A=$(A)\nUPSTREAM=$(A)", "$(A) nests more than 64 levels deep (a variable that refers to itself?)"),
        ("A=$(B)x\nB=$(A)y\nUPSTREAM=$(A)", "nests more than 64 levels deep"),
        ("UPSTREAM=$(UPSTREAM)/more", "$(UPSTREAM) nests more than 64 levels deep"),
        (
            "A0="
            + "x" * 64
            + "\n"
            + "".join(f"A{i}=$(A{i - 1})$(A{i - 1})\n" for i in range(1, 60))
            + "UPSTREAM=$(A59)",
            "expanding it gives more than 1,048,576 bytes",
        ),
        (
            "A0=\n" + "".join(f"A{i}=$(A{i - 1}) $(A{i - 1})\n" for i in range(1, 60)) + "UPSTREAM=$(strip $(A59))",
            "takes more than 100,000 steps",
        ),
    ],
    ids=["self", "mutual", "appended-to-itself", "doubling", "doubling-empty"],
)
def test_makefile_expansion_past_its_bounds_is_one_line(
    tmp_path: Path, upstream: Repo, variables: str, said: str
) -> None:
    makefile = f"{variables}\nWORKDIR=work\nFETCH_HEAD=PIN\nPATCHES=$(wildcard patches/*.patch)\n"
    root, victim = _hostile_sync_project(tmp_path, upstream, makefile)
    before = disk_snapshot(root)
    start = time.monotonic()
    line = one_line_error(run_cli("-C", root, "init", "--from", "makefile-sync"), 2)
    assert time.monotonic() - start < 10
    assert line.startswith("patchctl: error: Makefile.sync: ") and said in line, line
    assert disk_snapshot(root) == before


def test_a_linked_makefile_or_filter_file_is_not_read(tmp_path: Path, upstream: Repo) -> None:
    root = _sync_project(tmp_path, upstream)
    secret = tmp_path / "secret-filter"
    secret.write_text("include /secret/\n")
    filter_file = root / "vendored" / "lib" / ".rsync-filter"
    filter_file.unlink()
    filter_file.symlink_to(secret)
    out = ok("-C", root, "init", "--from", "makefile-sync")
    assert "not mapped: vendored/lib: refusing to read vendored/lib/.rsync-filter:" in out
    assert "is a symlink to" in out and "no vendor entry (patchctl cannot read this rsync's filter)" in out
    assert [c["to"] for c in yaml.safe_load((root / "matrix.yaml").read_text())["series"]["upstream"]["vendor"]] == [
        "vendored/core"
    ]
    assert "/secret/" not in (root / "matrix.yaml").read_text()
    (root / "Makefile.sync").rename(tmp_path / "Makefile.sync")
    (root / "Makefile.sync").symlink_to(tmp_path / "Makefile.sync")
    line = one_line_error(run_cli("-C", root, "init", "--from", "makefile-sync", "--force"), 2)
    assert "Makefile.sync is a symlink to" in line and "outside the repository" in line
