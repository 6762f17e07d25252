"""State that no checkout can plant, trees recovered without following a link, killed
worktree adds that block nothing, and signals that clean up like Ctrl-C (issue 31, items 2, 3).

The journal, the lock and pin-sync's states live in `.git/patchctl/`. State planted where
earlier versions kept it (`.patchctl/`), or damaged in its new place, is refused in one line
(exit 3) with `.git` and the directories outside the repository unchanged, byte for byte."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from patchctl import git
from patchctl.state import journal, statehome, worktree
from patchctl.upstream.store import Store

from .conftest import Project, Repo
from .fixtures_sync import add_line20_patch, main_c, write_config

REPO = Path(__file__).resolve().parents[2]


def snapshot(*roots: Path) -> dict[str, object]:
    """Every entry under ROOTS by lstat: a file's bytes and mode, a link's target, a directory.
    The one thing left out is the lock file (and its directory): a writing command takes the
    lock before it reads anything, and recovery takes it to look at a journal."""
    found: dict[str, object] = {}
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            for name in dirnames + filenames:
                path = Path(dirpath, name)
                if path.parent.name == "patchctl" and path.parent.parent.name == ".git" and name == "lock":
                    continue
                if (
                    path.name == "patchctl"
                    and path.parent.name == ".git"
                    and not any(p.name != "lock" for p in path.iterdir())
                ):
                    continue
                info = path.lstat()
                if path.is_symlink():
                    found[str(path)] = ("link", os.readlink(path))
                elif path.is_dir():
                    found[str(path)] = ("dir", info.st_mode)
                else:
                    found[str(path)] = ("file", info.st_mode, path.read_bytes())
    return found


def one_line_exit_3(result) -> str:
    assert result.exit_code == 3, result.output
    assert result.stderr.startswith("patchctl: error: ") and len(result.stderr.splitlines()) == 1, result.stderr
    assert "Traceback" not in result.output
    return result.stderr


@pytest.fixture
def seeded(project: Project, upstream: Repo) -> Project:
    add_line20_patch(project, upstream, upstream.head)
    git.commit_all(project.path, "downstream")
    return project


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory outside the repository that planted state points at."""
    home = tmp_path / "outside"
    (home / ".main.patchctl-old").mkdir(parents=True)
    (home / ".main.patchctl-old" / "precious.txt").write_text("mine\n")
    (home / ".bashrc").write_text("mine\n")
    return home


def plant_journal(project: Project, place: str, state: str, entries: list[dict] | str) -> Path:
    path = project.path / place / "journal.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(entries if isinstance(entries, str) else json.dumps({"state": state, "entries": entries}))
    return path


def entry(target: Path, *, staged: bool = True, backup: bool = False, index: int = 0) -> dict:
    return {
        "target": str(target),
        "staged": str(target.with_name(f".{target.name}.patchctl-new-{index}")) if staged else None,
        "backup": str(target.with_name(f".{target.name}.patchctl-old-{index}")) if backup else None,
    }


# ---------------------------------------------------------------- planted journals


def _planted_cases(project: Project, outside: Path) -> dict[str, tuple[str, list[dict] | str, str]]:
    root, series = project.path, project.series_dir
    (series / "dir.patch").mkdir()
    (series / ".0001-patch-line-twenty.patch.patchctl-old-0").mkdir()
    (outside / "main").mkdir()
    (root / "linked").symlink_to(outside)
    (root / "inside").symlink_to("patches/main")
    return {
        # the case: a prepared journal whose roll-back deletes .git/HEAD, .git/config and matrix.yaml
        "git-dir": (
            "prepared",
            [
                entry(root / ".git" / "HEAD"),
                entry(root / ".git" / "config", index=1),
                entry(root / "matrix.yaml", index=2),
            ],
            "invalid path '.git/HEAD': git refuses it (a path inside .git)",
        ),
        "git-dir-spelling": ("prepared", [entry(root / ".GIT" / "config")], "'.GIT' is .git in another case"),
        "unmanaged": ("prepared", [entry(root / "README.md")], "README.md is not a file patchctl writes"),
        "outside": ("prepared", [entry(outside / ".bashrc")], f"{outside / '.bashrc'} is outside the repository"),
        "dot-dot": ("prepared", [entry(series / ".." / ".." / "matrix.yaml")], "is not an absolute, normalized path"),
        "nul": ("prepared", [entry(series / "a\0b.patch")], "holds a NUL byte"),
        "nested": ("prepared", '{"state": "prepared", "entries": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested"),
        "directory-target": (
            "prepared",
            [entry(series / "dir.patch")],
            "patches/main/dir.patch is a directory, not a regular file or a symlink",
        ),
        "directory-backup": (
            "prepared",
            [entry(series / "0001-patch-line-twenty.patch", staged=False, backup=True)],
            ".0001-patch-line-twenty.patch.patchctl-old-0 beside patches/main/0001-patch-line-twenty.patch is a "
            "directory",
        ),
        "through-a-link": (
            "prepared",
            [entry(root / "linked" / "main" / "0001.patch")],
            f"refusing to write linked/main/0001.patch: linked is a symlink to {outside}, outside the repository",
        ),
        # a link that stays inside the repository is not followed either: the next commit may retarget it
        "through-a-link-inside": (
            "prepared",
            [entry(root / "inside" / "0001-patch-line-twenty.patch")],
            "inside is a symlink to patches/main; patchctl goes through no link",
        ),
        "no-file": ("prepared", [entry(series / "0009.patch", staged=False)], "neither writes nor keeps a file"),
        "no-entries": ("prepared", [], "no list of entries"),
        "state": ("planted", [entry(series / "0009.patch")], "state 'planted'"),
    }


CASES = [
    "git-dir",
    "git-dir-spelling",
    "unmanaged",
    "outside",
    "dot-dot",
    "nul",
    "nested",
    "directory-target",
    "directory-backup",
    "through-a-link",
    "through-a-link-inside",
    "no-file",
    "no-entries",
    "state",
]


@pytest.mark.parametrize("place", [".patchctl", ".git/patchctl"])
@pytest.mark.parametrize("case", CASES)
def test_a_planted_or_damaged_journal_is_one_line_and_touches_nothing(
    seeded: Project, outside: Path, cli, case: str, place: str
) -> None:
    """In .patchctl/ (a checkout could bring it; earlier versions kept it there) or in the
    state directory (damaged), a journal that `commit` could not have written is refused whole."""
    state, entries, reason = _planted_cases(seeded, outside)[case]
    plant_journal(seeded, place, state, entries)
    before = snapshot(seeded.path, outside)
    for args in (("lint", "--no-apply"), ("apply",)):
        line = one_line_exit_3(cli("-C", seeded.path, *args))
        assert reason in line, line
        assert "nothing was changed" in line
        assert snapshot(seeded.path, outside) == before


def test_a_journal_may_name_every_kind_of_file_patchctl_writes(seeded: Project) -> None:
    """Pin files, vendored copies, the rendered index and workflows, init's files: all managed
    (read from matrix.yaml); the same names elsewhere are not."""
    from patchctl.state import managed

    seeded.write_config(
        seeded.upstream.head,
        "    vendor:\n      - {from: src, to: third_party/up}\nindex: {output: backend/idx.yaml}\n",
    )
    (seeded.path / "matrix.yaml").write_text(
        (seeded.path / "matrix.yaml")
        .read_text()
        .replace("branch: main\n", "branch: main\n    pin_files:\n      - {path: Makefile, pattern: 'V=(?P<pin>.*)'}\n")
    )
    rules = managed.managed_paths(seeded.path / "matrix.yaml")
    for path in (
        "matrix.yaml",
        "patches/main/0002-new.patch",
        "third_party/up/src/a.c",
        "Makefile",
        "backend/idx.yaml",
        ".github/workflows/ci.yml",
        "templates/ci.yml.j2",
        ".pre-commit-config.yaml",
    ):
        assert rules.why_not(path) is None, path
    for path in ("README.md", "patches/other/x.patch", "third_party/other", ".git/config", ".patchctl/trees/main/x"):
        assert rules.why_not(path) is not None, path
    # The names patchctl's writers use for these outputs are the ones recovery reads.
    from patchctl.adopt import layout
    from patchctl.matrix import render

    assert managed.WORKFLOWS_DIR == render.WORKFLOWS_DIR.as_posix()
    assert (managed.TEMPLATES_DIR, managed.PRE_COMMIT_NAME) == (layout.TEMPLATES_DIR, layout.PRE_COMMIT_NAME)


# ---------------------------------------------------------------- state of earlier versions moves, once


def test_a_pending_journal_of_an_earlier_version_is_moved_and_recovered(seeded: Project, cli) -> None:
    patch = seeded.series_dir / "0001-patch-line-twenty.patch"
    old = patch.read_bytes()
    staged = patch.with_name(f".{patch.name}.patchctl-new-0")
    staged.write_bytes(b"half written")
    legacy = plant_journal(seeded, ".patchctl", "staging", [entry(patch, backup=True)])
    git_before = snapshot(seeded.path / ".git" / "objects", seeded.path / ".git" / "refs")

    result = cli("-C", seeded.path, "lint", "--no-apply")
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        "patchctl: moved .patchctl/journal.json to .git/patchctl/journal.json",
        "patchctl: rolled back a write an earlier run did not finish",
    ]
    assert patch.read_bytes() == old and not staged.exists() and not legacy.exists()
    assert not journal.journal_path(seeded.path).exists()
    assert snapshot(seeded.path / ".git" / "objects", seeded.path / ".git" / "refs") == git_before
    again = cli("-C", seeded.path, "lint", "--no-apply")
    assert again.exit_code == 0 and again.stderr == ""  # once


def test_two_journals_old_and_new_are_refused(seeded: Project, cli) -> None:
    patch = seeded.series_dir / "0001-patch-line-twenty.patch"
    plant_journal(seeded, ".patchctl", "staging", [entry(patch)])
    plant_journal(seeded, ".git/patchctl", "staging", [entry(patch)])
    before = snapshot(seeded.path)
    line = one_line_exit_3(cli("-C", seeded.path, "lint", "--no-apply"))
    assert ".patchctl/journal.json (left by an earlier patchctl) and .git/patchctl/journal.json both exist" in line
    assert snapshot(seeded.path) == before


def _stopped_sync(project: Project, upstream: Repo, cli) -> None:
    """A real pin-sync stopped at a conflict: its state in .git/patchctl, its trees in .patchctl."""
    pin = upstream.head
    write_config(project, pin)
    git.commit_all(project.path, "config")
    upstream.commit({"src/main.c": main_c({20: "main 20 rewritten upstream"})}, "Upstream rewrites line 20")
    result = cli("-C", project.path, "pin-sync", "up", "--latest")
    assert result.exit_code == 1 and "conflict" in result.stderr, result.output
    assert worktree.sync_state_file(project.path, "up").is_file()


def test_a_stopped_sync_of_an_earlier_version_is_moved_and_can_be_aborted(seeded: Project, upstream: Repo, cli) -> None:
    _stopped_sync(seeded, upstream, cli)
    new = worktree.sync_state_file(seeded.path, "up")
    legacy = seeded.path / ".patchctl" / "sync" / "up" / "state.json"
    os.rename(new, legacy)  # where an earlier version kept it
    result = cli("-C", seeded.path, "pin-sync", "--abort")
    assert result.exit_code == 0, result.output
    assert "patchctl: moved .patchctl/sync/up/state.json to .git/patchctl/sync/up/state.json" in result.stderr
    assert not legacy.exists() and not new.exists()
    assert not (seeded.path / ".patchctl" / "sync" / "up").exists()


@pytest.mark.parametrize("place", [".patchctl/sync/up", ".git/patchctl/sync/up"])
def test_a_sync_state_naming_a_tree_elsewhere_is_refused(
    seeded: Project, upstream: Repo, outside: Path, cli, place: str
) -> None:
    """--abort removes the trees a state names: a planted state naming $HOME must not."""
    _stopped_sync(seeded, upstream, cli)
    new = worktree.sync_state_file(seeded.path, "up")
    data = json.loads(new.read_text())
    data["series"][0]["tree"] = str(outside)
    new.unlink()
    target = seeded.path / place / "state.json"
    target.write_text(json.dumps(data))
    before = snapshot(seeded.path, outside)
    for args in (("pin-sync", "--abort"), ("pin-sync", "--continue")):
        line = one_line_exit_3(cli("-C", seeded.path, *args))
        assert f"not a pin-sync state patchctl wrote (tree '{outside}' of series main is not " in line
        assert snapshot(seeded.path, outside) == before


@pytest.mark.parametrize(
    "facts",
    [
        {"patch_ids": {"x": "not a patch-id"}},  # a --continue would take a patch as upstream's
        {"renames": {"src/main.c": 7}},
        {"patch_ids": {}, "run": "rm -rf ~"},
        ["patch_ids"],
        {"range_logs": {"commits": 7}},  # the report would read a number as git's output
        {"range_logs": {"shell": "git log"}},
        {"range_logs": {"drift": "x" * (2 * 1024 * 1024 + 1)}},
    ],
)
def test_planted_upstream_facts_in_a_sync_state_are_refused(
    seeded: Project, upstream: Repo, cli, facts: object
) -> None:
    """What a stopped sync learnt of the upstream (patch-ids, renames) spares each --continue a
    `git log -p`; a state whose facts are not what patchctl writes is refused like any other."""
    _stopped_sync(seeded, upstream, cli)
    path = worktree.sync_state_file(seeded.path, "up")
    data = json.loads(path.read_text())
    assert data["upstream_facts"]["patch_ids"]  # the stop learnt them
    data["upstream_facts"] = facts
    path.write_text(json.dumps(data))
    line = one_line_exit_3(cli("-C", seeded.path, "pin-sync", "--continue"))
    assert "not a pin-sync state patchctl wrote (upstream facts " in line, line


@pytest.mark.parametrize(
    "replayed",
    [
        {"0" * 40: ["not a digest", True]},
        {"0" * 40: ["a" * 64, "yes"]},  # only true or false says whether export may keep the file
        {"HEAD": ["a" * 64, True]},
        {"0" * 40: ["a" * 64]},
        ["a" * 64],
    ],
)
def test_planted_replayed_commits_in_a_sync_state_are_refused(
    seeded: Project, upstream: Repo, cli, replayed: object
) -> None:
    """What the replay knows of the commits it made (which file each was applied from, strictly
    or not) spares export formatting them; a state whose record of that is not what patchctl
    writes is refused like any other."""
    _stopped_sync(seeded, upstream, cli)
    path = worktree.sync_state_file(seeded.path, "up")
    data = json.loads(path.read_text())
    data["series"][0]["replayed"] = replayed
    path.write_text(json.dumps(data))
    line = one_line_exit_3(cli("-C", seeded.path, "pin-sync", "--continue"))
    assert "not a pin-sync state patchctl wrote (replayed commits " in line, line


@pytest.mark.parametrize("what", ["link to a file", "link to a repository", "fifo", "gone"])
def test_continue_never_goes_through_a_sync_tree_that_is_not_one(
    seeded: Project, upstream: Repo, outside: Path, cli, what: str
) -> None:
    """Found by the property test (tests/patchctl/test_property_whole.py): with the stopped
    sync's tree replaced by a link to a file, `pin-sync --continue` died with NotADirectoryError
    (a traceback); a link to a directory would have had git diff and commit there."""
    _stopped_sync(seeded, upstream, cli)
    tree = worktree.sync_tree(seeded.path, "up", "main")
    shutil.rmtree(tree)
    elsewhere = Repo(outside / "repo")
    elsewhere.commit({"a.txt": "mine\n"}, "someone else's")
    if what == "link to a file":
        tree.symlink_to(outside / ".bashrc")
    elif what == "link to a repository":
        tree.symlink_to(elsewhere.path)
    elif what == "fifo":
        os.mkfifo(tree)
    before = snapshot(outside, seeded.path / ".git")
    line = one_line_exit_3(cli("-C", seeded.path, "pin-sync", "--continue"))
    if what == "gone":
        assert ".patchctl/sync/up/main is gone: the tree of the stopped sync" in line, line
    else:
        assert f"{tree} is a {'FIFO' if what == 'fifo' else 'symlink'}, not a tree patchctl made" in line, line
    assert snapshot(outside, seeded.path / ".git") == before
    outside_before = snapshot(outside)
    assert cli("-C", seeded.path, "pin-sync", "--abort").exit_code == 0  # the link (or FIFO) goes, not its target
    assert snapshot(outside) == outside_before
    assert not worktree.sync_state_file(seeded.path, "up").exists() and not os.path.lexists(tree)


# ---------------------------------------------------------------- trees: never through a link


def test_trees_as_a_file_is_one_line(seeded: Project, cli) -> None:
    (seeded.path / ".patchctl").mkdir()
    (seeded.path / ".patchctl" / "trees").write_text("a file\n")
    before = snapshot(seeded.path)
    for args in (("lint", "--no-apply"), ("apply",)):
        line = one_line_exit_3(cli("-C", seeded.path, *args))
        assert ".patchctl/trees is a regular file, not the directory of applied trees patchctl keeps there" in line
    assert snapshot(seeded.path) == before


def test_trees_linked_outside_are_never_followed(seeded: Project, outside: Path, cli) -> None:
    """`.patchctl/trees -> $HOME` with a leftover-looking directory there: recovery used to delete it."""
    (seeded.path / ".patchctl").mkdir()
    (seeded.path / ".patchctl" / "trees").symlink_to(outside)
    before = snapshot(seeded.path, outside)
    for args in (("lint", "--no-apply"), ("apply",), ("export", "main")):
        line = one_line_exit_3(cli("-C", seeded.path, *args))
        assert ".patchctl/trees is a symlink, not the directory of applied trees" in line
        assert snapshot(seeded.path, outside) == before


def test_a_tree_that_is_a_link_is_never_replaced_through(seeded: Project, outside: Path, cli) -> None:
    trees = seeded.path / ".patchctl" / "trees"
    trees.mkdir(parents=True)
    (trees / "main").symlink_to(outside)
    (trees / ".main.patchctl-old").mkdir()  # a leftover: recovery looks at the tree beside it
    before = snapshot(seeded.path, outside)
    for args in (("lint", "--no-apply"), ("apply", "--force")):
        line = one_line_exit_3(cli("-C", seeded.path, *args))
        assert f"{trees / 'main'} is a symlink, not a tree patchctl made" in line
        assert snapshot(seeded.path, outside) == before


# ---------------------------------------------------------------- where the state lives


def test_state_lives_in_the_git_directory_of_the_work_tree(seeded: Project, tmp_path: Path, cli) -> None:
    assert statehome.home(seeded.path) == seeded.path.resolve() / ".git" / "patchctl"
    # A linked worktree of the project keeps its own (its files are its own).
    linked = tmp_path / "linked"
    git.run(["worktree", "add", "-q", "--detach", str(linked)], seeded.path)
    assert statehome.home(linked) == seeded.path.resolve() / ".git" / "worktrees" / "linked" / "patchctl"
    assert cli("-C", linked, "apply").exit_code == 0
    assert (seeded.path / ".git" / "worktrees" / "linked" / "patchctl" / "lock").is_file()
    # matrix.yaml in a subdirectory of a repository: its own directory under projects/.
    sub = seeded.path / "tools" / "ci"
    sub.mkdir(parents=True)
    home = statehome.home(sub)
    assert home.parent == seeded.path.resolve() / ".git" / "patchctl" / "projects" and home.name.startswith("ci-")


def test_a_plain_directory_keeps_its_state_in_the_user_state_directory(tmp_path: Path, upstream: Repo, cli) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    project = Project(plain, upstream, upstream.head)
    shutil.rmtree(plain / ".git")  # a project that is not a git repository
    add_line20_patch(project, upstream, upstream.head)
    assert cli("-C", plain, "apply").exit_code == 0
    home = statehome.home(plain)
    assert home.parent == Path(os.environ["XDG_STATE_HOME"]) / "patchctl" / "projects"
    assert (home / "lock").is_file() and not (plain / ".patchctl" / "lock").exists()


def test_a_plain_directory_in_a_fresh_home_makes_the_user_state_directory(
    tmp_path: Path, upstream: Repo, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    fresh = tmp_path / "home"
    fresh.mkdir()
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(fresh))  # no ~/.local/state yet, nor ~/.local
    plain = tmp_path / "plain"
    plain.mkdir()
    project = Project(plain, upstream, upstream.head)
    shutil.rmtree(plain / ".git")
    add_line20_patch(project, upstream, upstream.head)
    result = cli("-C", plain, "apply")
    assert result.exit_code == 0, result.output
    assert statehome.home(plain).parent == fresh / ".local" / "state" / "patchctl" / "projects"
    assert (fresh / ".local" / "state").stat().st_mode & 0o777 == 0o700  # as the XDG base directory spec asks


# ---------------------------------------------------------------- a kill during `git worktree add`


ARMED_SMUDGE = 'sh -c "if test -e {armed}; then rm {armed}; kill -9 0; fi; cat"'


def _arm_worktree_add_kill(project: Project, upstream: Repo, tmp_path: Path, env: dict[str, str]) -> Path:
    """An upstream whose checkout runs a smudge filter; armed, the filter SIGKILLs its whole
    process group (patchctl, `git worktree add` and the checkout) in the middle of the add."""
    upstream.commit({".gitattributes": "* filter=boom\n"}, "attributes")
    write_config(project, upstream.head)
    git.commit_all(project.path, "pin")
    warm = _patchctl(project.path, ["lint"], env)  # the mirror exists
    assert warm.returncode == 0, warm.stderr
    (mirror,) = Path(env["PATCHCTL_CACHE"]).joinpath("mirrors").glob("*.git")
    armed = tmp_path / "armed"
    git.run(["config", "filter.boom.smudge", ARMED_SMUDGE.format(armed=armed)], mirror)
    armed.write_text("")
    return armed


def _patchctl(root: Path, args: list[str], env: dict[str, str], **popen) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "patchctl", "-q", "-C", str(root), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        start_new_session=True,  # its own process group: the smudge filter's kill -9 0 ends it, not pytest
        **popen,
    )


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "PATCHCTL_LOCK_TIMEOUT": "5"}


def _locked_worktrees(env: dict[str, str]) -> list[str]:
    (mirror,) = Store(Path(env["PATCHCTL_CACHE"])).root.joinpath("mirrors").glob("*.git")
    listing = git.run(["worktree", "list", "--porcelain"], mirror).stdout
    return [block for block in listing.split("\n\n") if "locked" in block]


@pytest.mark.parametrize("remove_state", [False, True], ids=["as-left", "after-rm-patchctl"])
def test_apply_killed_during_worktree_add_blocks_no_later_apply(
    seeded: Project, upstream: Repo, tmp_path: Path, remove_state: bool
) -> None:
    env = _env()
    armed = _arm_worktree_add_kill(seeded, upstream, tmp_path, env)
    killed = _patchctl(seeded.path, ["apply"], env)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert not armed.exists()  # the filter fired: the add really was cut off
    assert _locked_worktrees(env)  # what used to make every later apply exit 3
    if remove_state:
        shutil.rmtree(seeded.path / ".patchctl")
    again = _patchctl(seeded.path, ["apply"], env)
    assert again.returncode == 0, again.stderr
    tree = worktree.applied_tree(seeded.path, "main")
    assert worktree.read_marker(tree) is not None and (tree / "src" / "main.c").read_text() == main_c(
        {20: "MAIN 20 patched"}
    )
    assert _locked_worktrees(env) == []
    assert sorted(p.name for p in tree.parent.iterdir()) == ["main"]


def test_pin_sync_killed_during_worktree_add_blocks_no_later_pin_sync(
    seeded: Project, upstream: Repo, tmp_path: Path
) -> None:
    env = _env()
    armed = _arm_worktree_add_kill(seeded, upstream, tmp_path, env)
    target = upstream.commit({"src/util.c": "moved\n"}, "Unrelated upstream work")
    killed = _patchctl(seeded.path, ["pin-sync", "up", "--to", target], env)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert not armed.exists() and _locked_worktrees(env)
    again = _patchctl(seeded.path, ["pin-sync", "up", "--to", target], env)
    assert again.returncode == 0, again.stderr
    assert f"pin: '{target}'" in (seeded.path / "matrix.yaml").read_text()
    assert _locked_worktrees(env) == []


# ---------------------------------------------------------------- signals clean up like Ctrl-C


def _wait_for(predicate, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.1)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by its parent) counts as gone.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_during_a_gate_removes_its_processes_and_trees(
    seeded: Project, upstream: Repo, tmp_path: Path, signum: int
) -> None:
    """pin-sync runs a gate (a process group of its own, with a child) in its sync trees: the
    signal ends the gate's processes, removes the sync trees and their worktree entries, and
    exits 128 + the signal's number with one line."""
    pid_file = tmp_path / "gate.pid"
    write_config(
        seeded,
        upstream.head,
        series_extra=f"gates:\n  - name: hang\n    command: sleep 120 & echo $! > {pid_file}; wait\n",
    )
    git.commit_all(seeded.path, "a gate")
    target = upstream.commit({"src/util.c": "moved\n"}, "Unrelated upstream work")
    before = snapshot(seeded.path / "patches") | {"matrix": (seeded.path / "matrix.yaml").read_bytes()}
    run = subprocess.Popen(
        [sys.executable, "-m", "patchctl", "-q", "-C", str(seeded.path), "pin-sync", "up", "--to", target],
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # Ctrl-C as at a terminal: a suite started in the background (`cmd &` in a script) hands its
        # children SIGINT ignored, which patchctl rightly keeps (see test_runners' fixture).
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        _wait_for(lambda: pid_file.exists() and pid_file.read_text().strip())
        gate_child = int(pid_file.read_text())
        assert (seeded.path / ".patchctl" / "sync" / "up").is_dir()
        run.send_signal(signum)
        _out, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
    expected = 130 if signum == signal.SIGINT else 128 + signum
    assert run.returncode == expected, err
    name = signal.Signals(signum).name
    line = "interrupted" if signum == signal.SIGINT else f"terminated by {name}"
    assert err.splitlines()[-1].startswith(f"patchctl: {line}") and "Traceback" not in err, err
    _wait_for(lambda: not _alive(gate_child), timeout=10)
    assert not (seeded.path / ".patchctl" / "sync" / "up").exists()
    assert not worktree.sync_state_file(seeded.path, "up").exists()
    assert snapshot(seeded.path / "patches") | {"matrix": (seeded.path / "matrix.yaml").read_bytes()} == before
    env = _env()
    (mirror,) = Path(env["PATCHCTL_CACHE"]).joinpath("mirrors").glob("*.git")
    listing = git.run(["worktree", "list", "--porcelain"], mirror).stdout
    assert str(seeded.path) not in listing  # no worktree entry left behind


def _sleeper_image() -> str:
    """A local image with `sh` and `sleep` copied from this host (no registry is reachable)."""
    import hashlib
    import io
    import tarfile

    import docker

    files: dict[str, Path] = {"bin/sh": Path("/bin/sh").resolve(), "bin/sleep": Path("/bin/sleep").resolve()}
    for binary in list(files.values()):
        for line in subprocess.run(["ldd", str(binary)], capture_output=True, text=True).stdout.splitlines():
            path = next((word for word in line.split() if word.startswith("/")), None)
            if path is not None:
                files[path.lstrip("/")] = Path(path).resolve()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name in sorted(files):
            data = files[name].read_bytes()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755
            tar.addfile(info, io.BytesIO(data))
    data = buffer.getvalue()
    tag = "patchctl-sleeper:" + hashlib.sha256(data).hexdigest()[:12]
    client = docker.from_env()
    try:
        try:
            client.images.get(tag)
        except docker.errors.ImageNotFound:
            client.api.import_image_from_data(data, repository=tag.split(":")[0], tag=tag.split(":")[1])
    finally:
        client.close()
    return tag


def _build_containers(step: str) -> list:
    import docker

    from patchctl.loop.runners import CONTAINER_LABEL

    client = docker.from_env()
    try:
        # A container removed between the list and its inspection is gone: not a failure.
        return client.containers.list(all=True, filters={"label": f"{CONTAINER_LABEL}={step}"}, ignore_removed=True)
    finally:
        client.close()


@pytest.mark.docker
def test_sigterm_to_a_compiling_canary_removes_its_container_and_trees(
    seeded: Project, upstream: Repo, tmp_path: Path
) -> None:
    """What `timeout`, systemd or a cancelled CI job does to a canary: its build container used
    to keep running (patchctl exited 143 at once); now it goes, with the canary's scratch trees."""
    from .docker_image import require_engine

    require_engine("tests of a compiling canary's container")
    image = _sleeper_image()
    step = f"hang-{tmp_path.name}"[:60]
    write_config(
        seeded,
        upstream.head,
        series_extra=f"build:\n  - name: {step}\n    command: echo started; sleep 300\n",
        tail=(
            "canary:\n  upstream: up\n  toolchains:\n    - name: sleeper\n      tag-suffix: -cpu-test\n"
            f"      cuda-major-version: ''\n      image: {image}\n"
        ),
    )
    git.commit_all(seeded.path, "a canary")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    run = subprocess.Popen(
        [sys.executable, "-m", "patchctl", "-q", "-C", str(seeded.path), "canary", "up", "--compile"],
        env={**_env(), "TMPDIR": str(scratch)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for(lambda: any(c.status == "running" for c in _build_containers(step)) or run.poll() is not None, 120)
        assert run.poll() is None, run.communicate()
        assert [p.name for p in scratch.iterdir() if p.name.startswith("patchctl-canary-")]  # its trees are there
        run.send_signal(signal.SIGTERM)
        _out, err = run.communicate(timeout=90)
    finally:
        if run.poll() is None:
            run.kill()
        for container in _build_containers(step):  # never leave one behind, even when the test fails
            container.remove(force=True)
    assert run.returncode == 128 + signal.SIGTERM, err
    assert err.splitlines()[-1] == (
        "patchctl: terminated by SIGTERM; its containers and temporary trees were removed"
    ), err
    assert "Traceback" not in err
    assert _build_containers(step) == []
    assert [p.name for p in scratch.iterdir() if p.name.startswith("patchctl-canary-")] == []
    (mirror,) = Path(_env()["PATCHCTL_CACHE"]).joinpath("mirrors").glob("*.git")
    listing = git.run(["worktree", "list", "--porcelain"], mirror).stdout
    assert [block for block in listing.split("\n\n") if block.strip() and "bare" not in block] == []


def test_a_relative_c_from_inside_the_tree_it_replaces_works(seeded: Project, cli) -> None:
    """`patchctl -C ../../.. apply --force` from inside .patchctl/trees/main: the tree (the
    working directory) is replaced mid-run; -C was resolved when patchctl started."""
    assert cli("-C", seeded.path, "apply").exit_code == 0
    tree = worktree.applied_tree(seeded.path, "main")
    (tree / "README.md").write_text("a local edit: apply --force rebuilds the tree beside and swaps\n")
    run = subprocess.run(
        [sys.executable, "-m", "patchctl", "-q", "-C", "../../..", "apply", "--force"],
        cwd=tree,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr and "applied 1 patch(es)" in run.stdout
    assert worktree.read_marker(tree) is not None and "local edit" not in (tree / "README.md").read_text()


def test_a_working_directory_that_is_gone_is_one_line(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    code = (
        f"import os, sys; os.chdir({str(gone)!r}); os.rmdir({str(gone)!r}); "
        "from patchctl.cli import main; sys.exit(main(['-C', '..', 'lint']))"
    )
    run = subprocess.run([sys.executable, "-c", code], env=_env(), capture_output=True, text=True, timeout=60)
    assert run.returncode == 3
    assert run.stderr == (
        "patchctl: error: the working directory no longer exists (a tree patchctl replaced, or removed while a "
        "shell stood in it): cd into the project again\n"
    )
