"""`pin-sync --wait`: the whole bump in one run that waits at each stop for the user, who
resolves in another terminal and answers at the prompt, as a person at a terminal would.
Each run here is a real `patchctl` process answered through its stdin."""

from __future__ import annotations

import os
import queue
import re
import shlex
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from patchctl import git
from patchctl.state.lock import ProjectLock

from .conftest import Project, Repo, make_patch, numbered
from .fixtures_sync import load_json, main_c, write_config

REPO = Path(__file__).resolve().parents[2]
WAITING = " is waiting: "


def two_patches_one_conflict(project: Project, upstream: Repo) -> None:
    """0001 changes line 20 of main.c, which upstream rewrites (a conflict); 0002 applies."""
    pin = upstream.head
    util = numbered(30, "util")
    project.add_patch(
        "0001-patch-line-twenty.patch",
        make_patch(upstream, pin, {"src/main.c": main_c({20: "MAIN 20 patched"})}, "Patch line twenty"),
    )
    project.add_patch(
        "0002-util-five.patch",
        make_patch(upstream, pin, {"src/util.c": util.replace("util 5\n", "UTIL 5 patched\n")}, "Util five"),
    )
    write_config(project, pin)
    git.commit_all(project.path, "series")
    upstream.commit({"src/main.c": main_c({20: "main 20 rewritten upstream"})}, "Upstream rewrites line 20")


class Waiting:
    """A `patchctl pin-sync ... --wait` process: its stderr read line by line (with a deadline,
    so that a run that never asks fails the test instead of hanging it), its stdin answered."""

    def __init__(self, project: Project, *args: str):
        self.report = project.path.parent / "report.json"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "patchctl", "-C", str(project.path), "pin-sync", *args, "--json-file", self.report],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            # Ctrl-C as at a terminal (a suite started in the background hands its children SIGINT ignored).
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.put(line)
        self.lines.put(None)

    def until_asked(self) -> list[str]:
        """stderr up to and with the next question; fails when the run ends first."""
        said = []
        while (line := self.lines.get(timeout=120)) is not None:
            said.append(line)
            if WAITING in line:
                return said
        pytest.fail(f"pin-sync --wait ended without asking: {''.join(said)}")

    def answer(self, text: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(text + "\n")
        self.process.stdin.flush()

    def __enter__(self) -> Waiting:
        return self

    def __exit__(self, *_exc: object) -> None:
        if self.process.poll() is None:  # a failed test leaves no run behind
            self.process.kill()
            self.process.wait()

    def end(self) -> tuple[int, str, str]:
        """(exit code, stdout, the rest of stderr) once the run ends, its stdin closed."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.close()
        code = self.process.wait(timeout=120)
        rest = []
        while (line := self.lines.get(timeout=30)) is not None:
            rest.append(line)
        return code, self.process.stdout.read(), "".join(rest)


def sync_tree(project: Project) -> Path:
    return project.path / ".patchctl" / "sync" / "up" / "main"


def lock_is_free(project: Project) -> bool:
    lock = ProjectLock(project.path, "test", 0)
    try:
        lock.acquire()
    except Exception:  # noqa: BLE001 - held: the one line it raises is what a second run would print
        return False
    lock.release()
    return True


def test_one_waiting_run_stops_asks_and_finishes_the_bump(project: Project, upstream: Repo, cli) -> None:
    two_patches_one_conflict(project, upstream)
    with Waiting(project, "up", "--latest", "--wait") as run:
        said = run.until_asked()
        # Stopped as without --wait: the state on disk, the report written, the project unlocked.
        assert "pin-sync of up is waiting: resolve, `git add`, then press Enter" in said[-1]
        assert load_json(run.report)["state"] == "conflict"
        assert "<<<<<<<" in (sync_tree(project) / "src/main.c").read_text()
        assert lock_is_free(project)  # git, `patchctl status` or a --continue elsewhere can run meanwhile

        run.answer("maybe")  # not an answer: said, asked again, nothing run
        said = run.until_asked()
        assert "'maybe': answer Enter, continue, drop, abort or stop" in said[0]
        run.answer("")  # what --continue refuses (markers left): one line, asked again
        said = run.until_asked()
        assert said[0].startswith("patchctl: error: still unmerged in") and "src/main.c" in said[0]
        assert load_json(run.report)["state"] == "conflict"  # a refused answer ran nothing

        tree = sync_tree(project)
        (tree / "src/main.c").write_text(main_c({20: "MAIN 20 patched, on top of upstream's rewrite"}))
        git.run(["add", "src/main.c"], tree)
        run.answer("")
        code, stdout, rest = run.end()
    assert code == 0, rest
    payload = load_json(run.report)
    assert payload["state"] == "synced"
    assert [(p["patch"], p["classification"]) for p in payload["patches"]] == [
        ("0001-patch-line-twenty.patch", "resolved by hand"),
        ("0002-util-five.patch", "clean"),
    ]
    assert "range_diffs" in payload and WAITING not in rest
    # Each round's report, as separate runs print them: the stop (once: refused answers ran nothing), then the end.
    assert stdout.count("stopped at a conflict") == 1
    assert stdout.index("stopped at a conflict") < stdout.index("pin moved")
    assert not (project.path / ".patchctl" / "sync" / "up").exists()
    assert "MAIN 20 patched, on top" in (project.series_dir / "0001-patch-line-twenty.patch").read_text()
    assert cli("-C", project.path, "apply").exit_code == 0


@pytest.mark.parametrize("answer", [None, "stop", "Ctrl-C"], ids=["end-of-input", "stop", "ctrl-c"])
def test_no_answer_leaves_the_sync_stopped_for_a_later_continue(
    project: Project, upstream: Repo, cli, answer: str | None
) -> None:
    two_patches_one_conflict(project, upstream)
    with Waiting(project, "up", "--latest", "--wait") as run:
        run.until_asked()
        if answer == "Ctrl-C":
            run.process.send_signal(signal.SIGINT)
        elif answer is not None:
            run.answer(answer)
        code, _stdout, rest = run.end()
    if answer == "Ctrl-C":
        assert (code, rest.strip()) == (130, "patchctl: interrupted")
    else:
        assert code == 1, rest
        assert "patchctl: error: pin-sync of up stops at a conflict" in rest
    assert load_json(run.report)["state"] == "conflict"
    tree = sync_tree(project)
    (tree / "src/main.c").write_text(main_c({20: "MAIN 20 patched again"}))
    git.run(["add", "src/main.c"], tree)
    resumed = cli("-C", project.path, "pin-sync", "--continue")
    assert resumed.exit_code == 0, resumed.output


def test_abort_at_the_prompt_drops_the_sync(project: Project, upstream: Repo) -> None:
    two_patches_one_conflict(project, upstream)
    before = (project.path / "matrix.yaml").read_bytes()
    with Waiting(project, "up", "--latest", "--wait") as run:
        run.until_asked()
        run.answer("abort")
        code, _stdout, rest = run.end()
    assert code == 0, rest
    assert load_json(run.report)["state"] == "aborted"
    assert not (project.path / ".patchctl" / "sync" / "up").exists()
    assert (project.path / "matrix.yaml").read_bytes() == before


@pytest.mark.parametrize("other", [["--abort"], ["--to", "HEAD", "--dry-run"]])
def test_wait_with_what_cannot_stop_and_go_on_is_a_usage_error(
    project: Project, upstream: Repo, cli, other: list[str]
) -> None:
    two_patches_one_conflict(project, upstream)
    result = cli("-C", project.path, "pin-sync", "up", "--wait", *other)
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        "patchctl: error: --wait waits at the stops of a sync that can go on: not with --abort or --dry-run"
    ]


def test_stop_after_a_refused_answer_says_how_to_go_on_and_that_works(project: Project, upstream: Repo, cli) -> None:
    two_patches_one_conflict(project, upstream)
    with Waiting(project, "up", "--latest", "--wait") as run:
        run.until_asked()
        run.answer("")  # markers left: refused, asked again
        run.until_asked()
        run.answer("stop")
        code, _stdout, rest = run.end()
    assert code == 1
    (line,) = rest.strip().splitlines()
    advice = re.fullmatch(r"patchctl: error: pin-sync of up left stopped; `(?P<command>[^`]+)` goes on from there",
                          line)  # fmt: skip
    assert advice is not None, line
    tree = sync_tree(project)
    (tree / "src/main.c").write_text(main_c({20: "MAIN 20 patched again"}))
    git.run(["add", "src/main.c"], tree)
    words = shlex.split(advice["command"])
    assert words[0] == "patchctl"
    resumed = cli("-C", project.path, *words[1:])  # the advice as printed
    assert resumed.exit_code == 0, resumed.output


def test_what_rounds_in_one_process_share(project: Project, upstream: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    """A log between two full commit ids is asked of git once per process; a patch file that
    reads as before is the PatchFile read before (its parse with it), an edited one is read anew."""
    two_patches_one_conflict(project, upstream)
    old, new = git.rev_parse(upstream.path, "HEAD~1"), upstream.head
    asked: list[list[str]] = []
    real_run = git.run
    monkeypatch.setattr(git, "run", lambda args, cwd, **kw: asked.append(args) or real_run(args, cwd, **kw))
    log = ["log", "--format=%H", f"{old}..{new}"]
    first = git.run_fixed(log, upstream.path, commits=(old, new))
    assert git.run_fixed(log, upstream.path, commits=(old, new)) == first and len(asked) == 1
    assert first.stdout.split() == [new]
    by_name = ["log", "--format=%H", "HEAD~1..HEAD"]
    git.run_fixed(by_name, upstream.path, commits=("HEAD~1", "HEAD"))
    git.run_fixed(by_name, upstream.path, commits=("HEAD~1", "HEAD"))
    assert len(asked) == 3  # names can move: asked each time
    missing = "0" * 39 + "1"
    failed = ["log", f"{old}..{missing}"]
    assert not git.run_fixed(failed, upstream.path, commits=(old, missing)).ok
    assert not git.run_fixed(failed, upstream.path, commits=(old, missing)).ok and len(asked) == 5  # never kept

    from patchctl.loop import sync_round
    from patchctl.project.config import load
    from patchctl.state.sync_state import SyncState

    config = load(project.path / "matrix.yaml")
    one, two = (SyncState("up", old, new, "test", []) for _ in range(2))
    before = sync_round.series_patches(config, one, "main")
    again = sync_round.series_patches(config, two, "main")
    assert [a is b for a, b in zip(before, again, strict=True)] == [True, True]
    edited = project.series_dir / "0002-util-five.patch"
    edited.write_text(edited.read_text().replace("Util five", "Util five, edited"))
    third = sync_round.series_patches(config, SyncState("up", old, new, "test", []), "main")
    assert third[0] is before[0] and third[1] is not before[1] and b"edited" in third[1].data
