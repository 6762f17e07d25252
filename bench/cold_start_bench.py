"""Benchmark: a cold `patchctl apply` (empty cache, as on a fresh CI runner) against the
shallow shell recipe, both fetching llama.cpp over a real protocol.

The upstream (llama.cpp as vendored by llama-cpp-python 0.3.30 and 0.3.33, built into the
cache on first use, not timed) is served by `git daemon` on 127.0.0.1 with
`uploadpack.allowFilter`, behind a counting TCP relay, so both sides are measured the same
way: wall time, and bytes the server sent.

    cold patchctl:  python -m patchctl --upstream-url llama.cpp=git://... apply  (fresh $PATCHCTL_CACHE)
    shell recipe:   git init; git fetch --depth 1 git://... <pin>; git checkout FETCH_HEAD; git apply each patch

Prints both medians and their ratios (bar: time <= 1.2x, bytes <= 2x the recipe's).

    python bench/cold_start_bench.py [--patches 30] [--runs 3]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from apply_bench import time_recipe  # bench/ is on sys.path when this script runs

from patchctl import git
from patchctl.upstream.store import Store

URL = "pypi-sdist:llama-cpp-python?versions=0.3.30,0.3.33&subdir=vendor/llama.cpp"
PIN = "296d9b60b97f6eeb1df161fefb921a44c04a1122"
REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for(port: int, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and process.poll() is None:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        time.sleep(0.05)
    raise SystemExit("git daemon did not start")


class CountingRelay:
    """A TCP relay to the daemon that counts the bytes the server sends to clients."""

    def __init__(self, target_port: int):
        self.target_port = target_port
        self.server_bytes = 0
        self.connections = 0
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target_port))
            with self._lock:
                self.connections += 1
            threading.Thread(target=self._pipe, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, True), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket, count: bool) -> None:
        try:
            while data := source.recv(1 << 16):
                if count:
                    with self._lock:
                        self.server_bytes += len(data)
                sink.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                sink.shutdown(socket.SHUT_WR)

    def take(self) -> tuple[int, int]:
        """Bytes sent and connections made since the last call."""
        time.sleep(0.2)  # let the relay threads drain
        with self._lock:
            taken = (self.server_bytes, self.connections)
            self.server_bytes = self.connections = 0
        return taken

    def close(self) -> None:
        self._listener.close()


@contextlib.contextmanager
def served(repo: Path) -> Iterator[CountingRelay]:
    port = free_port()
    daemon = subprocess.Popen(
        ["git", "daemon", "--reuseaddr", "--export-all", f"--base-path={repo.parent}", "--listen=127.0.0.1"]
        + [f"--port={port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=git.isolated_env(),
    )
    try:
        wait_for(port, daemon)
        relay = CountingRelay(port)
        try:
            yield relay
        finally:
            relay.close()
    finally:
        daemon.terminate()
        daemon.wait(timeout=10)


def make_series(upstream: Path, project: Path, count: int) -> list[Path]:
    """COUNT patches on top of the pin, each editing a different source file, made by git itself."""
    scratch = project.parent / "scratch"
    git.run(["clone", "-q", "--no-checkout", str(upstream), str(scratch)], project.parent)
    git.run(["checkout", "-q", "--detach", PIN], scratch)
    sources = sorted((scratch / "src").glob("*.cpp")) + sorted((scratch / "src").glob("*.h"))
    for index, source in enumerate(sources[:count]):
        lines = source.read_text().splitlines(keepends=True)
        lines.insert(len(lines) // 2, f"// bench patch {index}: downstream change\n")
        source.write_text("".join(lines))
        git.commit_all(scratch, f"Bench patch {index}\n\nEdits {source.name}.")
    out = project / "patches" / "bench"
    git.run(["format-patch", "-q", "--zero-commit", "--no-signature", "--full-index", "-o", str(out), PIN], scratch)
    shutil.rmtree(scratch)
    (project / "matrix.yaml").write_text(
        textwrap.dedent(
            f"""\
            version: 1
            upstreams:
              llama.cpp: {{url: "{URL}", branch: main, pin: {PIN}}}
            series:
              bench: {{upstream: llama.cpp, dir: patches/bench}}
            """
        )
    )
    return sorted(out.glob("*.patch"))


def cold_patchctl(project: Path, url: str, cache: Path) -> float:
    shutil.rmtree(cache, ignore_errors=True)
    shutil.rmtree(project / ".patchctl", ignore_errors=True)
    env = {**os.environ, "PATCHCTL_CACHE": str(cache), "PYTHONPATH": str(REPO)}
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "patchctl", "-C", str(project), "--upstream-url", f"llama.cpp={url}", "apply"],
        check=True,
        capture_output=True,
        env=env,
    )
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--patches", type=int, default=30)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    source = Path(Store.resolve_source(URL))  # the sdist-built repository (cached; not timed)
    with tempfile.TemporaryDirectory(prefix="patchctl-cold-") as tmp:
        root = Path(tmp)
        served_repo = root / "served" / "llama.cpp"
        git.run(["clone", "-q", "--bare", "--mirror", str(source), str(served_repo)], root)
        for key, value in (("uploadpack.allowFilter", "true"), ("uploadpack.allowAnySHA1InWant", "true")):
            git.run(["config", key, value], served_repo)
        # Served packed, as a hosting service does: upload-pack reuses stored deltas.
        git.run(["repack", "-a", "-d", "-q"], served_repo)
        project = root / "project"
        project.mkdir()
        patches = make_series(served_repo, project, args.patches)
        with served(served_repo) as relay:
            url = f"git://127.0.0.1:{relay.port}/llama.cpp"
            ours, ours_io, recipe, recipe_io = [], [], [], []
            for _ in range(args.runs):
                ours.append(cold_patchctl(project, url, root / "cache"))
                ours_io.append(relay.take())
                shutil.rmtree(root / "recipe", ignore_errors=True)
                recipe.append(time_recipe(url, patches, root / "recipe", PIN))
                recipe_io.append(relay.take())
    a, b = statistics.median(ours), statistics.median(recipe)
    a_bytes, b_bytes = (statistics.median(n for n, _ in io) for io in (ours_io, recipe_io))
    a_conn, b_conn = (max(c for _, c in io) for io in (ours_io, recipe_io))
    print(f"series: {len(patches)} patches on llama.cpp {PIN[:12]} over git:// ({args.runs} runs, median)")
    print(f"cold patchctl apply (empty cache, blobless):      {a:7.3f} s  {a_bytes / 1e6:8.2f} MB  {a_conn} fetch(es)")
    print(
        f"shallow recipe (fetch --depth 1, checkout, apply):  {b:7.3f} s  {b_bytes / 1e6:8.2f} MB  {b_conn} fetch(es)"
    )
    print(f"ratio time  patchctl / recipe: {a / b:.3f}  (bar <= 1.2)")
    print(f"ratio bytes patchctl / recipe: {a_bytes / b_bytes:.3f}  (bar <= 2.0)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
