"""`patchctl export`: regenerate a series from a work tree (see `patchctl.series.exporter`)."""

from __future__ import annotations

from pathlib import Path

import click

from ..app import AppContext, complete_series, echo_lines, emit_json, pass_app
from ..errors import UsageError
from ..output.escape import shell_word

# `vendor.DEFAULT_MESSAGE`, written out so that --help imports no domain module
# (tests/patchctl/test_startup.py checks that the two agree).
VENDOR_DEFAULT_MESSAGE = "Changes made in the vendored copy"


@click.command("export")
@click.argument("series", shell_complete=complete_series)
@click.option(
    "--from",
    "from_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Work tree whose commits on top of the pin become the series (default: .patchctl/trees/SERIES).",
)
@click.option(
    "--from-vendor",
    is_flag=True,
    help="Take the edits made in the series' vendored copy (matrix.yaml `vendor:`) back as a new patch.",
)
@click.option(
    "-m",
    "--message",
    "messages",
    multiple=True,
    help=(
        "With --from-vendor: the new patch's commit message, its first line naming the patch; given again, "
        "each is one more paragraph, as with `git commit -m` (the description lint wants). "
        f"Default: {VENDOR_DEFAULT_MESSAGE!r}."
    ),
)
@click.option("--base", help="Commit the series starts from (default: the upstream's pin).")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 listing the patches that are out of date.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_app
def export_cmd(
    app: AppContext,
    series: str,
    from_dir: Path | None,
    from_vendor: bool,
    messages: tuple[str, ...],
    base: str | None,
    check: bool,
    as_json: bool,
) -> None:
    """Regenerate SERIES from the commits on top of the pin in a work tree.

    \b
    One NNNN-slug.patch per commit, byte-for-byte deterministic whatever your git config
    says (zero commit id, no version signature, full index lines, myers, no renames).
    Existing patches keep their names and are only rewritten when their hunks changed;
    patches of commits that are gone are deleted; hunks on excluded paths are dropped and
    reported. Before writing, the new series must reproduce the work tree exactly.

    \b
    Examples:
      patchctl apply llama.cpp                    # tree in .patchctl/trees/llama.cpp
      (cd .patchctl/trees/llama.cpp && git commit -am "Fix slot finder" -m "Why it is needed.")
      patchctl export llama.cpp
      patchctl export llama.cpp --check           # in CI: exit 1 when patches/ is stale
      patchctl export llama --from-vendor -m "Fix slot finder" -m "Why."   # edits in the vendored copy
    """
    if from_vendor:  # (the project lock is taken below: export writes)
        if from_dir is not None or check or base is not None:
            raise UsageError(
                "--from-vendor takes the edits from the vendored copy: it goes without --from, --base, --check"
            )
    from ..series import apply_job, exporter
    from ..state import worktree

    # A fresh clone has no applied tree: --check applies the series first (what `apply` makes),
    # so the check (and its pre-commit hook) works anywhere; plain export needs your commits.
    applied = worktree.applied_tree(app.root, series)
    fresh = from_dir is None and not applied.exists()
    # A tree that holds no work of the user's is re-applied first (a no-op when it is current):
    # after a pin-sync or a pull it is pin + series again, so the check reads what is on disk.
    # (With --base the tree was applied at that rev on purpose: it is taken as it is.)
    untouched = (
        from_dir is None
        and base is None
        and not from_vendor
        and not fresh
        and apply_job.holds_no_work(app.config, app.store, series, applied)
    )
    if not check or fresh or untouched:
        app.lock_project()
    config = app.config
    if from_vendor:
        _take_back_vendored_edits(app, series, "\n\n".join(messages) if messages else VENDOR_DEFAULT_MESSAGE)
        fresh = False
    source = app.path(from_dir) or worktree.applied_tree(config.root, config.get_series(series).name)
    if fresh and not source.exists():
        exporter.read_existing(config, series, check=check)  # a misspelled dir: name its line first
        if not check:
            raise UsageError(
                f"no applied tree for {series} at {worktree.display(config.root, source)}: run "
                f"`patchctl apply {shell_word(series)}`, commit your changes in it, then export"
            )
        click.echo(f"patchctl: no applied tree for {series} yet: applying the series first", err=True)
        apply_job.apply(config, app.store, (series,))
    elif from_dir is None and base is None and not untouched and not from_vendor:
        apply_job.fetch_pin(config, app.store, series)  # a pin moved by a pull: the tree must see it to compare
    if untouched:
        (refreshed,) = apply_job.apply(config, app.store, (series,))
        if refreshed.state == "applied":
            click.echo(
                f"patchctl: {worktree.display(config.root, source)} held no work of yours and was not pin + series: "
                f"re-applied at {refreshed.rev[:12]} first",
                err=True,
            )
    try:
        result = exporter.export(config, series, source, base=base, check=check)
    except exporter.ExportOutOfDate as stale:
        if as_json:
            emit_json(stale.result)
        raise
    if not check and not from_vendor:
        # The tree's commits are the series now: its marker says so (a pin-sync may carry them next).
        apply_job.record_export(config, series, source, result.base)
    if from_vendor:
        # The tree's new commit is in the series now: re-apply it so that the tree is pin + series
        # again (a marker `apply`, `gate` and the next --from-vendor trust).
        apply_job.apply(config, app.store, (series,), force=True)
    if as_json:
        emit_json(result)
        return
    echo_lines(result.lines())


def _take_back_vendored_edits(app: AppContext, name: str, message: str) -> None:
    """Commit the vendored copy's edits in the applied tree (applied first, and refused when it
    holds work of its own), so that the export that follows turns them into a patch."""
    from ..loop import vendor
    from ..series import apply_job
    from ..state import worktree

    config = app.config
    series = vendor.vendored_series(config, (name,))[0]
    if not message.strip():
        raise UsageError("--message is empty: the new patch needs a subject")
    (result,) = apply_job.apply(config, app.store, (name,))
    changed = vendor.take_back(config, series, result.tree, message)
    click.echo(
        f"patchctl: {len(changed)} file(s) edited in the vendored copy, committed in "
        f"{worktree.display(config.root, result.tree)}",
        err=True,
    )
