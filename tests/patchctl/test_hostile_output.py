"""Output no upstream can script: real pin-sync, canary and vendor runs on small local
upstreams whose commit subjects, file names and build output are hostile. What they write
(the Markdown report, the step summary, the issue bodies, the log lines) is checked where it
lands: rendered as GitHub renders Markdown, and read as the Actions runner reads a log."""

from __future__ import annotations

import html
import io
import json
import re
import urllib.parse
from pathlib import Path

import pytest

from patchctl.output import escape, progress
from patchctl.output.escape import visible

from .conftest import Project, Repo, make_patch, numbered, run_cli
from .fixtures_sync import add_line20_patch, load_json, main_c, write_config
from .markdown_check import assert_inert, render
from .test_escape import runner_command, runner_unescape_property

# Subjects an upstream commit can carry (git keeps a \r; a \n ends the subject line).
HOSTILE_SUBJECTS = [
    "Ping @octocat and fix #1 (see GH-2, https://evil.example)",
    "<img src=x onerror=alert(1)> </details> <b>bold</b> <!-- hidden",
    "[click](javascript:alert(1)) ![i](http://evil.example/x.png) a | b",
    "Carriage\rffffffffffffffffffffffffffffffffffffffff\tforged entry",
    "100% done ::warning::pwned ##[error]legacy `code` ``` fence",
]


def commands_in(log: str) -> list[str]:
    """The workflow commands the Actions runner would run in LOG: `::stop-commands::T` ...
    `::T::` switches them off in between, as the runner does."""
    found, stopped = [], None
    for line in log.split("\n"):
        command = runner_command(line)
        if command is None:
            continue
        if stopped is not None:
            if command == stopped:
                stopped = None
            continue
        if command.startswith("stop-commands"):
            stopped = line.strip().split("::")[2]
        found.append(command)
    assert stopped is None, "commands stay off after the output"
    return found


def fold_items(rendered: str, summary: str) -> list[str]:
    """The list items of the fold titled SUMMARY in RENDERED."""
    fold = re.search(rf"<summary>{re.escape(summary)}</summary>(.*?)</details>", rendered, re.DOTALL)
    assert fold, rendered
    return re.findall(r"<li>(.*?)</li>", fold.group(1), re.DOTALL)


def test_pin_sync_report_of_hostile_subjects_is_inert_and_lists_each_commit_once(
    project: Project, upstream: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    pin = upstream.head
    add_line20_patch(project, upstream, pin)
    write_config(project, pin)
    shas = [upstream.commit({"src/util.c": f"util v{i}\n"}, subject) for i, subject in enumerate(HOSTILE_SUBJECTS)]
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    report, out = project.path.parent / "report.md", project.path.parent / "report.json"

    result = run_cli("-C", project.path, "pin-sync", "up", "--latest", "--report", report, "--json-file", out)
    assert result.exit_code == 0, result.output
    payload = load_json(out)
    # Parsed with NUL separators: the \r makes no entry of its own, every subject is whole.
    assert payload["commits"] == [{"sha": s, "subject": t} for s, t in zip(shas, HOSTILE_SUBJECTS)]

    markdown = report.read_text()
    # Folds: the upstream commits, each range-diff, the series' health table.
    rendered = assert_inert(markdown, folds=1 + len(payload.get("range_diffs") or {}) + bool(payload.get("health")))
    items = fold_items(rendered, "Upstream commits")
    assert len(items) == len(HOSTILE_SUBJECTS)
    for item, (sha, subject) in zip(items, zip(shas, HOSTILE_SUBJECTS)):
        codes = re.findall(r"<code>(.*?)</code>", item, re.DOTALL)
        assert codes[0] == sha[:12] and html.unescape(codes[1]) == visible(subject)  # the whole subject, as code
    assert "`Carriage\\rffffffffffffffffffffffffffffffffffffffff\\tforged entry`" in markdown
    assert all(not line.lstrip().startswith("::") for line in markdown.split("\n"))
    # The same report on stdout, in a log the runner reads: workflow commands off around it.
    assert commands_in(result.stdout)[:1] == ["stop-commands"] and commands_in(result.stderr) == []
    # ... as plain text: Markdown's escapes are for the Markdown outputs (issue 45).
    assert result.stdout.split("\n", 1)[1].startswith(escape.terminal_text(markdown))


def run_canary(project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *args: str):
    """A canary run as the workflow makes it: under Actions, with a step summary and an issue list."""
    summary_env = tmp_path / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary_env))
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    summary, issues, out = tmp_path / "canary.md", tmp_path / "issues.json", tmp_path / "canary.json"
    result = run_cli(
        "-C", project.path, "canary", *args, "--summary", summary, "--issues", issues, "--json-file", out,
        "--work-dir", tmp_path / "work",
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    markdown = summary.read_text()
    assert summary_env.read_text() == markdown
    assert commands_in(result.stdout)[:1] == ["stop-commands"] and commands_in(result.stderr) == []
    filed = json.loads(issues.read_text())
    for issue in filed:
        assert "\n" not in issue["title"] and "\r" not in issue["title"]
        marker, _, body = issue["body"].partition("\n")
        assert marker == f"<!-- patchctl-canary-key: {issue['key']} -->" and "-->" not in issue["key"]
        assert " " not in issue["key"] and "\n" not in issue["key"]
        assert_inert(body, folds=0)
    return load_json(out), markdown, filed


def test_canary_report_and_issue_of_a_hostile_patch_name_and_subject_are_inert(
    project: Project, upstream: Repo, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pin = upstream.head
    # A patch name from the series directory, as hostile as a file name can be.
    name = "0001-ping @octocat #1 <b>bold<b> | x --> y `z`.patch"
    project.add_patch(
        name, make_patch(upstream, pin, {"src/main.c": main_c({20: "MAIN 20 patched"})}, "Patch line twenty")
    )
    write_config(project, pin)
    breaking = upstream.commit({"src/main.c": main_c({20: "main 20 rewritten upstream"})}, HOSTILE_SUBJECTS[0])
    upstream.commit({"src/util.c": "later\n"}, HOSTILE_SUBJECTS[3])

    payload, markdown, filed = run_canary(project, tmp_path, monkeypatch)
    [patch] = payload["series"][0]["patches"]
    assert patch["patch"] == name and patch["breaking_commit"] == {"sha": breaking, "subject": HOSTILE_SUBJECTS[0]}
    folds = len([s for s in payload["series"] if s.get("range_diff")]) + bool(payload.get("health"))  # + health
    rendered = assert_inert(markdown, folds=folds)
    row = next(line for line in rendered.split("<tr>") if "octocat" in line)
    assert row.count("<td>") == 5, row  # the patch table's five cells: the name's `|` stays inside its cell
    [issue] = filed
    assert issue["key"] == f"up/apply/main/{urllib.parse.quote(name, safe='._-+@=,~/')}/{breaking}"
    assert urllib.parse.unquote(issue["key"].split("/")[3]) == name


def test_canary_build_log_tail_and_breaking_subject_are_inert(
    project: Project, upstream: Repo, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pin = upstream.head
    add_line20_patch(project, upstream, pin)
    build = (
        "test ! -e src/broken || { printf '%s\\n' '::error::from the build' '##[warning]legacy' '</details>' "
        "'````' '@octocat #1 <img src=x onerror=alert(1)>'; exit 1; }"
    )
    write_config(project, pin, series_extra=f'build:\n  - name: cc\n    command: "{build}"\n')
    breaking = upstream.commit({"src/broken": "x\n"}, HOSTILE_SUBJECTS[1])
    upstream.commit({"src/util.c": "later\n"}, HOSTILE_SUBJECTS[4])

    payload, markdown, filed = run_canary(project, tmp_path, monkeypatch, "--compile")
    [record] = payload["compiles"]
    assert record["state"] == "failed" and "::error::from the build" in record["log_tail"]
    assert record["breaking_commit"] == {"sha": breaking, "subject": HOSTILE_SUBJECTS[1]}
    # + the build log's tail, + the series' health table
    folds = len([s for s in payload["series"] if s.get("range_diff")]) + 1 + bool(payload.get("health"))
    rendered = assert_inert(markdown, folds=folds)
    tail = re.findall(r"<pre><code>(.*?)</code></pre>", rendered, re.DOTALL)
    assert tail and "::error::from the build" in tail[-1] and "&lt;/details&gt;" in tail[-1]
    [issue] = filed
    assert "::error::from the build" in issue["body"]  # quoted in a fence, which assert_inert read as code


def test_vendor_check_log_names_a_file_with_a_line_break_on_one_line(
    tmp_path: Path, upstream: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    hostile = "src/evil\n::warning::pwned.c"
    upstream.commit({hostile: "evil\n"}, "A file name with a line break")
    project = Project(
        tmp_path / "project",
        upstream,
        upstream.head,
        extra_yaml="    vendor:\n      - from: src\n        to: third_party/src\n",
    )
    project.add_patch(
        "0001-Patch-util.patch",
        make_patch(upstream, upstream.head, {"src/util.c": numbered(3, "patched")}, "Patch util"),
    )
    assert run_cli("-C", project.path, "vendor").exit_code == 0
    (project.path / "third_party/src/evil\n::warning::pwned.c").write_text("edited\n")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")

    result = run_cli("-C", project.path, "vendor", "--check")
    assert result.exit_code == 1, result.output
    annotations = [line for line in result.stdout.split("\n") if runner_command(line) is not None]
    assert [runner_command(line).split(" ")[0] for line in annotations] == ["error"]  # ours, and only ours
    [annotation] = annotations
    props = dict(p.split("=", 1) for p in annotation[len("::error ") :].split("::", 1)[0].split(","))
    assert runner_unescape_property(props["file"]) == "third_party/src/evil\n::warning::pwned.c"
    assert "third_party/src/evil\\n::warning::pwned.c" in result.stdout  # the plain line shows the name, escaped
    assert commands_in(result.stderr) == []


def test_progress_and_error_lines_hold_a_hostile_name_on_their_line(tmp_path: Path, project: Project) -> None:
    stream = io.StringIO()
    reporter = progress.Reporter(stream, live=False)
    reporter.start("replaying main: 0001-x\n::warning::pwned ##[error]x.patch")
    reporter.finish("replaying main: 0001-x\n::warning::pwned ##[error]x.patch", ok=False)
    reporter.clear()
    lines = stream.getvalue().split("\n")
    assert lines[-1] == "" and all(line.startswith("[") for line in lines[:-1]) and len(lines) == 3
    assert [runner_command(line) for line in lines] == [None] * 3

    result = run_cli("-C", project.path, "gate", "main\n::error::pwned")
    assert result.exit_code != 0 and result.stderr.count("\n") == 1, result.stderr
    assert runner_command(result.stderr.rstrip("\n")) is None and result.stderr.startswith("patchctl: error: ")


def test_rendered_reports_render_the_hostile_subjects_as_code() -> None:
    """The renderer the tests above trust does see markup where it is live: the same subjects
    unescaped make links, images, foreign tags and a closed fold."""
    live = "<details><summary>x</summary>\n\n" + "\n".join(f"- {s}" for s in HOSTILE_SUBJECTS) + "\n\n</details>\n"
    rendered = render(live)
    assert "<img" in rendered and "<b>" in rendered and rendered.count("</details>") == 2
    with pytest.raises(AssertionError):
        assert_inert(live, folds=1)


# Patch names matplotlib's mathtext would read as formulas: one it cannot parse crashed `status --html`.
MATH_NAMES = [
    "0001-$\\x$.patch",
    "0002-$a$.patch",
    "0003-$x^{$.patch",
    "0004-$\\frac{1}{0}$-$$.patch",
    "0005-$\\mathcal{A}$.patch",
]


def test_status_page_draws_patch_names_as_text_never_as_mathtext(
    project: Project, upstream: Repo, tmp_path: Path
) -> None:
    from patchctl.loop.health_page import tip_chart

    pin = upstream.head
    for number, name in enumerate(MATH_NAMES, 1):
        project.add_patch(name, make_patch(upstream, pin, {f"src/m{number}.c": f"int m{number};\n"}, f"Add m{number}"))
    page = tmp_path / "status.html"
    result = run_cli("-C", project.path, "status", "--no-trial", "--html", page)
    assert result.exit_code == 0, result.output
    text = page.read_text()
    assert text.count("<svg") == 1 and all(html.escape(name) in text for name in MATH_NAMES)
    # Drawn as they are: mathtext would set `a` in its italic face (a DejaVuSans-Oblique glyph).
    svg = tip_chart({"name": "main", "patches": [{"patch": "0002-$a$.patch", "upstream_status": "none"}]}, "s0")
    assert "DejaVuSans-Oblique" not in svg
