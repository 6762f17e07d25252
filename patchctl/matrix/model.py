"""The CI build matrix as data: build rows, the backend index, the canary, backend paths."""

from __future__ import annotations

from dataclasses import field
from pathlib import Path

from ..records import dataclass
from .actions import DEFAULT_ACTIONS, ActionPin

LINUX = "include"
DARWIN = "includeDarwin"


@dataclass(frozen=True)
class Row:
    """One image build. Values are kept as the strings GitHub Actions will see."""

    section: str  # LINUX or DARWIN
    position: int
    file: str
    line: int
    values: dict[str, str]  # in the file's key order: what `changed` hands to fromJSON

    def get(self, key: str) -> str:
        return self.values.get(key, "")

    @property
    def backend(self) -> str:
        return self.values["backend"]

    @property
    def tag_suffix(self) -> str:
        return self.values["tag-suffix"]

    @property
    def platform(self) -> str:
        return "darwin/arm64" if self.section == DARWIN else self.values["platforms"]

    @property
    def build_type(self) -> str:
        return self.get("build-type")

    @property
    def cuda_major(self) -> str:
        return self.get("cuda-major-version")

    @property
    def subject(self) -> str:
        return self.tag_suffix

    def describe(self) -> str:
        return f"{self.section}[{self.position}] ({self.tag_suffix}, {self.platform})"

    def images(self) -> tuple[str, ...]:
        """The images this row compiles in: its builder image, else its base image."""
        return tuple(v for v in (self.get("builder-base-image"), self.get("base-image")) if v)


@dataclass(frozen=True)
class Meta:
    """A meta backend: hardware capability -> concrete variant name."""

    name: str
    file: str
    line: int
    capabilities: dict[str, str]
    capability_lines: dict[str, int]
    alias: str = ""
    description: str = ""


@dataclass(frozen=True)
class Variant:
    """A concrete image of a backend: where to pull it from."""

    name: str
    file: str
    line: int
    uri: str
    mirrors: tuple[str, ...] = ()


@dataclass(frozen=True)
class CanaryToolchain:
    """A toolchain the canary compiles with: a shipped row's (its tag-suffix and image, MX401),
    or, without an image, the runner's own (its compilers, the build run on the runner)."""

    name: str
    file: str
    line: int
    tag_suffix: str  # empty: a runner toolchain, which stands for no row
    platform: str
    cuda_major: str
    image: str  # empty: the runner's own toolchain
    runs_on: str
    # The toolchain's own build (run in its image, the series applied, tree at /src); empty:
    # the series' `build:` steps. It is what bisect reruns incrementally in one tree.
    command: str = ""
    # A Dockerfile (relative to matrix.yaml) that adds what the build needs to `image`
    # (passed as build-arg BASE_IMAGE); the compile builds it as build_image. Empty: `image` itself.
    dockerfile: str = ""

    @property
    def on_runner(self) -> bool:
        return not self.image

    @property
    def build_image(self) -> str | None:
        """The image the build runs in; None: on the runner itself."""
        if self.on_runner:
            return None
        return f"patchctl-canary-{self.name.lower()}:local" if self.dockerfile else self.image


@dataclass(frozen=True)
class Canary:
    upstream: str
    schedule: str
    toolchains: tuple[CanaryToolchain, ...]  # empty: an apply-only canary


@dataclass(frozen=True)
class BackendPaths:
    """The files a backend is built from; `shared` are paths other backends depend on too."""

    name: str
    file: str
    line: int
    paths: tuple[str, ...]
    shared: tuple[str, ...] = ()

    def patterns(self) -> tuple[tuple[str, bool], ...]:
        return tuple((p, False) for p in self.paths) + tuple((p, True) for p in self.shared)


@dataclass(frozen=True)
class GithubApp:
    """The GitHub App whose installation token pin-sync pushes and opens its pull request with
    (a pull request opened with GITHUB_TOKEN runs no workflow): where the repository keeps it."""

    client_id_var: str  # the repository variable (vars.NAME) holding the App's client id
    private_key_secret: str  # the repository secret (secrets.NAME) holding its private key


@dataclass(frozen=True)
class WorkflowSettings:
    """matrix.yaml `workflows:`: what the rendered workflows call and authenticate with."""

    action: str | None = None  # the patchctl action's `uses:`; None: `./` in patchctl's own repository
    github_app: GithubApp | None = None  # `pin_sync: github_app:`
    # `pin_sync: automerge:` merge | squash | rebase: a green sync's pull request merges itself
    # (`gh pr merge --auto`) once the branch protection's required checks pass; None: off
    automerge: str | None = None
    # `extras:` patchctl's extras the workflows install; None: not set, derived from the gates
    # (extras.resolved_extras); the line of the key, for MX805
    extras: tuple[str, ...] | None = None
    extras_line: int = 0
    action_line: int = 0  # the line of `action:` in matrix.yaml (MX804); 0: not set there


@dataclass
class BuildMatrix:
    """Everything `matrix check`, `render` and `changed` work on, whichever format it came from."""

    matrix_file: str
    rows: list[Row] = field(default_factory=list)
    index_file: str | None = None  # None: no index to check against
    metas: list[Meta] = field(default_factory=list)
    variants: list[Variant] = field(default_factory=list)
    canary: Canary | None = None
    backends: dict[str, BackendPaths] | None = None  # None: the source declares no paths
    index_output: str = "backend/index.yaml"
    capabilities: tuple[str, ...] | None = None  # None: LocalAI's set (conventions.KNOWN_CAPABILITIES)
    actions: dict[str, ActionPin] = field(default_factory=lambda: dict(DEFAULT_ACTIONS))  # owner/repo -> pin
    workflows: WorkflowSettings = field(default_factory=WorkflowSettings)
    root: Path | None = None  # the repository the rows' dockerfile/context/Makefile paths are relative to
    # Lookup tables, built on first use (the matrix is not changed after loading).
    _variants_by_name: dict[str, Variant] | None = field(default=None, repr=False, compare=False)
    _rows_by_suffix: dict[str, list[Row]] | None = field(default=None, repr=False, compare=False)

    def linux_rows(self) -> list[Row]:
        return [r for r in self.rows if r.section == LINUX]

    def darwin_rows(self) -> list[Row]:
        return [r for r in self.rows if r.section == DARWIN]

    def variant(self, name: str) -> Variant | None:
        if self._variants_by_name is None:
            self._variants_by_name = {}
            for variant in self.variants:
                self._variants_by_name.setdefault(variant.name, variant)
        return self._variants_by_name.get(name)

    def rows_by_suffix(self) -> dict[str, list[Row]]:
        if self._rows_by_suffix is None:
            self._rows_by_suffix = {}
            for row in self.rows:
                self._rows_by_suffix.setdefault(row.tag_suffix, []).append(row)
        return self._rows_by_suffix
