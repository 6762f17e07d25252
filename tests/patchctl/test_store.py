"""The upstream cache: one mirror per URL, incremental fetches, a lock, URL overrides."""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path

from filelock import FileLock

from patchctl import git
from patchctl.upstream import store as store_mod
from patchctl.upstream.store import Store

from .conftest import Project, Repo, make_patch


def _mirror_in_process(root: str, url: str, queue) -> None:
    mirror = Store(Path(root)).mirror(url)
    queue.put(git.rev_parse(mirror.path, "refs/heads/main"))


def test_concurrent_runs_share_one_intact_mirror(tmp_path: Path, upstream: Repo) -> None:
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    workers = [
        ctx.Process(target=_mirror_in_process, args=(str(tmp_path / "cache"), str(upstream.path), queue))
        for _ in range(3)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    assert [w.exitcode for w in workers] == [0, 0, 0]
    assert {queue.get() for _ in workers} == {upstream.head}
    mirrors = [p for p in (tmp_path / "cache" / "mirrors").iterdir() if p.suffix == ".git"]
    assert len(mirrors) == 1
    Store(tmp_path / "cache")  # (git runs in a bare repository only when patchctl made it: the store says so)
    assert git.run(["fsck", "--no-progress"], mirrors[0]).ok


def test_fetch_is_incremental_and_names_are_fetched(tmp_path: Path, upstream: Repo) -> None:
    store = Store(tmp_path / "cache")
    mirror = store.mirror(str(upstream.path))
    new = upstream.commit({"src/new.c": "x\n"}, "newer")
    # A full id already in the cache needs no fetch; a new one or a branch name fetches.
    assert store.resolve(mirror, new) == new
    assert store.branch_tip(mirror, "main") == new


def test_file_url_and_override_by_environment(
    project: Project, upstream: Repo, tmp_path: Path, monkeypatch, cli
) -> None:
    config = project.path / "matrix.yaml"
    config.write_text(config.read_text().replace(f"url: {upstream.path}", "url: https://example.invalid/upstream.git"))
    config.write_text(config.read_text().replace("dir: patches/main\n", "dir: patches/main\n    allow_empty: true\n"))
    monkeypatch.setenv("PATCHCTL_UPSTREAM_URL", f"up=file://{upstream.path}")
    result = cli("-C", project.path, "apply", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["results"][0]["rev"] == upstream.head
    monkeypatch.delenv("PATCHCTL_UPSTREAM_URL")
    unreachable = cli("-C", project.path, "apply", "--into", tmp_path / "other")
    assert unreachable.exit_code == 3 and "cannot fetch https://example.invalid/upstream.git" in unreachable.stderr


def test_a_held_lock_is_a_clear_environment_error(project: Project, upstream: Repo, monkeypatch, cli) -> None:
    store = Store()
    mirror = store.mirror(str(upstream.path))
    monkeypatch.setattr(store_mod, "LOCK_TIMEOUT_S", 0.2)
    project.add_patch("0001-x.patch", make_patch(upstream, upstream.head, {"src/x.c": "int x;\n"}, "Add x"))
    with FileLock(str(mirror.path) + ".lock"):
        result = cli("-C", project.path, "apply")
    assert result.exit_code == 3 and "the cache is locked by another patchctl run" in result.stderr


def test_a_settled_checkout_leaves_no_file_racily_clean(tmp_path: Path, upstream: Repo) -> None:
    """A checkout's files are written in the second its index is, which makes them "racily
    clean" to git: every index write after it reads them whole again. Settled, each file is
    dated before the index, the index records those dates, and a link's target out of the tree
    keeps its own."""
    outside = tmp_path / "outside.txt"
    outside.write_text("not the tree's\n")
    os.utime(outside, (1_600_000_000, 1_600_000_000))
    (upstream.path / "src" / "out").symlink_to(outside)
    upstream.commit({}, "a link out of the tree")
    tree = tmp_path / "tree"
    git.run(["worktree", "add", "-q", "--detach", str(tree), "HEAD"], upstream.path)

    store_mod.settle_checkout(tree)

    index = Path(git.run(["rev-parse", "--git-path", "index"], tree).stdout.strip())
    index = index if index.is_absolute() else tree / index
    written = int(index.stat().st_mtime)
    entries = _index_entries(tree)
    assert sorted(entries) == sorted(git.z_list(tree, "ls-files", "-z"))
    for path, (mtime, size) in entries.items():
        on_disk = (tree / path).lstat()
        assert mtime == int(on_disk.st_mtime) < written, path  # dated before the index, and recorded
        assert size == on_disk.st_size != 0, path  # not smudged for a read at the next index write
    assert int(outside.stat().st_mtime) == 1_600_000_000
    assert git.run(["status", "--porcelain"], tree).stdout == ""


def _index_entries(tree: Path) -> dict[str, tuple[int, int]]:
    """Each index entry's recorded mtime (seconds) and size, from `git ls-files --debug`."""
    entries: dict[str, tuple[int, int]] = {}
    path = ""
    for line in git.run(["ls-files", "--debug"], tree).stdout.splitlines():
        if not line.startswith((" ", "\t")):
            path = line
        elif line.strip().startswith("mtime:"):
            mtime = int(line.split(":", 1)[1].split(":")[0])
            entries[path] = (mtime, 0)
        elif line.strip().startswith("size:"):
            entries[path] = (entries[path][0], int(line.split()[1]))
    return entries
