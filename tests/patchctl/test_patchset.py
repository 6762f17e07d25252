"""patchset: reading patch files made by git (messages, file diffs, hunks, fingerprints)."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchctl.series.patchset import (
    MalformedPatch,
    PatchFile,
    hunk_fingerprint,
    is_excluded,
    parse_message,
    raw_paths,
    series_digest,
    slugify,
)

from .conftest import Repo, make_patch, numbered


def patch_file(tmp_path: Path, name: str, text: str) -> PatchFile:
    path = tmp_path / name
    path.write_text(text)
    return PatchFile(path, path.read_bytes())


def test_a_git_patch_parses_into_message_files_and_hunks(tmp_path: Path, upstream: Repo) -> None:
    main = numbered(40, "main").replace("main 5\n", "main 5 changed\n").replace("main 30\n", "main 30 changed\n")
    text = make_patch(
        upstream,
        upstream.head,
        {"src/main.c": main, "src/new.c": "new\n", "README.md": None},
        "Rework main",
        "Because the slot finder\nneeds it.",
    )
    patch = patch_file(tmp_path, "0007-rework-main.patch", text)
    assert (patch.number, patch.slug) == (7, "rework-main")
    assert patch.message.subject == "Rework main"
    assert patch.message.description == "Because the slot finder\nneeds it."
    lines = text.splitlines()
    assert lines[patch.message.body_line - 1] == "Because the slot finder"
    by_path = {f.path: f for f in patch.files}
    assert set(by_path) == {"README.md", "src/main.c", "src/new.c"}
    assert (
        by_path["README.md"].is_removed and by_path["src/new.c"].is_added and by_path["src/new.c"].source_path is None
    )
    hunks = by_path["src/main.c"].hunks
    assert [h.index for h in hunks] == [1, 2]
    for hunk in hunks:  # each hunk knows the line of its @@ header in the file
        assert lines[hunk.line - 1].startswith(hunk.header)
    assert lines[by_path["src/main.c"].line - 1] == "diff --git a/src/main.c b/src/main.c"
    assert "+main 5 changed" in hunks[0].body and "-main 30" in hunks[1].body
    assert patch.touched_paths() == ["README.md", "src/main.c", "src/new.c"]


def test_bare_diffs_and_garbage(tmp_path: Path) -> None:
    bare = "--- a/x.c\n+++ b/x.c\n@@ -1 +1 @@\n-a\n+b\n"
    assert [f.path for f in patch_file(tmp_path, "bare.patch", bare).files] == ["x.c"]
    assert parse_message(bare).subject == ""
    folded = parse_message("From 0 Mon\nSubject: [PATCH 2/3] A long\n subject line\n\nBody.\n---\nstat\n")
    assert (folded.subject, folded.description, folded.body_line) == ("A long subject line", "Body.", 5)
    with pytest.raises(MalformedPatch, match="no diff in the patch"):
        _ = patch_file(tmp_path, "empty.patch", "Subject: nothing\n\nno diff here\n").files
    with pytest.raises(MalformedPatch, match="does not parse") as broken:
        _ = patch_file(
            tmp_path, "broken.patch", "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n-a\n+b\n"
        ).files
    assert broken.value.line is None or broken.value.line > 0


def test_raw_paths_reads_headers_unidiff_would_reject() -> None:
    text = "diff --git a/../etc/x b/../etc/x\nrename from old/name.c\nrename to new/name.c\n--- /dev/null\n+++ b/y\n"
    assert raw_paths(text) == ["../etc/x", "../etc/x", "old/name.c", "new/name.c", "y"]


@pytest.mark.parametrize(
    ("path", "patterns", "excluded"),
    [
        (".github/workflows/ci.yml", [".github/**"], True),
        ("src/.github", [".github/**"], False),
        ("a/b/CMakeLists.txt", ["CMakeLists.txt"], True),
        ("docs/a/b.md", ["docs/*.md"], False),
        ("docs/b.md", ["docs/*.md"], True),
        ("x/node_modules/y.js", ["node_modules"], True),
        ("src/a.c", ["/src"], True),
        ("srcs/a.c", ["src/**"], False),
    ],
)
def test_is_excluded_is_gitignore_like(path: str, patterns: list[str], excluded: bool) -> None:
    assert is_excluded(path, patterns) is excluded


def test_slugify_keeps_words_and_cuts_at_a_boundary() -> None:
    assert slugify("Fix: the KV-cache slot finder!") == "fix-the-kv-cache-slot-finder"
    assert slugify("!!!") == "patch"
    long = slugify("paged attention blocks for the llama cpp kv cache manager and more")
    assert len(long) <= 41 and not long.endswith("-") and long.startswith("paged-attention-blocks")


def test_fingerprint_ignores_line_numbers_and_index_lines_but_not_content(tmp_path: Path, upstream: Repo) -> None:
    base = upstream.head
    changed = {"src/util.c": numbered(30, "util").replace("util 20\n", "util 20 x\n")}
    original = patch_file(tmp_path, "a.patch", make_patch(upstream, base, changed, "Tweak util"))
    moved = upstream.commit({"src/util.c": "new first line\n" + numbered(30, "util")}, "Shift")
    shifted_files = {"src/util.c": "new first line\n" + changed["src/util.c"]}
    shifted = patch_file(tmp_path, "b.patch", make_patch(upstream, moved, shifted_files, "Tweak util"))
    assert original.text != shifted.text
    assert hunk_fingerprint(original) == hunk_fingerprint(shifted)
    renamed = patch_file(tmp_path, "c.patch", make_patch(upstream, base, changed, "Tweak util differently"))
    assert hunk_fingerprint(renamed) != hunk_fingerprint(original)


def test_series_digest_depends_on_order_names_and_bytes(tmp_path: Path) -> None:
    one = patch_file(tmp_path, "0001-a.patch", "a\n")
    two = patch_file(tmp_path, "0002-b.patch", "b\n")
    assert series_digest([one, two]) != series_digest([two, one])
    assert series_digest([one, two]) == series_digest([one, patch_file(tmp_path, "0002-b.patch", "b\n")])
    assert series_digest([one, two]) != series_digest([one, patch_file(tmp_path, "0002-b.patch", "b \n")])
    assert series_digest([one]) != series_digest([patch_file(tmp_path, "0001-c.patch", "a\n")])


def test_a_form_feed_inside_a_hunk_is_part_of_its_line() -> None:
    """C sources carry ^L page breaks; str.splitlines would cut the line there and count the
    hunk one line too long (tar's Debian patches have them)."""
    from patchctl.series.diffblocks import overlong_hunks, parse_diff_text

    text = (
        "--- a/tar.c\n+++ b/tar.c\n@@ -1,3 +1,4 @@\n one\n+two\n \x0c\n three\n"
        "--- a/other.c\n+++ b/other.c\n@@ -1 +1 @@\n-x\n+y\n"
    )
    parsed = parse_diff_text(text)
    assert overlong_hunks(parsed) == []
    assert [b.new_path for b in parsed.blocks] == ["tar.c", "other.c"]
