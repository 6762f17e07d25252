"""Seeded generators of hostile patches and hostile matrix.yaml files, and a harness that runs
the real CLI on each and judges the outcome.

Used by the fast CI subset (tests/patchctl/test_hostile_fuzz.py) and the full run
(bench/hostile_fuzz.py). Every case runs patchctl's real entry point in-process on a real git
upstream and asserts: no traceback, an exit code in the documented set, the applied tree and
the upstream unchanged on failure, nothing written outside the sandbox's own areas, no
symlink in an applied tree pointing out of it, and no package code run (a hostile sdist's
setup.py would write a marker).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import random
import shutil
import tarfile
import textwrap
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from patchctl import git
from patchctl.cli import main

DOCUMENTED_EXIT_CODES = {0, 1, 2, 3}
PATCH_NAME = "0001-hostile.patch"


@dataclass
class Tally:
    cases: int = 0
    tracebacks: int = 0
    escapes: int = 0
    unexpected_exit_codes: int = 0
    package_code_executed: int = 0
    tree_changed_on_failure: int = 0
    exit_codes: dict[int, int] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)

    def problem(self, kind: str, case: str, detail: str) -> None:
        setattr(self, kind, getattr(self, kind) + 1)
        if len(self.examples) < 20:
            self.examples.append(f"{kind}: {case}: {detail[:200]} ... {detail[-600:]}")

    @property
    def ok(self) -> bool:
        return not (
            self.tracebacks
            or self.escapes
            or self.unexpected_exit_codes
            or self.package_code_executed
            or self.tree_changed_on_failure
        )

    def summary(self, label: str) -> str:
        return (
            f"{label}: cases={self.cases} tracebacks={self.tracebacks} escapes={self.escapes} "
            f"unexpected_exit_codes={self.unexpected_exit_codes} package_code_executed={self.package_code_executed} "
            f"tree_changed_on_failure={self.tree_changed_on_failure} "
            f"exit_codes={dict(sorted(self.exit_codes.items()))}"
        )


# ---------------------------------------------------------------- sandbox


@dataclass
class Sandbox:
    """ROOT/upstream (real git), ROOT/project (matrix.yaml + patches), ROOT/cache, ROOT/victim
    (where hostile paths aim), ROOT/index (a package index serving a hostile sdist)."""

    root: Path
    upstream: Path
    project: Path
    pin: str
    base_patches: list[bytes]
    marker: Path

    @property
    def series_dir(self) -> Path:
        return self.project / "patches" / "main"

    @property
    def tree(self) -> Path:
        return self.project / ".patchctl" / "trees" / "main"

    def config_text(self) -> str:
        return textwrap.dedent(
            f"""\
            version: 1
            upstreams:
              up:
                url: {self.upstream}
                branch: main
                pin: {self.pin}
            series:
              main:
                upstream: up
                dir: patches/main
                build:
                  - name: compile
                    command: 'true'
                    timeout: 60
                    env: {{CC: cc}}
            """
        )


def _git_commit(repo: Path, message: str) -> str:
    return git.commit_all(repo, message)


def make_sandbox(root: Path) -> Sandbox:
    root.mkdir(parents=True, exist_ok=True)
    upstream = root / "upstream"
    git.init_repo(upstream)
    (upstream / "src" / "deep").mkdir(parents=True)
    for i in range(3):
        (upstream / "src" / f"f{i}.c").write_text("".join(f"line {j} of f{i}\n" for j in range(1, 31)))
    (upstream / "src" / "deep" / "g.h").write_text("#define G 1\n")
    (upstream / "README.md").write_text("# upstream\n")
    os.symlink("f0.c", upstream / "src" / "alias.c")
    os.symlink("../src", upstream / "src" / "deep" / "up")
    pin = _git_commit(upstream, "initial")
    git.run(["branch", "-M", "main"], upstream)
    (root / "victim").mkdir()
    (root / "victim" / "keep.txt").write_text("do not touch\n")
    project = root / "project"
    (project / "patches" / "main").mkdir(parents=True)
    git.init_repo(project)
    marker = root / "package-code-ran"
    box = Sandbox(root, upstream, project, pin, [], marker)
    (project / "matrix.yaml").write_text(box.config_text())
    box.base_patches = _base_patches(box)
    _make_hostile_index(box)
    return box


def _base_patches(box: Sandbox) -> list[bytes]:
    """Valid patches made by git itself: modify, add, delete, rename, mode change, in-tree symlink."""
    edits: list[Callable[[Path], None]] = [
        lambda t: (t / "src/f0.c").write_text((t / "src/f0.c").read_text().replace("line 5 of", "LINE 5 of")),
        lambda t: (t / "src/new.c").write_text("int added;\n"),
        lambda t: (t / "src/f1.c").unlink(),
        lambda t: (t / "src/f2.c").rename(t / "src/moved.c"),
        lambda t: (t / "src/f1.c").chmod(0o755),
        lambda t: os.symlink("f1.c", t / "src/link.c"),
        lambda t: (t / "src/f2.c").write_text("".join(f"changed {j}\n" for j in range(1, 31))),
    ]
    patches = []
    for index, edit in enumerate(edits):
        scratch = box.root / f"scratch-{index}"
        git.run(["clone", "-q", str(box.upstream), str(scratch)], box.root)
        edit(scratch)
        git.commit_all(scratch, f"Base change {index}\n\nWhy it is needed.")
        patches.append(
            git.run(
                ["format-patch", "-1", "-M", "--stdout", "--zero-commit", "--full-index", "HEAD"], scratch, binary=True
            ).stdout
        )
        shutil.rmtree(scratch)
    return patches


def _make_hostile_index(box: Sandbox) -> None:
    """A file:// simple index whose sdist's setup.py writes the marker; served without a digest
    and with a wrong one (for the two package names), so no fetch may succeed, and none may build."""
    files = box.root / "index" / "files"
    files.mkdir(parents=True)
    for package, fragment in (("evilpkg", ""), ("evilpkg-two", "#sha256=" + "0" * 64)):
        top = f"{package.replace('-', '_')}-1.0"
        data = io.BytesIO()
        setup = f"open({str(box.marker)!r}, 'w').write('ran')\nfrom setuptools import setup\nsetup()\n".encode()
        with tarfile.open(fileobj=data, mode="w:gz") as tar:
            for name, body in ((f"{top}/setup.py", setup), (f"{top}/vendor/llama.cpp/x.c", b"x\n")):
                info = tarfile.TarInfo(name)
                info.size = len(body)
                tar.addfile(info, io.BytesIO(body))
        name = f"{top}.tar.gz"
        (files / name).write_bytes(data.getvalue())
        page = box.root / "index" / "simple" / package
        page.mkdir(parents=True)
        (page / "index.html").write_text(f'<a href="{(files / name).as_uri()}{fragment}">{name}</a>\n')


def index_url(box: Sandbox) -> str:
    return (box.root / "index" / "simple").as_uri() + "/"


# ---------------------------------------------------------------- running and judging


def run_cli(args: list[str]) -> tuple[int | None, str]:
    """(exit code, output) of patchctl's real entry point; None and the traceback when it raised."""
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(args)
    except BaseException:  # noqa: BLE001 - judging exactly this: anything escaping main is a traceback
        return None, traceback.format_exc()
    return code, out.getvalue() + err.getvalue()


def snapshot(root: Path, skip: tuple[Path, ...]) -> dict[str, str]:
    """Every path under ROOT (outside SKIP) with its content digest or link target."""
    state: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        dirnames[:] = [d for d in dirnames if here / d not in skip]
        for name in dirnames + filenames:
            path = here / name
            if path in skip:
                continue
            rel = str(path.relative_to(root))
            if path.is_symlink():
                state[rel] = "link:" + os.readlink(path)
            elif path.is_file():
                state[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                state[rel] = "dir"
    return state


def _tree_state(tree: Path) -> str | None:
    if not tree.exists():
        return None
    head = git.run(["rev-parse", "HEAD"], tree, check=False).stdout.strip()
    return head + "\n" + git.run(["status", "--porcelain", "--ignored"], tree, check=False).stdout


def _escaping_links(tree: Path) -> list[str]:
    real_tree = os.path.realpath(tree)
    bad = []
    for dirpath, dirnames, filenames in os.walk(tree):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            if path.is_symlink():
                target = os.path.realpath(path)
                if not (target == real_tree or target.startswith(real_tree + os.sep)):
                    bad.append(f"{path.relative_to(tree)} -> {os.readlink(path)}")
    return bad


def judge(tally: Tally, box: Sandbox, case: str, commands: list[list[str]]) -> None:
    """Run COMMANDS in order on the sandbox and record every problem."""
    skip = (box.root / "cache", box.project / ".patchctl", box.project / ".git")
    before = snapshot(box.root, skip)
    tree_before = _tree_state(box.tree)
    tally.cases += 1
    for args in commands:
        code, output = run_cli(["-C", str(box.project), *args])
        if code is None or "Traceback (most recent call last)" in output:
            tally.problem("tracebacks", case, f"{' '.join(args)}: {output}")
            continue
        tally.exit_codes[code] = tally.exit_codes.get(code, 0) + 1
        if code not in DOCUMENTED_EXIT_CODES:
            tally.problem("unexpected_exit_codes", case, f"{' '.join(args)} -> {code}: {output}")
        if code != 0 and args[0] == "apply" and _tree_state(box.tree) != tree_before:
            tally.problem("tree_changed_on_failure", case, f"{' '.join(args)} -> {code}")
    after = snapshot(box.root, skip)
    if after != before:
        changed = sorted(set(after.items()) ^ set(before.items()))
        tally.problem("escapes", case, f"changed outside the allowed areas: {changed[:5]}")
    if box.tree.exists() and (links := _escaping_links(box.tree)):
        tally.problem("escapes", case, f"symlink out of the applied tree: {links[:3]}")
    if box.marker.exists():
        tally.problem("package_code_executed", case, "the hostile sdist's setup.py ran")
        box.marker.unlink()


# ---------------------------------------------------------------- hostile patches

_VICTIM_PATHS = ["../victim/x", "../../victim/x", "src/../../victim/x", "/tmp/patchctl-victim", "..", "a/./../../b"]


def _replace_paths(text: bytes, rng: random.Random, new: bytes) -> bytes:
    old = rng.choice([b"src/f0.c", b"src/f1.c", b"src/f2.c", b"src/new.c", b"src/link.c", b"src/moved.c"])
    return text.replace(old, new)


def _symlink_patch(rng: random.Random, victim: Path) -> bytes:
    target = rng.choice([str(victim), "../../victim", "../" * rng.randint(1, 6) + "etc", "/etc/passwd", "deep/../.."])
    path = rng.choice(["src/f0.c", "src/evil", "src/deep/evil", "evil"])
    header = "From: A <a@example.com>\nSubject: [PATCH] Link\n\nWhy.\n---\n"
    create = (
        f"diff --git a/{path} b/{path}\nnew file mode 120000\nindex 0000000..1111111\n--- /dev/null\n+++ b/{path}\n"
        f"@@ -0,0 +1 @@\n+{target}\n\\ No newline at end of file\n"
    )
    kind = rng.randrange(6)
    if kind == 0:  # delete then create: a file replaced by a symlink
        body = (
            "diff --git a/src/f0.c b/src/f0.c\ndeleted file mode 100644\n--- a/src/f0.c\n+++ /dev/null\n"
            "@@ -1,30 +0,0 @@\n" + "".join(f"-line {j} of f0\n" for j in range(1, 31))
        ) + create.replace(path, "src/f0.c")
    elif kind == 1:  # a mode change to a symlink, no target shown
        body = "diff --git a/src/f1.c b/src/f1.c\nold mode 100644\nnew mode 120000\n"
    elif kind == 2:  # retarget the existing in-tree symlink
        body = (
            "diff --git a/src/alias.c b/src/alias.c\nindex 1111111..2222222 120000\n--- a/src/alias.c\n"
            f"+++ b/src/alias.c\n@@ -1 +1 @@\n-f0.c\n\\ No newline at end of file\n+{target}\n"
            "\\ No newline at end of file\n"
        )
    elif kind == 3:  # rename an in-tree relative link to where it escapes
        body = "diff --git a/src/deep/up b/up\nsimilarity index 100%\nrename from src/deep/up\nrename to up\n"
    elif kind == 4:  # create a link, then write through it
        body = create.replace(target, str(victim)) + (
            f"diff --git a/{path}/x b/{path}/x\nnew file mode 100644\n--- /dev/null\n+++ b/{path}/x\n"
            "@@ -0,0 +1 @@\n+owned\n"
        )
    else:
        body = create
    return (header + body).encode()


def _mutate_patch(rng: random.Random, base: bytes, victim: Path) -> bytes:
    kind = rng.randrange(20)
    text = base
    lines = text.split(b"\n")
    if kind == 0:
        return _replace_paths(text, rng, rng.choice(_VICTIM_PATHS).encode())
    if kind == 1:
        return _replace_paths(text, rng, rng.choice([b".git/hooks/post-checkout", b"src/.git/config", b".GIT/x"]))
    if kind == 2:
        return _symlink_patch(rng, victim)
    if kind == 3:  # mode games
        mode = rng.choice([b"160000", b"040000", b"100755", b"000000", b"777777", b"120000", b"100644x"])
        return text.replace(b"index ", b"old mode 100644\nnew mode " + mode + b"\nindex ", 1)
    if kind == 4:  # binary junk
        at = rng.randrange(len(text))
        return text[:at] + rng.randbytes(rng.randint(1, 400)) + text[at:]
    if kind == 5:
        return text + b"\nGIT binary patch\nliteral 12\n" + rng.randbytes(40) + b"\n\n"
    if kind == 6:  # huge or odd headers
        return rng.choice(
            [
                text.replace(b"Subject: ", b"Subject: " + b"S" * rng.randint(1000, 200_000), 1),
                b"Odd header without colon\n" + text,
                b"From: x\n" * 2000 + text,
                text.replace(b"diff --git", b"diff --git " + b"q" * 5000, 1),
            ]
        )
    if kind == 7:  # non-UTF-8 anywhere
        at = rng.randrange(len(text))
        return text[:at] + rng.choice([b"\xff\xfe", b"\xc3\x28", b"\x80", b"\xed\xa0\x80"]) + text[at:]
    if kind == 8:
        return text.replace(b"\n", b"\r\n")
    if kind == 9:  # truncated
        return text[: rng.randrange(1, len(text))]
    if kind == 10:  # over-long hunk
        hunk_lines = [i for i, line in enumerate(lines) if line[:1] in (b"+", b"-", b" ") and line != b"-- "]
        if hunk_lines:
            lines.insert(max(hunk_lines) + 1, b"+extra line the header does not count")
        return b"\n".join(lines)
    if kind == 11:  # NUL bytes
        at = rng.randrange(len(text))
        return text[:at] + b"\0" * rng.randint(1, 5) + text[at:]
    if kind == 12:  # giant paths
        return _replace_paths(text, rng, b"d/" * rng.randint(1, 300) + b"x" * rng.randint(200, 4200))
    if kind == 13:  # hunk header numbers
        return b"\n".join(
            (
                b"@@ -%d,%d +%d,%d @@" % tuple(rng.choice([0, 1, 5, 29, 30, 31, 10**9, 2**63]) for _ in range(4))
                if line.startswith(b"@@ ")
                else line
            )
            for line in lines
        )
    if kind == 14:  # drop or duplicate a line
        i = rng.randrange(len(lines))
        if rng.random() < 0.5:
            del lines[i]
        else:
            lines.insert(i, lines[i])
        return b"\n".join(lines)
    if kind == 15:  # two patches glued together
        return text + rng.choice([text, base])
    if kind == 16:  # paths with odd characters
        return _replace_paths(text, rng, rng.choice([b'"src/\\303\\251.c"', b"src/a b.c", b"src/\tx", b"-rf", b"~/x"]))
    if kind == 17:  # empty and whitespace-only patches
        return rng.choice([b"", b"\n", b"   \n\n", b"diff --git\n", b"--- \n+++ \n@@ @@\n"])
    if kind == 18:  # random bytes
        return rng.randbytes(rng.randint(1, 2000))
    # several mutations in a row
    for _ in range(rng.randint(2, 4)):
        text = _mutate_patch(rng, text, victim)
    return text


def hostile_patches(box: Sandbox, count: int, seed: int) -> Iterator[tuple[str, bytes]]:
    rng = random.Random(seed)
    for index in range(count):
        base = rng.choice(box.base_patches)
        yield f"patch#{index}", _mutate_patch(rng, base, box.root / "victim")


def run_patch_cases(box: Sandbox, count: int, seed: int, tally: Tally) -> Tally:
    for case, data in hostile_patches(box, count, seed):
        for old in box.series_dir.iterdir():
            old.unlink()
        (box.series_dir / PATCH_NAME).write_bytes(data)
        commands = [["lint"], ["apply"]]
        if box.tree.exists():
            commands.append(["export", "main", "--check"])
        judge(tally, box, case, commands)
    return tally


# ---------------------------------------------------------------- hostile configs


def _alias_bomb(rng: random.Random) -> str:
    width, depth = rng.randint(5, 12), rng.randint(5, 12)
    lines = ["a0: &a0 [" + ",".join(['"lol"'] * width) + "]"]
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * width) + "]" for i in range(1, depth)]
    return "\n".join(lines) + "\n"


def _mutate_config(rng: random.Random, box: Sandbox, text: str) -> tuple[str | bytes, bool]:
    """A hostile matrix.yaml and whether `apply` should also run on it (a pypi-sdist URL)."""
    kind = rng.randrange(18)
    if kind == 0:
        tag = rng.choice(
            [
                "!!python/object/apply:os.system ['touch x']",
                "!custom 1",
                "!!binary '@@'",
                "!!set {a}",
                "!!float nope",
                "!!timestamp 2020-99-99",
                "!!python/name:os.system",
                "!!int 0xZZ",
            ]
        )
        return text.replace("branch: main", f"branch: {tag}") if rng.random() < 0.5 else text + f"x: {tag}\n", False
    if kind == 1:
        bomb = _alias_bomb(rng)
        return (bomb + text if rng.random() < 0.5 else text.replace("env: {CC: cc}", "env: " + "{}") + bomb), False
    if kind == 2:
        depth = rng.randint(60, 200_000)
        return text + rng.choice(["deep: " + "[" * depth + "]" * depth, "deep: " + "{a: " * depth + "}" * depth]), False
    if kind == 3:  # wrong types
        key = rng.choice(["url", "branch", "pin", "upstream", "dir", "command", "timeout", "env", "build", "version"])
        value = rng.choice(["[]", "{}", "null", "true", "12", "1.5", "[[1]]", '""', "~", "-1", "0"])
        return _set_key(text, key, value), False
    if kind == 4:
        return text.replace("cc}", "c\x00c}") if rng.random() < 0.5 else text.replace("main", "ma\\0in", 1), False
    if kind == 5:
        url = rng.choice(
            [
                "ext::sh -c 'touch x'",
                "fd::7",
                "-oProxyCommand=x",
                "ftp://x/y",
                "ssh://-oProxy/x",
                "file:///nonexistent",
                "https://example.invalid/x",
                "",
                " ",
                "\\x07",
                "c:foo",
                "pypi-sdist:../x?versions=1",
                "pypi-sdist:evilpkg?versions=1.0&subdir=vendor/llama.cpp",
                "pypi-sdist:evilpkg-two?versions=1.0&subdir=../..",
                "javascript:x",
            ]
        )
        return text.replace(f"url: {box.upstream}", f"url: {url!r}".replace("'", '"', 2) if url else "url:"), True
    if kind == 6:
        ref = rng.choice(
            [
                "-x",
                "a..b",
                "x.lock",
                "a b",
                "a~1",
                "a^",
                "a:b",
                "@",
                "@{-1}",
                "x/",
                ".x",
                "a//b",
                "*",
                "a\\\\b",
                "[",
                "refs/heads/ok",
                "HEAD",
                "\\t",
            ]
        )
        return text.replace("branch: main", f'branch: "{ref}"'), False
    if kind == 7:
        key = rng.choice(["A=B", "1X", "", "A B", "PATH=", "=", "X\\0"])
        return text.replace("env: {CC: cc}", f'env: {{"{key}": v}}'), False
    if kind == 8:
        number = rng.choice(["1e400", str(10**40), str(2**63), "-0", ".inf", ".nan", "0x10", "1_000"])
        return text.replace("timeout: 60", f"timeout: {number}"), False
    if kind == 9:  # byte flips
        data = bytearray(text.encode())
        for _ in range(rng.randint(1, 10)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        return bytes(data), False
    if kind == 10:
        return text[: rng.randrange(len(text))], False
    if kind == 11:  # duplicate and unknown keys
        return text.replace(
            "    branch: main\n",
            "    branch: main\n    branch: dev\n" if rng.random() < 0.5 else "    branch: main\n    surprise: 1\n",
        ), False
    if kind == 12:
        return text.replace("branch: main", "branch: " + "b" * rng.randint(1000, 500_000)), False
    if kind == 13:
        return text.encode().replace(b"main", b"ma\xffin", 1), False
    if kind == 14:
        return text.replace("  ", "\t", rng.randint(1, 3)), False
    if kind == 15:
        return "base: &base {upstream: up}\n" + text.replace("    upstream: up", "    <<: *base"), False
    if kind == 16:
        return text.replace(
            "dir: patches/main",
            rng.choice(
                ["dir: ../outside", "dir: /etc", "dir: patches/../../x", 'dir: "pat\\0ches"', "dir: " + "d/" * 3000]
            ),
        ), False
    result: str | bytes = text
    for _ in range(rng.randint(2, 3)):
        result, _ = _mutate_config(rng, box, result if isinstance(result, str) else result.decode("latin-1"))
    return result, False


def _set_key(text: str, key: str, value: str) -> str:
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line.strip().startswith(key + ":") or line.strip().startswith("- " + key + ":"):
            indent = line[: len(line) - len(line.lstrip())]
            prefix = "- " if line.strip().startswith("- ") else ""
            lines[i] = f"{indent}{prefix}{key}: {value}"
            break
    return "\n".join(lines)


def hostile_configs(box: Sandbox, count: int, seed: int) -> Iterator[tuple[str, str | bytes, bool]]:
    rng = random.Random(seed)
    for index in range(count):
        text, fetch = _mutate_config(rng, box, box.config_text())
        yield f"config#{index}", text, fetch


def run_config_cases(box: Sandbox, count: int, seed: int, tally: Tally) -> Tally:
    config = box.project / "matrix.yaml"
    for old in box.series_dir.iterdir():
        old.unlink()
    with _env(PIP_INDEX_URL=index_url(box)):
        for case, text, fetch in hostile_configs(box, count, seed):
            config.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8", "surrogateescape"))
            commands = [["lint", "--no-apply"], ["matrix", "check"]]
            if fetch:
                commands.append(["apply"])
            judge(tally, box, case, commands)
    config.write_text(box.config_text())
    return tally


@contextlib.contextmanager
def _env(**values: str) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
