"""The downstream's own patch list, read and edited in place: one source of truth for a
series' order, never a second list beside it.

A series' `list:` (`patchctl.project.series_keys`) names the file and its kind:

* `quilt`: a quilt `series` file: one patch a line (its options after it), `#` comments;
* `electron`: Electron's `.patches`: one file name a line, nothing else;
* `conda-forge`: the `patches:` list of a conda-forge recipe (`meta.yaml`, a YAML list inside
  a Jinja template, or rattler-build's `recipe.yaml`): its lines are read and edited as lines
  (the file is never re-dumped), so `# [win]` selectors, `{% if %}` guards, comments and every
  other line stay as they are;
* `none`: no file: the order is the file names' (OpenWrt's quilt.mk, a directory of
  format-patch files); nothing is ever written.

Entries name files relative to the list file's directory (quilt's patches directory, the
recipe's directory). An entry that names a file directly in the series' directory is one of
its patches; any other entry (a patch of another directory, Debian's quilt patches beside a
subdirectory of git ones) belongs to someone else and is kept as it is. Writing keeps every
line that is not one of the series' entries; a renamed patch keeps its line (options,
selector and comment included), a dropped one loses its line (and a `{% if %}` guard it
leaves empty), a new one is put right after the patch before it (after the guard that patch
stands in, so that it is not made conditional) in the style of its neighbours.

The list file is untrusted input, read like a patch (`patchctl.confined.Root`: no link, no
FIFO, bounded); what cannot be read as a plain list (an entry that is a Jinja expression, a
flow-style or scalar `patches:`) is one line naming the file and the line, never a guess.
"""

from __future__ import annotations

import posixpath
from dataclasses import field
from pathlib import Path

from ..confined import Refused, Root, TooLarge
from ..errors import ConfigError, UsageError
from ..patterns import lazy
from ..project.config import Series
from ..records import dataclass

MAX_LIST_BYTES = 4 * 1024 * 1024
# A line that opens or closes a Jinja block: `{% if win %}`, `{%- endif -%}`, `{% else %}`.
_JINJA_BLOCK_RE = lazy(r"^\s*\{%-?\s*(?P<word>if|elif|else|endif|for|endfor)\b")
_PATCHES_KEY_RE = lazy(r"^(?P<indent>\s*)(?P<dash>-\s+)?patches:\s*(?P<rest>.*?)\s*$")
_YAML_ITEM_RE = lazy(r"^(?P<indent>\s*)-\s+(?P<quote>['\"]?)(?P<name>[^'\"#\s]+)(?P=quote)(?P<tail>\s*(?:#.*)?)$")


class ListUnreadable(ConfigError):
    """A list patchctl cannot read as a plain list: the file and line, and why."""


@dataclass(frozen=True)
class Entry:
    line: int  # 0-based index into ListFile.lines
    text: str  # the entry as written, relative to the list file's directory
    name: str | None  # the patch's file name when it lies directly in the series directory; None: not ours
    depth: int = 0  # how many Jinja blocks (`{% if %}`) it stands in (conda-forge)


@dataclass
class ListFile:
    """A list file's lines (each with its line ending) and its entries in order."""

    path: Path
    kind: str
    lines: list[str] = field(default_factory=list)
    entries: list[Entry] = field(default_factory=list)
    exists: bool = True
    # conda-forge: the `patches:` keys (line index, indentation of their items) found
    blocks: list[tuple[int, str]] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        return [e.name for e in self.entries if e.name is not None]

    def shown(self, root: Path | None) -> str:
        return shown(root, self.path)


def read(series: Series, data: bytes | None = None) -> ListFile | None:
    """SERIES' list file (DATA: its bytes when already known), or None when the series keeps
    no list (`list: none`). A missing file reads as an empty list (a quilt series before its
    first patch); a conda-forge recipe must exist."""
    spec = series.patch_list
    if spec.path is None:
        return None
    if data is None:
        data = _read_bytes(series, spec.path)
    if data is None:
        if spec.kind == "conda-forge":
            raise ConfigError(f"{spec.where}: {shown(series.root, spec.path)}: no such file")
        return ListFile(spec.path, spec.kind, exists=False)
    text = data.decode("utf-8", errors="surrogateescape")
    listed = ListFile(spec.path, spec.kind, text.splitlines(keepends=True))
    if spec.kind == "conda-forge":
        _read_recipe(series, listed)
    else:
        _read_plain(series, listed)
    return listed


def names(series: Series) -> list[str] | None:
    """The names of SERIES' patches in its list's order, or None when the order is the file
    names' (`list: none`)."""
    listed = read(series)
    return None if listed is None else listed.names


def render(series: Series, names: list[str], renamed: dict[str, str] | None = None, data: bytes | None = None) -> bytes:
    """SERIES' list file with its patches replaced by NAMES (in order), edited in place
    (RENAMED: old name -> new name, so that a renamed patch keeps its line); DATA: the file's
    current bytes when another edit of it is pending (a pin-sync moving a recipe's version)."""
    listed = read(series, data)
    assert listed is not None, "render: the series keeps no list file"
    renamed = renamed or {}
    lines = list(listed.lines)
    newline = _newline(lines)
    unterminated = bool(lines) and not lines[-1].endswith(("\n", "\r"))
    if unterminated:
        lines[-1] += newline  # while lines move and land after it; taken off again below
    ours = [e for e in listed.entries if e.name is not None]
    # 1. renames: the new name in the old line
    current: dict[int, str] = {}  # line index -> the name it now holds
    for entry in ours:
        assert entry.name is not None
        name = renamed.get(entry.name, entry.name)
        if name != entry.name:
            lines[entry.line] = _with_name(series, listed, lines[entry.line], entry, name)
        current[entry.line] = name
    # 2. the same file listed twice: only its first line stays
    wanted = set(names)
    seen: set[str] = set()
    for entry in ours:
        name = current[entry.line]
        if name not in wanted or name in seen:
            del current[entry.line]
        seen.add(name)
    # 3. kept lines in the new order: each kept line's slot takes the line of the name due there
    kept_slots = sorted(current)
    kept_order = [n for n in names if n in set(current.values())]
    by_name = {name: lines[slot] for slot, name in current.items()}
    for slot, name in zip(kept_slots, kept_order, strict=True):
        lines[slot] = by_name[name]
        current[slot] = name
    # 4. new patches after the one before them (or before the first one)
    slot_of = {name: slot for slot, name in current.items()}
    depth_of = {e.line: e.depth for e in listed.entries}
    inserts: dict[int, list[str]] = {}  # insert before line index -> lines
    previous: str | None = None
    template = lines[kept_slots[0]] if kept_slots else None
    for name in names:
        if name in slot_of:
            previous = name
            continue
        line = _new_line(series, listed, name, template, newline)
        if previous is not None:
            at = _after_guards(lines, slot_of[previous], depth_of.get(slot_of[previous], 0)) + 1
        elif kept_slots:
            at = kept_slots[0]
        else:
            at = _end_of_list(listed, lines)
        inserts.setdefault(at, []).append(line)
        # the next new patch goes after this one: same insertion point, later in its list
    # 5. dropped lines (and the guards they leave empty) go; inserts land
    dropped = {e.line for e in ours if e.line not in current}
    out: list[str] = []
    for index, line in enumerate(lines):
        out += inserts.get(index, [])
        if index not in dropped:
            out.append(line)
    out += inserts.get(len(lines), [])
    if listed.kind == "conda-forge":
        out = _without_empty_guards(out)
    if unterminated and out and out[-1] == lines[-1]:
        out[-1] = out[-1][: -len(newline)]  # the file's last line, still last: as it was
    return "".join(out).encode("utf-8", errors="surrogateescape")


def problems(series: Series) -> list[tuple[int, str]]:
    """What is wrong with SERIES' list, as (1-based line, message): an entry naming a file the
    series directory lacks, a patch file of the directory the list does not name. [] for
    `list: none`."""
    listed = read(series)
    if listed is None:
        return []
    root = _root(series)
    found: list[tuple[int, str]] = []
    listed_names = set()
    for entry in listed.entries:
        if entry.name is None:
            continue
        listed_names.add(entry.name)
        if root.kind(series.dir / entry.name) is None:
            found.append(
                (entry.line + 1, f"lists {entry.text!r}, which is not a file in {shown(series.root, series.dir)}")
            )
    for name in sorted(root.listdir(series.dir) or []):
        if name.endswith((".patch", ".diff")) and name not in listed_names and (series.dir / name) != listed.path:
            found.append((1, f"does not list {name}, a patch file in {shown(series.root, series.dir)}"))
    return found


# ---------------------------------------------------------------- reading


def _read_plain(series: Series, listed: ListFile) -> None:
    """A quilt `series` file (`#` comments, options after the name) or Electron's `.patches`
    (a name a line)."""
    for index, line in enumerate(listed.lines):
        body = line.rstrip("\r\n")
        words = (body.split("#", 1)[0] if listed.kind == "quilt" else body).split()
        if not words:
            continue
        listed.entries.append(Entry(index, words[0], _series_name(series, listed, index, words[0])))


def _read_recipe(series: Series, listed: ListFile) -> None:
    """The `patches:` lists of a conda-forge `meta.yaml`, read line by line: an item a line
    (`- patches/x.patch  # [win]`), Jinja block lines and comments between them kept."""
    lines = listed.lines
    index = 0
    while index < len(lines):
        key = _PATCHES_KEY_RE.match(lines[index].rstrip("\r\n"))
        if key is None:
            index += 1
            continue
        rest = key["rest"]
        if rest and not rest.startswith("#"):
            raise ListUnreadable(
                f"{listed.shown(series.root)}:{index + 1}: `patches: {rest}` is not a block list (one `- FILE` a "
                "line): patchctl edits only that form; write it as one"
            )
        key_indent = len(key["indent"]) + (len(key["dash"]) if key["dash"] else 0)
        index += 1
        depth = 0
        item_indent = None
        end = index  # after the block's last item (or its key)
        while index < len(lines):
            body = lines[index].rstrip("\r\n")
            stripped = body.strip()
            if not stripped or stripped.startswith("#"):
                index += 1
                continue
            if block := _JINJA_BLOCK_RE.match(body):
                depth += {"if": 1, "for": 1, "endif": -1, "endfor": -1}.get(block["word"], 0)
                index += 1
                continue
            indent = len(body) - len(body.lstrip())
            if not stripped.startswith("-") or indent < key_indent:
                break
            if item_indent is None:
                item_indent = indent
            elif indent != item_indent:
                break
            item = _YAML_ITEM_RE.match(body)
            if item is None or "{{" in body or "{%" in body:
                raise ListUnreadable(
                    f"{listed.shown(series.root)}:{index + 1}: patch entry {stripped!r} is not a plain file name "
                    "patchctl can follow (a Jinja expression?); list the file itself"
                )
            listed.entries.append(Entry(index, item["name"], _series_name(series, listed, index, item["name"]), depth))
            index += 1
            end = index
        listed.blocks.append((end, " " * (item_indent if item_indent is not None else key_indent + 2)))


def _series_name(series: Series, listed: ListFile, index: int, text: str) -> str | None:
    """ENTRY's file name when it names a file directly in the series directory; None when it
    names one elsewhere. An entry below the series directory fails closed: patchctl reads one
    directory, and would otherwise silently leave the patch out."""
    if text.startswith("/"):
        return None
    base = posixpath.normpath(posixpath.join(_relative_dir(series, listed.path.parent), text))
    directory = _relative_dir(series, series.dir)
    parent, name = posixpath.split(base)
    if (parent or ".") == (directory or "."):
        return name
    if directory in (".", "") or base.startswith(directory + "/"):
        raise ConfigError(
            f"{listed.shown(series.root)}:{index + 1}: {text!r} lies in a subdirectory of the series directory "
            f"{shown(series.root, series.dir)}: patchctl reads one directory (make `dir:` that subdirectory)"
        )
    return None


# ---------------------------------------------------------------- writing


def _with_name(series: Series, listed: ListFile, line: str, entry: Entry, name: str) -> str:
    """LINE with ENTRY's file name replaced by NAME (its path prefix, quoting and tail kept)."""
    prefix = entry.text[: len(entry.text) - len(posixpath.basename(entry.text))]
    at = line.find(entry.text)
    return line[:at] + prefix + name + line[at + len(entry.text) :]


def _new_line(series: Series, listed: ListFile, name: str, template: str | None, newline: str) -> str:
    """The line that lists NAME, written like TEMPLATE (a line of the list) when there is one."""
    text = _entry_text(series, listed, name)
    if listed.kind != "conda-forge":
        return text + newline
    indent = listed.blocks[-1][1] if listed.blocks else "    "
    if template is not None and (item := _YAML_ITEM_RE.match(template.rstrip("\r\n"))) is not None:
        return f"{item['indent']}- {item['quote']}{text}{item['quote']}{newline}"
    return f"{indent}- {text}{newline}"


def _entry_text(series: Series, listed: ListFile, name: str) -> str:
    """NAME (a file of the series directory) as the list file names it: relative to its directory."""
    return posixpath.relpath(
        posixpath.join(_relative_dir(series, series.dir), name), _relative_dir(series, listed.path.parent) or "."
    )


def _after_guards(lines: list[str], index: int, depth: int) -> int:
    """The line after which to put a patch that follows the one on line INDEX, standing in DEPTH
    Jinja blocks: that line, or the end of the blocks it stands in."""
    while depth > 0 and index + 1 < len(lines):
        index += 1
        if block := _JINJA_BLOCK_RE.match(lines[index]):
            depth += {"if": 1, "for": 1, "endif": -1, "endfor": -1}.get(block["word"], 0)
    return index


def _end_of_list(listed: ListFile, lines: list[str]) -> int:
    """Where a first patch goes in an empty list: the end of the file, or the end of the
    recipe's first `patches:` block."""
    if listed.kind != "conda-forge":
        return len(lines)
    if not listed.blocks:
        raise ListUnreadable(
            f"{listed.path}: no `patches:` list to add the series' patches to: add `patches:` under `source:`"
        )
    return listed.blocks[0][0]


def _without_empty_guards(lines: list[str]) -> list[str]:
    """LINES without a Jinja `{% if %}` ... `{% endif %}` pair that holds nothing any more."""
    changed = True
    while changed:
        changed = False
        for index in range(len(lines) - 1):
            opening, closing = _JINJA_BLOCK_RE.match(lines[index]), _JINJA_BLOCK_RE.match(lines[index + 1])
            if opening and closing and opening["word"] == "if" and closing["word"] == "endif":
                del lines[index : index + 2]
                changed = True
                break
    return lines


def _newline(lines: list[str]) -> str:
    return "\r\n" if lines and lines[0].endswith("\r\n") else "\n"


# ---------------------------------------------------------------- paths


def _root(series: Series) -> Root:
    return Root(series.root if series.root is not None else series.dir.parent)


def _read_bytes(series: Series, path: Path) -> bytes | None:
    try:
        return _root(series).read_bytes(path, MAX_LIST_BYTES)
    except TooLarge:
        raise ListUnreadable(
            f"{shown(series.root, path)}: larger than {MAX_LIST_BYTES:,} bytes; not a patch list"
        ) from None
    except Refused as exc:
        raise UsageError(f"{shown(series.root, path)}: {exc}") from None


def _relative_dir(series: Series, path: Path) -> str:
    root = series.root if series.root is not None else series.dir.parent
    return posixpath.normpath(Path(path).relative_to(root).as_posix())


def shown(root: Path | None, path: Path) -> str:
    """PATH relative to ROOT (the repository), as messages name it; PATH itself outside it."""
    if root is not None:
        try:
            return Path(path).relative_to(root).as_posix()
        except ValueError:
            pass
    return str(path)
