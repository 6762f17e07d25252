"""The layout rules of patchctl/: commands are thin and independent of each other, and the
engine never depends on patchctl."""

from __future__ import annotations

import ast
import importlib
import re
from dataclasses import dataclass
from pathlib import Path

import patchctl

PACKAGE = Path(patchctl.__file__).parent
COMMANDS = PACKAGE / "commands"


def import_source(node: ast.ImportFrom, package: str) -> str:
    """The absolute name of the module a `from ... import` reads, relative imports resolved in PACKAGE."""
    parts = package.split(".")
    base = ".".join(parts[: len(parts) - node.level + 1]) if node.level else ""
    return ".".join(x for x in (base, node.module or "") if x)


def imported_modules(path: Path, package: str) -> set[str]:
    """The absolute names of the modules PATH imports (relative imports resolved in PACKAGE)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = import_source(node, package)
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def test_imported_modules_resolves_relative_imports(tmp_path: Path) -> None:
    source = tmp_path / "mod.py"
    source.write_text("from . import export\nfrom ..app import AppContext\nimport patchctl.commands.gate\n")
    names = imported_modules(source, "patchctl.commands")
    assert {"patchctl.commands.export", "patchctl.app", "patchctl.commands.gate"} <= names


def test_no_command_module_imports_another() -> None:
    commands = {p.stem for p in COMMANDS.glob("*.py") if p.stem != "__init__"}
    assert {"apply", "export", "lint", "gate", "matrix", "pin_sync", "canary"} <= commands
    offenders = []
    for path in sorted(COMMANDS.glob("*.py")):
        for name in sorted(imported_modules(path, "patchctl.commands")):
            if name == "patchctl.commands" or name.startswith("patchctl.commands."):
                offenders.append(f"{path.name} imports {name}")
    assert offenders == []


def test_no_domain_module_imports_a_command_module() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.parent == COMMANDS or path.name == "cli.py":
            continue
        package = ".".join(("patchctl", *path.parent.relative_to(PACKAGE).parts))
        for name in sorted(imported_modules(path, package)):
            if name.startswith("patchctl.commands"):
                offenders.append(f"{path.relative_to(PACKAGE)} imports {name}")
    assert offenders == []


# ---------------------------------------------------------------- floors (docs/layout.md)

LAYOUT_DOC = PACKAGE.parent / "docs" / "layout.md"
MAX_FLAT_MODULES = 20


@dataclass(frozen=True)
class Floor:
    name: str
    holds: tuple[str, ...]  # flat module names, or "package/"
    may_import: tuple[str, ...]


def read_floors(text: str) -> list[Floor]:
    """The table under "## Floors" in docs/layout.md, in its order (lowest first)."""
    section = text.split("## Floors", 1)[1]
    block = section.split("```text\n", 1)[1].split("```", 1)[0]
    floors = []
    for line in block.splitlines()[1:]:  # the first line is the header
        name, holds, may = re.split(r"\s{2,}", line.strip(), maxsplit=2)
        floors.append(Floor(name, tuple(holds.split()), () if may == "-" else tuple(may.split())))
    return floors


def module_names() -> dict[str, Path]:
    names = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        names[".".join(("patchctl", *parts))] = path
    return names


def floor_of(module: str, floors: list[Floor]) -> str | None:
    """The floor MODULE stands on: its package's, or its own name's when it is flat."""
    parts = module.split(".")[1:]
    if not parts:
        return "package"  # patchctl/__init__.py: the version, importable from anywhere
    is_package = (PACKAGE / parts[0]).is_dir()
    key = f"{parts[0]}/" if is_package else parts[0]
    return next((floor.name for floor in floors if key in floor.holds), None)


def import_edges() -> dict[str, set[str]]:
    """Each patchctl module and the patchctl modules it imports: `from X import a` imports X.a
    when that is a module, else X (imports inside functions count too)."""
    names = module_names()
    edges: dict[str, set[str]] = {}
    for module, path in names.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                source = import_source(node, package)
                for alias in node.names:
                    found.add(f"{source}.{alias.name}" if f"{source}.{alias.name}" in names else source)
        edges[module] = {name for name in found if name in names and name != module}
    return edges


def test_the_floors_table_is_read_and_orders_its_floors() -> None:
    floors = read_floors(LAYOUT_DOC.read_text())
    assert [f.name for f in floors][:3] == ["base", "output", "confined"] and floors[-1].name == "commands"
    seen: set[str] = set()
    for floor in floors:
        assert set(floor.may_import) <= seen, f"{floor.name} may import a floor above it: {floor.may_import}"
        seen.add(floor.name)


def test_every_module_stands_on_a_floor_and_few_stand_flat() -> None:
    floors = read_floors(LAYOUT_DOC.read_text())
    names = module_names()
    homeless = sorted(m for m in names if floor_of(m, floors) is None)
    assert homeless == [], f"modules on no floor of docs/layout.md: {homeless}"
    flat = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(flat) <= MAX_FLAT_MODULES, flat
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    held = {h.rstrip("/") for f in floors for h in f.holds if h.endswith("/")}
    assert packages == held, f"packages on no floor, or floors naming no package: {packages ^ held}"


def test_every_import_goes_down_or_along_a_floor() -> None:
    floors = read_floors(LAYOUT_DOC.read_text())
    allowed = {f.name: {f.name, "package", *f.may_import} for f in floors}
    offenders = []
    for module, targets in sorted(import_edges().items()):
        mine = floor_of(module, floors)
        for target in sorted(targets):
            theirs = floor_of(target, floors)
            if mine != "package" and theirs not in allowed[mine]:
                offenders.append(f"{module} ({mine}) imports {target} ({theirs})")
    assert offenders == []


def test_no_import_circles_between_modules() -> None:
    edges = import_edges()
    circles = []
    state: dict[str, int] = {}  # 1 on the current path, 2 done

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(edges[module]):
            if state.get(target) == 1:
                circles.append(" -> ".join([*path[path.index(target) :], target]))
            elif target not in state:
                visit(target, [*path, target])
        state[module] = 2

    for module in sorted(edges):
        if module not in state:
            visit(module, [module])
    assert circles == []


def test_the_floor_check_catches_an_import_that_goes_up(tmp_path: Path) -> None:
    """The check can fail: a state module that imports the loop is named."""
    floors = read_floors(LAYOUT_DOC.read_text())
    allowed = {f.name: {f.name, "package", *f.may_import} for f in floors}
    source = tmp_path / "journal.py"
    source.write_text("from ..loop import sync\n")
    assert "patchctl.loop.sync" in imported_modules(source, "patchctl.state")
    assert floor_of("patchctl.loop.sync", floors) not in allowed[floor_of("patchctl.state.journal", floors)]
    assert floor_of("patchctl.cli", floors) == "top" and floor_of("patchctl.loop", floors) == "loop"


def test_every_import_of_patchctl_names_a_module_or_name_that_exists() -> None:
    """An import inside a function runs only when its branch does: one left pointing at a module's
    old place (after a move) is found here, not by a user."""
    names = module_names()
    missing = []
    for module, path in names.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("patchctl")):
                source = import_source(node, package)
                if source not in names:
                    missing.append(f"{module}:{node.lineno}: {source}")
                    continue
                defined = set(dir(importlib.import_module(source)))
                for alias in node.names:
                    if f"{source}.{alias.name}" not in names and alias.name not in defined:
                        missing.append(f"{module}:{node.lineno}: {source}.{alias.name}")
    assert missing == []
