"""How a series' files are named (`naming:`): which names lint accepts (PC002) and the name
export gives a new patch, or an old one the commits were reordered past.

* `format-patch` (default): `NNNN-<slug>.patch` as git format-patch names them (any number
  width on existing files, gaps allowed); a new patch takes the number after the one before
  it and git's own slug;
* `strict`: the same, four digits, a lower-case slug, no gaps;
* `openwrt`: OpenWrt's `NNN-<slug>.patch`, three digits in bands (0xx upstream backports,
  1xx, 2xx ...: the package's own convention): a new patch takes the number after the patch
  before it (`011-…` after `010-…`, `101-…` after `100-…`), so that it stays in that patch's
  band and its neighbours keep their names; where that number is taken it is shared;
* `electron`: Electron's `<slug>.patch`, no number (the order is `.patches`'): the slug is
  what Electron's exporter derives from the subject (`fix: add foo` -> `fix_add_foo.patch`);
* `quilt`, `any`: any names; a new patch gets a lower-case hyphenated slug.

An existing file keeps its name verbatim (capitals, gaps, long slugs) whenever the order
allows it. Where no list file gives the order, the names are the order: a file whose name would
no longer sort after the patch before it (a new patch took the number it had) is renumbered.
"""

from __future__ import annotations

import re

from ..patterns import lazy
from ..project.config import Series
from .patchset import FORMAT_PATCH_SLUG_MAX, PATCH_NAME_RE, STRICT_NAME_RE, PatchFile, slugify

# Any leading number, whatever its width (`001-x.patch`, `0036-x.patch`, `12-x.patch`): the names real series ship.
_NUMBERED_RE = lazy(r"^(?P<number>\d+)-(?P<slug>.+)\.patch$")
OPENWRT_NAME_RE = lazy(r"^(?P<number>\d{3})[-_](?P<slug>[A-Za-z0-9][A-Za-z0-9._+-]*)\.patch$")
ELECTRON_NAME_RE = lazy(r"^[a-z0-9][a-z0-9._-]*\.patch$")
NUMBERED_NAMINGS = ("format-patch", "strict", "openwrt")


def expected(naming: str) -> str:
    """What a well-named file of NAMING looks like, for lint's message."""
    return {
        "strict": "NNNN-slug.patch with a lower-case slug",
        "openwrt": "NNN-slug.patch (three digits, OpenWrt's)",
        "electron": "slug.patch with a lower-case underscore slug (Electron's)",
    }.get(naming, f"NNNN-slug.patch, a slug of at most {FORMAT_PATCH_SLUG_MAX} characters of [A-Za-z0-9._-]")


def well_named(naming: str, name: str) -> bool:
    """Whether NAME fits NAMING (`quilt` and `any` take every name)."""
    if naming in ("quilt", "any"):
        return True
    if naming == "strict":
        return STRICT_NAME_RE.match(name) is not None
    if naming == "openwrt":
        return OPENWRT_NAME_RE.match(name) is not None
    if naming == "electron":
        return ELECTRON_NAME_RE.match(name) is not None
    match = PATCH_NAME_RE.match(name)
    if match is None or len(match["slug"]) > FORMAT_PATCH_SLUG_MAX:
        return False
    # git trims a trailing '.' or '-' before it cuts the slug at 52 characters, not after: a cut slug may end in one.
    return len(match["slug"]) == FORMAT_PATCH_SLUG_MAX or not match["slug"].endswith((".", "-"))


def number_of(naming: str, name: str) -> int | None:
    """NAME's number under NAMING (None: it has none, or the naming numbers nothing)."""
    if naming not in NUMBERED_NAMINGS:
        return None
    match = (OPENWRT_NAME_RE if naming == "openwrt" else PATCH_NAME_RE).match(name)
    return int(match["number"]) if match else None


def number_width(patches: list[PatchFile]) -> int:
    """The width of the series' numbers (the most common one; 4, git format-patch's, when none)."""
    widths: dict[int, int] = {}
    for patch in patches:
        if match := _NUMBERED_RE.match(patch.name):
            widths[len(match["number"])] = widths.get(len(match["number"]), 0) + 1
    return max(sorted(widths), key=lambda w: widths[w]) if widths else 4


def format_patch_slug(subject: str) -> str:
    """The slug git format-patch puts in a file name: runs of anything but letters, digits,
    '.' and '_' become one '-', no '.' after '.', no leading '-' nor trailing '.' or '-', then
    cut at 52 characters: as git does, the cut may leave a '-' or '.' at the end."""
    slug = re.sub(r"[^A-Za-z0-9._]+", "-", subject.split("\n", 1)[0])
    slug = re.sub(r"\.{2,}", ".", slug).lstrip("-").rstrip(".-")
    return slug[:FORMAT_PATCH_SLUG_MAX] or "patch"


def electron_name(subject: str) -> str:
    """The file name Electron's exporter gives a commit without a `Patch-Filename:` line:
    its subject (less a `.patch` ending), runs of anything but letters, digits and '-' as one
    '_', '_' trimmed at both ends, lower case."""
    subject = subject.split("\n", 1)[0].removesuffix(".patch")
    return (re.sub(r"[^A-Za-z0-9-]+", "_", subject).strip("_").lower() or "patch") + ".patch"


class Namer:
    """The file names of a series being regenerated, in its order: `name` for each patch."""

    def __init__(self, series: Series, existing: list[PatchFile]):
        self.naming = series.naming
        self.taken = {p.name for p in existing}
        self.width = 3 if self.naming == "openwrt" else number_width(existing)
        self.last = 0  # the number of the last patch named
        self.previous = ""  # the last name given
        self.by_name = series.patch_list.path is None  # the names are the order: each must sort after the one before

    def name(self, old: PatchFile | None, subject: str) -> str:
        """The name of the next patch: OLD's (its file, when it matched one) when the order
        allows, else a new one from SUBJECT."""
        name = self._name(old, subject)
        self.taken.add(name)
        self.previous = name
        return name

    def _name(self, old: PatchFile | None, subject: str) -> str:
        if self.naming not in NUMBERED_NAMINGS:
            if old is not None:
                return old.name
            return self._unique(electron_name(subject) if self.naming == "electron" else slugify(subject) + ".patch")
        number = number_of(self.naming, old.name) if old is not None else None
        if number is None and old is not None and (match := _NUMBERED_RE.match(old.name)):
            number = int(match["number"])  # a number of another width: kept where the order allows
        in_order = not self.by_name or old is None or old.name > self.previous
        if old is not None and number is not None and number >= self.last and in_order:
            # Kept verbatim: gaps, capitals, any number width and a number shared with the patch before
            # (where the names are the order, only while it still sorts after that patch's name).
            self.last = number
            return old.name
        number = self.last + 1  # the next one after the patch before it, in its band while the band has room
        self.last = number
        if old is not None and (match := _NUMBERED_RE.match(old.name)):
            slug = match["slug"]
        elif self.naming == "format-patch":
            slug = format_patch_slug(subject)
        else:
            slug = slugify(subject)
        return f"{number:0{self.width}d}-{slug}.patch"

    def _unique(self, name: str) -> str:
        stem = name.removesuffix(".patch")
        joiner = "_" if self.naming == "electron" else "-"
        suffix = 1
        while (candidate := f"{stem}{'' if suffix == 1 else f'{joiner}{suffix}'}.patch") in self.taken:
            suffix += 1
        return candidate
