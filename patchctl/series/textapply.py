"""`git apply`'s placing of hunks, in Python, for the plain case: a patch that only edits the text
of files that exist, with full context. pin-sync's seed (the series as commits on the old pin,
`applier.seed_three_way_objects`) applies every patch of a series in a row; this applies them in
memory, without a `git apply` process each. (The replay itself stays git's: carried in memory and
committed in batches, it measured no faster, the commits being what costs there.)

The rules are git's own (apply.c: `apply_one_fragment`, `find_pos`, `match_fragment`), with the
options patchctl always passes (no whitespace fixing or ignoring, no context reduction):
- a hunk is looked for first at its new start line (where the hunks before it in the file left
  it), then one line after, one before, two after, two before..., and the first place where every
  context and removed line stands exactly (bytes and line ends) wins;
- a hunk whose old start is line 0 or 1 must match at the top of the file, one without trailing
  context at its end;
- a line an earlier hunk of the same file wrote is never matched again.
A new file of text lines is plain too. Anything else (a removed, renamed or binary file, a mode
change, a path named twice) is not: the caller asks git. `tests/patchctl/test_textapply.py`
holds the two side by side on generated patches.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from .. import git
from ..upstream.store import prefetch_blobs
from .diffblocks import Block, BlockHunk, ParsedDiff, index_line_ids
from .patchset import MalformedPatch, PatchFile

REGULAR_MODES = ("100644", "100755")


class MemoryTree:
    """The files of commit BASE in REPO as patches applied in memory leave them: each file read
    from git the first time a patch names it (one `ls-tree` and one `cat-file` a patch at most),
    then kept. `apply` says where git would be needed instead (None)."""

    def __init__(self, repo: Path, base: str):
        self.repo, self.base = Path(repo), base
        self.files: dict[str, tuple[str, bytes] | None] = {}  # path -> (mode, content); None: not a regular file
        self._listed: dict[str, tuple[str, str] | None] = {}  # path -> (mode, id) in BASE; None: nothing there

    def read_ahead(self, patches: list[PatchFile]) -> None:
        """Read every file PATCHES name, and the directories above them, in one `ls-tree` and one
        `cat-file`, rather than a patch at a time."""
        paths = {path for patch in patches for path in patch.touched_paths()}
        self._list(sorted(paths | {parent for path in paths for parent in _parents(path)}))
        self._read(sorted(paths - self.files.keys()))

    def apply(self, patch: PatchFile) -> tuple[dict[str, tuple[str, bytes]], list[tuple[str, int, int]]] | None:
        """PATCH applied on the files as they stand: the files it changes (path -> (mode, new
        content)) and (path, hunk number, offset) of each hunk git would say it moved; None when
        the patch is not plain, does not apply, or its index line says git would write otherwise."""
        if b"\r" in patch.data:
            return None  # git reads a CR as the line's own (the parser drops it before LF): left to git
        try:
            parsed = patch.parsed
            ids = index_line_ids(patch.text, parsed)
        except MalformedPatch:
            return None
        if not plain_edits(parsed):
            return None
        self._read(
            [block.new_path for block in parsed.blocks if block.new_path not in self.files and not block.created]
        )
        changed: dict[str, tuple[str, bytes]] = {}
        offsets: list[tuple[str, int, int]] = []
        for block in parsed.blocks:
            if block.created:  # git refuses a file that exists, or a path through one
                if not self._free(block.new_path):
                    return None
                assert block.new_mode is not None  # _plain_new_file
                changed[block.new_path] = (block.new_mode, b"".join(_sides(block.hunks[0])[1]))
                continue
            entry = self.files[block.new_path]
            if entry is None or block.new_mode not in (None, entry[0]):
                return None
            applied = apply_hunks(entry[1], block.hunks)
            if applied is None:
                return None
            pre, post = ids.get(block.new_path, ("", ""))
            if pre and _blob_id(entry[1]).startswith(pre) and not _blob_id(applied[0]).startswith(post):
                return None  # from the very preimage git made something else: never claim git's result
            changed[block.new_path] = (entry[0], applied[0])
            offsets += [(block.new_path, number, offset) for number, offset in applied[1]]
        self.files.update(changed)
        return changed, offsets

    def _free(self, path: str) -> bool:
        """Whether nothing stands at PATH in BASE nor in memory, and every directory above it is
        one or nothing (not a file, not a link)."""
        parents = _parents(path)
        if self.files.get(path) is not None or any(self.files.get(parent) is not None for parent in parents):
            return False
        listed = self._list([*parents, path])
        return listed[path] is None and all(listed[parent] in (None, ("040000", "")) for parent in parents)

    def _list(self, paths: list[str]) -> dict[str, tuple[str, str] | None]:
        """Path -> (mode, id) in BASE (a directory's id left out), None where BASE holds nothing,
        for PATHS (read literally, not as patterns); each path asked of git once."""
        unknown = [path for path in paths if path not in self._listed]
        if unknown:
            literal = {"GIT_LITERAL_PATHSPECS": "1"}
            if git.paths_fit_argv(unknown):
                out = git.run(
                    ["ls-tree", "-z", "--full-tree", self.base, "--", *unknown], self.repo, env=literal
                ).stdout
            else:  # long paths: the whole tree (and its directories), read here, never the command line
                out = git.run(["ls-tree", "-r", "-t", "-z", "--full-tree", self.base], self.repo).stdout
            self._listed.update(dict.fromkeys(unknown))
            for entry in out.split("\0"):
                meta, _, path = entry.partition("\t")
                if meta.count(" ") == 2 and path in self._listed:
                    mode, kind, oid = meta.split(" ")
                    self._listed[path] = (mode, "" if kind == "tree" else oid)
        return {path: self._listed[path] for path in paths}

    def _read(self, paths: list[str]) -> None:
        if not paths:
            return
        found = {path: entry for path, entry in self._list(paths).items() if entry and entry[0] in REGULAR_MODES}
        prefetch_blobs(self.repo, self.base, list(found))  # a blobless mirror: one request, not one a blob
        blobs = read_blobs(self.repo, [blob for _, blob in found.values()])
        for path in paths:
            blob = found.get(path, ("", ""))[1]
            self.files[path] = (found[path][0], blobs[blob]) if blob in blobs else None


def _parents(path: str) -> list[str]:
    """The directories above PATH, outermost first."""
    parts = path.split("/")
    return ["/".join(parts[:n]) for n in range(1, len(parts))]


def read_blobs(repo: Path, ids: list[str]) -> dict[str, bytes]:
    """The contents of the blobs IDS (full ids) in REPO, in one `git cat-file --batch`; those it
    cannot read (missing: a partial clone offline) are left out."""
    unique = list(dict.fromkeys(ids))
    if not unique:
        return {}
    done = git.run(["cat-file", "--batch"], repo, input="".join(f"{i}\n" for i in unique), binary=True, check=False)
    data: bytes = done.stdout  # type: ignore[assignment]
    contents: dict[str, bytes] = {}
    position = 0
    for blob in unique:
        header_end = data.find(b"\n", position)
        header = data[position:header_end].split(b" ") if header_end >= 0 else []
        if len(header) != 3 or header[0].decode() != blob or header[1] != b"blob":
            break  # "missing", or the output ended: the rest is git's to read
        start = header_end + 1
        contents[blob] = data[start : start + int(header[2])]
        position = start + int(header[2]) + 1
    return contents


def file_commands(changed: dict[str, tuple[str, bytes]]) -> list[bytes]:
    """`git fast-import` file commands that write CHANGED (path -> (mode, content)) inline."""
    return [
        b"M %s inline %s\ndata %d\n%s" % (mode.encode(), path.encode("utf-8", "surrogateescape"), len(data), data)
        for path, (mode, data) in changed.items()
    ]


def _blob_id(content: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


def plain_edits(parsed: ParsedDiff) -> bool:
    """Whether every block of PARSED edits, in place, the text of one file that exists: what
    `apply_hunks` can apply as git would."""
    if parsed.corrupt_line is not None or parsed.names_link_mode or not parsed.blocks:
        return False
    paths = [block.new_path for block in parsed.blocks]
    return len(set(paths)) == len(paths) and all(_plain(block) for block in parsed.blocks)


def _plain(block: Block) -> bool:
    if block.created:
        return _plain_new_file(block)
    return (
        block.git
        and block.old_path == block.new_path
        and not (block.deleted or block.binary or block.renamed_from or block.copied_from)
        and block.old_mode in (None, block.new_mode)  # an index line's mode, not a change of mode
        and block.new_mode in (None, *REGULAR_MODES)
        and bool(block.hunks)
        and not any(_quoted_or_multiline(block.new_path))
        and all(_plain_hunk(hunk) for hunk in block.hunks)
    )


def _plain_new_file(block: Block) -> bool:
    """A new regular file of text lines, each ending in a newline: one hunk that adds them all."""
    return (
        block.git
        and block.old_mode is None
        and block.new_mode in REGULAR_MODES
        and not (block.binary or block.renamed_from or block.copied_from)
        and not any(_quoted_or_multiline(block.new_path))
        and len(block.hunks) == 1
        and block.hunks[0].overflow_line is None
        and (block.hunks[0].source_start, block.hunks[0].source_length) == (0, 0)
        and all(line[:1] in ("+", "\\") for line in block.hunks[0].body)
        and _known_tags([line[:1] for line in block.hunks[0].body])
    )


def _quoted_or_multiline(path: str) -> list[bool]:
    return [c in path for c in ('"', "\n", "\\")]


def _plain_hunk(hunk: BlockHunk) -> bool:
    if hunk.overflow_line is not None:
        return False
    tags = [line[:1] for line in hunk.body]
    # A hunk with nothing to match (it can only add to an empty file) is left to git.
    return any(tag in (" ", "-", "") for tag in tags) and _known_tags(tags)


def _known_tags(tags: list[str]) -> bool:
    """Context, removed and added lines, each "\\ No newline at end of file" after one of them."""
    return all(t in (" ", "-", "+", "") or (t == "\\" and n and tags[n - 1] != "\\") for n, t in enumerate(tags))


def split_lines(content: bytes) -> list[bytes]:
    """CONTENT as git's image: lines split at LF only, each with its LF (the last may lack one)."""
    if b"\r" not in content:
        return content.splitlines(keepends=True)  # the same lines, in one pass (it splits at CR too)
    lines = content.split(b"\n")
    last = lines.pop()
    return [line + b"\n" for line in lines] + ([last] if last else [])


def apply_hunks(content: bytes, hunks: list[BlockHunk]) -> tuple[bytes, list[tuple[int, int]]] | None:
    """CONTENT with HUNKS applied as `git apply` applies them, and (hunk number, offset) for each
    hunk that did not land where its header says (what `git apply -v` reports); None where git
    would fail."""
    image = split_lines(content)
    patched = [False] * len(image)
    offsets: list[tuple[int, int]] = []
    for hunk in hunks:
        preimage, postimage, trailing = _sides(hunk)
        position = hunk.target_start - 1 if hunk.target_start else 0
        match_beginning = hunk.source_start <= 1
        match_end = trailing == 0
        found = _find(image, patched, preimage, position, match_beginning, match_end)
        if found is None:
            return None
        image[found : found + len(preimage)] = postimage
        patched[found : found + len(preimage)] = [True] * len(postimage)
        if found != position:
            offsets.append((hunk.index, found - position))
    return b"".join(image), offsets


def _sides(hunk: BlockHunk) -> tuple[list[bytes], list[bytes], int]:
    """The hunk's lines before and after (each with its LF but a last one "\\ No newline at end of
    file" follows), and how many context lines end it."""
    preimage: list[bytes] = []
    postimage: list[bytes] = []
    trailing = 0
    previous = " "  # the tag of the line before (a plain hunk never starts with a "\\")
    for line in hunk.body:
        tag, text = line[:1], line[1:].encode("utf-8", "surrogateescape") + b"\n"
        if tag == "\\":  # the line before has no newline, on each side it stands
            last = {" ": (preimage, postimage), "": (preimage, postimage), "-": (preimage,), "+": (postimage,)}
            for side in last[previous]:
                side[-1] = side[-1][:-1]
            continue
        previous = tag
        if tag in (" ", ""):  # an empty line is context too (GNU diff writes blank context so)
            preimage.append(text)
            postimage.append(text)
            trailing += 1
        elif tag == "-":
            preimage.append(text)
            trailing = 0
        else:
            postimage.append(text)
            trailing = 0
    return preimage, postimage, trailing


def _find(
    image: list[bytes], patched: list[bool], preimage: list[bytes], line: int, match_beginning: bool, match_end: bool
) -> int | None:
    """Where PREIMAGE stands in IMAGE, looked for from LINE outwards as git's find_pos does."""
    size = len(image)
    if match_beginning:
        line = 0
    elif match_end:
        line = size - len(preimage)
    if line < 0 or line > size:  # git compares unsigned: a negative line is past the end too
        line = size
    backwards = forwards = line
    current = line
    step = 0
    while True:
        if _matches(image, patched, preimage, current, match_beginning, match_end):
            return current
        while True:
            if backwards == 0 and forwards == size:
                return None
            if step & 1:
                if backwards == 0:
                    step += 1
                    continue
                backwards -= 1
                current = backwards
            else:
                if forwards == size:
                    step += 1
                    continue
                forwards += 1
                current = forwards
            break
        step += 1


def _matches(
    image: list[bytes], patched: list[bool], preimage: list[bytes], at: int, match_beginning: bool, match_end: bool
) -> bool:
    end = at + len(preimage)
    if end > len(image) or (match_end and end != len(image)) or (match_beginning and at):
        return False
    return image[at:end] == preimage and not any(patched[at:end])
