"""`patchctl gate`: run the gates of a series on its applied tree (see `patchctl.loop.gates`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..app import AppContext, complete_series, echo_lines, emit_json, pass_app
from ..errors import UsageError

if TYPE_CHECKING:
    from ..loop.gates import GateResult


@click.command("gate")
@click.argument("series", nargs=-1, shell_complete=complete_series)
@click.option(
    "--tree",
    type=click.Path(file_okay=False, path_type=Path),
    help="Applied tree to gate (default: .patchctl/trees/SERIES; one SERIES only).",
)
@click.option(
    "--update-baseline", is_flag=True, help="Record changed gate output digests in matrix.yaml instead of failing."
)
@click.option(
    "--skip-slow",
    is_flag=True,
    help="Leave out the gates marked `slow: true` (pull-request CI); each is listed as SKIP.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@pass_app
def gate_cmd(
    app: AppContext, series: tuple[str, ...], tree: Path | None, update_baseline: bool, skip_slow: bool, as_json: bool
) -> None:
    """Run the gates matrix.yaml declares for SERIES (default: every series with gates).

    \b
    Gates run in order, each a shell command in the series' applied tree under its
    timeout; the first failure stops the run (exit 1) and names the gate, the failing case
    and the log. A gate with a baseline also checks the digest of what it produced. For
    this repository's llama.cpp series the gates regenerate the engine's conformance
    vectors, compile the C++ port with the system compiler and replay every vector.

    \b
    Examples:
      patchctl apply && patchctl gate
      patchctl gate llama.cpp --json
      patchctl gate --skip-slow                     # on a pull request: the cheap gates only
      patchctl gate llama.cpp --update-baseline     # after an intended engine change
    """
    from ..loop import gates
    from ..series import apply_job

    app.lock_project()
    names = list(series) or [s.name for s in app.config.series.values() if s.gates]
    if not names:
        raise UsageError("matrix.yaml declares no gates")
    if tree is not None and len(names) != 1:
        raise UsageError("--tree needs exactly one SERIES")
    for name in names:

        def pin_and_series(applied: Path, name: str = name) -> None:
            apply_job.refuse_stale(app.config, app.store, name, applied, given=tree is not None)

        try:
            results = gates.run_gates(
                app.config,
                name,
                app.path(tree),
                update_baseline=update_baseline,
                skip_slow=skip_slow,
                check_current=pin_and_series,
            )
        except gates.GatesFailed as failed:
            _print_gates(failed.results, as_json, name)
            raise
        _print_gates(results, as_json, name)


def _print_gates(results: list[GateResult], as_json: bool, series: str) -> None:
    if as_json:
        emit_json({"series": series, "ok": all(r.ok for r in results), "gates": results})
        return
    for result in results:
        echo_lines(result.lines())
