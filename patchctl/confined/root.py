"""`Root`: reading and writing below one directory, a component at a time, never through a link.

Every operation takes a path relative to the root (or absolute below it), checks its spelling
(`names.component_reason`: no `..`, no `.git` in any spelling git refuses), then opens the
root and each directory on the way from its parent's descriptor with O_NOFOLLOW|O_DIRECTORY.
A symlink on the way, the last component included, stops it with `Refused`, naming the link and
where it points; so does a file where a directory is needed, or a FIFO, device or socket where a
file is. What is finally opened, written, renamed or removed is named relative to that last
descriptor (`dir_fd=`): nothing swapped into the path after the check can redirect it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from ..errors import ConfigError
from . import walk as tree_walk
from .names import component_reason, is_dotgit
from .regular import file_kind

_ROOT_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_DIR_FLAGS = _ROOT_FLAGS | os.O_NOFOLLOW
_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
TEMP_INFIX = ".patchctl-tmp-"  # `.NAME.patchctl-tmp-XXXX`: an atomic write's file before its rename


class Refused(ConfigError):
    """A path patchctl does not read or write (exit 2); the message is one line naming it."""


class TooLarge(Refused):
    """A file past the bound its reader set."""


class Root:
    """The directory PATH (reached however the caller named it) as the root of every path given
    to its methods. LABEL names it in messages ("the repository", "the applied tree").

    PREFIX: components below PATH that every relative path is taken under, each walked like the
    rest (no link, a real directory): `Root(GITDIR, prefix=("patchctl",))` is the state
    directory, reached from the git directory at every call, so that a link swapped in for
    `patchctl` redirects nothing. Absolute paths must lie below PATH/PREFIX."""

    def __init__(self, path: Path | str, label: str = "the repository", *, prefix: tuple[str, ...] = ()):
        self.given = Path(path).absolute()
        self.path = self.given.resolve()
        self.label = label
        self.prefix = prefix

    # ------------------------------------------------------------ names

    def parts(self, path: Path | str, verb: str = "use") -> tuple[str, ...]:
        """PATH's components below the root; Refused for a path outside it, `..`, or `.git`."""
        given = Path(path)
        if given.is_absolute():
            for base in (self.path, self.given):
                with contextlib.suppress(ValueError):
                    given = given.relative_to(base.joinpath(*self.prefix))
                    break
            else:
                raise Refused(
                    f"refusing to {verb} {path}: it is outside {self.label} {self.path.joinpath(*self.prefix)}"
                )
        parts = (*self.prefix, *PurePosixPath(given.as_posix()).parts)
        for part in parts:
            if (reason := component_reason(part)) is not None:
                raise Refused(f"refusing to {verb} {self.shown(parts)}: {reason}")
        return parts

    def shown(self, path: Path | str | tuple[str, ...]) -> str:
        """PATH as the user sees it: relative to the root."""
        if isinstance(path, tuple):
            return "/".join(path) or "."
        try:
            return Path(path).relative_to(self.path).as_posix()
        except ValueError:
            try:
                return Path(path).relative_to(self.given).as_posix()
            except ValueError:
                return str(path)

    def absolute(self, path: Path | str) -> Path:
        return self.path.joinpath(*self.parts(path))

    # ------------------------------------------------------------ the walk from the root

    def _open_dir(self, parts: tuple[str, ...], whole: tuple[str, ...], verb: str, *, create: bool = False) -> int:
        """A descriptor of the directory PARTS; FileNotFoundError when a component is missing
        (and CREATE is off), Refused when one is a link or no directory."""
        fd = os.open(self.path, _ROOT_FLAGS)
        try:
            for index, part in enumerate(parts):
                try:
                    child = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, 0o777, dir_fd=fd)
                    try:
                        child = os.open(part, _DIR_FLAGS, dir_fd=fd)
                    except OSError:
                        raise self._refusal(fd, part, parts[: index + 1], whole, verb) from None
                except OSError as exc:
                    if exc.errno not in (errno.ELOOP, errno.ENOTDIR, errno.EACCES):
                        raise
                    raise self._refusal(fd, part, parts[: index + 1], whole, verb) from None
                os.close(fd)
                fd = child
        except BaseException:
            os.close(fd)
            raise
        return fd

    @contextlib.contextmanager
    def _parent(self, path: Path | str, verb: str, *, create: bool = False) -> Iterator[tuple[int, str, tuple]]:
        """(descriptor of PATH's directory, PATH's last name, PATH's parts)."""
        parts = self.parts(path, verb)
        if not parts:
            raise Refused(f"refusing to {verb} {self.path}: it is {self.label} itself")
        fd = self._open_dir(parts[:-1], parts, verb, create=create)
        try:
            yield fd, parts[-1], parts
        finally:
            os.close(fd)

    def _refusal(
        self, fd: int, name: str, upto: tuple[str, ...], whole: tuple[str, ...], verb: str, wanted: str = "a directory"
    ) -> Refused:
        """Why NAME (in the directory FD; UPTO from the root) stops the way to WHOLE: it is a link,
        or not WANTED."""
        head = f"refusing to {verb} {self.shown(whole)}: {self.shown(upto)}"
        try:
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except OSError as exc:
            return Refused(f"{head}: cannot open it ({exc.strerror})")
        if stat.S_ISLNK(info.st_mode):
            return Refused(f"{head} is a symlink to {self.link_target(fd, name, upto)}; patchctl goes through no link")
        return Refused(f"{head} is a {file_kind(info.st_mode)}, not {wanted}")

    def link_target(self, fd: int, name: str, upto: tuple[str, ...]) -> str:
        """What the link NAME says, and where that leads when it is elsewhere than it reads."""
        try:
            written = os.readlink(name, dir_fd=fd)
        except OSError:  # swapped back for a directory or a file since it was seen
            return "a link no longer there (something swapped it while patchctl looked)"
        link = self.path.joinpath(*upto)
        real = Path(os.path.realpath(link))
        where = written if written == str(real) else f"{written} ({real})"
        if real != self.path and self.path not in real.parents:
            return f"{where}, outside {self.label} {self.path}"
        try:
            os.path.realpath(link, strict=True)
        except FileNotFoundError:
            return f"{written}, which does not exist"
        except OSError:  # ELOOP
            return f"{written}, a symlink loop"
        if any(is_dotgit(part) for part in real.relative_to(self.path).parts):
            return f"{where}, inside .git"
        return written

    @contextlib.contextmanager
    def _vanished(self, verb: str, path: Path | str) -> Iterator[None]:
        """FileNotFoundError (a directory on the way made, then moved or deleted meanwhile: a
        race) as Refused, one line."""
        try:
            yield
        except FileNotFoundError:
            shown = self.shown(path if isinstance(path, tuple) else Path(path))
            raise Refused(
                f"refusing to {verb} {shown}: it or a directory on the way moved or was deleted while patchctl used it"
            ) from None

    # ------------------------------------------------------------ looking

    def lstat(self, path: Path | str, verb: str = "read") -> os.stat_result | None:
        """PATH's lstat, or None when it (or a directory above it) does not exist. VERB: what
        the caller means to do, for the message that refuses a link on the way."""
        try:
            with self._parent(path, verb) as (fd, name, _):
                return os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def kind(self, path: Path | str, verb: str = "read") -> str | None:
        """What PATH is ("regular file", "directory", "symlink", "FIFO", ...), or None when absent."""
        info = self.lstat(path, verb)
        return None if info is None else file_kind(info.st_mode)

    def check_replaceable(self, path: Path | str, verb: str = "write") -> os.stat_result | None:
        """PATH's lstat (None when absent) once every directory on the way is a real one and PATH
        itself is absent, a regular file or a symlink: what a rename may replace (a symlink is
        replaced, never followed). For the journal, which renames files into place."""
        parts = self.parts(path, verb)
        try:
            with self._parent(path, verb) as (fd, name, _):
                info = os.stat(name, dir_fd=fd, follow_symlinks=False)
                if not (stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode)):
                    raise self._refusal(fd, name, parts, parts, verb, "a regular file or a symlink")
                return info
        except FileNotFoundError:
            return None

    def check(self, path: Path | str, verb: str = "write") -> Path:
        """PATH, absolute, once every part of it that exists is a real directory and its last
        component is absent, a regular file or a directory: for writers that hand the path on
        (git, a rendered file)."""
        parts = self.parts(path, verb)
        if not parts:
            return self.path
        try:
            with self._parent(path, verb) as (fd, name, _):
                info = os.stat(name, dir_fd=fd, follow_symlinks=False)
                if not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
                    raise self._refusal(fd, name, parts, parts, verb, "a regular file or a directory")
        except FileNotFoundError:
            pass
        return self.path.joinpath(*parts)

    def _open_existing_dir(self, parts: tuple[str, ...], verb: str) -> int | None:
        """`_open_dir` of PARTS, or None when a component is missing."""
        try:
            return self._open_dir(parts, parts, verb)
        except FileNotFoundError:
            return None

    def listdir(self, path: Path | str = "") -> list[str] | None:
        """The names in directory PATH, sorted; None when it does not exist."""
        fd = self._open_existing_dir(self.parts(path, "list"), "list")
        if fd is None:
            return None
        try:
            return sorted(os.listdir(fd))
        finally:
            os.close(fd)

    def walk(self, path: Path | str = "") -> Iterator[tuple[str, os.stat_result]]:
        """(name relative to PATH, lstat) of everything below directory PATH that is not a
        directory, symlinks included and never followed, in sorted order; nothing when PATH does
        not exist. A `.git` (in any spelling) is not entered."""
        for _fd, _name, relative, info in self._entries(path, "read"):
            yield relative, info

    def set_times(self, seconds: int, path: Path | str = "") -> None:
        """Date everything `walk` finds below directory PATH SECONDS (access and modification), a
        link itself and never its target; what cannot be dated is left as it is."""
        for fd, name, _relative, _info in self._entries(path, "write"):
            with contextlib.suppress(OSError):
                os.utime(name, (seconds, seconds), dir_fd=fd, follow_symlinks=False)

    def _entries(self, path: Path | str, verb: str) -> Iterator[tuple[int, str, str, os.stat_result]]:
        """`walk`'s entries, each with its directory's descriptor (open while it is yielded) and
        its name there: iterative (`walk.entries`), to `tree_walk.MAX_DEPTH` directories, one line past it."""
        parts = self.parts(path, verb)
        try:
            fd = self._open_dir(parts, parts, verb)
        except FileNotFoundError:
            return
        try:
            for dir_fd, name, relative, info in tree_walk.entries(fd):
                yield dir_fd, name, "/".join(relative), info
        except tree_walk.TooDeep as exc:
            raise Refused(f"refusing to {verb} {self.shown(parts)}: {exc} (git's own bound)") from None
        except tree_walk.Moved as exc:
            raise Refused(f"refusing to {verb} {self.shown(parts)}: {exc}") from None
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENOTDIR, errno.EACCES) or not exc.filename:
                raise
            whole = (*parts, *str(exc.filename).split("/"))
            raise self._refusal_at(whole, verb) from None

    def _refusal_at(self, whole: tuple[str, ...], verb: str) -> Refused:
        """`_refusal` for WHOLE's last component, its parent opened again (a walk's descriptors are gone)."""
        try:
            fd = self._open_dir(whole[:-1], whole, verb)
        except FileNotFoundError:
            return Refused(f"refusing to {verb} {self.shown(whole)}: it moved while patchctl read it")
        try:
            return self._refusal(fd, whole[-1], whole, whole, verb)
        finally:
            os.close(fd)

    # ------------------------------------------------------------ reading

    @contextlib.contextmanager
    def open_regular(self, path: Path | str) -> Iterator[tuple[BinaryIO, os.stat_result]]:
        """PATH opened for reading (never blocking on a FIFO) with its fstat, when it is a regular
        file; FileNotFoundError when absent, Refused for anything else (a link included)."""
        with self._parent(path, "read") as (fd, name, parts):
            try:
                file_fd = os.open(name, _READ_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                raise
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.EISDIR, errno.ENXIO, errno.EACCES, errno.EPERM):
                    raise
                raise self._refusal(fd, name, parts, parts, "read", "a regular file") from None
            handle = os.fdopen(file_fd, "rb")
        with handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode):
                kind = file_kind(info.st_mode)
                raise Refused(f"refusing to read {self.shown(parts)}: it is a {kind}, not a regular file")
            os.set_blocking(handle.fileno(), True)
            yield handle, info

    def read_bytes(self, path: Path | str, limit: int) -> bytes | None:
        """PATH's bytes, or None when it does not exist; TooLarge past LIMIT bytes."""
        try:
            with self.open_regular(path) as (handle, _):
                data = handle.read(limit + 1)
        except FileNotFoundError:
            return None
        if len(data) > limit:
            raise TooLarge(f"refusing to read {self.shown(self.parts(path))}: larger than {limit:,} bytes")
        return data

    def read_gitfile(self, directory: Path | str, limit: int) -> bytes | None:
        """The bytes of the `.git` file in DIRECTORY (a worktree's `gitdir: ...`), or None when
        there is none, or it is a directory, a link or anything but a regular file. The one
        read of a `.git` entry `Root` makes: its name is never a path component here."""
        fd = self._open_existing_dir(self.parts(directory, "read"), "read")
        if fd is None:
            return None
        try:
            file_fd = os.open(".git", _READ_FLAGS, dir_fd=fd)
        except OSError:
            return None
        finally:
            os.close(fd)
        with os.fdopen(file_fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return None
            os.set_blocking(handle.fileno(), True)
            data = handle.read(limit + 1)
        return data if len(data) <= limit else None

    # ------------------------------------------------------------ writing

    def mkdirs(self, path: Path | str) -> None:
        """Directory PATH and those above it, made where missing (never through a link)."""
        with self._vanished("write", path):
            parts = self.parts(path, "write")
            os.close(self._open_dir(parts, parts, "write", create=True))

    def write_bytes(self, path: Path | str, data: bytes, mode: int | None = None) -> None:
        """PATH holds DATA, all or nothing: a temporary file beside it, synced, renamed over it.
        MODE: its permission bits (default: the old file's, else 0644)."""
        with self._vanished("write", path):
            with self._parent(path, "write", create=True) as (fd, name, parts):
                old = _lstat_or_none(name, fd)
                if old is not None and not stat.S_ISREG(old.st_mode):
                    raise self._refusal(fd, name, parts, parts, "write", "a regular file")
                bits = mode if mode is not None else (stat.S_IMODE(old.st_mode) if old is not None else 0o644)
                temp = f".{name[:200]}{TEMP_INFIX}{os.urandom(4).hex()}"
                temp_fd = os.open(temp, _CREATE_FLAGS, 0o600, dir_fd=fd)
                try:
                    with os.fdopen(temp_fd, "wb") as out:
                        out.write(data)
                        out.flush()
                        os.fchmod(out.fileno(), bits)
                        os.fsync(out.fileno())
                    os.replace(temp, name, src_dir_fd=fd, dst_dir_fd=fd)
                except BaseException:
                    with contextlib.suppress(OSError):
                        os.unlink(temp, dir_fd=fd)
                    raise
                with contextlib.suppress(OSError):  # some file systems cannot sync a directory
                    os.fsync(fd)

    def write_scratch(self, path: Path | str, data: bytes) -> None:
        """PATH holds DATA, written in place and not synced (never through a link): for patchctl's
        own scratch files in a private directory (`scratch.make`), which no reader shares."""
        with self._vanished("write", path), self._parent(path, "write") as (fd, name, _):
            file_fd = os.open(
                name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=fd
            )
            with os.fdopen(file_fd, "wb") as out:
                out.write(data)

    def unlink(self, path: Path | str, *, missing_ok: bool = True) -> bool:
        """Remove the file PATH (a link is removed, never followed); whether one was removed."""
        try:
            with self._parent(path, "delete") as (fd, name, parts):
                info = os.stat(name, dir_fd=fd, follow_symlinks=False)
                if stat.S_ISDIR(info.st_mode):
                    raise Refused(f"refusing to delete {self.shown(parts)}: it is a directory, not a file")
                os.unlink(name, dir_fd=fd)
                return True
        except FileNotFoundError:
            if not missing_ok:
                raise
            return False

    def create_synced(self, path: Path | str, data: bytes, mode: int | None = None) -> None:
        """A new file PATH (it must not exist: O_EXCL, never through a link) holding DATA, synced;
        MODE: its permission bits (default: 0666 less the umask). No temporary name: for the
        journal, whose staged files are the temporary names."""
        with self._parent(path, "write") as (fd, name, _):
            file_fd = os.open(name, _CREATE_FLAGS, 0o666, dir_fd=fd)
            with os.fdopen(file_fd, "wb") as out:
                out.write(data)
                out.flush()
                if mode is not None:
                    os.fchmod(out.fileno(), mode)
                os.fsync(out.fileno())

    def link(self, existing: Path | str, new: Path | str) -> None:
        """A second name NEW for the file EXISTING (a symlink gets a second name itself, never
        what it points to); both below the root, neither reached through a link."""
        with self._parent(existing, "read") as (old_fd, old_name, _):
            with self._parent(new, "write") as (new_fd, new_name, _):
                os.link(old_name, new_name, src_dir_fd=old_fd, dst_dir_fd=new_fd, follow_symlinks=False)

    def replace(self, source: Path | str, target: Path | str) -> None:
        """Rename SOURCE onto TARGET (rename(2): a symlink at TARGET is replaced, never followed)."""
        with self._parent(source, "write") as (source_fd, source_name, _):
            with self._parent(target, "write") as (target_fd, target_name, parts):
                info = _lstat_or_none(target_name, target_fd)
                if info is not None and stat.S_ISDIR(info.st_mode):
                    raise Refused(f"refusing to write {self.shown(parts)}: it is a directory, not a file")
                os.replace(source_name, target_name, src_dir_fd=source_fd, dst_dir_fd=target_fd)

    def sync_directory(self, path: Path | str) -> None:
        """fsync directory PATH, so that the renames in it survive a power cut; nothing when it
        is gone or the file system cannot sync a directory."""
        parts = self.parts(path, "write")
        try:
            fd = self._open_dir(parts, parts, "write")
        except FileNotFoundError:
            return
        try:
            os.fsync(fd)
        except OSError:
            pass  # the rename itself is still atomic
        finally:
            os.close(fd)

    def rmdir(self, path: Path | str) -> bool:
        """Remove directory PATH when it is empty; whether it was removed."""
        try:
            with self._parent(path, "delete") as (fd, name, _):
                os.rmdir(name, dir_fd=fd)
                return True
        except OSError:  # not empty, absent, or not a directory (a link is never followed)
            return False

    def symlink(self, path: Path | str, target: str) -> None:
        """Make PATH a symlink to TARGET (what it says is not judged here), replacing a file or
        link of that name; never a directory."""
        with self._parent(path, "write", create=True) as (fd, name, parts):
            old = _lstat_or_none(name, fd)
            if old is not None:
                if stat.S_ISDIR(old.st_mode):
                    raise Refused(f"refusing to write {self.shown(parts)}: it is a directory")
                os.unlink(name, dir_fd=fd)
            os.symlink(target, name, dir_fd=fd)

    def remove_tree(self, path: Path | str) -> bool:
        """Remove PATH and everything below it, never following a link (a link, a file, a FIFO at
        PATH is unlinked itself; nothing is opened but directories, with O_NOFOLLOW); whether
        something was there. What cannot be removed is left and named in one line (Refused)."""
        failures: list[OSError] = []
        try:
            with self._parent(path, "delete") as (fd, name, parts):
                try:
                    info = os.stat(name, dir_fd=fd, follow_symlinks=False)
                except FileNotFoundError:
                    return False
                if stat.S_ISDIR(info.st_mode):
                    try:
                        child = os.open(name, _DIR_FLAGS, dir_fd=fd)
                    except FileNotFoundError:
                        return False
                    except OSError:  # swapped since the lstat: removed as what it is now
                        os.unlink(name, dir_fd=fd)
                        return True
                    try:
                        tree_walk.remove_below(child, failures.append)
                    except tree_walk.Moved as exc:
                        raise Refused(f"cannot remove all of {self.shown(parts)}: {exc}") from None
                    try:
                        os.rmdir(name, dir_fd=fd)
                    except OSError as exc:
                        failures.append(exc)
                else:
                    os.unlink(name, dir_fd=fd)
        except FileNotFoundError:
            return False
        if failures:
            raise Refused(f"cannot remove all of {self.shown(parts)}: {failures[0].strerror or failures[0]}")
        return True

    def rename(self, source: Path | str, target: Path | str) -> None:
        """Move SOURCE (a file or a directory tree) to TARGET, which must not exist: rename(2)
        between the two parents' descriptors, no link followed on the way to either."""
        move(self, source, self, target)

    def open_log(self, path: Path | str) -> BinaryIO:
        """A new, empty log file PATH, open for writing; the directories on the way are made
        (never through a link). An old log there (a regular file) is unlinked first, by name:
        a hard link to a file elsewhere loses a name, never its content. Anything else there
        (a link, a FIFO, a device, a directory) is refused in one line. The file is created
        O_EXCL|O_NOFOLLOW|O_NONBLOCK: nothing planted meanwhile is followed or waited on."""
        with self._vanished("write", path):
            with self._parent(path, "write", create=True) as (fd, name, parts):
                old = _lstat_or_none(name, fd)
                if old is not None:
                    if not stat.S_ISREG(old.st_mode):
                        raise self._refusal(fd, name, parts, parts, "write", "a log file")
                    os.unlink(name, dir_fd=fd)
                try:
                    file_fd = os.open(name, _CREATE_FLAGS | os.O_NONBLOCK, 0o644, dir_fd=fd)
                except FileExistsError:
                    raise self._refusal(fd, name, parts, parts, "write", "a log file") from None
                os.set_blocking(file_fd, True)
                return os.fdopen(file_fd, "wb")

    def open_shared(self, path: Path | str) -> int:
        """A descriptor of the regular file PATH, opened for reading and writing and made when
        missing (mode 0644), never through a link and never blocking: for a lock file, which
        every run opens and none replaces. Anything else there is refused in one line."""
        with self._vanished("write", path):
            with self._parent(path, "write", create=True) as (fd, name, parts):
                flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
                try:
                    file_fd = os.open(name, flags, 0o644, dir_fd=fd)
                except OSError as exc:
                    if exc.errno not in (errno.ELOOP, errno.EISDIR, errno.ENXIO, errno.EACCES):
                        raise
                    raise self._refusal(fd, name, parts, parts, "write", "a regular file") from None
                if not stat.S_ISREG(os.fstat(file_fd).st_mode):
                    os.close(file_fd)
                    raise Refused(f"refusing to write {self.shown(parts)}: it is not a regular file")
                return file_fd

    @contextlib.contextmanager
    def directory(self, path: Path | str = "", verb: str = "use", *, create: bool = False) -> Iterator[OpenDirectory]:
        """Directory PATH opened once (no link on the way, nor PATH itself), for the time of the
        block: its descriptor, and a working directory to hand a child process that is that very
        directory whatever is renamed or swapped afterwards (`/proc/self/fd/N` where there is one)."""
        parts = self.parts(path, verb)
        with self._vanished(verb, parts):
            fd = self._open_dir(parts, parts, verb, create=create)
        try:
            yield OpenDirectory(fd, self.path.joinpath(*parts))
        finally:
            os.close(fd)

    def make_private_dir(self, path: Path | str, prefix: str) -> str:
        """A new directory (mode 0700) named PREFIX + random hex inside directory PATH (made when
        missing); its name."""
        with self._vanished("write", path):
            with self.directory(path, "write", create=True) as opened:
                for _ in range(100):
                    name = f"{prefix}{os.urandom(6).hex()}"
                    try:
                        os.mkdir(name, 0o700, dir_fd=opened.fd)
                        return name
                    except FileExistsError:
                        continue
            raise Refused(f"cannot make a private directory in {self.shown(self.parts(path))}")

    def describe_link(self, path: Path | str) -> str:
        """What the link PATH says, and where it leads when that matters (outside, into .git,
        nowhere, a loop): for messages that refuse it."""
        with self._parent(path, "read") as (fd, name, parts):
            return self.link_target(fd, name, parts)


def _lstat_or_none(name: str, fd: int) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


class OpenDirectory:
    """A directory held open by descriptor (`Root.directory`)."""

    def __init__(self, fd: int, path: Path):
        self.fd = fd
        self.path = path  # where it was when it was opened: for messages

    @property
    def cwd(self) -> str:
        """A path naming this very directory, for a child's working directory: the kernel's
        `/proc/self/fd/N` (the child chdirs before it closes inherited descriptors), else the
        path it was opened at."""
        proc = f"/proc/self/fd/{self.fd}"
        return proc if _HAS_PROC_FD else str(self.path)


_HAS_PROC_FD = os.path.isdir("/proc/self/fd")


def move(source_root: Root, source: Path | str, target_root: Root, target: Path | str) -> None:
    """Move SOURCE (below SOURCE_ROOT) to TARGET (below TARGET_ROOT), which must not exist:
    one rename(2) between the parents' descriptors, each reached without a link; the directory
    TARGET lands in is made when missing. The two must be on one file system (OSError EXDEV)."""
    with target_root._vanished("move", target):
        with source_root._parent(source, "move") as (source_fd, source_name, _):
            with target_root._parent(target, "write", create=True) as (target_fd, target_name, parts):
                if _lstat_or_none(target_name, target_fd) is not None:
                    raise Refused(f"refusing to write {target_root.shown(parts)}: something is there already")
                os.rename(source_name, target_name, src_dir_fd=source_fd, dst_dir_fd=target_fd)
