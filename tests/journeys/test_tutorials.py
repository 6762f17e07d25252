"""The two tutorials, in the documented order, exactly as the manual prints them.

docs/tutorials/edit-loop.md, then docs/tutorials/bump.md: every `$ ` line of their console
blocks is run as printed, a block at a time in one bash (so `cd` and `cd -` pair up), in a
downstream repository with the pre-commit hooks `patchctl init` writes installed. The
downstream stands in for this repository: an upstream named `llama.cpp` with
`src/llama-kv-cache.cpp`, a series `llama.cpp` of three patches, quick gates and a build step.
Between the tutorials the upstream moves on, as it does; the commit `pin-sync` prints is
then made as printed, and the hooks pass on it: no detour (issue 45, item 4).

The blocks run are those of the numbered sections, bar the ones only a stopped sync needs
(`When it stops`, and the `--wait` one inside it): those are listed below, so a command added
to a tutorial is either run here or listed as conditional on purpose.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from patchctl import git
from patchctl.adopt.layout import Layout
from patchctl.adopt.plan import pre_commit_snippet
from tests.patchctl.conftest import Project, Repo, make_patch

from .shell import User, hook_results, passed_hooks

pytestmark = pytest.mark.journey

DOCS = Path(__file__).resolve().parents[2] / "docs" / "tutorials"
HOOKS = ["patchctl lint", "patchctl export --check"]
# Only a stopped sync runs these (docs/tutorials/bump.md, "4. When it stops").
CONDITIONAL = {
    "cd .patchctl/sync/llama.cpp/llama.cpp",
    "$EDITOR src/llama-kv-cache.cpp && git add src/llama-kv-cache.cpp",
    "cd - && patchctl pin-sync --continue",
    "patchctl pin-sync llama.cpp --latest --wait",
}
# What the user's $EDITOR does to the file the tutorial opens: one line tuned.
EDITOR = """#!/bin/sh
sed -i 's/^slot finder 12$/slot finder 12, tuned/' "$1"
"""


def console_blocks(page: str) -> list[list[str]]:
    """The commands of each ```console block of docs/tutorials/PAGE, as printed (no `$ `)."""
    text = (DOCS / page).read_text()
    blocks = re.findall(r"^```console\n(.*?)^```", text, flags=re.S | re.M)
    return [[line[2:] for line in block.splitlines() if line.startswith("$ ")] for block in blocks]


def kv_cache(changes: dict[int, str] | None = None) -> str:
    lines = [f"slot finder {i}" for i in range(1, 31)]
    for number, line in (changes or {}).items():
        lines[number - 1] = line
    return "".join(f"{line}\n" for line in lines)


def llama_like(base: Path) -> tuple[Project, Repo]:
    """An upstream named llama.cpp and a downstream carrying a three-patch series on it, as the
    user has it after `patchctl init`: committed, `.patchctl/` ignored, the hooks' config."""
    upstream = Repo(base / "llama.cpp")
    upstream.commit(
        {
            "src/llama-kv-cache.cpp": kv_cache(),
            "src/llama.cpp": "".join(f"llama {i}\n" for i in range(1, 31)),
            "include/llama.h": "".join(f"decl {i}\n" for i in range(1, 11)),
            "README.md": "# llama.cpp\n",
        },
        "initial",
    )
    pin = upstream.head
    patches = {
        "0001-paged-block-manager.patch": make_patch(
            upstream,
            pin,
            {"src/llama-paged-blocks.cpp": "// paged blocks\nint paged_blocks() { return 16; }\n"},
            "Paged block manager",
            "The KV cache is handed out in blocks of 16 cells.",
        ),
        "0002-kv-cache-hook.patch": make_patch(
            upstream,
            pin,
            {"src/llama-kv-cache.cpp": kv_cache({3: "slot finder 3, paged when asked"})},
            "KV cache hook",
            "The slot finder asks the paged block manager first when LLAMA_KV_PAGED is set.",
        ),
        "0003-paged-decode-driver.patch": make_patch(
            upstream,
            pin,
            {"include/llama.h": "".join(f"decl {i}\n" for i in range(1, 11)) + "int llama_paged_decode(void);\n"},
            "Paged decode driver",
            "A driver that decodes with the paged placement on and off.",
        ),
    }
    project = Project(base / "project", upstream, pin, series="llama.cpp")
    for name, text in patches.items():
        project.add_patch(name, text)
    (project.path / "matrix.yaml").write_text(
        textwrap.dedent(
            f"""\
            version: 1
            upstreams:
              llama.cpp:
                url: {upstream.path}
                branch: main
                pin: {pin}
            series:
              llama.cpp:
                upstream: llama.cpp
                dir: patches/llama.cpp
                exclude: ['*.md', 'docs/**']
                naming: strict
                build:
                  - name: libllama
                    runner: local
                    command: test -f src/llama-paged-blocks.cpp && grep -q paged src/llama-kv-cache.cpp
                    timeout: 60
                gates:
                  - name: kv-cache-hook
                    command: grep -q 'slot finder 3, paged when asked' src/llama-kv-cache.cpp
                    timeout: 60
                  - name: model-gate
                    command: grep -q llama_paged_decode include/llama.h
                    timeout: 60
                    slow: true
            """
        )
    )
    (project.path / ".gitignore").write_text(".patchctl/\n")
    layout = Layout("llama.cpp", str(upstream.path), pin, "llama.cpp", "patches/llama.cpp", "format-patch")
    (project.path / ".pre-commit-config.yaml").write_text(pre_commit_snippet(layout))
    git.commit_all(project.path, "Carry the llama.cpp series with patchctl")
    return project, upstream


def run_block(user: User, commands: list[str]):
    """One console block, its commands as printed, in one bash that stops at the first failure."""
    return user.run("set -e\n" + "\n".join(commands))


def test_the_edit_loop_then_the_bump_exactly_as_printed(tmp_path: Path, user_in) -> None:
    project, upstream = llama_like(tmp_path)
    user: User = user_in(project.path)
    editor = user.home / "bin" / "tune"
    editor.write_text(EDITOR)
    editor.chmod(0o755)
    user.env["EDITOR"] = str(editor)
    user.ok("pre-commit install")

    edit_loop = console_blocks("edit-loop.md")
    ran = []
    for block in edit_loop:
        seen = run_block(user, block)
        assert seen.exit_code == 0, f"docs/tutorials/edit-loop.md, as printed:\n{seen}"
        assert "Traceback" not in seen.output
        ran += block
        if block[-1].startswith("git add patches/llama.cpp && git commit"):
            assert passed_hooks(seen) == HOOKS, str(seen)  # the hooks ran on the tutorial's commit, and passed
    tree = project.path / ".patchctl/trees/llama.cpp"
    assert "slot finder 12, tuned" in (tree / "src/llama-kv-cache.cpp").read_text()
    assert project.patch_names() == [
        "0001-paged-block-manager.patch",
        "0002-kv-cache-hook.patch",
        "0003-paged-decode-driver.patch",
        "0004-tune-the-slot-finder.patch",
    ]
    assert user.ok("git status --porcelain").stdout == ""

    # Upstream moves on: unrelated work, and a rewrite near the tuned line (a 3-way merge takes it).
    tip = upstream.commit(
        {"src/llama.cpp": "".join(f"llama {i}\n" for i in range(1, 31)).replace("llama 30\n", "llama 30, faster\n")},
        "Upstream work",
    )
    tip = upstream.commit({"src/llama-kv-cache.cpp": kv_cache({10: "slot finder 10, upstream"})}, "Upstream rewrite")

    bump = console_blocks("bump.md")
    for block in bump:
        if CONDITIONAL.issuperset(block):
            continue
        seen = run_block(user, block)
        # The canary is red (exit 1, as the page says) when a patch no longer applies strictly.
        red_canary_expected = block == ["patchctl canary llama.cpp"]
        assert seen.exit_code == (1 if red_canary_expected else 0), f"docs/tutorials/bump.md, as printed:\n{seen}"
        assert "Traceback" not in seen.output
        ran += block
        if block == ["patchctl pin-sync llama.cpp --latest --report sync.md"]:
            synced = seen
    printed = {c for block in edit_loop + bump for c in block}
    assert printed - set(ran) == CONDITIONAL, "a tutorial command that is neither run here nor conditional"
    assert tip in (project.path / "matrix.yaml").read_text()

    # "review that, then commit": the commit pin-sync printed, as printed; the hooks pass on it.
    committed = user.follow(synced, "git commit")
    assert hook_results(committed) == dict.fromkeys(HOOKS, "Passed"), str(committed)
    assert user.ok("git status --porcelain").stdout == "?? sync.md\n"
    # The tree the edit loop left held no work of the user's that the new series lacks: it is
    # re-applied at the new pin by itself, and the loop goes on from there without --force.
    assert user.ok("patchctl export --check llama.cpp").stdout == "llama.cpp: up to date (4 patches)\n"
    assert user.ok("patchctl apply llama.cpp").stdout.startswith(f"llama.cpp: already applied at {tip[:12]}")
    kv = (tree / "src/llama-kv-cache.cpp").read_text()
    assert "slot finder 10, upstream" in kv and "slot finder 12, tuned" in kv
    assert user.ok("patchctl gate llama.cpp").exit_code == 0


def test_the_commits_in_export_help_pass_lint(tmp_path: Path, user_in) -> None:
    """`patchctl export --help` shows how to commit in the applied tree: that commit, run as
    printed, becomes a patch lint accepts (a subject and a description, PC008)."""
    import shlex

    project, _ = llama_like(tmp_path)
    user: User = user_in(project.path)
    examples = user.ok("patchctl export --help").stdout.split("Examples:", 1)[1].split("Options:", 1)[0]
    [commit] = [line.strip() for line in examples.splitlines() if "git commit" in line]
    [vendor] = [line.split("#")[0].strip() for line in examples.splitlines() if "--from-vendor" in line]
    user.ok("patchctl apply llama.cpp")
    tree = project.path / ".patchctl/trees/llama.cpp"
    user.edit(tree / "src/llama-kv-cache.cpp", "slot finder 20\n", "slot finder 20, fixed\n")
    user.ok(commit)
    user.ok("patchctl export llama.cpp")
    assert user.ok("patchctl lint llama.cpp").stdout == "lint: no findings\n"
    words = shlex.split(vendor)
    messages = [words[i + 1] for i, word in enumerate(words) if word == "-m"]
    assert len(messages) >= 2, f"the --from-vendor example's message has no description: {vendor}"
