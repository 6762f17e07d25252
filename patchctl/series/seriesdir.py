"""Listing and reading a series' directory, as untrusted input, and failing closed.

A series directory comes with the repository: anyone who can open a pull request can put
anything there. So everything is read through `patchctl.confined.Root`:

* only regular files are read as patches: a FIFO, a device, a socket or a directory named
  like a patch is refused in one line (opening a FIFO would block forever, reading
  `/dev/zero` would never end);
* no link is followed, neither on the way to the directory nor as an entry: a link is
  refused in one line naming where it points, before anything is read;
* every read is bounded: at most `MAX_PATCH_BYTES` a file, and the whole directory within
  `READ_TIMEOUT_S` seconds (a hung network file system cannot hang the command);
* a series that checks nothing fails: a directory that is missing, is not a directory or
  holds no patch is a configuration error (exit 2) naming the `dir:` line of matrix.yaml,
  unless the series says `allow_empty: true`.
"""

from __future__ import annotations

import stat
import threading
import time
from pathlib import Path

from ..confined import Refused, Root
from ..confined.regular import file_kind as _kind
from ..errors import ConfigError, EnvironmentFailure, UsageError
from ..project.config import Series
from . import patchlist

MAX_PATCH_BYTES = 64 * 1024 * 1024  # far above any real patch (llama.cpp's largest are a few MiB)
READ_TIMEOUT_S = 60.0
PATCH_SUFFIX = ".patch"
LIST_WORDS = {"quilt": "series file", "electron": ".patches file", "conda-forge": "recipe's patches: list"}
_CHUNK = 1024 * 1024


class UnsafeSeriesEntry(ConfigError):
    """An entry of a series directory that patchctl refuses to read."""


def series_entries(series: Series, *, allow_empty_dir: bool = False) -> list[Path]:
    """The patch files of SERIES in application order, each checked to be a regular file
    reached through no link (nothing is read but the quilt `series` file). Fails closed:
    ConfigError when the directory is missing, not a directory, or holds no patch, unless
    the series has `allow_empty: true` (ALLOW_EMPTY_DIR: an existing empty directory is
    fine, for the command that fills it)."""
    directory = series.dir
    shown = _shown(series, directory)
    root = _root(series)
    kind = root.kind(directory)  # Refused (one line) when a directory above it is a link
    if kind is None:
        if series.allow_empty:
            return []
        raise ConfigError(f"{_where(series)}: {shown}: no such directory{_did_you_mean(series)}")
    if kind == "symlink":
        raise UnsafeSeriesEntry(
            f"refusing to read {shown}: {shown} is a symlink to {root.describe_link(directory)}; "
            "patchctl goes through no link"
        )
    if kind != "directory":
        raise ConfigError(f"{_where(series)}: {shown} is not a directory ({kind}){_did_you_mean(series)}")
    listed = listed_names(series)
    if listed is not None:
        paths = [directory / name for name in listed]
    else:
        paths = [directory / name for name in root.listdir(directory) or [] if name.endswith(PATCH_SUFFIX)]
    for path in paths:
        _check_entry(series, root, path)
    if not paths and not series.allow_empty and not allow_empty_dir:
        spec = series.patch_list
        what = (
            f"no patch listed in its {LIST_WORDS[spec.kind]} ({_shown(series, spec.path)})"
            if spec.path is not None
            else "no *.patch file"
        )
        raise ConfigError(
            f"{_where(series)}: {shown} holds {what}; a series that checks nothing fails "
            f"(set allow_empty: true on series {series.name} if an empty series is intended)"
        )
    return paths


def read_entries(series: Series, paths: list[Path]) -> list[bytes]:
    """The bytes of PATHS (from `series_entries`), each at most MAX_PATCH_BYTES, all within
    READ_TIMEOUT_S: a read that does not finish in time is an environment failure (exit 3)."""
    results: list[bytes] = []
    failure: list[BaseException] = []
    deadline = time.monotonic() + READ_TIMEOUT_S

    def work() -> None:
        try:
            for path in paths:
                results.append(read_bounded(series, path, deadline))
        except BaseException as exc:  # handed to the caller's thread
            failure.append(exc)

    if not paths:
        return []
    reader = threading.Thread(target=work, name="patchctl-series-reader", daemon=True)
    reader.start()
    reader.join(max(0.0, deadline - time.monotonic()) + 1.0)
    if reader.is_alive():
        current = paths[min(len(results), len(paths) - 1)]
        raise EnvironmentFailure(
            f"{_shown(series, current)}: reading the series took more than {READ_TIMEOUT_S:g} s; "
            "is its file system hung?"
        )
    if failure:
        raise failure[0]
    return results


def read_bounded(series: Series | None, path: Path, deadline: float | None = None) -> bytes:
    """PATH's bytes, read through `Root` (no link, no FIFO), refused past MAX_PATCH_BYTES."""
    root = _root(series) if series is not None else Root(Path(path).parent)
    _check_entry(series, root, path)
    try:
        with root.open_regular(path) as (handle, _):
            chunks: list[bytes] = []
            size = 0
            while chunk := handle.read(_CHUNK):
                size += len(chunk)
                if size > MAX_PATCH_BYTES:
                    raise UnsafeSeriesEntry(
                        f"{_shown(series, path)}: larger than {MAX_PATCH_BYTES:,} bytes; not a patch patchctl reads"
                    )
                chunks.append(chunk)
                if deadline is not None and time.monotonic() > deadline:
                    raise EnvironmentFailure(f"{_shown(series, path)}: reading it took more than {READ_TIMEOUT_S:g} s")
            return b"".join(chunks)
    except FileNotFoundError:
        raise UnsafeSeriesEntry(f"{_shown(series, path)}: no such file") from None
    except Refused as exc:
        raise UnsafeSeriesEntry(f"{_shown(series, path)}: {exc}; remove it") from None


def listed_names(series: Series) -> list[str] | None:
    """The patch names SERIES' own list gives, in order (`patchctl.series.patchlist`), or None
    when its order is the file names'. A listed file that does not exist is a usage error: the
    downstream's own tool (quilt, Electron's import, conda-build) would refuse the series too."""
    listed = patchlist.read(series)
    if listed is None:
        return None
    root = _root(series)
    for entry in listed.entries:
        if entry.name is None:
            continue
        try:
            present = root.kind(series.dir / entry.name) is not None
        except Refused:
            present = False
        if not present:
            raise UsageError(
                f"{listed.shown(series.root)}:{entry.line + 1}: {entry.text!r} is not a file in "
                f"{_shown(series, series.dir)}"
            )
    return listed.names


# ---------------------------------------------------------------- checks


def _root(series: Series | None) -> Root:
    """What the series' paths are confined to: its repository (or its directory's parent)."""
    if series is not None and series.root is not None:
        return Root(series.root)
    return Root(series.dir.parent if series is not None else Path.cwd())


def _check_entry(series: Series | None, root: Root, path: Path) -> None:
    """Nothing when PATH is a regular file reached through no link; UnsafeSeriesEntry (one
    line, saying what to remove) otherwise."""
    try:
        info = root.lstat(path)
    except Refused as exc:
        raise UnsafeSeriesEntry(f"{_shown(series, path)}: {exc}") from None
    if info is None:
        raise UnsafeSeriesEntry(f"{_shown(series, path)}: no such file")
    if stat.S_ISLNK(info.st_mode):
        raise UnsafeSeriesEntry(
            f"{_shown(series, path)}: a symlink to {root.describe_link(path)}; patchctl reads no patch through a "
            "link: remove it or replace it with the file"
        )
    if not stat.S_ISREG(info.st_mode):
        raise UnsafeSeriesEntry(_not_regular(series, path, info.st_mode))


def _not_regular(series: Series | None, path: Path, mode: int) -> str:
    return (
        f"{_shown(series, path)}: a {_kind(mode)}, not a regular file; "
        f"patchctl reads only regular files as patches: remove it"
    )


def _where(series: Series) -> str:
    return series.where or f"series {series.name}: dir"


def _shown(series: Series | None, path: Path) -> str:
    return patchlist.shown(series.root if series is not None else None, path)


def _did_you_mean(series: Series) -> str:
    """A near directory name beside the missing one (`patches/llama-cpp` -> `patches/llama.cpp`)."""
    parent = series.dir.parent
    root = _root(series)
    try:
        siblings = [name for name in root.listdir(parent) or [] if root.kind(parent / name) == "directory"]
    except (Refused, OSError):
        return ""
    import difflib  # only for this message

    close = difflib.get_close_matches(series.dir.name, siblings, n=1, cutoff=0.6)
    if not close or close[0] == series.dir.name:
        return ""
    return f" (did you mean {_shown(series, parent / close[0])}?)"
