"""The rules of `patchctl lint`: everything about a series and its pins that can be checked without a
build. Each rule has an id; findings carry `file:line`.

    PC001  patch numbers are unique (and, with `naming: strict`, contiguous from 0001)
    PC002  patch file names follow the series' naming (format-patch, strict, openwrt, electron; quilt and
           any take every name)
    PC003  every patch parses
    PC004  no hunk on an excluded path (the source-only policy)
    PC005  no CRLF line endings unless the series allows them
    PC006  no binary hunks unless the series allows them
    PC007  every patch has a subject
    PC008  every patch has a description (PC007 and PC008: unless the series sets allow_undescribed)
    PC009  the series applies strictly, in order, to a clean checkout of its pin
    PC010  every pin_files entry equals the pin (or abbreviates it), every manifest states it
    PC011  every `tracks` constraint holds
    PC012  no patch writes outside the tree
    PC013  no line past a hunk's declared counts (git apply would silently drop it)
    PC014  every patch has a well-formed `Upstream-Status:` header (only where the series sets
           upstream_status: required)
    PC015  the downstream's own list (`list:`) names exactly the patch files present: no file it
           lists is missing, no patch file of the directory is left out

Warnings (printed, exit 0; `warnings`):
    PC016  `allow_empty: true` on a series that has patches: left from its start, it would let a
           series emptied by mistake pass every check
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..confined import Refused, Root
from ..errors import EnvironmentFailure
from ..output import progress
from ..output.findings import Finding
from ..project.config import Config, Series, Upstream
from ..project.yamlloc import MAX_BYTES as MAX_PIN_FILE_BYTES
from ..state import worktree
from . import naming, patchlist
from .diffblocks import overlong_hunks
from .patchset import (
    UPSTREAM_STATUS_KEY,
    MalformedPatch,
    PatchFile,
    is_excluded,
    read_series,
)
from .pathsafety import unsafe_path_reason

# Imported where used: `lint --no-apply` reads no upstream and applies nothing, and a project
# without manifests reads none (patchctl.lazy: start-up).
if TYPE_CHECKING:
    from ..project.manifests import PinState
    from ..upstream.store import Store

RULES = {
    "PC001": "patch numbers are unique (contiguous from 0001 with naming: strict)",
    "PC002": "patch file names follow the series' naming",
    "PC003": "every patch parses",
    "PC004": "no hunk on an excluded path",
    "PC005": "no CRLF line endings unless allowed",
    "PC006": "no binary hunks unless allowed",
    "PC007": "every patch has a subject",
    "PC008": "every patch has a description",
    "PC009": "the series applies strictly to its pin",
    "PC010": "pin_files entries and manifests state the pin",
    "PC011": "tracks constraints hold",
    "PC012": "no patch writes outside the tree",
    "PC013": "no line past a hunk's declared counts",
    "PC014": "every patch has a well-formed Upstream-Status: header (upstream_status: required)",
    "PC015": "the series' own list names exactly the patch files present",
}


def lint(
    config: Config, store: Store | None, series_names: tuple[str, ...] = (), *, apply_check: bool = True
) -> list[Finding]:
    """All findings, sorted by file and line. STORE may be None when APPLY_CHECK is off."""
    findings: list[Finding] = []
    for series in config.select_series(series_names):
        listed = _list_findings(config, series)
        findings += listed
        if any("not a file" in f.message for f in listed):
            continue  # the series cannot be read as its list says: the rest waits for the list
        patches = read_series(series)
        findings += _numbering(config, series, patches)
        for patch in patches:
            findings += _patch_findings(config, series, patch)
        blocking = ("PC003", "PC012", "PC013")
        if apply_check and store is not None and patches and not any(f.rule in blocking for f in findings):
            findings += _apply_findings(config, store, series, patches)
    findings += _pin_findings(config)
    return sorted(findings)


def _list_findings(config: Config, series: Series) -> list[Finding]:
    """PC015: the series' own list against the files of its directory."""
    listed = series.patch_list
    if listed.path is None:
        return []
    shown = worktree.display(config.root, listed.path)
    return [Finding(shown, line, "PC015", message, series.name) for line, message in patchlist.problems(series)]


def warnings(config: Config, series_names: tuple[str, ...] = ()) -> list[Finding]:
    """What lint says without failing: PC016, a stale `allow_empty: true`."""
    found = []
    for series in config.select_series(series_names):
        if not series.allow_empty:
            continue
        patches = read_series(series)
        if patches:
            line = config.doc.line_of(("series", series.name, "allow_empty"))
            message = (
                f"series {series.name} has {len(patches)} patch(es) and still says allow_empty: true; remove it, so "
                "that a series emptied by mistake fails again"
            )
            found.append(Finding(worktree.display(config.root, config.path), line, "PC016", message, series.name))
    return found


def _numbering(config: Config, series: Series, patches: list[PatchFile]) -> list[Finding]:
    """PC002 names by the series' naming; PC001 duplicate numbers, and gaps only where the
    naming is strict (real series have gaps: patches dropped upstream keep their neighbours' names;
    OpenWrt's bands share a number now and then, their names still sort)."""
    findings = []

    def add(patch_name: str, rule: str, message: str) -> None:
        findings.append(Finding(worktree.display(config.root, series.dir / patch_name), 1, rule, message, patch_name))

    numbers: dict[int, str] = {}
    for patch in patches:
        if not naming.well_named(series.naming, patch.name):
            expected = naming.expected(series.naming)
            add(patch.name, "PC002", f"file name {patch.name!r} is not {expected} (naming: {series.naming})")
            continue
        number = naming.number_of(series.naming, patch.name)
        if number is None or series.naming == "openwrt":
            continue
        if number in numbers:
            add(patch.name, "PC001", f"number {number:04d} is also used by {numbers[number]}")
        elif number == 0:
            add(patch.name, "PC001", "numbers start at 0001")
        numbers.setdefault(number, patch.name)
    if series.naming == "strict":
        present = sorted(numbers)
        previous = 0
        for number in present:
            if number > previous + 1:
                missing = f"{previous + 1:04d}" + (f"-{number - 1:04d}" if number - 1 > previous + 1 else "")
                add(numbers[number], "PC001", f"numbering gap: {missing} missing before {number:04d} (naming: strict)")
            previous = number
    return findings


def _patch_findings(config: Config, series: Series, patch: PatchFile) -> list[Finding]:
    file = worktree.display(config.root, patch.path)
    found: list[Finding] = []

    def add(line: int | None, rule: str, message: str) -> None:
        found.append(Finding(file, line or 1, rule, message, patch.name))

    if (reason := unsafe_path_reason(None, patch)) is not None:
        add(1, "PC012", reason)
    for extra in overlong_hunks(patch.parsed):
        add(
            extra.extra_line,
            "PC013",
            f"{extra.path} hunk #{extra.hunk} ({extra.header}) declares fewer lines than follow it: "
            "git apply drops the rest (fix the hunk header's counts)",
        )
    message = patch.message
    if not message.subject and not series.allow_undescribed:
        add(
            1,
            "PC007",
            f"no Subject: the patch needs a one-line summary (it applies as {patch.title!r}, from its file name; "
            "add a Subject: or a DEP-3 Description: line)",
        )
    if not message.description and not series.allow_undescribed:
        add(message.body_line, "PC008", "no description: say why the patch exists")
    if series.upstream_status == "required":
        status = patch.upstream_status
        if status is None:
            add(
                message.body_line,
                "PC014",
                f"no {UPSTREAM_STATUS_KEY}: header (upstream_status: required): say in the description whether it "
                f"was sent upstream, e.g. `{UPSTREAM_STATUS_KEY}: Submitted [URL]` or "
                f"`{UPSTREAM_STATUS_KEY}: Inappropriate [why]`",
            )
        elif not status.ok:
            add(status.line, "PC014", f"{UPSTREAM_STATUS_KEY}: {status.problem}")
    try:
        files = patch.files
    except MalformedPatch as exc:
        add(exc.line, "PC003", f"does not parse: {str(exc).splitlines()[0]}")
        return found
    for diff in files:
        for path in {diff.path, diff.source_path} - {None}:
            if is_excluded(path, series.exclude):
                add(diff.line, "PC004", f"hunk on excluded path {path} (exclude: {', '.join(series.exclude)})")
        if diff.is_binary and not series.allow_binary:
            add(diff.line, "PC006", f"binary change to {diff.path} (set allow_binary: true on the series to permit)")
    if not series.allow_crlf:
        for number, line in enumerate(patch.data.split(b"\n"), 1):
            if line.endswith(b"\r") and line[:1] in (b"+", b"-", b" "):
                add(number, "PC005", "CRLF line ending in a hunk (set allow_crlf: true on the series to permit)")
                break
    return found


def _apply_findings(config: Config, store: Store, series: Series, patches: list[PatchFile]) -> list[Finding]:
    from .applier import Status, apply_series_to_index

    upstream = config.get_upstream(series.upstream)
    try:
        mirror = store.mirror(upstream.url, base=config.root)
    except EnvironmentFailure as failed:  # the first run offline: say what needs the network, and the way out
        raise EnvironmentFailure(
            f"{failed}; the strict-apply check (PC009) needs upstream {upstream.name} once, then works offline "
            "from the cache: run `patchctl lint` online once, or `patchctl lint --no-apply`"
        ) from None
    pin = store.resolve_pin(mirror, config, series.upstream)
    with progress.step(f"checking that {series.name} applies to its pin {pin[:12]}"):
        outcomes, _ = apply_series_to_index(mirror.path, pin, patches, commit=False)
    failed = next((o for o in outcomes if not o.ok), None)
    if failed is None:
        return []
    patch = next(p for p in patches if p.name == failed.patch)
    rule = "PC012" if failed.status is Status.UNSAFE_PATH else "PC003" if failed.status is Status.MALFORMED else "PC009"
    return [
        Finding(
            worktree.display(config.root, patch.path),
            failed.patch_line or 1,
            rule,
            f"does not apply to the pin {pin[:12]}: {failed.describe()}",
            patch.name,
        )
    ]


def _pin_findings(config: Config) -> list[Finding]:
    found = []
    matrix = worktree.display(config.root, config.path)
    for name, upstream in config.upstreams.items():
        if upstream.tracks is not None:
            tracked = config.upstreams[upstream.tracks]
            if upstream.pin != tracked.pin:
                line = config.doc.line_of(("upstreams", name, "pin"))
                found.append(
                    Finding(
                        matrix,
                        line,
                        "PC011",
                        f"upstream {name} tracks {tracked.name} but pins {upstream.pin[:12]}, not {tracked.pin[:12]}",
                        name,
                    )
                )
        for index, pin_file in enumerate(upstream.pin_files):
            path = config.root / pin_file.path
            where = config.doc.line_of(("upstreams", name, "pin_files", index, "path"))
            try:
                data = Root(config.root).read_bytes(path, MAX_PIN_FILE_BYTES)
            except Refused as refused:  # a link, a FIFO, a device: never read, named with where it points
                found.append(Finding(matrix, where, "PC010", f"pin file {pin_file.path}: {refused}", name))
                continue
            if data is None:
                found.append(Finding(matrix, where, "PC010", f"pin file {pin_file.path} does not exist", name))
                continue
            text = data.decode("utf-8", errors="replace")
            matches = list(pin_file.pattern.finditer(text))
            if not matches:
                found.append(
                    Finding(
                        pin_file.path,
                        1,
                        "PC010",
                        f"pattern {pin_file.pattern.pattern!r} matches nothing; expected the pin of {name}",
                        name,
                    )
                )
            from ..project.manifests import is_abbreviation

            for match in matches:
                if match.group("pin") != upstream.pin and not is_abbreviation(match.group("pin"), upstream.pin):
                    line = text.count("\n", 0, match.start("pin")) + 1
                    found.append(
                        Finding(
                            pin_file.path,
                            line,
                            "PC010",
                            f"{match.group('pin')!r} differs from the pin of {name} ({upstream.pin})",
                            name,
                        )
                    )
        found += _manifest_findings(config, name, upstream)
    return found


def _manifest_findings(config: Config, name: str, upstream: Upstream) -> list[Finding]:
    """PC010 for the manifests that state the pin (an OpenWrt Makefile, a conda-forge recipe, a DEPS file)."""
    found: list[Finding] = []
    if not upstream.manifests:
        return found
    from ..project import manifests
    from ..project.manifests import formats

    state = manifests.state_of(upstream.pin, upstream.version, upstream.tag)
    for index, manifest in enumerate(upstream.manifests):
        try:
            text = formats.read_manifest(config.root, manifest)
            wrong = formats.disagreements(manifest, text, state)
        except manifests.ManifestError as exc:
            where = config.doc.line_of(("upstreams", name, "manifests", index, "path"))
            message = str(exc).removeprefix(f"{manifest.where}: ")  # the finding says where already
            found.append(Finding(worktree.display(config.root, config.path), where, "PC010", message, name))
            continue
        found += [
            Finding(manifest.path, line, "PC010", f"{message} of {name} ({_stated(state)})", name)
            for line, message in wrong
        ]
    return found


def _stated(state: PinState) -> str:
    return state.commit if state.version is None else f"{state.version}, tag {state.tag}, {state.commit[:12]}"
