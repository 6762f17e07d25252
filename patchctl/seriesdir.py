"""Listing and reading a series' directory, as untrusted input, and failing closed.

A series directory comes with the repository: anyone who can open a pull request can put
anything there. So:

* only regular files are read as patches, decided by `lstat` before anything is opened:
  a FIFO, a device, a socket or a directory named like a patch is refused in one line
  (opening a FIFO would block forever, reading `/dev/zero` would never end);
* a symlink is followed only when it leads to a regular file inside the repository;
  one leading out (`/etc/passwd`) is refused before it is read;
* every read is bounded: at most `MAX_PATCH_BYTES` a file, and the whole directory within
  `READ_TIMEOUT_S` seconds (a hung network file system cannot hang the command);
* a series that checks nothing fails: a directory that is missing, is not a directory or
  holds no patch is a configuration error (exit 2) naming the `dir:` line of matrix.yaml,
  unless the series says `allow_empty: true`.
"""

from __future__ import annotations

import difflib
import os
import stat
import threading
import time
from pathlib import Path, PurePosixPath

from .config import Series
from .confine import OutsideRepository, inside_repository
from .errors import ConfigError, EnvironmentFailure, UsageError
from .regular import NotRegular, TooLarge, read_regular
from .regular import file_kind as _kind

MAX_PATCH_BYTES = 64 * 1024 * 1024  # far above any real patch (llama.cpp's largest are a few MiB)
READ_TIMEOUT_S = 60.0
QUILT_SERIES_FILE = "series"
PATCH_SUFFIX = ".patch"
_CHUNK = 1024 * 1024


class UnsafeSeriesEntry(ConfigError):
    """An entry of a series directory that patchctl refuses to read."""


def series_entries(series: Series, *, allow_empty_dir: bool = False) -> list[Path]:
    """The patch files of SERIES in application order, each checked to be a regular file
    inside the repository (nothing is read but the quilt `series` file). Fails closed:
    ConfigError when the directory is missing, not a directory, or holds no patch, unless
    the series has `allow_empty: true` (ALLOW_EMPTY_DIR: an existing empty directory is
    fine, for the command that fills it)."""
    directory = series.dir
    shown = _shown(series, directory)
    if series.root is not None:
        try:  # the directory, or a directory above it, linked outside the repository
            inside_repository(series.root, directory)
        except OutsideRepository as exc:
            raise UnsafeSeriesEntry(str(exc).replace("refusing to write", "refusing to read", 1)) from None
    try:
        info = os.lstat(directory)
    except FileNotFoundError:
        if series.allow_empty:
            return []
        raise ConfigError(f"{_where(series)}: {shown}: no such directory{_did_you_mean(series)}") from None
    except OSError as exc:
        raise ConfigError(f"{_where(series)}: {shown}: cannot read it ({exc.strerror})") from None
    if stat.S_ISLNK(info.st_mode):
        _check_inside(series, directory)
        info = os.stat(directory)
    if not stat.S_ISDIR(info.st_mode):
        raise ConfigError(
            f"{_where(series)}: {shown} is not a directory ({_kind(info.st_mode)}){_did_you_mean(series)}"
        )
    if series.naming == "quilt":
        paths = [directory / name for name in quilt_names(directory, series)]
    else:
        paths = sorted(directory / name for name in os.listdir(directory) if name.endswith(PATCH_SUFFIX))
    for path in paths:
        _check_entry(series, path)
    if not paths and not series.allow_empty and not allow_empty_dir:
        what = f"no patch listed in its {QUILT_SERIES_FILE} file" if series.naming == "quilt" else "no *.patch file"
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


def read_bounded(series: Series, path: Path, deadline: float | None = None) -> bytes:
    """PATH's bytes, opened without following a last symlink that `_check_entry` did not vet,
    without blocking, and refused when it is no longer a regular file or grows past the limit."""
    real = _check_entry(series, path)
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise UnsafeSeriesEntry(f"{_shown(series, path)}: cannot open it ({exc.strerror}); remove it") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):  # swapped between the check and the open
            raise UnsafeSeriesEntry(_not_regular(series, path, info.st_mode))
        chunks: list[bytes] = []
        size = 0
        while True:
            chunk = os.read(fd, _CHUNK)
            if not chunk:
                break
            size += len(chunk)
            if size > MAX_PATCH_BYTES:
                raise UnsafeSeriesEntry(
                    f"{_shown(series, path)}: larger than {MAX_PATCH_BYTES:,} bytes; not a patch patchctl reads"
                )
            chunks.append(chunk)
            if deadline is not None and time.monotonic() > deadline:
                raise EnvironmentFailure(f"{_shown(series, path)}: reading it took more than {READ_TIMEOUT_S:g} s")
        return b"".join(chunks)
    finally:
        os.close(fd)


def quilt_names(directory: Path, series: Series | None = None) -> list[str]:
    """The patch names a quilt `series` file lists, in order (comments and options dropped).
    No `series` file is an empty list. A listed file that does not exist is a usage error:
    quilt itself would refuse the series."""
    path = directory / QUILT_SERIES_FILE
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return []
    if series is not None:
        _check_entry(series, path)
    elif not stat.S_ISREG(info.st_mode):
        raise UnsafeSeriesEntry(_not_regular(None, path, info.st_mode))
    data = read_bounded(series, path) if series is not None else _read_plain(path)
    names = []
    for number, line in enumerate(data.decode(errors="replace").splitlines(), 1):
        name = line.split("#", 1)[0].split()
        if not name:
            continue
        parts = PurePosixPath(name[0]).parts
        if name[0].startswith("/") or ".." in parts or not _lexists(directory / name[0]):
            raise UsageError(f"{path}:{number}: {name[0]!r} is not a file in {directory}")
        names.append(name[0])
    return names


# ---------------------------------------------------------------- checks


def _check_entry(series: Series | None, path: Path) -> Path:
    """PATH when it is a regular file, or the regular file inside the repository its symlink
    leads to; raises UnsafeSeriesEntry (one line, saying what to remove) otherwise."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        raise UnsafeSeriesEntry(f"{_shown(series, path)}: no such file") from None
    if stat.S_ISREG(info.st_mode):
        return path
    if not stat.S_ISLNK(info.st_mode):
        raise UnsafeSeriesEntry(_not_regular(series, path, info.st_mode))
    real = _check_inside(series, path)
    try:
        target = os.lstat(real)
    except OSError:
        raise UnsafeSeriesEntry(
            f"{_shown(series, path)}: a symlink to {os.readlink(path)}, which does not exist; remove it"
        ) from None
    if not stat.S_ISREG(target.st_mode):
        raise UnsafeSeriesEntry(
            f"{_shown(series, path)}: a symlink to {os.readlink(path)}, a {_kind(target.st_mode)}, "
            "not a regular file; patchctl reads only regular files as patches: remove it"
        )
    return real


def _check_inside(series: Series | None, path: Path) -> Path:
    """Where the symlink PATH leads, when that is inside the repository."""
    root = series.root.resolve() if series is not None and series.root is not None else None
    try:
        real = path.resolve(strict=False)
    except (RuntimeError, OSError):
        raise UnsafeSeriesEntry(f"{_shown(series, path)}: a symlink loop; remove it") from None
    if root is not None and real != root and root not in real.parents:
        raise UnsafeSeriesEntry(
            f"{_shown(series, path)}: a symlink to {os.readlink(path)}, outside the repository {root}; "
            "patchctl does not read it: remove it or replace it with the file"
        )
    return real


def _not_regular(series: Series | None, path: Path, mode: int) -> str:
    return (
        f"{_shown(series, path)}: a {_kind(mode)}, not a regular file; "
        f"patchctl reads only regular files as patches: remove it"
    )


def _lexists(path: Path) -> bool:
    return os.path.lexists(path)


def _read_plain(path: Path) -> bytes:
    try:
        return read_regular(path, MAX_PATCH_BYTES) or b""
    except NotRegular as exc:
        raise UnsafeSeriesEntry(_not_regular(None, path, os.lstat(path).st_mode)) from exc
    except TooLarge:
        raise UnsafeSeriesEntry(f"{path}: larger than {MAX_PATCH_BYTES:,} bytes") from None


def _where(series: Series) -> str:
    return series.where or f"series {series.name}: dir"


def _shown(series: Series | None, path: Path) -> str:
    root = series.root if series is not None else None
    if root is not None:
        try:
            return Path(path).relative_to(root).as_posix()
        except ValueError:
            pass
    return str(path)


def _did_you_mean(series: Series) -> str:
    """A near directory name beside the missing one (`patches/llama-cpp` -> `patches/llama.cpp`)."""
    parent = series.dir.parent
    try:
        siblings = [entry.name for entry in os.scandir(parent) if entry.is_dir(follow_symlinks=False)]
    except OSError:
        return ""
    close = difflib.get_close_matches(series.dir.name, siblings, n=1, cutoff=0.6)
    if not close or close[0] == series.dir.name:
        return ""
    return f" (did you mean {_shown(series, parent / close[0])}?)"
