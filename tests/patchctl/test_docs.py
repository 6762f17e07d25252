"""The manual builds with `mkdocs build --strict` (every link and anchor checked), and its command
reference is generated from the Click definitions: one page per command, with every option."""

from __future__ import annotations

import html
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest
import yaml

from patchctl.cli import cli
from patchctl.errors import ConfigError
from patchctl.matrix.sources import load_project

ROOT = Path(__file__).resolve().parents[2]
# What the issue asks a reference page for, at the least; every registered command gets one.
REQUIRED_PAGES = ("apply", "export", "lint", "gate", "pin-sync", "canary", "vendor", "init")
PINNED_USES = re.compile(r"^\s*-?\s*uses: ([A-Za-z0-9-]+/[A-Za-z0-9._/-]+)@([0-9a-f]{40}) # (v[0-9.]+)$")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=300,
    )
    assert build.returncode == 0, build.stdout + build.stderr
    return out


def page_text(site: Path, page: str) -> str:
    """The page's article as a reader sees it (no navigation, no table of contents): tags dropped,
    entities decoded."""
    path = site / page / "index.html"
    assert path.is_file(), f"no page {page}/ in the built site"
    article = re.search(r"<article\b.*?</article>", path.read_text(), flags=re.S)
    assert article, f"{page}: no article"
    return html.unescape(re.sub(r"<[^>]+>", "", article.group(0)))


def command_names() -> list[str]:
    return cli.list_commands(click.Context(cli))


def option_names(command: click.Command, ctx: click.Context) -> list[str]:
    names = []
    for param in command.get_params(ctx):
        if isinstance(param, click.Option) and not param.hidden:
            names += [*param.opts, *param.secondary_opts]
    return names


def commands_under(name: str) -> list[tuple[str, click.Command, click.Context]]:
    """`patchctl NAME` and, for a group, each of its subcommands, with the context `--help` has."""
    root = click.Context(cli, info_name="patchctl", **cli.context_settings)
    command = cli.get_command(root, name)
    assert command is not None, name
    ctx = click.Context(command, info_name=name, parent=root)
    found = [(f"patchctl {name}", command, ctx)]
    if isinstance(command, click.Group):
        for sub in command.list_commands(ctx):
            subcommand = command.get_command(ctx, sub)
            assert subcommand is not None, sub
            found.append((f"patchctl {name} {sub}", subcommand, click.Context(subcommand, info_name=sub, parent=ctx)))
    return found


def test_every_command_has_a_reference_page_generated_with_all_its_options(site: Path) -> None:
    names = command_names()
    assert set(REQUIRED_PAGES) <= set(names)
    for name in names:
        text = page_text(site, f"reference/{name}")
        generated = text.split(f"Generated from patchctl {name} --help", 1)
        assert len(generated) == 2, f"reference/{name}: no generated section"
        for path, command, ctx in commands_under(name):
            section = generated[1].split(path, 1)
            assert len(section) == 2, f"reference/{name}: no heading for {path}"
            assert f"{path} [OPTIONS]" in section[1], f"reference/{name}: no usage line for {path}"
            for option in option_names(command, ctx):
                assert re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", section[1]), (
                    f"reference/{name}: {path} does not list {option}"
                )
            summary = (command.help or "").replace("`", "").split("\n\n", 1)[0].split()
            assert " ".join(summary) in " ".join(section[1].split()), f"reference/{name}: {path}'s help is missing"
    pin_sync = page_text(site, "reference/pin-sync")
    assert re.search(r"--continue\s+Resume a stopped sync", pin_sync)
    assert "-h, --help" in pin_sync, "commands are documented inside the patchctl group, as --help shows them"


def test_the_help_keeps_clicks_verbatim_blocks_and_literal_characters(site: Path) -> None:
    page = (site / "reference/pin-sync/index.html").read_text()
    # The examples are one preformatted block, line by line, as `patchctl pin-sync --help` prints them.
    blocks = [html.unescape(re.sub(r"<[^>]+>", "", b)) for b in re.findall(r"<pre.*?</pre>", page, flags=re.S)]
    examples = next(b for b in blocks if b.lstrip().startswith("Examples:"))
    assert "\n  patchctl pin-sync --continue          # after resolving" in examples
    assert "\n  patchctl pin-sync --abort" in examples
    # A glob in prose stays a glob: no emphasis made of its stars.
    render = page_text(site, "reference/matrix")
    assert "Render .github/workflows/*.yml and the backend index from matrix.yaml." in render


def test_global_options_are_documented(site: Path) -> None:
    text = page_text(site, "reference")
    for option in option_names(cli, click.Context(cli, **cli.context_settings)):
        assert re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text), f"reference/: no {option}"


def test_reference_pages_point_at_the_registered_command_objects() -> None:
    """The `::: mkdocs-click` block of each page renders the object `patchctl NAME` runs."""
    for name, lazy in cli.lazy_commands.items():
        module, _, attribute = lazy.target.partition(":")
        source = (ROOT / "docs/reference" / f"{name}.md").read_text()
        block = re.search(r"^::: mkdocs-click\n((?:    :.*\n?)+)", source, flags=re.M)
        assert block, f"docs/reference/{name}.md has no mkdocs-click block"
        options = dict(re.findall(r"^    :(\w+): (.+)$", block.group(1), flags=re.M))
        assert (options["module"], options["command"], options["prog_name"]) == (module, attribute, name)


def test_every_page_is_in_the_navigation() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())

    def pages(items: list) -> list[str]:
        found = []
        for item in items:
            for value in item.values():
                found += pages(value) if isinstance(value, list) else [value]
        return found

    listed = pages(config["nav"])
    docs = ROOT / "docs"
    written = sorted(p.relative_to(docs).as_posix() for p in docs.rglob("*.md"))
    assert sorted(listed) == written


def allowed_keys(directory: Path, document: dict, keypath: tuple) -> list[str]:
    """The keys matrix.yaml's validator allows at KEYPATH, read from the error an unknown key gets."""
    target = document
    for part in keypath:
        target = target[part]
    target["zz-unknown"] = 1
    directory.mkdir()
    path = directory / "matrix.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    with pytest.raises(ConfigError) as caught:
        load_project(path)
    found = re.search(r"unknown (?:top-level )?key \(allowed: ([^)]*)\)", str(caught.value))
    assert found, f"{keypath}: {caught.value}"
    return found.group(1).split(", ")


def test_the_configuration_page_names_every_key_the_validator_allows(tmp_path: Path) -> None:
    page = (ROOT / "docs/reference/configuration.md").read_text()
    base = yaml.safe_load((ROOT / "matrix.yaml").read_text())
    extra = {
        ("upstreams", "llama.cpp", "pin_files", 0): {"path": "Makefile", "pattern": "(?P<pin>x)"},
        ("series", "llama.cpp", "vendor", 0): {
            "from": "",
            "to": "third_party/x",
            "files": [{"from": "LICENSE", "to": "third_party/x/LICENSE"}],
        },
        ("includeDarwin", 0): {"backend": "llama-cpp", "tag-suffix": "-metal-darwin-arm64-llama-cpp"},
    }
    keypaths = [
        (),
        ("upstreams", "llama.cpp"),
        ("upstreams", "llama.cpp", "ci"),
        ("series", "llama.cpp"),
        ("series", "llama.cpp", "build", 0),
        ("series", "llama.cpp", "gates", 0),
        ("include", 0),
        ("index",),
        ("index", "metas", 0),
        ("index", "variants", 0),
        ("canary",),
        ("canary", "toolchains", 0),
        ("backends", "llama-cpp"),
        ("actions", "actions/checkout"),
        *extra,
        ("series", "llama.cpp", "vendor", 0, "files", 0),
    ]
    seen = set()
    for index, keypath in enumerate(keypaths):
        document = yaml.safe_load(yaml.safe_dump(base))
        for where, entry in extra.items():
            if keypath[: len(where)] == where:  # the entry, or a key inside it
                parent = document
                for part in where[:-2]:
                    parent = parent[part]
                parent[where[-2]] = [dict(entry)]
        for key in allowed_keys(tmp_path / str(index), document, keypath):
            assert f"`{key}`" in page, f"docs/reference/configuration.md does not name {key} (at {keypath})"
            seen.add(key)
    assert {"pass_env", "allow_undescribed", "protect", "filter", "files", "tag-suffix", "sha"} <= seen


def load_hook():
    spec = importlib.util.spec_from_file_location("click_help", ROOT / "docs/hooks/click_help.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_hook_turns_click_help_into_markdown() -> None:
    hook = load_hook()
    help_text = """Summary with `code_span*` and templates/*.j2, <sha> and [x].

    \b
    Examples:
      patchctl x --flag     # a comment
      patchctl y

    - not a list, once joined
    \f
    Internal notes Click never prints."""
    lines = list(hook.help_markdown(help_text))
    assert lines == [
        r"Summary with `code_span*` and templates/\*.j2, &lt;sha> and \[x\].",
        "",
        "```text",
        "Examples:",
        "  patchctl x --flag     # a comment",
        "  patchctl y",
        "```",
        "",
        r"\- not a list, once joined",
        "",
    ]


def test_the_pages_workflow_is_pinned_least_privileged_and_builds_strictly() -> None:
    path = ROOT / ".github/workflows/docs.yml"
    text = path.read_text()
    table = yaml.safe_load((ROOT / "matrix.yaml").read_text())["actions"]
    uses = [line for line in text.splitlines() if re.match(r"^\s*-?\s*uses:", line)]
    assert {PINNED_USES.match(line).group(1) for line in uses if PINNED_USES.match(line)} == {
        "actions/checkout",
        "actions/setup-python",
        "actions/upload-pages-artifact",
        "actions/deploy-pages",
    }
    for line in uses:
        match = PINNED_USES.match(line)
        assert match, f"not pinned to a commit: {line.strip()}"
        name, sha, version = match.groups()
        if name in table:  # the same pins as the rendered workflows
            assert table[name] == {"sha": sha, "version": version}, line
    workflow = yaml.safe_load(text)
    assert workflow["permissions"] == {}
    assert set(workflow[True]) == {"push", "pull_request", "workflow_dispatch"}  # PyYAML reads `on` as True
    assert workflow[True]["push"] == {"branches": ["main"]}
    build, deploy = workflow["jobs"]["build"], workflow["jobs"]["deploy"]
    assert build["permissions"] == {"contents": "read"}
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}
    # Only main publishes; a pull request (a fork's too) builds with a read-only token.
    main_only = "github.event_name != 'pull_request' && github.ref == 'refs/heads/main'"
    assert deploy["if"] == main_only and deploy["needs"] == "build"
    assert "secrets." not in text
    steps = build["steps"]
    assert steps[0]["with"]["persist-credentials"] is False
    assert "mkdocs build --strict" in next(s["run"] for s in steps if "run" in s)
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-pages-artifact@"))
    assert upload["if"] == main_only
