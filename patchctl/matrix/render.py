"""Render the workflows and the backend index from matrix.yaml and templates/*.j2.

Templates use `{@ value @}` for values (GitHub's own `${{ }}` then needs no escaping) and
`{% %}` for logic. Every value goes through the `q` filter, which emits a double-quoted YAML
scalar with everything but printable ASCII escaped (nothing in it can break the
document) and refuses any value containing `${{`. Each output must parse as YAML before anything is written.

    templates/index.yaml.j2   -> index.output (default backend/index.yaml)
    templates/NAME.yml.j2     -> .github/workflows/NAME.yml

The templates are the project's `templates/` beside matrix.yaml when it has one, otherwise
patchctl's defaults (`patchctl.templates_dir()`: installed with the package).

A template that renders to nothing but whitespace produces no file.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Any, ClassVar

import jinja2
import yaml

from .. import templates_dir as default_templates_dir
from ..confined import Root, confined_path
from ..errors import ConfigError
from ..output.jsonout import json_field
from ..project.config import Config
from ..records import dataclass
from .action_source import patchctl_action
from .actions import UnpinnedAction, resolver
from .checks import toolchain_row
from .extras import resolved_extras
from .model import BuildMatrix

WORKFLOWS_DIR = Path(".github/workflows")
INDEX_TEMPLATE = "index.yaml.j2"
WORKFLOW_SUFFIX = ".yml.j2"
DEFAULT_RUNNER = "ubuntu-latest"
# A repository's own CI script: ci.yml gets a test job that runs it when the repository has one.
CI_SCRIPT = ".ci/run"
_VALIDATING_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def header(template: str) -> str:
    return (
        f"# Generated from matrix.yaml by `patchctl matrix render` (template templates/{template}).\n"
        "# Do not edit by hand: edit matrix.yaml or the template, then run `patchctl matrix render`.\n"
    )


class UnsafeValue(ConfigError):
    pass


def quote(value: Any) -> str:
    """A value as a double-quoted YAML scalar that cannot open a GitHub expression.

    Everything outside printable ASCII is escaped (`\\xNN`, `\\uNNNN`, `\\UNNNNNNNN`), so
    no character can end the scalar, start a new line or be rejected by a YAML reader.
    """
    text = value if isinstance(value, str) else str(value)
    if "${{" in text:
        raise UnsafeValue(f"refusing to render {text!r}: it would open a GitHub expression ('${{{{')")
    out = ['"']
    for char in text:
        code = ord(char)
        if char in '"\\':
            out.append("\\" + char)
        elif 0x20 <= code < 0x7F:
            out.append(char)
        elif code <= 0xFF:
            out.append(f"\\x{code:02x}")
        elif code <= 0xFFFF:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def compact_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


@dataclass(frozen=True)
class RenderedFile:
    JSON_PROPERTIES: ClassVar[dict[str, str]] = {"stale": "stale"}

    path: Path = json_field(omit=True)
    display: str = json_field(name="path")
    text: str = json_field(omit=True)
    current: str | None = json_field(omit=True)  # what is on disk now; None when the file does not exist

    @property
    def stale(self) -> bool:
        return self.text != self.current

    def diff(self) -> str:
        old = [] if self.current is None else self.current.splitlines(keepends=True)
        return "".join(
            difflib.unified_diff(old, self.text.splitlines(keepends=True), f"a/{self.display}", f"b/{self.display}")
        )


@dataclass(frozen=True)
class RenderResult:
    JSON_PROPERTIES: ClassVar[dict[str, str]] = {"ok": "ok"}

    files: list[RenderedFile]

    @property
    def ok(self) -> bool:
        return not self.stale

    @property
    def stale(self) -> list[RenderedFile]:
        return [f for f in self.files if f.stale]

    def diff(self) -> str:
        return "".join(f.diff() for f in self.stale)

    def drift_message(self) -> str:
        names = ", ".join(f.display for f in self.stale)
        return f"{len(self.stale)} rendered file(s) out of date: {names} (run `patchctl matrix render`)"

    def lines(self, *, check: bool) -> list[str]:
        """What `matrix render` prints: one line per file, or with CHECK (and no drift) a summary."""
        if check:
            return [f"matrix render: {len(self.files)} file(s) up to date"]
        return [f"{'wrote    ' if f.stale else 'unchanged'} {f.display}" for f in self.files]


def environment(sources: dict[str, str]) -> jinja2.Environment:
    """The Jinja environment of SOURCES (template name -> text, read by `read_templates`): it reads
    no file itself, so an include follows no link either."""
    env = jinja2.Environment(
        loader=jinja2.DictLoader(sources),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        variable_start_string="{@",
        variable_end_string="@}",
        comment_start_string="{##",
        comment_end_string="##}",
    )
    env.filters["q"] = quote
    env.filters["compact_json"] = compact_json
    return env


def context(config: Config, matrix: BuildMatrix) -> dict[str, Any]:
    registries = sorted(
        {v.uri.rsplit(":", 1)[0] for v in matrix.variants}
        | {m.rsplit(":", 1)[0] for v in matrix.variants for m in v.mirrors}
    )
    toolchains = []
    if matrix.canary is not None:
        for toolchain in matrix.canary.toolchains:
            row = toolchain_row(matrix, toolchain)
            toolchains.append(
                {
                    "name": toolchain.name,
                    "tag-suffix": toolchain.tag_suffix,
                    "platform": toolchain.platform or (row.platform if row else ""),
                    "cuda-major-version": toolchain.cuda_major,
                    "image": toolchain.image,
                    "runs-on": toolchain.runs_on or (row.get("runs-on") if row else "") or DEFAULT_RUNNER,
                }
            )
    paths = sorted({p for b in (matrix.backends or {}).values() for p in (*b.paths, *b.shared)})
    return {
        "config_file": config.path.name,
        "matrix": matrix,
        "metas": matrix.metas,
        "variants": matrix.variants,
        "canary": matrix.canary,
        "canary_matrix": {"include": toolchains},
        "registries": registries,
        "backend_paths": paths,
        "sync_upstreams": sorted(name for name, up in config.upstreams.items() if up.tracks is None),
        "upstreams": config.upstreams,
        "series": config.series,
        "action": resolver(matrix.actions),
        # What the workflows may reference in this repository, and nothing else.
        # a function: only a template that calls the action needs it set (an error otherwise)
        "patchctl_action": lambda: patchctl_action(config.root, matrix.workflows.action),
        "ci_script": CI_SCRIPT if (config.root / CI_SCRIPT).is_file() else None,
        # patchctl's extras the workflows install (`workflows: extras:`, else engine where a gate runs it)
        "extras": list(resolved_extras(config, matrix)),
        "backend_workflow": bool(matrix.rows),
        "github_app": matrix.workflows.github_app,
        "automerge": matrix.workflows.automerge,
    }


def project_templates(config: Config) -> Path:
    """The project's `templates/` beside matrix.yaml if it exists, else patchctl's installed defaults."""
    own = config.root / "templates"
    return own if own.exists() or own.is_symlink() else default_templates_dir()


MAX_TEMPLATE_BYTES = 1024 * 1024
MAX_RENDERED_BYTES = 16 * 1024 * 1024


def read_templates(config: Config, templates_dir: Path) -> dict[str, str]:
    """Name -> text of every `*.j2` in TEMPLATES_DIR, read through `confined.Root`: from the
    repository when the directory is in it (a link on the way, or as a template, is refused in
    one line and never read), else from the directory's parent (patchctl's installed defaults)."""
    inside = templates_dir.resolve().is_relative_to(config.root.resolve())
    where = Root(config.root) if inside else Root(templates_dir.parent, "the templates' directory")
    names = where.listdir(templates_dir)  # a link (or a file) there: Refused, one line
    if names is None:
        raise ConfigError(f"{templates_dir}: no templates directory (the workflows are rendered from templates/*.j2)")
    sources = {}
    for name in names:
        if name.endswith(".j2"):
            data = where.read_bytes(templates_dir / name, MAX_TEMPLATE_BYTES) or b""
            try:
                sources[name] = data.decode("utf-8")
            except UnicodeDecodeError:
                raise ConfigError(f"{templates_dir / name}: not UTF-8 text") from None
    return sources


def targets(templates_dir: Path, matrix: BuildMatrix, names: list[str]) -> list[tuple[str, Path]]:
    found = []
    for template in sorted(names):
        if template == INDEX_TEMPLATE:
            if matrix.index_file is not None:
                found.append((template, Path(matrix.index_output)))
        elif template.endswith(WORKFLOW_SUFFIX):
            found.append((template, WORKFLOWS_DIR / template.removesuffix(".j2")))
        else:
            raise ConfigError(
                f"{templates_dir / template}: templates are named NAME.yml.j2 (a workflow) or {INDEX_TEMPLATE}"
            )
    return found


def render(config: Config, matrix: BuildMatrix, templates_dir: Path | None = None) -> RenderResult:
    """Render every template in memory; nothing is written here."""
    templates_dir = Path(templates_dir) if templates_dir is not None else project_templates(config)
    sources = read_templates(config, templates_dir)
    env = environment(sources)
    values = context(config, matrix)
    files = []
    for template, relative in targets(templates_dir, matrix, list(sources)):
        try:
            body = env.get_template(template).render(values)
        except (UnsafeValue, UnpinnedAction) as exc:
            raise ConfigError(f"templates/{template}: {exc}") from None
        except jinja2.TemplateSyntaxError as exc:
            raise ConfigError(f"{exc.filename or template}:{exc.lineno}: template error: {exc.message}") from None
        except jinja2.UndefinedError as exc:
            raise ConfigError(f"templates/{template}: template error: {exc.message}") from None
        if not body.strip():
            continue  # the template opted out (e.g. no canary section): no such output
        text = header(template) + body
        try:
            yaml.load(text, Loader=_VALIDATING_LOADER)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            raise ConfigError(
                f"templates/{template}: rendered output is not valid YAML (line {mark.line + 1 if mark else '?'}): "
                f"{getattr(exc, 'problem', exc)}"
            ) from None
        path = confined_path(config.root, config.root / relative)
        old = Root(config.root).read_bytes(path, MAX_RENDERED_BYTES)
        current = old.decode("utf-8", errors="replace") if old is not None else None
        files.append(RenderedFile(path, relative.as_posix(), text, current))
    return RenderResult(files)
