"""`patchctl vendor`: write or check the vendored copies of the patched tree (see `patchctl.loop.vendor`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from ..app import AppContext, complete_series, echo_lines, emit_json, pass_app

if TYPE_CHECKING:
    from ..loop.vendor import VendorResult


@click.command("vendor")
@click.argument("series", nargs=-1, shell_complete=complete_series)
@click.option("--check", is_flag=True, help="Write nothing; exit 1 naming each vendored file that differs.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_app
def vendor_cmd(app: AppContext, series: tuple[str, ...], check: bool, as_json: bool) -> None:
    """Write the vendored copies of SERIES (default: every series with `vendor:`) from pin + series.

    \b
    A series' `vendor:` entries in matrix.yaml name the directories of the patched tree (the
    upstream at its pin with the series applied) that this repository carries, and where:
    `from` (upstream directory), `to` (repository directory), `include`/`exclude` globs on
    what is copied and `protect` globs on the project's own files in `to`, which are never
    written nor deleted. Within `to` the copy owns every path it selects: files that differ
    are rewritten, files pin + series no longer has are deleted, all together or not at all.
    Nothing else in `to` is touched.

    \b
    --check writes nothing and exits 1 with one line per file that differs (the CI check and
    the `patchctl-vendor-check` pre-commit hook). To turn edits made in the vendored copy
    into a patch, run `patchctl export SERIES --from-vendor`.

    \b
    Examples:
      patchctl vendor                    # rewrite every vendored copy
      patchctl vendor llama --check      # exit 1 when llama/llama.cpp/ is stale
    """
    from ..loop import vendor

    if not check:
        app.lock_project()
    try:
        result = vendor.run(app.config, app.store, series, check=check)
    except vendor.VendorOutOfDate as stale:
        if as_json:
            emit_json({"ok": False, **vars(stale.result)})
        else:
            _annotate(stale.result, app)
            echo_lines(stale.result.lines())
        raise
    if as_json:
        emit_json({"ok": True, **vars(result)})
        return
    echo_lines(result.lines())


def _annotate(result: VendorResult, app: AppContext) -> None:
    """Under GitHub Actions, one ::error annotation per differing file, on that file."""
    from ..output.findings import Finding, under_github_actions

    if not under_github_actions():
        return
    for copy in result.copies:
        for difference in copy.differences:
            finding = Finding(difference.path, 1, "vendor", difference.line().partition(": ")[2])
            click.echo(finding.annotation((app.config.root,)))
