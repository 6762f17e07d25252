"""The confined layer is the only way to the file system (issue 44, item 1): a scan of every
patchctl module's source, as test_layout reads its imports, for a raw file operation outside
`patchctl/confined/`.

A raw operation is: the builtin `open(`; `Path.read_text`/`read_bytes`/`write_text`/
`write_bytes`/`open` and the Path calls that create, rename, delete or list (`mkdir`, `touch`,
`unlink`, `rename`, `replace` with one argument, `rmdir`, `symlink_to`, `hardlink_to`,
`iterdir`, `glob`, `rglob`); the `os` calls that open, create, rename, delete or walk by path
(`os.open`, `os.rename`, `os.replace`, `os.remove`, `os.unlink`, `os.rmdir`, `os.mkdir`,
`os.makedirs`, `os.walk`, `os.scandir`, `os.listdir`, `os.symlink`, `os.link`, `os.mkfifo`,
`os.truncate`, `os.utime`); anything of `shutil` but `shutil.which`; `tempfile`'s files and
directories; `tarfile.open`. Each exception below is one (module, function, call) with its
reason; an exception that no longer matches anything fails too, so the list stays true.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from pathlib import Path

import patchctl

PACKAGE = Path(patchctl.__file__).parent
CONFINED = PACKAGE / "confined"

PATH_METHODS = {
    "read_text",
    "read_bytes",
    "write_text",
    "write_bytes",
    "open",
    "mkdir",
    "touch",
    "unlink",
    "rename",
    "rmdir",
    "symlink_to",
    "hardlink_to",
    "iterdir",
    "glob",
    "rglob",
}
OS_CALLS = {
    "open",
    "rename",
    "renames",
    "replace",
    "remove",
    "removedirs",
    "unlink",
    "rmdir",
    "mkdir",
    "makedirs",
    "walk",
    "fwalk",
    "scandir",
    "listdir",
    "symlink",
    "link",
    "mkfifo",
    "mknod",
    "truncate",
    "utime",
}
TEMPFILE_CALLS = {
    "mkdtemp",
    "mkstemp",
    "TemporaryDirectory",
    "NamedTemporaryFile",
    "TemporaryFile",
    "SpooledTemporaryFile",
}

# (module, function, call): why it may stay raw. The function is the innermost `def` holding
# the call ("<module>" at the top level); the call as `describe` names it.
EXCEPTIONS: dict[tuple[str, str, str], str] = {
    ("paths.py", "cache_dir", "Path.mkdir"): (
        "makes the cache directory itself ($PATCHCTL_CACHE or the user's cache directory, the user's choice); "
        "every file below it goes through confined.Root"
    ),
    ("git.py", "init_repo", "Path.mkdir"): (
        "the directory `git init` initializes: the cache's new mirror (made by Root.mkdirs first) and the tests' "
        "repositories; never a path in a repository patchctl reads"
    ),
    ("loop/canary.py", "canary", "Path.mkdir"): (
        "`canary --work-dir DIR`: a directory the user named, outside the repository (refused inside it), "
        "made with its parents as `mkdir -p` would"
    ),
    ("matrix/action_source.py", "pip_vcs_record", "Path.read_text"): (
        "importlib.metadata's Distribution.read_text: pip's record of how patchctl itself was installed, "
        "not a path of any repository"
    ),
    ("git.py", "_worktree_of_own_bare", "os.open"): (
        "the `.git` file of the directory git is about to run in, read to tell one of patchctl's own worktrees: "
        "read-only, O_NOFOLLOW|O_NONBLOCK, fstat-checked, 4 KiB (git.py stands below confined/ and cannot import it)"
    ),
    ("output/progress.py", "tail_lines", "os.open"): (
        "the live line's tail of a log that confined.Root.open_log just made: read-only, O_NOFOLLOW|O_NONBLOCK, "
        "fstat-checked to be a regular file, its last 4 KiB (output/ stands below confined/ and cannot import it)"
    ),
}


@dataclass(frozen=True)
class Found:
    module: str
    function: str
    call: str
    line: int

    def __str__(self) -> str:
        return f"patchctl/{self.module}:{self.line}: {self.call} in {self.function}"


def describe(call: ast.Call, roots: set[str], modules: set[str]) -> str | None:
    """What raw file operation CALL is ("open", "os.rename", "Path.read_text", ...), or None.
    ROOTS: the names that hold a `confined.Root` where CALL is (its methods share Path's names
    and are the confined way); MODULES: the names bound to modules (`report.write_text(...)` is
    a function of a module, not Path's)."""
    func = call.func
    if isinstance(func, ast.Name):
        return "open" if func.id == "open" else None
    if not isinstance(func, ast.Attribute):
        return None
    receiver = func.value
    owner = receiver.id if isinstance(receiver, ast.Name) else None
    name = func.attr
    if owner == "os":
        return f"os.{name}" if name in OS_CALLS else None
    if owner == "shutil":
        return None if name == "which" else f"shutil.{name}"
    if owner == "tempfile":
        return f"tempfile.{name}" if name in TEMPFILE_CALLS else None
    if owner == "tarfile":
        return "tarfile.open" if name == "open" and call.args else None  # open(fileobj=...) reads no path
    if owner in roots or owner in modules or owner in ("self", "cls") or _makes_root(receiver):
        return None
    if isinstance(receiver, ast.Attribute) and receiver.attr in roots:  # self.where = Root(...)
        return None
    if name == "replace":  # str.replace takes two arguments, Path.replace one
        return "Path.replace" if len(call.args) == 1 and not call.keywords else None
    if name in PATH_METHODS:
        return f"Path.{name}"
    return None


def _root_makers() -> set[str]:
    """`Root`, and every function of patchctl declared to return one (`statehome.state_root`, ...)."""
    names = {"Root"}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef) and node.returns is not None:
                if ast.unparse(node.returns).split("|")[0].strip() in ("Root", "confined.Root"):
                    names.add(node.name)
    return names


ROOT_MAKERS = _root_makers()


def _makes_root(node: ast.AST) -> bool:
    """Whether NODE is a call that gives a `Root`: `Root(...)`, `confined.Root(...)`,
    `statehome.state_root(...)`."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    return name in ROOT_MAKERS


def _gives_root(node: ast.AST) -> bool:
    """Whether NODE's value is a Root: a call that makes one, `a or Root(...)`, `Root(x) if c else Root(y)`."""
    if isinstance(node, ast.BoolOp):
        return any(_gives_root(v) for v in node.values)
    if isinstance(node, ast.IfExp):
        return _gives_root(node.body) and _gives_root(node.orelse)
    return _makes_root(node)


def _roots_in(function: ast.AST) -> set[str]:
    """The names FUNCTION (or a module) binds to a Root: assigned one, or annotated `Root`."""
    names = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Assign):
            pairs = [(t, node.value) for t in node.targets]
            for target, value in list(pairs):
                if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
                    pairs += list(zip(target.elts, value.elts))
            for target, value in pairs:
                if _gives_root(value) and isinstance(target, (ast.Name, ast.Attribute)):
                    names.add(target.id if isinstance(target, ast.Name) else target.attr)
        elif isinstance(node, ast.arg) and node.annotation is not None and "Root" in ast.unparse(node.annotation):
            names.add(node.arg)
        elif (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and "Root" in ast.unparse(node.annotation)
        ):
            names.add(node.target.id)
        elif (
            isinstance(node, ast.withitem)
            and _makes_root(node.context_expr)
            and isinstance(node.optional_vars, ast.Name)
        ):
            names.add(node.optional_vars.id)
    return names


def _module_names(tree: ast.Module, module: str) -> set[str]:
    """The names MODULE binds to modules of patchctl (`from ..output import report as report_mod`)."""
    package = ".".join(("patchctl", *module.split("/")[:-1]))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
            source = ".".join(x for x in (base, node.module or "") if x)
            for alias in node.names:
                path = PACKAGE.parent.joinpath(*f"{source}.{alias.name}".split("."))
                if path.with_suffix(".py").exists() or (path / "__init__.py").exists():
                    names.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names


def raw_calls(path: Path) -> list[Found]:
    """Every raw file operation in the module at PATH, with the function it is in."""
    module = path.relative_to(PACKAGE).as_posix()
    tree = ast.parse(path.read_text(), str(path))
    modules = _module_names(tree, module)
    found: list[Found] = []

    def visit(node: ast.AST, function: str, roots: set[str]) -> None:
        for child in ast.iter_child_nodes(node):
            inner, inner_roots = function, roots
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inner, inner_roots = child.name, roots | _roots_in(child)
            if isinstance(child, ast.Call) and (call := describe(child, roots, modules)) is not None:
                found.append(Found(module, function, call, child.lineno))
            if isinstance(child, ast.ImportFrom) and child.module in ("os", "shutil", "tempfile"):
                for alias in child.names:
                    if alias.name in OS_CALLS | TEMPFILE_CALLS or child.module == "shutil":
                        found.append(Found(module, function, f"from {child.module} import {alias.name}", child.lineno))
            visit(child, inner, inner_roots)

    top_roots = {
        t.id
        for node in tree.body
        if isinstance(node, ast.Assign) and _makes_root(node.value)
        for t in node.targets
        if isinstance(t, ast.Name)
    }
    # Attributes a class sets to a Root anywhere (`self.where = statehome.root_for(...)`).
    top_roots |= {
        t.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and _makes_root(node.value)
        for t in node.targets
        if isinstance(t, ast.Attribute)
    }
    visit(tree, "<module>", top_roots)
    return found


@functools.lru_cache(maxsize=1)
def scan(package: Path = PACKAGE) -> list[Found]:
    return [
        found for path in sorted(package.rglob("*.py")) if CONFINED not in path.parents for found in raw_calls(path)
    ]


def test_no_module_reaches_the_file_system_around_the_confined_layer() -> None:
    offenders = [str(f) for f in scan() if (f.module, f.function, f.call) not in EXCEPTIONS]
    assert offenders == [], "raw file operations outside patchctl/confined/:\n" + "\n".join(offenders)


def test_every_exception_is_still_used() -> None:
    used = {(f.module, f.function, f.call) for f in scan()}
    assert sorted(set(EXCEPTIONS) - used) == []


def test_the_scan_sees_each_kind_of_raw_call(tmp_path: Path) -> None:
    """The scan can fail: each raw form is found, and what only looks like one is not."""
    source = tmp_path / "mod.py"
    source.write_text(
        "import os, shutil, tempfile, tarfile\n"
        "from pathlib import Path\n"
        "def logs(path):\n"
        "    with open(path, 'wb') as log: pass\n"
        "    Path(path).read_text()\n"
        "    path.write_bytes(b'')\n"
        "    path.replace(other)\n"
        "    os.rename(a, b)\n"
        "    shutil.rmtree(path)\n"
        "    os.walk(path)\n"
        "    tempfile.mkdtemp()\n"
        "    tarfile.open(path)\n"
        "    'a'.replace('b', 'c')\n"
        "    shutil.which('git')\n"
        "    os.path.join(a, b)\n"
        "def confined(root):\n"
        "    tree = Root(root)\n"
        "    tree.read_bytes('x', 1)\n"
        "    Root(root).write_bytes('x', b'')\n"
    )
    found = [(f.function, f.call) for f in raw_calls_at(source)]
    assert found == [
        ("logs", "open"),
        ("logs", "Path.read_text"),
        ("logs", "Path.write_bytes"),
        ("logs", "Path.replace"),
        ("logs", "os.rename"),
        ("logs", "shutil.rmtree"),
        ("logs", "os.walk"),
        ("logs", "tempfile.mkdtemp"),
        ("logs", "tarfile.open"),
    ]


def raw_calls_at(path: Path) -> list[Found]:
    """`raw_calls` of a module outside the package (for the test that the scan can fail)."""
    global PACKAGE
    saved = PACKAGE
    PACKAGE = path.parent
    try:
        return raw_calls(path)
    finally:
        PACKAGE = saved
