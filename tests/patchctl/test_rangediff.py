"""`git range-diff` of a series before and after its pin moves: the domain function, and the
pin-sync and canary reports (JSON and markdown) that carry it."""

from __future__ import annotations

from patchctl.loop.rangediff import range_diff, series_range_diff
from patchctl.series.applier import apply_series_to_index
from patchctl.series.patchset import PatchFile

from .conftest import Project, Repo
from .fixtures_sync import add_hello_patch, add_line20_patch, load_json, main_c, write_config


def _patches(project: Project) -> list[PatchFile]:
    return [PatchFile(p, p.read_bytes()) for p in sorted(project.series_dir.glob("*.patch"))]


def test_range_diff_of_a_series_moved_to_a_new_pin(project: Project, upstream: Repo) -> None:
    pin = upstream.head
    add_line20_patch(project, upstream, pin)
    add_hello_patch(project, upstream, pin)
    tip = upstream.commit({"src/main.c": main_c({35: "main 35 changed upstream"}, prepend=2)}, "Drift")
    patches = _patches(project)
    _, new_head = apply_series_to_index(upstream.path, tip, patches)
    text = series_range_diff(upstream.path, pin, patches, tip, new_head)
    lines = text.splitlines()
    # Both patches are matched as equal: moved by two lines, the same change.
    assert lines[0].startswith("1:  ") and " = 1:  " in lines[0] and lines[0].endswith("Patch line twenty")
    assert lines[1].startswith("2:  ") and " = 2:  " in lines[1] and lines[1].endswith("Add hello")
    assert len(lines) == 2
    # Deterministic: ids abbreviated to 12, no colour codes, the same text on a second call.
    assert len(lines[0].split()[1]) == 12 and "\x1b[" not in text
    assert series_range_diff(upstream.path, pin, patches, tip, new_head) == text


def test_empty_and_one_sided_ranges(project: Project, upstream: Repo) -> None:
    pin = upstream.head
    add_line20_patch(project, upstream, pin)
    patches = _patches(project)
    _, old_head = apply_series_to_index(upstream.path, pin, patches)
    assert range_diff(upstream.path, pin, pin, pin, pin) == ""
    dropped = range_diff(upstream.path, pin, old_head, pin, pin)
    assert dropped == f"1:  {old_head[:12]} < -:  {'-' * 12} Patch line twenty\n"
    added = range_diff(upstream.path, pin, pin, pin, old_head)
    assert added == f"-:  {'-' * 12} > 1:  {old_head[:12]} Patch line twenty\n"


def test_pin_sync_report_carries_the_range_diff(project: Project, upstream: Repo, cli) -> None:
    pin = upstream.head
    add_hello_patch(project, upstream, pin, name="0001-add-hello.patch")
    write_config(project, pin)
    tip = upstream.commit({"src/util.c": "other\n"}, "Unrelated")
    report_json, report_md = project.path.parent / "sync.json", project.path.parent / "sync.md"
    result = cli(
        "-C",
        project.path,
        "pin-sync",
        "up",
        "--to",
        tip,
        "--dry-run",
        "--json-file",
        report_json,
        "--report",
        report_md,
    )
    payload = load_json(report_json)
    assert payload["state"] == "dry-run", result.output
    text = payload["range_diffs"]["main"]
    assert text.startswith("1:  ") and " = 1:  " in text and text.rstrip().endswith("Add hello")
    markdown = report_md.read_text()
    assert "git range-diff: series main" in markdown and text.rstrip("\n") in markdown


def test_canary_report_carries_the_range_diff(project: Project, upstream: Repo, cli) -> None:
    pin = upstream.head
    add_line20_patch(project, upstream, pin)
    write_config(project, pin)
    upstream.commit({"src/main.c": main_c({22: "main 22 edited"})}, "Edit near line 20")
    out, summary = project.path.parent / "canary.json", project.path.parent / "canary.md"
    result = cli(
        "-C", project.path, "canary", "--no-bisect", "--json-file", out, "--summary", summary,
        "--work-dir", project.path.parent / "canary-work",
    )  # fmt: skip
    assert result.exit_code == 1, result.output  # red: the patch needs a 3-way merge
    series = load_json(out)["series"][0]
    assert " ! 1:  " in series["range_diff"] and "main 22 edited" in series["range_diff"]
    markdown = summary.read_text()
    assert "git range-diff: the patches on the pin against the tip" in markdown
    assert "main 22 edited" in markdown
    assert len(series["range_diff"].split()[1]) == 12  # core.abbrev is pinned


def test_markdown_fence_outlasts_backticks_in_the_diff() -> None:
    from patchctl.output.report import range_diff_section

    text = "1:  aaaaaaaaaaaa ! 1:  bbbbbbbbbbbb Doc\n    @@ README.md\n    +```python\n    +x = 1\n    +```\n"
    lines = range_diff_section("series main", text)
    fence = lines[2].removesuffix("text")
    assert fence == "````" and lines[-3] == fence and "\n".join(lines[3:-3]) == text.rstrip("\n")
