"""Regenerating a series from the commits on top of a base, deterministically: the domain
of `patchctl export`.

One patch per commit, produced by `git format-patch` with every setting that changes its
output pinned (myers diff, no renames, and the series' own conventions: diffstat or not,
index line length, signature, From line and subject prefix, read from its files by
`patchctl.series.patchstyle`; patchctl's own for a series without mails: zero commit id, no
signature, full index lines, no stat), whatever the user's or the repository's git config
says. Churn is avoided on purpose:

* an existing patch (matched by subject, or by the title its file name gives a header-less
  patch) keeps its file name verbatim: numbering gaps, capitals and long format-patch slugs
  stay; it is renumbered only when the commits were reordered past it. A new patch is named
  as the series' `naming:` says (`patchctl.series.naming`) and takes its place in the
  downstream's own list (`patchctl.series.patchlist`), edited in place;
* an existing patch's file is kept byte for byte (its From, Date, Subject and any DEP-3 or
  quilt header included) unless its change or its message really changed: applied to
  the commit's parent it must give the commit's tree, whatever its hunk order, offsets,
  index lines or diff algorithm. A file that is not a mail is rewritten in its own form
  (`patchctl.series.plainform`): no made-up author, date or subject;
* under a canonical `form:` (`patchctl.series.canonical`) every patch is written exactly as
  the downstream's own tool writes it, and kept only when it already is;
* hunks on excluded paths (the source-only policy) are dropped and reported, and a
  commit left empty by that is dropped and reported too.

Before anything is written, the new series is applied strictly to a private index at
the base and the result must equal the work tree's HEAD on every non-excluded path.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import field
from pathlib import Path
from typing import ClassVar

from .. import git
from ..confined import Root, confined_path
from ..errors import CheckFailed, UsageError
from ..output.jsonout import json_field
from ..project.config import Config, Series
from ..records import dataclass
from ..state import journal, worktree
from ..state.journal import FileChange
from . import canonical, patchlist, patchstyle, plainform
from .applier import IndexBuilder, PatchOutcome, apply_series_to_index, is_clean, series_tree_at_once
from .commits import commit_message
from .formatting import FORMAT_PATCH_ARGS, FORMAT_PATCH_CONFIG, Formatted, format_patch, pathspec_without
from .naming import Namer
from .patchset import (
    MalformedPatch,
    PatchFile,
    hunk_fingerprint,
    is_excluded,
    read_series,
)
from .seriesdir import MAX_PATCH_BYTES


@dataclass(frozen=True)
class DroppedHunk:
    commit_subject: str = json_field(name="commit")
    path: str


def _renames_json(renamed: list[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"from": old, "to": new} for old, new in renamed]


@dataclass(frozen=True)
class ListUpdate:
    """The series' list file (PATH) made to name NAMES, in order (RENAMED: old -> new name)."""

    path: Path
    names: tuple[str, ...]
    renamed: tuple[tuple[str, str], ...]

    def change(self, series: Series, pending: bytes | None = None) -> FileChange:
        """The write, edited on PENDING (the file's bytes another pending edit made) when given."""
        return FileChange(self.path, patchlist.render(series, list(self.names), dict(self.renamed), pending))


@dataclass
class ExportResult:
    JSON_PROPERTIES: ClassVar[dict[str, str]] = {"up_to_date": "up_to_date"}

    series: str
    base: str
    written: list[str] = field(default_factory=list)  # new or changed files
    renamed: list[tuple[str, str]] = json_field(encode=_renames_json, default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    dropped_hunks: list[DroppedHunk] = field(default_factory=list)
    dropped_commits: list[str] = field(default_factory=list)
    empty_commits: list[str] = field(default_factory=list)  # change nothing (e.g. taken upstream): dropped
    check_only: bool = False
    # the downstream's own list file, edited, when the list of patches changed
    list_update: ListUpdate | None = json_field(omit=True, default=None)

    @property
    def removed(self) -> list[str]:
        """Every file to remove: the deleted patches and the old names of renamed ones."""
        kept = set(self.written) | {new for _, new in self.renamed} | set(self.unchanged)
        return self.deleted + [old for old, _ in self.renamed if old not in kept]

    @property
    def out_of_date(self) -> list[str]:
        return self.written + [new for _, new in self.renamed] + self.deleted

    @property
    def up_to_date(self) -> bool:
        return not self.out_of_date

    def lines(self) -> list[str]:
        """What `patchctl export` prints: what was dropped, then what was (or would be) written."""
        out = [f"dropped hunks on excluded path {d.path} (commit {d.commit_subject!r})" for d in self.dropped_hunks]
        out += [f"dropped commit {subject!r}: it only touches excluded paths" for subject in self.dropped_commits]
        out += [
            f"dropped commit {subject!r}: it changes nothing (its change is already in the base)"
            for subject in self.empty_commits
        ]
        if self.check_only:
            return out + [f"{self.series}: up to date ({len(self.unchanged)} patches)"]
        out += [f"wrote   {name}" for name in self.written]
        out += [f"renamed {old} -> {new}" for old, new in self.renamed]
        out += [f"deleted {name}" for name in self.deleted]
        out.append(
            f"{self.series}: {len(self.written)} written, {len(self.renamed)} renamed, {len(self.deleted)} deleted, "
            f"{len(self.unchanged)} unchanged; verified against {self.base[:12]}"
        )
        return out


class ExportOutOfDate(CheckFailed):
    def __init__(self, result: ExportResult):
        super().__init__(
            f"series {result.series} is out of date: {', '.join(result.out_of_date)} "
            f"(run `patchctl export {shlex.quote(result.series)}` to write them)"
        )
        self.result = result


@dataclass(frozen=True)
class GeneratedPatch:
    name: str
    data: bytes
    keep_existing: bool  # the file on disk already says the same: leave its bytes alone


def read_existing(config: Config, series_name: str, *, check: bool = False) -> list[PatchFile]:
    """The series on disk, failing closed on its directory before anything else happens."""
    return read_series(config.get_series(series_name), allow_empty_dir=not check)


def export(
    config: Config, series_name: str, from_dir: Path, *, base: str | None = None, check: bool = False
) -> ExportResult:
    """Regenerate SERIES from FROM_DIR's commits on top of BASE (default: the pin)."""
    series = config.get_series(series_name)
    upstream = config.get_upstream(series.upstream)
    read_existing(config, series_name, check=check)
    if not check:
        confined_path(config.root, series.dir)
    default = Path(from_dir).resolve() == worktree.applied_tree(config.root, series.name).resolve()
    tree = _work_tree(Path(from_dir), series.name, default)
    base_id = _resolve_base(tree, base or upstream.pin, series.name, default)
    planned, result = plan_export(series, tree, base_id, check=check)
    result.check_only = check
    if not planned and not series.allow_empty:
        raise CheckFailed(
            f"{series.where}: export would leave series {series.name} with no patch (no commit on top of "
            f"{base_id[:12]} in {tree} changes a non-excluded path); a series that checks nothing fails "
            f"(set allow_empty: true on series {series.name} if that is intended); nothing written"
        )
    if check:
        if result.out_of_date:
            raise ExportOutOfDate(result)
        return result
    try:
        verify_tree(series, tree, base_id, [PatchFile(series.dir / p.name, p.data) for p in planned])
    except CheckFailed as exc:
        raise CheckFailed(f"{exc}; nothing written") from None
    journal.commit(config.path, series_changes(series, planned, result.removed, result.list_update))
    return result


def plan_export(
    series: Series,
    tree: Path,
    base: str,
    *,
    check: bool = False,
    replayed: Mapping[str, tuple[str, bool]] | None = None,
) -> tuple[list[GeneratedPatch], ExportResult]:
    """The series as it should be on disk, and how that differs from what is there. Writing
    export may fill an existing empty directory; `--check` fails closed on one like every reader.

    REPLAYED names commits (by full id) that pin-sync's replay made from a patch file: commit ->
    (the file's sha256, whether a strict `git apply` of the file on the commit's parent gave the
    commit). Such a commit, matched to that very file, is not asked again what `_same_patch`
    would ask: the file is kept, or written anew in its style without formatting the commit
    twice. A wrong claim cannot write a wrong series: the series is applied strictly before
    anything is written (`verify_tree`)."""
    if series.form.canonical:
        return _plan_canonical(series, tree, base, check=check)
    result = ExportResult(series.name, base)
    existing, by_title, namer = _existing(series, check)
    style = patchstyle.series_style(existing)
    planned: list[GeneratedPatch] = []
    batch = Formatted(tree, base)
    # (index in planned, commit, style, dropped paths, the file it rewrites)
    restyled: list[tuple[int, str, patchstyle.PatchStyle, list[str], PatchFile | None]] = []
    commits = _commits(tree, base)
    replayed = replayed or {}
    if replayed:
        _want_formatted(series, batch, commits, by_title, replayed, style)
    for commit in commits:
        known = _known_file(series, batch, commit, by_title, replayed) if replayed else None
        if known is not None:
            old, applies = known
            by_title[old.title].pop(0)
            name = namer.name(old, old.title)
            if old.name != name:
                result.renamed.append((old.name, name))
            if applies:
                planned.append(GeneratedPatch(name, old.data, keep_existing=True))
                if old.name == name:
                    result.unchanged.append(name)
                continue
            own_style = patchstyle.detect(old).over(style)
            # Its bytes in patchctl's own style only where `_rewritten` reads them.
            own = own_style == patchstyle.PATCHCTL_STYLE or not plainform.is_mail(old)
            data = _format_commit(series, tree, commit, batch)[0] if own else b""
            restyled.append((len(planned), commit, own_style, [], old))
            planned.append(GeneratedPatch(name, data or b"", keep_existing=False))
            result.written.append(name)
            continue
        data, subject, dropped = _format_commit(series, tree, commit, batch)
        result.dropped_hunks += [DroppedHunk(subject, path) for path in dropped]
        if data is None:
            (result.dropped_commits if dropped else result.empty_commits).append(subject)
            continue
        fresh = PatchFile(series.dir / "0000-export.patch", data)
        candidates = by_title.get(fresh.title) or by_title.get(subject) or []
        old = candidates.pop(0) if candidates else None
        name = namer.name(old, subject)
        if old is not None and _same_patch(series, tree, commit, old, fresh, batch):
            planned.append(GeneratedPatch(name, old.data, keep_existing=True))
            (result.unchanged.append(name) if old.name == name else result.renamed.append((old.name, name)))
            continue
        own_style = patchstyle.detect(old).over(style) if old is not None else style
        if own_style != patchstyle.PATCHCTL_STYLE and not dropped and (old is None or plainform.is_mail(old)):
            batch.want(_style_args(own_style), commit)
        restyled.append((len(planned), commit, own_style, dropped, old))
        planned.append(GeneratedPatch(name, data, keep_existing=False))
        result.written.append(name)
        if old is not None and old.name != name:
            result.renamed.append((old.name, name))
    # Written in their series' style once every commit that needs it is known: one format-patch
    # for those alone, not for the whole range (where most patches are kept, most of its time).
    for index, commit, own_style, dropped, old in restyled:
        written = planned[index]
        planned[index] = GeneratedPatch(
            written.name, _rewritten(series, tree, commit, written.data, own_style, dropped, batch, old), False
        )
    return planned, _finish(series, existing, planned, result)


def _existing(series: Series, check: bool) -> tuple[list[PatchFile], dict[str, list[PatchFile]], Namer]:
    """The series on disk, its files by title (a commit takes the next file of its subject), and
    the namer that keeps their names."""
    existing = read_series(series, allow_empty_dir=not check)
    by_title: dict[str, list[PatchFile]] = {}
    for patch in existing:
        by_title.setdefault(patch.title, []).append(patch)
    return existing, by_title, Namer(series, existing)


def _finish(
    series: Series, existing: list[PatchFile], planned: list[GeneratedPatch], result: ExportResult
) -> ExportResult:
    """RESULT with what is deleted and the list's edit, once PLANNED is known."""
    planned_names = {p.name for p in planned}
    rename_sources = {old for old, _ in result.renamed}
    result.deleted = [p.name for p in existing if p.name not in planned_names and p.name not in rename_sources]
    result.list_update = list_update(series, planned, result.renamed)
    if result.list_update is not None:
        result.written.append(_list_shown(series, result.list_update.path))
    return result


def _list_shown(series: Series, path: Path) -> str:
    """The list file as export names it: its name in the series directory, else its path."""
    if path.parent == series.dir:
        return path.name
    return worktree.display(series.root or series.dir.parent, path)


def _plan_canonical(
    series: Series, tree: Path, base: str, *, check: bool = False
) -> tuple[list[GeneratedPatch], ExportResult]:
    """`plan_export` under a canonical `form:`: each commit as the downstream's tool writes it,
    an existing file kept only when it holds exactly those bytes."""
    result = ExportResult(series.name, base)
    existing, by_title, namer = _existing(series, check)
    planned: list[GeneratedPatch] = []
    with canonical.formatter(series) as form:
        batch = Formatted(tree, base, form.config)
        for commit in _commits(tree, base):
            subject, dropped, empty = _subject_and_dropped(series, tree, commit, batch)
            result.dropped_hunks += [DroppedHunk(subject, path) for path in dropped]
            if empty:
                (result.dropped_commits if dropped else result.empty_commits).append(subject)
                continue
            raw = (batch.patch(commit, list(form.args)) if not dropped else None) or format_patch(
                tree, commit, dropped, list(form.args), form.config
            )
            data = form.finish(raw)
            candidates = by_title.get(subject) or by_title.get(PatchFile(Path("x.patch"), data).title) or []
            old = candidates.pop(0) if candidates else None
            name = namer.name(old, subject)
            same = old is not None and old.data == data
            planned.append(GeneratedPatch(name, data, keep_existing=same))
            if old is not None and old.name != name:
                result.renamed.append((old.name, name))
            elif same:
                result.unchanged.append(name)
            if not same:
                result.written.append(name)
    return planned, _finish(series, existing, planned, result)


def _known_file(
    series: Series,
    batch: Formatted,
    commit: str,
    by_title: dict[str, list[PatchFile]],
    replayed: Mapping[str, tuple[str, bool]],
) -> tuple[PatchFile, bool] | None:
    """The existing file COMMIT is matched to, known from REPLAYED without formatting it, and
    whether it applies strictly on the commit's parent: the file its subject matches next (as
    the formatted commit's title would), when that is the file the commit was made from and
    the commit changes no excluded path. None: format the commit and ask."""
    listed = batch.listing(commit)
    if listed is None or commit not in replayed:
        return None
    subject, paths = listed
    digest, applies = replayed[commit]
    candidates = by_title.get(subject.strip())
    if not candidates or candidates[0].digest != digest or subject.startswith("[PATCH"):
        return None  # ("[PATCH" is what a mail's title loses: the formatted title would differ)
    if not paths or any(is_excluded(p, series.exclude) for p in paths):
        return None
    return candidates[0], applies


def _want_formatted(
    series: Series,
    batch: Formatted,
    commits: list[str],
    by_title: dict[str, list[PatchFile]],
    replayed: Mapping[str, tuple[str, bool]],
    style: patchstyle.PatchStyle,
) -> None:
    """Ask BATCH to format only what `plan_export` will read: nothing of a commit that keeps
    its known file, a known rewritten commit in its file's style alone, any other commit as
    patchctl formats it. The commits are walked as `plan_export` walks them (a commit takes
    the next file of its subject)."""
    queues = {title: list(files) for title, files in by_title.items()}
    for commit in commits:
        known = _known_file(series, batch, commit, queues, replayed)
        if known is None:
            batch.want(FORMAT_PATCH_ARGS, commit)
        elif not known[1]:
            own_style = patchstyle.detect(known[0]).over(style)
            own = own_style == patchstyle.PATCHCTL_STYLE or not plainform.is_mail(known[0])
            batch.want(FORMAT_PATCH_ARGS if own else _style_args(own_style), commit)
        listed = batch.listing(commit)
        if listed is not None and queues.get(listed[0].strip()):
            queues[listed[0].strip()].pop(0)


def _same_patch(
    series: Series, tree: Path, commit: str, old: PatchFile, fresh: PatchFile, batch: Formatted | None = None
) -> bool:
    """Whether OLD says what the commit says: the same message, and applied strictly to the
    commit's parent it gives the commit's tree on every non-excluded path. The message of a
    file that is not a mail is compared as the commit holds it: its preamble may hold what
    reads as a mail's header once format-patch put it in a mail (an embedded mail's From line)."""
    if batch is not None and not plainform.is_mail(old):
        if _message_changed(old, commit, batch):
            return False
    elif (old.title, old.message.description) != (fresh.title, fresh.message.description):
        return False
    try:
        if hunk_fingerprint(old) == hunk_fingerprint(fresh):
            return True  # the same hunks, maybe shifted: no need to ask git
    except MalformedPatch:
        return False
    if _surely_does_not_apply(tree, f"{commit}^", old):
        return False  # what the strict apply below would find, from one git call instead of three
    with IndexBuilder(tree, f"{commit}^") as builder:
        if not builder.apply(old, commit=False, explain=False).ok:
            return False
        differing = git.run(
            ["diff-tree", "-r", "-z", "--name-only", "--no-renames", builder.tree(), f"{commit}^{{tree}}"], tree
        ).stdout
    return all(is_excluded(p, series.exclude) for p in differing.split("\0") if p)


def _surely_does_not_apply(tree: Path, rev: str, patch: PatchFile) -> bool:
    """Whether a strict `git apply` of PATCH at REV surely fails, read from REV's files in one
    `git cat-file --batch`: the first hunk of a file the patch changes in place (named once, no
    rename, no binary) is applied to the file as REV has it, so when its preimage (context and
    removed lines, which git matches exactly) stands nowhere in that file, git cannot apply it.
    False says only "ask git": later hunks apply to what earlier ones made, so they tell nothing."""
    paths = [diff.path for diff in patch.files]
    firsts = {
        diff.path: diff.hunks[0]
        for diff in patch.files
        if diff.hunks
        and not (diff.is_binary or diff.is_added or diff.is_removed)
        and diff.source_path in (None, diff.path)
        and paths.count(diff.path) == 1
        and "\n" not in diff.path
    }
    if not firsts:
        return False
    names = list(firsts)
    out = git.run(
        ["cat-file", "--batch"], tree, input="".join(f"{rev}:{name}\n" for name in names), check=False, binary=True
    )
    if not out.ok:
        return False
    data, position = out.stdout, 0
    for name in names:
        header_end = data.find(b"\n", position)
        header = data[position:header_end].split()
        if header_end < 0 or len(header) != 3 or header[1] != b"blob":
            return False  # missing, or not a file: git says what
        size = int(header[2])
        content = data[header_end + 1 : header_end + 1 + size].decode("utf-8", errors="surrogateescape")
        position = header_end + 1 + size + 1
        # Lines as the patch's are read (CR before LF dropped on both sides: that can only make more match).
        lines = [line.removesuffix("\r") for line in content.split("\n")]
        # (an empty body line is the context line of an empty line, as git apply reads it: a
        # patch whose trailing whitespace an editor stripped, snappy-feedstock's among them)
        preimage = [line[1:].removesuffix("\r") for line in firsts[name].body if line[:1] in (" ", "-", "", "\r")]
        if preimage and not _holds_run(lines, preimage):
            return True
    return False


def _holds_run(lines: list[str], run: list[str]) -> bool:
    """Whether RUN stands in LINES as consecutive lines."""
    first, width = run[0], len(run)
    return any(lines[i : i + width] == run for i in range(len(lines) - width + 1) if lines[i] == first)


def verify(series: Series, tree: Path, base: str, patches: list[PatchFile]) -> tuple[list[PatchOutcome], str]:
    """The new series, applied strictly at BASE, must reproduce HEAD's tracked files. Returns
    that application (every outcome, the last commit), in TREE's object store."""
    outcomes, head = apply_series_to_index(tree, base, patches)
    failed = next((o for o in outcomes if not o.ok), None)
    if failed is not None:
        raise CheckFailed(f"the regenerated series does not apply to {base[:12]}: {failed.describe()}")
    _same_files(series, tree, head)
    return outcomes, head


def verify_tree(series: Series, tree: Path, base: str, patches: list[PatchFile]) -> None:
    """`verify`'s check, when its commits are not needed: the series applied strictly at BASE
    in one `git apply` where it can (`applier.series_tree_at_once`), else one patch at a time
    (`verify` itself, which names the patch that fails)."""
    produced = series_tree_at_once(tree, base, patches)
    if produced is None:
        verify(series, tree, base, patches)
        return
    if not series.exclude and git.run(["rev-parse", "HEAD^{tree}"], tree).stdout.strip() == produced:
        return
    _same_files(series, tree, produced)


def _same_files(series: Series, tree: Path, produced: str) -> None:
    """HEAD's files in TREE and PRODUCED's (a commit or a tree) agree on every non-excluded path."""
    # Every path whose mode or blob differs, added and removed ones too: one diff-tree, not two listings.
    out = git.run(["diff-tree", "-r", "-z", "--name-only", "--no-renames", "HEAD", produced], tree).stdout
    differing = sorted(p for p in out.split("\0") if p and not is_excluded(p, series.exclude))
    if differing:
        raise CheckFailed(f"the regenerated series does not reproduce the work tree ({', '.join(differing[:5])})")


def series_changes(
    series: Series, planned: list[GeneratedPatch], removed: list[str], list_update: ListUpdate | None = None
) -> list[FileChange]:
    """The writes that make the series' directory hold PLANNED: changed patches, its list
    file, removed patches; files already holding the right bytes (read through no link) are left out."""
    directory = series.dir
    wanted = [(directory / patch.name, patch.data) for patch in planned]
    where = Root(series.root if series.root is not None else directory.parent)  # no link followed
    changes = [FileChange(path, data) for path, data in wanted if where.read_bytes(path, MAX_PATCH_BYTES) != data]
    if list_update is not None:
        changes.append(list_update.change(series))
    return changes + [FileChange(directory / name, None) for name in removed]


def with_list_updates(changes: list[FileChange], updates: list[tuple[Series, ListUpdate]]) -> list[FileChange]:
    """CHANGES with each series' list edit: made on the bytes a pending change of the same
    file writes (a pin-sync moving a recipe's version in the same meta.yaml), else on the file's."""
    out = list(changes)
    for series, update in updates:
        at = next((i for i, change in enumerate(out) if Path(change.path) == update.path), None)
        pending = out[at].new if at is not None else None
        if at is not None and pending is not None:
            out[at] = update.change(series, pending)
        else:
            out.append(update.change(series))
    return out


def list_update(series: Series, planned: list[GeneratedPatch], renamed: list[tuple[str, str]]) -> ListUpdate | None:
    """The edit that makes the series' own list name PLANNED, or None (no list file, or it
    names them already)."""
    listed = patchlist.read(series)
    names = [patch.name for patch in planned]
    if listed is None or listed.names == names:
        return None
    return ListUpdate(listed.path, tuple(names), tuple(renamed))


def _work_tree(path: Path, series: str, default: bool) -> Path:
    """FROM_DIR checked: the top of a git work tree with no uncommitted change (DEFAULT: it is
    the series' applied tree, which messages do not call --from)."""
    path = path.resolve()
    if not path.is_dir():
        raise UsageError(f"--from {path}: no such directory")
    top = git.run(["rev-parse", "--show-toplevel"], path, check=False)
    if not top.ok or Path(top.stdout.strip()).resolve() != path:
        raise UsageError(f"--from {path}: not the top of a git work tree")
    if not is_clean(path):
        again = ["patchctl", "export", series] + ([] if default else ["--from", str(path)])
        discard = f"; or discard them: `{shlex.join(['patchctl', 'apply', series, '--force'])}`" if default else ""
        raise UsageError(
            f"{'' if default else '--from '}{path}: uncommitted changes to tracked files, which export does not read: "
            f"commit them there first (`git -C {shlex.quote(str(path))} commit -a`), then `{shlex.join(again)}`"
            f"{discard}"
        )
    return path


def _resolve_base(tree: Path, base: str, series: str = "", default: bool = False) -> str:
    found = git.run(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{base}^{{commit}}"], tree, check=False)
    if not found.ok:
        raise UsageError(f"base {base[:12]} is not in the history of {tree}")
    base_id = found.stdout.strip()
    if not git.run(["merge-base", "--is-ancestor", base_id, "HEAD"], tree, check=False).ok:
        if default:  # apply knows what the tree was applied at, and says how to move its commits
            raise UsageError(
                f"HEAD of {tree} is not on top of {base_id[:12]}: the tree was applied at another pin; run "
                f"`{shlex.join(['patchctl', 'apply', series])}`, which says how to move your commits onto the pin"
            )
        raise UsageError(f"HEAD of {tree} is not on top of {base_id[:12]}; rebase it onto the pin first")
    return base_id


def _commits(tree: Path, base: str) -> list[str]:
    merges = git.run(["rev-list", "--merges", f"{base}..HEAD"], tree).stdout.split()
    if merges:
        raise UsageError(f"merge commit {merges[0][:12]} on top of the base: export needs a linear history")
    return git.run(["rev-list", "--reverse", "--topo-order", f"{base}..HEAD"], tree).stdout.split()


def _rewritten(
    series: Series,
    tree: Path,
    commit: str,
    data: bytes,
    style: patchstyle.PatchStyle,
    dropped: list[str],
    batch: Formatted,
    old: PatchFile | None,
) -> bytes:
    """COMMIT's patch (DATA, in patchctl's own conventions, without the DROPPED paths) as the
    file it rewrites (OLD) is written: in its own form when OLD is not a mail, else in STYLE."""
    if old is None or plainform.is_mail(old):
        return _in_style(series, tree, commit, data, style, dropped, batch)
    message = batch.message(commit) if _message_changed(old, commit, batch) else None
    # The diff alone, as format-patch writes it (full index lines, no renames): not cut out of
    # the mail, whose message may hold a line that reads as a diff's first.
    diff = git.run(
        [*FORMAT_PATCH_CONFIG, "diff-tree", "-p", "--full-index", "--no-renames", "--binary", "--no-color"]
        + [f"{commit}^", commit, *pathspec_without(dropped)],
        tree,
    ).stdout
    return plainform.render(old, diff, message) or plainform.with_preamble(old, diff, message)


def _message_changed(old: PatchFile, commit: str, batch: Formatted) -> bool:
    """Whether COMMIT's message is not the one OLD's file gives (as `apply` commits it)."""
    message = batch.message(commit)
    return message is None or message.rstrip("\n") != commit_message(old).rstrip("\n")


def _in_style(
    series: Series,
    tree: Path,
    commit: str,
    data: bytes,
    style: patchstyle.PatchStyle,
    dropped: list[str],
    batch: Formatted | None = None,
) -> bytes:
    """COMMIT's patch (DATA, in patchctl's own conventions, without the DROPPED paths) written in STYLE."""
    if style == patchstyle.PATCHCTL_STYLE:
        return data
    args = _style_args(style)
    styled = (batch.patch(commit, args) if batch is not None and not dropped else None) or format_patch(
        tree, commit, dropped, args
    )
    return patchstyle.abbreviate_index_lines(styled, style.index_length or patchstyle.FULL_INDEX)


def _style_args(style: patchstyle.PatchStyle) -> list[str]:
    """The format-patch arguments of a patch in STYLE (its index lines are shortened afterwards)."""
    own = {"--zero-commit", "--no-signature", "--no-stat", "--subject-prefix=PATCH"}
    return [arg for arg in FORMAT_PATCH_ARGS if arg not in own] + patchstyle.format_patch_args(style)


def _format_commit(
    series: Series, tree: Path, commit: str, batch: Formatted | None = None
) -> tuple[bytes | None, str, list[str]]:
    """COMMIT as a patch without its excluded paths: (bytes or None when nothing is left,
    subject, dropped paths)."""
    subject, dropped, empty = _subject_and_dropped(series, tree, commit, batch)
    if empty:
        return None, subject, dropped
    data = batch.patch(commit, FORMAT_PATCH_ARGS) if batch is not None and not dropped else None
    return data or format_patch(tree, commit, dropped, FORMAT_PATCH_ARGS), subject, dropped


def _subject_and_dropped(
    series: Series, tree: Path, commit: str, batch: Formatted | None
) -> tuple[str, list[str], bool]:
    """COMMIT's subject, the excluded paths it changes, and whether nothing else is left."""
    listed = batch.listing(commit) if batch is not None else None
    if listed is None:
        # Its subject and the paths it changes against its parent (never a merge: see _commits), in one call.
        out = git.run(["log", "-1", "-z", "--format=%s", "--name-only", "--no-renames", commit], tree).stdout
        subject, _, changed = out.partition("\0")
        paths = [p for p in changed.removeprefix("\n").split("\0") if p]
    else:
        subject, paths = listed
    dropped = sorted(p for p in paths if is_excluded(p, series.exclude))
    return subject.strip(), dropped, len(dropped) == len(paths)  # nothing left: only excluded paths, or empty
