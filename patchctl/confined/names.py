"""The path names git refuses to put in an index or a work tree, with git's reason.

git checks every path it writes with `verify_path` (read-cache.c): no empty component (a
leading, doubled or trailing '/'), no '.' or '..' component, no '.git' in any case, and,
since `core.protectNTFS` is on by default on every platform, none of the names NTFS treats as
`.git`: the 8.3 short name `git~1` and `.git` followed by dots or spaces (`.git.`, `.git .`) or an
alternate data stream (`.git::$INDEX_ALLOCATION`). With `core.protectHFS` (macOS) `.git` with
Unicode code points HFS+ ignores (`.g\u200cit`) is `.git` too. `git apply` answers such a patch with
"invalid path"; patchctl says so, with the rule, before git is asked (not "context drift"), and
`patchctl.confined.Root` refuses the same components in every path it opens.
"""

from __future__ import annotations

import re

from ..patterns import lazy

# `.git` or `git~1`, then only dots and spaces up to the end of the component or a ':' (NTFS streams).
_NTFS_DOTGIT_RE = lazy(r"^(?:\.git|git~1)[. ]*(?::.*)?$", re.IGNORECASE)
# The code points HFS+ drops when it compares names (git's is_hfs_dotgit, utf8.c).
_HFS_IGNORED_RE = lazy("[\u200c-\u200f\u202a-\u202e\u206a-\u206f\ufeff]")


def invalid_path_reason(path: str) -> str | None:
    """Why git's verify_path (with core.protectNTFS, git's default) refuses PATH, or None."""
    if path == "":
        return "invalid path '': an empty path"
    if re.match(r"^[A-Za-z]:", path):
        return f"invalid path {path!r}: a DOS drive prefix"
    for component in path.split("/"):
        reason = component_reason(component)
        if reason is not None:
            return f"invalid path {path!r}: git refuses it ({reason})"
    return None


def component_reason(component: str) -> str | None:
    """Why git refuses COMPONENT (one name between slashes) in a path, or None."""
    if component == "":
        return "an empty path component: a leading, doubled or trailing '/'"
    if component in (".", ".."):
        return f"a {component!r} component"
    if "\0" in component:
        return f"{component!r} holds a NUL byte"
    if component.lower() == ".git":
        return "a path inside .git" if component == ".git" else f"{component!r} is .git in another case"
    if _NTFS_DOTGIT_RE.match(component):
        if component.lower().startswith("git~1"):
            return f"{component!r} is the NTFS short name of .git, core.protectNTFS"
        return f"{component!r} is .git on NTFS (trailing dots, spaces or a stream), core.protectNTFS"
    if "\\" in component:  # NTFS reads a backslash as a separator: `a\.git\x` is `.git` there
        for part in component.split("\\"):
            if _NTFS_DOTGIT_RE.match(part):
                return f"{part!r} is .git on NTFS, core.protectNTFS"
    if _HFS_IGNORED_RE.search(component) and _HFS_IGNORED_RE.sub("", component).lower() == ".git":
        return f"{component!r} is .git on HFS+ (ignored Unicode code points), core.protectHFS"
    return None


def is_dotgit(component: str) -> bool:
    """Whether COMPONENT is `.git` in any spelling git refuses (case, NTFS, HFS+)."""
    return bool(
        component.lower() == ".git"
        or _NTFS_DOTGIT_RE.match(component)
        or any(_NTFS_DOTGIT_RE.match(part) for part in component.split("\\")[1:])
        or _HFS_IGNORED_RE.sub("", component).lower() == ".git"
    )
