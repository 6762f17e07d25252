"""Probe compiles: what the compile bisect builds at a commit instead of the whole project.

A build that fails at the tip names what failed in its own record, its log:

* ninja's failed edges (`FAILED: OUTPUT`);
* make's failed rules (`*** [RULES:LINE: TARGET] Error N`); with CMake's Makefiles only the
  rules of a `build.make` are edges, the `Makefile`/`Makefile2` lines above them are the
  recursion reporting the same failure;
* for other tools, the translation units the compiler's `error:` lines (and the `In file
  included from` chains above them) name.

A failed CMake unity source (`UNITY_BUILD`: one translation unit that includes a batch of
sources) stands for the sources of its batch that the errors name, each compiled alone with
the unity source's command: the batches change from commit to commit, the sources do not.

The compile command of each failed object comes from the `compile_commands.json` that the
build wrote in its tree (the canary asks CMake for one with `CMAKE_EXPORT_COMPILE_COMMANDS=ON`
in the build's environment). When every failed edge is the compile of a translation unit, a
probe at another commit checks the tree out there and compiles just those units, with their
commands as recorded, in the same runner (the same image and environment): the object and
dependency files go to `.patchctl-probe/` in the tree, so the build's own objects stay as
the build left them. Where the build's own files differ between the commit the commands
were recorded at and the probe (`CMakeLists.txt`, `*.cmake`, `*.in`: flags, include paths and
generated headers come from them), CMake derives them again first (`cmake BUILD_DIR`, in the
build directory CMake made). A unit whose source is gone at the probe, or commands that
cannot be derived again (no CMake cache beside them), make the probe a full build instead.

Probes share one ccache (its directory under `.patchctl-probe/`) when the build environment
has `ccache`; a toolchain image without it compiles the probes uncached, and the record says so.
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from dataclasses import field, replace
from pathlib import Path

from .. import git
from ..confined import Refused, Root, is_dotgit
from ..project.config import BuildStep
from ..records import dataclass
from .runners import Progress, run_build, tree_as_built

PROBE_DIR = ".patchctl-probe"
# CMake >= 3.17 reads this variable as the default of CMAKE_EXPORT_COMPILE_COMMANDS.
RECORD_ENV = ("CMAKE_EXPORT_COMPILE_COMMANDS", "ON")
DATABASE = "compile_commands.json"
DATABASE_DEPTH = 3  # compile_commands.json is looked for this many directories deep in the tree
MAX_DATABASE = 64 * 1024 * 1024
MAX_LOG = 16 * 1024 * 1024  # the tail of the failing log that is read for failed edges
# Files a change to which can change compile flags, include paths or configured headers.
BUILD_FILE_NAMES = ("CMakeLists.txt",)
BUILD_FILE_SUFFIXES = (".cmake", ".in")
CACHE_FILE = "compiler-cache"  # what the last probe compiled with
STATS_FILE = "ccache-stats.log"

_NINJA_FAILED = re.compile(r"^FAILED: (?:\[code=\d+\] )?(?P<outputs>.+?)\s*$", re.M)
_MAKE_FAILED = re.compile(
    r"^(?:g?make)(?:\[\d+\])?: \*\*\* \[(?:(?P<rules>[^\]\n]+?):\d+: )?(?P<target>[^\]\n]+)\] Error \d+", re.M
)
_DIAGNOSTIC = re.compile(
    r"^(?:In file included from )?(?P<file>[^:\s][^:\n]*):\d+(?::\d+)?(?:: (?:fatal )?error:|[:,]$)", re.M
)
_OUTPUT_FLAGS = {"-o": ".o", "-MF": ".d"}
# CMake's UNITY_BUILD sources (CMakeFiles/T.dir/Unity/unity_N_cxx.cxx): #include lines of the real ones.
_UNITY = re.compile(r"(?:^|/)Unity/unity_\d+_\w+\.\w+$")
_UNITY_INCLUDE = re.compile(r'^#include "([^"\n]+)"', re.M)


@dataclass(frozen=True)
class Unit:
    """One translation unit as the build compiles it: paths are as the build sees them."""

    source: str  # relative to the tree (the name reports use)
    directory: str
    arguments: tuple[str, ...]
    members: tuple[Unit, ...] = ()  # a CMake unity source: the sources it includes, each compiled alone

    def output(self) -> str | None:
        for index, arg in enumerate(self.arguments):
            if arg == "-o" and index + 1 < len(self.arguments):
                return posixpath.normpath(posixpath.join(self.directory, self.arguments[index + 1]))
            if arg.startswith("-o") and len(arg) > 2:
                return posixpath.normpath(posixpath.join(self.directory, arg[2:]))
        return None

    def probe_arguments(self, stem: str) -> list[str]:
        """The command with its object and dependency files under STEM (+ .o, .d)."""
        args, skip = [], False
        for index, arg in enumerate(self.arguments):
            if skip:
                skip = False
                continue
            if arg in _OUTPUT_FLAGS and index + 1 < len(self.arguments):
                args += [arg, stem + _OUTPUT_FLAGS[arg]]
                skip = True
            elif arg[:3] == "-MF" and len(arg) > 3:
                args.append("-MF" + stem + ".d")
            elif arg[:2] == "-o" and len(arg) > 2:
                args.append("-o" + stem + ".o")
            else:
                args.append(arg)
        return args


@dataclass
class FailedEdges:
    """What a failing build's log says failed."""

    edges: list[str] = field(default_factory=list)  # outputs of failed edges, as the tool names them
    diagnosed: list[str] = field(default_factory=list)  # files the compiler's error lines name


def failed_edges(log: str) -> FailedEdges:
    found = FailedEdges()
    for match in _NINJA_FAILED.finditer(log):
        found.edges += match.group("outputs").split()
    make = [(posixpath.basename(m.group("rules") or ""), m.group("target").strip()) for m in _MAKE_FAILED.finditer(log)]
    # CMake's Makefiles: a build.make holds every real rule; Makefile and Makefile2 only recurse.
    cmake = any(rules in ("build.make", "Makefile2") for rules, _ in make)
    found.edges += [target for rules, target in make if (rules == "build.make" if cmake else not _recursion(target))]
    found.edges = list(dict.fromkeys(found.edges))
    found.diagnosed = list(dict.fromkeys(m.group("file") for m in _DIAGNOSTIC.finditer(log)))
    return found


def _recursion(target: str) -> bool:
    """A make target that stands for a directory's or a project's whole build."""
    return posixpath.basename(target.rstrip("/")) in ("all", "rule", "install", "build")


def recording(steps: list[BuildStep]) -> list[BuildStep]:
    """STEPS asking CMake for compile_commands.json (the step's own env: wins over it)."""
    return [replace(step, env=(RECORD_ENV, *step.env)) for step in steps]


class Unprobeable(Exception):
    """The failing build cannot be probed unit by unit; the message says why."""


@dataclass
class ProbePlan:
    """The failed units of a build, and how to compile just them at another commit."""

    tree: Path
    step: BuildStep  # the step that failed: its runner, image, environment and timeout
    database: str  # compile_commands.json, relative to the tree
    units: list[Unit]
    derived_at: str  # the commit in the tree when the commands were recorded or derived again
    probes: int = 0  # probe compiles run
    derivations: int = 0  # times CMake derived the commands again

    @property
    def seen_as(self) -> str:
        return tree_as_built(self.step, self.tree)

    def sources(self) -> list[str]:
        return [unit.source for unit in self.units]

    def probe(self, head: str, log_dir: Path, say: Progress) -> bool | None:
        """Whether the units fail to compile with the tree checked out at HEAD (the caller
        did that). None: they cannot be compiled alone there (a unit's source is gone, or its
        commands cannot be derived again): the caller builds in full."""
        if self._build_files_changed(head):
            derived = self._derive_again(head, log_dir, say)
            if derived != "derived":
                return None if derived == "cannot" else True
        if any(not (self.tree / unit.source).is_file() for unit in self.units):
            return None
        self.probes += 1
        step = replace(self.step, name="probe", command=self._script(), env=(*self.step.env, *self._cache_env()))
        say(f"probe: compiling {', '.join(self.sources())}")
        return not run_build(step, self.tree, log_dir / "probe.log", say).ok

    def compiler_cache(self) -> str:
        """What the probes compiled with: ccache and how often it hit, or why none."""
        said = _read(self.tree, f"{PROBE_DIR}/{CACHE_FILE}", 4096).strip()
        if not said:
            return "none: no probe compiled" if not self.probes else "unknown: the probes did not say"
        if said == "none":
            return "none: the build environment has no ccache, the probes compiled uncached"
        hits, compiles = _cache_counts(_read(self.tree, f"{PROBE_DIR}/{STATS_FILE}", MAX_LOG))
        return f"{said}: {hits} of {compiles} probe compile(s) from the cache"

    # -------------------------------------------------------------- internals

    def _script(self) -> str:
        """The probe: each unit's recorded command, in its directory, behind ccache when the
        environment has it; the first that fails ends it."""
        base = f"{self.seen_as}/{PROBE_DIR}"
        said = shlex.quote(f"{base}/{CACHE_FILE}")
        lines = [
            "set -e",
            f"mkdir -p {shlex.quote(base + '/out')}",
            f"if command -v ccache >/dev/null 2>&1; then wrap=ccache; ccache --version | head -n 1 > {said}; "
            f"else wrap=; echo none > {said}; fi",
            f'echo "patchctl probe: compiler cache: $(cat {said})"',
        ]
        for index, unit in enumerate(self.units):
            args = unit.probe_arguments(f"{base}/out/{index}")
            launcher = "" if posixpath.basename(args[0]) in ("ccache", "sccache") else "$wrap "
            lines += [
                f"echo {shlex.quote('patchctl probe: ' + unit.source)}",
                f"cd {shlex.quote(unit.directory)}",
                launcher + shlex.join(args),
            ]
        return "\n".join(lines) + "\n"

    def _cache_env(self) -> tuple[tuple[str, str], ...]:
        base = f"{self.seen_as}/{PROBE_DIR}"
        return (("CCACHE_DIR", f"{base}/ccache"), ("CCACHE_STATSLOG", f"{base}/{STATS_FILE}"))

    def _build_files_changed(self, head: str) -> bool:
        if head == self.derived_at:
            return False
        changed = git.run(["diff", "--name-only", "-z", self.derived_at, head], self.tree).stdout.split("\0")
        return any(_is_build_file(path) for path in changed if path)

    def _derive_again(self, head: str, log_dir: Path, say: Progress) -> str:
        """Run CMake in the build directory so that the commands are HEAD's: "derived" (the
        units were found again), "failed" (CMake failed there, as the build would) or
        "cannot" (no CMake cache beside the commands, or a unit is no longer in them)."""
        build_dir = posixpath.dirname(self.database)
        if Root(self.tree, "the build tree").kind(posixpath.join(build_dir, "CMakeCache.txt")) != "regular file":
            return "cannot"
        self.derivations += 1
        where = f"{self.seen_as}/{build_dir}" if build_dir else self.seen_as
        step = replace(self.step, name="probe-configure", command=f"cmake {shlex.quote(where)}")
        say("probe: the build files changed; CMake derives the compile commands again")
        if not run_build(step, self.tree, log_dir / "configure.log", say).ok:
            return "failed"
        try:
            units = _units_by_source(self.tree, self.database, self.seen_as)
        except Unprobeable:
            return "cannot"
        found = [units.get(unit.source) for unit in self.units]
        if any(unit is None for unit in found):
            return "cannot"
        self.units = [unit for unit in found if unit is not None]
        self.derived_at = head
        return "derived"


def plan(tree: Path, log: Path, step: BuildStep) -> ProbePlan:
    """The probe plan for a build of STEP that failed in TREE, writing LOG; Unprobeable with
    the reason when the failure is not the compile of translation units the build recorded."""
    tree = Path(tree).resolve()
    text = _read_log(log)
    found = failed_edges(text)
    seen_as = tree_as_built(step, tree)
    databases = _databases(tree)
    if not databases:
        raise Unprobeable(f"the build wrote no {DATABASE} (probe compiles need the compile commands)")
    units_by_output: dict[str, Unit] = {}
    units_by_file: dict[str, Unit] = {}
    for database in databases:
        for unit in _load(tree, database, seen_as):
            output = unit.output()
            if output:
                units_by_output.setdefault(output, unit)
            units_by_file.setdefault(unit.source, unit)
    diagnosed = {source for name in found.diagnosed if (source := _relative(name, seen_as))}
    chosen: dict[str, Unit] = {}
    other: list[str] = []
    for edge in found.edges:
        matches = [u for out, u in units_by_output.items() if _names(out, edge)]
        if not matches:
            other.append(edge)
        for unit in matches:  # of a unity source, the members the errors name (else all of it, as it is)
            members = [member for member in unit.members if member.source in diagnosed]
            chosen.update((u.source, u) for u in members or [unit])
    if not found.edges:
        chosen.update((source, units_by_file[source]) for source in sorted(diagnosed) if source in units_by_file)
    if other:
        raise Unprobeable(
            f"the build failed at {_list(other)}, which is not the compile of a translation unit in {DATABASE} "
            "(a link or another step): compiling units alone cannot tell"
        )
    if not chosen:
        raise Unprobeable("the failing build's log names no failed compile of a translation unit")
    database = databases[0] if len(databases) == 1 else _owning(databases, chosen, tree, seen_as)
    head = git.rev_parse(tree, "HEAD")
    return ProbePlan(tree, step, database, sorted(chosen.values(), key=lambda u: u.source), head)


# ---------------------------------------------------------------- helpers


def _read(tree: Path, path: str | Path, limit: int) -> str:
    try:
        data = Root(tree, "the build tree").read_bytes(path, limit)
    except (Refused, OSError):
        return ""
    return (data or b"").decode("utf-8", errors="replace")


def _read_log(log: Path) -> str:
    """The last MAX_LOG bytes of the failing build's log (patchctl wrote it)."""
    try:
        with Root(log.parent, "the build logs").open_regular(log.name) as (handle, info):
            handle.seek(max(0, info.st_size - MAX_LOG))
            data = handle.read(MAX_LOG)
    except (Refused, OSError) as exc:
        raise Unprobeable(f"the failing build's log cannot be read: {exc}") from None
    return data.decode("utf-8", errors="replace").replace("\r", "")


def _databases(tree: Path) -> list[str]:
    """compile_commands.json files the build wrote (untracked), shallowest first."""
    found: list[str] = []
    frontier = [""]
    root = Root(tree, "the build tree")
    for _depth in range(DATABASE_DEPTH + 1):
        following: list[str] = []
        for directory in frontier:
            for name in sorted(root.listdir(directory) or []):
                path = posixpath.join(directory, name) if directory else name
                if is_dotgit(name) or name == PROBE_DIR:
                    continue
                kind = root.kind(path)
                if name == DATABASE and kind == "regular file":
                    found.append(path)
                elif kind == "directory":
                    following.append(path)
        frontier = following
    tracked = set(git.run(["ls-files", "-z", "--", *found], tree).stdout.split("\0")) if found else set()
    return [path for path in found if path not in tracked]


def _load(tree: Path, database: str, seen_as: str) -> list[Unit]:
    raw = _read(tree, database, MAX_DATABASE)
    try:
        entries = json.loads(raw)
    except ValueError:
        raise Unprobeable(f"{database} is not JSON") from None
    if not isinstance(entries, list):
        raise Unprobeable(f"{database} is not a list of compile commands")
    units = []
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("directory"), str):
            continue
        arguments = entry.get("arguments")
        if not (isinstance(arguments, list) and all(isinstance(a, str) for a in arguments)):
            command = entry.get("command")
            if not isinstance(command, str):
                continue
            try:
                arguments = shlex.split(command)
            except ValueError:
                continue
        source = entry.get("file")
        if not arguments or not isinstance(source, str):
            continue
        relative = _relative(posixpath.join(entry["directory"], source), seen_as)
        if relative is None:  # a unit outside the tree is not the series' or upstream's
            continue
        unit = Unit(relative, entry["directory"], tuple(arguments))
        if _UNITY.search(relative):
            unit = replace(unit, members=_unity_members(tree, unit, seen_as))
        units += [unit, *unit.members]
    return units


def _unity_members(tree: Path, unity: Unit, seen_as: str) -> tuple[Unit, ...]:
    """The sources a CMake unity source includes, each with the unity source's command: what a
    build without UNITY_BUILD compiles (a member is then found by its own name at a commit where
    the upstream builds it alone, or in another batch)."""
    own = posixpath.normpath(posixpath.join(seen_as, unity.source))
    members = []
    for match in _UNITY_INCLUDE.finditer(_read(tree, unity.source, MAX_LOG)):
        source = _relative(posixpath.join(unity.directory, match.group(1)), seen_as)
        if source is None:
            continue
        arguments = tuple(
            posixpath.join(seen_as, source) if posixpath.normpath(posixpath.join(unity.directory, arg)) == own else arg
            for arg in unity.arguments
        )
        members.append(Unit(source, unity.directory, arguments))
    return tuple(members)


def _units_by_source(tree: Path, database: str, seen_as: str) -> dict[str, Unit]:
    units: dict[str, Unit] = {}
    for unit in _load(tree, database, seen_as):
        units.setdefault(unit.source, unit)
    return units


def _owning(databases: list[str], chosen: dict[str, Unit], tree: Path, seen_as: str) -> str:
    """The one database that holds every chosen unit (the one CMake derives again)."""
    for database in databases:
        held = _units_by_source(tree, database, seen_as)
        if all(source in held for source in chosen):
            return database
    raise Unprobeable(f"the failed units are spread over several {DATABASE} files")


def _relative(path: str, seen_as: str) -> str | None:
    path = posixpath.normpath(path)
    prefix = seen_as.rstrip("/") + "/"
    return path[len(prefix) :] if path.startswith(prefix) else None


def _names(output: str, edge: str) -> bool:
    """Whether the build's failed EDGE (relative to where the tool ran, or absolute) is OUTPUT."""
    edge = posixpath.normpath(edge)
    return output == edge if edge.startswith("/") else output.endswith("/" + edge)


def _is_build_file(path: str) -> bool:
    name = posixpath.basename(path)
    return name in BUILD_FILE_NAMES or name.endswith(BUILD_FILE_SUFFIXES)


def _cache_counts(stats: str) -> tuple[int, int]:
    """(hits, compiles) in ccache's stats log: one record per compile, `# FILE` then its counters."""
    records = [set(record.split()) for record in stats.split("# ")[1:]]
    hits = sum(1 for record in records if {"direct_cache_hit", "preprocessed_cache_hit"} & record)
    return hits, len(records)


def _list(items: list[str], shown: int = 3) -> str:
    more = f" and {len(items) - shown} more" if len(items) > shown else ""
    return ", ".join(items[:shown]) + more
