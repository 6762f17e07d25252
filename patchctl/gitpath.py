"""The paths git refuses to put in an index or a work tree, with git's reason.

git checks every path it writes with `verify_path` (read-cache.c): no empty component (a
leading, doubled or trailing '/'), no '.' or '..' component, no '.git' in any case, and,
since `core.protectNTFS` is on by default on every platform, none of the names NTFS treats as
`.git`: the 8.3 short name `git~1` and `.git` followed by dots or spaces (`.git.`, `.git .`) or an
alternate data stream (`.git::$INDEX_ALLOCATION`). `git apply` answers such a patch with
"invalid path"; patchctl says so, with the rule, before git is asked (not "context drift").
"""

from __future__ import annotations

import re

# `.git` or `git~1`, then only dots and spaces up to the end of the component or a ':' (NTFS streams).
_NTFS_DOTGIT_RE = re.compile(r"^(?:\.git|git~1)[. ]*(?::.*)?$", re.IGNORECASE)


def invalid_path_reason(path: str) -> str | None:
    """Why git's verify_path (with core.protectNTFS, git's default) refuses PATH, or None."""
    if path == "":
        return "invalid path '': an empty path"
    if re.match(r"^[A-Za-z]:", path):
        return f"invalid path {path!r}: a DOS drive prefix"
    for component in path.split("/"):
        reason = _component_reason(component)
        if reason is not None:
            return f"invalid path {path!r}: git refuses it ({reason})"
        if "\\" in component:  # NTFS reads a backslash as a separator: `a\.git\x` is `.git` there
            for part in component.split("\\"):
                if _NTFS_DOTGIT_RE.match(part):
                    return f"invalid path {path!r}: git refuses it ({part!r} is .git on NTFS, core.protectNTFS)"
    return None


def _component_reason(component: str) -> str | None:
    if component == "":
        return "an empty path component: a leading, doubled or trailing '/'"
    if component in (".", ".."):
        return f"a {component!r} component"
    if component.lower() == ".git":
        return "a path inside .git" if component == ".git" else f"{component!r} is .git in another case"
    if _NTFS_DOTGIT_RE.match(component):
        if component.lower().startswith("git~1"):
            return f"{component!r} is the NTFS short name of .git, core.protectNTFS"
        return f"{component!r} is .git on NTFS (trailing dots, spaces or a stream), core.protectNTFS"
    return None
