"""Every command patchctl prints as advice runs as printed, from where the user stands.

Each situation below is a real run that stops with advice: a refusal of apply or export, a
pin-sync stopped at a conflict, a patch that needs a hand, a failing gate, a finished sync, a
state file patchctl did not write. The commands are collected from what was printed (patchctl
writes each between backticks), and each one is pasted into bash, in the project root, in a
fresh copy of the situation: along the ways the message describes (a path of its commands,
with the user's own edits between them where the message asks for one). Every printed command
must lie on a path, and every step must exit as the message says (0 unless it says otherwise).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from patchctl import git
from tests.patchctl.conftest import Project, Repo, make_patch, make_upstream, numbered, run_cli
from tests.patchctl.fixtures_sync import main_c

from .shell import Seen, User, downstream, tune_main_patch

pytestmark = pytest.mark.journey

SYNC_TREE = ".patchctl/sync/up/main"
Step = str | Callable[[Project], None]  # a printed command (a part of it), or the user's own edit


def project_at(base: Path, *, extra_yaml: str = "", line20: bool = False) -> tuple[Project, Repo]:
    upstream = make_upstream(base / "upstream")
    pin = upstream.head
    patches = {"0001-Tune-main.patch": tune_main_patch(upstream, pin)}
    if line20:  # (made on the pin, it applies on top of 0001 too: line 5 is out of its context)
        patches["0002-Patch-line-twenty.patch"] = make_patch(
            upstream, pin, {"src/main.c": main_c({20: "MAIN 20 patched"})}, "Patch line twenty", "Needed."
        )
    return downstream(base / "project", upstream, pin, patches=patches, extra_yaml=extra_yaml), upstream


def cli(project: Project, *args: str) -> Seen:
    """patchctl run in the project root, as the user runs it there."""
    result = run_cli("-C", project.path, *args)
    return Seen(f"patchctl {' '.join(args)}", result.exit_code, result.stdout, result.stderr)


def tree(project: Project) -> Path:
    return project.path / ".patchctl" / "trees" / "main"


# ---------------------------------------------------------------- the user's own edits between commands


def edit_the_tree(project: Project) -> None:
    path = tree(project) / "src/util.c"
    path.write_text(path.read_text().replace("util 3\n", "util three\n"))


def resolve_the_conflict(project: Project) -> None:
    (project.path / SYNC_TREE / "src/main.c").write_text(main_c({5: "main five", 20: "MAIN 20 patched, resolved"}))


def resolve_and_stage(project: Project) -> None:
    resolve_the_conflict(project)
    git.run(["add", "src/main.c"], project.path / SYNC_TREE)


def make_the_rejected_change(project: Project) -> None:
    path = project.path / SYNC_TREE / "src/main.c"
    path.write_text(path.read_text().replace("main 20\n", "MAIN 20 patched\n"))


def apply_by_hand_and_stage(project: Project) -> None:
    make_the_rejected_change(project)
    git.run(["add", "src/main.c"], project.path / SYNC_TREE)


def fix_the_gate_as_a_fixup(project: Project) -> None:
    sync_tree = project.path / SYNC_TREE
    path = sync_tree / "src/main.c"
    path.write_text(path.read_text().replace("main 35 TODO\n", "main 35\n"))
    commit = git.run(["log", "--format=%H", "--grep=^Patch line twenty$", "-1"], sync_tree).stdout.strip()
    git.run(["commit", "-qa", f"--fixup={commit}"], sync_tree)


# ---------------------------------------------------------------- situations


def uncommitted_edit(base: Path, command: str) -> tuple[Project, Seen]:
    project, _ = project_at(base)
    cli(project, "apply")
    edit_the_tree(project)
    return project, cli(project, *command.split())


def unexported_commit(base: Path) -> tuple[Project, Seen]:
    project, _ = project_at(base)
    cli(project, "apply")
    edit_the_tree(project)
    Repo(tree(project)).commit({}, "Spell out util three\n\nGrep finds the word.")
    return project, cli(project, "apply")


def commits_on_an_old_series(base: Path, command: str) -> tuple[Project, Seen]:
    """Commits in the tree, then the pin moves under them (a pulled bump)."""
    project, upstream = project_at(base)
    cli(project, "apply")
    edit_the_tree(project)
    Repo(tree(project)).commit({}, "Spell out util three\n\nGrep finds the word.")
    tip = upstream.commit({"src/util.c": numbered(30, "util").replace("util 29\n", "util 29 upstream\n")}, "More")
    config = project.path / "matrix.yaml"
    config.write_text(config.read_text().replace(upstream.git("rev-parse", "HEAD~1").strip(), tip))
    return project, cli(project, *command.split())


def excluded_only_commit(base: Path) -> tuple[Project, Seen]:
    project, _ = project_at(base)
    cli(project, "apply")
    Repo(tree(project)).commit({"README.md": "# patched\n"}, "Say so\n\nReaders should know.")
    cli(project, "export", "main")
    return project, cli(project, "apply")


def stale_series(base: Path) -> tuple[Project, Seen]:
    project, _ = project_at(base)
    cli(project, "apply")
    Repo(tree(project)).commit({"src/util.c": "util\n"}, "Shrink util\n\nOne line is enough.")
    return project, cli(project, "export", "--check", "main")


def foreign_directory(base: Path) -> tuple[Project, Seen]:
    project, _ = project_at(base)
    (base / "mine").mkdir()
    (base / "mine" / "notes.txt").write_text("mine\n")
    return project, cli(project, "apply", "--into", str(base / "mine"))


def lock_is_a_directory(base: Path) -> tuple[Project, Seen]:
    project, _ = project_at(base)
    (project.path / ".git" / "patchctl" / "lock").mkdir(parents=True)
    return project, cli(project, "apply")


def no_tree_to_gate(base: Path) -> tuple[Project, Seen]:
    project, _ = project_at(base, extra_yaml="    gates:\n      - name: always\n        command: 'true'\n")
    return project, cli(project, "gate")


ALWAYS_GATE = "    gates:\n      - name: always\n        command: 'true'\n"


def gate_after_a_patch_left_patches(base: Path) -> tuple[Project, Seen]:
    """A patch removed from patches/ after apply: the tree still has it (issue 45)."""
    project, _ = project_at(base, line20=True, extra_yaml=ALWAYS_GATE)
    cli(project, "apply")
    (project.series_dir / "0002-Patch-line-twenty.patch").unlink()
    return project, cli(project, "gate")


def gate_on_an_unexported_commit(base: Path) -> tuple[Project, Seen]:
    project, _ = project_at(base, extra_yaml=ALWAYS_GATE)
    cli(project, "apply")
    edit_the_tree(project)
    Repo(tree(project)).commit({}, "Spell out util three\n\nGrep finds the word.")
    return project, cli(project, "gate")


def gate_on_an_uncommitted_edit(base: Path) -> tuple[Project, Seen]:
    project, _ = project_at(base, extra_yaml=ALWAYS_GATE)
    cli(project, "apply")
    edit_the_tree(project)
    return project, cli(project, "gate")


def exported_then_a_patch_deleted(base: Path) -> tuple[Project, Seen]:
    """The edit loop's export, then its patch file deleted by hand at the same pin: the tree
    still holds the commit, which patches/ no longer does."""
    project, _ = project_at(base)
    cli(project, "apply")
    edit_the_tree(project)
    Repo(tree(project)).commit({}, "Spell out util three\n\nGrep finds the word.")
    cli(project, "export", "main")
    (project.series_dir / "0002-Spell-out-util-three.patch").unlink()
    return project, cli(project, "apply")


def markers_left(base: Path) -> tuple[Project, Seen]:
    project, _ = conflict(base)
    git.run(["add", "src/main.c"], project.path / SYNC_TREE)  # staged with its markers
    return project, cli(project, "pin-sync", "up", "--continue")


def rewritten_then_moved(base: Path) -> tuple[Project, Seen]:
    """The tree's history rewritten since apply (a patch commit reworded, a commit of the user's
    on top), then the pin moved under it: apply says how to keep the commits, first."""
    project, upstream = project_at(base)
    cli(project, "apply")
    git.run(["reset", "-q", "--soft", "HEAD~1"], tree(project))  # reworded: a new commit, at a fixed date
    Repo(tree(project)).commit({}, "Tune main\n\nThe fifth line is spelled out, said better.")
    edit_the_tree(project)
    Repo(tree(project)).commit({}, "Spell out util three\n\nGrep finds the word.")
    tip = upstream.commit({"src/util.c": numbered(30, "util").replace("util 29\n", "util 29 upstream\n")}, "More")
    config = project.path / "matrix.yaml"
    config.write_text(config.read_text().replace(upstream.git("rev-parse", "HEAD~1").strip(), tip))
    return project, cli(project, "apply")


def stopped_sync(base: Path, drift: dict[int, str], *, unmergeable: bool = False, gate: bool = False):
    extra = '    gates:\n      - name: no-todo\n        command: "! grep -n TODO src/main.c"\n' if gate else ""
    project, upstream = project_at(base, line20=True, extra_yaml=extra)
    if unmergeable:
        path = project.series_dir / "0002-Patch-line-twenty.patch"
        # A plain diff, without the index lines that would let git merge it 3-way (as quilt writes them).
        path.write_text(re.sub(r"^index [0-9a-f]+\.\.[0-9a-f]+.*\n", "", path.read_text(), flags=re.M))
        git.commit_all(project.path, "unmergeable")
    upstream.commit({"src/main.c": main_c(drift)}, "Upstream drifts")
    stopped = cli(project, "pin-sync", "up", "--latest")
    assert stopped.exit_code == 1, str(stopped)
    return project, stopped


def conflict(base: Path) -> tuple[Project, Seen]:
    return stopped_sync(base, {20: "main 20 changed upstream"})


def conflict_then(base: Path, *args: str) -> tuple[Project, Seen]:
    project, _ = conflict(base)
    return project, cli(project, "pin-sync", "up", *args)


def commit_made_then_drop(base: Path) -> tuple[Project, Seen]:
    project, _ = conflict(base)
    resolve_and_stage(project)
    git.run(["commit", "-q", "-m", "Patch line twenty, resolved"], project.path / SYNC_TREE)
    return project, cli(project, "pin-sync", "up", "--continue", "--drop")


def needs_a_hand(base: Path) -> tuple[Project, Seen]:
    return stopped_sync(base, {19: "main 19 rewritten upstream"}, unmergeable=True)


def needs_a_hand_then_continue(base: Path) -> tuple[Project, Seen]:
    project, _ = needs_a_hand(base)
    return project, cli(project, "pin-sync", "up", "--continue")


def gate_failed(base: Path) -> tuple[Project, Seen]:
    return stopped_sync(base, {35: "main 35 TODO"}, gate=True)


def gate_failed_then_drop(base: Path) -> tuple[Project, Seen]:
    project, _ = gate_failed(base)
    return project, cli(project, "pin-sync", "up", "--continue", "--drop")


def undescribed_gate_fix(base: Path) -> tuple[Project, Seen]:
    project, _ = gate_failed(base)
    sync_tree = project.path / SYNC_TREE
    (sync_tree / "src/main.c").write_text((sync_tree / "src/main.c").read_text().replace(" TODO", ""))
    git.run(["commit", "-qam", "Resolve the TODO"], sync_tree)
    return project, cli(project, "pin-sync", "up", "--continue")


def unreadable_sync_state(base: Path) -> tuple[Project, Seen]:
    project, _ = conflict(base)
    (project.path / ".git/patchctl/sync/up/state.json").write_text("{ not json")
    return project, cli(project, "pin-sync", "up", "--continue")


def synced(base: Path) -> tuple[Project, Seen]:
    project, upstream = project_at(base, line20=True)
    upstream.commit({"src/main.c": main_c({18: "main 18 rewritten upstream"})}, "Upstream drifts")
    return project, cli(project, "pin-sync", "up", "--latest")


@dataclass
class Situation:
    build: Callable[[Path], tuple[Project, Seen]]
    paths: list[list[Step]]  # the ways on, as the message describes them
    exits: dict[str, int] = field(default_factory=dict)  # a step the message says fails, and its exit code
    then: str | None = None  # what must work after each path


COMMIT_OR_DISCARD = [["commit -a", "patchctl export main"], ["--force"]]
SITUATIONS = {
    "apply: uncommitted edit": Situation(lambda b: uncommitted_edit(b, "apply"), COMMIT_OR_DISCARD, then="apply"),
    "export: uncommitted edit": Situation(lambda b: uncommitted_edit(b, "export main"), COMMIT_OR_DISCARD),
    "export --check: uncommitted edit": Situation(
        lambda b: uncommitted_edit(b, "export --check main"), COMMIT_OR_DISCARD, then="export --check main"
    ),
    "apply: commit not exported": Situation(unexported_commit, [["export"], ["--force"]], then="apply"),
    "apply: commits on an old series": Situation(
        lambda b: commits_on_an_old_series(b, "apply"), [["rebase --onto", "export"], ["--force"]], then="apply"
    ),
    # It sends the user to apply, which refuses as it says (exit 2) and prints the rebase.
    "export --check: commits on an old series": Situation(
        lambda b: commits_on_an_old_series(b, "export --check main"), [["patchctl apply main"]], {"apply": 2}
    ),
    "apply: commits on excluded paths only": Situation(excluded_only_commit, [["--force"]], then="apply"),
    "export --check: out of date": Situation(stale_series, [["patchctl export main"]], then="export --check main"),
    "apply --into: a directory patchctl did not make": Situation(foreign_directory, [["--force"]]),
    "a lock that is a directory": Situation(lock_is_a_directory, [["rm -r"]], then="apply"),
    "gate: no applied tree": Situation(no_tree_to_gate, [["patchctl apply main"]], then="gate"),
    "gate: a patch removed from patches/": Situation(
        gate_after_a_patch_left_patches, [["patchctl apply main"]], then="gate"
    ),
    "gate: a commit not exported": Situation(gate_on_an_unexported_commit, [["export"], ["--force"]], then="gate"),
    "gate: an uncommitted edit": Situation(gate_on_an_uncommitted_edit, COMMIT_OR_DISCARD, then="gate"),
    "apply: an exported commit whose patch was deleted": Situation(
        exported_then_a_patch_deleted, [["export"], ["--force"]], then="apply"
    ),
    "pin-sync: conflict markers left": Situation(
        markers_left, [[resolve_and_stage, "patchctl pin-sync up --continue"], ["--continue --drop"]]
    ),
    "apply: history rewritten, then the pin moved": Situation(
        rewritten_then_moved, [["cherry-pick", "export"], ["--force"]], then="apply"
    ),
    "pin-sync: conflict": Situation(
        conflict,
        [
            [resolve_the_conflict, "add --", "patchctl pin-sync up --continue"],
            ["--continue --drop"],
            ["--abort"],
        ],
        then="export --check main",
    ),
    "pin-sync: a sync in progress": Situation(
        lambda b: conflict_then(b, "--latest"), [[resolve_and_stage, "--continue"], ["--abort"]]
    ),
    "pin-sync: --drop after a commit made for the patch": Situation(
        commit_made_then_drop, [["reset --hard", "--continue --drop"], ["patchctl pin-sync up --continue"]]
    ),
    "pin-sync: conflict still unmerged": Situation(
        lambda b: conflict_then(b, "--continue"),
        [[resolve_the_conflict, "add --", "patchctl pin-sync up --continue"], ["--continue --drop"]],
    ),
    "pin-sync: needs a hand": Situation(
        needs_a_hand,
        [
            ["apply --reject", make_the_rejected_change, "add -A", "patchctl pin-sync up --continue"],
            ["--continue --drop"],
            ["--abort"],
        ],
        {"apply --reject": 1},
        then="export --check main",
    ),
    "pin-sync: nothing done for a patch that needs a hand": Situation(
        needs_a_hand_then_continue,
        [[apply_by_hand_and_stage, "patchctl pin-sync up --continue"], ["--continue --drop"], ["--abort"]],
    ),
    "pin-sync: a failing gate": Situation(
        gate_failed,
        [["log --oneline", fix_the_gate_as_a_fixup, "--continue"], ["--abort"]],
        then="lint",
    ),
    "pin-sync: --drop at a failing gate": Situation(
        gate_failed_then_drop, [[fix_the_gate_as_a_fixup, "--continue"], ["--abort"]]
    ),
    "pin-sync: a gate fix without a description": Situation(
        undescribed_gate_fix, [["commit --amend", "--continue"]], then="lint"
    ),
    "pin-sync: an unreadable sync state": Situation(unreadable_sync_state, [["rm -r"]], then="apply"),
    "pin-sync: synced": Situation(synced, [["git commit"]], then="export --check main"),
}


def step_label(step: Step) -> str:
    return step if isinstance(step, str) else step.__name__


@pytest.mark.parametrize("name", list(SITUATIONS))
def test_every_printed_command_works_as_printed(name: str, tmp_path: Path, user_in) -> None:
    situation = SITUATIONS[name]
    first_copy = tmp_path / "first"
    _, first = situation.build(first_copy)
    assert first.exit_code != 0 or name == "pin-sync: synced", str(first)
    printed = first.advice
    assert printed, f"no advice printed:\n{first}"
    on_a_path = {
        cmd for path in situation.paths for step in path if isinstance(step, str) for cmd in printed if step in cmd
    }
    assert on_a_path == set(printed), f"printed but on no path: {set(printed) - on_a_path}\n{first}"

    for number, path in enumerate(situation.paths):
        copy = tmp_path / f"path-{number}"
        project, seen = situation.build(copy)
        assert [c.replace(str(copy), "") for c in seen.advice] == [c.replace(str(first_copy), "") for c in printed]
        user: User = user_in(project.path)
        for step in path:
            if not isinstance(step, str):
                step(project)
                continue
            expected = next((code for part, code in situation.exits.items() if part in step), 0)
            result = user.follow(seen, step, exit_code=expected)
            assert "Traceback" not in result.output, " -> ".join(step_label(s) for s in path)
        if situation.then:
            user.ok(f"patchctl {situation.then}")
