"""patchctl's in-memory hunk placing (`patchctl.series.textapply`) held against `git apply -v` itself
on generated cases: a file of few distinct lines (so that a hunk's context stands in several
places), an edit cut with `git diff` at 0 to 3 lines of context, and a target that drifted from the
file the patch was cut on (lines added or removed before, between and after the hunks, or inside
one; now and then no newline at its end, on either side). Both must agree on whether it applies,
on the result byte for byte, and on every offset `git apply -v` reports. A patch that is not
plain is the caller's to give to git."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from patchctl import git
from patchctl.series.applier import APPLY_CONFIG
from patchctl.series.patchset import PatchFile
from patchctl.series.textapply import MemoryTree, apply_hunks, file_commands, plain_edits, split_lines

CASES = 160
WORDS = [b"{", b"}", b"return 0;", b"", b"x++;", b"  break;", b"int a;", b"\tb = 1;"]
OFFSET = re.compile(r"^Hunk #(\d+) succeeded at \d+ \(offset (-?\d+) lines?\)\.", re.MULTILINE)


def _file(rng: random.Random, size: int) -> list[bytes]:
    return [rng.choice(WORDS) + (b" %d" % rng.randrange(4) if rng.random() < 0.5 else b"") for _ in range(size)]


def _edit(rng: random.Random, lines: list[bytes]) -> list[bytes]:
    edited = list(lines)
    for _ in range(rng.randint(1, 4)):
        at = rng.randrange(len(edited) + 1)
        kind = rng.random()
        if kind < 0.4:
            edited[at:at] = _file(rng, rng.randint(1, 3))
        elif kind < 0.7 and at < len(edited):
            del edited[at : at + rng.randint(1, 2)]
        elif at < len(edited):
            edited[at] = b"changed %d" % rng.randrange(100)
    return edited


def _drift(rng: random.Random, lines: list[bytes]) -> list[bytes]:
    drifted = list(lines)
    for _ in range(rng.randint(0, 3)):
        at = rng.randrange(len(drifted) + 1)
        if rng.random() < 0.7:
            drifted[at:at] = _file(rng, rng.randint(1, 6))
        elif at < len(drifted):
            del drifted[at]
    return drifted


def _text(lines: list[bytes], newline_at_end: bool = True) -> bytes:
    return b"\n".join(lines) + (b"\n" if newline_at_end and lines else b"")


@given(
    st.lists(st.sampled_from([b"a", b"\n", b"\r", b"\r\n", b"\x0b", b"\x0c", b"\x1c", b"\x85", b" "]), max_size=40).map(
        b"".join
    )
)
def test_a_file_is_split_at_lf_alone_whatever_else_it_holds(content: bytes) -> None:
    lines = content.split(b"\n")
    assert split_lines(content) == [line + b"\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])


def test_hunks_land_where_git_apply_puts_them(tmp_path: Path) -> None:
    rng = random.Random(32)
    repo = tmp_path / "repo"
    repo.mkdir()
    git.run(["init", "-q"], repo)
    target_dir = tmp_path / "target"
    target_dir.mkdir()
    compared = applied = moved = 0
    for case in range(CASES):
        base = _file(rng, rng.randint(3, 40))
        ends = rng.random() > 0.1  # now and then a file without a newline at its end: "\ No newline..."
        (repo / "f.c").write_bytes(_text(base, ends))
        git.run(["add", "f.c"], repo)
        (repo / "f.c").write_bytes(_text(_edit(rng, base), rng.random() > 0.1))
        patch = git.run(["diff", f"-U{rng.choice([0, 1, 2, 3, 3])}", "--", "f.c"], repo, binary=True).stdout
        if not patch:
            continue
        parsed = PatchFile(Path("x.patch"), patch).parsed
        if not plain_edits(parsed):
            continue  # e.g. only added lines at 0 lines of context: git's to apply
        # Some targets lack the newline at the end (the file the patch was cut on had one).
        target = _text(_drift(rng, base) if case % 4 else base, newline_at_end=ends if rng.random() > 0.1 else not ends)
        (target_dir / "f.c").write_bytes(target)
        done = git.run([*APPLY_CONFIG, "apply", "-v", "-"], target_dir, input=patch, check=False)
        ours = apply_hunks(target, parsed.blocks[0].hunks)
        assert (ours is not None) == done.ok, (case, patch, target, done.stderr)
        compared += 1
        if ours is not None:
            applied += 1
            assert ours[0] == (target_dir / "f.c").read_bytes(), (case, patch, target)
            reported = [(int(n), int(o)) for n, o in OFFSET.findall(done.stderr)]
            assert ours[1] == reported, (case, patch, target, done.stderr)
            moved += bool(reported)
    # The generator reaches every kind of case: refused, applied in place, applied elsewhere.
    assert compared > CASES * 0.8 and compared - applied > 10 and applied - moved > 10 and moved > 10, (
        compared,
        applied,
        moved,
    )


@pytest.mark.parametrize(
    "patch",
    [
        b"diff --git a/f.c b/f.c\nnew file mode 100644\nindex 0000000..e69de29\n",  # an empty new file
        b"diff --git a/f.c b/f.c\nnew file mode 120000\n--- /dev/null\n+++ b/f.c\n@@ -0,0 +1 @@\n+x\n",  # a link
        b"diff --git a/f.c b/g.c\nsimilarity index 90%\nrename from f.c\nrename to g.c\n",  # a rename
        b"diff --git a/f.c b/f.c\nold mode 100644\nnew mode 100755\n",  # a mode change
        b"diff --git a/f.c b/f.c\n--- a/f.c\n+++ b/f.c\n@@ -1 +1 @@\n\\ No newline at end of file\n-a\n+b\n",
        b"diff --git a/f.c b/f.c\n--- a/f.c\n+++ b/f.c\n@@ -0,0 +1 @@\n+a\n",  # nothing to match
    ],
)
def test_what_is_not_a_plain_edit_is_left_to_git(patch: bytes) -> None:
    assert not plain_edits(PatchFile(Path("x.patch"), patch).parsed)


def test_a_memory_tree_writes_what_git_apply_writes(tmp_path: Path) -> None:
    """Two patches on one file and one on another, in memory on a commit, then committed by
    fast-import: the same tree as `git apply --index` of each and a commit; a CR or an index
    line that git would contradict sends the patch to git."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git.run(["init", "-q"], repo)
    (repo / "a.c").write_bytes(b"".join(b"line %d\n" % i for i in range(30)))
    (repo / "b.c").write_bytes(b"one\ntwo\nthree\n")
    git.run(["add", "-A"], repo)
    git.run(["commit", "-q", "-m", "base"], repo)
    base = git.rev_parse(repo, "HEAD")
    patches = []
    for step, (path, old, new) in enumerate(
        [("a.c", b"line 5\n", b"five\n"), ("a.c", b"line 20\n", b""), ("b.c", b"two\n", b"2\n")]
    ):
        content = (repo / path).read_bytes().replace(old, new)
        (repo / path).write_bytes(content)
        patches.append(PatchFile(Path(f"{step}.patch"), git.run(["diff"], repo, binary=True).stdout))
        git.run(["commit", "-q", "-am", f"step {step}"], repo)
    memory = MemoryTree(repo, base)
    commands = []
    for patch in patches:
        result = memory.apply(patch)
        assert result is not None and result[1] == []
        commands += file_commands(result[0])
    stream = b"commit refs/heads/memory\ncommitter a <b> 0 +0000\ndata 0\nfrom %s\n" % base.encode()
    stream += b"".join(command + b"\n" for command in commands) + b"\ndone\n"
    git.run(["fast-import", "--quiet", "--done"], repo, input=stream)
    trees = git.run(["rev-parse", "memory^{tree}", "HEAD^{tree}"], repo).stdout.split()
    assert trees[0] == trees[1]
    # A new file, where nothing stands: in a new directory, not over a file nor through one.
    new = b"diff --git a/%s b/%s\nnew file mode 100644\n--- /dev/null\n+++ b/%s\n@@ -0,0 +1,2 @@\n+x\n+y\n"
    created = MemoryTree(repo, base).apply(PatchFile(Path("new.patch"), new % ((b"d/e/n.c",) * 3)))
    assert created == ({"d/e/n.c": ("100644", b"x\ny\n")}, [])
    for taken in (b"a.c", b"a.c/n.c"):
        assert MemoryTree(repo, base).apply(PatchFile(Path("new.patch"), new % ((taken,) * 3))) is None
    with_cr = PatchFile(Path("cr.patch"), patches[2].data.replace(b"+2\n", b"+2\r\n"))
    assert MemoryTree(repo, base).apply(with_cr) is None
    lying = PatchFile(Path("lie.patch"), re.sub(rb"\.\.([0-9a-f]+)", b"..0123456", patches[2].data, count=1))
    assert MemoryTree(repo, base).apply(lying) is None  # git would write another blob than the line says


def _repo_of_lines(tmp_path: Path, count: int) -> tuple[Path, str]:
    """A repository whose one commit holds a.c, COUNT numbered lines; and that commit."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git.run(["init", "-q"], repo)
    (repo / "a.c").write_bytes(b"".join(b"line %d\n" % i for i in range(count)))
    git.run(["add", "-A"], repo)
    git.run(["commit", "-q", "-m", "base"], repo)
    return repo, git.rev_parse(repo, "HEAD")


def _record_in_memory(monkeypatch: pytest.MonkeyPatch, memory: list) -> None:
    """Record (the last commit, the patches left to git) of each `_apply_in_memory` into MEMORY."""
    from patchctl.series import applier

    in_memory = applier._apply_in_memory

    def recorded(*args: object, **kwargs: object) -> tuple:
        done = in_memory(*args, **kwargs)
        memory.append(done[1:])
        return done

    monkeypatch.setattr(applier, "_apply_in_memory", recorded)


def test_a_seed_made_in_memory_is_the_series_git_applies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The seed pin-sync makes (the series as commits on the old pin) comes from memory where
    every patch is plain: the very commits `git apply` of each patch and a commit give."""
    from patchctl.series import applier

    repo, base = _repo_of_lines(tmp_path, 30)
    patches = []
    for step, (path, content) in enumerate(
        [("a.c", b"line 0\nzero\n"), ("src/new.c", b"int x;\n"), ("src/new.c", b"int x;\nint y;\n")]
    ):
        target = repo / path
        target.parent.mkdir(exist_ok=True)
        target.write_bytes(content + (target.read_bytes() if target.exists() and path == "a.c" else b""))
        git.run(["add", "-A"], repo)
        git.run(["commit", "-q", "-m", f"step {step}", "--date", "2024-01-01T00:00:00Z"], repo)
        patch = git.run(["format-patch", "-1", "--stdout"], repo, binary=True).stdout
        patches.append(PatchFile(Path(f"{step}.patch"), patch))
    memory = []
    _record_in_memory(monkeypatch, memory)
    seeded = applier.seed_three_way_objects(repo, base, patches)
    assert memory == [(seeded, [])]  # made in memory, not by git
    _, applied = applier.apply_series_to_index(repo, base, patches)
    assert seeded == applied


def test_a_seed_goes_on_with_git_from_the_patch_textapply_leaves_to_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ollama's series of bump c68f367ef holds a patch whose index line names a result other than
    the one its hunks make (git applies it; textapply leaves it to git): the patches before it
    are seeded in memory, git applies it and the rest on top, and the commits are the ones a
    `git apply` of each patch gives."""
    from patchctl.series import applier

    repo, base = _repo_of_lines(tmp_path, 40)
    patches = []
    for step, line in enumerate((0, 15, 30)):
        (repo / "a.c").write_bytes((repo / "a.c").read_bytes().replace(b"line %d\n" % line, b"LINE %d\n" % line))
        git.run(["commit", "-q", "-a", "-m", f"step {step}", "--date", "2024-01-01T00:00:00Z"], repo)
        patches.append(
            PatchFile(Path(f"{step}.patch"), git.run(["format-patch", "-1", "--stdout"], repo, binary=True).stdout)
        )
    git.run(["reset", "-q", "--hard", base], repo)
    patches[1] = PatchFile(patches[1].path, re.sub(rb"\.\.([0-9a-f]+)", b"..0123456", patches[1].data, count=1))
    memory = []
    _record_in_memory(monkeypatch, memory)

    seeded = applier.seed_three_way_objects(repo, base, patches)
    (after_first, left) = memory[0]  # the seed's
    outcomes, applied = applier.apply_series_to_index(repo, base, patches)
    assert [o.ok for o in outcomes] == [True, True, True] and seeded == applied
    assert left == patches[1:] and git.run(["log", "-1", "--format=%s", after_first], repo).stdout.strip() == "step 0"


def test_a_series_applied_in_memory_is_what_git_applies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`apply_series_to_index` (a warm `apply`, lint's strict apply, export's verify) applies the
    plain patches in memory and commits them in one fast-import: the same outcomes (offsets
    included), the same commits and the same last commit as git applying and committing each;
    git goes on from the first patch that is not plain (a deletion), and a patch that does not
    apply is git's to classify. Held against git itself, `_apply_in_memory` turned off."""
    from patchctl.series import applier

    repo, base = _repo_of_lines(tmp_path, 60)
    (repo / "gone.c").write_bytes(b"gone\n")
    git.run(["add", "-A"], repo)
    git.run(["commit", "-q", "-m", "more"], repo)
    base = git.rev_parse(repo, "HEAD")
    edits = [
        ("a.c", b"line 10\n", b"LINE 10\n"),
        ("a.c", b"line 40\n", b"line 40\nforty\n"),
        ("b/new.c", None, b"int x;\n"),
        ("gone.c", b"gone\n", None),  # a deletion: not plain, git's from here on
        ("a.c", b"line 50\n", b"fifty\n"),
    ]
    patches = []
    for step, (path, old, new) in enumerate(edits):
        target = repo / path
        target.parent.mkdir(exist_ok=True)
        if new is None:
            target.unlink()
        else:
            target.write_bytes(new if old is None else target.read_bytes().replace(old, new))
        git.run(["add", "-A"], repo)
        git.run(["commit", "-q", "-m", f"step {step}", "--date", "2024-01-01T00:00:00Z"], repo)
        patches.append(
            PatchFile(Path(f"{step}.patch"), git.run(["format-patch", "-1", "--stdout"], repo, binary=True).stdout)
        )
    # The target drifted: lines before the hunks, so that they land with offsets.
    git.run(["checkout", "-q", base], repo)
    (repo / "a.c").write_bytes(b"top\n" * 3 + (repo / "a.c").read_bytes())
    git.run(["commit", "-q", "-am", "drift"], repo)
    drifted = git.rev_parse(repo, "HEAD")
    broken = PatchFile(Path("9.patch"), patches[0].data.replace(b"-line 10\n", b"-no such line\n"))
    cases = [(drifted, patches, True), (drifted, patches[:3], True), (drifted, patches[:3], False),
             (drifted, [*patches[:2], broken, patches[2]], True), (drifted, [*patches[:2], broken], False)]  # fmt: skip
    in_memory = applier._apply_in_memory
    taken = []  # per case, how many patches went in memory

    def counted(*args: object, **kwargs: object) -> tuple:
        done = in_memory(*args, **kwargs)
        taken.append(len(done[0]))
        return done

    for rev, series, commit in cases:
        monkeypatch.setattr(applier, "_apply_in_memory", counted)
        ours = applier.apply_series_to_index(repo, rev, series, commit=commit)
        monkeypatch.setattr(applier, "_apply_in_memory", lambda _repo, base, patches, commit: ([], base, patches))
        theirs = applier.apply_series_to_index(repo, rev, series, commit=commit)
        assert ours == theirs
    assert taken == [3, 3, 3, 2, 0]
    outcomes, head = applier.apply_series_to_index(repo, drifted, patches)
    assert [o.status for o in outcomes] == [applier.Status.OFFSET] * 2 + [applier.Status.APPLIED] * 2 + [
        applier.Status.OFFSET
    ]
    assert [o.commit for o in outcomes][-1] == head
