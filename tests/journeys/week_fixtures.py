"""The repositories the week on github.com is rehearsed with, and the upstream they follow.

- `WeekUpstream`: a small git upstream (src/main.c, lines `main 1`..`main 40`) that advances,
  breaks the series' patch (line 20 rewritten), and comes back, one commit per week.
- `this_repository()`: this checkout (its templates, workflows, action.yml, package, .gitignore,
  matrix layout, rows and index) with the slow parts swapped for cheap ones, so that a week runs
  in minutes: the upstream `llama.cpp` is the small one (its embedded default a frozen mirror,
  its `ci:` source the live one, as llama-cpp-python's sdists and github.com are), the series
  `llama.cpp` one patch with a grep gate, no build step, toolchains and rows on a local image,
  a backend/Dockerfile that copies the applied tree, and `.ci/run` (this test suite) a stub.
- `new_downstream()`: what a user has after `patchctl init` with another upstream and series
  name, one patch, a gate, one image row with its Dockerfile and a canary toolchain; no
  action.yml and no .ci/.
- `base_image()`: the local image rows and toolchains use: bash and a few tools from this host,
  packed into a tarball and loaded with `docker import` (no registry is reachable).
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import yaml

from patchctl import git

REPO = Path(__file__).resolve().parents[2]
PUBLISHED_ACTION = "patchctl/patchctl@" + "c0ffee00" * 5
BASE_TOOLS = ("bash", "cat", "grep", "ls", "cp", "mkdir", "head", "test", "echo", "true", "sed", "env", "rm")
GATE_COMMAND = "grep -q 'MAIN 20 patched' src/main.c"
TOOLCHAIN_COMMAND = "test -f src/main.c && grep -q 'MAIN 20 patched' src/main.c"
REHEARSAL_DOCKERFILE = """\
# The rehearsal's image: the applied tree copied into the row's base image (the real Dockerfile
# compiles llama.cpp; a rehearsal proves the plan, the apply and the push, not the compiler).
# One stage: the legacy builder (no buildx here) would leave a builder stage behind as an
# untagged image.
ARG BUILDER_BASE_IMAGE
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
ARG BUILD_TYPE=
ARG TREE=.patchctl/trees/SERIES
COPY ${TREE} /opt/tree
RUN test -f /opt/tree/src/main.c && echo "build-type=${BUILD_TYPE}" > /opt/tree/BUILD_INFO
"""


SERIES_TESTS_CI_RUN = """\
#!/usr/bin/env bash
# rehearsal: .ci/run's series tests alone (tests/patchctl/test_own_series.py), not the whole suite
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pytest -q -p no:cacheprovider -n 0 tests/patchctl/test_own_series.py
"""


def main_c(changes: dict[int, str] | None = None) -> str:
    lines = [f"main {i}" for i in range(1, 41)]
    for number, text in (changes or {}).items():
        lines[number - 1] = text
    return "".join(line + "\n" for line in lines)


class WeekUpstream:
    """The upstream on the rehearsal's github.com (a local repository), and its offline mirror frozen at the pin."""

    # What the week checks it by: a subject the range-diff shows, the patch a break breaks, and a
    # file the first week's commit adds (the images built at the new pin hold it).
    subject = "Patch line twenty"
    broken_patch = "0001-patch-line-twenty.patch"
    new_file = ("src/new.c", "int week1;\n")

    def __init__(self, root: Path) -> None:
        self.path = root / "upstream"
        self.mirror = root / "upstream-mirror"
        git.init_repo(self.path)
        self.pin = self.commit({"src/main.c": main_c(), "src/util.c": "util 1\n", "README.md": "# up\n"}, "initial")
        subprocess.run(["git", "clone", "-q", "--bare", str(self.path), str(self.mirror)], check=True)

    def commit(self, files: dict[str, str], message: str) -> str:
        for name, text in files.items():
            target = self.path / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        return git.commit_all(self.path, message)

    def patch(self, base: str) -> str:
        """0001: line 20 changed, made by git itself against BASE."""
        scratch = self.path.parent / "patch-scratch"
        shutil.rmtree(scratch, ignore_errors=True)
        git.run(["clone", "-q", str(self.path), str(scratch)], self.path.parent)
        try:
            git.run(["checkout", "-q", "--detach", base], scratch)
            (scratch / "src/main.c").write_text(main_c({20: "MAIN 20 patched"}))
            git.commit_all(scratch, "Patch line twenty\n\nDownstream needs line 20 changed.")
            return git.run(
                ["format-patch", "-1", "--stdout", "--zero-commit", "--no-signature", "--full-index", "HEAD"], scratch
            ).stdout
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    # One commit per week.
    def advance_cleanly(self) -> str:
        return self.commit(
            {"src/util.c": "util 1\nutil 2: the week's work\n", "src/new.c": "int week1;\n"}, "week 1 work"
        )

    def break_the_patch(self) -> str:
        return self.commit({"src/main.c": main_c({20: "main twenty rewritten"})}, "week 2: rewrite line 20")

    def stay_broken(self) -> str:
        return self.commit({"src/util.c": "util 1\nutil 2: the week's work\nutil 3\n"}, "week 3 work")

    def fix(self) -> str:
        return self.commit({"src/main.c": main_c()}, "week 4: revert the rewrite of line 20")

    def edit_the_context(self) -> str:
        """A context line of the patch's hunk edited: pin-sync merges it 3-way and rewrites the patch."""
        return self.commit({"src/main.c": main_c({18: "main 18, edited in week 5"})}, "week 5: edit line 18")


# ---------------------------------------------------------------- the image


def base_image() -> str:
    """A local image with bash and a few tools from this host (tag from its contents)."""
    files: dict[str, Path] = {}
    for tool in BASE_TOOLS:
        found = shutil.which(tool, path="/usr/bin:/bin")
        if found is None:
            raise RuntimeError(f"the rehearsal image needs {tool} on this host")
        binary = Path(found).resolve()
        files[f"usr/bin/{tool}"] = binary
        ldd = subprocess.run(["ldd", str(binary)], capture_output=True, text=True).stdout
        for line in ldd.splitlines():
            parts = line.split()
            path = (
                parts[2] if "=>" in parts and len(parts) > 2 else parts[0] if parts and parts[0].startswith("/") else ""
            )
            if path.startswith("/"):
                files[Path(path).as_posix().lstrip("/")] = Path(path).resolve()
                files[Path(path).resolve().as_posix().lstrip("/")] = Path(path).resolve()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for link, target in (("bin", "usr/bin"), ("lib", "usr/lib"), ("lib64", "usr/lib64"), ("sbin", "usr/sbin")):
            info = tarfile.TarInfo(link)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
        for name in sorted(files):
            if name.split("/")[0] in ("bin", "lib", "lib64", "sbin"):
                name_in_usr = "usr/" + name
                files.setdefault(name_in_usr, files[name])
        seen = set()
        for name in sorted(files):
            if name.split("/")[0] in ("bin", "lib", "lib64", "sbin") or name in seen:
                continue
            seen.add(name)
            data = files[name].read_bytes()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755
            tar.addfile(info, io.BytesIO(data))
        info = tarfile.TarInfo("usr/bin/sh")
        info.type, info.linkname = tarfile.SYMTYPE, "bash"
        tar.addfile(info)
        for directory in ("tmp", "src", "opt"):
            info = tarfile.TarInfo(directory)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777
            tar.addfile(info)
    data = buffer.getvalue()
    tag = "patchctl-journey-base:" + hashlib.sha256(data).hexdigest()[:12]
    if subprocess.run(["docker", "image", "inspect", tag], capture_output=True).returncode != 0:
        subprocess.run(["docker", "import", "-", tag], input=data, check=True, capture_output=True)
    return tag


# ---------------------------------------------------------------- the repositories


def tracked_files(root: Path) -> list[str]:
    """What `git add --all` would commit from ROOT: tracked and untracked files, ignored ones left out."""
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return [name for name in out.split("\0") if name and (root / name).exists()]


def copy_checkout(source: Path, dest: Path) -> Path:
    for name in tracked_files(source):
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source / name, target, follow_symlinks=False)
    return dest


def run_init(dest: Path, *args: str) -> None:
    """`patchctl init ARGS` in DEST, naming the published action (the rehearsal maps */patchctl to
    this checkout, whatever the commit: not this checkout's HEAD, which render refuses while it is
    only a local commit)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHCTL_")}
    init = subprocess.run(
        [sys.executable, "-m", "patchctl", "-C", str(dest), "init", *args, "--action", PUBLISHED_ACTION],
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": str(REPO)},
    )
    if init.returncode != 0:
        raise AssertionError(f"init failed: {init.stdout}{init.stderr}")


def render(project: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHCTL_")}
    proc = subprocess.run(
        [sys.executable, "-m", "patchctl", "-C", str(project), "matrix", "render"],
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": str(REPO)},
    )
    if proc.returncode != 0:
        raise AssertionError(f"matrix render failed: {proc.stdout}{proc.stderr}")


def this_repository(dest: Path, upstream: WeekUpstream, image: str) -> Path:
    """This checkout, with the cheap upstream, series, gates, images and toolchains (see the module doc)."""
    copy_checkout(REPO, dest)
    config_path = dest / "matrix.yaml"
    config = yaml.safe_load(config_path.read_text())
    up = config["upstreams"]["llama.cpp"]
    up.update({"url": str(upstream.mirror), "branch": "main", "pin": upstream.pin})
    up["ci"] = {"url": str(upstream.path), "branch": "main", "pin": upstream.pin}
    series = config["series"]["llama.cpp"]
    series.pop("build", None)
    series["gates"] = [
        {"name": "line-twenty-patched", "command": GATE_COMMAND, "timeout": 60},
        {"name": "slow-line-twenty", "command": GATE_COMMAND, "timeout": 60, "slow": True},
    ]
    for row in config["include"]:
        row["base-image"] = image
        row["builder-base-image"] = image
    for toolchain in config["canary"]["toolchains"]:
        toolchain["image"] = image
        toolchain.pop("dockerfile", None)
        toolchain["command"] = TOOLCHAIN_COMMAND
    config_path.write_text(yaml.safe_dump(config, sort_keys=False, width=200))
    patches = dest / "patches" / "llama.cpp"
    shutil.rmtree(patches)
    patches.mkdir(parents=True)
    (patches / "0001-patch-line-twenty.patch").write_text(upstream.patch(upstream.pin))
    (dest / "backend" / "Dockerfile").write_text(REHEARSAL_DOCKERFILE.replace("SERIES", "llama.cpp"))
    ci_run = dest / ".ci" / "run"
    if ci_run.exists():
        # The whole suite is what runs this rehearsal: the test job runs the suite's series tests
        # (this checkout's own, from the branch under test), at the pin of the source CI follows.
        ci_run.write_text(SERIES_TESTS_CI_RUN)
    render(dest)
    return dest


DOWNSTREAM_ADDITIONS = """\

# Added by the user after init: one CPU image, where it is published, and a canary that compiles it.
include:
  - build-type: ''
    cuda-major-version: ''
    cuda-minor-version: ''
    platforms: linux/amd64
    tag-latest: auto
    tag-suffix: -cpu-libfoo
    runs-on: ubuntu-latest
    base-image: {image}
    builder-base-image: {image}
    backend: libfoo
    dockerfile: ./docker/Dockerfile
    context: ./

index:
  output: backend/index.yaml
  metas:
    - name: libfoo
      alias: libfoo
      description: libfoo with its patches.
      capabilities:
        default: cpu-libfoo
    - name: libfoo-development
      alias: libfoo-development
      description: libfoo with its patches, built from main.
      capabilities:
        default: cpu-libfoo-development
  variants:
    - {{name: cpu-libfoo, uri: 'ghcr.io/acme/libfoo:latest-cpu-libfoo'}}
    - {{name: cpu-libfoo-development, uri: 'ghcr.io/acme/libfoo:master-cpu-libfoo'}}

backends:
  libfoo:
    paths: ['docker/Dockerfile', 'patches/libfoo/**']

canary:
  upstream: libfoo
  schedule: '5 6 * * 2'
  toolchains:
    - name: cpu
      tag-suffix: -cpu-libfoo
      platform: linux/amd64
      cuda-major-version: ''
      image: {image}
      command: "{command}"
"""


def new_downstream(dest: Path, upstream: WeekUpstream, image: str) -> Path:
    """`patchctl init` with upstream and series `libfoo`, then a patch, a gate, a row and a canary."""
    dest.mkdir(parents=True)
    git.init_repo(dest)
    run_init(dest, "--upstream-url", str(upstream.path), "--pin", upstream.pin, "--name", "libfoo")
    (dest / ".gitignore").write_text(".patchctl/\n__pycache__/\n")
    config = (dest / "matrix.yaml").read_text()
    config = config.replace("  allow_empty: true", "  # allow_empty: true")
    config = config.replace("allow_empty: true", "allow_empty: false")
    config += DOWNSTREAM_ADDITIONS.format(image=image, command=TOOLCHAIN_COMMAND)
    (dest / "matrix.yaml").write_text(config)
    data = yaml.safe_load(config)
    data["series"]["libfoo"]["gates"] = [{"name": "line-twenty-patched", "command": GATE_COMMAND, "timeout": 60}]
    (dest / "matrix.yaml").write_text(yaml.safe_dump(data, sort_keys=False, width=200))
    patches = dest / "patches" / "libfoo"
    patches.mkdir(parents=True, exist_ok=True)
    (patches / "0001-patch-line-twenty.patch").write_text(upstream.patch(upstream.pin))
    (dest / "docker").mkdir()
    (dest / "docker" / "Dockerfile").write_text(REHEARSAL_DOCKERFILE.replace("SERIES", "libfoo"))
    render(dest)
    return dest


# ---------------------------------------------------------------- Ollama, adopted by init

OLLAMA_FIXTURE = REPO / "tests/patchctl/fixtures/ollama_layout"


class OllamaUpstream:
    """llama.cpp as Ollama's layout fixture has it (tests/patchctl/fixtures/ollama_layout/upstream,
    a tree reduced from llama.cpp's), as the live repository on the rehearsal's github.com. Its
    weeks: work in a vendored file, then a rewrite of the line Ollama's 0003 patches, kept for a
    week, then reverted."""

    subject = "llama: more devices"
    broken_patch = "0003-llama-more-devices.patch"
    new_file = None  # Ollama's layout builds no image here

    def __init__(self, root: Path) -> None:
        self.path = root / "llama.cpp"
        shutil.copytree(OLLAMA_FIXTURE / "upstream", self.path)
        git.init_repo(self.path)
        self.pin = git.commit_all(self.path, "llama.cpp, laid out as the fixture has it")

    def _edit(self, name: str, edit, message: str) -> str:
        target = self.path / name
        target.write_text(edit(target.read_text()))
        return git.commit_all(self.path, message)

    def advance_cleanly(self) -> str:
        return self._edit("src/llama-vocab.cpp", lambda text: text + "// week 1: upstream work\n", "week 1 work")

    def break_the_patch(self) -> str:
        return self._edit("src/llama.cpp", lambda text: text.replace("return 16;", "return 32;"), "week 2: 32 devices")

    def stay_broken(self) -> str:
        return self._edit("README.md", lambda text: text + "\nweek 3\n", "week 3 work")

    def fix(self) -> str:
        return self._edit(
            "src/llama.cpp", lambda text: text.replace("return 32;", "return 16;"), "week 4: back to 16 devices"
        )

    def edit_the_context(self) -> str:
        """A context line of 0003's hunk edited: pin-sync merges it 3-way and rewrites the patch."""
        return self._edit(
            "src/llama.cpp", lambda text: text.replace('#include "llama.h"', '#include "llama.h" // week 5'), "week 5"
        )


def ollama_downstream(dest: Path, upstream: OllamaUpstream) -> Path:
    """Ollama's vendoring layout (the fixture's project: Makefile.sync, its two rsync'd copies and
    llama/patches) after `patchctl init --from makefile-sync`, with patchctl's state ignored and the
    workflows rendered: nothing else added by hand."""
    shutil.copytree(OLLAMA_FIXTURE / "project", dest)
    makefile = dest / "Makefile.sync"
    makefile.write_text(
        makefile.read_text().replace("@UPSTREAM@", str(upstream.path)).replace("@FETCH_HEAD@", upstream.pin)
    )
    git.init_repo(dest)
    git.commit_all(dest, "a vendoring project laid out as Ollama's")
    run_init(dest, "--from", "makefile-sync")
    gitignore = dest / ".gitignore"
    if ".patchctl/" not in (gitignore.read_text() if gitignore.exists() else ""):
        with open(gitignore, "a") as out:
            out.write(".patchctl/\n")
    assert "\ncanary:\n  upstream: llama.cpp\n" in (dest / "matrix.yaml").read_text()  # init's apply-only canary
    render(dest)
    return dest
