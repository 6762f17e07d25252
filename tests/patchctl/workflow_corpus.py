"""Real workflows of public repositories, kept in `fixtures/workflow_corpus/` (README.md there
names each repository, its commit and its files), and laid out again as a repository for
`matrix check`: the workflows as they were, the `.gitignore` files above what they call, and
every other file of the directories their steps call into or check out, empty (only names
matter to MX801/MX802).

    python -m tests.patchctl.workflow_corpus MIRROR...   # refresh from mirrors (a `fetch` of each)

A MIRROR is a bare clone named OWNER+NAME (`/work/.mirror/ollama+ollama/repo`); the files
each repository keeps are listed in CORPUS.
"""

from __future__ import annotations

import posixpath
import shutil
import subprocess
import sys
from pathlib import Path

from patchctl import git

CORPUS_DIR = Path(__file__).resolve().parent / "fixtures" / "workflow_corpus"
# owner/name -> the workflow files kept (a selection: every shell, runner and checkout layout).
CORPUS: dict[str, tuple[str, ...]] = {
    "ollama/ollama": ("latest.yaml", "release.yaml", "test-install.yaml", "test-llamacpp-update.yaml", "test.yaml"),
    "mudler/LocalAI": (
        "backend.yml",
        "backend_build.yml",
        "build-test.yaml",
        "checksum_checker.yaml",
        "gh-pages.yml",
        "image_build.yml",
        "refresh-site-counters.yml",
        "release.yaml",
        "tests-e2e.yml",
    ),
    "electron/electron": (
        "apply-patches.yml",
        "build.yml",
        "macos-disk-cleanup.yml",
        "pipeline-electron-lint.yml",
        "pipeline-segment-electron-build.yml",
        "pipeline-segment-electron-test-64k.yml",
        "pipeline-segment-electron-test.yml",
        "windows-publish.yml",
    ),
    "abetlen/llama-cpp-python": (
        "build-and-release.yaml",
        "build-wheels-cuda.yaml",
        "generate-index-from-release.yaml",
        "test.yaml",
    ),
    "conda-forge/llama.cpp-feedstock": ("conda-build.yml",),
    "openwrt/packages": ("llm-review.yml", "multi-arch-test-build.yml"),
}
WORKFLOWS = ".github/workflows"
# Workflows of the repository that are not kept: present (a reusable one may be called), not read.
NOT_KEPT = "# not kept in the corpus (see README.md): present, never read\n"


def corpus_dir(repository: str) -> Path:
    return CORPUS_DIR / repository.replace("/", "+")


def materialize(repository: str, dest: Path) -> Path:
    """REPOSITORY's corpus laid out under DEST as a git work tree (git reads its .gitignore files)."""
    source = corpus_dir(repository)
    dest.mkdir(parents=True)
    for line in (source / "paths.txt").read_text().splitlines():
        if line.endswith("/"):
            (dest / line).mkdir(parents=True, exist_ok=True)  # a directory (its files are not listed)
        elif line and not line.startswith("#"):
            path = dest / line
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(NOT_KEPT if line.startswith(WORKFLOWS + "/") else "")
    for kept in sorted((source / "workflows").iterdir()):
        shutil.copyfile(kept, dest / WORKFLOWS / kept.name)
    for ignore in sorted((source / "gitignore").rglob("gitignore")):
        target = dest / ignore.parent.relative_to(source / "gitignore") / ".gitignore"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ignore, target)
    git.init_repo(dest)
    # Every file as the repository tracks it, those its .gitignore rules match included.
    git.run(["add", "--force", "--all"], dest)
    git.run(["commit", "-q", "-m", f"{repository}: the corpus"], dest)
    return dest


# ---------------------------------------------------------------- refreshing from a mirror


def _git(mirror: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(mirror), *args], capture_output=True, text=True, check=True).stdout


def _consulted_directories(workflow_texts: list[str], directories: set[str]) -> set[str]:
    """The repository directories the kept workflows call into, look for actions in or run from:
    each path-like word of their scripts, `uses: ./` paths and working directories, with any
    leading directories (a checkout `path:`) taken off in turn, where such a directory exists."""
    import yaml

    from patchctl.matrix.workflow_steps import REPOSITORY_PATH, commands, steps

    words: set[str] = set()
    for text in workflow_texts:
        data = yaml.safe_load(text)
        for job in (data.get("jobs") or {}).values() if isinstance(data, dict) else ():
            if isinstance(job, dict) and str(job.get("uses", "")).startswith("./"):
                words.add(str(job["uses"])[2:])
        for view in steps(data):
            uses = str(view.step.get("uses", ""))
            if uses.startswith("./"):
                words.add(uses[2:] + "/action.yml")
            base = view.directory or "."
            words.add(posixpath.join(base, "x"))
            for shell in ("bash", "pwsh"):
                for word in commands(view.script, shell):
                    if REPOSITORY_PATH.match(word):
                        words.add(posixpath.normpath(posixpath.join(base, word)))
    found = {"."}
    for word in words:
        parts = word.split("/")
        for start in range(len(parts)):
            parent = posixpath.dirname("/".join(parts[start:])) or "."
            if parent in directories:
                found.add(parent)
    return found


def refresh(mirror: Path) -> None:
    repository = mirror.parent.name.replace("+", "/") if mirror.name == "repo" else mirror.name.replace("+", "/")
    kept = CORPUS[repository]
    commit = _git(mirror, "rev-parse", "HEAD").strip()
    names = [n for n in _git(mirror, "ls-tree", "-r", "-z", "--name-only", commit).split("\0") if n]
    directories = {"."} | {posixpath.dirname(n) or "." for n in names}
    directories |= {"/".join(n.split("/")[:i]) for n in names for i in range(1, n.count("/") + 1)}
    texts = [_git(mirror, "show", f"{commit}:{WORKFLOWS}/{name}") for name in kept]
    consulted = _consulted_directories(texts, directories) | {WORKFLOWS}
    listed = sorted(n for n in names if (posixpath.dirname(n) or ".") in consulted)
    listed += sorted(f"{d}/" for d in directories - {"."} if (posixpath.dirname(d) or ".") in consulted)
    ignores = sorted(n for n in names if posixpath.basename(n) == ".gitignore" and any(_above(n, c) for c in consulted))
    dest = corpus_dir(repository)
    shutil.rmtree(dest, ignore_errors=True)
    (dest / "workflows").mkdir(parents=True)
    for name, text in zip(kept, texts):
        (dest / "workflows" / name).write_text(text)
    for name in ignores:
        target = dest / "gitignore" / posixpath.dirname(name) / "gitignore"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(_git(mirror, "show", f"{commit}:{name}"))
    header = f"# {repository} at {commit}: the files of the directories its kept workflows call into\n"
    (dest / "paths.txt").write_text(header + "".join(f"{n}\n" for n in listed))
    print(f"{repository} {commit}: {len(kept)} workflow(s), {len(listed)} path(s), {len(ignores)} .gitignore")


def _above(gitignore: str, directory: str) -> bool:
    """GITIGNORE's rules apply in DIRECTORY: it lies in DIRECTORY or above it."""
    where = posixpath.dirname(gitignore) or "."
    return where == "." or directory == where or directory.startswith(where + "/")


if __name__ == "__main__":
    for argument in sys.argv[1:]:
        refresh(Path(argument))
