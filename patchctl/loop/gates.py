"""Running the gates matrix.yaml declares for a series on an applied tree (`patchctl gate`).

A gate is a shell command run in the tree, in order, each under a timeout, with a scrubbed
environment (`patchctl.project.gate_env`: an allowlist plus the gate's `pass_env:`) and these variables:

    PATCHCTL_TREE    the applied tree (also the working directory)
    PATCHCTL_ROOT    the directory of matrix.yaml
    PATCHCTL_SERIES  the series name
    PATCHCTL_OUT     a scratch directory shared by the gates of one run
    PATCHCTL_PYTHON  the Python interpreter running patchctl (for `-m engine ...`)
    PATCHCTL_UPSTREAM_REV  the upstream commit the series is applied on (keys build caches)

A gate may declare a baseline, `{path: P, sha256: D}`: after the command succeeds, the
files under PATCHCTL_OUT/P must digest to D (sha256 over each file's relative path and
contents, in path order). `--update-baseline` records the new digest in matrix.yaml,
changing nothing else in the file. Lines a gate prints as `PASS <case>` or
`FAIL <case>: <why>` are reported per case.
"""

from __future__ import annotations

import hashlib
import os
import re
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import field
from pathlib import Path

from ..confined import Root, confined_path, scratch
from ..errors import CheckFailed, ConfigError, UsageError
from ..output import progress
from ..output.escape import shell_word
from ..output.jsonout import json_field
from ..project import gate_env
from ..project.config import Config, Gate, Series
from ..project.yamlloc import MAX_BYTES as MAX_CONFIG_BYTES
from ..records import dataclass
from ..series.patchset import read_series
from ..state import worktree

CASE_RE = re.compile(r"^(PASS|FAIL)\s+(\S+?):?(?:\s+(.*))?$")


@dataclass(frozen=True)
class GateCase:
    name: str
    ok: bool
    detail: str = ""

    def line(self) -> str:
        return f"    {'pass' if self.ok else 'FAIL'} {self.name}{': ' + self.detail if self.detail else ''}"


@dataclass
class GateResult:
    name: str
    ok: bool
    returncode: int | None
    duration_s: float = json_field(digits=3)
    log: Path | None  # None: not run (skipped)
    reason: str = ""
    cases: list[GateCase] = field(default_factory=list)
    baseline: str = "none"  # none | match | mismatch | updated
    skipped: bool = False  # a `slow: true` gate under --skip-slow: not run, so not passed either

    def lines(self) -> list[str]:
        """`PASS name (1.2 s, 3/3 cases passed)`, then a line per case."""
        if self.skipped:
            return [f"SKIP {self.name} ({self.reason})"]
        status = "PASS" if self.ok else "FAIL"
        cases = f", {sum(c.ok for c in self.cases)}/{len(self.cases)} cases passed" if self.cases else ""
        baseline = f", baseline {self.baseline}" if self.baseline != "none" else ""
        return [f"{status} {self.name} ({self.duration_s:.1f} s{cases}{baseline})"] + [c.line() for c in self.cases]


class GatesFailed(CheckFailed):
    def __init__(self, series: str, results: list[GateResult]):
        failed = next(r for r in results if not r.ok)
        super().__init__(f"gate {failed.name} of series {series} failed: {failed.reason}")
        self.results = results


def check_tree(tree: Path, series: Series) -> None:
    """The tree must be one `patchctl apply` made for this series."""
    if not tree.is_dir():
        raise UsageError(f"{tree} does not exist: run `patchctl apply {shell_word(series.name)}` first")
    marker = worktree.read_marker(tree)
    if marker is None or series.name not in marker.series:
        raise UsageError(
            f"{tree} is not a tree patchctl applied {series.name} to: "
            f"run `patchctl apply {shell_word(series.name)}` first"
        )


def run_gates(
    config: Config,
    series_name: str,
    tree: Path | None = None,
    *,
    update_baseline: bool = False,
    log_dir: Path | None = None,
    skip_slow: bool = False,
    check_current: Callable[[Path], None] | None = None,
) -> list[GateResult]:
    """Run every gate of the series in order (with SKIP_SLOW, those not marked `slow: true`);
    stop at the first failure. Raises GatesFailed. CHECK_CURRENT, called with the tree once it
    is known to be an applied tree of the series, refuses one that is not what it must be."""
    series = config.get_series(series_name)
    if not series.gates:
        raise UsageError(f"series {series.name} declares no gates in {config.path.name}")
    if skip_slow and all(gate.slow for gate in series.gates):
        raise UsageError(
            f"every gate of series {series.name} is marked slow: --skip-slow would check nothing "
            f"(run `patchctl gate {shell_word(series.name)}`, or mark a gate slow: false)"
        )
    read_series(series)  # fail closed: a missing or empty series directory is an error here too
    tree = (tree or worktree.applied_tree(config.root, series.name)).resolve()
    check_tree(tree, series)
    if check_current is not None:
        check_current(tree)
    log_dir = log_dir or confined_path(worktree.state_owner(config.root), worktree.gate_logs(config.root, series.name))
    logs = worktree.reached_through(log_dir / "x.log")  # the repository, for patchctl's own logs
    logs.mkdirs(log_dir)
    results: list[GateResult] = []
    with scratch.directory("patchctl-gate-") as out_dir:
        out = str(out_dir)
        patchctl_vars = {
            "PATCHCTL_TREE": str(tree),
            "PATCHCTL_ROOT": str(config.root),
            "PATCHCTL_SERIES": series.name,
            "PATCHCTL_OUT": out,
            "PATCHCTL_PYTHON": sys.executable,
            "PATCHCTL_UPSTREAM_REV": _upstream_rev(tree),
        }
        for index, gate in enumerate(series.gates):
            if skip_slow and gate.slow:
                results.append(GateResult(gate.name, True, None, 0.0, None, "slow: true, --skip-slow", skipped=True))
                continue
            env = gate_env.scrubbed(pass_env=gate.pass_env, extra=patchctl_vars)
            log = log_dir / f"{index + 1:02d}-{worktree.log_name(gate.name)}.log"
            with progress.step(f"gate {gate.name} ({series.name})", tail=log):
                result = _run_one(gate, tree, env, log, logs)
            if result.ok and gate.baseline is not None:
                _check_baseline(config, series, index, gate, Path(out), result, update_baseline)
            results.append(result)
            if not result.ok:
                raise GatesFailed(series.name, results)
    return results


def _upstream_rev(tree: Path) -> str:
    marker = worktree.read_marker(tree)
    return marker.rev if marker is not None else ""


def _run_one(gate: Gate, tree: Path, env: dict[str, str], log_path: Path, logs: Root) -> GateResult:
    """Run GATE in TREE (opened by descriptor: the gate starts in that very directory, whatever
    is swapped on the way to it), its output in LOG_PATH (a new file, below LOGS, created
    no-follow and non-blocking: a link or a FIFO planted there is refused in one line). The
    gate's timeout counts from before the log is opened."""
    start = time.monotonic()
    with logs.open_log(log_path) as log, worktree.reached_through(tree).directory(tree) as opened:
        log.write(f"$ {gate.command}\n".encode())
        log.flush()
        process = subprocess.Popen(
            ["/bin/sh", "-c", gate.command],
            cwd=opened.cwd,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            returncode = process.wait(timeout=max(gate.timeout - (time.monotonic() - start), 0.001))
        except subprocess.TimeoutExpired:
            _kill_group(process)
            return GateResult(
                gate.name,
                False,
                None,
                time.monotonic() - start,
                log_path,
                f"timed out after {gate.timeout} s (log: {log_path})",
            )
        except KeyboardInterrupt:
            _kill_group(process)
            raise
    duration = time.monotonic() - start
    cases = _cases(logs, log_path)
    result = GateResult(gate.name, returncode == 0, returncode, duration, log_path, cases=cases)
    if returncode != 0:
        failed = next((c for c in cases if not c.ok), None)
        result.reason = (
            f"exit {returncode}"
            + (f", first failing case {failed.name}: {failed.detail}" if failed else "")
            + f" (log: {log_path})"
        )
    return result


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


def _cases(logs: Root, log_path: Path) -> list[GateCase]:
    cases = []
    with logs.open_regular(log_path) as (handle, _):
        for raw in handle:
            if m := CASE_RE.match(raw.decode("utf-8", errors="replace").strip()):
                cases.append(GateCase(m.group(2), m.group(1) == "PASS", (m.group(3) or "").strip()))
    return cases


def output_digest(root: Path) -> str:
    """sha256 over every regular file under ROOT (a link is never followed): relative path, NUL,
    size, NUL, contents, in path order."""
    where = Root(root.parent, "the gate's output")
    kind = where.kind(root.name)
    if kind == "directory":
        files = [(name, f"{root.name}/{name}") for name, info in where.walk(root.name) if stat.S_ISREG(info.st_mode)]
    else:
        files = [(root.name, root.name)] if kind == "regular file" else []
    digest = hashlib.sha256()
    for shown, path in sorted(files):
        with where.open_regular(path) as (handle, info):
            digest.update(shown.encode() + b"\0" + str(info.st_size).encode() + b"\0")
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
    return digest.hexdigest()


def _check_baseline(
    config: Config, series: Series, index: int, gate: Gate, out: Path, result: GateResult, update: bool
) -> None:
    keypath = ("series", series.name, "gates", index, "baseline")
    baseline = gate.baseline or {}
    rel = baseline.get("path")
    if not isinstance(rel, str) or Path(rel).is_absolute() or ".." in Path(rel).parts:
        raise config.error(keypath + ("path",), "baseline needs a relative 'path' under $PATCHCTL_OUT")
    if "sha256" not in baseline:
        raise config.error(keypath, "baseline needs a 'sha256' key (sha256: '' is fine; --update-baseline fills it in)")
    produced = out / rel
    if not produced.exists():
        result.ok, result.baseline = False, "mismatch"
        result.reason = f"the gate produced no {rel} under $PATCHCTL_OUT to compare with its baseline"
        return
    actual = output_digest(produced)
    expected = baseline.get("sha256")
    if actual == expected:
        result.baseline = "match"
        return
    if update:
        update_baseline_digest(config, keypath + ("sha256",), actual)
        result.baseline = "updated"
        return
    result.ok, result.baseline = False, "mismatch"
    result.reason = (
        f"output {rel} digests to {actual[:16]}…, baseline says {str(expected)[:16]}… "
        "(rerun with --update-baseline if the change is intended)"
    )


def update_baseline_digest(config: Config, keypath: tuple, digest: str) -> None:
    """Rewrite one `sha256:` value in matrix.yaml in place, keeping every other byte."""
    where = Root(config.path.parent)
    text = (where.read_bytes(config.path.name, MAX_CONFIG_BYTES) or b"").decode("utf-8")
    lines = text.splitlines(keepends=True)
    line_no = config.doc.line_of(keypath)
    line = lines[line_no - 1]
    new_line, count = re.subn(r"(sha256:\s*)([\"']?)[0-9a-fA-F]*\2", lambda m: f"{m.group(1)}{digest}", line, count=1)
    if count != 1:
        raise ConfigError(f"{config.path}:{line_no}: cannot find the sha256 value to update on this line")
    lines[line_no - 1] = new_line
    where.write_bytes(config.path.name, "".join(lines).encode("utf-8"))
