"""Run `patchctl ARGS` and die (os._exit(137), like SIGKILL: no finally, no atexit) at the
Nth file operation it performs. Used by tests/patchctl/faultinject.py; no hook in patchctl.

    FAULTINJECT_KILL_AT=N   die just before the Nth write-ish operation (0 or unset: never)
    FAULTINJECT_REPORT=FILE write how many operations the run performed, and each one, to FILE

A write-ish operation is an audit event (sys.addaudithook) that changes the file system
or starts a process: an open for writing, appending or creating, rename/replace, remove,
rmdir, mkdir, symlink, link, chmod, truncate, shutil's rmtree/move/copy*, subprocess.Popen.
Run with PYTHONDONTWRITEBYTECODE=1 so that Python's own .pyc writes do not count.

Only the main thread's operations are counted, in an order that is the same run after run.
What patchctl does beside it on another thread (pin-sync's checkout while it seeds, its
range-diff while it gates) is not a kill point of its own: the kill cuts it wherever it
stands, as a SIGKILL cuts every thread.
"""

from __future__ import annotations

import json
import os
import sys
import threading

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_EVENTS = {
    "os.rename",
    "os.remove",
    "os.rmdir",
    "os.mkdir",
    "os.symlink",
    "os.link",
    "os.chmod",
    "os.truncate",
    "shutil.rmtree",
    "shutil.move",
    "shutil.copyfile",
    "shutil.copymode",
    "shutil.copystat",
    "shutil.copytree",
    "subprocess.Popen",
}

# (index of a name, index of the directory descriptor it is relative to) in each event's arguments.
_DIR_FD_ARGS = {
    "os.rename": ((0, 2), (1, 3)),
    "os.link": ((0, 2), (1, 3)),
    "os.remove": ((0, 1),),
    "os.rmdir": ((0, 1),),
    "os.mkdir": ((0, 2),),
    "os.symlink": ((1, 2),),
    "os.chmod": ((0, 2),),
}


def _describe(event: str, args: tuple) -> str | None:
    """A one-line description of EVENT when it is write-ish, else None."""
    if event == "open":
        path, _mode, flags = args
        if not isinstance(path, (str, bytes, os.PathLike)) or not (flags or 0) & _WRITE_FLAGS:
            return None
        path = os.fsdecode(path)
        if path.startswith(("/dev/", "/proc/")):
            return None
        return f"open {path}"
    if event not in _EVENTS:
        return None
    if event == "subprocess.Popen":
        argv = args[1] if len(args) > 1 else args[0]
        words = [os.fsdecode(a) for a in argv] if isinstance(argv, (list, tuple)) else [str(argv)]
        # git --no-pager -c k=v -c k=v ... SUBCOMMAND: name the subcommand, not the global options.
        shown = [w for i, w in enumerate(words) if w not in ("-c", "--no-pager") and (i == 0 or words[i - 1] != "-c")]
        return "exec " + " ".join(shown[:3])
    shown = [os.fsdecode(a) if isinstance(a, (str, bytes)) else str(a) for a in args[:2]]
    # A name relative to a directory descriptor (patchctl.confined.Root) is shown by its full path.
    for name_index, fd_index in _DIR_FD_ARGS.get(event, ()):
        fd = args[fd_index] if len(args) > fd_index else None
        if isinstance(fd, int) and fd >= 0 and isinstance(args[name_index], (str, bytes)):
            shown[name_index] = _in_directory(fd, os.fsdecode(args[name_index]))
    return event + " " + " ".join(shown)


def _in_directory(fd: int, name: str) -> str:
    """NAME, relative to the directory open as FD, as a full path (NAME itself when FD is gone)."""
    if os.path.isabs(name):
        return name
    try:
        return os.path.join(os.readlink(f"/proc/self/fd/{fd}"), name)
    except OSError:
        return name


def main() -> int:
    kill_at = int(os.environ.get("FAULTINJECT_KILL_AT") or 0)
    report = os.environ.get("FAULTINJECT_REPORT")
    seen: list[str] = []
    active = [True]

    def hook(event: str, args: tuple) -> None:
        if not active[0] or threading.current_thread() is not threading.main_thread():
            return
        described = _describe(event, args)
        if described is None:
            return
        seen.append(described)
        if len(seen) == kill_at:
            os._exit(137)

    from patchctl.cli import main as patchctl_main  # imported before the hook: imports write nothing

    sys.addaudithook(hook)
    code = patchctl_main(sys.argv[1:])
    active[0] = False
    if report:
        with open(report, "w") as handle:
            json.dump({"operations": len(seen), "trace": seen, "exit_code": code}, handle, indent=1)
    return code


if __name__ == "__main__":
    sys.exit(main())
