"""`patchctl.project.rsyncfilter`: rsync's filter rules as a `vendor:` copy's `filter:` reads them,
checked against the real rsync: for each list of rules, the files `rsync -r` copies from a
tree are exactly those `RsyncFilter.sends` says; and the rules patchctl does not read are
refused in one line that names them."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest

from patchctl.project.rsyncfilter import FilterError, load, parse

TREE = [
    "LICENSE",
    "CMakeLists.txt",
    "README.md",
    "foo_bar.c",
    "src/a.c",
    "src/b.h",
    "src/a.go",
    "src/CMakeLists.txt",
    "src/deep/c.c",
    "src/deep/x/y.cu",
    "src/ggml-cuda/k.cu",
    "src/ggml-cuda/k.cuh",
    "src/ggml-cuda/vendors/h.h",
    "src/ggml-cuda/template-instances/t.cu",
    "src/ggml-vulkan/v.cpp",
    "src/ggml-vulkan/vulkan-shaders/s.comp",
    "src/ggml-vulkan/vulkan-shaders/x.txt",
    "src/models/m.cpp",
    "src/models/m.h",
    "src/llama-x.cpp",
    "src/llama.cpp",
    "include/ggml.h",
    "include/ggml-webgpu.h",
    "include/x/ggml.h",
    "docs/x.c",
    "tools/mtmd/clip.cpp",
    "tools/mtmd/a.h",
    "tools/mtmd/b.py",
    "vendor/stb/stb.h",
    "vendor/nlohmann/json.hpp",
    "vendor/cpp-httplib/LICENSE",
    "common/log.h",
    "common/log.cpp",
    "a]b/c.c",
    "[x]/y.c",
    "sp ace/f.c",
    "dir.c/inner.c",
    "UPPER/Z9.c",
]

RULE_LISTS = [
    ["hide *"],
    ["- *.c"],
    ["- /src/"],
    ["+ /src/", "+ /src/*.c", "- *"],
    ["- src/deep/"],
    ["- deep"],
    ["+ */", "+ *.h", "- *"],
    ["- **/x/**"],
    ["- src/**"],
    ["- /src/**"],
    ["+ **/", "+ *.cu", "- *"],
    ["- **.c"],
    ["- *.[ch]"],
    ["- *.[!c]"],
    ["- [x]"],
    ["- a]b/"],
    ["- \\[x]/"],
    ["- []]*"],
    ["- src/deep/***"],
    ["+ src/deep/***", "- /src/*", "+ /src/", "- *"],
    ["-! *.c"],
    ["-! */"],
    ["- ggml-cuda/*"],
    ["- **/ggml-cuda/*"],
    ["- src/*/k.cu"],
    ["H /CMakeLists.txt", "+ CMakeLists.txt", "- *"],
    [
        "include src/ggml-vulkan/",
        "include src/ggml-vulkan/vulkan-shaders",
        "include /src/",
        "include *.comp",
        "include *.cpp",
        "hide *",
    ],
    ["- [[:digit:]]*", "- *[[:upper:]]*"],
    ["- [[:upper:]][[:alnum:]]*"],
    ["- dir.c"],
    ["- dir.c/"],
    ["- *_bar.c"],
    ["exclude_foo_bar.c"],
    ["- ?.c"],
    ["- sp ace/"],
    ["- **/"],
    ["- src/**/c.c"],
    ["- src/**/*.c"],
    ["- /**/x"],
    ["- **/c.c"],
    ["- *.c", "clear", "- *.h"],
    ["- *.c", "!", "- *.h"],
    ["P *.c", "- *.h"],
    ["- co*on/"],
    ["- src/*"],
    ["- */deep/"],
    ["-,s *.c"],
    ["-,r *.c"],
    ["exclude,r *.c"],
    ["S *.c", "- *"],
    ["show *.c", "hide *"],
    ["+,s */", "+ *.h", "H *"],
    ["risk *.c", "- *.c"],
    ["- src/[a-c].*"],
    ["- src/[c-a].*"],
    ["- [unclosed"],
    ["- s*c/*g*-*/*.c*"],  # several wildcards: matched by the state walk, not a regex
    ["- **/g*-c*/**"],
    ["+ */", "+ *l*a*.*", "- *"],
    ["- *a*/**/?.c"],
]


def _rsync_copies(source: Path, rules: list[str], scratch: Path) -> set[str]:
    destination = scratch / "dst"
    shutil.rmtree(destination, ignore_errors=True)
    destination.mkdir()
    arguments = [a for rule in rules for a in ("-f", rule)]
    subprocess.run(["rsync", "-r", *arguments, f"{source}/", f"{destination}/"], check=True, capture_output=True)
    return {p.relative_to(destination).as_posix() for p in destination.rglob("*") if p.is_file()}


def _write_tree(source: Path) -> Path:
    """TREE's files under SOURCE, each holding its own path."""
    for path in TREE:
        (source / path).parent.mkdir(parents=True, exist_ok=True)
        (source / path).write_text(path)
    return source


@pytest.mark.skipif(not shutil.which("rsync"), reason="needs rsync")
def test_sends_exactly_what_rsync_copies(tmp_path: Path) -> None:
    source = _write_tree(tmp_path / "src")
    differing = []
    for rules in RULE_LISTS:
        rsync_filter = parse(rules, lambda path: pytest.fail(f"no merge file here: {path}"))
        ours = {path for path in TREE if rsync_filter.sends(path)}
        theirs = _rsync_copies(source, rules, tmp_path)
        if ours != theirs:
            differing.append((rules, sorted(theirs - ours), sorted(ours - theirs)))
    assert differing == []
    assert len({frozenset(_rsync_copies(source, r, tmp_path)) for r in RULE_LISTS}) > 25  # the lists differ


@pytest.mark.skipif(not shutil.which("rsync"), reason="needs rsync")
def test_a_merge_file_is_read_in_place_and_clear_drops_what_came_before(tmp_path: Path) -> None:
    source = _write_tree(tmp_path / "src")
    (tmp_path / "inner.filter").write_text("- *.h\n")
    (tmp_path / "outer.filter").write_text(
        "# a comment\n; another\n\n+ /src/\n+ /include/\r\nmerge inner.filter\n+ *.c\n+ *.h\n- *\n"
    )
    rules = ["include LICENSE", "merge outer.filter"]
    rsync_filter = load(tmp_path, rules)
    assert rsync_filter.files == ("outer.filter", "inner.filter")
    assert [r.where for r in rsync_filter.rules] == [
        "",
        "outer.filter:4",
        "outer.filter:5",
        "inner.filter:1",
        "outer.filter:7",
        "outer.filter:8",
        "outer.filter:9",
    ]
    theirs = subprocess.run(
        ["rsync", "-r", "-n", "--out-format=%n", *[a for r in rules for a in ("-f", r)], f"{source}/", "dst/"],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split("\n")
    assert {path for path in TREE if rsync_filter.sends(path)} == {p for p in theirs if p and not p.endswith("/")}
    assert sorted(p for p in TREE if rsync_filter.sends(p)) == ["LICENSE", "dir.c/inner.c", "foo_bar.c", "src/a.c"]


def test_a_pattern_of_many_wildcards_takes_no_longer_than_one_pass_over_the_path() -> None:
    """A filter file is the repository's, so untrusted: `**a**a**a**b` against a long path would
    backtrack for minutes in a regex; the state walk reads the path once."""
    rsync_filter = parse(["- **a**a**a**a**b", "- *a*a*a*a*a*a*b", "+ a/**/b*c*d"], str)
    start = time.monotonic()
    assert rsync_filter.first("a/" * 2000 + "a", False) is None
    assert rsync_filter.first("a" * 255, False) is None
    assert rsync_filter.first("a/" + "x/" * 2000 + "bccccd", False).pattern == "a/**/b*c*d"
    assert time.monotonic() - start < 2


def test_protect_is_the_receivers_first_match() -> None:
    rsync_filter = parse(["protect .rsync-filter", "P *.go", "include src/keep.go", "- *.txt", "hide *"], str)
    assert rsync_filter.protects(".rsync-filter") and rsync_filter.protects("src/x.go")
    assert rsync_filter.protects("notes.txt")  # an exclude applies to both sides
    assert not rsync_filter.protects("src/a.c")  # hide is the sender's only
    assert not rsync_filter.sends("src/x.go") and not rsync_filter.sends("src/a.c")


@pytest.mark.parametrize(
    ("rule", "said"),
    [
        ("dir-merge .rsync-filter", "dir-merge (per-directory filter files, `-F`) is not read by patchctl"),
        (": .rsync-filter", "dir-merge"),
        ("-C", "modifier 'C' is not read by patchctl"),
        ("+/ /abs", "modifier '/' is not read by patchctl"),
        ("merge,- list", "modifiers on a merge rule are not read by patchctl"),
        ("Hs *.o", "modifier 's' is invalid"),
        ("-q x", "modifier 'q' is invalid"),
        ("includes *.c", "unknown filter rule 'includes *.c'"),
        ("x *.c", "unknown filter rule"),
        ("- ", "no pattern"),
        ("exclude", "no pattern"),
        ("! x", "a clear rule has no pattern"),
        ("-sr x", "apply to neither side"),
    ],
)
def test_a_rule_patchctl_does_not_read_is_named(rule: str, said: str) -> None:
    with pytest.raises(FilterError) as caught:
        parse(["+ *.c", rule], str)
    assert said in str(caught.value) and caught.value.index == 1


def test_errors_in_a_merge_file_name_its_line_and_files_are_read_without_links(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("+ *.c\n\n- *\ndir-merge .x\n")
    with pytest.raises(FilterError, match=r"^f:4: rule 'dir-merge \.x': dir-merge"):
        load(tmp_path, ["merge f"])
    (tmp_path / "loop").write_text("merge loop\n")
    with pytest.raises(FilterError, match="nested more than 8 deep"):
        load(tmp_path, ["merge loop"])
    (tmp_path / "leaf").write_text("+ *.c\n")
    (tmp_path / "fan").write_text("merge leaf\n" * 40)  # each merge rule reads its file again
    with pytest.raises(FilterError, match=r"^fan:32: rule 'merge leaf': more than 32 merge files"):
        load(tmp_path, ["merge fan"])
    with pytest.raises(FilterError, match="the filter file missing does not exist"):
        load(tmp_path, [". missing"])
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.write_text("+ *.c\n")
    (tmp_path / "link").symlink_to(outside)
    with pytest.raises(FilterError, match="link is a symlink to"):
        load(tmp_path, ["merge link"])
    with pytest.raises(FilterError, match="'..'"):
        load(tmp_path, ["merge ../x"])
    with pytest.raises(FilterError, match="give a path relative to the repository's root"):
        load(tmp_path, [f"merge {outside}"])
