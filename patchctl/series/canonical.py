"""A series' canonical form (`form:` other than `own`): every patch written exactly as the
downstream's own tool writes it, so that its CI check and patchctl agree on every byte.

Electron regenerates its patches with `git format-patch --keep-subject --no-stat
--no-signature --zero-commit --full-index` (rename detection on, Objective-C function names
for `*.m` and `*.mm` through an attributes file), then cuts each patch's trailing newlines to
one and drops its `Patch-Dir:`/`Patch-Filename:` lines; its CI re-exports and fails on any
difference. Under `form: electron` export does the same, and a pin-sync's carried patches get
the index lines of the new pin, as Electron's own re-export would write them.

git runs isolated (`patchctl.git`: no global or system config), so only what the form says
and git's defaults shape the output, as on the downstream's CI machine; the tree's own
`.gitattributes` apply, as they do there.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager

from ..confined import Root, scratch
from ..project.config import Series
from ..project.series_keys import PatchForm
from ..records import dataclass

_LOCATION_LINE_RE = re.compile(rb"^Patch-(?:Dir|Filename): ")


@dataclass(frozen=True)
class Formatter:
    """How to format a commit in a form: `git -c CONFIG format-patch -1 --stdout ARGS COMMIT`,
    then `finish` on what it printed."""

    form: PatchForm
    config: tuple[str, ...]  # `-c KEY=VALUE` pairs, flattened
    args: tuple[str, ...]

    def finish(self, data: bytes) -> bytes:
        """What the downstream's tool keeps of DATA (format-patch's output for one commit)."""
        if not self.form.electron_cleanup:
            return data
        lines = data.splitlines(keepends=True)
        kept: list[bytes] = []
        after_subject = False  # a line right after the Subject: line always stays
        for number, line in enumerate(lines):
            following = lines[number + 1] if number + 1 < len(lines) else b""
            location = _LOCATION_LINE_RE.match(line) is not None
            blank_before_location = not line.rstrip() and _LOCATION_LINE_RE.match(following) is not None
            if after_subject or not (location or blank_before_location):
                kept.append(line)
            after_subject = line.startswith(b"Subject: ")
        return b"".join(kept).rstrip(b"\n") + b"\n"


@contextmanager
def formatter(series: Series) -> Iterator[Formatter]:
    """The Formatter of SERIES' canonical form, its attributes file alive while in use."""
    form = series.form
    settings = [*form.config]
    with scratch.directory("patchctl-attributes-") as directory:
        path = None
        if form.attributes:
            text = "".join(f"{line}\n" for line in form.attributes)
            Root(directory, "a private directory").write_scratch("attributes", text.encode())
            path = directory / "attributes"
        settings.append(f"core.attributesFile={path or os.devnull}")
        config = tuple(part for setting in settings for part in ("-c", setting))
        yield Formatter(form, config, ("format-patch", "-1", "--stdout", *form.args))
