"""Schema of the build-matrix sections, shared by matrix.yaml and LocalAI-format files.

    include:                      # Linux image builds (LocalAI's backend-matrix row schema)
      - build-type: cublas        # '' (CPU), cublas, l4t, hipblas, intel, sycl_f16, sycl_f32, vulkan
        cuda-major-version: "13"
        cuda-minor-version: "0"
        platforms: linux/amd64
        platform-tag: amd64       # optional: set on both rows of an amd64/arm64 pair
        tag-latest: auto
        tag-suffix: -gpu-nvidia-cuda-13-llama-cpp
        runs-on: ubuntu-latest
        base-image: ubuntu:24.04
        builder-base-image: ...   # optional
        skip-drivers: "false"     # optional
        backend: llama-cpp
        dockerfile: ./backend/Dockerfile.llama-cpp
        context: ./
        ubuntu-version: "2404"    # optional
    includeDarwin:                # macOS builds
      - {backend: llama-cpp, tag-suffix: -metal-darwin-arm64-llama-cpp, build-type: metal, lang: go}
    index:
      output: backend/index.yaml  # where `matrix render` writes the LocalAI-format index
      metas:    [{name, alias, description, capabilities: {CAPABILITY: VARIANT}}]
      variants: [{name, uri, mirrors: [...]}]
    canary:
      upstream: llama.cpp
      schedule: '17 3 * * 1'      # cron, UTC
      toolchains:                 # optional: none is an apply-only canary
        - {name, tag-suffix, platform, cuda-major-version, image, runs-on, command, dockerfile}
        - {name, runs-on, command}  # no image: the runner's own toolchain
    backends:
      llama-cpp: {paths: [GLOB...], shared: [GLOB...]}
    workflows:
      action: patchctl/patchctl@<40-hex commit>   # the patchctl action the workflows call ('./' in patchctl's repo)
      extras: [engine]           # patchctl's extras the workflows install (default: engine when a gate runs it)
      pin_sync:
        github_app: {client_id_var: NAME, private_key_secret: NAME}   # the App token pin-sync pushes with
        automerge: squash        # merge | squash | rebase: a green sync's pull request merges itself (off by default)

Every value that can reach a rendered workflow is restricted to a safe character set, so
no value can open a GitHub expression (`${{`), start a YAML construct or a shell word
split. Errors name the file, the key path and the line.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Any

from ..patterns import lazy
from ..project.validation import Validator, kind
from ..project.yamlloc import KeyPath, LocatedDocument
from .actions import ACTION_NAME, COMMIT_SHA, SELF_ACTION, parse_actions
from .capabilities import parse_capabilities
from .model import (
    DARWIN,
    LINUX,
    BackendPaths,
    BuildMatrix,
    Canary,
    CanaryToolchain,
    GithubApp,
    Meta,
    Row,
    Variant,
    WorkflowSettings,
)

# Letters, digits and . _ : / @ + = , ~ - only: no '$', braces, quotes, '#', '&', '*', '!',
# '|', '>', '%', spaces or newlines.
SAFE_VALUE = lazy(r"^[A-Za-z0-9._:/@+=,~-]*$")
SAFE_NAME = lazy(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
SAFE_GLOB = lazy(r"^[A-Za-z0-9._/*?+@=,~-]+$")
CRON_FIELD = lazy(r"^[0-9*/,-]+$")
PLATFORM = lazy(r"^[a-z0-9]+/[a-z0-9]+(/[a-z0-9]+)?$")
DIGITS_OR_EMPTY = lazy(r"^[0-9]*$")
OPTIONAL_NAME = lazy(r"^([A-Za-z0-9][A-Za-z0-9._-]*)?$")
# A repository variable's or secret's name, as GitHub allows them.
SETTING_NAME = lazy(r"^[A-Za-z_][A-Za-z0-9_]*$")
# LocalAI's index is only read, never rendered: any single word will do there.
ANY_WORD = lazy(r"^\S*$")

LINUX_REQUIRED = (
    "build-type",
    "cuda-major-version",
    "cuda-minor-version",
    "platforms",
    "tag-latest",
    "tag-suffix",
    "runs-on",
    "base-image",
    "backend",
    "dockerfile",
    "context",
)
LINUX_OPTIONAL = ("platform-tag", "builder-base-image", "skip-drivers", "ubuntu-version")
DARWIN_REQUIRED = ("backend", "tag-suffix")
DARWIN_OPTIONAL = ("build-type", "lang")
NON_EMPTY = ("tag-suffix", "backend", "platforms", "runs-on", "base-image", "dockerfile", "context")
DEFAULT_SCHEDULE = "17 3 * * 1"
# A canary toolchain is a shipped row's (its image) or, without `image`, the runner's own: a
# row's keys (tag-suffix, cuda-major-version, platform) and a dockerfile need an image.
IMAGE_TOOLCHAIN_KEYS = (
    "name",
    "tag-suffix",
    "platform",
    "cuda-major-version",
    "image",
    "runs-on",
    "command",
    "dockerfile",
)
RUNNER_TOOLCHAIN_KEYS = ("name", "runs-on", "command")


# `workflows: extras:` what a workflow may install with patchctl: the engine (gates that import
# torch, numpy, gguf) and the health page's charts; the test and docs extras are for developing patchctl.
WORKFLOW_EXTRAS = ("engine", "health")
# `workflows: pin_sync: automerge:`: the merge methods `gh pr merge --auto` takes.
AUTOMERGE_METHODS = ("merge", "squash", "rebase")


class Section(Validator):
    """Reads one file's build-matrix sections, raising located ConfigErrors."""

    def __init__(self, doc: LocatedDocument, display: str):
        super().__init__(doc)
        self.display = display

    def scalar(
        self, value: Any, keypath: KeyPath, *, pattern: re.Pattern[str] = SAFE_VALUE, non_empty: bool = False
    ) -> str:
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, int):
            text = str(value)
        elif isinstance(value, str):
            text = value
        else:
            raise self.error(keypath, f"must be a string, got {kind(value)}")
        if non_empty and not text:
            raise self.error(keypath, "must not be empty")
        if not pattern.match(text):
            raise self.error(
                keypath, f"unsafe value {text!r}: only letters, digits and . _ : / @ + = , ~ - are allowed"
            )
        return text

    # ------------------------------------------------------------ build rows

    def rows(self, value: Any, keypath: KeyPath, section: str) -> list[Row]:
        if value is None:
            return []
        required, optional = (
            (LINUX_REQUIRED, LINUX_OPTIONAL) if section == LINUX else (DARWIN_REQUIRED, DARWIN_OPTIONAL)
        )
        rows = []
        for i, item in enumerate(self.sequence(value, keypath)):
            where = keypath + (i,)
            self.mapping(item, where, required + optional, required)
            values = {key: self.scalar(item[key], where + (key,), non_empty=key in NON_EMPTY) for key in item}
            if not values["tag-suffix"].startswith("-"):
                raise self.error(
                    where + ("tag-suffix",), f"tag-suffix must start with '-', got {values['tag-suffix']!r}"
                )
            if not SAFE_NAME.match(values["backend"]):
                raise self.error(where + ("backend",), f"invalid backend name {values['backend']!r}")
            for key in ("cuda-major-version", "cuda-minor-version"):
                if not DIGITS_OR_EMPTY.match(values.get(key, "")):
                    raise self.error(where + (key,), f"must be a number or empty, got {values[key]!r}")
            if section == LINUX:
                for platform in values["platforms"].split(","):
                    if not PLATFORM.match(platform):
                        raise self.error(
                            where + ("platforms",),
                            f"invalid platform {platform!r} (expected os/arch, e.g. linux/amd64)",
                        )
            rows.append(Row(section, i, self.display, self.line(where), values))
        return rows

    # ------------------------------------------------------------ index

    def meta(self, item: dict, where: KeyPath, *, strict: bool) -> Meta:
        capabilities = item["capabilities"]
        if not isinstance(capabilities, dict) or not capabilities:
            raise self.error(where + ("capabilities",), "must be a non-empty mapping of capability to variant name")
        pattern = SAFE_NAME if strict else ANY_WORD
        caps = {}
        for key, target in capabilities.items():
            caps[self.scalar(key, where + ("capabilities", key), pattern=pattern)] = self.scalar(
                target, where + ("capabilities", key), pattern=pattern, non_empty=True
            )
        description = item.get("description", "")
        if not isinstance(description, str):
            raise self.error(where + ("description",), f"must be a string, got {kind(description)}")
        return Meta(
            name=self.scalar(item["name"], where + ("name",), pattern=pattern, non_empty=True),
            file=self.display,
            line=self.line(where),
            capabilities=caps,
            capability_lines={key: self.line(where + ("capabilities", key)) for key in caps},
            alias=self.scalar(item.get("alias", ""), where + ("alias",), pattern=OPTIONAL_NAME if strict else ANY_WORD),
            description=description,
        )

    def variant(self, item: dict, where: KeyPath, *, strict: bool) -> Variant:
        mirrors = item.get("mirrors") or []
        self.sequence(mirrors, where + ("mirrors",))
        pattern = SAFE_VALUE if strict else ANY_WORD
        return Variant(
            name=self.scalar(item["name"], where + ("name",), pattern=SAFE_NAME if strict else pattern, non_empty=True),
            file=self.display,
            line=self.line(where),
            uri=self.scalar(item["uri"], where + ("uri",), pattern=pattern, non_empty=True),
            mirrors=tuple(
                self.scalar(m, where + ("mirrors", j), pattern=pattern, non_empty=True) for j, m in enumerate(mirrors)
            ),
        )

    def index_section(self, value: Any, keypath: KeyPath) -> tuple[str, list[Meta], list[Variant]]:
        self.mapping(value, keypath, ("output", "metas", "variants", "capabilities"))
        output = self.scalar(value.get("output", "backend/index.yaml"), keypath + ("output",), non_empty=True)
        parts = PurePosixPath(output).parts
        if output.startswith("/") or ".." in parts or not output.endswith((".yaml", ".yml")):
            raise self.error(keypath + ("output",), f"must be a relative .yaml path without '..', got {output!r}")
        metas = []
        for i, item in enumerate(self.sequence(value.get("metas", []), keypath + ("metas",))):
            where = keypath + ("metas", i)
            self.mapping(item, where, ("name", "alias", "description", "capabilities"), ("name", "capabilities"))
            metas.append(self.meta(item, where, strict=True))
        variants = []
        for i, item in enumerate(self.sequence(value.get("variants", []), keypath + ("variants",))):
            where = keypath + ("variants", i)
            self.mapping(item, where, ("name", "uri", "mirrors"), ("name", "uri"))
            variants.append(self.variant(item, where, strict=True))
        return output, metas, variants

    def localai_index(self, value: Any) -> tuple[list[Meta], list[Variant]]:
        """LocalAI's index: one list; an entry with `uri` is a variant, one with only `capabilities` a meta."""
        metas, variants = [], []
        for i, item in enumerate(self.sequence(value, ())):
            where: KeyPath = (i,)
            if not isinstance(item, dict) or "name" not in item:
                raise self.error(where, "each index entry must be a mapping with a 'name'")
            if item.get("uri"):
                variants.append(self.variant(item, where, strict=False))
            elif item.get("capabilities"):
                metas.append(self.meta(item, where, strict=False))
        return metas, variants

    # ------------------------------------------------------------ canary and backends

    def canary(self, value: Any, keypath: KeyPath, upstreams: set[str]) -> Canary:
        self.mapping(value, keypath, ("upstream", "schedule", "toolchains"), ("upstream",))
        upstream = self.scalar(value["upstream"], keypath + ("upstream",), pattern=SAFE_NAME)
        if upstream not in upstreams:
            raise self.error(
                keypath + ("upstream",),
                f"unknown upstream {upstream!r} (known: {', '.join(sorted(upstreams)) or 'none'})",
            )
        schedule = value.get("schedule", DEFAULT_SCHEDULE)
        if (
            not isinstance(schedule, str)
            or len(schedule.split()) != 5
            or not all(CRON_FIELD.match(f) for f in schedule.split())
        ):
            raise self.error(
                keypath + ("schedule",), f"must be a 5-field cron expression of digits and * / , -, got {schedule!r}"
            )
        toolchains = []
        names: set[str] = set()
        # None or []: an apply-only canary (every series applied to the tip, nothing compiled).
        given = value.get("toolchains")
        items = [] if given is None else self.sequence(given, keypath + ("toolchains",))
        for i, item in enumerate(items):
            toolchain = self.toolchain(item, keypath + ("toolchains", i))
            if toolchain.name in names:
                raise self.error(keypath + ("toolchains", i, "name"), f"duplicate toolchain name {toolchain.name!r}")
            names.add(toolchain.name)
            toolchains.append(toolchain)
        return Canary(upstream=upstream, schedule=" ".join(schedule.split()), toolchains=tuple(toolchains))

    def toolchain(self, item: Any, where: KeyPath) -> CanaryToolchain:
        """A shipped row's toolchain (its image: tag-suffix, cuda-major-version and image required),
        or, without `image`, the runner's own (only `name`, `runs-on` and `command`)."""
        on_runner = isinstance(item, dict) and "image" not in item
        if on_runner:
            for key in item:
                if key in IMAGE_TOOLCHAIN_KEYS and key not in RUNNER_TOOLCHAIN_KEYS:
                    raise self.error(
                        where + (key,),
                        f"{key} is for a toolchain that compiles in a shipped row's image: add that row's `image:`, "
                        "or drop it (without `image:` the build runs with the runner's own toolchain)",
                    )
            self.mapping(item, where, RUNNER_TOOLCHAIN_KEYS, ("name",))
        else:
            self.mapping(item, where, IMAGE_TOOLCHAIN_KEYS, ("name", "tag-suffix", "cuda-major-version", "image"))
        return CanaryToolchain(
            name=self.scalar(item["name"], where + ("name",), pattern=SAFE_NAME),
            file=self.display,
            line=self.line(where),
            tag_suffix="" if on_runner else self.scalar(item["tag-suffix"], where + ("tag-suffix",), non_empty=True),
            platform=self.scalar(item.get("platform", ""), where + ("platform",)),
            cuda_major=self.scalar(
                item.get("cuda-major-version", ""), where + ("cuda-major-version",), pattern=DIGITS_OR_EMPTY
            ),
            image="" if on_runner else self.scalar(item["image"], where + ("image",), non_empty=True),
            runs_on=self.scalar(item.get("runs-on", ""), where + ("runs-on",)),
            command=self.command(item.get("command", ""), where + ("command",)),
            dockerfile=self.relative_path(item.get("dockerfile", ""), where + ("dockerfile",)),
        )

    def command(self, value: Any, keypath: KeyPath) -> str:
        if not isinstance(value, str):
            raise self.error(keypath, f"must be a shell command string, got {kind(value)}")
        if value and not value.strip():
            raise self.error(keypath, "must not be blank")
        return value.strip()

    def relative_path(self, value: Any, keypath: KeyPath) -> str:
        text = self.scalar(value, keypath)
        if text and (text.startswith("/") or ".." in text.split("/")):
            raise self.error(keypath, f"must be a path inside the repository, got {text!r}")
        return text

    def backends(self, value: Any, keypath: KeyPath) -> dict[str, BackendPaths]:
        if not isinstance(value, dict):
            raise self.error(keypath, f"must be a mapping of backend name to paths, got {kind(value)}")
        result = {}
        for name, item in value.items():
            where = keypath + (name,)
            self.scalar(name, where, pattern=SAFE_NAME)
            self.mapping(item, where, ("paths", "shared"))
            lists = {}
            for key in ("paths", "shared"):
                lists[key] = tuple(
                    self.glob(g, where + (key, j))
                    for j, g in enumerate(self.sequence(item.get(key, []), where + (key,)))
                )
            if not lists["paths"] and not lists["shared"]:
                raise self.error(where, "list at least one path under 'paths' or 'shared'")
            result[name] = BackendPaths(name, self.display, self.line(where), lists["paths"], lists["shared"])
        return result

    def glob(self, value: Any, keypath: KeyPath) -> str:
        text = self.scalar(value, keypath, pattern=SAFE_GLOB, non_empty=True)
        if text.startswith("/") or ".." in text.split("/"):
            raise self.error(keypath, f"paths are relative to the repository root, without '..': {text!r}")
        return text

    # ------------------------------------------------------------ workflows

    def workflows(self, value: Any, keypath: KeyPath) -> WorkflowSettings:
        self.mapping(value, keypath, ("action", "extras", "pin_sync"))
        action = extras = None
        if "extras" in value:
            extras = self.extras(value["extras"], keypath + ("extras",))
        if "action" in value:
            action = self.scalar(value["action"], keypath + ("action",), non_empty=True)
            name, _, commit = action.partition("@")
            if action != SELF_ACTION and not (ACTION_NAME.match(name) and COMMIT_SHA.match(commit)):
                raise self.error(
                    keypath + ("action",),
                    f"must be {SELF_ACTION} (in patchctl's own repository) or OWNER/REPO@<40-hex commit>, "
                    f"got {action!r}",
                )
        app = automerge = None
        if "pin_sync" in value:
            where = keypath + ("pin_sync",)
            self.mapping(value["pin_sync"], where, ("github_app", "automerge"))
            if "github_app" in value["pin_sync"]:
                app = self.github_app(value["pin_sync"]["github_app"], where + ("github_app",))
            if "automerge" in value["pin_sync"]:
                automerge = value["pin_sync"]["automerge"]
                if automerge not in AUTOMERGE_METHODS:
                    raise self.error(
                        where + ("automerge",),
                        f"must be one of {', '.join(AUTOMERGE_METHODS)} (gh pr merge --auto's methods), "
                        f"got {automerge!r}",
                    )
        return WorkflowSettings(
            action=action,
            github_app=app,
            automerge=automerge,
            extras=extras,
            extras_line=self.line(keypath + ("extras",)) if extras is not None else 0,
            action_line=self.line(keypath + ("action",)) if action is not None else 0,
        )

    def extras(self, value: Any, keypath: KeyPath) -> tuple[str, ...]:
        names: list[str] = []
        for i, name in enumerate(self.sequence(value, keypath)):
            if name not in WORKFLOW_EXTRAS:
                raise self.error(
                    keypath + (i,),
                    f"unknown extra {name!r}: the workflows can install {', '.join(WORKFLOW_EXTRAS)} "
                    "(patchctl's extras in pyproject.toml)",
                )
            if name in names:
                raise self.error(keypath + (i,), f"{name} is listed twice")
            names.append(name)
        return tuple(names)

    def github_app(self, value: Any, keypath: KeyPath) -> GithubApp:
        keys = ("client_id_var", "private_key_secret")
        self.mapping(value, keypath, keys, keys)
        names = {}
        for key in keys:
            text = value[key]
            if not isinstance(text, str) or not SETTING_NAME.match(text):
                raise self.error(
                    keypath + (key,), f"must be a variable or secret name ([A-Za-z_][A-Za-z0-9_]*), got {text!r}"
                )
            if text.upper().startswith("GITHUB_"):
                raise self.error(keypath + (key,), f"GitHub reserves names that start with GITHUB_: {text!r}")
            names[key] = text
        return GithubApp(**names)


def from_sections(doc: LocatedDocument, display: str, data: dict, upstreams: set[str]) -> BuildMatrix:
    """The build matrix of a patchctl matrix.yaml (already parsed into DATA)."""
    reader = Section(doc, display)
    matrix = BuildMatrix(matrix_file=display)
    matrix.rows = reader.rows(data.get(LINUX), (LINUX,), LINUX) + reader.rows(data.get(DARWIN), (DARWIN,), DARWIN)
    if "index" in data:
        matrix.index_output, matrix.metas, matrix.variants = reader.index_section(data["index"], ("index",))
        matrix.index_file = display
        if "capabilities" in data["index"]:
            matrix.capabilities = parse_capabilities(
                reader, data["index"]["capabilities"], ("index", "capabilities"), SAFE_NAME
            )
    if "canary" in data:
        matrix.canary = reader.canary(data["canary"], ("canary",), upstreams)
    if "backends" in data:
        matrix.backends = reader.backends(data["backends"], ("backends",))
    if "actions" in data:
        matrix.actions = parse_actions(reader, data["actions"], ("actions",))
    if "workflows" in data:
        matrix.workflows = reader.workflows(data["workflows"], ("workflows",))
    return matrix
