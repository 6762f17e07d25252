"""Blobless partial-clone mirrors, served over a real protocol (`git daemon` on 127.0.0.1):
commits and trees up front, blobs on demand, and `git apply -3` still finds its preimages."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from patchctl import git
from patchctl.series.applier import Status, apply_in_worktree
from patchctl.series.patchset import PatchFile
from patchctl.upstream.store import Store, prefetch_blobs, supports_partial_clone

from .conftest import Project, Repo
from .fixtures_sync import add_line20_patch, load_json, main_c


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def git_daemon(base: Path) -> Iterator[str]:
    """`git daemon` exporting every repository under BASE; yields git://127.0.0.1:PORT."""
    port = free_port()
    daemon = subprocess.Popen(
        ["git", "daemon", "--reuseaddr", "--export-all", f"--base-path={base}", "--listen=127.0.0.1", f"--port={port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            if time.monotonic() > deadline or daemon.poll() is not None:
                pytest.fail("git daemon did not start")
            time.sleep(0.05)
        yield f"git://127.0.0.1:{port}"
    finally:
        daemon.terminate()
        daemon.wait(timeout=10)


def serve_filters(repo: Repo) -> None:
    git.run(["config", "uploadpack.allowFilter", "true"], repo.path)
    git.run(["config", "uploadpack.allowAnySHA1InWant", "true"], repo.path)


def missing_blobs(mirror: Path) -> set[str]:
    listing = git.run(["rev-list", "--objects", "--all", "--missing=print"], mirror).stdout
    return {line[1:] for line in listing.splitlines() if line.startswith("?")}


def blob_of(repo: Path, rev: str, path: str) -> str:
    return git.run(["rev-parse", f"{rev}:{path}"], repo).stdout.strip()


def test_which_urls_are_partial() -> None:
    for url in ("https://github.com/ggml-org/llama.cpp", "git://127.0.0.1:9418/x", "file:///srv/x", "git@host:o/r"):
        assert supports_partial_clone(url), url
    for url in ("/srv/upstream", "relative/path", "C:/repo"):
        assert not supports_partial_clone(url), url


def test_mirror_is_blobless_and_3way_fetches_the_preimage_on_demand(tmp_path: Path, upstream: Repo) -> None:
    pin = upstream.head
    patch_text = upstream.path.parent / "line20.patch"
    project = Project(tmp_path / "project", upstream, pin)
    patch_text.write_text(add_line20_patch(project, upstream, pin))
    tip = upstream.commit({"src/main.c": main_c({23: "main 23 changed upstream"}, prepend=3)}, "Drift near line 20")
    serve_filters(upstream)
    with git_daemon(upstream.path.parent) as base:
        store = Store(tmp_path / "cache")
        mirror = store.mirror(f"{base}/upstream")
        config = {k: git.run(["config", k], mirror.path).stdout.strip() for k in ("remote.origin.promisor",)}
        assert config == {"remote.origin.promisor": "true"}
        assert git.run(["rev-parse", "--verify", "--quiet", f"{pin}^{{tree}}"], mirror.path).ok
        pin_main = blob_of(mirror.path, pin, "src/main.c")
        assert pin_main in missing_blobs(mirror.path), "a blobless mirror holds no blobs yet"

        tree = store.add_worktree(mirror, tip, tmp_path / "tree")
        assert (tree / "src/main.c").read_text() == main_c({23: "main 23 changed upstream"}, prepend=3)
        assert pin_main in missing_blobs(mirror.path), "checking out the tip fetched only the tip's blobs"

        outcome = apply_in_worktree(tree, PatchFile(patch_text, patch_text.read_bytes()), three_way=True)
        assert outcome.status is Status.MERGED, outcome
        assert pin_main not in missing_blobs(mirror.path), "apply -3 fetched the preimage it needed"
        assert (tree / "src/main.c").read_text() == main_c(
            {20: "MAIN 20 patched", 23: "main 23 changed upstream"}, prepend=3
        )


def test_pin_sync_over_git_daemon_merges_3way(tmp_path: Path, upstream: Repo, cli) -> None:
    pin = upstream.head
    project = Project(tmp_path / "project", upstream, pin)
    add_line20_patch(project, upstream, pin)
    tip = upstream.commit({"src/main.c": main_c({23: "main 23 changed upstream"}, prepend=3)}, "Drift near line 20")
    serve_filters(upstream)
    with git_daemon(upstream.path.parent) as base:
        override = ("--upstream-url", f"up={base}/upstream")
        report = tmp_path / "report.json"
        result = cli("-C", project.path, *override, "pin-sync", "up", "--to", tip, "--json-file", report)
        assert result.exit_code == 0, result.output
        assert [p["classification"] for p in load_json(report)["patches"]] == ["merged 3-way"]
        applied = cli("-C", project.path, *override, "apply")
        assert applied.exit_code == 0, applied.output
    text = (project.path / ".patchctl/trees/main/src/main.c").read_text()
    assert text == main_c({20: "MAIN 20 patched", 23: "main 23 changed upstream"}, prepend=3)


def test_a_server_without_filters_gives_an_ordinary_full_mirror(tmp_path: Path, upstream: Repo) -> None:
    upstream.commit({"src/util.c": "util v2\n"}, "Util v2")
    with git_daemon(upstream.path.parent) as base:
        mirror = Store(tmp_path / "cache").mirror(f"{base}/upstream")
        assert missing_blobs(mirror.path) == set()
        promisor = git.run(["config", "remote.origin.promisor"], mirror.path, check=False)
        assert not promisor.ok, "no promisor remote: nothing is ever fetched lazily"
        assert git.run(["cat-file", "-p", f"{upstream.head}~1:src/util.c"], mirror.path).stdout.startswith("util 1")


def test_prefetch_brings_exactly_the_named_blobs_in_one_request(tmp_path: Path, upstream: Repo) -> None:
    serve_filters(upstream)
    pin = upstream.head
    with git_daemon(upstream.path.parent) as base:
        mirror = Store(tmp_path / "cache").mirror(f"{base}/upstream")
        wanted = {blob_of(mirror.path, pin, p) for p in ("src/main.c", "src/util.c")}
        other = blob_of(mirror.path, pin, "include/util.h")
        assert wanted | {other} <= missing_blobs(mirror.path)
        prefetch_blobs(mirror.path, pin, ["src/main.c", "src/util.c", "src/new-file.c"])
        assert not wanted & missing_blobs(mirror.path) and other in missing_blobs(mirror.path)
    # A full mirror (a local path) has nothing to prefetch and asks for nothing.
    full = Store(tmp_path / "cache").mirror(str(upstream.path))
    prefetch_blobs(full.path, pin, ["src/main.c"])
    assert missing_blobs(full.path) == set()


def test_a_seed_made_in_memory_fetches_its_blobs_in_one_request(
    tmp_path: Path, upstream: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The seed read in memory (`textapply.MemoryTree`) asks a blobless mirror for every file the
    series names at once, as `git apply` is spared one round trip a preimage (prefetch_blobs)."""
    from patchctl.series.textapply import MemoryTree

    serve_filters(upstream)
    pin = upstream.head
    patch = PatchFile(
        Path("x.patch"),
        b"diff --git a/src/main.c b/src/main.c\n--- a/src/main.c\n+++ b/src/main.c\n@@ -1 +1 @@\n-main 1\n+MAIN 1\n"
        b"diff --git a/src/util.c b/src/util.c\n--- a/src/util.c\n+++ b/src/util.c\n@@ -1 +1 @@\n-util 1\n+UTIL 1\n",
    )
    with git_daemon(upstream.path.parent) as base:
        mirror = Store(tmp_path / "cache").mirror(f"{base}/upstream")
        wanted = {blob_of(mirror.path, pin, p) for p in ("src/main.c", "src/util.c")}
        assert wanted <= missing_blobs(mirror.path)
        calls: list[list[str]] = []
        run = git.run
        monkeypatch.setattr(git, "run", lambda args, *a, **k: calls.append(args) or run(args, *a, **k))
        memory = MemoryTree(mirror.path, pin)
        memory.read_ahead([patch])
    assert [args for args in calls if "fetch" in args] and len([a for a in calls if "fetch" in a]) == 1
    assert not wanted & missing_blobs(mirror.path)
    assert memory.files["src/util.c"] == ("100644", (upstream.path / "src/util.c").read_bytes())
