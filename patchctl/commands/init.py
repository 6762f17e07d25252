"""`patchctl init`: start a matrix.yaml, or adopt an existing patch layout (`patchctl.adopt`)."""

from __future__ import annotations

from pathlib import Path

import click

from .. import templates_dir
from ..adopt import CONFIG_NAME, LAYOUTS, PRE_COMMIT_NAME
from ..app import AppContext, pass_app
from ..errors import UsageError
from ..output.escape import log_line


@click.command("init")
@click.argument("directory", required=False, metavar="[DIR]")
@click.option(
    "--from",
    "layout",
    type=click.Choice(LAYOUTS),
    help="Adopt an existing layout without moving a file: makefile-sync, quilt [DIR], git-dir DIR, "
    "electron [DIR], openwrt [DIR], conda-forge [DIR], gclient DIR.",
)
@click.option(
    "--file",
    "file",
    metavar="PATH",
    help="--from makefile-sync: the Makefile (default Makefile.sync); --from gclient: the DEPS file (default DEPS).",
)
@click.option("--upstream-url", "upstream_url", metavar="URL", help="The upstream URL (or a local path), if not found.")
@click.option("--pin", metavar="SHA", help="The full commit id the series applies to, if not found or to replace it.")
@click.option("--name", metavar="NAME", help="The upstream's name (default: from its URL or the package).")
@click.option(
    "--action",
    metavar="OWNER/REPO@COMMIT",
    help="The patchctl action the workflows call, at a full commit id github.com has "
    "(default: this patchctl's commit where github.com is known to have it).",
)
@click.option("--force", is_flag=True, help="Overwrite matrix.yaml and templates/ if they exist.")
@pass_app
def init_cmd(
    app: AppContext,
    directory: str | None,
    layout: str | None,
    file: str | None,
    upstream_url: str | None,
    pin: str | None,
    name: str | None,
    action: str | None,
    force: bool,
) -> None:
    """Write matrix.yaml, templates/ and a pre-commit config, or adopt an existing layout.

    \b
    A new repository gets a commented matrix.yaml (with --upstream-url and --pin: an upstream
    and an empty series), patchctl's templates under templates/, and .pre-commit-config.yaml
    (printed instead when one exists). --from reads an existing layout, moving no file:
      makefile-sync  UPSTREAM=, FETCH_HEAD=, PATCHES=$(wildcard DIR/*.patch) and the rsync
                     copies with their .rsync-filter rules (--file PATH, default Makefile.sync)
      quilt [DIR]    DIR/series (default debian/patches); needs --upstream-url and --pin
      git-dir DIR    format-patch files in DIR; the pin from a Makefile variable or a version file
      electron [DIR] an Electron-style patch directory (DIR/.patches, patches/config.json);
                     needs --upstream-url and --pin
      openwrt [DIR]  an OpenWrt package: DIR/Makefile (default .) and DIR/patches; the upstream
                     and its tag from PKG_SOURCE_URL, PKG_SOURCE_VERSION and PKG_VERSION
      conda-forge [DIR]  a feedstock's recipe (default recipe/): meta.yaml or recipe.yaml, the
                     upstream and its tag from `source:`, the patches it lists
      gclient DIR    a patch directory whose upstream a gclient DEPS fetches (--file PATH)
    The downstream's own patch list (quilt series, .patches, a recipe's patches:) stays the
    one list: init writes none beside it, and sets naming, list and form from the files.
    Tags and abbreviated commits are resolved by asking the upstream, and the branch is the
    one its HEAD names. An OpenWrt Makefile, a recipe or a DEPS becomes a `manifests:` entry:
    pin-sync moves its version and checksums with the pin.
    It prints one line per thing found and per thing it could not map, and says which
    patchctl action the workflows call (`chose:`, or a warning when github.com is not known to
    have this patchctl's commit: then name one with --action). matrix.yaml gets an apply-only
    weekly canary. Existing files are never overwritten without --force; everything is
    written together or not at all.

    \b
    Examples:
      patchctl init --upstream-url https://github.com/ggml-org/llama.cpp --pin <sha>
      patchctl init --from makefile-sync
      patchctl init --from quilt --upstream-url ../pkg-orig --pin <sha>
      patchctl init --from git-dir patches/llama.cpp
      patchctl init --from openwrt admin/btop
      patchctl init --from conda-forge
      patchctl init --from makefile-sync --action patchctl/patchctl@<sha>
      patchctl init --from electron patches/nan --upstream-url ../nan --pin <sha>
    """
    if directory is not None and layout not in ("quilt", "git-dir", "electron", "openwrt", "conda-forge", "gclient"):
        raise UsageError("DIR is for --from quilt, git-dir, electron, openwrt, conda-forge or gclient")
    if file is not None and layout not in ("makefile-sync", "gclient"):
        raise UsageError("--file is for --from makefile-sync or --from gclient")
    from ..adopt import gitignore
    from ..adopt.plan import plan
    from ..matrix.action_source import choose_action, home_repository, installed_clone
    from ..state import journal, statehome

    root = Path(app.directory or ".").resolve()
    chosen = choose_action(action, installed_clone())
    top, prefix = statehome.work_tree(root)
    result = plan(
        root,
        templates_dir(),
        layout,
        path=file if layout == "makefile-sync" else directory,
        file=file,
        upstream_url=upstream_url,
        pin=pin,
        name=name,
        action=chosen.action,
        home=home_repository(),
        prefix=prefix,
    )
    existing = [p for p in result.files if (root / p).exists() or (root / p).is_symlink()]
    if existing and not force:
        raise UsageError(f"refusing to overwrite {', '.join(existing)} (use --force)")
    # The journal refuses a link or `.git` on the way to any of them before its first byte.
    ignore = gitignore.patchctl_entry(top)  # a .gitignore it cannot write stops init before the first byte
    journal.commit(root / CONFIG_NAME, [journal.FileChange(root / p, data) for p, data in result.files.items()])
    for line in result.found:
        click.echo(log_line(f"found: {line}"))
    for line in result.unmapped:
        click.echo(log_line(f"not mapped: {line}"))
    for line in (*result.chosen, *(() if chosen.warning else (chosen.said,))):
        click.echo(log_line(f"chose: {line}"))
    if chosen.warning:
        click.echo(log_line(f"patchctl: warning: {chosen.said}"), err=True)
    for path in result.files:
        click.echo(log_line(f"wrote {path}"))
    added, warning = gitignore.settle(top, prefix, list(result.files), str(app.directory or "."), ignore)
    if added:
        click.echo(log_line(added))
    if warning:
        click.echo(log_line(f"patchctl: warning: {warning}"), err=True)
    if prefix:
        click.echo(f"pre-commit reads {top / PRE_COMMIT_NAME} only: add these hooks to it:")
        click.echo(result.pre_commit, nl=False)
    elif not result.pre_commit_written:
        click.echo(f"{PRE_COMMIT_NAME} exists; add these hooks to it:")
        click.echo(result.pre_commit, nl=False)
