"""The layout rules of patchctl/: commands are thin and independent of each other, and the
engine never depends on patchctl."""

from __future__ import annotations

import ast
from pathlib import Path

import patchctl

PACKAGE = Path(patchctl.__file__).parent
COMMANDS = PACKAGE / "commands"


def imported_modules(path: Path, package: str) -> set[str]:
    """The absolute names of the modules PATH imports (relative imports resolved in PACKAGE)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            parts = package.split(".")
            base = ".".join(parts[: len(parts) - node.level + 1]) if node.level else ""
            module = ".".join(x for x in (base, node.module or "") if x)
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
