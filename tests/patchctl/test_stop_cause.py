"""Why a patch stops (`patchctl.loop.stopcause`, `patchctl.series.mergehunks`): the upstream
commits between the pins that changed the lines of each hunk that really failed, named in
pin-sync's report and JSON, in the canary's report and issue, and in `status`; and "upstream
may have its own version" exactly where upstream holds the patch's edit in substance.

The ground truth for "this hunk failed" is git itself: the hunk alone, with its file's header,
applied with `git apply -3` in a scratch clone at the commit the sync tree stood at."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from patchctl import git
from patchctl.series.applier import Status, apply_in_worktree
from patchctl.series.patchset import PatchFile

from .conftest import Project, Repo, make_patch, numbered
from .fixtures_stops import mixed_bump, own_version_bump
from .fixtures_sync import main_c, write_config
from .markdown_check import assert_inert

TREE = Path(".patchctl") / "sync" / "up" / "main"
DATE = "2023-11-14"  # git.FIXED_DATE, the committer date of every fixture commit


def sync(cli, project: Project, *args: str) -> tuple[object, dict]:
    out = project.path.parent / "sync.json"
    out.unlink(missing_ok=True)
    result = cli("-C", project.path, "pin-sync", *args, "--json-file", out, "--report", markdown_report(project))
    assert "Traceback" not in result.output, result.output
    return result, json.loads(out.read_text())


def markdown_report(project: Project) -> Path:
    """Where `sync` has pin-sync write its report in Markdown (the terminal gets plain text)."""
    return project.path.parent / "sync.md"


def really_failing(project: Project, patch_name: str) -> set[tuple[str, int]]:
    """The hunks of the series' patch PATCH_NAME that conflict or fail when each is applied
    alone with `git apply -3`, at the commit the stopped sync tree stands at."""
    tree = project.path / TREE
    head = git.rev_parse(tree, "HEAD")
    scratch = project.path.parent / "hunk-oracle"
    git.run(["clone", "-q", "--no-checkout", str(project.upstream.path), str(scratch)], project.path.parent)
    git.run(["fetch", "-q", str(tree), head], scratch)
    git.run(["checkout", "-q", "--detach", head], scratch)
    patch_file = project.series_dir / patch_name
    patch = PatchFile(patch_file, patch_file.read_bytes())
    lines = patch.text.split("\n")
    failing = set()
    for diff in patch.files:
        header = lines[diff.line - 1 : diff.hunks[0].line - 1]
        for hunk in diff.hunks:
            alone = "\n".join([*header, lines[hunk.line - 1], *hunk.body]) + "\n"
            applied = git.run(["apply", "-3", "--index", "-"], scratch, check=False, input=alone)
            if not applied.ok or git.run(["ls-files", "-u"], scratch).stdout.strip():
                failing.add((diff.path, hunk.index))
            git.run(["reset", "-q", "--hard", head], scratch)
    return failing


def named_hunks(payload: dict) -> set[tuple[str, int]]:
    return {(h["file"], h["hunk"]) for h in payload["stop_cause"]["hunks"]}


def commits_of(payload: dict, file: str, hunk: int) -> list[tuple[str, str]]:
    [found] = [h for h in payload["stop_cause"]["hunks"] if (h["file"], h["hunk"]) == (file, hunk)]
    return [(c["sha"], c["subject"]) for c in found["commits"]]


def run_as_printed(cli, step: str, project: Project):
    """The command in backticks of STEP, as printed, from the project's root: its `git` words by
    git, its `patchctl` words by patchctl's entry point (in this process); each must succeed.
    The last patchctl result."""
    [command] = re.findall(r"`([^`]+)`", step)
    result = None
    for part in command.split(" && "):
        words = shlex.split(part)
        if words[0] == "patchctl":
            result = cli("-C", project.path, *words[1:])
            assert result.exit_code == 0, result.output
        else:
            assert words[0] == "git", part
            subprocess.run(words, cwd=project.path, check=True, capture_output=True)
    return result


# ---------------------------------------------------------------- which hunks, which commits


def test_a_stop_names_only_the_hunks_that_failed_and_the_commits_behind_them(
    project: Project, upstream: Repo, cli
) -> None:
    commits = mixed_bump(project, upstream)
    result, payload = sync(cli, project, "up", "--latest")
    assert result.exit_code == 1 and payload["state"] == "conflict", result.output
    [record] = payload["patches"]
    # The hunk the merge failed on, not include/util.h's (which fails strictly but merged cleanly).
    assert "include/util.h" not in record["detail"], record["detail"]
    assert "the patch's src/main.c hunk #1 @@ -17,7 +17,7 @@ (line " in record["detail"]
    assert "hunk #2" not in record["detail"]
    assert named_hunks(payload) == really_failing(project, "0001-patch-util-and-main.patch") == {("src/main.c", 1)}
    # Both commits that changed the hunk's lines or the line next to them, oldest first; none other.
    assert commits_of(payload, "src/main.c", 1) == [
        (commits["line"], "Rework main 20"),
        (commits["next"], "Rework main 19"),
    ]
    [hunk] = payload["stop_cause"]["hunks"]
    assert hunk["old_lines"] == "17-23" and hunk["header"] == "@@ -17,7 +17,7 @@"
    assert {c["date"] for c in hunk["commits"]} == {DATE}
    assert all("url" not in c for c in hunk["commits"])  # a local upstream: no link
    assert payload["stop_cause"]["upstream_version"] is False and "advice" not in payload["stop_cause"]
    assert "patch_side" not in hunk and "upstream_side" not in hunk  # both sides only for upstream's own version
    markdown = markdown_report(project).read_text()
    assert "### Why it stopped" in markdown
    assert f"`{commits['line'][:12]}` `Rework main 20` ({DATE})" in markdown
    assert "Unrelated README work`" not in markdown.split("### Why it stopped")[1].split("<details>")[0]
    assert "may have its own version" not in markdown


def test_the_canary_and_status_name_the_same_commits(project: Project, upstream: Repo, cli, tmp_path: Path) -> None:
    commits = mixed_bump(project, upstream)
    out, issues = tmp_path / "canary.json", tmp_path / "issues.json"
    result = cli("-C", project.path, "canary", "--no-bisect", "--json-file", out, "--issues", issues)
    assert result.exit_code == 1, result.output
    [patch] = json.loads(out.read_text())["series"][0]["patches"]
    assert patch["verdict"] == "conflict"  # a 3-way merge conflicts at the tip
    assert [(h["file"], h["hunk"]) for h in patch["stop_cause"]["hunks"]] == [("src/main.c", 1)]
    assert [c["sha"] for c in patch["stop_cause"]["hunks"][0]["commits"]] == [commits["line"], commits["next"]]
    assert "Why `0001-patch-util-and-main.patch` conflicts:" in result.stdout
    [issue] = json.loads(issues.read_text())
    assert "Why it fails, hunk by hunk:" in issue["body"]
    assert f"`{commits['next'][:12]}` `Rework main 19`" in issue["body"]
    assert_inert(issue["body"].partition("\n")[2])  # after its key marker, an HTML comment

    status = cli("-C", project.path, "status", "--json")
    assert status.exit_code == 0, status.output
    [health] = json.loads(status.stdout)["series"][0]["patches"]
    assert [c["subject"] for c in health["stop_cause"]["hunks"][0]["commits"]] == ["Rework main 20", "Rework main 19"]
    text = cli("-C", project.path, "status").stdout
    assert (
        f'    why: src/main.c hunk #1: changed upstream by {commits["line"][:12]} "Rework main 20" ({DATE}), '
        f'{commits["next"][:12]} "Rework main 19" ({DATE})'
    ) in text


def test_the_commits_are_followed_through_a_rename(project: Project, upstream: Repo, cli) -> None:
    pin = upstream.head
    text = make_patch(upstream, pin, {"src/util.c": numbered(30, "util").replace("util 10\n", "UTIL 10\n")}, "Util ten")
    project.add_patch("0001-util-ten.patch", text)
    write_config(project, pin)
    before_move = upstream.commit({"src/util.c": numbered(30, "util").replace("util 11\n", "util eleven\n")}, "Util 11")
    upstream.commit(
        {"src/util.c": None, "src/utils.c": numbered(30, "util").replace("util 11\n", "util eleven\n")}, "Move"
    )
    after_move = upstream.commit(
        {"src/utils.c": numbered(30, "util").replace("util 11\n", "util eleven\n").replace("util 10\n", "util X\n")},
        "Util 10 in its new home",
    )
    result, payload = sync(cli, project, "up", "--latest")
    assert result.exit_code == 1 and payload["state"] == "conflict", result.output
    assert payload["patches"][0]["renames"] == ["src/util.c → src/utils.c"]
    [hunk] = payload["stop_cause"]["hunks"]
    assert (hunk["file"], hunk["hunk"], hunk["old_path"]) == ("src/utils.c", 1, "src/util.c")
    assert [c["sha"] for c in hunk["commits"]] == [before_move, after_move]  # across the move; not the move itself
    assert "(lines 7-13 at the old pin, in `src/util.c`)" in result.stdout


def test_a_conflict_with_an_earlier_patch_as_resolved_names_that_patch(project: Project, upstream: Repo, cli) -> None:
    pin = upstream.head
    first = make_patch(upstream, pin, {"src/main.c": main_c({20: "MAIN 20 patched"})}, "Patch line twenty")
    upstream.git("checkout", "-q", "-b", "with-the-first", pin)  # the second patch is cut on top of the first
    on_first = upstream.commit({"src/main.c": main_c({20: "MAIN 20 patched"})}, "Patch line twenty")
    second = make_patch(
        upstream, on_first, {"src/main.c": main_c({20: "MAIN 20 patched", 25: "MAIN 25 patched"})}, "Patch line 25"
    )
    upstream.git("checkout", "-q", "main")
    upstream.git("branch", "-q", "-D", "with-the-first")
    project.add_patch("0001-patch-line-twenty.patch", first)
    project.add_patch("0002-patch-line-25.patch", second)
    write_config(project, pin)
    changed = upstream.commit({"src/main.c": main_c({20: "main 20 upstream"})}, "Upstream edits line 20")
    result, payload = sync(cli, project, "up", "--latest")
    assert result.exit_code == 1 and commits_of(payload, "src/main.c", 1) == [(changed, "Upstream edits line 20")]
    # Resolved by hand, the resolution reaching line 25 too: the next patch conflicts with it, not with upstream.
    tree = project.path / TREE
    (tree / "src/main.c").write_text(main_c({20: "MAIN 20 resolved", 25: "main 25 moved by the resolution"}))
    git.run(["add", "src/main.c"], tree)
    result, payload = sync(cli, project, "--continue")
    assert result.exit_code == 1 and payload["state"] == "conflict", result.output
    [hunk] = payload["stop_cause"]["hunks"]
    assert hunk["commits"] == [] and hunk["series"] == ["Patch line twenty"], hunk
    assert hunk["note"] == (
        "upstream left these lines as they were; earlier patches of the series, as carried, changed them"
    )
    assert "  - by earlier patches of the series, as carried: `Patch line twenty`" in result.stdout


def test_a_file_upstream_deleted_names_the_commit_that_deleted_it(project: Project, upstream: Repo, cli) -> None:
    pin = upstream.head
    text = make_patch(upstream, pin, {"src/util.c": numbered(30, "util").replace("util 5\n", "UTIL 5\n")}, "Util five")
    project.add_patch("0001-util-five.patch", text)
    write_config(project, pin)
    gone = upstream.commit({"src/util.c": None, "CMakeLists.txt": "project(up)\n"}, "Drop util")
    result, payload = sync(cli, project, "up", "--latest")
    assert result.exit_code == 1 and payload["state"] == "needs-hand", result.output
    [hunk] = payload["stop_cause"]["hunks"]
    assert hunk["file"] == "src/util.c" and hunk["note"] == "upstream deleted src/util.c"
    assert [c["sha"] for c in hunk["commits"]] == [gone]


def test_a_needs_a_look_stop_names_the_commit_that_made_the_edit(project: Project, upstream: Repo, cli) -> None:
    from .fixtures_bump import build_bump

    bump = build_bump(upstream, project)
    for name in ("0001-clip-unicode.patch", "0002-vocab-patch-step-28.patch"):
        (project.series_dir / name).unlink()
    result, payload = sync(cli, project, "up", "--latest")
    assert result.exit_code == 1 and payload["state"] == "needs-look", result.output
    hunks = payload["stop_cause"]["hunks"]
    assert [(h["file"], h["hunk"]) for h in hunks] == [("ggml/src/ggml.c", 2), ("ggml/src/ggml.c", 4)]
    assert all(bump.roll_commit in [c["sha"] for c in h["commits"]] for h in hunks)


# ---------------------------------------------------------------- upstream's own version


def test_upstream_made_its_own_version_says_so_and_its_advice_drops_the_patch(
    project: Project, upstream: Repo, cli
) -> None:
    own_version_bump(project, upstream, ["#if UPSTREAM_FIX", "    MAIN 20 patched", "    extra line", "#endif"])
    result, payload = sync(cli, project, "up", "--latest")
    assert result.exit_code == 1 and payload["state"] == "conflict", result.output
    cause = payload["stop_cause"]
    assert cause["upstream_version"] is True
    [hunk] = cause["hunks"]
    assert [c["subject"] for c in hunk["commits"]] == ["Upstream's fix of main 20"]
    assert hunk["patch_side"].splitlines() == [
        " main 17", " main 18", " main 19", "-main 20", "+MAIN 20 patched", "+extra line", " main 21", " main 22",
        " main 23",
    ]  # fmt: skip
    assert hunk["upstream_side"].splitlines() == [
        "main 17", "main 18", "main 19", "#if UPSTREAM_FIX", "    MAIN 20 patched", "    extra line", "#endif",
        "main 21", "main 22", "main 23",
    ]  # fmt: skip
    assert cause["advice"] == "compare both sides (under why it stopped), then `patchctl pin-sync up --continue --drop`"
    advice = payload["next_steps"][0]
    assert advice == f"upstream may have its own version of 0001-fix-main-20.patch: {cause['advice']}"
    markdown = markdown_report(project).read_text()
    assert "**Upstream may have its own version** (every hunk of the patch stands there in substance): " in markdown
    assert (
        "<summary>src/main.c hunk #\u200d1: the patch, and upstream&#x27;s lines there at the new pin</summary>"
        in markdown
    )
    assert_inert(markdown)
    # The advice, run as printed, drops the patch and the sync goes on to the end.
    done = run_as_printed(cli, advice, project)
    assert "main/0001-fix-main-20.patch was DROPPED from the series (dropped by hand" in done.stderr
    assert project.patch_names() == []
    assert f"pin: '{upstream.head}'" in (project.path / "matrix.yaml").read_text()


def test_its_own_version_at_a_needs_a_look_stop_drops_the_patch_as_printed(
    project: Project, upstream: Repo, cli
) -> None:
    pin = upstream.head
    project.add_patch(
        "0001-patch-line-twenty.patch",
        make_patch(upstream, pin, {"src/main.c": main_c({20: "MAIN 20 patched"})}, "Patch line twenty"),
    )
    write_config(project, pin)
    upstream.commit({"src/main.c": main_c({20: "MAIN 20 patched", 3: "main 3 reworked"})}, "Rework main 3 and 20")
    result, payload = sync(cli, project, "up", "--latest")
    assert result.exit_code == 1 and payload["state"] == "needs-look", result.output
    assert payload["stop_cause"]["upstream_version"] is True
    advice = payload["next_steps"][0]
    assert advice.endswith("then `patchctl pin-sync up --continue --drop`")
    done = run_as_printed(cli, advice, project)
    assert "main/0001-patch-line-twenty.patch was DROPPED from the series (dropped by hand (--drop))" in done.stderr


def test_its_own_version_at_a_patch_that_needs_a_hand_drops_it_as_printed(
    project: Project, upstream: Repo, cli
) -> None:
    pin = upstream.head
    text = make_patch(upstream, pin, {"src/main.c": main_c({20: "MAIN 20 patched"})}, "Patch line twenty")
    # Cut against a tree with a local line 18, whose blob no repository here has: git cannot merge it.
    [preimage] = re.findall(r"^index ([0-9a-f]{40})\.\.", text, re.MULTILINE)
    text = text.replace(" main 18\n", " main 18 local\n").replace(preimage, "1" * 40)
    project.add_patch("0001-patch-line-twenty.patch", text)
    write_config(project, pin)
    taken = upstream.commit({"src/main.c": main_c({20: "MAIN 20 patched"})}, "Upstream patches line 20 its way")
    result, payload = sync(cli, project, "up", "--latest")
    assert result.exit_code == 1 and payload["state"] == "needs-hand", result.output
    assert commits_of(payload, "src/main.c", 1) == [(taken, "Upstream patches line 20 its way")]
    assert payload["stop_cause"]["upstream_version"] is True
    advice = payload["next_steps"][0]
    assert advice.endswith("then `patchctl pin-sync up --continue --drop`"), advice
    done = run_as_printed(cli, advice, project)
    assert "main/0001-patch-line-twenty.patch was DROPPED from the series (dropped by hand (--drop))" in done.stderr


@pytest.mark.parametrize(
    "upstream_lines",
    [
        pytest.param(["    MAIN 20 patched", "    extra line!"], id="an-added-line-differs"),
        pytest.param(["    MAIN 20 patched", "    extra line", "    main 20"], id="the-removed-line-stays"),
        pytest.param(["    main 20 rewritten"], id="upstream-changed-it-otherwise"),
    ],
)
def test_a_near_miss_never_says_upstream_has_its_own_version(
    project: Project, upstream: Repo, cli, upstream_lines: list[str]
) -> None:
    own_version_bump(project, upstream, upstream_lines)
    result, payload = sync(cli, project, "up", "--latest")
    assert result.exit_code == 1 and payload["state"] == "conflict", result.output
    assert payload["stop_cause"]["upstream_version"] is False
    assert [c["subject"] for c in payload["stop_cause"]["hunks"][0]["commits"]] == ["Upstream's fix of main 20"]
    assert "may have its own version" not in result.stdout
    assert not any("own version" in step for step in payload["next_steps"])


def test_upstream_holding_the_failed_hunk_but_not_the_rest_is_no_own_version(
    project: Project, upstream: Repo, cli
) -> None:
    # The util.c hunk merges cleanly and upstream lacks it: dropping the patch would lose it.
    own_version_bump(project, upstream, ["    MAIN 20 patched", "    extra line"], other_file=True)
    result, payload = sync(cli, project, "up", "--latest")
    assert result.exit_code == 1 and payload["state"] == "conflict", result.output
    assert named_hunks(payload) == {("src/main.c", 1)}
    assert payload["stop_cause"]["upstream_version"] is False


# ---------------------------------------------------------------- links and hostile subjects


def test_a_github_upstream_links_each_commit_and_a_hostile_subject_stays_text(
    project: Project, upstream: Repo, cli, tmp_path: Path
) -> None:
    pin = upstream.head
    project.add_patch(
        "0001-patch-line-twenty.patch",
        make_patch(upstream, pin, {"src/main.c": main_c({20: "MAIN 20 patched"})}, "Patch line twenty"),
    )
    # Followed at a local mirror (--upstream-url), declared on github.com: the links go to GitHub.
    write_config(project, pin, up_extra="ci:\n  url: https://github.com/example/up\n  branch: main\n")
    hostile = "Fix <img src=x> [link](http://evil) @owner #12 ::error::boom `x`\x1b[31m\u202e"
    evil = upstream.commit({"src/main.c": main_c({20: "main 20 reworked"})}, hostile)
    result, payload = sync(cli, project, "up", "--latest")
    assert result.exit_code == 1, result.output
    [commit] = payload["stop_cause"]["hunks"][0]["commits"]
    assert commit["url"] == f"https://github.com/example/up/commit/{evil}"
    assert commit["subject"] == hostile  # the JSON keeps upstream's text as it is
    markdown = markdown_report(project).read_text()
    cause = markdown.split("### Why it stopped")[1].split("<details>")[0]
    assert f"<https://github.com/example/up/commit/{evil}>" in cause
    rendered = assert_inert(cause.replace(f"<https://github.com/example/up/commit/{evil}>", ""))
    assert "<img" not in rendered and "\x1b" not in markdown and "\u202e" not in markdown
    # status's text: one line per cause, control characters shown as escapes.
    text = cli("-C", project.path, "status").stdout
    [why] = [line for line in text.splitlines() if line.startswith("    why:")]
    assert "\\x1b[31m" in why and "\\u202e" in why


# ---------------------------------------------------------------- the hunks: against git, case by case


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    upstream_edits=st.lists(
        st.tuples(st.integers(1, 150), st.sampled_from(["change", "delete", "insert"])),
        max_size=8,
        unique_by=lambda edit: edit[0],
    ),
    patch_lines=st.lists(st.integers(1, 150), min_size=2, max_size=8, unique=True),
)
def test_the_hunks_a_conflict_names_are_those_git_fails_on_alone(
    tmp_path_factory: pytest.TempPathFactory, upstream_edits: list[tuple[int, str]], patch_lines: list[int]
) -> None:
    """`conflicting_hunks` against git: each hunk of the patch alone, `git apply -3` at HEAD."""
    work = tmp_path_factory.mktemp("hunks")
    repo = Repo(work / "repo")
    base = [f"line {i}" if i % 7 else "}" for i in range(1, 151)]  # repeated lines, as code has
    pin = repo.commit({"f.txt": "\n".join(base) + "\n"}, "base")
    ours = list(base)
    for number, kind in sorted(upstream_edits, reverse=True):
        if kind == "change":
            ours[number - 1] = f"upstream {number}"
        elif kind == "delete":
            del ours[number - 1]
        else:
            ours.insert(number - 1, f"upstream before {number}")
    theirs = [f"patched {i + 1}" if i + 1 in patch_lines else line for i, line in enumerate(base)]
    (work / "repo" / "f.txt").write_text("\n".join(theirs) + "\n")
    patch_text = git.run(["diff", "--full-index"], repo.path).stdout
    git.run(["checkout", "-q", "--", "f.txt"], repo.path)
    head = repo.commit({"f.txt": "\n".join(ours) + "\n"}, "upstream")
    patch = PatchFile(work / "p.patch", patch_text.encode())
    outcome = apply_in_worktree(repo.path, patch, three_way=True, commit=False)
    if outcome.status != Status.CONFLICT:
        assert outcome.ok or outcome.status == Status.ALREADY_APPLIED, outcome
        return
    named = {(f.file, f.hunk) for f in outcome.failures}
    git.run(["reset", "-q", "--hard", head], repo.path)
    lines = patch_text.split("\n")
    alone_failing = set()
    [diff] = patch.files
    header = lines[diff.line - 1 : diff.hunks[0].line - 1]
    for hunk in diff.hunks:
        alone = "\n".join([*header, lines[hunk.line - 1], *hunk.body]) + "\n"
        applied = git.run(["apply", "-3", "--index", "-"], repo.path, check=False, input=alone)
        if not applied.ok or git.run(["ls-files", "-u"], repo.path).stdout.strip():
            alone_failing.add(("f.txt", hunk.index))
        git.run(["reset", "-q", "--hard", head], repo.path)
    assert named == alone_failing, (pin, upstream_edits, patch_lines)
