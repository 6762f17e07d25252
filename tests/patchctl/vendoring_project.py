"""A real vendoring project at one commit, with its upstream rebuilt locally.

The project is ollama (https://github.com/ollama/ollama), read from a mirror that `fetch`
brings onto the development machines (CI has none; the tests that use it skip there). Up to
2026 it carried llama.cpp the vendoring way: `Makefile.sync` names the upstream and the
pinned commit, applies `llama/patches/*.patch` with `git am -3` in a checkout, and rsyncs a
filtered part of the patched tree into `llama/llama.cpp/` and `ml/backend/ggml/ggml/`.

llama.cpp itself cannot be fetched here, so its tree at the project's pin is rebuilt from the
project's own files:

1. the series is cut down to the vendored files: from each patch, the `diff --git` blocks on
   upstream files that no vendored copy selects (llama.cpp backends the project does not
   vendor: CANN, SYCL, OpenCL, RPC) are removed, since their upstream content is nowhere in
   the project; a patch left with no block is removed. The rest of each file, its message
   included, stays byte for byte;
2. every file the vendored copies hold (mapped back to upstream paths by the `vendor:`
   entries `patchctl init --from makefile-sync` derives from the rsync rules) is put in a git
   repository, and the cut-down series is reverse-applied to it, last patch first.

That gives the upstream at the pin *as far as the vendored copies see it*, which is all that
`vendor`, `lint` and `pin-sync` read. Two of the project's commits give two upstream commits,
the second a child of the first, as the project's own pin bump moved them.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from patchctl import git
from patchctl.loop.vendor import managed, upstream_path
from patchctl.project.config import VendorCopy

OLLAMA_MIRROR = Path("/work/.mirror/ollama+ollama/repo")
LAYOUT_PATHS = ("Makefile.sync", "llama/patches", "llama/llama.cpp", "ml/backend/ggml/ggml")
_DIFF_RE = re.compile(r"^diff --git a/(\S+) b/(\S+)$", re.M)


def extract(commit: str, into: Path) -> Path:
    """The project's vendoring files at COMMIT in a fresh git repository INTO."""
    into.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(OLLAMA_MIRROR), "archive", commit, *LAYOUT_PATHS], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    git.init_repo(into)
    git.commit_all(into, f"ollama {commit}: vendoring files")
    return into


def vendored_source(copies: list[VendorCopy], source: str) -> bool:
    """Whether the upstream file SOURCE lands in one of the vendored COPIES."""
    for copy in copies:
        prefix = f"{copy.source}/" if copy.source else ""
        if source.startswith(prefix) and managed(copy, source[len(prefix) :]):
            return True
        if any(single.source == source for single in copy.files):
            return True
    return False


def cut_series(copies: list[VendorCopy], patch_dir: Path) -> list[str]:
    """Remove from each patch in PATCH_DIR the blocks on files no copy vendors (step 1 above);
    the names of the patches changed, and of those removed."""
    changed = []
    for patch in sorted(patch_dir.glob("*.patch")):
        data = patch.read_bytes()
        head, *blocks = re.split(rb"(?m)^(?=diff --git )", data)
        kept = [b for b in blocks if vendored_source(copies, _DIFF_RE.match(b.decode(errors="replace"))[2])]
        if len(kept) == len(blocks):
            continue
        changed.append(patch.name)
        if kept:
            patch.write_bytes(head + b"".join(kept))
        else:
            patch.unlink()
    return changed


def upstream_tree(project: Path, copies: list[VendorCopy], patch_dir: Path, scratch: Path) -> str:
    """The upstream tree at the project's pin, rebuilt from PROJECT's vendored COPIES and the
    (cut) series in PATCH_DIR (step 2 above), written into the repository SCRATCH; its tree id."""
    if not (scratch / ".git").exists():
        git.init_repo(scratch)
    git.run(["read-tree", "--empty"], scratch)
    git.run(["clean", "-fdxq"], scratch)
    for copy in copies:
        destination = project / copy.dest
        for path in sorted(p for p in destination.rglob("*") if p.is_file()):
            relative = path.relative_to(destination).as_posix()
            if not managed(copy, relative):
                continue
            target = scratch / upstream_path(copy, relative)
            target.parent.mkdir(parents=True, exist_ok=True)
            # Two copies may hold one upstream file (llama.cpp's LICENSE, in both): they must agree.
            assert not target.exists() or target.read_bytes() == path.read_bytes(), target
            target.write_bytes(path.read_bytes())
            target.chmod(path.stat().st_mode & 0o777)
    git.run(["add", "-A"], scratch)
    for patch in sorted(patch_dir.glob("*.patch"), reverse=True):
        git.run(["apply", "-R", "--index", str(patch)], scratch)
    return git.run(["write-tree"], scratch).stdout.strip()


def commit_tree(scratch: Path, tree: str, message: str, parent: str | None = None) -> str:
    args = ["commit-tree", tree, "-m", message] + (["-p", parent] if parent else [])
    env = {"GIT_AUTHOR_DATE": git.FIXED_DATE, "GIT_COMMITTER_DATE": git.FIXED_DATE}
    commit = git.run(args, scratch, env=env).stdout.strip()
    git.run(["update-ref", "refs/heads/master", commit], scratch)
    return commit
