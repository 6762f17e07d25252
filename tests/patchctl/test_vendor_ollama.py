"""Issue 25's bar on a real vendoring project: ollama's llama.cpp vendoring at one commit
(b95693056, llama.cpp 17f7f4b), adopted with `init --from makefile-sync`, checked with `lint`,
`vendor --check` and `export --check`, then moved by `pin-sync` to the upstream commit the
project itself moved to next (49a9c9ba6, llama.cpp ec98e2002), resolving each conflict the way
the project did. How the upstream is rebuilt here, and what of the series is cut for that, is
in `vendoring_project`; the mirror exists only on development machines (CI skips this)."""

from __future__ import annotations

import filecmp
import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from patchctl import git
from patchctl.adopt import makefile_sync
from patchctl.loop.vendor import managed
from patchctl.matrix.sources import load_project
from patchctl.state import worktree
from patchctl.upstream.store import Store

from . import vendoring_project as vp
from .conftest import REAL_TIP, REAL_URL, ok, run_cli

COPIES = ("llama/llama.cpp", "ml/backend/ggml/ggml")
BEFORE, AFTER = "b95693056", "49a9c9ba6"  # two ollama commits: "llama.cpp bump (17f7f4)", "GGML update to ec98e2002"

pytestmark = pytest.mark.skipif(not vp.OLLAMA_MIRROR.is_dir(), reason=f"no mirror of ollama at {vp.OLLAMA_MIRROR}")


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not {".git", ".patchctl"} & set(p.relative_to(root).parts)
    }


@pytest.fixture(scope="module")
def ollama(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path | str]:
    """The two project checkouts (series cut to the vendored files) and the rebuilt upstream,
    whose master is the second pin, a child of the first."""
    base = tmp_path_factory.mktemp("ollama")
    upstream = base / "llama.cpp"
    pins = []
    for commit in (BEFORE, AFTER):
        project = vp.extract(commit, base / commit)
        layout = makefile_sync.detect_makefile_sync(project, "Makefile.sync", str(upstream), "0" * 40)
        cut = vp.cut_series(layout.vendor, project / layout.dir)
        assert cut == ["0001-ggml-backend-malloc-and-free-using-the-same-compiler.patch", "0004-solar-pro.patch"]
        git.commit_all(project, "series cut to the vendored files (see vendoring_project)")
        tree = vp.upstream_tree(project, layout.vendor, project / layout.dir, upstream)
        pins.append(vp.commit_tree(upstream, tree, f"llama.cpp as ollama {commit} vendors it", *pins[-1:]))
    return {"base": base, "upstream": upstream, "before": base / BEFORE, "after": base / AFTER, "pins": pins}


def test_init_lint_vendor_check_export_check_pass_and_an_edit_is_named(ollama, tmp_path: Path) -> None:
    root = tmp_path / "ollama"
    git.run(["clone", "-q", str(ollama["before"]), str(root)], tmp_path)
    out = ok(
        "-C", root, "init", "--from", "makefile-sync", "--upstream-url", ollama["upstream"], "--pin", ollama["pins"][0]
    )
    assert "found: 15 of 31 patch(es) without a subject or a description" in out
    assert "lint: no findings" in ok("-C", root, "lint")  # every one of the 31 patches applies strictly
    assert f"llama: 663 vendored file(s) from {ollama['pins'][0][:12]} + series: up to date" in ok(
        "-C", root, "vendor", "--check"
    )
    ok("-C", root, "export", "llama", "--check")

    edited = root / "ml/backend/ggml/ggml/src/ggml.c"
    edited.write_bytes(edited.read_bytes() + b"// a local edit\n")
    result = run_cli("-C", root, "vendor", "--check")
    assert result.exit_code == 1 and result.stdout.splitlines()[0] == (
        "ml/backend/ggml/ggml/src/ggml.c: differs from pin + series"
    ), result.output
    assert "1 differ" in result.stdout


def test_pin_sync_to_the_projects_next_pin_moves_pin_series_and_vendored_copy_together(ollama, tmp_path: Path) -> None:
    root = tmp_path / "ollama"
    git.run(["clone", "-q", str(ollama["before"]), str(root)], tmp_path)
    old, new = ollama["pins"]
    ok("-C", root, "init", "--from", "makefile-sync", "--upstream-url", ollama["upstream"], "--pin", old)
    git.commit_all(root, "adopt patchctl")
    before = snapshot(root)

    # Three patches conflict on the new upstream: each stop writes nothing; each conflict is
    # resolved with the files the project's own series gives at that patch on the new pin.
    stops = []
    result = run_cli("-C", root, "pin-sync", "--to", new)
    while result.exit_code == 1 and "stops at a conflict" in result.stderr:
        assert snapshot(root) == before
        state = json.loads(worktree.sync_state_file(root, "llama.cpp").read_text())
        stopped = Path(state["records"][-1]["patch"]).name
        stops.append(stopped)
        _resolve_as_the_project_did(root / ".patchctl/sync/llama.cpp/llama", ollama, new, stopped)
        result = run_cli("-C", root, "pin-sync", "--continue")
        assert len(stops) < 10
    assert result.exit_code == 0, result.output
    assert stops == [
        "0004-solar-pro.patch",
        "0014-graph-memory-reporting-on-failure.patch",
        "0020-ggml-No-alloc-mode.patch",
    ]

    assert yaml.safe_load((root / "matrix.yaml").read_text())["upstreams"]["llama.cpp"]["pin"] == new
    assert f"672 vendored file(s) from {new[:12]} + series: up to date" in ok("-C", root, "vendor", "--check")
    ok("-C", root, "export", "llama", "--check")
    changed = {path for path, data in snapshot(root).items() if before.get(path) != data}
    assert {"matrix.yaml", "llama/patches/0004-solar-pro.patch"} <= changed
    assert any(p.startswith("llama/llama.cpp/") for p in changed) and any(p.startswith("ml/backend/") for p in changed)

    # The vendored copy is the one the project itself committed at its next pin, file for file,
    # on every path the copy manages (the project also widened its rsync filter then: tools/mtmd/models).
    series = load_project(root / "matrix.yaml").series["llama"]
    for copy in series.vendor:
        ours = {p for p in _files(root / copy.dest) if managed(copy, p)}
        theirs = {p for p in _files(ollama["after"] / copy.dest) if managed(copy, p)}
        assert ours == theirs, copy.dest
        _, mismatch, errors = filecmp.cmpfiles(root / copy.dest, ollama["after"] / copy.dest, sorted(ours), False)
        assert mismatch == [] and errors == [], copy.dest


def _files(directory: Path) -> list[str]:
    return [p.relative_to(directory).as_posix() for p in directory.rglob("*") if p.is_file()]


def _resolve_as_the_project_did(tree: Path, ollama: dict, new: str, stopped: str) -> None:
    """Each unmerged file as the project's next series has it after patch STOPPED on the new pin."""
    reference = Path(ollama["base"]) / f"reference-{stopped}"
    git.run(["clone", "-q", "--no-checkout", str(ollama["upstream"]), str(reference)], ollama["base"])
    git.run(["checkout", "-q", new], reference)
    for patch in sorted((Path(ollama["after"]) / "llama/patches").glob("*.patch")):
        git.run(["apply", "--index", str(patch)], reference)
        if patch.name == stopped:
            break
    for path in sorted(set(git.run(["diff", "--name-only", "--diff-filter=U"], tree).stdout.split())):
        (tree / path).write_bytes((reference / path).read_bytes())
        git.run(["add", path], tree)


@pytest.mark.realupstream
@pytest.mark.skipif(not (shutil.which("rsync") and shutil.which("make")), reason="needs rsync and make")
def test_ollamas_own_makefile_and_filters_on_real_llama_cpp_copy_what_rsync_copies(tmp_path: Path) -> None:
    """Ollama's Makefile.sync and both .rsync-filter files, as the project has them, on llama.cpp
    as it really is (llama-cpp-python 0.3.33's vendored tree: a root LICENSE, none in ggml/):
    make with the real rsync, and `init --from makefile-sync` + `patchctl vendor`, make the same
    two copies, file for file; `vendor --check` passes on what rsync made."""
    upstream = Store().mirror(REAL_URL).path
    project = tmp_path / "ollama"
    files = ["Makefile.sync", "llama/patches/.gitignore", *(f"{c}/.rsync-filter" for c in COPIES)]
    archive = subprocess.run(
        ["git", "-C", str(vp.OLLAMA_MIRROR), "archive", BEFORE, *files], capture_output=True, check=True
    ).stdout
    project.mkdir()
    subprocess.run(["tar", "-x", "-C", str(project)], input=archive, check=True)
    git.init_repo(project)
    git.commit_all(project, "ollama's vendoring files, no patch")
    by_rsync = tmp_path / "by-rsync"
    git.run(["clone", "-q", str(project), str(by_rsync)], tmp_path)
    git.run(["clone", "-q", str(upstream), "llama/vendor"], by_rsync)
    git.run(["checkout", "-q", REAL_TIP], by_rsync / "llama/vendor")
    subprocess.run(["make", "-s", "-f", "Makefile.sync", *COPIES], cwd=by_rsync, check=True, capture_output=True)
    assert not git.run(["cat-file", "-e", f"{REAL_TIP}:ggml/LICENSE"], upstream, check=False).ok

    ok("-C", project, "init", "--from", "makefile-sync", "--upstream-url", REAL_URL, "--pin", REAL_TIP)
    vendor = yaml.safe_load((project / "matrix.yaml").read_text())["series"]["llama"]["vendor"]
    assert vendor[1]["files"] == [{"from": "LICENSE", "to": "ml/backend/ggml/ggml/LICENSE"}]
    written = ok("-C", project, "vendor")
    ours, theirs = snapshot(project), snapshot(by_rsync)
    copied = {p for p in theirs if p.startswith(COPIES)}
    assert {p: ours[p] for p in ours if p.startswith(COPIES)} == {p: theirs[p] for p in copied}
    assert f"llama: {len(copied) - 2} vendored file(s) from {REAL_TIP[:12]}" in written  # less the two filters

    shutil.copyfile(project / "matrix.yaml", by_rsync / "matrix.yaml")
    assert "up to date" in ok("-C", by_rsync, "vendor", "--check")
