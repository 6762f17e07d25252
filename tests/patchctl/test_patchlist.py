"""The downstream's own patch list, read and edited in place (issue 42, item 1): a conda-forge
recipe's `patches:` (a YAML list inside a Jinja template), a quilt `series` file that is not
in the series directory, `list:` validation, lint's PC015, and a list edit made on top of a
pending edit of the same file (pin-sync moving a recipe's version and its patches together).
Electron's `.patches` is exercised on real directories in test_adopt_electron.py."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import jinja2
import pytest
import yaml

from patchctl import git
from patchctl.project.config import load
from patchctl.series import patchlist
from patchctl.series.exporter import ListUpdate, with_list_updates
from patchctl.state.journal import FileChange

from .conftest import Repo, make_patch, ok, run_cli

RECIPE = """\
{% set version = "1.2.3" %}

package:
  name: up
  version: {{ version }}

source:
  url: https://example.org/up-{{ version }}.tar.gz
  sha256: 0000000000000000000000000000000000000000000000000000000000000000
  patches:
    # the feedstock's own comment stays
    - patches/0001-tune-main.patch
    - patches/0002-windows-paths.patch  # [win]
    {% if unix %}
    - patches/0003-unix-only.patch
    {% endif %}
    - patches/0004-last.patch

build:
  number: 0
"""


def rendered_patches(text: str, **selectors: bool) -> list[str]:
    """What conda-build reads: the Jinja template rendered, `# [win]` selectors applied, the YAML's list."""
    lines = []
    for line in text.splitlines():
        if "# [win]" in line and not selectors.get("win"):
            continue
        lines.append(line)
    data = yaml.safe_load(jinja2.Template("\n".join(lines)).render(**selectors))
    return data["source"]["patches"]


@pytest.fixture
def feedstock(tmp_path: Path, upstream: Repo) -> tuple[Path, Repo]:
    """A conda-forge-like feedstock: recipe/meta.yaml lists recipe/patches/*.patch."""
    root = tmp_path / "feedstock"
    patches = root / "recipe" / "patches"
    patches.mkdir(parents=True)
    base = upstream.head
    texts = {
        "0001-tune-main.patch": make_patch(upstream, base, {"src/main.c": "tuned\n"}, "Tune main"),
        "0002-windows-paths.patch": make_patch(upstream, base, {"src/util.c": "windows\n"}, "Windows paths"),
        "0003-unix-only.patch": make_patch(upstream, base, {"include/util.h": "unix\n"}, "Unix only"),
        "0004-last.patch": make_patch(upstream, base, {"CMakeLists.txt": "project(up2)\n"}, "Last"),
    }
    for name, text in texts.items():
        (patches / name).write_text(text)
    (root / "recipe" / "meta.yaml").write_text(RECIPE)
    (root / "matrix.yaml").write_text(
        textwrap.dedent(
            f"""\
            version: 1
            upstreams:
              up: {{url: {upstream.path}, branch: main, pin: {base}}}
            series:
              up:
                upstream: up
                dir: recipe/patches
                list: {{kind: conda-forge, path: recipe/meta.yaml}}
                exclude: []
            """
        )
    )
    git.init_repo(root)
    git.commit_all(root, "feedstock")
    return root, upstream


def test_a_recipe_list_is_read_in_order_and_a_no_op_export_changes_no_byte(feedstock) -> None:
    root, _ = feedstock
    series = load(root / "matrix.yaml").series["up"]
    assert patchlist.names(series) == [
        "0001-tune-main.patch",
        "0002-windows-paths.patch",
        "0003-unix-only.patch",
        "0004-last.patch",
    ]
    ok("-C", root, "apply")
    payload = json.loads(ok("-C", root, "export", "up", "--json"))
    assert payload["written"] == [] and len(payload["unchanged"]) == 4
    assert (root / "recipe" / "meta.yaml").read_text() == RECIPE
    assert "lint: no findings" in ok("-C", root, "lint")


def test_export_and_pin_sync_edit_the_recipes_lines_and_nothing_else(feedstock) -> None:
    root, upstream = feedstock
    ok("-C", root, "apply")
    Repo(root / ".patchctl" / "trees" / "up").commit({"src/new.c": "new\n"}, "Add the new file\n\nIt is needed.")
    out = ok("-C", root, "export", "up")
    assert "wrote   0005-Add-the-new-file.patch" in out and "wrote   recipe/meta.yaml" in out
    text = (root / "recipe" / "meta.yaml").read_text()
    assert text == RECIPE.replace(
        "    - patches/0004-last.patch\n", "    - patches/0004-last.patch\n    - patches/0005-Add-the-new-file.patch\n"
    )
    names = sorted(p.name for p in (root / "recipe" / "patches").iterdir())
    assert rendered_patches(text, unix=True, win=True) == [f"patches/{n}" for n in names]
    git.commit_all(root, "a new patch")

    # Upstream takes 0003's change: pin-sync drops it, and its line (and the guard it leaves
    # empty) goes; the selector of 0002 and the comment stay.
    upstream.commit({"include/util.h": "unix\n"}, "upstream takes the unix change")
    result = run_cli("-C", root, "pin-sync", "--to", upstream.head)
    assert result.exit_code == 0, result.output
    after = (root / "recipe" / "meta.yaml").read_text()
    assert after == text.replace("    {% if unix %}\n    - patches/0003-unix-only.patch\n    {% endif %}\n", "")
    names = sorted(p.name for p in (root / "recipe" / "patches").iterdir())
    assert "0003-unix-only.patch" not in names
    assert rendered_patches(after, unix=True, win=True) == [f"patches/{n}" for n in names]
    assert "lint: no findings" in ok("-C", root, "lint", "--no-apply")


def test_a_recipe_edit_keeps_selectors_with_their_patch_and_new_patches_out_of_guards(feedstock) -> None:
    root, _ = feedstock
    series = load(root / "matrix.yaml").series["up"]
    names = ["0000-first.patch", "0001-tune-main.patch", "0002-windows-paths.patch", "0003-unix-only.patch"]
    names += ["0003a-after-unix.patch", "0004-last.patch"]
    text = patchlist.render(series, names).decode()
    assert text == RECIPE.replace(
        "    - patches/0001-tune-main.patch\n", "    - patches/0000-first.patch\n    - patches/0001-tune-main.patch\n"
    ).replace("    {% endif %}\n", "    {% endif %}\n    - patches/0003a-after-unix.patch\n")
    renamed = patchlist.render(
        series,
        ["0001-tune-main.patch", "0002-win.patch", "0003-unix-only.patch", "0004-last.patch"],
        {"0002-windows-paths.patch": "0002-win.patch"},
    ).decode()
    assert "    - patches/0002-win.patch  # [win]\n" in renamed
    assert rendered_patches(renamed, unix=False, win=False) == [
        "patches/0001-tune-main.patch",
        "patches/0004-last.patch",
    ]


def test_what_a_recipe_list_cannot_say_is_one_line_naming_file_and_line(feedstock) -> None:
    root, _ = feedstock
    recipe = root / "recipe" / "meta.yaml"
    recipe.write_text(RECIPE.replace("    - patches/0004-last.patch", "    - patches/{{ last }}.patch"))
    result = run_cli("-C", root, "apply")
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "recipe/meta.yaml:17: patch entry '- patches/{{ last }}.patch' is not a plain file name" in result.stderr
    recipe.write_text(RECIPE.replace("  patches:\n", "  patches: [patches/0001-tune-main.patch]\n  other:\n"))
    result = run_cli("-C", root, "lint", "--no-apply")
    assert result.exit_code == 2 and "recipe/meta.yaml:10: `patches: [patches/0001-tune-main.patch]`" in result.stderr


def test_lint_reports_a_list_that_names_a_missing_file_or_misses_a_present_one(feedstock) -> None:
    root, _ = feedstock
    (root / "recipe" / "patches" / "0004-last.patch").rename(root / "recipe" / "patches" / "0009-stray.patch")
    result = run_cli("-C", root, "lint", "--no-apply", "--json")
    assert result.exit_code == 1, result.output
    found = {(f["rule"], f["file"], f["line"], f["message"]) for f in json.loads(result.stdout)["findings"]}
    assert (
        "PC015",
        "recipe/meta.yaml",
        17,
        "lists 'patches/0004-last.patch', which is not a file in recipe/patches",
    ) in found
    assert ("PC015", "recipe/meta.yaml", 1, "does not list 0009-stray.patch, a patch file in recipe/patches") in found
    applied = run_cli("-C", root, "apply")
    assert applied.exit_code == 2 and "recipe/meta.yaml:17: 'patches/0004-last.patch' is not a file" in applied.stderr


def test_a_quilt_series_file_elsewhere_keeps_its_other_patches_and_comments(tmp_path: Path, upstream: Repo) -> None:
    """Debian's layout: debian/patches/series lists quilt patches of its own and, in a
    subdirectory, the git patches the series manages."""
    root = tmp_path / "pkg"
    git_dir = root / "debian" / "patches" / "git"
    git_dir.mkdir(parents=True)
    base = upstream.head
    (git_dir / "0001-One.patch").write_text(make_patch(upstream, base, {"src/main.c": "one\n"}, "One"))
    (git_dir / "0002-Two.patch").write_text(make_patch(upstream, base, {"src/util.c": "two\n"}, "Two"))
    series_text = "# Debian's own\nfix-build.diff -p1\ngit/0001-One.patch\ngit/0002-Two.patch\n\n# last\nlocal.diff\n"
    (root / "debian" / "patches" / "series").write_text(series_text)
    (root / "matrix.yaml").write_text(
        f"version: 1\nupstreams:\n  up: {{url: {upstream.path}, branch: main, pin: {base}}}\n"
        "series:\n  up:\n    upstream: up\n    dir: debian/patches/git\n"
        "    list: {kind: quilt, path: debian/patches/series}\n    exclude: []\n"
    )
    git.init_repo(root)
    git.commit_all(root, "pkg")
    ok("-C", root, "apply")
    tree = Repo(root / ".patchctl" / "trees" / "up")
    tree.commit({"include/util.h": "three\n"}, "Three")
    ok("-C", root, "export", "up")
    assert (root / "debian" / "patches" / "series").read_text() == series_text.replace(
        "git/0002-Two.patch\n", "git/0002-Two.patch\ngit/0003-Three.patch\n"
    )


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("list: fancy", "unknown list kind 'fancy' (choose: quilt, electron, conda-forge, none)"),
        ("list: conda-forge", "list kind conda-forge needs a path"),
        ("list: {kind: quilt, path: ../series}", "path must be relative to the config's directory"),
        ("list: {kind: none, path: x}", "list kind none reads no file"),
        ("form: tidy", "unknown form 'tidy'"),
        ("form: {format_patch: [--output-directory=/tmp]}", "format-patch option '--output-directory=/tmp' is not"),
        ("form: {format_patch: [--no-stat], attributes: ['*.c diff=mytool']}", "one of git's built-in drivers"),
        ("form: {format_patch: [--abbrev=3]}", "--abbrev: value '3' is not accepted"),
    ],
)
def test_bad_list_and_form_keys_are_config_errors_with_their_line(
    tmp_path: Path, upstream: Repo, value: str, message: str
) -> None:
    root = tmp_path / "p"
    (root / "patches" / "up").mkdir(parents=True)
    (root / "matrix.yaml").write_text(
        f"version: 1\nupstreams:\n  up: {{url: {upstream.path}, branch: main, pin: {upstream.head}}}\n"
        f"series:\n  up:\n    upstream: up\n    allow_empty: true\n    {value}\n"
    )
    result = run_cli("-C", root, "lint", "--no-apply")
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.output
    assert f"matrix.yaml:8: series.up.{value.split(':')[0]}" in result.stderr and message in result.stderr


def test_a_list_edit_lands_on_top_of_a_pending_edit_of_the_same_file(feedstock) -> None:
    """pin-sync writes a recipe's new version (the pin's edit) and its patches (the list's) in
    one journal: the list is edited on the bytes the pin edit leaves, never on the old file."""
    root, _ = feedstock
    series = load(root / "matrix.yaml").series["up"]
    recipe = root / "recipe" / "meta.yaml"
    moved = RECIPE.replace('version = "1.2.3"', 'version = "1.3.0"').encode()
    update = ListUpdate(recipe, ("0001-tune-main.patch", "0004-last.patch"), ())
    changes = with_list_updates([FileChange(recipe, moved)], [(series, update)])
    assert len(changes) == 1
    text = changes[0].new.decode()
    assert '{% set version = "1.3.0" %}' in text
    assert rendered_patches(text, unix=True, win=True) == ["patches/0001-tune-main.patch", "patches/0004-last.patch"]


def test_a_list_file_that_is_a_link_is_refused_in_one_line(tmp_path: Path, upstream: Repo) -> None:
    root = tmp_path / "p"
    directory = root / "patches" / "up"
    directory.mkdir(parents=True)
    (directory / "0001-One.patch").write_text(make_patch(upstream, upstream.head, {"src/main.c": "one\n"}, "One"))
    (directory / ".patches").symlink_to("/etc/passwd")
    (root / "matrix.yaml").write_text(
        f"version: 1\nupstreams:\n  up: {{url: {upstream.path}, branch: main, pin: {upstream.head}}}\n"
        "series:\n  up:\n    upstream: up\n    naming: electron\n"
    )
    for command in (["apply"], ["lint", "--no-apply"], ["export", "up", "--check"]):
        result = run_cli("-C", root, *command)
        assert result.exit_code == 2 and result.stderr.count("\n") == 1, (command, result.output)
        assert "patches/up/.patches" in result.stderr and "Traceback" not in result.output


def test_a_quilt_series_edit_keeps_comments_options_and_a_missing_final_newline(tmp_path: Path, upstream: Repo) -> None:
    root = tmp_path / "q"
    directory = root / "patches"
    directory.mkdir(parents=True)
    for name in ("a.patch", "b.diff", "c.patch"):
        (directory / name).write_text("")
    (directory / "series").write_text("# order matters\na.patch -p1\n\nb.diff # the build fix\nc.patch")
    (root / "matrix.yaml").write_text(
        f"version: 1\nupstreams:\n  up: {{url: {upstream.path}, branch: main, pin: {upstream.head}}}\n"
        "series:\n  up:\n    upstream: up\n    dir: patches\n    naming: quilt\n"
    )
    series = load(root / "matrix.yaml").series["up"]
    assert patchlist.names(series) == ["a.patch", "b.diff", "c.patch"]
    text = patchlist.render(series, ["a2.patch", "new.patch", "c.patch"], {"a.patch": "a2.patch"}).decode()
    assert text == "# order matters\na2.patch -p1\nnew.patch\n\nc.patch"
    # Reordered: each patch's whole line moves (its options and comment with it), the rest stays.
    reordered = patchlist.render(series, ["c.patch", "a.patch", "b.diff"]).decode()
    assert reordered == "# order matters\nc.patch\n\na.patch -p1\nb.diff # the build fix"


def test_init_takes_a_recipes_patches_list_as_the_one_list(feedstock) -> None:
    root, upstream = feedstock
    (root / "matrix.yaml").unlink()
    git.commit_all(root, "no matrix.yaml yet")
    out = ok(
        "-C",
        root,
        "init",
        "--from",
        "git-dir",
        "recipe/patches",
        "--upstream-url",
        upstream.path,
        "--pin",
        upstream.head,
    )
    assert "found: recipe/patches belongs to the conda-forge recipe recipe/meta.yaml: read as its layout" in out
    assert "found: order: recipe/meta.yaml (4 patch(es), kept as the one list)" in out
    assert "recipe/meta.yaml:8: source url https://example.org/up-1.2.3.tar.gz is not a GitHub tarball: no " in out
    config = yaml.safe_load((root / "matrix.yaml").read_text())
    assert config["upstreams"]["up"]["manifests"] == [{"path": "recipe/meta.yaml", "format": "conda-forge"}]
    series = config["series"]["up"]  # named after the recipe's package
    assert series["list"] == {"kind": "conda-forge", "path": "recipe/meta.yaml"}
    assert "recipe/meta\\.yaml" in (root / ".pre-commit-config.yaml").read_text()  # an edit of the list runs the hooks
    assert (root / "recipe" / "meta.yaml").read_text() == RECIPE and not (
        root / "recipe" / "patches" / "series"
    ).exists()
    git.commit_all(root, "adopt")
    ok("-C", root, "export", "--check", "up")
