"""The invariants of a build matrix, one function per rule. Each returns findings with a
rule id, the file and line, and a subject (a tag-suffix, a variant, a meta backend...)
that an allowlist can name.

    MX101  tag-suffix follows the naming convention of the row's toolchain
    MX102  tag-suffix is unique per platform
    MX103  linux/arm64 rows run on an arm runner, and only they do
    MX104  rows sharing a tag-suffix form one amd64/arm64 pair that agrees on what it builds
    MX201  every row's tag-suffix has exactly one latest- and one master- index variant
    MX202  every index variant is built by a row
    MX203  -development names go with master- images, the others with latest- images
    MX204  mirrors carry the same tag as the uri
    MX205  index names are unique
    MX301  every capability resolves to a variant
    MX302  every capability key is a known capability
    MX303  a capability points at a variant built for that hardware
    MX304  a variant's name does not promise another toolchain than its image has
    MX401  the canary compiles with the toolchain (CUDA major, image) of a shipped row
    MX501  pins that track another are equal to it
    MX502  a tracking pin is not listed for nightly auto-bumping
    MX601  every built backend declares the paths it is built from, and every declared one is built
    MX701  what a row builds from exists: a Linux row's dockerfile and context, a macOS row's make target
    MX702  no matrix the workflow fans out over has more than GitHub's 256 jobs
    MX801  a workflow's local action (`uses: ./PATH`) or reusable workflow is in the repository
    MX802  a workflow's `run:` script calls only repository files that exist (e.g. `.ci/run`)
    MX803  a workflow runs patchctl on series and upstreams that matrix.yaml has
    MX804  the patchctl action the workflows call is no placeholder and no commit only made locally
    MX805  `workflows: extras:` installs the engine where a gate or build step runs it
(MX801-MX804: workflow_checks.py; MX805: extras.py)
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from ..confined import Refused, Root
from ..output.findings import Finding
from ..project.config import Config
from .conventions import (
    KNOWN_CAPABILITIES,
    capability_accepts,
    expected_tag_suffix,
    is_arm_runner,
    name_promise_broken,
    row_toolchain,
)
from .extras import extras_cover_the_engine
from .model import DARWIN, LINUX, BuildMatrix, CanaryToolchain, Row, Variant
from .workflow_checks import WorkflowTally, workflow_references
from .workflow_steps import inside

RULES = {
    "MX101": "tag-suffix follows the naming convention",
    "MX102": "tag-suffix unique per platform",
    "MX103": "arm64 rows on arm runners only",
    "MX104": "shared tag-suffix forms an agreeing amd64/arm64 pair",
    "MX201": "each row has one latest- and one master- variant",
    "MX202": "each variant is built by a row",
    "MX203": "-development names go with master- images",
    "MX204": "mirrors carry the uri's tag",
    "MX205": "index names are unique",
    "MX301": "capabilities resolve to variants",
    "MX302": "capability keys are known",
    "MX303": "capabilities point at matching hardware",
    "MX304": "variant names match their toolchain",
    "MX401": "canary toolchain matches a shipped row",
    "MX501": "tracking pins are equal",
    "MX502": "tracking pins are not auto-bumped",
    "MX601": "backends declare their paths",
    "MX701": "dockerfile, context and make target exist",
    "MX702": "at most 256 jobs per matrix",
    "MX801": "local actions and reusable workflows exist",
    "MX802": "scripts a workflow runs exist",
    "MX803": "workflows name existing series and upstreams",
    "MX804": "the patchctl action is published",
    "MX805": "the workflows install the engine where it runs",
}
# GitHub Actions: "A matrix will generate a maximum of 256 jobs per workflow run."
MAX_MATRIX_JOBS = 256
# What the backend workflow's macOS job runs for a row: `make backends/<backend>-darwin`.
DARWIN_MAKE_TARGET = "backends/{backend}-darwin"
MAKEFILES = ("GNUmakefile", "makefile", "Makefile")
TAG_PREFIXES = ("latest", "master")


def image_tag(reference: str) -> str | None:
    """The tag of an image reference (`registry:port/repo:tag` -> `tag`), or None."""
    last = reference.rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else None


def split_tag(tag: str | None) -> tuple[str, str] | None:
    """`latest-cpu-llama-cpp` -> ('latest', '-cpu-llama-cpp'); None for other tags."""
    for prefix in TAG_PREFIXES:
        if tag and tag.startswith(prefix + "-"):
            return prefix, tag[len(prefix) :]
    return None


def rows_by_suffix(matrix: BuildMatrix) -> dict[str, list[Row]]:
    return matrix.rows_by_suffix()


def variant_rows(matrix: BuildMatrix, variant: Variant) -> list[Row]:
    parts = split_tag(image_tag(variant.uri))
    return rows_by_suffix(matrix).get(parts[1], []) if parts else []


def toolchain_row(matrix: BuildMatrix, toolchain: CanaryToolchain) -> Row | None:
    """The shipped row a canary toolchain stands for (its tag-suffix, and platform if given)."""
    for row in matrix.rows:
        if row.tag_suffix == toolchain.tag_suffix and (
            not toolchain.platform or toolchain.platform in row.platform.split(",")
        ):
            return row
    return None


# ---------------------------------------------------------------- build rows


def tag_suffix_convention(matrix: BuildMatrix) -> list[Finding]:
    found = []
    for row in matrix.rows:
        toolchain = row_toolchain(row)
        if toolchain is None:
            found.append(
                Finding(
                    row.file,
                    row.line,
                    "MX101",
                    f"{row.describe()}: no naming convention for build-type {row.build_type!r}",
                    row.subject,
                )
            )
            continue
        if row.build_type == "l4t" and row.platform != "linux/arm64":
            found.append(
                Finding(
                    row.file,
                    row.line,
                    "MX101",
                    f"{row.describe()}: build-type l4t builds linux/arm64 images, not {row.platform}",
                    row.subject,
                )
            )
        if toolchain.kind in ("cuda", "l4t") and not toolchain.cuda_major:
            found.append(
                Finding(
                    row.file, row.line, "MX101", f"{row.describe()}: a CUDA build needs cuda-major-version", row.subject
                )
            )
            continue
        expected = expected_tag_suffix(toolchain, row.backend)
        if row.tag_suffix != expected:
            found.append(
                Finding(
                    row.file,
                    row.line,
                    "MX101",
                    f"{row.describe()}: {toolchain.describe()} builds of {row.backend} are tagged {expected!r}",
                    row.subject,
                )
            )
    return found


def tag_suffix_unique(matrix: BuildMatrix) -> list[Finding]:
    found = []
    seen: dict[tuple[str, str], Row] = {}
    for row in matrix.rows:
        for platform in row.platform.split(","):
            key = (platform, row.tag_suffix)
            if key in seen:
                first = seen[key]
                found.append(
                    Finding(
                        row.file,
                        row.line,
                        "MX102",
                        f"{row.describe()}: tag-suffix {row.tag_suffix!r} on {platform} is also built by "
                        f"{first.section}[{first.position}] (line {first.line})",
                        row.subject,
                    )
                )
            else:
                seen[key] = row
    return found


def arm_runners(matrix: BuildMatrix) -> list[Finding]:
    found = []
    for row in matrix.linux_rows():
        arm_row, arm_runner = row.platform == "linux/arm64", is_arm_runner(row.get("runs-on"))
        if arm_row and not arm_runner:
            found.append(
                Finding(
                    row.file,
                    row.line,
                    "MX103",
                    f"{row.describe()}: a linux/arm64 row must run on an arm runner, not {row.get('runs-on')!r}",
                    row.subject,
                )
            )
        elif arm_runner and not arm_row:
            found.append(
                Finding(
                    row.file,
                    row.line,
                    "MX103",
                    f"{row.describe()}: only linux/arm64 rows run on an arm runner ({row.get('runs-on')!r})",
                    row.subject,
                )
            )
    return found


def platform_pairs(matrix: BuildMatrix) -> list[Finding]:
    found = []
    for suffix, rows in rows_by_suffix(matrix).items():
        rows = [r for r in rows if r.section == LINUX]
        if len(rows) < 2:
            continue
        last = rows[-1]
        platforms = sorted(r.platform for r in rows)
        if platforms != ["linux/amd64", "linux/arm64"]:
            found.append(
                Finding(
                    last.file,
                    last.line,
                    "MX104",
                    f"rows sharing tag-suffix {suffix!r} must be exactly one linux/amd64 and one linux/arm64 row, "
                    f"got {', '.join(platforms)}",
                    suffix,
                )
            )
            continue
        for row in rows:
            arch = row.platform.split("/")[1]
            if row.get("platform-tag") != arch:
                found.append(
                    Finding(
                        row.file,
                        row.line,
                        "MX104",
                        f"{row.describe()}: a row of an amd64/arm64 pair needs platform-tag {arch!r}, got "
                        f"{row.get('platform-tag')!r}",
                        suffix,
                    )
                )
        for key in ("backend", "dockerfile", "tag-latest"):
            values = [r.get(key) for r in rows]
            if len(set(values)) > 1:
                found.append(
                    Finding(
                        last.file,
                        last.line,
                        "MX104",
                        f"the {suffix!r} pair disagrees on {key}: {' vs '.join(map(repr, values))}",
                        suffix,
                    )
                )
    return found


# ---------------------------------------------------------------- index


def index_coverage(matrix: BuildMatrix) -> list[Finding]:
    if matrix.index_file is None:
        return []
    found = []
    counts: dict[tuple[str, str], list[Variant]] = defaultdict(list)
    for variant in matrix.variants:
        parts = split_tag(image_tag(variant.uri))
        if parts:
            counts[(parts[1], parts[0])].append(variant)
    for suffix, rows in rows_by_suffix(matrix).items():
        row = rows[0]
        for prefix in TAG_PREFIXES:
            variants = counts.get((suffix, prefix), [])
            if not variants:
                found.append(
                    Finding(
                        row.file,
                        row.line,
                        "MX201",
                        f"{row.describe()}: no index variant has a {prefix}{suffix} image ({matrix.index_file})",
                        suffix,
                    )
                )
            elif len(variants) > 1:
                names = ", ".join(f"{v.name} (line {v.line})" for v in variants)
                found.append(
                    Finding(
                        variants[1].file,
                        variants[1].line,
                        "MX201",
                        f"{len(variants)} index variants have the {prefix}{suffix} image: {names}",
                        suffix,
                    )
                )
    return found


def variants_have_rows(matrix: BuildMatrix) -> list[Finding]:
    found = []
    suffixes = rows_by_suffix(matrix)
    for variant in matrix.variants:
        tag = image_tag(variant.uri)
        parts = split_tag(tag)
        if parts is None:
            what = (
                f"image tag {tag!r} does not start with latest- or master-"
                if tag
                else f"image {variant.uri} has no tag"
            )
            found.append(
                Finding(
                    variant.file,
                    variant.line,
                    "MX202",
                    f"variant {variant.name}: {what}, so no row can build it",
                    variant.name,
                )
            )
        elif parts[1] not in suffixes:
            found.append(
                Finding(
                    variant.file,
                    variant.line,
                    "MX202",
                    f"variant {variant.name}: no build row has tag-suffix {parts[1]!r}",
                    variant.name,
                )
            )
    return found


def development_names(matrix: BuildMatrix) -> list[Finding]:
    found = []
    for variant in matrix.variants:
        parts = split_tag(image_tag(variant.uri))
        if parts is None:
            continue
        development = variant.name.endswith("-development")
        if development and parts[0] != "master":
            found.append(
                Finding(
                    variant.file,
                    variant.line,
                    "MX203",
                    f"variant {variant.name} is a -development name but its image is {parts[0]}{parts[1]}, not "
                    f"master{parts[1]}",
                    variant.name,
                )
            )
        elif not development and parts[0] == "master":
            found.append(
                Finding(
                    variant.file,
                    variant.line,
                    "MX203",
                    f"variant {variant.name} has the master{parts[1]} image, so its name must end in -development",
                    variant.name,
                )
            )
    for meta in matrix.metas:
        development = meta.name.endswith("-development")
        for key, target in meta.capabilities.items():
            if target.endswith("-development") != development and matrix.variant(target) is not None:
                kind = "a -development" if development else "a released"
                found.append(
                    Finding(
                        meta.file,
                        meta.capability_lines[key],
                        "MX203",
                        f"{kind} meta backend {meta.name} maps {key} to {target}",
                        f"{meta.name}/{key}",
                    )
                )
    return found


def mirror_tags(matrix: BuildMatrix) -> list[Finding]:
    found = []
    for variant in matrix.variants:
        tag = image_tag(variant.uri)
        for mirror in variant.mirrors:
            if image_tag(mirror) != tag:
                found.append(
                    Finding(
                        variant.file,
                        variant.line,
                        "MX204",
                        f"variant {variant.name}: mirror {mirror} is not tagged {tag!r} like its uri",
                        variant.name,
                    )
                )
    return found


def unique_index_names(matrix: BuildMatrix) -> list[Finding]:
    found = []
    seen: dict[str, int] = {}
    for entry in [*matrix.metas, *matrix.variants]:
        if entry.name in seen:
            found.append(
                Finding(
                    entry.file,
                    entry.line,
                    "MX205",
                    f"index name {entry.name!r} is also used at line {seen[entry.name]}",
                    entry.name,
                )
            )
        else:
            seen[entry.name] = entry.line
    return found


def capability_targets(matrix: BuildMatrix) -> list[Finding]:
    found = []
    for meta in matrix.metas:
        for key, target in meta.capabilities.items():
            if matrix.variant(target) is None:
                found.append(
                    Finding(
                        meta.file,
                        meta.capability_lines[key],
                        "MX301",
                        f"meta backend {meta.name}: capability {key} points at {target!r}, which is not a variant "
                        "in the index",
                        f"{meta.name}/{key}",
                    )
                )
    return found


def capability_keys(matrix: BuildMatrix) -> list[Finding]:
    found = []
    known = matrix.capabilities or KNOWN_CAPABILITIES
    for meta in matrix.metas:
        for key in meta.capabilities:
            if key not in known:
                found.append(
                    Finding(
                        meta.file,
                        meta.capability_lines[key],
                        "MX302",
                        f"meta backend {meta.name}: unknown capability {key!r} (known: {', '.join(known)})",
                        f"{meta.name}/{key}",
                    )
                )
    return found


def capability_toolchains(matrix: BuildMatrix) -> list[Finding]:
    found = []
    for meta in matrix.metas:
        for key, target in meta.capabilities.items():
            variant = matrix.variant(target)
            rows = variant_rows(matrix, variant) if variant else []
            toolchain = row_toolchain(rows[0]) if rows else None
            if toolchain is not None and not capability_accepts(key, toolchain):
                found.append(
                    Finding(
                        meta.file,
                        meta.capability_lines[key],
                        "MX303",
                        f"meta backend {meta.name}: capability {key} points at {target}, a {toolchain.describe()} "
                        f"image ({rows[0].tag_suffix})",
                        f"{meta.name}/{key}",
                    )
                )
    return found


def variant_names(matrix: BuildMatrix) -> list[Finding]:
    found = []
    for variant in matrix.variants:
        rows = variant_rows(matrix, variant)
        toolchain = row_toolchain(rows[0]) if rows else None
        if toolchain is None:
            continue
        broken = name_promise_broken(variant.name, rows[0].backend, toolchain)
        if broken:
            found.append(
                Finding(
                    variant.file,
                    variant.line,
                    "MX304",
                    f"variant {variant.name} promises {broken} but its image {image_tag(variant.uri)} is a "
                    f"{toolchain.describe()} build",
                    variant.name,
                )
            )
    return found


# ---------------------------------------------------------------- canary, pins, paths


def canary_toolchains(matrix: BuildMatrix) -> list[Finding]:
    if matrix.canary is None:
        return []
    found = []
    for toolchain in matrix.canary.toolchains:
        if toolchain.on_runner:
            continue  # the runner's own compilers: it stands for no shipped row
        row = toolchain_row(matrix, toolchain)
        where = f"canary toolchain {toolchain.name}"
        if row is None:
            platform = f" on {toolchain.platform}" if toolchain.platform else ""
            found.append(
                Finding(
                    toolchain.file,
                    toolchain.line,
                    "MX401",
                    f"{where}: no shipped row has tag-suffix {toolchain.tag_suffix!r}{platform}",
                    toolchain.name,
                )
            )
            continue
        if toolchain.cuda_major != row.cuda_major:
            found.append(
                Finding(
                    toolchain.file,
                    toolchain.line,
                    "MX401",
                    f"{where} compiles with CUDA major {toolchain.cuda_major or 'none'!s} but the shipped "
                    f"{row.tag_suffix} images use {row.cuda_major or 'none'}",
                    toolchain.name,
                )
            )
        if toolchain.image not in row.images():
            found.append(
                Finding(
                    toolchain.file,
                    toolchain.line,
                    "MX401",
                    f"{where} compiles in {toolchain.image} but {row.describe()} builds in {' / '.join(row.images())}",
                    toolchain.name,
                )
            )
    return found


def tracking_pins_equal(config: Config | None, matrix_file: str) -> list[Finding]:
    found = []
    for name, upstream in config.upstreams.items() if config else ():
        tracked = config.upstreams.get(upstream.tracks) if upstream.tracks else None
        if tracked is not None and upstream.pin != tracked.pin:
            line = config.doc.line_of(("upstreams", name, "pin"))
            found.append(
                Finding(
                    matrix_file,
                    line,
                    "MX501",
                    f"upstream {name} tracks {tracked.name} but pins {upstream.pin[:12]}, not {tracked.pin[:12]}",
                    name,
                )
            )
    return found


def tracking_pins_not_bumped(config: Config | None, matrix_file: str) -> list[Finding]:
    found = []
    for name, upstream in config.upstreams.items() if config else ():
        if upstream.tracks and upstream.auto_bump:
            line = config.doc.line_of(("upstreams", name, "auto_bump"))
            found.append(
                Finding(
                    matrix_file,
                    line,
                    "MX502",
                    f"upstream {name} tracks {upstream.tracks}, so it must move with it, not be auto-bumped on its own",
                    name,
                )
            )
    return found


def backend_paths(matrix: BuildMatrix) -> list[Finding]:
    if matrix.backends is None:
        return []
    found = []
    built: dict[str, Row] = {}
    for row in matrix.rows:
        built.setdefault(row.backend, row)
    for backend, row in built.items():
        if backend not in matrix.backends:
            found.append(
                Finding(
                    row.file,
                    row.line,
                    "MX601",
                    f"backend {backend} is built but `backends:` declares no paths for it, so no change would ever "
                    "rebuild it",
                    backend,
                )
            )
    for name, paths in matrix.backends.items():
        if name not in built:
            found.append(
                Finding(paths.file, paths.line, "MX601", f"backends: {name} declares paths but no row builds it", name)
            )
    return found


# ---------------------------------------------------------------- build inputs, GitHub limits


MAX_READ_BYTES = 16 * 1024 * 1024  # a Makefile of the repository


def make_targets(makefile: Path, root: Path | None = None) -> list[str]:
    """The explicit and pattern targets of a Makefile's rules (`a b: deps`, `backends/%-darwin:`),
    read through `confined.Root` (from ROOT, the repository: no link on the way or as the file)."""
    where = Root(root) if root is not None else Root(makefile.parent)
    try:
        data = where.read_bytes(makefile, MAX_READ_BYTES) or b""
    except Refused:
        data = b""  # a Makefile patchctl does not read has no targets
    targets = []
    for line in data.decode("utf-8", errors="replace").splitlines():
        if not line or line[0] in " \t#" or line.startswith("."):
            continue
        match = re.match(r"([^:=#]+?)\s*::?(?!=)", line)
        if match and "$" not in match.group(1):
            targets += match.group(1).split()
    return targets


def _target_made(target: str, targets: list[str]) -> bool:
    return any(t == target or ("%" in t and re.fullmatch(re.escape(t).replace("%", ".+", 1), target)) for t in targets)


def build_inputs(matrix: BuildMatrix) -> list[Finding]:
    found = []
    root = matrix.root
    for row in matrix.rows:
        if root is None:  # fail closed: nothing says where the files would be
            found.append(
                Finding(
                    row.file,
                    row.line,
                    "MX701",
                    f"{row.describe()}: no repository root to look for its files in",
                    row.subject,
                )
            )
            continue
        if row.section == DARWIN:
            target = DARWIN_MAKE_TARGET.format(backend=row.backend)
            makefile = next((root / name for name in MAKEFILES if (root / name).is_file()), None)
            if makefile is None or not _target_made(target, make_targets(makefile, root)):
                where = f"{makefile.name} has no rule for it" if makefile else "there is no Makefile"
                found.append(
                    Finding(
                        row.file,
                        row.line,
                        "MX701",
                        f"{row.describe()}: builds with `make {target}` but {where}",
                        row.subject,
                    )
                )
            continue
        for key, want_dir in (("dockerfile", False), ("context", True)):
            name = row.get(key)
            path = inside(root, name)
            if path is None:
                problem = "is not set" if not name else f"{name!r} leaves the repository (absolute, .. or a link out)"
            elif not (path.is_dir() if want_dir else path.is_file()):
                problem = f"{name} is not a {'directory' if want_dir else 'file'} in the repository"
            else:
                continue
            found.append(Finding(row.file, row.line, "MX701", f"{row.describe()}: {key} {problem}", row.subject))
    return found


def matrix_sizes(matrix: BuildMatrix) -> list[Finding]:
    """The workflow runs three matrices: Linux rows, macOS rows, and one merge job per amd64/arm64 pair."""
    found = []
    pairs: dict[str, Row] = {}
    for row in matrix.linux_rows():
        if row.get("platform-tag"):
            pairs.setdefault(row.tag_suffix, row)
    jobs = {"Linux": matrix.linux_rows(), "macOS": matrix.darwin_rows(), "amd64/arm64 merge": list(pairs.values())}
    for what, rows in jobs.items():
        if len(rows) > MAX_MATRIX_JOBS:
            first = rows[MAX_MATRIX_JOBS]
            found.append(
                Finding(
                    first.file,
                    first.line,
                    "MX702",
                    f"the {what} matrix has {len(rows)} jobs, above GitHub's {MAX_MATRIX_JOBS} per matrix "
                    f"(from {first.describe()} on): split the rows over more workflows",
                    what,
                )
            )
    return found


MATRIX_CHECKS: tuple[Callable[[BuildMatrix], list[Finding]], ...] = (
    tag_suffix_convention,
    tag_suffix_unique,
    arm_runners,
    platform_pairs,
    index_coverage,
    variants_have_rows,
    development_names,
    mirror_tags,
    unique_index_names,
    capability_targets,
    capability_keys,
    capability_toolchains,
    variant_names,
    canary_toolchains,
    backend_paths,
    build_inputs,
    matrix_sizes,
)


def run_checks(matrix: BuildMatrix, config: Config | None = None, tally: WorkflowTally | None = None) -> list[Finding]:
    """Every invariant's findings, sorted by file and line; TALLY counts what the workflow rules read."""
    findings = [finding for check in MATRIX_CHECKS for finding in check(matrix)]
    findings += tracking_pins_equal(config, matrix.matrix_file)
    findings += tracking_pins_not_bumped(config, matrix.matrix_file)
    findings += workflow_references(matrix, config, tally=tally)
    findings += extras_cover_the_engine(matrix, config)
    return sorted(set(findings))
