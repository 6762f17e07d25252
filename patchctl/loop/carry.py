"""Carrying a patch across a pin move: what `git am -3` does beyond `git apply -3`, and one
thing it does not do.

pin-sync and the canary apply each patch at the new pin with `git apply -3`. When git
gives up without a conflict, two causes are mended and the patch is tried once more:

* a file the patch changes is gone at the new pin because upstream moved it between the
  pins (`git diff -M` of the old pin against the new, the rename detection `git am -3`
  gets from its merge): the patch is applied at the new path ("followed the rename A → B");
* its `index` lines name preimage blobs no repository here has (a series cut against a
  tree holding cherry-picks): the preimage is rebuilt where the patch applied, the series
  at the old pin, and the index lines are rewritten to the blobs it read and wrote there,
  so the 3-way merge can run. "Context drift" is then left for real drift.

And one check `git am -3` lacks: a hunk a clean 3-way merge finds already in the target
counts as already upstream only when upstream's change to those lines is this patch's own
change: the upstream commit that made it has the patch's patch-id, or it made that edit and
nothing else in the file but edits of the patch's own lines and of its context. An identical
edit made along with other changes (both sides add an operator and increment the same
counter: the right result counts both) is a stop, "needs a look", naming the commit.

"Taken upstream" means upstream holds the change byte for byte: applying the patch at the new
pin changes nothing (its reverse applies cleanly, or a 3-way merge of it, which compares lines
exactly, stages nothing). A patch-id is not enough: `git patch-id --stable` ignores
whitespace, so an upstream commit that made `"hellobrave world"` of the patch's `"hello brave
world"` has its patch-id. A patch that does not apply, with an upstream commit of its patch-id,
is a stop, "needs a look" (`NOT_EXACT`), naming the commit; never dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import field
from pathlib import Path

from .. import git
from ..records import dataclass
from ..series.applier import IndexBuilder, PatchOutcome, Status, apply_in_worktree, hunks_already_upstream
from ..series.commits import commit_worktree
from ..series.diffblocks import (
    DEV_NULL,
    Block,
    header_line_range,
    index_line,
    index_line_ids,
    parse_diff_text,
    patch_lines,
)
from ..series.patchset import FileDiff, Hunk, MalformedPatch, PatchFile

SAME_EDIT = "needs a look: upstream made the same edit for another reason"
NOT_EXACT = "needs a look: an upstream commit has the patch's patch-id, not its exact change"
_LACKS_BLOB = "lacks the necessary blob"
# A commit's own change: against its first parent for a merge, without colour or message.
_SHOW = ["show", "--diff-merges=first-parent", "--format=", "--no-color"]


@dataclass(frozen=True)
class SameEdit:
    """A hunk the target already has, where the upstream commit that made its edit made other changes there too."""

    file: str
    hunk: int
    hunk_header: str
    commit: str
    subject: str
    elsewhere: str  # "FILE line N": the first of that commit's other changes to the file


def describe_same_edits(edits: list[SameEdit]) -> str:
    """One phrase per file and upstream commit: its hunks, the commit, where else it changed the file."""
    grouped: dict[tuple[str, str], list[SameEdit]] = {}
    for edit in edits:
        grouped.setdefault((edit.file, edit.commit), []).append(edit)
    return "; ".join(
        f"{file} hunk{'s' if len(group) > 1 else ''} {', '.join(f'#{e.hunk}' for e in group)}: upstream commit "
        f'{commit[:12]} "{group[0].subject}" made the same edit along with other changes ({group[0].elsewhere}), '
        "so both edits may be needed (e.g. a counter both sides increment)"
        for (file, commit), group in grouped.items()
    )


@dataclass
class Carried:
    """How a patch fared at the new pin, with what was mended to apply it."""

    outcome: PatchOutcome
    applied: PatchFile  # the patch as applied (paths followed, index lines rebuilt)
    renames: list[tuple[str, str]] = field(default_factory=list)  # (old path, new path) followed
    rebuilt: list[str] = field(default_factory=list)  # files whose preimage was rebuilt from the old pin
    not_rebuilt: str = ""  # why foreign index lines could not be rebuilt
    same_edits: list[SameEdit] = field(default_factory=list)  # non-empty: a stop, nothing committed

    @property
    def needs_look(self) -> bool:
        return bool(self.same_edits)

    def notes(self) -> list[str]:
        """What was done beyond `git apply -3`, one phrase each, for the report."""
        out = [f"followed the rename {old} → {new}" for old, new in self.renames]
        if self.rebuilt:
            out.append(
                f"its index line names a preimage blob the repository lacks ({', '.join(self.rebuilt)}): rebuilt "
                "from the old pin, where the patch applies"
            )
        if self.not_rebuilt:
            out.append(self.not_rebuilt)
        return out


class PinMove:
    """The move of a series from OLD to NEW, in REPO (a work tree of the upstream's mirror):
    the renames between the pins and the preimages at the old pin, computed on demand."""

    def __init__(
        self,
        repo: Path,
        old: str,
        new: str,
        patches: list[PatchFile],
        memo: dict | None = None,
        old_head: str | None = None,
        seeding: Callable[[], str | None] | None = None,
    ):
        self.repo = Path(repo)
        self.old = old
        self.new = new
        self.patches = patches
        # The series as commits on the old pin, one a patch as far as it applies in order (the
        # seed pin-sync makes: `seed_three_way_objects`), when the caller has it.
        self.old_head = old_head
        # A seed still in the making: its last commit when it is done (`seeded`).
        self._seeding = seeding
        self._old_commits: list[str] | None = None
        # What was learnt of the upstream between the pins, kept by the caller across commands
        # (a stopped pin-sync's state) so that a --continue does not ask git again.
        self.memo = {} if memo is None else memo
        self.patch_ids: dict[str, str] = self.memo.setdefault("patch_ids", {})  # commit (or patch:digest) -> id

    def seeded(self) -> None:
        """Wait for the seed in the making, if any: what a 3-way merge and the old side read."""
        if self._seeding is not None:
            self.old_head, self._seeding = self._seeding(), None

    def renames(self) -> dict[str, str]:
        """Old path -> new path of every file upstream moved between the pins."""
        if "renames" not in self.memo:
            out = git.run(
                ["-c", "diff.renameLimit=0", "diff", "-M", "--name-status", "-z", "--diff-filter=R"]
                + [self.old, self.new],
                self.repo,
                check=False,
            ).stdout
            fields = out.split("\0")
            renames = {}
            index = 0
            while index + 2 < len(fields):
                if fields[index].startswith("R"):
                    renames[fields[index + 1]] = fields[index + 2]
                index += 3
            self.memo["renames"] = renames
        return self.memo["renames"]

    def rebuilt_index(self, patch: PatchFile) -> PatchFile | None:
        """PATCH with its index lines naming the blobs it reads and writes at the old pin, on
        top of the series before it; None when it does not apply there."""
        position = next((i for i, p in enumerate(self.patches) if p.name == patch.name), None)
        if position is None:
            return None
        commits = self._old_side()
        if position < len(commits):  # the seed holds the trees before and after it: read, not applied again
            paths = patch.touched_paths()
            before = _listed(self.repo, commits[position - 1] if position else self.old, paths)
            return _with_index_lines(patch, before, _listed(self.repo, commits[position], paths))
        with IndexBuilder(self.repo, self.old) as builder:
            for earlier in self.patches[:position]:
                builder.apply(earlier, commit=False)
            paths = patch.touched_paths()
            before = _staged(builder, paths)
            if not builder.apply(patch, commit=False).ok:
                return None
            after = _staged(builder, paths)
        return _with_index_lines(patch, before, after)

    def _old_side(self) -> list[str]:
        """The commits of the old side, oldest first: one a patch of the series, as far as it
        applies in order; none when the caller has no seed or it is not one a patch."""
        if self._old_commits is None:
            self.seeded()
            self._old_commits = []
            if self.old_head is not None:
                listed = git.run(["rev-list", "--reverse", f"{self.old}..{self.old_head}"], self.repo, check=False)
                commits = listed.stdout.split() if listed.ok else []
                if len(commits) <= len(self.patches):
                    self._old_commits = commits
        return self._old_commits


def carry_patch(tree: Path, move: PinMove, patch: PatchFile) -> Carried:
    """Apply PATCH in TREE with a 3-way merge, mending a moved file or a foreign index line
    when git gives up on them; commit it unless it fails or needs a look."""
    tree = Path(tree)
    outcome = apply_in_worktree(tree, patch, three_way=True, commit=False, before_merge=move.seeded)
    carried = Carried(outcome, patch)
    if not outcome.ok and outcome.status in (Status.FILE_MISSING, Status.CONTEXT_DRIFT) and outcome.three_way:
        carried = _mended(tree, move, patch, outcome)
    outcome = carried.outcome
    if outcome.status == Status.ALREADY_APPLIED or (outcome.status == Status.MERGED and outcome.upstream_parts):
        carried.same_edits = same_edits(tree, move, carried.applied)
    if outcome.ok and not carried.needs_look:
        outcome.commit = commit_worktree(tree, carried.applied)
    return carried


def _mended(tree: Path, move: PinMove, patch: PatchFile, first: PatchOutcome) -> Carried:
    """Try PATCH again with its moved files followed and its index lines rebuilt; the first
    outcome stands when neither changes anything or the retry fares no better."""
    candidate, rebuilt, not_rebuilt = patch, [], ""
    foreign = _LACKS_BLOB in first.three_way
    if not foreign and first.status == Status.FILE_MISSING and _stays_missing(tree, patch, move.renames()):
        return Carried(first, patch)  # git refuses a missing file whatever the index lines: the retry could only fail
    rebuilt_patch = move.rebuilt_index(patch)
    if rebuilt_patch is not None:
        rebuilt = _foreign_files(patch, rebuilt_patch) if foreign else []
        candidate = rebuilt_patch
    elif foreign:
        not_rebuilt = (
            "its index line names a preimage blob the repository lacks and it does not apply at the old pin "
            "either, so the preimage cannot be rebuilt"
        )
    candidate, renames = follow_renames(tree, candidate, move.renames())
    if candidate.data == patch.data:
        return Carried(first, patch, not_rebuilt=not_rebuilt)
    retry = apply_in_worktree(tree, candidate, three_way=True, commit=False)
    if not retry.ok and retry.status != Status.CONFLICT and retry.status != Status.ALREADY_APPLIED:
        # The patch stops either way. With a preimage rebuilt, the retry says why it still stops;
        # the first try would blame the blob the rebuild supplied.
        return Carried(retry if rebuilt else first, patch, not_rebuilt=not_rebuilt)
    return Carried(retry, candidate, renames, rebuilt)


# ---------------------------------------------------------------- renames


def follow_renames(tree: Path, patch: PatchFile, renames: dict[str, str]) -> tuple[PatchFile, list[tuple[str, str]]]:
    """PATCH with every file it changes that TREE lacks, and that upstream moved (RENAMES),
    at its new path; and the renames followed."""
    try:
        blocks = patch.parsed.blocks
    except MalformedPatch:
        return patch, []
    lines = patch.text.split("\n")
    followed: list[tuple[str, str]] = []
    for position, block in enumerate(blocks):
        missing = _missing_source(tree, block, renames)
        if missing is None or missing[1] is None:
            continue
        source, target = missing
        header = header_line_range(blocks, position, len(lines))
        if any('"' in lines[n] for n in header):
            continue  # a C-quoted path: left as it is (git reports the missing file)
        for number in header:
            lines[number] = _moved_header_line(lines[number], block, source, target)
        followed.append((source, target))
    if not followed:
        return patch, []
    return PatchFile(patch.path, "\n".join(lines).encode("utf-8", "surrogateescape")), followed


def _stays_missing(tree: Path, patch: PatchFile, renames: dict[str, str]) -> bool:
    """Whether PATCH changes a file TREE lacks that no rename of RENAMES leads to (the ones
    `follow_renames` follows): `git apply` fails on it however the patch is mended."""
    try:
        blocks = patch.parsed.blocks
    except MalformedPatch:
        return False
    for block in blocks:
        missing = _missing_source(tree, block, renames)
        if missing is not None and missing[1] is None:
            return True
    return False


def _missing_source(tree: Path, block: Block, renames: dict[str, str]) -> tuple[str, str | None] | None:
    """When BLOCK changes a file TREE lacks: that file, and where upstream moved it (RENAMES) if
    TREE has it there, else None; None when BLOCK creates its file or TREE has it."""
    source = block.renamed_from or block.copied_from or block.old_path
    if block.created or _exists(tree / source):
        return None
    target = renames.get(source)
    return source, target if target is not None and _exists(tree / target) else None


def _exists(path: Path) -> bool:
    return path.is_symlink() or path.exists()


def _moved_header_line(line: str, block: Block, source: str, target: str) -> str:
    """LINE of BLOCK's header with SOURCE moved to TARGET (the new side too, when the block
    changes the file in place)."""
    in_place = block.new_path == source

    def moved(token: str) -> str:
        prefix = token.split("/", 1)[0] + "/" if "/" in token else ""
        return prefix + target

    if line.startswith("diff --git "):
        old_token, new_token = line[len("diff --git ") :].split(" ", 1)
        if old_token.endswith("/" + source) or old_token == source:
            old_token = moved(old_token)
            if in_place:
                new_token = moved(new_token)
        return f"diff --git {old_token} {new_token}"
    for marker, side_moves in (("--- ", True), ("+++ ", in_place)):
        if line.startswith(marker) and side_moves:
            token, tab, rest = line[4:].partition("\t")
            if token != DEV_NULL:
                return marker + moved(token) + tab + rest
    for kind in ("rename from ", "copy from "):
        if line == kind + source:
            return kind + target
    return line


# ---------------------------------------------------------------- index lines


def _staged(builder: IndexBuilder, paths: list[str]) -> dict[str, tuple[str, str]]:
    """Path -> (mode, blob) in BUILDER's index, for PATHS."""
    if not paths:
        return {}
    if not git.paths_fit_argv(paths):  # long paths: the whole index, read here, never the command line
        listed = _modes_and_blobs(git.run(["ls-files", "-s", "-z"], builder.repo, env=builder.env).stdout, 1)
        return {path: listed[path] for path in paths if path in listed}
    return _modes_and_blobs(git.run(["ls-files", "-s", "-z", "--", *paths], builder.repo, env=builder.env).stdout, 1)


def _listed(repo: Path, commit: str, paths: list[str]) -> dict[str, tuple[str, str]]:
    """Path -> (mode, blob) in COMMIT, for PATHS: what `_staged` reads from an index."""
    if not paths:
        return {}
    literal = {"GIT_LITERAL_PATHSPECS": "1"}
    if not git.paths_fit_argv(paths):  # long paths: the whole tree, read here, never the command line
        listed = _modes_and_blobs(git.run(["ls-tree", "-r", "-z", "--full-tree", commit], repo).stdout, 2)
        return {path: listed[path] for path in paths if path in listed}
    return _modes_and_blobs(
        git.run(["ls-tree", "-z", "--full-tree", commit, "--", *paths], repo, env=literal).stdout, 2
    )


def _modes_and_blobs(listing: str, blob_at: int) -> dict[str, tuple[str, str]]:
    """Path -> (mode, blob) from `ls-files -s -z` (the blob the 2nd field) or `ls-tree -z` (the 3rd)."""
    found = {}
    for entry in listing.split("\0"):
        if entry:
            meta, _, path = entry.partition("\t")
            fields = meta.split(" ")
            found[path] = (fields[0], fields[blob_at])
    return found


def _with_index_lines(patch: PatchFile, before: dict, after: dict) -> PatchFile:
    lines = patch.text.split("\n")
    blocks = patch.parsed.blocks
    for position, block in enumerate(blocks):
        source = block.renamed_from or block.copied_from or block.old_path
        pre = git.ZERO_OID if block.created else before.get(source, ("", git.ZERO_OID))[1]
        post = git.ZERO_OID if block.deleted else after.get(block.new_path, ("", git.ZERO_OID))[1]
        if found := index_line(lines, blocks, position):
            number, m = found
            lines[number] = f"index {pre}..{post}{m['mode'] or ''}"
    return PatchFile(patch.path, "\n".join(lines).encode("utf-8", "surrogateescape"))


def _index_ids(patch: PatchFile) -> dict[str, str]:
    """File -> the preimage id its index line names."""
    return {path: pre for path, (pre, _post) in index_line_ids(patch.text, patch.parsed).items()}


def missing_preimages(repo: Path, patches: list[PatchFile]) -> list[str]:
    """The preimage ids the index lines of PATCHES name that REPO's object store lacks (or
    cannot tell apart), sorted. A new file's zero id is never missing."""
    named: set[str] = set()
    for patch in patches:
        try:
            named |= {pre for pre in _index_ids(patch).values() if pre.strip("0")}
        except MalformedPatch:
            continue  # git says what is wrong with it when it is applied
    if not named:
        return []
    out = git.run(["cat-file", "--batch-check"], repo, input="".join(f"{i}\n" for i in sorted(named))).stdout
    return sorted(line.split(" ", 1)[0] for line in out.splitlines() if line.endswith((" missing", " ambiguous")))


def _foreign_files(original: PatchFile, rebuilt: PatchFile) -> list[str]:
    """The files whose preimage id in ORIGINAL is not the one the old pin gives (REBUILT)."""
    real = _index_ids(rebuilt)
    return [path for path, named in _index_ids(original).items() if not real.get(path, "").startswith(named)]


# ---------------------------------------------------------------- taken upstream

TAKEN_SAME_PATCH_ID = "same patch-id"
TAKEN_EVERY_HUNK = "every hunk already present from one upstream commit"


@dataclass(frozen=True)
class TakenUpstream:
    """The upstream commit between the pins that holds a patch's change, and how it was told."""

    commit: str
    subject: str
    how: str  # TAKEN_SAME_PATCH_ID | TAKEN_EVERY_HUNK

    def record(self, url: str | None) -> dict[str, str | None]:
        """What canary and pin-sync keep in their JSON: the commit, how it was told, the patch's Submitted URL."""
        return {"commit": self.commit, "subject": self.subject, "how": self.how, "url": url}

    def describe(self, url: str | None = None) -> str:
        sent = f"; sent as {url}" if url else ""
        return f'taken upstream in {self.commit[:12]} "{self.subject}" ({self.how}{sent})'


def taken_upstream(move: PinMove, patch: PatchFile, tree: Path | None = None) -> TakenUpstream | None:
    """The upstream commit between the pins that holds PATCH's change: one with the patch's
    patch-id, or, with TREE (at the new pin, the series before PATCH applied, PATCH found
    already applied there), the one commit that made every hunk of it. None when neither.
    Without TREE, only the patch-id is asked: a commit named so is the patch's twin, not proof
    that upstream holds its change (`describe_not_exact`)."""
    commits = _commits_with_patch_ids(move, patch) if patch.touched_paths() else []
    own = _own_patch_id(move, patch) if commits else "-"  # none may have it, mostly: then it is not asked
    if own != "-":
        for commit in commits:
            if _patch_id(move, commit) == own:
                return _taken(move, commit, TAKEN_SAME_PATCH_ID)
    if tree is None:
        return None
    try:
        hunks = sum(len(diff.hunks) for diff in patch.files)
    except MalformedPatch:
        return None
    present = hunks_already_upstream(tree, patch)
    if not present or len(present) != hunks:
        return None
    common: list[str] | None = None
    for diff, hunk, upstream_lines in present:
        making = _commits_making(move, diff.path, hunk, upstream_lines)
        common = making if common is None else [c for c in common if c in making]
        if not common:
            return None
    assert common is not None
    return _taken(move, common[-1], TAKEN_EVERY_HUNK)  # the oldest: the commit that made the edit


def describe_not_exact(twin: TakenUpstream) -> str:
    """Why a patch that does not apply, whose patch-id an upstream commit (TWIN) has, is not taken upstream."""
    return (
        f'upstream commit {twin.commit[:12]} "{twin.subject}" has the patch\'s patch-id, which ignores whitespace, '
        "but the upstream tree does not hold the patch's change byte for byte (upstream's edit differs from it, or "
        "changed since)"
    )


def _taken(move: PinMove, commit: str, how: str) -> TakenUpstream:
    return TakenUpstream(commit, _subject(move, commit), how)


def _subject(move: PinMove, commit: str) -> str:
    """The subject of COMMIT (a full id, from git: asked once per process)."""
    return git.run_fixed(["log", "-1", "--format=%s", commit], move.repo, commits=(commit,)).stdout.strip()


# ---------------------------------------------------------------- the same edit for another reason


def same_edits(tree: Path, move: PinMove, patch: PatchFile) -> list[SameEdit]:
    """Per hunk of PATCH that the target in TREE already has (in whole or in part): the
    upstream commit that made that edit along with other changes in the file, when one did."""
    found: list[SameEdit] = []
    inverse = {new: old for old, new in move.renames().items()}
    sharing: list[str] | None = None  # the commits that may have the patch's patch-id, once asked
    for diff, hunk, upstream_lines in hunks_already_upstream(tree, patch):
        for commit in _commits_making(move, diff.path, hunk, upstream_lines):
            if sharing is None:
                sharing = _commits_with_patch_ids(move, patch)
            if commit in sharing and _patch_id(move, commit) == _own_patch_id(move, patch):
                continue
            elsewhere = _other_change(move, commit, diff, inverse.get(diff.path))
            if elsewhere is not None:
                found.append(SameEdit(diff.path, hunk.index, hunk.header, commit, _subject(move, commit), elsewhere))
                break
    return found


def _commits_making(move: PinMove, path: str, hunk: Hunk, upstream_lines: list[str]) -> list[str]:
    """The upstream commits between the pins that changed the lines where HUNK's
    UPSTREAM_LINES are in the new pin's PATH (newest first)."""
    shown = git.run_fixed(["show", f"{move.new}:{path}"], move.repo, commits=(move.new,))
    if not shown.ok:
        return []  # not in the new pin: an earlier patch of the series made it
    new_lines = patch_lines(shown.stdout)
    post: list[str] = []
    marks: list[int] = []
    anchors: list[int] = []
    for line in hunk.body:
        tag, text = line[:1], line[1:]
        if tag in (" ", "+"):
            if tag == "+" and line in upstream_lines:
                marks.append(len(post))
                anchors.append(len(post))
            post.append(text)
        elif tag == "-" and line in upstream_lines:
            marks += [max(len(post) - 1, 0), len(post)]
    if not marks or not new_lines:
        return []
    start = _best_alignment(new_lines, post, anchors, hunk.target_start - 1)
    if start is None:
        return []
    first = min(max(start + min(marks), 0), len(new_lines) - 1) + 1
    last = min(max(start + max(marks), 0), len(new_lines) - 1) + 1
    found = git.run(
        ["log", f"-L{first},{last}:{path}", "-s", "--format=%H", f"{move.old}..{move.new}"], move.repo, check=False
    )
    return [line for line in found.stdout.split() if git.is_full_sha(line)] if found.ok else []


def _best_alignment(new_lines: list[str], post: list[str], anchors: list[int], near: int) -> int | None:
    """Where POST (a hunk's lines after the patch) lies in NEW_LINES: the start with the
    most lines equal, every ANCHOR line among them; the one nearest NEAR on a tie."""
    best: tuple[int, int] | None = None
    chosen = None
    # Only a start where some line is equal can score (where the first anchor is, with anchors):
    # those, in order, not every line of a long file.
    where: dict[str, list[int]] = {}
    for number, text in enumerate(new_lines):
        where.setdefault(text, []).append(number)
    lines = [(anchors[0], post[anchors[0]])] if anchors else list(enumerate(post))
    for start in sorted({number - i for i, text in lines for number in where.get(text, ())}):
        if any(not (0 <= start + a < len(new_lines)) or new_lines[start + a] != post[a] for a in anchors):
            continue
        score = sum(
            1 for i, text in enumerate(post) if 0 <= start + i < len(new_lines) and new_lines[start + i] == text
        )
        key = (score, -abs(start - near))
        if score and (best is None or key > best):
            best, chosen = key, start
    return chosen


def _patch_id(move: PinMove, commit: str) -> str:
    if commit not in move.patch_ids:
        diff = git.run([*_SHOW, "--no-renames", commit], move.repo).stdout
        move.patch_ids[commit] = _patch_id_of(move.repo, diff)
    return move.patch_ids[commit]


def _commits_with_patch_ids(move: PinMove, patch: PatchFile) -> list[str]:
    """The commits between the pins that may have PATCH's patch-id (newest first, no merges),
    with the patch-id of each (of its whole change, as `_patch_id` computes it) put in MOVE's
    cache: one `git log -p` and one `git patch-id` for those not there yet, not two processes
    a commit. A patch-id hashes each changed file's `---`/`+++` lines, so only a commit whose
    changed files are the patch's can have it: one `git log --raw` of the commits touching the
    patch's paths says which those are, and the others are never shown (on a real bump, most)."""
    log = ["log", "--no-merges", "-z", "--format=%x00%H", "--raw", "--no-abbrev", "--no-renames", "--full-diff"]
    paths = patch.touched_paths()
    if git.paths_fit_argv(paths):
        listed = git.run_fixed([*log, f"{move.old}..{move.new}", "--", *paths], move.repo, commits=(move.old, move.new))
    else:  # long paths go on stdin, never the command line
        stdin = git.stdin_revisions_and_paths([f"{move.old}..{move.new}"], paths)
        listed = git.run([*log, "--stdin"], move.repo, check=False, input=stdin)
    if not listed.ok:
        return []
    commits = [commit for commit, files in _raw_log(listed.stdout) if _may_share_patch_id(patch, files)]
    unknown = [commit for commit in commits if commit not in move.patch_ids]
    if unknown:
        shown = git.run(
            ["log", "--no-walk=unsorted", "--stdin", "-p", "--format=commit %H", "--no-color", "--no-renames"],
            move.repo,
            input="".join(f"{commit}\n" for commit in unknown),
        ).stdout
        ids = git.run(["patch-id", "--stable"], move.repo, input=shown, check=False).stdout.split("\n")
        found = dict(reversed(line.split()) for line in ids if len(line.split()) == 2)
        for commit in unknown:
            # A commit with no change has no patch-id line: "", as `_patch_id_of` gives for an empty diff.
            move.patch_ids[commit] = found.get(commit, "")
    return commits


# Blob ids a side of a change may have with no line to diff: none (added, deleted) or the empty
# blob, in a SHA-1 and in a SHA-256 repository.
_NO_LINES = {
    "0" * 40,
    "0" * 64,
    "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391",
    "473a0f4c3be8a93681a267e3b1e9a7dcda1185436fe141f7749120a303721813",
}


def _raw_log(out: str) -> list[tuple[str, dict[str, bool]]]:
    """`git log -z --format=%x00%H --raw` read as (commit, {path: whether its change has lines
    to diff}) per commit, in git's order."""
    commits: list[tuple[str, dict[str, bool]]] = []
    tokens = out.split("\0")
    at = 0
    while at < len(tokens):
        token = tokens[at].lstrip("\n")
        if git.is_full_sha(token) and at > 0 and tokens[at - 1] == "":
            commits.append((token, {}))
        elif token.startswith(":") and commits and at + 1 < len(tokens):
            fields = token.split()
            lines = len(fields) >= 4 and fields[2] != fields[3] and not {fields[2], fields[3]} <= _NO_LINES
            commits[-1][1][tokens[at + 1]] = lines
            at += 1
        at += 1
    return commits


def _may_share_patch_id(patch: PatchFile, files: dict[str, bool]) -> bool:
    """Whether a commit changing FILES ({path: has lines to diff}) may have PATCH's patch-id:
    every file with lines to diff on either side is one the other side names (a file without,
    such as a mode change or an empty file, may count or not, as git's version decides)."""
    try:
        with_lines = {diff.path for diff in patch.files if diff.hunks} | {
            diff.source_path for diff in patch.files if diff.hunks and diff.source_path
        }
    except MalformedPatch:
        return True
    named = set(patch.touched_paths())
    return {path for path, lines in files.items() if lines} <= named and with_lines <= set(files)


def _own_patch_id(move: PinMove, patch: PatchFile) -> str:
    key = f"patch:{patch.digest}"
    if key not in move.patch_ids:
        move.patch_ids[key] = _patch_id_of(move.repo, patch.text) or "-"
    return move.patch_ids[key]


def _patch_id_of(repo: Path, diff: str) -> str:
    out = git.run(["patch-id", "--stable"], repo, input=diff, check=False).stdout.split()
    return out[0] if out else ""


def _other_change(move: PinMove, commit: str, diff: FileDiff, old_path: str | None) -> str | None:
    """Where COMMIT changed DIFF's file other than by the patch's own edits and edits of its
    context lines; None when it did nothing else there."""
    paths = [diff.path] + ([old_path] if old_path else []) + ([diff.source_path] if diff.source_path else [])
    paths = list(dict.fromkeys(paths))
    if git.paths_fit_argv(paths):
        shown = git.run_fixed([*_SHOW, "-M", "-U0", commit, "--", *paths], move.repo, commits=(commit,))
    else:  # long paths go on stdin, never the command line
        stdin = git.stdin_revisions_and_paths([commit], paths)
        shown = git.run([*_SHOW, "-M", "-U0", "--stdin"], move.repo, check=False, input=stdin)
    shown = shown.stdout
    removed_ok = {line[1:] for h in diff.hunks for line in h.body if line[:1] in ("-", " ")}
    context = {line[1:] for h in diff.hunks for line in h.body if line[:1] == " "}
    added_ok = {line[1:] for h in diff.hunks for line in h.body if line[:1] == "+"}
    for block in parse_diff_text(shown).blocks:
        if block.new_path != diff.path:
            continue
        for change in block.hunks:
            removed = [line[1:] for line in change.body if line[:1] == "-"]
            added = [line[1:] for line in change.body if line[:1] == "+"]
            edits_context = any(line in context for line in removed)
            if all(line in removed_ok for line in removed) and (edits_context or all(a in added_ok for a in added)):
                continue
            return f"{diff.path} line {change.target_start}"
    return None
