"""A conda-forge recipe: `meta.yaml` (conda-build: a Jinja template, `{% set version = "1.2" %}`,
`{{ version }}`) or `recipe.yaml` (rattler-build, schema v1: `context: version: 1.2`,
`${{ version }}`).

Neither is re-dumped: meta.yaml is not even YAML until Jinja has run. The lines are read as
conda-forge writes them: the `{% set %}` lines or the `context:` block, the first entry of
`source:` (`url` + `sha256`, or `git_url`/`git_rev`, `git` + `tag`/`rev` in v1), and `number:` in
`build:`. A pin moves the version where it is written, resets the build number to 0 (as
conda-forge's autotick bot does), and the sha256 of a GitHub tarball is remade or left to
`curl -sL URL | openssl sha256` (conda-forge's example recipe's way).
"""

from __future__ import annotations

import re
from dataclasses import field

from ...records import dataclass
from .base import (
    Archive,
    Checksum,
    Literal,
    ManifestError,
    PinState,
    Source,
    github_archive_ref,
    github_prefix,
    github_repo,
    line_at,
    replace_literals,
)

_SET_RE = re.compile(r"""\{%-?\s*set\s+([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(?:"([^"\n]*)"|'([^'\n]*)'|(\d+))\s*-?%\}""")
_KEY_RE = re.compile(r"""^(?P<indent>[ ]*)(?P<dash>-[ ]+)?(?P<key>[A-Za-z_][A-Za-z0-9_]*):[ \t]*(?P<rest>.*)$""")
_VALUE_RE = re.compile(r"""^(?:"(?P<dq>[^"\n]*)"|'(?P<sq>[^'\n]*)'|(?P<plain>[^#\n]*?))\s*(?P<comment>#.*)?$""")
_EXPR_RE = re.compile(r"\$?\{\{\s*(.*?)\s*\}\}")
_SENTINEL = "\x00version\x00"


@dataclass
class Recipe:
    path: str
    text: str
    v1: bool  # recipe.yaml (rattler-build) rather than meta.yaml (conda-build)
    variables: dict[str, Literal] = field(default_factory=dict)  # {% set %} or context: entries
    source: dict[str, Literal] = field(default_factory=dict)  # url, sha256, git_url, git_rev, git, tag, rev
    build_number: Literal | None = None
    notes: list[str] = field(default_factory=list)

    def where(self, literal: Literal | None) -> str:
        return f"{self.path}:{literal.line if literal else 1}"

    def expand(self, text: str, **overrides: str) -> str:
        """TEXT with its Jinja expressions evaluated (`{{ version }}`, `${{ name|lower }}`,
        `{{ version.replace('.', '_') }}`); ManifestError for anything else."""
        values = {name: literal.value for name, literal in self.variables.items()} | overrides

        def evaluate(match: re.Match[str]) -> str:
            return _evaluate(match.group(1), values, self.path)

        return _EXPR_RE.sub(evaluate, text)

    @property
    def version(self) -> Literal | None:
        return self.variables.get("version")

    def url(self, **overrides: str) -> str:
        literal = self.source.get("url")
        return self.expand(literal.value, **overrides) if literal else ""


def read(path: str, text: str) -> Recipe:
    v1 = path.endswith("recipe.yaml") or bool(re.search(r"^context:\s*$", text, re.M))
    recipe = Recipe(path, text, v1)
    if v1:
        for key, literal in _block_values(text, "context"):
            recipe.variables[key] = literal
    for match in _SET_RE.finditer(text):
        group = 2 if match.group(2) is not None else 3 if match.group(3) is not None else 4
        recipe.variables[match.group(1)] = Literal(
            match.group(1), match.group(group), line_at(text, match.start()), match.start(group), match.end(group)
        )
    recipe.source = _first_source(recipe)
    number = next((literal for key, literal in _block_values(text, "build") if key == "number"), None)
    if number is not None:
        reference = _EXPR_RE.fullmatch(number.value)
        if reference is not None:
            number = recipe.variables.get(reference.group(1).strip())
        recipe.build_number = number if number is not None and number.value.isdigit() else None
    return recipe


def _first_source(recipe: Recipe) -> dict[str, Literal]:
    """The first entry of `source:` that names where the sources are (url or git)."""
    entries: list[dict[str, Literal]] = []
    for key, literal, starts_item in _block_entries(recipe.text, "source"):
        if starts_item or not entries:
            entries.append({})
        entries[-1].setdefault(key, literal)
    chosen = [e for e in entries if {"url", "git_url", "git"} & set(e)]
    if len(chosen) > 1:
        recipe.notes.append(f"{recipe.path}: source: {len(chosen)} entries: the first is the upstream's")
    return chosen[0] if chosen else {}


def _block_values(text: str, block: str) -> list[tuple[str, Literal]]:
    return [(key, literal) for key, literal, _ in _block_entries(text, block)]


def _block_entries(text: str, block: str) -> list[tuple[str, Literal, bool]]:
    """(key, value, starts a list item) for each `key: value` line directly inside the
    top-level BLOCK (one level of nesting, or one list of mappings)."""
    found: list[tuple[str, Literal, bool]] = []
    inside, offset, child_indent = False, 0, None
    for number, line in enumerate(text.splitlines(keepends=True), 1):
        start, offset = offset, offset + len(line)
        body = line.rstrip("\r\n")
        if not body.strip() or body.lstrip().startswith("#") or body.lstrip().startswith("{%"):
            continue
        if not body.startswith((" ", "\t")):
            inside = body.split("#", 1)[0].rstrip() == f"{block}:"
            child_indent = None
            continue
        if not inside:
            continue
        match = _KEY_RE.match(body)
        if match is None:
            continue
        indent = len(match.group("indent")) + (len(match.group("dash")) if match.group("dash") else 0)
        if child_indent is None:
            child_indent = indent
        if indent != child_indent:
            continue
        value = _VALUE_RE.match(match.group("rest"))
        if value is None:
            continue
        group = "dq" if value.group("dq") is not None else "sq" if value.group("sq") is not None else "plain"
        text_value = value.group(group) or ""
        if not text_value:
            continue
        value_start = start + match.start("rest") + value.start(group)
        literal = Literal(match.group("key"), text_value, number, value_start, value_start + len(text_value))
        found.append((match.group("key"), literal, bool(match.group("dash"))))
    return found


def _evaluate(expression: str, values: dict[str, str], path: str) -> str:
    match = re.fullmatch(
        r"(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?P<calls>(?:\.replace\(\s*(['\"])[^'\"]*\3\s*,\s*(['\"])[^'\"]*\4\s*\))*)"
        r"(?P<filters>(?:\s*\|\s*(?:lower|upper))*)",
        expression,
    )
    if match is None or match.group("name") not in values:
        raise ManifestError(f"{path}: cannot evaluate the Jinja expression {{{{ {expression} }}}}")
    value = values[match.group("name")]
    calls = re.findall(r"\.replace\(\s*['\"]([^'\"]*)['\"]\s*,\s*['\"]([^'\"]*)['\"]\s*\)", match.group("calls"))
    for old, new in calls:
        value = value.replace(old, new)
    for name in re.findall(r"lower|upper", match.group("filters")):
        value = value.lower() if name == "lower" else value.upper()
    return value


# ------------------------------------------------------------------ init


def source(recipe: Recipe) -> Source:
    version = recipe.version.value if recipe.version else ""
    git_url = recipe.source.get("git_url") or recipe.source.get("git")
    rev = recipe.source.get("git_rev") or recipe.source.get("tag") or recipe.source.get("rev")
    if git_url is not None:
        if rev is None:
            return Source("", "", None, version, recipe.where(git_url), "git", "a git source without a revision")
        pattern, where = _pattern(recipe, rev.value, version), recipe.where(rev)
        return Source(recipe.expand(git_url.value), recipe.expand(rev.value), pattern, version, where, "git")
    url = recipe.source.get("url")
    if url is None:
        return Source("", "", None, version, f"{recipe.path}:1", "unknown", "no source: url or git_url")
    expanded = recipe.expand(url.value)
    repo, ref = github_repo(expanded), github_archive_ref(expanded)
    if repo is None or ref is None:
        return Source(
            "", "", None, version, recipe.where(url), "unknown", f"source url {expanded} is not a GitHub tarball"
        )
    marked = recipe.expand(url.value, version=_SENTINEL)
    marked_ref = github_archive_ref(marked) or ""
    pattern = marked_ref.replace(_SENTINEL, "{version}") if marked_ref.count(_SENTINEL) == 1 else None
    return Source(f"https://github.com/{repo[0]}/{repo[1]}", ref, pattern, version, recipe.where(url), "github-archive")


def _pattern(recipe: Recipe, text: str, version: str) -> str | None:
    if not version:
        return None
    marked = recipe.expand(text, version=_SENTINEL)
    return marked.replace(_SENTINEL, "{version}") if marked.count(_SENTINEL) == 1 else None


# ------------------------------------------------------------------ lint and pin-sync


def disagreements(recipe: Recipe, state: PinState) -> list[tuple[int, str]]:
    found = []
    if state.version is not None and (recipe.version is None or recipe.version.value != state.version):
        stated = recipe.version.value if recipe.version else None
        found.append((recipe.version.line if recipe.version else 1, f"version is {stated!r}, not the pinned version"))
    rev = recipe.source.get("git_rev") or recipe.source.get("rev") or recipe.source.get("tag")
    if rev is not None:
        value = recipe.expand(rev.value)
        if value != state.commit and value != state.tag:
            found.append((rev.line, f"{rev.name} is {value!r}, neither the pin nor its tag"))
    return found


def moved(recipe: Recipe, old: PinState, new: PinState) -> str:
    edits: dict[Literal, str] = {}
    version_moves = new.version is not None and new.version != old.version
    if new.version is not None:
        if recipe.version is None:
            raise ManifestError(f"{recipe.path}:1: no `version` variable ({{% set version = ... %}} or context:)")
        if recipe.version.value != old.version:
            raise ManifestError(
                f"{recipe.where(recipe.version)}: version is {recipe.version.value!r}, not {old.version!r} as "
                "matrix.yaml pins it: make them agree before pin-sync moves them"
            )
        edits[recipe.version] = _as_written(recipe, recipe.version, new.version)
    rev = recipe.source.get("git_rev") or recipe.source.get("rev") or recipe.source.get("tag")
    if rev is not None and "{{" not in rev.value:
        if rev.value == old.commit:
            edits[rev] = new.commit
        elif old.tag is not None and rev.value == old.tag and new.tag is not None:
            edits[rev] = new.tag
        else:
            raise ManifestError(
                f"{recipe.where(rev)}: {rev.name} is {rev.value!r}, neither the pinned commit nor its tag"
            )
    elif rev is None and new.version is None:
        raise ManifestError(f"{recipe.path}:1: the recipe names no git revision and matrix.yaml no version")
    if recipe.build_number is not None and (version_moves or (rev is not None and rev in edits)):
        edits[recipe.build_number] = "0"
    return replace_literals(recipe.text, edits)


def _as_written(recipe: Recipe, literal: Literal, value: str) -> str:
    """VALUE for the place of LITERAL: a plain YAML scalar that YAML would read as a number
    (`1.10`, `2`) gets quotes, so that the version stays the string it is."""
    quoted = recipe.text[literal.start - 1 : literal.start] in ("'", '"')
    if recipe.v1 and not quoted and re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", value):
        return f'"{value}"'
    return value


def checksums(recipe: Recipe) -> list[Checksum]:
    sha = recipe.source.get("sha256")
    if sha is None:
        return []
    reference = _EXPR_RE.fullmatch(sha.value)
    if reference is not None:
        sha = recipe.variables.get(reference.group(1).strip())
    if sha is None or not re.fullmatch(r"[0-9a-fA-F]{64}", sha.value):
        return []
    try:
        url = recipe.url()
    except ManifestError as exc:
        return [Checksum(sha, None, "", str(exc))]
    refresh = f"curl -sL {url} | openssl sha256"
    repo, ref = github_repo(url), github_archive_ref(url)
    if repo is None or ref is None:
        return [Checksum(sha, None, refresh, f"{url} is not a GitHub tarball")]
    return [Checksum(sha, Archive("github", github_prefix(repo[1], ref), "gz", url), refresh)]


def patch_paths(recipe: Recipe) -> list[str]:
    """The patch files the recipe's `source: patches:` lists (relative to the recipe), in order."""
    inside, listing, paths = False, False, []
    for line in recipe.text.splitlines():
        if line and not line.startswith((" ", "\t", "#")):
            inside, listing = line.split("#", 1)[0].rstrip() == "source:", False
            continue
        if not inside:
            continue
        key = _KEY_RE.match(line)
        if key is not None:
            listing = key.group("key") == "patches" and not key.group("rest").strip()
            continue
        item = re.match(r"^\s*-\s+['\"]?([^'\"#\s]+\.(?:patch|diff))['\"]?\s*(?:#.*)?$", line)
        if listing and item is not None:
            paths.append(item.group(1))
    return paths


def package_name(recipe: Recipe) -> str:
    """The recipe's name: its `name` variable, or `package: name:` (`recipe: name:` in v1)."""
    if "name" in recipe.variables:
        return recipe.variables["name"].value
    for block in ("package", "recipe"):
        for key, literal in _block_values(recipe.text, block):
            if key == "name":
                try:
                    return recipe.expand(literal.value)
                except ManifestError:
                    return ""
    return ""
