"""What the rehearsal's stand-in actions do, one subcommand per action (stdlib only: it runs
with the rehearsal's host Python, whatever Python a job has put on PATH).

Each stand-in does locally what the real action does on github.com, for the inputs the rendered
workflows use, and appends one JSON line per call to $JOURNEY_STORE/actions.jsonl:

- checkout: clones the repository from the local origin $JOURNEY_GITHUB/OWNER/NAME.git at
  github.sha (a branch ref is checked out as that branch, a pull request's merge ref detached),
  with the history fetch-depth asks for;
- setup-python: a fresh virtual environment per job with no packages of its own that sees the
  host's site-packages (so `pip install` of patchctl resolves its dependencies offline and
  never writes into the host's environment); pip runs with no index, no build isolation and
  no dependency resolution (the host's packages are the runner's preinstalled ones);
- cache, cache/restore, cache/save: tarballs in $JOURNEY_STORE/actions-cache, keyed and
  versioned by key and paths as GitHub does (restore-keys by prefix, newest first; a run reads
  the entries of its own ref and of the default branch; a key is never saved twice);
- upload-artifact, download-artifact: directories $JOURNEY_STORE/artifacts/RUN_ID/NAME;
- docker/metadata-action: tags and labels for the tag types the templates use;
- docker/build-push-action: `docker build` (the legacy builder: no buildx here), `push` recorded
  in $JOURNEY_STORE/registry.jsonl (no registry is reachable), refused as a registry refuses
  it: a tag is needed, and a login to the tag's registry in the same job;
- docker/login-action: needs a username and a password, remembers the registry for the job;
- docker/setup-buildx-action: records, nothing else;
- create-github-app-token: a token the gh stand-in knows as the app.
"""

from __future__ import annotations

import fnmatch
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path


def env(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def action_input(name: str, default: str = "") -> str:
    """An input as a runner passes it (INPUT_NAME, hyphens kept), or as a composite stand-in does (underscores)."""
    key = "INPUT_" + name.upper().replace(" ", "_")
    value = os.environ.get(key)
    if value is None:
        value = os.environ.get(key.replace("-", "_"))
    return default if value is None else value


def lines(value: str) -> list[str]:
    return [line.strip() for line in value.splitlines() if line.strip() and not line.strip().startswith("#")]


def truthy(value: str) -> bool:
    return value.strip().lower() == "true"


def store() -> Path:
    return Path(env("JOURNEY_STORE"))


def record(action: str, **fields: object) -> None:
    entry = {"action": action, "job": env("GITHUB_JOB"), "run_id": env("GITHUB_RUN_ID"), **fields}
    with open(store() / "actions.jsonl", "a") as log:
        log.write(json.dumps(entry, sort_keys=True) + "\n")


def set_output(name: str, value: str) -> None:
    with open(env("GITHUB_OUTPUT"), "a") as out:
        if "\n" in value:
            out.write(f"{name}<<STANDIN_EOF\n{value}\nSTANDIN_EOF\n")
        else:
            out.write(f"{name}={value}\n")


def fail(message: str) -> None:
    print(f"::error::{message}")
    sys.exit(1)


def git(*args: str, cwd: Path | None = None) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        fail(f"git {' '.join(args)}: {proc.stderr.strip()}")
    return proc.stdout


def machine_root() -> Path:
    """The job's own machine: act gives every job a fresh directory holding RUNNER_TEMP."""
    return Path(env("RUNNER_TEMP")).parent


# ---------------------------------------------------------------- checkout


def checkout() -> None:
    repository = action_input("repository") or env("GITHUB_REPOSITORY")
    ref = action_input("ref")
    depth = action_input("fetch-depth", "1")
    dest = Path(env("GITHUB_WORKSPACE"), action_input("path"))
    origin = Path(env("JOURNEY_GITHUB"), repository + ".git")
    if not origin.is_dir():
        fail(f"checkout: no repository {repository} on the rehearsal's github ({origin})")
    if not ref and repository == env("GITHUB_REPOSITORY"):
        ref, sha = env("GITHUB_REF"), env("GITHUB_SHA")
    else:
        ref = ref or "HEAD"
        sha = git("--git-dir", str(origin), "rev-parse", ref + "^{commit}").strip()
    dest.mkdir(parents=True, exist_ok=True)
    git("init", "-q", cwd=dest)
    git("remote", "add", "origin", str(origin), cwd=dest)
    depth_args = [] if depth == "0" else ["--depth", depth]
    if depth == "0":
        git("fetch", "-q", "--prune", "--tags", "origin", "+refs/heads/*:refs/remotes/origin/*", cwd=dest)
    if ref.startswith("refs/heads/"):
        branch = ref.removeprefix("refs/heads/")
        git("fetch", "-q", *depth_args, "origin", f"+{sha}:refs/remotes/origin/{branch}", cwd=dest)
        git("checkout", "-q", "--force", "-B", branch, f"refs/remotes/origin/{branch}", cwd=dest)
    else:
        local = ref if ref.startswith("refs/") else "refs/remotes/origin/checkout"
        if ref.startswith("refs/pull/"):
            local = "refs/remotes/pull/" + ref.removeprefix("refs/pull/")
        git("fetch", "-q", *depth_args, "origin", f"+{sha}:{local}", cwd=dest)
        git("checkout", "-q", "--force", "--detach", sha, cwd=dest)
    # A fresh machine per job: its user cache (~/.cache, where patchctl and pip keep theirs) starts empty.
    home_cache = machine_root() / "home" / ".cache"
    home_cache.mkdir(parents=True, exist_ok=True)
    with open(env("GITHUB_ENV"), "a") as out:
        out.write(f"XDG_CACHE_HOME={home_cache}\n")
    set_output("ref", ref)
    set_output("commit", sha)
    record("actions/checkout", repository=repository, ref=ref, sha=sha, fetch_depth=depth)


# ---------------------------------------------------------------- setup-python


def setup_python() -> None:
    version = action_input("python-version")
    venv = machine_root() / "toolcache" / "python"
    base = Path(env("JOURNEY_BASE_PYTHON"))
    if not (venv / "bin" / "python").exists():
        subprocess.run([str(base), "-m", "venv", "--without-pip", str(venv)], check=True)
        site = subprocess.run(
            [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        # The host's packages (pip, setuptools, the dependencies) after the job's own: what the job
        # installs wins, and nothing it installs lands in the host's environment.
        Path(site, "zz-journey-host-site.pth").write_text(
            "".join(path + "\n" for path in env("JOURNEY_HOST_SITE").split(os.pathsep) if path)
        )
    found = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    if version and not found.startswith(version.strip()):
        print(f"::warning::setup-python stand-in: python-version {version} asked, the host has {found}")
    with open(env("GITHUB_PATH"), "a") as out:
        out.write(f"{venv / 'bin'}\n")
    with open(env("GITHUB_ENV"), "a") as out:
        # The host's packages are this runner's preinstalled ones: pip installs patchctl itself
        # (no index, no build isolation: offline) and trusts them for its dependencies.
        out.write(
            f"pythonLocation={venv}\nPIP_NO_INDEX=1\nPIP_NO_BUILD_ISOLATION=0\nPIP_NO_DEPS=1\nPIP_DISABLE_PIP_VERSION_CHECK=1\n"
        )
    set_output("python-version", found)
    set_output("python-path", str(venv / "bin" / "python"))
    record("actions/setup-python", python_version=version, found=found)


# ---------------------------------------------------------------- cache


def _cache_paths() -> list[str]:
    return [os.path.expanduser(p) for p in lines(action_input("path"))]


def _cache_version(paths: list[str]) -> str:
    """GitHub versions an entry by its paths: a restore with other paths misses. The job's
    machine directory is the same home on every machine, so it is left out of the version."""
    root = str(machine_root())
    return hashlib.sha256("|".join(p.replace(root, "~runner") for p in paths).encode()).hexdigest()[:16]


def _cache_index() -> list[dict]:
    path = store() / "actions-cache" / "index.json"
    return json.loads(path.read_text()) if path.exists() else []


def _visible(entry: dict) -> bool:
    # A run reads the caches of its own ref and those of the default branch.
    default = "refs/heads/" + env("JOURNEY_DEFAULT_BRANCH", "main")
    return entry["ref"] in (env("GITHUB_REF"), default)


# The cache is the rehearsal's own; Python before 3.11.4 (Debian 12's 3.11.2) has no extraction
# filters and trusts every member already.
TRUSTED = {"filter": "fully_trusted"} if hasattr(tarfile, "fully_trusted_filter") else {}


def cache_restore(*, lookup_only: bool = False) -> str:
    key = action_input("key")
    paths = _cache_paths()
    version = _cache_version(paths)
    candidates = [e for e in _cache_index() if e["version"] == version and _visible(e)]
    match = next((e for e in candidates if e["key"] == key), None)
    if match is None:
        for prefix in lines(action_input("restore-keys")):
            found = [e for e in candidates if e["key"].startswith(prefix)]
            if found:
                match = max(found, key=lambda e: e["created"])
                break
    if match is not None and not lookup_only:
        root = machine_root()
        with tarfile.open(store() / "actions-cache" / match["file"]) as tar:
            for member in tar.getmembers():
                target = str(member.name).replace("~runner", str(root), 1)
                member.name = target.lstrip("/")
                tar.extract(member, "/", **TRUSTED)
    exact = match is not None and match["key"] == key
    set_output("cache-hit", "true" if exact else "false")
    set_output("cache-primary-key", key)
    set_output("cache-matched-key", match["key"] if match else "")
    with open(env("GITHUB_STATE", os.devnull), "a") as state:
        state.write(f"CACHE_KEY={key}\nCACHE_RESULT={match['key'] if match else ''}\n")
    record("actions/cache/restore", key=key, matched=match["key"] if match else None, paths=paths)
    return match["key"] if match else ""


def cache_save(key: str | None = None) -> None:
    key = key or action_input("key")
    paths = _cache_paths()
    version = _cache_version(paths)
    index = _cache_index()
    if any(e["key"] == key and e["version"] == version for e in index):
        print(
            f"::warning::Failed to save: Unable to reserve cache with key {key},"
            " another job may be creating this cache."
        )
        record("actions/cache/save", key=key, saved=False, paths=paths)
        return
    existing = [p for p in paths if os.path.exists(p)]
    if not existing:
        print(
            "::warning::Path Validation Error: Path(s) specified in the action for caching do(es) not exist,"
            " hence no cache is being saved."
        )
        record("actions/cache/save", key=key, saved=False, paths=paths)
        return
    root = str(machine_root())
    (store() / "actions-cache").mkdir(parents=True, exist_ok=True)
    name = hashlib.sha256(f"{key}|{version}".encode()).hexdigest()[:24] + ".tar"
    with tarfile.open(store() / "actions-cache" / name, "w") as tar:
        for path in existing:
            tar.add(path, arcname=path.replace(root, "~runner", 1))
    index = _cache_index()
    index.append({"key": key, "version": version, "ref": env("GITHUB_REF"), "file": name, "created": time.time_ns()})
    (store() / "actions-cache" / "index.json").write_text(json.dumps(index, indent=1))
    record("actions/cache/save", key=key, saved=True, paths=paths)


def cache_post() -> None:
    """actions/cache's post step: save under the primary key unless it was an exact hit."""
    key, result = env("STATE_CACHE_KEY"), env("STATE_CACHE_RESULT")
    if not key:
        return
    if result == key:
        print(f"Cache hit occurred on the primary key {key}, not saving cache.")
        return
    cache_save(key)


# ---------------------------------------------------------------- artifacts


def _artifact_dir(run_id: str, name: str) -> Path:
    return store() / "artifacts" / run_id / name


def _literal_prefix(pattern: str) -> str:
    """The directory part of PATTERN before its first wildcard."""
    cut = re.search(r"[*?\[]", pattern)
    head = pattern[: cut.start()] if cut else pattern
    return head if not cut else os.path.dirname(head.rstrip("/")) or "/"


def upload_artifact() -> None:
    name = action_input("name", "artifact")
    hidden = truthy(action_input("include-hidden-files", "false"))
    missing = action_input("if-no-files-found", "warn")
    workspace = Path(env("GITHUB_WORKSPACE"))
    includes, excludes = [], []
    for pattern in lines(action_input("path")):
        (excludes if pattern.startswith("!") else includes).append(pattern.lstrip("!"))
    files: dict[Path, None] = {}
    roots = []
    for pattern in includes:
        absolute = pattern if os.path.isabs(pattern) else str(workspace / pattern)
        roots.append(os.path.normpath(_literal_prefix(absolute)))
        for match in sorted(glob.glob(absolute, recursive=True, include_hidden=True)):
            path = Path(match)
            found = [p for p in path.rglob("*") if p.is_file()] if path.is_dir() else [path] if path.is_file() else []
            for file in found:
                files[file.resolve() if file.is_symlink() else file] = None
    kept = []
    for file in files:
        parts = file.parts
        if not hidden and any(part.startswith(".") for part in parts[len(Path(roots[0]).parts) :]):
            continue
        rel = str(file)
        if any(fnmatch.fnmatch(rel, p if os.path.isabs(p) else str(workspace / p)) for p in excludes):
            continue
        kept.append(file)
    if not kept:
        paths = action_input("path").strip()
        message = f"No files were found with the provided path: {paths}. No artifacts will be uploaded."
        record("actions/upload-artifact", name=name, files=[])
        if missing == "error":
            fail(message)
        if missing == "warn":
            print(f"::warning::{message}")
        return
    # The root is the paths' least common ancestor, as actions/upload-artifact computes it.
    root = Path(os.path.commonpath(roots if len(roots) > 1 else [roots[0]]))
    if len(roots) == 1 and Path(roots[0]).is_file():
        root = Path(roots[0]).parent
    target = _artifact_dir(env("GITHUB_RUN_ID"), name)
    if target.exists():
        if not truthy(action_input("overwrite", "false")):
            fail(f"Failed to CreateArtifact: an artifact with this name already exists on the workflow run: {name}")
        shutil.rmtree(target)
    for file in kept:
        dest = target / file.relative_to(root)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(file, dest)
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sorted(target.rglob("*")) if p.is_file())).hexdigest()
    set_output("artifact-id", str(abs(hash((env("GITHUB_RUN_ID"), name))) % 10**9))
    set_output("artifact-digest", digest)
    set_output("artifact-url", f"https://github.com/{env('GITHUB_REPOSITORY')}/actions/runs/{env('GITHUB_RUN_ID')}")
    record(
        "actions/upload-artifact",
        name=name,
        files=sorted(str(p.relative_to(target)) for p in target.rglob("*") if p.is_file()),
    )


def download_artifact() -> None:
    name = action_input("name")
    pattern = action_input("pattern")
    merge = truthy(action_input("merge-multiple", "false"))
    run_id = action_input("run-id") or env("GITHUB_RUN_ID")
    dest = Path(env("GITHUB_WORKSPACE"), action_input("path"))
    run_dir = store() / "artifacts" / run_id
    available = sorted(p.name for p in run_dir.iterdir()) if run_dir.is_dir() else []
    if name:
        if name not in available:
            fail(f"Unable to download artifact(s): Artifact not found for name: {name}")
        chosen, into_own = [name], False
    else:
        chosen = [a for a in available if not pattern or fnmatch.fnmatchcase(a, pattern)]
        into_own = not merge
    for artifact in chosen:
        target = dest / artifact if into_own else dest
        shutil.copytree(run_dir / artifact, target, dirs_exist_ok=True)
    set_output("download-path", str(dest))
    record("actions/download-artifact", name=name, pattern=pattern, merge_multiple=merge, artifacts=chosen)


# ---------------------------------------------------------------- docker


def _event() -> dict:
    path = env("GITHUB_EVENT_PATH")
    return json.loads(Path(path).read_text()) if path and Path(path).exists() else {}


def _is_default_branch() -> bool:
    default = (_event().get("repository") or {}).get("default_branch")
    return bool(default) and env("GITHUB_REF") == f"refs/heads/{default}"


def _key_values(text: str) -> dict[str, str]:
    out = {}
    for part in text.split(","):
        if "=" in part:
            key, value = part.split("=", 1)
            out[key.strip()] = value.strip()
    return out


def metadata() -> None:
    images = lines(action_input("images"))
    flavor = {}
    for line in lines(action_input("flavor")):
        key, _, value = line.partition("=")
        flavor[key.strip()] = value.strip()
    ref, sha, event_name = env("GITHUB_REF"), env("GITHUB_SHA"), env("GITHUB_EVENT_NAME")
    default_branch = "true" if _is_default_branch() else "false"
    tags: list[tuple[int, str]] = []
    for line in lines(action_input("tags")):
        line = line.replace("{{is_default_branch}}", default_branch)
        kind, _, rest = line.partition(",")
        kind = kind.removeprefix("type=")
        attrs = _key_values(rest)
        if attrs.get("enable", "true") != "true":
            continue
        if kind == "raw":
            tags.append((200, attrs["value"]))
        elif kind == "ref":
            want = attrs.get("event")
            if want == "branch" and ref.startswith("refs/heads/"):
                tags.append((600, re.sub(r"[^a-zA-Z0-9._-]+", "-", ref.removeprefix("refs/heads/"))))
            elif want == "tag" and ref.startswith("refs/tags/"):
                tags.append((600, ref.removeprefix("refs/tags/")))
            elif want == "pr" and event_name.startswith("pull_request"):
                tags.append((600, "pr-" + str(_event().get("number", ""))))
        elif kind == "semver":
            match = re.fullmatch(r"refs/tags/v?(\d+\.\d+\.\d+)", ref)
            if match and attrs.get("pattern") == "{{version}}":
                tags.append((900, match.group(1)))
        elif kind == "sha":
            long = attrs.get("format") == "long"
            tags.append((100, "sha-" + (sha if long else sha[:7])))
        else:
            fail(f"metadata-action stand-in: tag type {kind!r} is not covered")
    prefix, suffix = flavor.get("prefix", ""), flavor.get("suffix", "")
    ordered = []
    for _, tag in sorted(tags, key=lambda t: -t[0]):
        full = prefix + tag + suffix
        if full not in ordered:
            ordered.append(full)
    # With no images, metadata-action outputs the bare tags.
    refs = [f"{image}:{tag}" for tag in ordered for image in images] if images else ordered
    labels = [
        f"org.opencontainers.image.revision={sha}",
        f"org.opencontainers.image.source=https://github.com/{env('GITHUB_REPOSITORY')}",
        f"org.opencontainers.image.version={ordered[0] if ordered else ''}",
    ]
    set_output("tags", "\n".join(refs))
    set_output("labels", "\n".join(labels))
    set_output("version", ordered[0] if ordered else "")
    set_output("json", json.dumps({"tags": refs, "labels": dict(label.split("=", 1) for label in labels)}))
    record("docker/metadata-action", tags=refs)


def _logins() -> Path:
    return machine_root() / "docker-logins"


def _registry_of(tag: str) -> str:
    """The registry a reference is pushed to, as docker reads it (docker.io when none is named)."""
    first = tag.split("/")[0]
    return first if "/" in tag and ("." in first or ":" in first or first == "localhost") else "docker.io"


def login() -> None:
    registry = action_input("registry") or "docker.io"
    if not action_input("username") or not action_input("password"):
        fail("Username and password required")
    with open(_logins(), "a") as out:
        out.write(registry + "\n")
    record("docker/login-action", registry=registry)
    print(f"Login Succeeded (stand-in: {registry})")


def setup_buildx() -> None:
    set_output("name", "rehearsal-builder")
    set_output("platforms", "linux/amd64")
    record("docker/setup-buildx-action")


def build_push() -> None:
    context = action_input("context") or "."
    workspace = Path(env("GITHUB_WORKSPACE"))
    file = action_input("file") or str(Path(context) / "Dockerfile")
    tags = lines(action_input("tags"))
    push = truthy(action_input("push", "false"))
    if push:
        if not tags:
            fail("buildx failed with: ERROR: tag is needed when pushing to registry")
        logged_in = set(_logins().read_text().split()) if _logins().exists() else set()
        for tag in tags:
            if _registry_of(tag) not in logged_in:
                fail(
                    f"failed to push {tag}: denied: requested access to the resource is denied"
                    f" (no login to {_registry_of(tag)})"
                )
    command = ["docker", "build", "--quiet", "-f", str(workspace / file)]
    for arg in lines(action_input("build-args")):
        command += ["--build-arg", arg]
    for label in lines(action_input("labels")):
        command += ["--label", label]
    for tag in tags:
        command += ["-t", tag]
    command.append(str(workspace / context))
    # The legacy builder (no buildx here) builds for the engine's own platform; the row's
    # platform is recorded with the image. The registry is a log: none is reachable.
    proc = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "DOCKER_BUILDKIT": "0"})
    print(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        fail(f"docker build failed with exit code {proc.returncode}")
    image_id = proc.stdout.strip().splitlines()[-1]
    if push:
        with open(store() / "registry.jsonl", "a") as log:
            for tag in tags:
                entry = {
                    "tag": tag,
                    "image": image_id,
                    "platform": action_input("platforms"),
                    "run_id": env("GITHUB_RUN_ID"),
                }
                log.write(json.dumps(entry, sort_keys=True) + "\n")
    set_output("imageid", image_id)
    set_output("digest", image_id)
    record("docker/build-push-action", tags=tags, image=image_id, push=push, platforms=action_input("platforms"))


def app_token() -> None:
    app = action_input("app-id") or action_input("client-id")
    if not app or not action_input("private-key"):
        fail("[@octokit/auth-app] appId option is required / private-key is required")
    slug = env("JOURNEY_APP_SLUG", "patchctl-bot")
    token = f"ghs_rehearsal_app_{slug}"
    print(f"::add-mask::{token}")
    set_output("token", token)
    set_output("app-slug", slug)
    set_output("installation-id", "1")
    record("actions/create-github-app-token", app=app, owner=action_input("owner"))


def upload_pages_artifact() -> None:
    """The site as GitHub Pages takes it: one tar of PATH, the run's artifact `github-pages`."""
    import tarfile

    name = action_input("name", "github-pages")
    site = Path(env("GITHUB_WORKSPACE")) / action_input("path", "_site/")
    if not site.is_dir() or not any(site.iterdir()):
        fail(f"tar: {action_input('path', '_site/')}: Cannot open: No such file or directory")
    target = _artifact_dir(env("GITHUB_RUN_ID"), name)
    target.mkdir(parents=True, exist_ok=True)
    with tarfile.open(target / "artifact.tar", "w") as archive:
        archive.add(site, arcname=".")
    set_output("artifact_id", str(abs(hash((env("GITHUB_RUN_ID"), name))) % 10**9))
    record("actions/upload-pages-artifact", name=name, files=sorted(p.name for p in site.iterdir()))


def deploy_pages() -> None:
    """A deployment of the run's `github-pages` artifact: refused when the run uploaded none."""
    name = action_input("artifact_name", "github-pages")
    archive = _artifact_dir(env("GITHUB_RUN_ID"), name) / "artifact.tar"
    if not archive.is_file():
        fail(f"No artifacts named {name} were found for this workflow run")
    owner, _, repo = env("GITHUB_REPOSITORY").partition("/")
    url = f"https://{owner}.github.io/{repo}/"
    set_output("page_url", url)
    record("actions/deploy-pages", artifact=name, page_url=url)


COMMANDS = {
    "checkout": checkout,
    "setup-python": setup_python,
    "cache-restore": cache_restore,
    "cache-save": cache_save,
    "cache-post": cache_post,
    "upload-artifact": upload_artifact,
    "download-artifact": download_artifact,
    "metadata": metadata,
    "login": login,
    "setup-buildx": setup_buildx,
    "build-push": build_push,
    "app-token": app_token,
    "upload-pages-artifact": upload_pages_artifact,
    "deploy-pages": deploy_pages,
}

if __name__ == "__main__":
    COMMANDS[sys.argv[1]]()
