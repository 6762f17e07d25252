"""The hardware capability names a meta backend may map (MX302).

LocalAI picks a meta backend's variant by the capability it detects on the host, so a key it
never detects is dead. The names change as LocalAI adds hardware, so matrix.yaml may list them:

    index:
      capabilities: [default, cpu, nvidia, nvidia-cuda-13, ...]

Without that list, LocalAI's current set applies (conventions.KNOWN_CAPABILITIES).
"""

from __future__ import annotations

from typing import Any

from ..project.yamlloc import KeyPath


def parse_capabilities(reader: Any, value: Any, keypath: KeyPath, pattern) -> tuple[str, ...]:
    """`index.capabilities`, validated by READER (a schema.Section): a non-empty list of unique names."""
    items = reader.sequence(value, keypath)
    if not items:
        raise reader.error(keypath, "list at least one capability name (or leave the key out for LocalAI's set)")
    names: list[str] = []
    for i, item in enumerate(items):
        name = reader.scalar(item, keypath + (i,), pattern=pattern, non_empty=True)
        if name in names:
            raise reader.error(keypath + (i,), f"duplicate capability {name!r}")
        names.append(name)
    return tuple(names)
