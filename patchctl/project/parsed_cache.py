"""The documents PyYAML made of files patchctl read before, kept in the cache by their bytes.

Every command starts by reading matrix.yaml, and each `pin-sync --continue`, pre-commit hook or
`lint` is a process of its own: importing PyYAML and composing the file cost each of them about
as much as starting Python. A file whose bytes were parsed before (the same bytes, the same
`merge_keys`) is read back from `<cache>/parsed/` instead: the same values and the same line of
each, so the same verdicts and error lines. An entry holds the file's text and is taken only
for exactly that text (its name, the text's length and CRC-32, only finds it: no hash to trust,
and none of OpenSSL's to import). Only a document JSON holds exactly
(mappings with text keys, lists, text, numbers, booleans, nulls) is kept; a date, binary or an
integer key leaves the file to PyYAML every time. An entry that is not what `write` writes (cut
short, edited, a link) is read past as missing, and a cache that cannot be written costs nothing
but the time: this never fails a command.
"""

from __future__ import annotations

import json
import math
import zlib
from typing import Any

from ..confined import Refused, Root
from ..paths import cache_dir, cache_location

FORMAT = "patchctl parsed-yaml 1"
MAX_ENTRY_BYTES = 96 * 1024 * 1024  # a file of MAX_BYTES of YAML, its document as JSON, with its lines


def read(source: bytes, merge_keys: bool) -> tuple[Any, dict[tuple, int]] | None:
    """(data, lines) of the document SOURCE was parsed into before, or None."""
    try:
        location = cache_location()
        if not location.is_dir():
            return None
        raw = Root(location, "the cache").read_bytes(_entry(source, merge_keys), MAX_ENTRY_BYTES)
        entry = json.loads(raw) if raw is not None else None
    except (OSError, Refused, ValueError, RecursionError):
        return None
    if not isinstance(entry, dict) or entry.get("format") != FORMAT or not isinstance(entry.get("lines"), list):
        return None
    if entry.get("merge_keys") is not merge_keys or entry.get("source") != source.decode("utf-8", "replace"):
        return None  # another file's (the same length and CRC-32), or read with other rules
    lines: dict[tuple, int] = {}
    for item in entry["lines"]:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], list) and _is_line(item[1])):
            return None
        if not _keypath_ok(item[0]):
            return None
        lines[tuple(item[0])] = item[1]
    if "data" not in entry or not _exact(entry["data"]):
        return None
    return entry["data"], lines


def write(source: bytes, merge_keys: bool, data: Any, lines: dict[tuple, int]) -> None:
    """Keep DATA and LINES, what SOURCE was parsed into, when JSON holds them exactly."""
    if not _exact(data) or not all(_keypath_ok(keypath) for keypath in lines):
        return
    try:
        text = json.dumps(
            {
                "format": FORMAT,
                "merge_keys": merge_keys,
                "source": source.decode("utf-8"),
                "data": data,
                "lines": [[list(keypath), line] for keypath, line in lines.items()],
            },
            allow_nan=False,
            separators=(",", ":"),
        )
        cache = Root(cache_dir(), "the cache")
        cache.mkdirs("parsed")
        cache.write_bytes(_entry(source, merge_keys), text.encode("ascii"))
    except (OSError, Refused, ValueError, RecursionError):
        return


def _entry(source: bytes, merge_keys: bool) -> str:
    return f"parsed/{len(source):x}-{zlib.crc32(source):08x}-{int(merge_keys)}.json"


def _exact(value: Any) -> bool:
    """Whether JSON gives VALUE back as it is: the same types, every key text (iteratively deep
    enough for any document the loader lets through)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if not all(isinstance(key, str) for key in item):
                return False
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, float):
            if not math.isfinite(item):
                return False
        elif not (item is None or isinstance(item, (str, bool, int))):
            return False
    return True


def _keypath_ok(keypath: Any) -> bool:
    """Whether JSON gives KEYPATH's parts back as they are: mapping keys (text) and list indices."""
    return all(isinstance(part, str) or _is_int(part) for part in keypath)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_line(value: Any) -> bool:
    return _is_int(value) and value >= 1
