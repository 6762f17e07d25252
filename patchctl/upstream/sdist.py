"""Turn llama-cpp-python sdists from PyPI into a local upstream git repository.

These machines reach PyPI but not GitHub, and every `llama-cpp-python` sdist vendors a
full llama.cpp tree under `vendor/llama.cpp`. An upstream URL of the form

    pypi-sdist:llama-cpp-python?versions=0.3.30,0.3.33&subdir=vendor/llama.cpp

names such a repository: one commit per version, in the order given, on branch `main`,
each version also tagged `v<version>`. Commits use a fixed identity and fixed dates and
the trees take their modes from the archive, so the commit ids are the same on every
machine: a pin in matrix.yaml can name them.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import urllib.parse
import zlib
from pathlib import Path

from .. import git
from ..confined import Root
from ..errors import EnvironmentFailure
from ..output import progress
from ..paths import cache_dir
from ..project.upstream_checks import SdistSpec, parse_url

DEFAULT_INDEX = "https://pypi.org/simple/"
# Day-spaced fixed dates: reproducible, and ordered like the versions they stand for.
BASE_EPOCH = 1700000000


def materialize(url: str) -> Path:
    """The local git repository for URL, built once from cached sdists."""
    spec = parse_url(url)
    digest = hashlib.sha256(spec.url.encode()).hexdigest()[:12]
    cache = Root(cache_dir(), "the cache")
    repo = cache.path / "sdist-repos" / f"{spec.package}-{digest}"
    cache.mkdirs(repo.parent)
    from filelock import FileLock  # here: only an sdist upstream needs it (start-up)

    with FileLock(str(repo) + ".lock"):
        if cache.lstat(repo / "HEAD") is not None:
            return repo
        staging = repo.parent / cache.make_private_dir(repo.parent, f".{repo.name}.")
        try:
            with progress.step(f"building the {spec.package} upstream from its sdists"):
                _build_repo(spec, staging, cache)
            cache.rename(staging, repo)
        finally:
            cache.remove_tree(staging)
    return repo


def _build_repo(spec: SdistSpec, target: Path, cache: Root) -> None:
    work = target / "work"
    cache.mkdirs(work)
    git.run(["init", "-q", "-b", "main", "."], work)
    for index, version in enumerate(spec.versions):
        archive = fetch_sdist(spec.package, version)
        for name in cache.listdir(work) or []:
            if name != ".git":
                cache.remove_tree(work / name)
        _extract_subdir(archive, spec.subdir, work)
        # An empty index makes git hash every file: stat data (size, archive mtime) can match
        # between two versions whose contents differ.
        git.run(["read-tree", "--empty"], work)
        git.run(["add", "-A", "-f", "."], work)
        date = f"{BASE_EPOCH + index * 86400} +0000"
        git.run(
            ["commit", "-q", "--allow-empty", "--no-verify", "-m", f"{spec.package} {version}: {spec.subdir}"],
            work,
            env={"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date},
        )
        git.run(["tag", f"v{version}"], work)
    # Keep only the bare repository: the work tree was a means to build commits.
    bare = target / "bare"
    git.run(["clone", "-q", "--bare", str(work), str(bare)], target)
    git.run([f"--git-dir={bare}", "remote", "remove", "origin"], target)
    cache.remove_tree(work)
    for name in cache.listdir(bare) or []:
        cache.rename(bare / name, target / name)
    cache.rmdir(bare)


def _extract_subdir(archive: Path, subdir: str, dest: Path) -> None:
    """Extract ARCHIVE's `<top>/<subdir>/` into DEST, refusing anything that escapes it."""
    # Imported here: every command imports this module (through the store), few read an archive.
    import tarfile

    from ..confined import tar as safetar

    cache = Root(archive.parent, "the cache")
    try:
        with cache.open_regular(archive.name) as (handle, _), tarfile.open(fileobj=handle, mode="r:gz") as tar:
            members = tar.getmembers()
            if not members:
                raise EnvironmentFailure(f"{archive}: empty archive")
            top = members[0].name.split("/")[0]
            prefix = f"{top}/{subdir}/"
            chosen = []
            for member in members:
                if not member.name.startswith(prefix):
                    continue
                relative = member.name[len(prefix) :]
                # The sdist carries the submodule's `.git` link; git metadata is never upstream content.
                if not relative or member.isdir() or ".git" in relative.split("/"):
                    continue
                chosen.append(safetar.Entry(member, relative))
            if not chosen:
                raise EnvironmentFailure(f"{archive}: has no {subdir}/ directory")
            safetar.extract(tar, chosen, dest)
    except safetar.UnsafeMember as exc:
        raise EnvironmentFailure(f"{archive.name}: unsafe member refused: {exc}") from None
    except (tarfile.TarError, EOFError, zlib.error) as exc:
        raise EnvironmentFailure(f"{archive.name}: not a readable .tar.gz: {exc}") from None


def sdist_filename(package: str, version: str) -> str:
    return f"{re.sub(r'[-_.]+', '_', package).lower()}-{version}.tar.gz"


def fetch_sdist(package: str, version: str) -> Path:
    """The sdist of PACKAGE==VERSION from the cache, else from the package index.

    Only the archive is fetched, never built: no package code runs. The index must give its
    sha256 (the simple index's `#sha256=` fragment, or the JSON API's digests) and the
    download must match it; a file without a digest is refused."""
    cache = Root(cache_dir(), "the cache")
    directory = cache.path / "sdists"
    cache.mkdirs(directory)
    path = directory / sdist_filename(package, version)
    from filelock import FileLock  # here: only an sdist upstream needs it (start-up)

    with FileLock(str(path) + ".lock"):
        if cache.lstat(path) is not None:
            return path
        try:
            url, sha256 = _find_in_simple_index(package, version)
        except EnvironmentFailure as simple_failure:
            # Some mirrors serve only the JSON API; its answer must carry a digest too.
            try:
                url, sha256 = _find_in_json_api(package, version)
            except EnvironmentFailure as json_failure:
                raise EnvironmentFailure(f"{simple_failure}; JSON API: {json_failure}") from None
        with progress.step(f"downloading {package} {version}"):
            data = _download(url)
        if hashlib.sha256(data).hexdigest() != sha256.lower():
            raise EnvironmentFailure(f"{url}: sha256 mismatch, refusing the download")
        cache.write_bytes(path, data)
    return path


def _links(page: str) -> list[str]:
    """The href of every <a> of the HTML PAGE."""
    # Imported here: every command imports this module (through the store), few read an index page.
    import html.parser

    class LinkParser(html.parser.HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.links: list[str] = []

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag == "a":
                self.links += [v for k, v in attrs if k == "href" and v]

    parser = LinkParser()
    parser.feed(page)
    return parser.links


def _index_url() -> str:
    return os.environ.get("PIP_INDEX_URL") or DEFAULT_INDEX


def _normalized(package: str) -> str:
    return re.sub(r"[-_.]+", "-", package).lower()


def _find_in_simple_index(package: str, version: str) -> tuple[str, str]:
    """URL and sha256 of the sdist on the PEP 503 simple index."""
    base = _index_url().rstrip("/") + "/"
    page_url = urllib.parse.urljoin(base, _normalized(package) + "/")
    links = _links(_download(page_url).decode("utf-8", errors="replace"))
    wanted = sdist_filename(package, version)
    for link in links:
        url, _, fragment = urllib.parse.urljoin(page_url, link).partition("#")
        if urllib.parse.unquote(url.rsplit("/", 1)[-1]).lower() != wanted.lower():
            continue
        if not re.fullmatch(r"sha256=[0-9a-fA-F]{64}", fragment):
            raise EnvironmentFailure(f"{wanted} on {page_url} has no sha256 digest; refusing an unverifiable file")
        return url, fragment[len("sha256=") :]
    raise EnvironmentFailure(f"{wanted} not found on {page_url}")


def _json_api_url(package: str, version: str) -> str:
    """The JSON API beside the simple index: `<root>/simple/` serves `<root>/pypi/P/V/json`."""
    base = _index_url().rstrip("/")
    root = base[: -len("/simple")] if base.endswith("/simple") else base
    return f"{root}/pypi/{_normalized(package)}/{urllib.parse.quote(version)}/json"


def _find_in_json_api(package: str, version: str) -> tuple[str, str]:
    """URL and sha256 of the sdist from the PyPI JSON API."""
    api_url = _json_api_url(package, version)
    try:
        release = json.loads(_download(api_url))
        files = release["urls"]
        wanted = sdist_filename(package, version).lower()
        for entry in files:
            if str(entry.get("filename", "")).lower() != wanted:
                continue
            sha256 = (entry.get("digests") or {}).get("sha256")
            if not isinstance(sha256, str) or not re.fullmatch(r"[0-9a-fA-F]{64}", sha256):
                raise EnvironmentFailure(f"{wanted} on {api_url} has no sha256 digest; refusing an unverifiable file")
            return urllib.parse.urljoin(api_url, str(entry["url"])), sha256
    except (ValueError, KeyError, TypeError, AttributeError):
        raise EnvironmentFailure(f"{api_url}: not a JSON API answer") from None
    raise EnvironmentFailure(f"{sdist_filename(package, version)} not listed on {api_url}")


def _download(url: str) -> bytes:
    import urllib.error
    import urllib.request  # here, not at the top: only a download needs it (and it costs start-up)

    scheme = urllib.parse.urlsplit(url).scheme.lower()
    if scheme not in ("https", "http", "file"):
        raise EnvironmentFailure(f"download failed: {url}: only https, http and file URLs are fetched")
    if scheme == "file" and url.endswith("/"):
        url += "index.html"  # a file:// index is a directory tree of pages, as pip reads it
    try:
        with urllib.request.urlopen(url, timeout=120) as response:
            return response.read()
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise EnvironmentFailure(f"download failed: {url}: {getattr(exc, 'reason', exc)}") from None
