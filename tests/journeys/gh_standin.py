"""`gh`, the GitHub CLI, for the rehearsal: answers the way `gh` answers github.com, from a
state file that outlives one workflow run, and records every call.

The rehearsal puts an executable `gh` on PATH that runs this file with the host's Python.
$JOURNEY_STORE/github.json holds each repository's issues, pull requests and labels;
$JOURNEY_STORE/gh.jsonl gets one line per call: the arguments, the body read from --body-file,
the repository and who called (from the token: GITHUB_TOKEN is `app/github-actions`, an
app's installation token is `app/SLUG`). The repository is GH_REPO, else the one whose
local origin the current directory's `origin` remote points at ($JOURNEY_GITHUB/OWNER/NAME.git).

Covered: `auth setup-git`, `label create`, `issue list|create|comment|close|edit|view`,
`pr list|create|edit|view|comment` (`--repo`/`-R` names another repository, as an upstream's pull
request a patch was submitted as: its pull requests are seeded in github.json, with their `state`
OPEN, MERGED or CLOSED), `workflow run WORKFLOW --ref REF [-f NAME=VALUE]`. `pr create` makes
refs/pull/N/head and refs/pull/N/merge in the origin, as GitHub does; `workflow run` asks for a
workflow_dispatch run (kept in the state's `dispatches`, with who asked: GitHub starts one even
for GITHUB_TOKEN, the rehearsal's test starts it). Anything else exits 1 with gh's "unknown
command" line, recorded.

Permissions: under a rehearsed run ($JOURNEY_WORKFLOW names the workflow file, act's $GITHUB_JOB
the job), a call made with GITHUB_TOKEN on the repository's own issues, pull requests, labels and
workflows needs the job's `permissions:` that github.com would ask for (`NEEDS`; a pull request's
checks need `checks: read` and `statuses: read`); without them it fails with GitHub's "Resource not
accessible by integration", recorded.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

GITHUB_TOKEN_LOGIN = "app/github-actions"


def store() -> Path:
    return Path(os.environ["JOURNEY_STORE"])


@contextmanager
def locked_state() -> Iterator[dict[str, Any]]:
    path = store() / "github.json"
    with open(store() / "github.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        state = json.loads(path.read_text()) if path.exists() else {}
        yield state
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=1, sort_keys=True))
        tmp.replace(path)


def caller() -> str:
    token = os.environ.get("GH_TOKEN") or os.environ.get("GITHUB_TOKEN") or ""
    if not token:
        return ""
    if token == os.environ.get("JOURNEY_GITHUB_TOKEN"):
        return GITHUB_TOKEN_LOGIN
    if token.startswith("ghs_rehearsal_app_"):
        return "app/" + token.removeprefix("ghs_rehearsal_app_")
    return "patchctl-bot"  # a personal access token: the user it belongs to


def repository(args: list[str]) -> str:
    named = option(args, "--repo", "-R")  # another repository than the current one's, as gh takes it
    if named:
        return named
    if os.environ.get("GH_REPO"):
        return os.environ["GH_REPO"]
    url = subprocess.run(["git", "remote", "get-url", "origin"], capture_output=True, text=True).stdout.strip()
    root = os.environ["JOURNEY_GITHUB"].rstrip("/") + "/"
    if url.startswith(root) and url.endswith(".git"):
        return url[len(root) : -len(".git")]
    sys.stderr.write(
        "failed to determine base repo: none of the git remotes configured for this repository"
        " point to a known GitHub host\n"
    )
    sys.exit(1)


def origin(repo: str) -> Path:
    return Path(os.environ["JOURNEY_GITHUB"], repo + ".git")


def option(args: list[str], *names: str, many: bool = False) -> Any:
    values = []
    for i, arg in enumerate(args):
        for name in names:
            if arg == name and i + 1 < len(args):
                values.append(args[i + 1])
            elif arg.startswith(name + "="):
                values.append(arg.split("=", 1)[1])
    if many:
        return [v for value in values for v in value.split(",") if v]
    return values[-1] if values else None


def body_of(args: list[str]) -> str | None:
    path = option(args, "--body-file", "-F")
    if path is not None:
        return sys.stdin.read() if path == "-" else Path(path).read_text()
    return option(args, "--body", "-b")


def positional(args: list[str], start: int) -> str | None:
    """The first argument after ARGS[:start] that is not an option or an option's value."""
    flags_without_value = {"--force", "--draft", "--web", "--fill"}
    i = start
    while i < len(args):
        if args[i].startswith("-"):
            i += 1 if args[i] in flags_without_value or "=" in args[i] else 2
            continue
        return args[i]
    return None


def emit(rows: Any, args: list[str]) -> None:
    """--json FIELDS [--jq EXPR], as gh prints them (jq does the filtering, as gh's built-in jq)."""
    fields = option(args, "--json")
    if fields is None:
        for row in rows if isinstance(rows, list) else [rows]:
            print(f"{row['number']}\t{row['title']}\t{row['state']}")
        return
    names = fields.split(",")
    shaped: Any = (
        [{k: r.get(k) for k in names} for r in rows] if isinstance(rows, list) else {k: rows.get(k) for k in names}
    )
    text = json.dumps(shaped)
    expr = option(args, "--jq", "-q")
    if expr is not None:
        text = subprocess.run(["jq", "-r", expr], input=text, capture_output=True, text=True, check=True).stdout
        sys.stdout.write(text)
    else:
        print(text)


def record(args: list[str], repo: str, body: str | None, result: Any = None, code: int = 0) -> None:
    entry = {
        "args": args,
        "repo": repo,
        "caller": caller(),
        "body": body,
        "result": result,
        "exit": code,
        "run_id": os.environ.get("GITHUB_RUN_ID"),
        "job": os.environ.get("GITHUB_JOB"),
    }
    with open(store() / "gh.jsonl", "a") as log:
        log.write(json.dumps(entry, sort_keys=True) + "\n")


def need_auth(args: list[str], repo: str) -> None:
    if not caller():
        sys.stderr.write(
            "gh: To use GitHub CLI in a GitHub Actions workflow, set the GH_TOKEN environment variable. Example:\n"
            "  env:\n    GH_TOKEN: ${{ github.token }}\n"
        )
        raise SystemExit(4)


# The job permission GITHUB_TOKEN needs for each call to its own repository (any one of them),
# as github.com checks it: write includes read. A pull request's checks need two more to read.
NEEDS: dict[tuple[str, str], tuple[tuple[str, str], ...]] = {
    ("issue", "list"): (("issues", "read"),),
    ("issue", "view"): (("issues", "read"),),
    ("issue", "create"): (("issues", "write"),),
    ("issue", "comment"): (("issues", "write"),),
    ("issue", "close"): (("issues", "write"),),
    ("issue", "edit"): (("issues", "write"),),
    ("label", "create"): (("issues", "write"), ("pull-requests", "write")),
    ("pr", "list"): (("pull-requests", "read"),),
    ("pr", "view"): (("pull-requests", "read"),),
    ("pr", "create"): (("pull-requests", "write"),),
    ("pr", "edit"): (("pull-requests", "write"),),
    ("pr", "comment"): (("pull-requests", "write"), ("issues", "write")),
    ("workflow", "run"): (("actions", "write"),),
}
CHECKS_FIELD = "statusCheckRollup"
LEVELS = {"none": 0, "read": 1, "write": 2}


def granted(scope: str) -> int:
    """GITHUB_TOKEN's level for SCOPE in the running job: its `permissions:` (the workflow's where
    the job has none; GitHub's permissive default where neither has any), from the workflow file
    the rehearsal names ($JOURNEY_WORKFLOW) and act's $GITHUB_JOB."""
    import yaml

    document = yaml.safe_load(Path(os.environ["JOURNEY_WORKFLOW"]).read_text())
    job = (document.get("jobs") or {}).get(os.environ.get("GITHUB_JOB", "")) or {}
    given = job["permissions"] if "permissions" in job else document.get("permissions", "write-all")
    if isinstance(given, str):
        return {"write-all": 2, "read-all": 1}.get(given, 0)
    return LEVELS.get(str((given or {}).get(scope, "none")), 0)


def refuse_beyond_permissions(args: list[str]) -> None:
    """A call GITHUB_TOKEN may not make in this job fails as github.com fails it (exit 1). Only
    under a rehearsed workflow run, for GITHUB_TOKEN, on the repository's own issues and pulls."""
    if not os.environ.get("JOURNEY_WORKFLOW") or caller() != GITHUB_TOKEN_LOGIN or option(args, "--repo", "-R"):
        return
    wanted = [NEEDS[(args[0], args[1])]] if (args[0], args[1]) in NEEDS else []
    if args[:2] == ["pr", "list"] and CHECKS_FIELD in (option(args, "--json") or "").split(","):
        wanted += [(("checks", "read"),), (("statuses", "read"),)]
    for choices in wanted:
        if not any(granted(scope) >= LEVELS[level] for scope, level in choices):
            sys.stderr.write(
                "GraphQL: Resource not accessible by integration "
                f"(the job {os.environ.get('GITHUB_JOB')} has no {' or '.join(f'{s}: {lv}' for s, lv in choices)})\n"
            )
            raise SystemExit(1)


def labels_of(names: list[str]) -> list[dict[str, str]]:
    return [{"name": n} for n in names]


def new_number(repo_state: dict[str, Any]) -> int:
    # Issues and pull requests share one sequence of numbers, as on GitHub.
    repo_state["next"] = repo_state.get("next", 1) + 1
    return repo_state["next"] - 1


def url(repo: str, kind: str, number: int) -> str:
    return f"https://github.com/{repo}/{kind}/{number}"


def git_bare(repo: str, *args: str) -> str:
    return subprocess.run(
        ["git", "--git-dir", str(origin(repo)), *args], capture_output=True, text=True, check=True
    ).stdout


def write_pull_refs(repo: str, pull: dict[str, Any]) -> None:
    """refs/pull/N/head, and refs/pull/N/merge: the head merged into the base, as GitHub tests it."""
    head = git_bare(repo, "rev-parse", f"refs/heads/{pull['headRefName']}").strip()
    base = git_bare(repo, "rev-parse", f"refs/heads/{pull['baseRefName']}").strip()
    git_bare(repo, "update-ref", f"refs/pull/{pull['number']}/head", head)
    merged = subprocess.run(
        ["git", "--git-dir", str(origin(repo)), "merge-tree", "--write-tree", base, head],
        capture_output=True,
        text=True,
    )
    pull["headRefOid"], pull["baseRefOid"] = head, base
    if merged.returncode != 0:
        pull["mergeable"] = "CONFLICTING"
        return
    tree = merged.stdout.splitlines()[0]
    identity = {
        "GIT_AUTHOR_NAME": "GitHub",
        "GIT_AUTHOR_EMAIL": "noreply@github.com",
        "GIT_COMMITTER_NAME": "GitHub",
        "GIT_COMMITTER_EMAIL": "noreply@github.com",
    }
    commit = subprocess.run(
        [
            "git",
            "--git-dir",
            str(origin(repo)),
            "commit-tree",
            tree,
            "-p",
            base,
            "-p",
            head,
            "-m",
            f"Merge {head} into {base}",
        ],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **identity},
    ).stdout.strip()
    git_bare(repo, "update-ref", f"refs/pull/{pull['number']}/merge", commit)
    pull["mergeable"] = "MERGEABLE"
    pull["mergeCommitOid"] = commit


def issue_command(args: list[str], repo: str, state: dict[str, Any]) -> Any:
    verb = args[1]
    issues = state.setdefault("issues", [])
    if verb == "list":
        wanted = option(args, "--state", "-s") or "open"
        labels = option(args, "--label", "-l", many=True)
        author = option(args, "--author", "-A")
        limit = int(option(args, "--limit", "-L") or 30)
        rows = [
            i
            for i in sorted(issues, key=lambda i: -i["number"])
            if (wanted == "all" or i["state"].lower() == wanted)
            and all(label in {x["name"] for x in i["labels"]} for label in labels)
            and (author is None or _author_matches(author, i["author"]["login"]))
        ][:limit]
        emit(rows, args)
        return [r["number"] for r in rows]
    if verb == "create":
        need_auth(args, repo)
        labels = option(args, "--label", "-l", many=True)
        known = {x["name"] for x in state.get("labels", [])}
        unknown = [label for label in labels if label not in known]
        if unknown:
            sys.stderr.write(f"could not add label: '{unknown[0]}' not found\n")
            raise SystemExit(1)
        number = new_number(state)
        issues.append(
            {
                "number": number,
                "title": option(args, "--title", "-t") or "",
                "body": body_of(args) or "",
                "state": "OPEN",
                "labels": labels_of(labels),
                "author": {"login": caller(), "is_bot": caller().startswith("app/")},
                "comments": [],
                "url": url(repo, "issues", number),
            }
        )
        print(url(repo, "issues", number))
        return number
    number = int(str(positional(args, 2)).rsplit("/", 1)[-1])
    issue = next((i for i in issues if i["number"] == number), None)
    if issue is None:
        sys.stderr.write(
            f"GraphQL: Could not resolve to an issue or pull request with the number of {number}. (repository.issue)\n"
        )
        raise SystemExit(1)
    if verb == "view":
        emit(issue, args)
        return number
    need_auth(args, repo)
    if verb == "comment":
        issue["comments"].append({"author": {"login": caller()}, "body": body_of(args)})
        print(url(repo, "issues", number) + f"#issuecomment-{len(issue['comments'])}")
    elif verb == "close":
        comment = option(args, "--comment", "-c")
        if comment:
            issue["comments"].append({"author": {"login": caller()}, "body": comment})
        issue["state"] = "CLOSED"
        print(f"✓ Closed issue {repo}#{number} ({issue['title']})", file=sys.stderr)
    elif verb == "edit":
        if option(args, "--title", "-t") is not None:
            issue["title"] = option(args, "--title", "-t")
        if body_of(args) is not None:
            issue["body"] = body_of(args)
        for label in option(args, "--add-label", many=True):
            if label not in {x["name"] for x in issue["labels"]}:
                issue["labels"].append({"name": label})
        print(url(repo, "issues", number))
    else:
        raise KeyError(verb)
    return number


def _author_matches(wanted: str, login: str) -> bool:
    # gh accepts `app/NAME` and, for the GitHub Actions bot, `github-actions[bot]`.
    return wanted == login or (wanted.endswith("[bot]") and login == "app/" + wanted.removesuffix("[bot]"))


def pr_command(args: list[str], repo: str, state: dict[str, Any]) -> Any:
    verb = args[1]
    pulls = state.setdefault("pulls", [])
    if verb == "list":
        wanted = option(args, "--state", "-s") or "open"
        head = option(args, "--head", "-H")
        rows = [
            p
            for p in sorted(pulls, key=lambda p: -p["number"])
            if (wanted == "all" or p["state"].lower() == wanted) and (head is None or p["headRefName"] == head)
        ]
        emit(rows, args)
        return [r["number"] for r in rows]
    if verb == "create":
        need_auth(args, repo)
        head, base = option(args, "--head", "-H"), option(args, "--base", "-B")
        if any(p["headRefName"] == head and p["state"] == "OPEN" for p in pulls):
            sys.stderr.write(f'a pull request for branch "{head}" into branch "{base}" already exists\n')
            raise SystemExit(1)
        labels = option(args, "--label", "-l", many=True)
        known = {x["name"] for x in state.get("labels", [])}
        if any(label not in known for label in labels):
            sys.stderr.write(f"could not add label: '{next(x for x in labels if x not in known)}' not found\n")
            raise SystemExit(1)
        number = new_number(state)
        pull = {
            "number": number,
            "title": option(args, "--title", "-t") or "",
            "body": body_of(args) or "",
            "state": "OPEN",
            "headRefName": head,
            "baseRefName": base,
            "labels": labels_of(labels),
            "author": {"login": caller(), "is_bot": caller().startswith("app/")},
            "url": url(repo, "pull", number),
            "events": [{"action": "opened", "by": caller()}],
        }
        write_pull_refs(repo, pull)
        pulls.append(pull)
        print(url(repo, "pull", number))
        return number
    if verb == "view":
        need_auth(args, repo)  # as gh: no token, no answer
    selector = positional(args, 2)
    pull = next(
        (
            p
            for p in sorted(pulls, key=lambda p: -p["number"])
            if str(p["number"]) == selector or (p["headRefName"] == selector and p["state"] == "OPEN")
        ),
        None,
    )
    if pull is None:
        if str(selector).isdigit():
            sys.stderr.write(
                f"GraphQL: Could not resolve to a PullRequest with the number of {selector}. (repository.pullRequest)\n"
            )
        else:
            sys.stderr.write(f'no pull requests found for branch "{selector}"\n')
        raise SystemExit(1)
    if verb == "view":
        emit(pull, args)
        return pull["number"]
    if verb == "comment":
        need_auth(args, repo)
        pull.setdefault("comments", []).append({"author": {"login": caller()}, "body": body_of(args)})
        print(url(repo, "pull", pull["number"]) + f"#issuecomment-{len(pull['comments'])}")
        return pull["number"]
    if verb == "edit":
        need_auth(args, repo)
        if option(args, "--title", "-t") is not None:
            pull["title"] = option(args, "--title", "-t")
        if body_of(args) is not None:
            pull["body"] = body_of(args)
        for label in option(args, "--add-label", many=True):
            if label not in {x["name"] for x in pull["labels"]}:
                pull["labels"].append({"name": label})
        pull["events"].append({"action": "edited", "by": caller()})
        print(url(repo, "pull", pull["number"]))
        return pull["number"]
    raise KeyError(verb)


def label_command(args: list[str], repo: str, state: dict[str, Any]) -> Any:
    if args[1] != "create":
        raise KeyError(args[1])
    need_auth(args, repo)
    name = args[2]
    labels = state.setdefault("labels", [])
    existing = next((x for x in labels if x["name"] == name), None)
    if existing and "--force" not in args:
        sys.stderr.write(
            f'label with name "{name}" already exists; use `--force` to update its color and description\n'
        )
        raise SystemExit(1)
    if existing is None:
        labels.append({"name": name})
        existing = labels[-1]
    existing.update(
        {"color": option(args, "--color", "-c") or "", "description": option(args, "--description", "-d") or ""}
    )
    return name


def workflow_command(args: list[str], repo: str, state: dict[str, Any]) -> Any:
    if args[1] != "run":
        raise KeyError(args[1])
    need_auth(args, repo)
    name, ref = positional(args, 2), option(args, "--ref", "-r")
    fields = {}
    for i, arg in enumerate(args[:-1]):
        if arg in ("-f", "--raw-field", "-F", "--field"):
            key, _, value = args[i + 1].partition("=")
            fields[key] = value
    exists = subprocess.run(
        ["git", "--git-dir", str(origin(repo)), "rev-parse", "--verify", "--quiet", f"refs/heads/{ref}"]
    )
    if not ref or exists.returncode != 0:
        sys.stderr.write("could not create workflow dispatch event: HTTP 422: No ref found\n")
        raise SystemExit(1)
    state.setdefault("dispatches", []).append({"workflow": name, "ref": ref, "inputs": fields, "by": caller()})
    print(f"✓ Created workflow_dispatch event for {name} at {ref}", file=sys.stderr)
    return name


def main(args: list[str]) -> int:
    if args[:2] == ["auth", "setup-git"]:
        # The origin is a local path here: git needs no credential helper to push to it.
        record(args, "", None)
        return 0
    handlers = {"issue": issue_command, "pr": pr_command, "label": label_command, "workflow": workflow_command}
    repo = repository(args)
    if not args or args[0] not in handlers:
        sys.stderr.write(f'unknown command "{args[0] if args else ""}" for "gh" (rehearsal stand-in)\n')
        record(args, repo, None, code=1)
        return 1
    body = (
        body_of(args) if "--body-file" in args and option(args, "--body-file") != "-" else option(args, "--body", "-b")
    )
    try:
        refuse_beyond_permissions(args)
        with locked_state() as everything:
            state = everything.setdefault(repo, {})
            result = handlers[args[0]](args, repo, state)
    except KeyError as exc:
        sys.stderr.write(f'unknown command "{exc.args[0]}" for "gh {args[0]}" (rehearsal stand-in)\n')
        record(args, repo, body, code=1)
        return 1
    except SystemExit as exc:
        record(args, repo, body, code=int(exc.code or 0))
        return int(exc.code or 0)
    record(args, repo, body, result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
