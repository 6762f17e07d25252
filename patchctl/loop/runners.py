"""Build runners: run one `build:` step of a series in a tree, keep its log, enforce its timeout.

* `local` runs the command with bash in the tree, in its own process group so that a
  timeout (or Ctrl-C) kills the whole build, compilers and make jobs included.
* Neither passes patchctl's whole environment on: a step sees the scrubbed set of
  `patchctl.project.gate_env` (an allowlist, its `pass_env:` and its `env:`).
* `docker` runs it in the step's image with the tree bind-mounted at /src (the working
  directory), as the invoking uid:gid so that what the build writes is not owned by root.
  The container is removed afterwards whatever happened: success, failure, timeout or
  KeyboardInterrupt.

Output goes to the log file as it arrives, and line by line to an optional PROGRESS
callback (the CLI shows it, a build's `[12/340]` status lines as how far it has come, with
the log's path); this module never prints.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import BinaryIO, ClassVar

from ..confined import Refused
from ..errors import EnvironmentFailure, UsageError
from ..output import progress as progress_mod
from ..output.jsonout import json_field
from ..project import gate_env
from ..project.config import BuildStep
from ..records import dataclass
from ..state import worktree

Progress = Callable[[str], None]
CONTAINER_WORKDIR = "/src"
CONTAINER_LABEL = "io.patchctl.build"
# After SIGTERM a build gets this long to stop before SIGKILL.
KILL_GRACE_S = 5.0
DOCKER_API_TIMEOUT_S = 30


@dataclass(frozen=True)
class BuildResult:
    JSON_PROPERTIES: ClassVar[dict[str, str]] = {"reason": "reason"}

    name: str
    ok: bool
    returncode: int | None
    duration_s: float = json_field(digits=3)
    log_path: Path = json_field(name="log")
    timed_out: bool = False
    runner: str = "local"
    # the docker container's name (removed by the time this exists)
    container: str | None = json_field(omit=True, default=None)

    @property
    def reason(self) -> str:
        if self.ok:
            return ""
        if self.timed_out:
            return f"timed out after {self.duration_s:.0f} s (log: {self.log_path})"
        return f"exit {self.returncode} (log: {self.log_path})"


def run_build(step: BuildStep, tree: Path, log_path: Path, progress: Progress | None = None) -> BuildResult:
    """Run STEP in TREE; its output goes to LOG_PATH (and PROGRESS). Never raises for a
    failing build (see BuildResult.ok); raises EnvironmentFailure when the runner itself
    is unavailable (no bash, no Docker engine, no image)."""
    tree = Path(tree).resolve()
    if worktree.reached_through(tree).kind(tree) != "directory":
        raise UsageError(f"build {step.name}: tree {tree} does not exist")
    log_path = Path(log_path)
    worktree.reached_through(log_path).mkdirs(log_path.parent)  # patchctl's own logs: no link on the way
    # Output lines are notes of the step (the live line's tail), never log lines of their own.
    progress = progress_mod.note if progress is None or progress is progress_mod.say else progress
    if step.runner == "local":
        with progress_mod.step(f"build {step.name}", tail=log_path):
            return _run_local(step, tree, log_path, progress)
    if step.runner == "docker":
        with progress_mod.step(f"build {step.name} (docker {step.image})", tail=log_path):
            return _run_docker(step, tree, log_path, progress)
    raise UsageError(f"build {step.name}: unknown runner {step.runner!r}")


def tree_as_built(step: BuildStep, tree: Path) -> str:
    """Where TREE is for STEP's commands: its own path locally, /src in a container. Paths a
    build records (compile_commands.json, its log) are in these terms."""
    return CONTAINER_WORKDIR if step.runner == "docker" else str(Path(tree).resolve())


class _LineSink:
    """Appends output chunks to the log as they arrive; hands whole lines to PROGRESS."""

    def __init__(self, log: BinaryIO, progress: Progress | None):
        self.log = log
        self.progress = progress
        self._pending = b""

    def write(self, chunk: bytes) -> None:
        self.log.write(chunk)
        self.log.flush()
        if self.progress is None:
            return
        self._pending += chunk
        *lines, self._pending = self._pending.split(b"\n")
        for line in lines:
            self.progress(line.decode("utf-8", errors="replace").rstrip("\r"))

    def close(self) -> None:
        if self.progress is not None and self._pending:
            self.progress(self._pending.decode("utf-8", errors="replace"))
        self._pending = b""


# ---------------------------------------------------------------- local


def _run_local(step: BuildStep, tree: Path, log_path: Path, progress: Progress | None) -> BuildResult:
    shell = shutil.which("bash") or shutil.which("sh")
    if shell is None:
        raise EnvironmentFailure(f"build {step.name}: neither bash nor sh is on PATH")
    env = gate_env.scrubbed(pass_env=step.pass_env, extra=dict(step.env))
    start = time.monotonic()  # the timeout counts the log's open too
    timed_out = False
    with open_log(log_path) as log, worktree.reached_through(tree).directory(tree) as opened:
        sink = _LineSink(log, progress)
        proc = subprocess.Popen(
            [shell, "-c", step.command],
            cwd=opened.cwd,  # that very directory, whatever is swapped on the way to it
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: a timeout kills the whole build
        )
        assert proc.stdout is not None
        reader = threading.Thread(target=_pump, args=(proc.stdout, sink), daemon=True)
        reader.start()
        try:
            proc.wait(timeout=max(step.timeout - (time.monotonic() - start), 0.001))
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
        except BaseException:
            _kill_group(proc)
            raise
        finally:
            reader.join(timeout=KILL_GRACE_S)
            sink.close()
        if timed_out:
            log.write(
                f"\npatchctl: build {step.name} timed out after {step.timeout} s; process group killed\n".encode()
            )
    duration = time.monotonic() - start
    returncode = None if timed_out else proc.returncode
    return BuildResult(step.name, returncode == 0, returncode, duration, log_path, timed_out, "local")


def open_log(log_path: Path) -> BinaryIO:
    """A new log file at LOG_PATH (`confined.Root.open_log`: no link followed, from the repository
    for patchctl's own logs; nothing but a regular file replaced; never blocking on a FIFO)."""
    return worktree.reached_through(log_path).open_log(log_path)


def _pump(stream: BinaryIO, sink: _LineSink) -> None:
    for chunk in iter(lambda: stream.read1(65536), b""):  # type: ignore[attr-defined]
        sink.write(chunk)


def _kill_group(proc: subprocess.Popen) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=KILL_GRACE_S)
            # The leader is gone; children may remain in the group: finish them too.
            os.killpg(proc.pid, signal.SIGKILL)
            return
        except subprocess.TimeoutExpired:
            continue
        except ProcessLookupError:
            return


# ---------------------------------------------------------------- docker


def docker_client():
    """A client for the engine $DOCKER_HOST (or the default socket) names, or
    EnvironmentFailure in one line when none answers."""
    import docker
    from docker.errors import DockerException

    where = os.environ.get("DOCKER_HOST") or "the default socket (unix:///var/run/docker.sock)"
    try:
        client = docker.from_env(timeout=DOCKER_API_TIMEOUT_S)
        client.ping()
    except DockerException as exc:
        raise EnvironmentFailure(f"no reachable Docker engine at {where}: {_one_line(exc)}") from None
    except Exception as exc:  # requests' connection errors surface here on some SDK versions
        raise EnvironmentFailure(f"no reachable Docker engine at {where}: {_one_line(exc)}") from None
    return client


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:200]


def _run_docker(step: BuildStep, tree: Path, log_path: Path, progress: Progress | None) -> BuildResult:
    from docker.errors import APIError, ImageNotFound
    from requests.exceptions import ConnectionError as RequestsConnectionError
    from requests.exceptions import ReadTimeout

    if not step.image:
        raise UsageError(f"build {step.name}: the docker runner needs an image")
    client = docker_client()
    try:
        try:
            client.images.get(step.image)
        except ImageNotFound:
            raise EnvironmentFailure(
                f"build {step.name}: docker image {step.image!r} is not in the engine (docker pull or docker import "
                "it first)"
            ) from None
        name = f"patchctl-build-{uuid.uuid4().hex[:12]}"
        environment = gate_env.container(pass_env=step.pass_env, extra=dict(step.env))
        start = time.monotonic()
        timed_out = False
        returncode: int | None = None
        container = None
        with open_log(log_path) as log:
            sink = _LineSink(log, progress)
            try:
                container = client.containers.create(
                    step.image,
                    command=["/bin/sh", "-c", step.command],
                    name=name,
                    working_dir=CONTAINER_WORKDIR,
                    volumes={str(tree): {"bind": CONTAINER_WORKDIR, "mode": "rw"}},
                    user=f"{os.getuid()}:{os.getgid()}",
                    environment=environment,
                    labels={CONTAINER_LABEL: step.name},
                    network_disabled=True,
                    detach=True,
                )
                container.start()
                reader = threading.Thread(target=_pump_container, args=(container, sink), daemon=True)
                reader.start()
                try:
                    status = container.wait(timeout=step.timeout)
                    returncode = int(status.get("StatusCode", -1))
                except (ReadTimeout, RequestsConnectionError):
                    timed_out = True
                    _kill_container(container)
                reader.join(timeout=KILL_GRACE_S)
                sink.close()
                if timed_out:
                    log.write(
                        f"\npatchctl: build {step.name} timed out after {step.timeout} s; container killed\n".encode()
                    )
            except APIError as exc:
                raise EnvironmentFailure(
                    f"build {step.name}: Docker engine refused to run {step.image!r}: {_one_line(exc)}"
                ) from None
            finally:
                # Also on KeyboardInterrupt: never leave a container behind.
                _remove_container(client, name)
        duration = time.monotonic() - start
        return BuildResult(step.name, returncode == 0, returncode, duration, log_path, timed_out, "docker", name)
    finally:
        client.close()


def ensure_image(
    image: str,
    *,
    dockerfile: Path | None = None,
    base_image: str | None = None,
    progress: Progress | None = None,
) -> str:
    """IMAGE in the engine, ready for `run_build`: built from DOCKERFILE (its directory the
    context, BASE_IMAGE passed as build-arg BASE_IMAGE) when one is given, so that a changed
    Dockerfile is always picked up (the engine's layer cache makes an unchanged one cheap);
    otherwise pulled when the engine lacks it. EnvironmentFailure in one line when neither works."""
    from docker.errors import APIError, BuildError, DockerException, ImageNotFound

    say = progress or (lambda _line: None)
    client = docker_client()
    try:
        if dockerfile is not None:
            if not dockerfile.is_file():
                raise UsageError(f"toolchain Dockerfile {dockerfile} does not exist")
            say(f"building {image} from {dockerfile.name}")
            try:
                _, lines = client.images.build(
                    path=str(dockerfile.parent),
                    dockerfile=dockerfile.name,
                    tag=image,
                    buildargs={"BASE_IMAGE": base_image} if base_image else None,
                    rm=True,
                    forcerm=True,
                )
                for entry in lines:
                    if isinstance(entry, dict) and entry.get("stream", "").strip():
                        say(entry["stream"].rstrip())
            except BuildError as exc:
                raise EnvironmentFailure(
                    f"docker build of {image} from {dockerfile} failed: {_one_line(exc)}"
                ) from None
            except (APIError, DockerException) as exc:
                raise EnvironmentFailure(
                    f"docker build of {image} from {dockerfile} failed: {_one_line(exc)}"
                ) from None
            return image
        try:
            client.images.get(image)
            return image
        except ImageNotFound:
            pass
        say(f"pulling {image}")
        repository, tag = _split_tag(image)
        try:
            client.images.pull(repository, tag=tag)
        except (APIError, DockerException) as exc:
            raise EnvironmentFailure(
                f"docker image {image!r} is not in the engine and pulling it failed: {_one_line(exc)}"
            ) from None
        return image
    finally:
        client.close()


def _split_tag(image: str) -> tuple[str, str]:
    if "@" in image:
        return image, ""  # a digest reference pulls as it is
    name, _, tag = image.rpartition(":")
    if not name or "/" in tag:  # no tag, or the colon was a registry port
        return image, "latest"
    return name, tag


def log_tail(path: Path, lines: int = 30, max_chars: int = 4000) -> str:
    """The last LINES lines of a build log (at most MAX_CHARS), for reports; '' when unreadable."""
    try:
        with worktree.reached_through(path).open_regular(path) as (log, info):
            log.seek(max(0, info.st_size - 64 * 1024))
            text = log.read(64 * 1024).decode("utf-8", errors="replace")
    except (OSError, Refused):  # absent, or refused (a link, a FIFO): no tail
        return ""
    tail = "\n".join(text.replace("\r", "").splitlines()[-lines:])
    return tail[-max_chars:]


def _pump_container(container, sink: _LineSink) -> None:
    try:
        chunks: Iterable[bytes] = container.logs(stream=True, follow=True, stdout=True, stderr=True)
        for chunk in chunks:
            sink.write(chunk)
    except Exception:  # the container was killed or removed under us: the log ends here
        return


def _kill_container(container) -> None:
    from docker.errors import APIError

    try:
        container.kill()
    except APIError:
        pass  # already stopped


def _remove_container(client, name: str) -> None:
    from docker.errors import APIError, NotFound

    try:
        client.api.remove_container(name, force=True)
    except NotFound:
        pass
    except APIError:
        pass
