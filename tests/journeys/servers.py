"""Upstreams that go away: git's smart HTTP protocol over TLS (`git http-backend`, as a git
host serves it, partial clones included) and a PEP 503 package index, each on 127.0.0.1 for
as long as the test keeps it up; `stop()` makes the network unreachable."""

from __future__ import annotations

import hashlib
import http.server
import os
import ssl
import subprocess
import threading
from pathlib import Path

from patchctl import git
from patchctl.upstream import sdist


class _Server:
    def __init__(self, handler: type[http.server.BaseHTTPRequestHandler], context: ssl.SSLContext | None = None):
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        if context is not None:
            self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def self_signed_certificate(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 (and its key), which git trusts through GIT_SSL_CAINFO."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1"]
        + ["-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
    return cert, key


class GitHost(_Server):
    """REPOSITORY (a working repository) served as https://127.0.0.1:PORT/up.git."""

    def __init__(self, repository: Path, directory: Path):
        served = directory / "up.git"
        git.run(["clone", "-q", "--bare", str(repository), str(served)], directory)
        for key in ("uploadpack.allowFilter", "uploadpack.allowAnySHA1InWant"):
            git.run([f"--git-dir={served}", "config", key, "true"], directory)  # (a bare repository: named)
        self.cert, key = self_signed_certificate(directory)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert, key)
        self.requests: list[str] = []
        requests = self.requests

        class Backend(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self._cgi()

            def do_POST(self) -> None:
                self._cgi()

            def _cgi(self) -> None:
                path, _, query = self.path.partition("?")
                requests.append(f"{self.command} {path}")
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                env = {
                    "PATH": os.environ["PATH"],
                    "GIT_PROJECT_ROOT": str(directory),
                    "GIT_HTTP_EXPORT_ALL": "1",
                    "GIT_CONFIG_NOSYSTEM": "1",
                    "GIT_CONFIG_GLOBAL": os.devnull,
                    "PATH_INFO": path,
                    "QUERY_STRING": query,
                    "REQUEST_METHOD": self.command,
                    "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                    "CONTENT_LENGTH": str(len(body)),
                    "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
                    "HTTP_GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
                    "REMOTE_ADDR": "127.0.0.1",
                }
                out = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True).stdout
                head, _, payload = out.partition(b"\r\n\r\n")
                status, headers = 200, []
                for line in head.decode("latin-1").split("\r\n"):
                    name, _, value = line.partition(":")
                    if name.lower() == "status":
                        status = int(value.split()[0])
                    elif name:
                        headers.append((name, value.strip()))
                self.send_response(status)
                for name, value in headers:
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: object) -> None:
                pass

        super().__init__(Backend, context)
        self.url = f"https://127.0.0.1:{self.port}/up.git"


class PackageIndex(_Server):
    """A PEP 503 simple index of sdists at http://127.0.0.1:PORT/simple/ (what PIP_INDEX_URL names)."""

    def __init__(self, directory: Path, package: str, archives: dict[str, Path]):
        (directory / "simple" / package).mkdir(parents=True)
        links = []
        for version, archive in archives.items():
            name = sdist.sdist_filename(package, version)
            (directory / name).write_bytes(archive.read_bytes())
            links.append(f'<a href="../../{name}#sha256={hashlib.sha256(archive.read_bytes()).hexdigest()}">{name}</a>')
        (directory / "simple" / package / "index.html").write_text("\n".join(links) + "\n")

        class Files(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, directory=str(directory), **kwargs)

            def log_message(self, *args: object) -> None:
                pass

        super().__init__(Files)
        self.url = f"http://127.0.0.1:{self.port}/simple/"
