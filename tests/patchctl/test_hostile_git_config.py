"""Hostile git config in every repository input can name (issue 44, item 4): the user's
repository, a local upstream path, the repository a vendoring Makefile names (`init --from
makefile-sync`), and a git directory committed as plain files inside the work tree (a vendored
copy, a directory given to `export --from`). Each holds every setting that makes git run a
program (hooks, fsmonitor, pagers, editors, ssh and proxy commands, credential and ask-pass
helpers, signing, diff, merge and filter drivers named by a committed `.gitattributes`,
aliases, a promisor remote whose upload-pack is a shell command), each a payload that leaves a
marker file naming it. Every command runs for real (its outcome is checked) and no marker may
appear. `test_the_payloads_are_live` shows that plain git does run them."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from patchctl import git

from .conftest import Project, Repo, make_patch, run_cli
from .fixtures_sync import main_c
from .hostile_git import GITATTRIBUTES, Payloads, embedded_git_dir, plain_git, plant
from .matrix_fixtures import make_project


@pytest.fixture
def payloads(tmp_path: Path) -> Payloads:
    return Payloads(tmp_path / "payloads")


def test_the_payloads_are_live(tmp_path: Path, payloads: Payloads) -> None:
    """The planted config is real: git run plainly in such a repository runs its programs."""
    repo = Repo(tmp_path / "repo")
    repo.commit({".gitattributes": GITATTRIBUTES, "a.c": "int a;\n"}, "initial")
    plant(repo.path / ".git", payloads)
    (repo.path / "a.c").write_text("int a2;\n")
    plain_git("status", cwd=repo.path)
    plain_git("add", "a.c", cwd=repo.path)
    plain_git("commit", "-q", "-m", "x", cwd=repo.path)
    plain_git("log", "-p", "-1", cwd=repo.path)
    ran = payloads.fired()
    for expected in ("fsmonitor", "filter-process", "textconv", "hook-pre-commit", "gpg"):
        assert expected in ran, ran


def test_git_run_runs_nothing_a_repository_config_sets(tmp_path: Path, payloads: Payloads) -> None:
    """Below every command: `git.run` itself, in such a repository, for what git would otherwise
    run there: a status and a commit (fsmonitor, filters, hooks, signing), a log and a diff with
    patches (pager, textconv, external diff), an object it lacks (a lazy fetch from its
    promisor: upload-pack), and a fetch over `ext::` that its config allows (protocol.ext.allow=always)."""
    repo = Repo(tmp_path / "repo")
    repo.commit({".gitattributes": GITATTRIBUTES, "a.c": "int a;\n", "gone.c": "int gone;\n"}, "initial")
    gone = repo.git("rev-parse", "HEAD:gone.c").strip()
    (repo.path / ".git/objects" / gone[:2] / gone[2:]).unlink()
    plant(repo.path / ".git", payloads)
    ext = f"ext::sh -c {payloads.program('ext-transport')}% >&2"
    subprocess.run(
        ["git", "config", "--file", str(repo.path / ".git/config"), "protocol.ext.allow", "always"], check=True
    )
    (repo.path / "a.c").write_text("int a2;\n")
    for args in (
        ["status"],
        ["add", "a.c"],
        ["commit", "-q", "-m", "x"],
        ["log", "-p", "-2"],
        ["show", "HEAD"],
        ["diff", "HEAD~1"],
        ["cat-file", "-p", gone],
        ["ls-remote", ext],
    ):
        git.run(args, repo.path, check=False)
        assert payloads.fired() == [], (args, payloads.fired())
    plain_git("cat-file", "-p", gone, cwd=repo.path)
    plain_git("ls-remote", ext, cwd=repo.path)
    assert payloads.fired() == ["ext-transport", "uploadpack"]  # live: plain git runs them


def test_nothing_a_hostile_config_sets_runs_in_any_command(
    project: Project, upstream: Repo, payloads: Payloads, tmp_path: Path
) -> None:
    """The user's repository and its local upstream both hold the hostile config (the upstream's
    `.gitattributes` reaches every tree patchctl makes); every command does its work and runs none of it."""
    pin = upstream.commit({".gitattributes": GITATTRIBUTES}, "Attributes")
    project.write_config(pin)
    project.add_patch(
        "0001-tune-main.patch", make_patch(upstream, pin, {"src/main.c": main_c({20: "main 20 patched"})}, "Tune")
    )
    project.write({".gitattributes": GITATTRIBUTES, ".gitignore": ".patchctl/\n"})
    git.commit_all(project.path, "downstream")
    # Upstream moves near the patch: pin-sync and the canary merge it 3-way (merge=evil in the tree).
    upstream.commit({"src/main.c": main_c({18: "main 18 upstream"})}, "Upstream edits near line 20")
    for repository in (project.path, upstream.path):
        plant(repository / ".git", payloads)
    (project.path / "README.md").write_text("stat-dirty: a clean filter would be asked\n")

    def ran(*args: str | Path, codes: tuple[int, ...] = (0,)) -> str:
        result = run_cli("-C", project.path, *args)
        assert result.exit_code in codes, result.output
        assert "Traceback" not in result.output
        assert payloads.fired() == [], (args, payloads.fired())
        return result.stdout

    ran("lint")
    ran("apply")
    tree = project.path / ".patchctl/trees/main"
    assert "main 20 patched" in (tree / "src/main.c").read_text()
    ran("export", "main", "--check")
    ran("export", "main")
    ran("status", "--no-trial", "--html", tmp_path / "status.html")
    ran("status")
    ran("canary", "--work-dir", tmp_path / "canary-work", "--json-file", tmp_path / "canary.json", codes=(0, 1))
    ran("pin-sync", "up", "--latest")
    assert "main 18 upstream" in (project.path / "patches/main/0001-tune-main.patch").read_text()
    assert upstream.head in (project.path / "matrix.yaml").read_text()
    ran("apply", "--force")
    assert payloads.fired() == []


def test_a_local_upstream_that_is_a_hostile_partial_clone_is_refused_in_one_line(
    project: Project, upstream: Repo, payloads: Payloads
) -> None:
    """A local upstream that declares itself a partial clone and lacks an object: fetching it
    would make its upload-pack fetch the object lazily from its promisor, whose upload-pack is
    a shell command. The fetch fails instead, in one line, and nothing runs."""
    project.add_patch(
        "0001-tune-main.patch", make_patch(upstream, upstream.head, {"src/main.c": main_c({20: "x"})}, "T")
    )
    missing = upstream.git("rev-parse", "HEAD:src/util.c").strip()
    (upstream.path / ".git/objects" / missing[:2] / missing[2:]).unlink()
    plant(upstream.path / ".git", payloads)
    for args in (("lint",), ("apply",), ("pin-sync", "up", "--latest"), ("status",)):
        result = run_cli("-C", project.path, *args)
        errors = [line for line in result.stderr.splitlines() if line.startswith("patchctl: error:")]
        assert result.exit_code == 3 and len(errors) == 1 and "cannot fetch" in errors[0], result.output
        assert payloads.fired() == [], (args, payloads.fired())


def test_matrix_changed_reads_a_hostile_repository_without_running_it(tmp_path: Path, payloads: Payloads) -> None:
    """`matrix changed` diffs the user's work tree against HEAD (fsmonitor, clean filters, a
    stat-dirty file) and against a base (textconv, external diff): none of it runs."""
    root = make_project(tmp_path)
    (root / "backend/go/whisper").mkdir(parents=True)
    (root / "backend/go/whisper/main.go").write_text("v1\n")
    (root / ".gitattributes").write_text(GITATTRIBUTES)
    git.init_repo(root)
    git.commit_all(root, "base")
    (root / "backend/go/whisper/main.go").write_text("v2\n")
    git.commit_all(root, "whisper")
    plant(root / ".git", payloads)
    (root / "backend/go/whisper/main.go").write_text("v3\n")  # stat-dirty, uncommitted
    for args in (("matrix", "changed", "--json"), ("matrix", "changed", "--json", "--base", "HEAD~1")):
        result = run_cli("-C", root, *args)
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["backends"] == ["whisper"], result.stdout
        assert payloads.fired() == [], (args, payloads.fired())


MAKEFILE_SYNC = """\
UPSTREAM=file://evil.git
WORKDIR=third_party/work
FETCH_HEAD={pin}
PATCHES=$(wildcard vendor-patches/*.patch)

vendored/lib: third_party/work
\trsync -a --delete $(addprefix $<,/COPYING /lib/) $@
"""


def test_init_never_runs_git_in_the_repository_a_makefile_names(
    tmp_path: Path, upstream: Repo, payloads: Payloads, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's case: `file://evil.git`, committed as plain files, declares itself a partial
    clone lacking the blob `init` asks about (is COPYING a file?); its promisor's upload-pack is
    a shell command. init reads the repository's mirror instead, fetched over file:// alone:
    the fetch fails (the blob is missing), init goes on as for a remote URL, nothing runs."""
    pin = upstream.commit({"COPYING": "c\n", "lib/a.c": "a\n"}, "lib")
    root = tmp_path / "proj"
    git.init_repo(root)
    evil = root / "evil.git"
    git.run(["clone", "-q", "--bare", str(upstream.path), str(evil)], tmp_path)
    blob = git.run(["--git-dir", str(evil), "rev-parse", f"{pin}:COPYING"], tmp_path).stdout.strip()
    (evil / "objects" / blob[:2] / blob[2:]).unlink()
    plant(evil, payloads)
    (root / "vendor-patches").mkdir()
    (root / "vendored/lib").mkdir(parents=True)
    (root / "Makefile.sync").write_text(MAKEFILE_SYNC.format(pin=pin))
    git.commit_all(root, "vendoring project, evil.git committed as plain files")
    plant(root / ".git", payloads)
    # Live: git run inside evil.git (what init did) runs the promisor's upload-pack.
    plain_git("cat-file", "-t", f"{pin}:COPYING", cwd=evil)
    assert "uploadpack" in payloads.fired()
    payloads.clear()

    monkeypatch.chdir(root)  # where a user runs init (`file://evil.git` is relative to it)
    places: list[Path] = []
    real_run = git.run
    monkeypatch.setattr(
        git, "run", lambda args, cwd, **kw: places.append(Path(cwd).resolve()) or real_run(args, cwd, **kw)
    )
    result = run_cli("init", "--from", "makefile-sync")
    assert result.exit_code == 0, result.output
    assert payloads.fired() == []
    assert places and not [place for place in places if place.is_relative_to(evil.resolve())]  # never inside it
    assert yaml.safe_load((root / "matrix.yaml").read_text())["upstreams"]["evil"]["url"] == "file://evil.git"


def test_a_git_directory_committed_as_plain_files_is_never_entered(
    project: Project, upstream: Repo, payloads: Payloads
) -> None:
    """A vendored copy holding a git directory's files, and one given to `export --from`: git
    finds a bare repository there by itself only, which patchctl never lets it use
    (safe.bareRepository=explicit); the vendor commands never run git there at all."""
    project.add_patch(
        "0001-tune-main.patch", make_patch(upstream, upstream.head, {"src/main.c": main_c({20: "x"})}, "T")
    )
    config = project.path / "matrix.yaml"
    config.write_text(config.read_text() + "    vendor:\n      - {from: src, to: third_party/up}\n")
    assert run_cli("-C", project.path, "vendor").exit_code == 0
    embedded = project.path / "third_party/up/evil"
    embedded_git_dir(embedded, payloads, embedded)
    (project.path / ".gitignore").write_text(".patchctl/\n")
    git.commit_all(project.path, "vendored, with a git directory's files")
    for args, codes in (
        (("vendor", "--check"), (1,)),  # the committed extra files are drift from the vendored copy
        (("lint",), (0, 1)),
        (("apply",), (0,)),
        (("export", "main", "--from", embedded), (2,)),
        (("export", "main", "--from-vendor"), (0, 2)),
    ):
        result = run_cli("-C", project.path, *args)
        assert result.exit_code in codes and "Traceback" not in result.output, (args, result.output)
        assert payloads.fired() == [], (args, payloads.fired())
    assert "not the top of a git work tree" in run_cli("-C", project.path, "export", "main", "--from", embedded).stderr


def test_init_reads_a_local_repository_as_it_is_now_through_its_mirror(tmp_path: Path, upstream: Repo) -> None:
    """Reading through the cache changes nothing a user sees: a short pin names the commit the
    repository has now, also one made after an earlier init mirrored it."""
    root = tmp_path / "proj"
    git.init_repo(root)
    (root / "vendor-patches").mkdir()
    for attempt in range(2):
        pin = upstream.commit({"COPYING": f"c{attempt}\n", "lib/a.c": "a\n"}, f"lib {attempt}")
        makefile = MAKEFILE_SYNC.replace("file://evil.git", str(upstream.path)).format(pin=pin[:10])
        (root / "Makefile.sync").write_text(makefile)
        result = run_cli("-C", root, "init", "--from", "makefile-sync", "--force")
        assert result.exit_code == 0, result.output
        assert yaml.safe_load((root / "matrix.yaml").read_text())["upstreams"]["upstream"]["pin"] == pin
