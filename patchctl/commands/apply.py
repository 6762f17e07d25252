"""`patchctl apply`: check out an upstream rev and apply series to it (see `patchctl.series.apply_job`)."""

from __future__ import annotations

from pathlib import Path

import click

from ..app import AppContext, complete_series, echo_lines, emit_json, pass_app


@click.command("apply")
@click.argument("series", nargs=-1, shell_complete=complete_series)
@click.option("--rev", help="Upstream revision to apply to (default: the pin in matrix.yaml).")
@click.option(
    "--into", type=click.Path(file_okay=False, path_type=Path), help="Target tree (default: .patchctl/trees/SERIES)."
)
@click.option("--force", is_flag=True, help="Replace a target that has local changes or was not made by patchctl.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_app
def apply_cmd(
    app: AppContext, series: tuple[str, ...], rev: str | None, into: Path | None, force: bool, as_json: bool
) -> None:
    """Check out the upstream at its pin and apply SERIES (default: all) strictly.

    \b
    Every patch applies with no fuzz (line offsets are allowed and reported) or the target
    tree is left exactly as it was. A failure names the patch, the file and the hunk, and
    its cause: file missing, context drift, already applied, malformed, unsafe path.
    Re-running on a tree that is already patched is a no-op; on a clean tree made by an
    earlier apply (another rev or series) only the files that differ are rewritten, and
    untracked files such as a build directory stay. The tree is a git worktree with one
    commit per patch on top of the upstream rev: edit, commit, then `export`.

    \b
    Examples:
      patchctl apply                                  # every series, at its pin
      patchctl apply llama.cpp --rev v0.3.33 --into /tmp/llama
      patchctl apply --json > apply.json
    """
    from ..series import apply_job

    app.lock_project()
    try:
        results = apply_job.apply(app.config, app.store, series, rev=rev, into=app.path(into), force=force)
    except apply_job.ApplyFailed as failed:
        if as_json:
            emit_json({"ok": False, "results": [failed.result]})
        raise
    if as_json:
        emit_json({"ok": True, "results": results})
        return
    for result in results:
        echo_lines(result.lines(app.workdir))
