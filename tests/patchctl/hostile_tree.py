"""Random hostile downstream repositories, every command run on each, and the judge of the
whole (issue 31, item 8): used by tests/patchctl/test_property_whole.py.

A template is built once: a local git upstream (a pin, and a tip whose subject and file name
are hostile), and a downstream made by `patchctl init` with a two-patch series, a vendored
copy, a pin file, a gate, a canary and its rendered workflows, committed. Each example copies
it next to an `outside/` directory and a fresh directory for `init`, then applies a list of
hostile additions (`Addition`): symlinks into `.git`, out of the repository, through chains
and loops; FIFOs; character devices (as root); state planted where patchctl keeps its own
(journals, pin-sync states, the lock, trees) with hostile contents; names with newlines,
`::`, `%`, `.GIT`, `git~1`; hostile git config (hostile_git.py: hooks, fsmonitor, drivers
named by a `.gitattributes`, a promisor's upload-pack...) in the downstream's own `.git` or a
git directory's files planted in the work tree, each payload writing under `outside/`; links,
FIFOs and hard links at the paths of patchctl's logs; its state directory given to another user
(as root). Some examples run every command while a thread swaps the directories patchctl uses
for links out of the repository and back (racing swaps). Then every command runs in-process,
each under a time bound, and `Judge` says what went wrong:

  outside        anything under `outside/`, the upstream, `.git` (less `.git/patchctl`) or a
                 work-tree path patchctl does not manage differs from before the commands;
  exit           an exit code outside {0, 1, 2, 3};
  traceback      a Python traceback, or anything raised out of `main`;
  error lines    more than one `patchctl: error:` line, or none on exit 2 or 3;
  slow           a command past the bound (a hang is cut off there, and reported);
  escaping link  a symlink in the applied tree that leads out of it.

Nothing here touches a path outside the example's own directory: every addition is made
below it, and devices are made only there (never /dev itself).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import stat
import threading
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from hypothesis import strategies as st

from patchctl import git

from .conftest import Repo, make_patch, numbered, run_cli
from .hostile_gen import _escaping_links
from .hostile_git import GITATTRIBUTES, Payloads, embedded_git_dir, plant

DOCUMENTED_EXIT_CODES = {0, 1, 2, 3}
UPSTREAM = "main"
SERIES = "main"
SERIES_DIR = "patches/main"
VENDOR_TO = "third_party/up/src"
PIN_FILE = "Makefile"

# What patchctl may write in the downstream (matrix.yaml and what it names, its state and trees).
MANAGED = (
    "matrix.yaml",
    PIN_FILE,
    "patches",
    VENDOR_TO,
    ".github/workflows",
    "templates",
    ".pre-commit-config.yaml",
    ".patchctl",
    "backend/index.yaml",
)
# In the fresh directory `init` writes these.
# init also adds `.patchctl/` to .gitignore, and makes the (empty) `.patchctl/` git is asked about
MANAGED_BY_INIT = ("matrix.yaml", "templates", ".pre-commit-config.yaml", ".gitignore", ".patchctl")

# Every command, in an order that reaches deep: a tree applied before export and the gate,
# a stopped sync (if any) before --continue and --abort. ("init" runs in the fresh directory.)
COMMANDS: tuple[tuple[str, ...], ...] = (
    ("lint",),
    ("apply",),
    ("gate", SERIES),
    ("export", SERIES, "--check"),
    ("export", SERIES),
    ("vendor", "--check"),
    ("vendor",),
    ("export", SERIES, "--from-vendor", "-m", "Take the vendored edits back"),
    ("matrix", "check"),
    ("matrix", "render"),
    ("canary", "--no-compile", "--no-bisect"),
    ("pin-sync", UPSTREAM, "--latest", "--dry-run"),
    ("pin-sync", UPSTREAM, "--latest"),
    ("pin-sync", "--continue"),
    ("pin-sync", "--abort"),
)
INIT_COMMANDS: tuple[tuple[str, ...], ...] = (("init",), ("init", "--force"))


# ---------------------------------------------------------------- the template


@dataclass(frozen=True)
class Template:
    upstream: Path
    project: Path
    fresh: Path
    pin: str


def build_template(base: Path) -> Template:
    """The upstream and the committed downstream every example copies (see the module's docstring)."""
    upstream = Repo(base / "upstream")
    main_c, util_c = numbered(40, "main"), numbered(20, "util")
    pin = upstream.commit(
        {
            "src/main.c": main_c,
            "src/util.c": util_c,
            "include/util.h": "int util;\n",
            "CMakeLists.txt": "project(up)\n",
        },
        "initial",
    )
    git.run(["branch", "-M", "main"], upstream.path)
    first = make_patch(upstream, pin, {"src/main.c": main_c.replace("main 20\n", "main 20 patched\n")}, "Patch main")
    second = make_patch(
        upstream, pin, {"src/util.c": util_c.replace("util 5\n", "util 5 patched\n"), "src/new.c": "int n;\n"}, "Util"
    )
    # A branch whose tip conflicts with the first patch: pin-sync stops there (the `branch` addition).
    git.run(["checkout", "-q", "-b", "conflicting"], upstream.path)
    upstream.commit({"src/main.c": main_c.replace("main 20\n", "main 20 upstream\n")}, "Upstream edits line 20")
    git.run(["checkout", "-q", "main"], upstream.path)
    # The tip pin-sync and the canary move to: a hostile subject and file name from upstream.
    upstream.commit(
        {"include/util.h": "int util;\nint more;\n", "src/odd\n::warning::name%0A.c": "x\n"},
        "Upstream @mention #1 </details>\r\n* forged entry\n\n::error::from a subject",
    )
    project = base / "project"
    project.mkdir()
    git.init_repo(project)
    # A published action at a commit this checkout does not hold (render refuses an unset or local-only one).
    action = "patchctl/patchctl@" + "c0ffee00" * 5
    created = run_cli(
        "-C", project, "init", "--upstream-url", upstream.path, "--pin", pin, "--name", UPSTREAM, "--action", action
    )
    assert created.exit_code == 0, created.output
    config = yaml.safe_load((project / "matrix.yaml").read_text())
    config["upstreams"][UPSTREAM]["pin_files"] = [{"path": PIN_FILE, "pattern": "UP_PIN [?]= (?P<pin>[0-9a-f]{40})"}]
    series = config["series"][SERIES]
    series.pop("allow_empty", None)
    series["vendor"] = [{"from": "src", "to": VENDOR_TO}]
    series["gates"] = [{"name": "noop", "command": "true", "timeout": 30}]
    config["canary"] = {
        "upstream": UPSTREAM,
        "toolchains": [{"name": "cpu", "tag-suffix": "-cpu", "cuda-major-version": "", "image": "alpine:3"}],
    }
    config["canary"]["toolchains"][0]["command"] = "true"
    (project / "matrix.yaml").write_text(yaml.safe_dump(config, sort_keys=False, width=200))
    (project / PIN_FILE).write_text(f"UP_PIN ?= {pin}\n")
    (project / SERIES_DIR).mkdir(parents=True)
    (project / SERIES_DIR / "0001-Patch-main.patch").write_text(first)
    (project / SERIES_DIR / "0002-Util.patch").write_text(second)
    (project / "README.md").write_text("# downstream\n")
    (project / "src-local").mkdir()
    (project / "src-local" / "own.c").write_text("int own;\n")
    for args in (("vendor",), ("matrix", "render")):
        done = run_cli("-C", project, *args)
        assert done.exit_code == 0, done.output
    git.commit_all(project, "downstream")
    fresh = base / "fresh"
    fresh.mkdir()
    git.init_repo(fresh)
    return Template(upstream.path, project, fresh, pin)


# ---------------------------------------------------------------- hostile additions

# Where additions go in the downstream ("" is its top), and in the fresh directory.
PLACES = (
    "",
    "patches",
    SERIES_DIR,
    "third_party",
    "third_party/up",
    VENDOR_TO,
    ".github",
    ".github/workflows",
    "templates",
    ".patchctl",
    ".patchctl/trees",
    "src-local",
)
FRESH_PLACES = ("", "templates")
# What is already there, to be replaced by something hostile.
EXISTING = (
    "matrix.yaml",
    PIN_FILE,
    "patches",
    SERIES_DIR,
    f"{SERIES_DIR}/0001-Patch-main.patch",
    "third_party",
    VENDOR_TO,
    f"{VENDOR_TO}/main.c",
    ".github/workflows",
    ".github/workflows/ci.yml",
    "templates",
    "templates/ci.yml.j2",
    ".pre-commit-config.yaml",
    "README.md",
)
NAMES = (
    "x",
    "0003-extra.patch",
    "a\nb",
    "0004-a\nb.patch",
    "evil\n::warning::pwn.patch",
    "x::y.patch",
    "%0A%25.patch",
    "0005-\x1b[31mred\r.patch",
    "100%.c",
    ".GIT",
    ".git.",
    "git~1",
    "GIT~1",
    ".Git",
    "-rf",
    "a b",
    "\u202egnp.patch",
    "hooks",
    "main",
    "series",
    "ci.yml",
    "main.c",
    "..x",
)
# Link targets: OUT (the outside directory, relative), ABS_OUT (absolute), GIT (the repository's
# .git, relative), SELF (the link's own name: a loop); anything else is written as it is. None
# leads above the example's directory (`/` is ABS_OUT's stand-in): a bug that wrote through one
# must land where the snapshots look, never in the machine's own files.
LINK_TARGETS = (
    "OUT",
    "OUT/victim.txt",
    "ABS_OUT",
    "GIT",
    "GIT/hooks",
    "GIT/objects",
    "GIT/config",
    "SELF",
    ".",
    "..",
    "b/..",
    "nowhere/at/all",
)
# Where a `git-config` addition plants hostile config: the downstream's own git directory, or a
# git directory's files (HEAD, config, objects/, refs/: what a checkout can carry) in its work tree.
GIT_CONFIG_PLACES = (".git", f"{VENDOR_TO}/evil.git", "third_party/evil", ".patchctl/trees/main", "src-local/.git-x")
COPY = b"COPY"  # a file's content: the series' first patch
# Where the commands write their logs (the gate "noop" of the series, pin-sync's gates of it).
LOG_PATHS = (
    f".patchctl/gates/{SERIES}/01-noop.log",
    f".patchctl/logs/pin-sync/{UPSTREAM}/{SERIES}/01-noop.log",
)
STRANGER = 4242  # the uid of another user (devices and ownership: as root only)
# The directories a racing example swaps for links to directories under `outside/` while it runs.
RACED = (
    ".patchctl",
    ".patchctl/trees",
    f".patchctl/trees/{SERIES}",
    ".patchctl/gates",
    f".patchctl/sync/{UPSTREAM}",
    f".patchctl/logs/pin-sync/{UPSTREAM}/{SERIES}",
    "patches",
    SERIES_DIR,
)
STATE_FILES = (
    ".patchctl/journal.json",
    ".git/patchctl/journal.json",
    f".patchctl/sync/{UPSTREAM}/state.json",
    f".git/patchctl/sync/{UPSTREAM}/state.json",
    ".patchctl/pin-update.journal.json",
)
# Paths a planted journal or state names: outside, inside .git, managed, spelled oddly.
STATE_TARGETS = (
    "ABS_OUT/victim.txt",
    "ABS_OUT",
    "ROOT/.git/HEAD",
    "ROOT/.git/config",
    "ROOT/.GIT/config",
    "ROOT/matrix.yaml",
    f"ROOT/{SERIES_DIR}/0001-Patch-main.patch",
    f"ROOT/{SERIES_DIR}/../../.git/config",
    f"ROOT/{SERIES_DIR}/a\0b.patch",
    "ROOT/README.md",
    "ROOT/linked/x",
    f"ROOT/.patchctl/sync/{UPSTREAM}/{SERIES}",
    "relative/path",
    "",
)


@dataclass(frozen=True)
class Addition:
    """One hostile thing made in an example: KIND at PLACE/NAME (or in place of the existing
    path NAME when PLACE is None), in the downstream or (FRESH) the fresh directory. DETAIL:
    a link's target, a device's minor number, a file's bytes."""

    kind: str  # link, chain, loop, fifo, device, file, dir, state, lock, git-state-link, trees, git-config
    place: str | None
    name: str
    detail: object = None
    fresh: bool = False


@dataclass
class Example:
    base: Path
    project: Path
    fresh: Path
    outside: Path
    made: list[str] = field(default_factory=list)  # what was made, for the failure message


def state_json(draw) -> bytes:
    """A journal or pin-sync state: plausible, damaged or hostile (drawn)."""
    form = draw(st.sampled_from(["journal", "sync", "raw"]))
    target = draw(st.sampled_from(STATE_TARGETS))
    if form == "raw":
        return draw(
            st.sampled_from(
                [
                    b"{not json",
                    b"",
                    b"\0\0\0",
                    b'{"state": "prepared", "entries": ' + b"[" * 50_000 + b"]" * 50_000 + b"}",
                ]
            )
        )
    if form == "journal":
        entries = []
        for index in range(draw(st.integers(1, 3))):
            named = draw(st.sampled_from(STATE_TARGETS)) if index else target
            staged, backup = (
                draw(st.sampled_from(["beside", "none", "outside"])),
                draw(st.sampled_from(["beside", "none"])),
            )
            entries.append(
                {
                    "target": named,
                    "staged": None if staged == "none" else f"{named}.staged" if staged == "outside" else "BESIDE-new",
                    "backup": None if backup == "none" else "BESIDE-old",
                }
            )
        nested = draw(st.booleans())
        state = draw(st.sampled_from(["staging", "prepared", "committed", "planted"]))
        data: object = {"state": state, "entries": [entries] if nested else entries}
    else:
        data = {
            "upstream": UPSTREAM,
            "old_pin": "0" * 40,
            "target": "1" * 40,
            "target_spec": "--latest",
            "series": [{"name": SERIES, "upstream": UPSTREAM, "tree": target, "digest": "x", "next": 0}],
            "records": [],
            "phase": draw(st.sampled_from(["conflict", "gates-failed", "replaying", "other"])),
            "version": draw(st.sampled_from([1, 2])),
        }
    return json.dumps(data).encode()


@st.composite
def additions(draw, devices: bool, blocking: bool = False) -> Addition:
    """One hostile addition. BLOCKING: one of those that stop every command at its start
    (planted state, a lock, trees, `.git/patchctl`, matrix.yaml replaced): drawn apart, so that
    most examples let the commands go deep."""
    if blocking:
        kinds = ["state", "lock", "git-state-link", "trees", "replace-config"] + (["foreign-state"] if devices else [])
    else:
        kinds = ["link", "chain", "loop", "fifo", "file", "dir", "replace", "branch", "log"]
        kinds += ["device"] if devices else []
    kind = draw(st.sampled_from(kinds))
    if kind == "log":  # something where patchctl writes a log: never written through, never waited on
        what = draw(st.sampled_from(["link", "fifo", "hardlink", "dir-link"]))
        target = draw(st.sampled_from(["OUT/victim.txt", "ABS_OUT", "GIT/config", "SELF"])) if what == "link" else None
        return Addition("log-" + what, None, draw(st.sampled_from(LOG_PATHS)), target)
    if kind == "foreign-state":  # .git/patchctl (with a planted journal) made by another user
        return Addition(kind, None, ".git/patchctl", state_json(draw))
    if kind == "branch":
        return Addition(kind, None, "matrix.yaml", "conflicting")
    if kind == "replace-config":
        what = draw(st.sampled_from(["link", "fifo", "dir", "file"] + (["device"] if devices else [])))
        detail = draw(st.sampled_from(LINK_TARGETS)) if what == "link" else what
        return Addition("replace-" + what, None, "matrix.yaml", detail, draw(st.booleans()))
    fresh = kind in ("link", "fifo", "file", "replace") and draw(st.integers(0, 5)) == 0
    places = FRESH_PLACES if fresh else PLACES
    if kind in ("link", "fifo", "device", "file", "dir"):
        place, name = draw(st.sampled_from(places)), draw(st.sampled_from(NAMES))
        detail = {
            "link": lambda: draw(st.sampled_from(LINK_TARGETS)),
            "device": lambda: draw(st.sampled_from([3, 5])),  # 1,3 (null) and 1,5 (zero): made in the example only
            "file": lambda: draw(st.sampled_from([b"", b"junk\n", b"From 0 Mon Sep 17 00:00:00 2001\n", b"\0", COPY])),
        }.get(kind, lambda: None)()
        return Addition(kind, place, name, detail, fresh)
    if kind in ("chain", "loop"):
        return Addition(kind, draw(st.sampled_from(places)), draw(st.sampled_from(["s1", "l1", "x"])))
    if kind == "replace":
        existing = ("matrix.yaml", "templates", ".pre-commit-config.yaml") if fresh else EXISTING[1:]
        name = draw(st.sampled_from(existing))
        with_what = draw(st.sampled_from(["link", "fifo", "dir", "file"] + (["device"] if devices else [])))
        detail = draw(st.sampled_from(LINK_TARGETS)) if with_what == "link" else with_what
        return Addition("replace-" + with_what, None, name, detail, fresh)
    if kind == "state":
        return Addition(kind, None, draw(st.sampled_from(STATE_FILES)), state_json(draw))
    if kind == "lock":
        where = draw(st.sampled_from([".git/patchctl/lock", ".patchctl/lock"]))
        return Addition(kind, None, where, draw(st.sampled_from(["dir", "fifo", "link", "file"])))
    if kind == "git-state-link":
        return Addition(kind, None, ".git/patchctl", draw(st.sampled_from(["ABS_OUT", "OUT", "file"])))
    where = draw(st.sampled_from([".patchctl/trees", f".patchctl/trees/{SERIES}", f".patchctl/sync/{UPSTREAM}"]))
    return Addition("trees", None, where, draw(st.sampled_from(["file", "link", "fifo", "dir"])))


def git_config_additions() -> st.SearchStrategy[Addition]:
    """Hostile git config in the downstream's own .git, or a git directory's files in its work
    tree (drawn apart from `additions`, whose fixed draws the default run keeps)."""
    return st.sampled_from(GIT_CONFIG_PLACES).map(lambda place: Addition("git-config", None, place))


def new_example(template: Template, base: Path) -> Example:
    base.mkdir(parents=True)
    project, fresh, outside = base / "project", base / "fresh", base / "outside"
    shutil.copytree(template.project, project, symlinks=True)
    shutil.copytree(template.fresh, fresh, symlinks=True)
    outside.mkdir()
    (outside / "victim.txt").write_text("do not touch\n")
    (outside / "main").mkdir()
    (outside / "main" / "0001-Patch-main.patch").write_text("not a patch of this repository\n")
    (outside / ".victim.txt.patchctl-old-0").write_text("a backup-looking file\n")
    return Example(base, project, fresh, outside)


def _link_target(spec: str, link: Path, example: Example, repository: Path) -> str:
    here = link.parent
    if spec.startswith("OUT"):
        return os.path.relpath(example.outside, here) + spec[len("OUT") :]
    if spec == "ABS_OUT":
        return str(example.outside)
    if spec.startswith("GIT"):
        return os.path.relpath(repository / ".git", here) + spec[len("GIT") :]
    if spec == "SELF":
        return link.name
    return spec


def _state_text(data: bytes, example: Example, path: Path) -> bytes:
    """DATA with its placeholders (ROOT, ABS_OUT, BESIDE-new/old) made real paths."""
    if not data.startswith(b"{") or b"[" * 100 in data:
        return data
    try:
        parsed = json.loads(data)
    except ValueError:
        return data

    def real(value: object, target: str = "") -> object:
        if not isinstance(value, str):
            return value
        if value.startswith("BESIDE-"):
            target_path = Path(target)
            return str(target_path.with_name(f".{target_path.name}.patchctl-{value[len('BESIDE-') :]}-0"))
        return value.replace("ROOT", str(example.project)).replace("ABS_OUT", str(example.outside))

    def walk(node: object) -> object:
        if isinstance(node, list):
            return [walk(item) for item in node]
        if isinstance(node, dict):
            target = str(real(node.get("target", node.get("tree", ""))))
            return {
                key: walk(value) if isinstance(value, (list, dict)) else real(value, target)
                for key, value in node.items()
            }
        return real(node)

    return json.dumps(walk(parsed)).encode()


def _clear(path: Path) -> None:
    """Remove PATH (a file, link or directory, never followed) so something else can take its place."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()


def _make(path: Path, what: str, detail: object, example: Example, repository: Path) -> None:
    if detail == COPY:  # a real patch of the series, under a hostile name
        detail = (example.project / SERIES_DIR / "0001-Patch-main.patch").read_bytes()
    path.parent.mkdir(parents=True, exist_ok=True)
    if what == "link":
        os.symlink(_link_target(str(detail), path, example, repository), path)
    elif what == "fifo":
        os.mkfifo(path)
    elif what == "device":
        os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, int(detail) if isinstance(detail, int) else 3))
    elif what == "dir":
        path.mkdir()
    else:
        path.write_bytes(detail if isinstance(detail, bytes) else b"planted\n")


def apply_addition(example: Example, addition: Addition) -> None:
    """Make ADDITION in EXAMPLE; one that cannot be made there (its place is now a file, say) is skipped."""
    repository = example.fresh if addition.fresh else example.project
    try:
        _apply(example, addition, repository)
    except (OSError, ValueError) as exc:  # a name the file system refuses, a place that became a file
        example.made.append(f"skipped {addition} ({exc})")
        return
    example.made.append(repr(addition))


def _apply(example: Example, addition: Addition, repository: Path) -> None:
    kind = addition.kind
    if kind in ("chain", "loop"):
        below = Path(addition.place or "")
    elif kind.startswith("midway-") or addition.place is None:
        below = Path(addition.name)
    else:
        below = Path(addition.place) / addition.name
    for parent in reversed((repository / below).relative_to(repository).parents):
        if (repository / parent).is_symlink():  # an earlier addition's link: never made through
            raise FileExistsError(f"{parent} is a link")
    if kind in ("link", "fifo", "device", "file", "dir"):
        path = repository / addition.place / addition.name if addition.place else repository / addition.name
        if os.path.lexists(path):
            raise FileExistsError(str(path))
        _make(path, kind, addition.detail, example, repository)
    elif kind == "chain":  # each link alone stays inside; together `s1` leads out (issue 31's chain)
        place = repository / addition.place if addition.place else repository
        place.mkdir(parents=True, exist_ok=True)
        if os.path.lexists(place / "d0") or os.path.lexists(place / addition.name):
            raise FileExistsError(str(place))
        os.symlink(".", place / "d0")
        up = "../" * len(place.relative_to(example.base).parts)  # d0/d0/d0 is PLACE: this climbs to the example
        os.symlink(f"d0/d0/d0/{up}outside", place / addition.name)
    elif kind == "loop":
        place = repository / addition.place if addition.place else repository
        place.mkdir(parents=True, exist_ok=True)
        os.symlink(f"{addition.name}-b", place / f"{addition.name}-a")
        os.symlink(f"{addition.name}-a/x", place / f"{addition.name}-b")
    elif kind.startswith("replace-"):
        path = repository / addition.name
        _clear(path)
        what = kind[len("replace-") :]
        detail = addition.detail if what == "link" else (5 if what == "device" else None)
        _make(path, what, detail, example, repository)
    elif kind.startswith("midway-"):  # in place of what is there (a tree, a file in it), or new
        path = repository / addition.name
        _clear(path)
        _make(path, kind[len("midway-") :], addition.detail, example, repository)
    elif kind == "branch":
        config = repository / "matrix.yaml"
        config.write_text(config.read_text().replace("branch: main", f"branch: {addition.detail}"))
    elif kind == "state":
        path = repository / addition.name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(_state_text(addition.detail, example, path))
    elif kind in ("lock", "trees"):  # a lock file, or .patchctl/trees, replaced by something else
        path = repository / addition.name
        path.parent.mkdir(parents=True, exist_ok=True)
        _clear(path)
        what = str(addition.detail)
        content = b"pid 1\n" if kind == "lock" else b"not a tree\n"
        _make(path, what, "ABS_OUT" if what == "link" else content, example, repository)
    elif kind == "git-config":
        # Every payload writes its marker under outside/, which the judge compares.
        payloads = Payloads(example.base / f"payloads-{len(example.made)}", example.outside)
        path = repository / addition.name
        if addition.name == ".git":
            plant(path, payloads)
        else:
            if os.path.lexists(path):
                raise FileExistsError(str(path))
            embedded_git_dir(path, payloads, path)
        if not os.path.lexists(repository / ".gitattributes"):
            (repository / ".gitattributes").write_text(GITATTRIBUTES)
    elif kind.startswith("log-"):
        path = repository / addition.name
        path.parent.mkdir(parents=True, exist_ok=True)
        _clear(path)
        what = kind[len("log-") :]
        if what == "hardlink":
            os.link(example.outside / "victim.txt", path)
        elif what == "dir-link":  # the directory the log goes in
            _clear(path.parent)
            os.symlink(_link_target("OUT", path.parent, example, repository), path.parent)
        else:
            _make(path, what, addition.detail, example, repository)
    elif kind == "foreign-state":
        path = repository / addition.name
        _clear(path)
        path.mkdir()
        (path / "journal.json").write_bytes(_state_text(addition.detail, example, path / "journal.json"))
        for name in (path, path / "journal.json"):
            os.lchown(name, STRANGER, STRANGER)
    elif kind == "git-state-link":
        path = repository / addition.name
        _clear(path)
        if addition.detail == "file":
            path.write_text("not a directory\n")
        else:
            os.symlink(_link_target(str(addition.detail), path, example, repository), path)


# ---------------------------------------------------------------- snapshots and the judge


def snapshot(root: Path, skip: tuple[str, ...]) -> dict[str, tuple]:
    """Every entry under ROOT by lstat (no link followed, no FIFO or device opened) but the
    paths SKIP (relative to ROOT) and what is below them: a file's bytes and mode, a link's
    target, a directory, or the kind and device number of anything else."""
    found: dict[str, tuple] = {}
    if not os.path.lexists(root):
        return found
    for current, dirs, files in os.walk(root):
        here = Path(current)
        relative_here = here.relative_to(root)
        dirs[:] = [d for d in dirs if (relative_here / d).as_posix() not in skip]
        for name in dirs + files:
            full = here / name
            relative = (relative_here / name).as_posix()
            if relative in skip:
                continue
            info = full.lstat()
            if stat.S_ISLNK(info.st_mode):
                found[relative] = ("link", os.readlink(full))
            elif stat.S_ISDIR(info.st_mode):
                found[relative] = ("dir", stat.S_IMODE(info.st_mode))
            elif stat.S_ISREG(info.st_mode):
                found[relative] = ("file", full.read_bytes(), stat.S_IMODE(info.st_mode))
            else:
                found[relative] = (oct(stat.S_IFMT(info.st_mode)), info.st_rdev)
    return found


def outside_state(example: Example, upstream: Path) -> dict[str, dict[str, tuple]]:
    """Everything patchctl must leave as it is: the outside directory, the upstream, each
    repository's `.git` less `.git/patchctl`, and each work tree less the paths patchctl manages."""
    return {
        "example": snapshot(example.base, ("project", "fresh", "outside")),
        "outside": snapshot(example.outside, ()),
        "upstream": snapshot(upstream, ()),
        "project": snapshot(example.project, (*MANAGED, ".git/patchctl")),
        "fresh": snapshot(example.fresh, (*MANAGED_BY_INIT, ".git/patchctl")),
    }


class Hung(BaseException):
    """A command ran past its bound (raised by SIGALRM in the command's own thread)."""


@contextmanager
def time_bound(seconds: float) -> Iterator[None]:
    def stop(_signum, _frame):
        raise Hung(f"still running after {seconds:.0f} s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@dataclass
class Outcome:
    args: tuple[str, ...]
    exit_code: int | None
    output: str
    seconds: float

    def summary(self) -> str:
        last = [line for line in self.output.splitlines() if line.strip() and line != "--- stderr ---"][-1:]
        return f"{' '.join(self.args)}: exit {self.exit_code} in {self.seconds:.2f} s: {(last or [''])[0][:160]!r}"


def run_bounded(directory: Path, args: tuple[str, ...], seconds: float) -> Outcome:
    """`patchctl -C DIRECTORY ARGS` in-process (conftest.run_cli), cut off after SECONDS."""
    start = time.monotonic()
    try:
        with time_bound(seconds):
            result = run_cli("-C", directory, *args)
    except BaseException as exc:  # noqa: BLE001 - judging exactly this: anything raised out of main
        if isinstance(exc, KeyboardInterrupt):
            raise
        text = f"{type(exc).__name__}: {exc}" if isinstance(exc, Hung) else traceback.format_exc()
        return Outcome(args, None, text, time.monotonic() - start)
    return Outcome(
        args, result.exit_code, result.stdout + "\n--- stderr ---\n" + result.stderr, time.monotonic() - start
    )


def problems_of(outcome: Outcome, seconds: float) -> list[str]:
    """What is wrong with one command's OUTCOME (nothing when it is a verdict or one error line)."""
    shown = " ".join(outcome.args)
    found = []
    if outcome.exit_code is None:
        return [f"{shown}: raised out of main or hung: {outcome.output[-1500:]}"]
    if "Traceback (most recent call last)" in outcome.output:
        found.append(f"{shown}: traceback: {outcome.output[-1500:]}")
    if outcome.exit_code not in DOCUMENTED_EXIT_CODES:
        found.append(f"{shown}: exit {outcome.exit_code}: {outcome.output[-600:]}")
    stderr = outcome.output.split("\n--- stderr ---\n", 1)[-1]
    errors = [line for line in stderr.splitlines() if line.startswith("patchctl: error:")]
    if len(errors) > 1 or (outcome.exit_code in (2, 3) and len(errors) != 1):
        found.append(f"{shown}: exit {outcome.exit_code} with {len(errors)} error line(s): {stderr[-800:]}")
    if outcome.seconds > seconds:
        found.append(f"{shown}: took {outcome.seconds:.1f} s (bound {seconds:.0f} s)")
    return found


def differences(before: dict[str, dict[str, tuple]], after: dict[str, dict[str, tuple]]) -> list[str]:
    found = []
    for area, entries in before.items():
        now = after[area]
        for path in sorted(set(entries) | set(now)):
            if entries.get(path) != now.get(path):
                was, is_now = entries.get(path), now.get(path)
                found.append(f"{area}/{path}: {str(was)[:120]} -> {str(is_now)[:120]}")
    return found


def run_every_command(
    example: Example, upstream: Path, seconds: float, midway: list[Addition] = (), racing: bool = False
) -> tuple[list[str], list[Outcome]]:
    """Run every command on EXAMPLE, making each of MIDWAY's additions once the command it names
    (its `place`) has run; RACING: while a thread swaps the directories of RACED for links out of
    the repository and back; (the problems found, every outcome)."""
    racer = Racer(example) if racing else None  # (its directories outside made before the snapshot)
    before = outside_state(example, upstream)
    outcomes, found = [], []
    if racer is not None:
        racer.start()
    try:
        found += _run_commands(example, seconds, midway, outcomes)
    finally:
        if racer is not None:
            racer.stop.set()
            racer.join(timeout=30)
            found += [f"the racing thread failed: {racer.failure!r}"] if racer.failure else []
            racer.tidy()
    outcomes += [run_bounded(example.fresh, args, seconds) for args in INIT_COMMANDS]
    found += [problem for outcome in outcomes for problem in problems_of(outcome, seconds)]
    found += [f"changed: {line}" for line in differences(before, outside_state(example, upstream))]
    return found, outcomes


class Racer(threading.Thread):
    """Swaps each directory of RACED (a real one, when it is there) for a link to a directory
    under `outside/` for a moment, and puts it back, over and over: what patchctl checked may be a
    link when it is used. The real directory waits beside it (`NAME.racing`)."""

    def __init__(self, example: Example):
        super().__init__(daemon=True)
        self.example = example
        self.stop = threading.Event()
        self.failure: BaseException | None = None
        for relative in RACED:
            (example.outside / "raced" / relative.replace("/", "__")).mkdir(parents=True, exist_ok=True)

    def run(self) -> None:
        twins = self.example.outside / "raced"
        try:
            while not self.stop.is_set():
                for relative in RACED:
                    self._swap(self.example.project / relative, twins / relative.replace("/", "__"))
        except BaseException as exc:  # noqa: BLE001 - reported as a problem of the example
            self.failure = exc

    def tidy(self) -> None:
        """Put back, or drop, what a swap left aside (`NAME.racing`) when patchctl made something
        new at the name meanwhile: the racer's own leftovers, not patchctl's."""
        for relative in RACED:
            path = self.example.project / relative
            away = path.with_name(path.name + ".racing")
            if not os.path.lexists(away):
                continue
            if not os.path.lexists(path):
                os.rename(away, path)
            else:
                shutil.rmtree(away)

    def _swap(self, path: Path, twin: Path) -> None:
        away = path.with_name(path.name + ".racing")
        try:
            if path.is_symlink() or not path.is_dir() or os.path.lexists(away):
                return
            os.rename(path, away)
            os.symlink(twin, path)
        except OSError:
            return
        time.sleep(0.002)
        if path.is_symlink():
            os.unlink(path)
        if os.path.lexists(path) or not os.path.lexists(away):
            return  # patchctl made a new one at the name, or deleted the old one with what held it
        with contextlib.suppress(OSError):
            os.rename(away, path)
        time.sleep(0.004)


def _run_commands(example: Example, seconds: float, midway, outcomes: list[Outcome]) -> list[str]:
    found = []
    for args in COMMANDS:
        outcomes.append(run_bounded(example.project, args, seconds))
        if args == ("apply",):  # the tree as apply published it (a midway addition may then edit it)
            tree = example.project / ".patchctl" / "trees" / SERIES
            if tree.is_dir() and not tree.is_symlink():
                found += [f"a link out of the applied tree: {link}" for link in _escaping_links(tree)]
        for addition in midway:
            if addition.place == " ".join(args):
                apply_addition(example, addition)
    return found


# What a user (or a script) may do between two commands: edit the applied tree or a stopped
# sync's tree, putting a link where a directory or file was. (command after which, path, what)
MIDWAY = (
    ("apply", f".patchctl/trees/{SERIES}", "link"),
    ("apply", f".patchctl/trees/{SERIES}/src", "link"),
    ("apply", f".patchctl/trees/{SERIES}/src/util.c", "link"),
    ("apply", f".patchctl/trees/{SERIES}/src/main.c", "fifo"),
    ("apply", f".patchctl/trees/{SERIES}", "fifo"),
    (f"pin-sync {UPSTREAM} --latest", f".patchctl/sync/{UPSTREAM}/{SERIES}", "fifo"),
    (f"pin-sync {UPSTREAM} --latest", f".patchctl/sync/{UPSTREAM}/{SERIES}", "link"),
    (f"pin-sync {UPSTREAM} --latest", f".patchctl/sync/{UPSTREAM}", "link"),
    (f"pin-sync {UPSTREAM} --latest", f".patchctl/sync/{UPSTREAM}/{SERIES}/src/main.c", "link"),
    (f"pin-sync {UPSTREAM} --latest", f".patchctl/sync/{UPSTREAM}/{SERIES}/src/evil.c", "link"),
    (f"pin-sync {UPSTREAM} --latest", f".patchctl/sync/{UPSTREAM}/{SERIES}/src", "fifo"),
)


@st.composite
def midway_additions(draw) -> Addition:
    after, path, what = draw(st.sampled_from(MIDWAY))
    detail = (
        draw(st.sampled_from(["OUT", "OUT/victim.txt", "ABS_OUT", "GIT", "GIT/config"])) if what == "link" else None
    )
    return Addition("midway-" + what, after, path, detail)
