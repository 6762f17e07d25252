"""matrix.yaml, schema v1: the single source of truth, validated on load.

    version: 1
    upstreams:
      NAME:
        url: https://... | file:///... | /local/path | pypi-sdist:PACKAGE?versions=A,B&subdir=DIR
        branch: master
        pin: <40-hex commit id>
        tracks: OTHER            # optional: this pin must always equal OTHER's
        auto_bump: false         # optional: listed for nightly auto-bumping
        pin_files:               # optional: other places that mirror the pin
          - {path: Makefile, pattern: 'LLAMA_VERSION\\?=(?P<pin>[0-9a-f]{40})'}
        version: 1.4.6           # optional: the release the pin is, as the downstream names it
        tag: v{version}          # optional: the upstream's tag for a version (default '{version}')
        manifests:               # optional: the downstream's files that state it (patchctl.project.version_keys)
          - {path: Makefile, format: openwrt}
        ci:                      # optional: where CI follows it instead (--upstream-source ci)
          url: https://github.com/OWNER/REPO
          branch: master
          pin: <40-hex commit id>  # the same tree as `pin`, in that repository (default: `pin`)
    series:
      NAME:
        upstream: NAME
        dir: patches/NAME
        exclude: ['*.md', 'docs/**']   # source-only policy (this is the default)
        naming: format-patch     # format-patch (default) | strict | quilt | openwrt | electron | any, see below
        list: {kind: quilt, path: debian/patches/series}  # where the order lives (series_keys.py)
        form: own                # own (default) | electron | {format_patch: [OPTIONS]} (series_keys.py)
        allow_empty: false       # a series with no patch (or no directory) is an error unless true
        allow_crlf: false
        allow_binary: false
        allow_undescribed: false # true: lint does not ask for subjects and descriptions (PC007, PC008)
        upstream_status: optional  # required: lint asks every patch for Yocto's Upstream-Status: header (PC014)
        build: [{name, runner: local|docker, command, image, timeout, env, pass_env}]
        gates: [{name, command, timeout, baseline, pass_env, slow}]
        vendor:                  # optional: copies of the patched tree kept in this repository
          - from: src            # upstream directory ('' = the tree's root)
            to: third_party/up/src   # repository directory (patchctl vendor writes it)
            include: ['**']      # globs relative to `from`: what is copied
            exclude: []          # globs relative to `from`: never copied
            protect: ['**/*.go'] # globs relative to `to`: the project's own files, never touched
            filter: third_party/up/src/.rsync-filter  # optional: rsync filter rules (a file, or `-f` rules)
            files:               # optional: single upstream files copied into `to` from elsewhere
              - {from: LICENSE, to: third_party/up/src/LICENSE}

Gates and build steps run with a scrubbed environment (`patchctl.project.gate_env`); `pass_env:`
lists the further variables one of them receives from patchctl's environment.

An upstream's `ci:` block is the source CI follows: `--upstream-source ci` (or
`$PATCHCTL_UPSTREAM_SOURCE=ci`, which the rendered canary workflow sets) swaps
in its url, branch and pin, so that on github.com the canary watches the real repository
while a machine that cannot reach it keeps the embedded default (`--upstream-source default`).
Upstreams without `ci:` are the same under both; `--upstream-url` still wins over either.

`naming` says how the series' files are named and ordered:

* `format-patch` (default): `NNNN-<slug>.patch` as git format-patch names them: any case,
  a slug of at most 52 characters of `[A-Za-z0-9._-]`; applied in name order; numbering
  gaps are allowed, duplicate numbers are not;
* `strict`: the same with a lower-case slug, numbered 0001, 0002, ... without gaps;
* `quilt`: any file names, applied in the order of the `series` file in the series' directory;
* `openwrt`: `NNN-<slug>.patch` (three digits, in bands 0xx, 1xx, ...), in name order;
* `electron`: `<slug>.patch` with an underscore slug, in the order of the directory's `.patches`;
* `any`: any file names, in the order of `list:` (name order without one).

The CI build rows (`include:`, `includeDarwin:`, `index:`, `canary:`, `backends:`) are
validated by `patchctl.matrix`. Every error names the file, the key path and the line.
"""

from __future__ import annotations

import os
import re
from dataclasses import field, replace
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, UsageError
from ..git import is_full_sha
from ..patterns import lazy
from ..records import dataclass
from . import yamlloc
from .gate_env import pass_env_problem
from .globs import any_match
from .series_keys import NAMINGS, PatchForm, PatchList, parse_form, parse_list
from .upstream_checks import env_name_problem, ref_name_problem, url_problem
from .upstream_source import UPSTREAM_SOURCES
from .validation import Validator, kind
from .version_keys import VERSION_KEYS, read_version_keys
from .yamlloc import KeyPath, LocatedDocument, format_keypath

if TYPE_CHECKING:
    from .manifests import Manifest
    from .rsyncfilter import RsyncFilter

SCHEMA_VERSION = 1
DEFAULT_CONFIG_NAME = "matrix.yaml"
DEFAULT_EXCLUDE = ("*.md", "docs/**")
UPSTREAM_URL_ENV = "PATCHCTL_UPSTREAM_URL"
RUNNERS = ("local", "docker")
UPSTREAM_STATUS_POLICIES = ("optional", "required")

# Sections that belong to the CI build matrix; `patchctl.matrix` validates them.
MATRIX_SECTIONS = ("include", "includeDarwin", "index", "canary", "backends", "actions", "workflows")
TOP_LEVEL_KEYS = ("version", "upstreams", "series", *MATRIX_SECTIONS)
_NAME_RE = lazy(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class PinFile:
    path: str
    pattern: re.Pattern[str]


@dataclass(frozen=True)
class Upstream:
    name: str
    url: str
    branch: str
    pin: str
    tracks: str | None = None
    auto_bump: bool = False
    pin_files: tuple[PinFile, ...] = ()
    ci: CiSource | None = None  # where CI follows this upstream (matrix.yaml `ci:`)
    # where `pin` lives in matrix.yaml: ("upstreams", NAME, "pin"), or (..., "ci", "pin") under --upstream-source ci
    pin_keypath: tuple[str, ...] = ()
    # the release the downstream names the pin by, the upstream's tag for it, and the downstream's
    # manifests that state them (patchctl.project.version_keys)
    version: str | None = None
    tag: str = "{version}"
    manifests: tuple[Manifest, ...] = ()


@dataclass(frozen=True)
class CiSource:
    url: str
    branch: str
    pin: str
    pin_keypath: tuple[str, ...]  # where that pin is written: the `ci:` block's own, or the upstream's


@dataclass(frozen=True)
class BuildStep:
    name: str
    command: str
    runner: str = "local"
    image: str | None = None
    timeout: int = 3600
    env: tuple[tuple[str, str], ...] = ()
    pass_env: tuple[str, ...] = ()


@dataclass(frozen=True)
class Gate:
    name: str
    command: str
    timeout: int = 1800
    baseline: dict[str, Any] | None = None
    pass_env: tuple[str, ...] = ()
    slow: bool = False  # `patchctl gate --skip-slow` (pull-request CI) leaves it out


@dataclass(frozen=True)
class VendorFile:
    """One `files:` item of a vendored copy: the upstream file SOURCE (from the tree's root),
    copied to DEST, a path inside the copy's directory (rsync's `$(UPSTREAM)/LICENSE` source)."""

    source: str  # upstream path, relative to the tree's root
    dest: str  # repository path, inside the copy's `to`


@dataclass(frozen=True)
class VendorCopy:
    """One `vendor:` entry: the files of the patched tree under SOURCE that INCLUDE selects and
    EXCLUDE does not (and FILTER sends, when given), copied to DEST; PROTECT (and FILTER's
    protect rules) name the project's own files in DEST; FILES are single upstream files
    copied into DEST from elsewhere in the tree."""

    source: str  # upstream directory, '/'-separated, relative to the tree ('' = its root)
    dest: str  # repository directory, relative to matrix.yaml's
    include: tuple[str, ...] = ("**",)
    exclude: tuple[str, ...] = ()
    protect: tuple[str, ...] = ()
    where: str = ""  # FILE:LINE: KEYPATH of the entry, for errors
    filter: RsyncFilter | None = None  # rsync's filter rules; its files (repository paths) are the project's
    files: tuple[VendorFile, ...] = ()


@dataclass(frozen=True)
class Series:
    name: str
    upstream: str
    dir: Path
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    allow_crlf: bool = False
    allow_binary: bool = False
    naming: str = "format-patch"
    build: tuple[BuildStep, ...] = ()
    gates: tuple[Gate, ...] = ()
    # Fail closed: a series with no patch is an error unless matrix.yaml says it is intended.
    allow_empty: bool = False
    # An adopted series whose patches lack subjects or descriptions: lint leaves PC007/PC008 out.
    allow_undescribed: bool = False
    # `required`: lint refuses a patch without a well-formed `Upstream-Status:` header (PC014).
    upstream_status: str = "optional"
    vendor: tuple[VendorCopy, ...] = ()
    # Where the order lives (the downstream's own list, edited in place) and how export writes a file.
    patch_list: PatchList = PatchList()
    form: PatchForm = PatchForm()
    # Where `dir:` (or the series, when it has no `dir:`) is in matrix.yaml, as FILE:LINE: KEYPATH,
    # for errors about the directory; and the repository root its files must stay inside.
    where: str = ""
    root: Path | None = None


@dataclass
class Config:
    path: Path
    doc: LocatedDocument
    upstreams: dict[str, Upstream] = field(default_factory=dict)
    series: dict[str, Series] = field(default_factory=dict)

    @property
    def root(self) -> Path:
        """The directory matrix.yaml lives in; relative paths in it resolve from here."""
        return self.path.parent

    @property
    def raw(self) -> dict[str, Any]:
        return self.doc.data

    def error(self, keypath: KeyPath, message: str) -> ConfigError:
        return self.doc.error(keypath, message)

    def get_series(self, name: str) -> Series:
        if name not in self.series:
            known = ", ".join(sorted(self.series)) or "none"
            raise UsageError(f"unknown series {name!r} (matrix.yaml defines: {known})")
        return self.series[name]

    def get_upstream(self, name: str) -> Upstream:
        if name not in self.upstreams:
            known = ", ".join(sorted(self.upstreams)) or "none"
            raise UsageError(f"unknown upstream {name!r} (matrix.yaml defines: {known})")
        return self.upstreams[name]

    def select_series(self, names: tuple[str, ...] | list[str]) -> list[Series]:
        """The named series, or every series when NAMES is empty."""
        return [self.get_series(n) for n in names] if names else list(self.series.values())

    def series_on(self, upstream: str) -> list[Series]:
        return [s for s in self.series.values() if s.upstream == upstream]

    def trackers_of(self, upstream: str) -> list[Upstream]:
        return [u for u in self.upstreams.values() if u.tracks == upstream]

    def with_url_overrides(self, overrides: dict[str, str]) -> Config:
        for name in overrides:
            if name not in self.upstreams:
                known = ", ".join(sorted(self.upstreams)) or "none"
                raise UsageError(f"--upstream-url names unknown upstream {name!r} (known: {known})")
        for name, url in overrides.items():
            if (problem := url_problem(url)) is not None:
                raise UsageError(f"--upstream-url {name}: {problem}")
        self.upstreams = {name: replace(up, url=overrides.get(name, up.url)) for name, up in self.upstreams.items()}
        return self

    def with_upstream_source(self, source: str) -> Config:
        """Under `ci`, every upstream with a `ci:` block takes its url, branch and pin from it."""
        if source not in UPSTREAM_SOURCES:
            raise UsageError(f"unknown upstream source {source!r} (choose: {', '.join(UPSTREAM_SOURCES)})")
        if source == "ci":
            self.upstreams = {
                name: replace(up, url=up.ci.url, branch=up.ci.branch, pin=up.ci.pin, pin_keypath=up.ci.pin_keypath)
                if up.ci is not None
                else up
                for name, up in self.upstreams.items()
            }
        return self


def find_config(directory: Path | None = None, config_file: Path | None = None) -> Path:
    """Resolve `-C DIR` / `--config FILE` like git does: FILE wins (relative to DIR), else the
    nearest matrix.yaml in DIR (default: the working directory) or a parent, the way git finds
    `.git`; the walk stops at the root of the git repository it starts in (or the filesystem's).
    patchctl's own trees under `.patchctl/` are git work trees too: the walk goes on past them
    to the project that holds them (`patchctl export` right after a commit in the tree), also
    to a matrix.yaml in a subdirectory DIR, whose trees are in `.patchctl/projects/DIR/`."""
    start = Path(directory or ".")
    if config_file is not None:
        path = Path(config_file)
        if directory is not None and not path.is_absolute():
            path = start / path
        if not path.is_file():
            raise ConfigError(f"{path}: no such config file (use -C DIR or --config FILE)")
        return path.resolve()
    if not start.is_dir():
        raise ConfigError(f"{start}: no such directory (-C)")
    here = start.resolve()
    for folder in (here, *here.parents):
        candidate = folder / DEFAULT_CONFIG_NAME
        if candidate.is_file():
            return candidate
        if (folder / ".git").exists() and ".patchctl" not in folder.parts:
            if (inside := _project_of_tree(folder, here)) is not None:
                return inside
            raise ConfigError(
                f"no {DEFAULT_CONFIG_NAME} in {here} or any parent up to the repository root {folder} "
                "(use -C DIR or --config FILE)"
            )
    raise ConfigError(f"no {DEFAULT_CONFIG_NAME} in {here} or any parent (use -C DIR or --config FILE)")


def _project_of_tree(top: Path, here: Path) -> Path | None:
    """The matrix.yaml whose trees HERE is in, when HERE is under TOP/.patchctl/projects/DIR/
    (where a matrix.yaml in the subdirectory DIR keeps them: patchctl.state.worktree)."""
    try:
        parts = here.relative_to(top / ".patchctl" / "projects").parts
    except ValueError:
        return None
    for end in range(len(parts) - 1, 0, -1):
        candidate = top.joinpath(*parts[:end]) / DEFAULT_CONFIG_NAME
        if parts[end] in ("trees", "sync", "gates", "logs") and candidate.is_file():
            return candidate
    return None


def load(path: Path) -> Config:
    """matrix.yaml's upstream and series sections, validated. Commands load the whole file with
    `matrix.sources.load_project`, which validates the build-matrix sections too: this floor is
    below the build matrix's, which reads a loaded Config."""
    doc = yamlloc.load(path)
    config = Config(path=Path(path).resolve(), doc=doc)
    _validate(config)
    return config


def parse_url_overrides(pairs: tuple[str, ...] | list[str], env: dict[str, str] | None = None) -> dict[str, str]:
    """`NAME=URL` pairs from the flag, after those in $PATCHCTL_UPSTREAM_URL (space or comma separated)."""
    env = os.environ if env is None else env
    items = re.split(r"[\s,]+", env.get(UPSTREAM_URL_ENV, "").strip())
    result: dict[str, str] = {}
    for item in [i for i in items if i] + list(pairs):
        name, sep, url = item.partition("=")
        if not sep or not name or not url:
            raise UsageError(f"bad upstream URL override {item!r}: expected NAME=URL")
        result[name] = url
    return result


# ---------------------------------------------------------------- validation


def _validate(config: Config) -> None:
    data = config.raw
    if not isinstance(data, dict):
        raise config.error((), f"top level must be a mapping, got {kind(data)}")
    for key in data:
        if key not in TOP_LEVEL_KEYS:
            raise config.error((key,), f"unknown top-level key (allowed: {', '.join(TOP_LEVEL_KEYS)})")
    version = data.get("version")
    if version != SCHEMA_VERSION:
        raise config.error(("version",), f"schema version must be {SCHEMA_VERSION}, got {version!r}")
    for section in ("upstreams", "series"):
        if not isinstance(data.get(section, {}), dict):
            raise config.error((section,), f"must be a mapping, got {kind(data.get(section))}")
    for name in data.get("upstreams", {}):
        config.upstreams[name] = _upstream(config, name)
    for name, upstream in config.upstreams.items():
        if upstream.tracks is not None and upstream.tracks not in config.upstreams:
            raise config.error(("upstreams", name, "tracks"), f"tracks unknown upstream {upstream.tracks!r}")
        if upstream.tracks == name:
            raise config.error(("upstreams", name, "tracks"), "an upstream cannot track itself")
    for name in data.get("series", {}):
        config.series[name] = _series(config, name)
    _check_vendor_destinations(config)


def _check_name(config: Config, keypath: KeyPath, name: Any) -> None:
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise config.error(keypath, f"invalid name {name!r}: use letters, digits, '.', '_' and '-'")


def _upstream(config: Config, name: str) -> Upstream:
    keypath: KeyPath = ("upstreams", name)
    _check_name(config, keypath, name)
    v = Validator(config.doc)
    v.mapping(v.at(keypath), keypath, ("url", "branch", "pin", "tracks", "auto_bump", "pin_files", "ci", *VERSION_KEYS))
    pin = v.string(keypath, "pin")
    if not is_full_sha(pin):
        raise config.error(keypath + ("pin",), f"pin must be a full 40-hex lowercase commit id, got {pin!r}")
    pin_files = []
    for i in range(len(v.optional_list(keypath, "pin_files"))):
        entry = keypath + ("pin_files", i)
        v.mapping(v.at(entry), entry, ("path", "pattern"))
        path, pattern_text = v.string(entry, "path"), v.string(entry, "pattern")
        _check_relative(config, keypath + ("pin_files", i, "path"), path)
        try:
            pattern = re.compile(pattern_text, re.MULTILINE)
        except re.error as exc:
            raise config.error(keypath + ("pin_files", i, "pattern"), f"invalid regex: {exc}") from None
        if "pin" not in pattern.groupindex:
            raise config.error(keypath + ("pin_files", i, "pattern"), "pattern needs a named group (?P<pin>...)")
        pin_files.append(PinFile(path, pattern))
    url, branch = v.string(keypath, "url"), v.string(keypath, "branch", "master")
    if (problem := url_problem(url)) is not None:
        raise config.error(keypath + ("url",), problem)
    if (problem := ref_name_problem(branch)) is not None:
        raise config.error(keypath + ("branch",), f"{problem}: {branch!r}")
    version, tag, manifests = read_version_keys(v, keypath, lambda at, path: _check_relative(config, at, path))
    if v.at(keypath).get("tracks") is not None and (version is not None or manifests):
        raise config.error(
            keypath + ("tracks",), "a tracking upstream moves with the one it tracks: give that one the version"
        )
    return Upstream(
        name=name,
        url=url,
        branch=branch,
        pin=pin,
        tracks=v.string(keypath, "tracks", required=False),
        auto_bump=v.boolean(keypath, "auto_bump", False),
        pin_files=tuple(pin_files),
        ci=_ci_source(config, keypath, pin) if v.at(keypath).get("ci") is not None else None,
        pin_keypath=(*keypath, "pin"),
        version=version,
        tag=tag,
        manifests=manifests,
    )


def _ci_source(config: Config, upstream: KeyPath, pin: str) -> CiSource:
    keypath = (*upstream, "ci")
    v = Validator(config.doc)
    v.mapping(v.at(keypath), keypath, ("url", "branch", "pin"), required=("url",))
    url, branch, ci_pin = v.string(keypath, "url"), v.string(keypath, "branch", "master"), v.string(keypath, "pin", pin)
    if (problem := url_problem(url)) is not None:
        raise config.error(keypath + ("url",), problem)
    if (problem := ref_name_problem(branch)) is not None:
        raise config.error(keypath + ("branch",), f"{problem}: {branch!r}")
    if not is_full_sha(ci_pin):
        raise config.error(keypath + ("pin",), f"pin must be a full 40-hex lowercase commit id, got {ci_pin!r}")
    declared = "pin" in v.at(keypath)
    return CiSource(url, branch, ci_pin, (*keypath, "pin") if declared else (*upstream, "pin"))


def _series(config: Config, name: str) -> Series:
    keypath: KeyPath = ("series", name)
    _check_name(config, keypath, name)
    v = Validator(config.doc)
    data = v.mapping(
        v.at(keypath),
        keypath,
        (
            "upstream",
            "dir",
            "exclude",
            "allow_crlf",
            "allow_binary",
            "allow_empty",
            "allow_undescribed",
            "upstream_status",
            "naming",
            "list",
            "form",
            "build",
            "gates",
            "vendor",
        ),
    )
    upstream = v.string(keypath, "upstream")
    if upstream not in config.upstreams:
        raise config.error(keypath + ("upstream",), f"unknown upstream {upstream!r}")
    directory = v.string(keypath, "dir", f"patches/{name}")
    _check_relative(config, keypath + ("dir",), directory)
    exclude = v.optional_list(keypath, "exclude") if "exclude" in data else list(DEFAULT_EXCLUDE)
    for i, pattern in enumerate(exclude):
        if not isinstance(pattern, str) or not pattern:
            raise config.error(keypath + ("exclude", i), "exclude entries must be non-empty glob strings")
    naming = v.string(keypath, "naming", "format-patch")
    if naming not in NAMINGS:
        raise config.error(keypath + ("naming",), f"unknown naming {naming!r} (choose: {', '.join(NAMINGS)})")
    upstream_status = v.string(keypath, "upstream_status", "optional")
    if upstream_status not in UPSTREAM_STATUS_POLICIES:
        raise config.error(
            keypath + ("upstream_status",),
            f"unknown upstream_status {upstream_status!r} (choose: {', '.join(UPSTREAM_STATUS_POLICIES)})",
        )
    build = []
    for i in range(len(v.optional_list(keypath, "build"))):
        step = keypath + ("build", i)
        step_data = v.mapping(v.at(step), step, ("name", "command", "runner", "image", "timeout", "env", "pass_env"))
        runner = v.string(step, "runner", "local")
        if runner not in RUNNERS:
            raise config.error(
                keypath + ("build", i, "runner"), f"unknown runner {runner!r} (choose: {', '.join(RUNNERS)})"
            )
        image = v.string(step, "image", required=False)
        if runner == "docker" and image is None:
            raise config.error(keypath + ("build", i), "a docker build step needs an 'image'")
        env = step_data.get("env", {})
        if not isinstance(env, dict) or not all(
            isinstance(k, str) and isinstance(v, (str, int)) for k, v in env.items()
        ):
            raise config.error(keypath + ("build", i, "env"), "env must map names to strings")
        for key, value in env.items():
            if (problem := env_name_problem(key)) is not None:
                raise config.error(keypath + ("build", i, "env", key), problem)
            if "\0" in str(value):
                raise config.error(keypath + ("build", i, "env", key), "NUL character in the value")
        build.append(
            BuildStep(
                name=v.string(step, "name"),
                command=v.string(step, "command"),
                runner=runner,
                image=image,
                timeout=v.positive_int(step, "timeout", 3600),
                env=tuple(sorted((k, str(v)) for k, v in env.items())),
                pass_env=_pass_env(config, v, step),
            )
        )
    gates = []
    for i in range(len(v.optional_list(keypath, "gates"))):
        gate = keypath + ("gates", i)
        baseline = v.mapping(v.at(gate), gate, ("name", "command", "timeout", "baseline", "pass_env", "slow")).get(
            "baseline"
        )
        if baseline is not None and not isinstance(baseline, dict):
            raise config.error(keypath + ("gates", i, "baseline"), "baseline must be a mapping")
        gates.append(
            Gate(
                name=v.string(gate, "name"),
                command=v.string(gate, "command"),
                timeout=v.positive_int(gate, "timeout", 1800),
                baseline=baseline,
                pass_env=_pass_env(config, v, gate),
                slow=v.boolean(gate, "slow", False),
            )
        )
    return Series(
        name=name,
        upstream=upstream,
        # Not resolved: a symlink in it stays visible, so writers can refuse one that leads out.
        dir=config.root / directory,
        exclude=tuple(exclude),
        allow_crlf=v.boolean(keypath, "allow_crlf", False),
        allow_binary=v.boolean(keypath, "allow_binary", False),
        naming=naming,
        build=tuple(build),
        gates=tuple(gates),
        allow_empty=v.boolean(keypath, "allow_empty", False),
        allow_undescribed=v.boolean(keypath, "allow_undescribed", False),
        upstream_status=upstream_status,
        vendor=_vendor(config, v, keypath),
        patch_list=parse_list(config, v, keypath, naming, directory, _check_relative),
        form=parse_form(config, v, keypath),
        where=f"{config.doc.path}:{config.doc.line_of(keypath + ('dir',))}: {format_keypath(keypath + ('dir',))}",
        root=config.root,
    )


def _vendor(config: Config, v: Validator, keypath: KeyPath) -> tuple[VendorCopy, ...]:
    copies = []
    for i, entry in enumerate(v.optional_list(keypath, "vendor")):
        at = keypath + ("vendor", i)
        v.mapping(
            entry, at, ("from", "to", "include", "exclude", "protect", "filter", "files"), required=("from", "to")
        )
        source = entry["from"]
        if not isinstance(source, str):
            raise config.error(at + ("from",), f"must be a string ('' for the tree's root), got {kind(source)}")
        source = PurePosixPath(source.strip("/") or ".").as_posix()  # './src/' and 'src' alike
        if source == ".":
            source = ""
        else:
            _check_relative(config, at + ("from",), source)
        dest = PurePosixPath(v.string(at, "to").strip("/")).as_posix()
        _check_relative(config, at + ("to",), dest)
        if dest in ("", ".") or Path(dest).parts[0] in (".git", ".patchctl"):
            raise config.error(at + ("to",), f"must be a directory of its own in the repository, not {dest!r}")
        globs = {}
        for key, default in (("include", ["**"]), ("exclude", []), ("protect", [])):
            patterns = v.optional_list(at, key) if key in entry else default
            for j, pattern in enumerate(patterns):
                if not isinstance(pattern, str) or not pattern.strip() or pattern.startswith("/") or "\0" in pattern:
                    raise config.error(
                        at + (key, j), f"must be a non-empty glob relative to the directory, got {pattern!r}"
                    )
            globs[key] = tuple(patterns)
        if not globs["include"]:
            raise config.error(at + ("include",), "selects nothing: give at least one glob (['**']: every file)")
        where = f"{config.doc.path}:{config.doc.line_of(at)}: {format_keypath(at)}"
        rules = _vendor_filter(config, at, entry["filter"]) if "filter" in entry else None
        copy = VendorCopy(source, dest, **globs, where=where, filter=rules)
        copies.append(replace(copy, files=_vendor_files(config, v, at, copy)))
    return tuple(copies)


def _vendor_filter(config: Config, at: KeyPath, value: Any) -> RsyncFilter:
    """A copy's `filter:`: a filter file's path (as `merge PATH` reads it) or a list of rsync
    filter rules as `-f` gives them; each merge file is read through `Root`, relative to this file."""
    keypath = at + ("filter",)
    if isinstance(value, str) and value:
        rules, keypaths = [f"merge {value}"], [keypath]
    elif isinstance(value, list) and value:
        rules, keypaths = value, [keypath + (j,) for j in range(len(value))]
        for j, rule in enumerate(rules):
            if not isinstance(rule, str) or not rule or "\0" in rule:
                raise config.error(keypath + (j,), f"must be an rsync filter rule (a string), got {rule!r}")
    else:
        raise config.error(keypath, f"must be a filter file's path or a list of rsync filter rules, got {value!r}")
    # Imported here: only a project with a filter reads rsync's rules (the others start faster).
    from .rsyncfilter import FilterError, load

    try:
        return load(config.root, rules)
    except FilterError as exc:
        raise config.error(keypaths[exc.index], str(exc)) from None


def _vendor_files(config: Config, v: Validator, at: KeyPath, copy: VendorCopy) -> tuple[VendorFile, ...]:
    """A copy's `files:`: single upstream files copied into its directory, each a path the copy manages."""
    files: dict[str, VendorFile] = {}
    for j, item in enumerate(v.optional_list(at, "files")):
        keypath = at + ("files", j)
        v.mapping(item, keypath, ("from", "to"), required=("from", "to"))
        source = PurePosixPath(v.string(keypath, "from").strip("/") or ".").as_posix()
        _check_relative(config, keypath + ("from",), source)
        if source == ".":
            raise config.error(keypath + ("from",), "must name an upstream file, not the tree's root")
        dest = PurePosixPath(v.string(keypath, "to").strip("/") or ".").as_posix()
        _check_relative(config, keypath + ("to",), dest)
        if not dest.startswith(copy.dest + "/"):
            raise config.error(keypath + ("to",), f"must be a path inside the copy's `to` ({copy.dest}/), got {dest!r}")
        relative = dest[len(copy.dest) + 1 :]
        if dest in files:
            raise config.error(keypath + ("to",), f"{dest} is already the destination of another `files:` item")
        if any_match(relative, copy.protect) or (
            copy.filter is not None and (copy.filter.protects(relative) or dest in copy.filter.files)
        ):
            raise config.error(
                keypath + ("to",), f"{dest} is the project's own (protect, filter): a `files:` item is copied there"
            )
        files[dest] = VendorFile(source, dest)
    return tuple(files.values())


def _check_vendor_destinations(config: Config) -> None:
    """Every vendored copy owns its directory: none inside another, nor inside a patch directory."""
    owners: list[tuple[str, str, KeyPath]] = []
    for series in config.series.values():
        for i, copy in enumerate(series.vendor):
            owners.append(
                (copy.dest, f"the vendored copy of series {series.name}", ("series", series.name, "vendor", i, "to"))
            )
    dirs = [
        (s.dir.relative_to(config.root).as_posix(), f"the patch directory of series {s.name}")
        for s in config.series.values()
    ]
    for index, (dest, _, at) in enumerate(owners):
        for other, what in [(d, w) for d, w, _ in owners[:index]] + dirs:
            if dest == other or dest.startswith(other + "/") or other.startswith(dest + "/"):
                raise config.error(
                    at, f"{dest} overlaps {other}, {what}: each vendored copy needs a directory of its own"
                )


def _pass_env(config: Config, v: Validator, keypath: KeyPath) -> tuple[str, ...]:
    """A gate's or build step's `pass_env:`: a list of variable names."""
    names = v.optional_list(keypath, "pass_env")
    for i, name in enumerate(names):
        if (problem := pass_env_problem(name)) is not None:
            raise config.error(keypath + ("pass_env", i), problem)
    return tuple(names)


def _check_relative(config: Config, keypath: KeyPath, path: str) -> None:
    parts = Path(path).parts
    if Path(path).is_absolute() or ".." in parts:
        raise config.error(keypath, f"path must be relative to the config's directory, without '..': {path!r}")
    if len(path.encode(errors="surrogateescape")) > 1024 or any(
        len(p.encode(errors="surrogateescape")) > 255 for p in parts
    ):
        raise config.error(keypath, f"path too long (at most 255 bytes a component, 1024 in all): {path[:60]!r}...")
