"""report: the Markdown of pin-sync and canary, rendered from the JSON payloads of the real
report dataclasses, and where reports are written."""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path

from patchctl.confined import named
from patchctl.loop.canary_report import CanaryPatch, CanaryReport, CanarySeries, CompileRecord
from patchctl.loop.sync_report import GateRecord, SyncReport
from patchctl.output import report
from patchctl.output.jsonout import to_json
from patchctl.state.sync_state import PatchRecord

OLD, NEW = "1" * 40, "2" * 40


def sync_report(**changes) -> SyncReport:
    fields = {
        "state": "gate-failed",
        "upstream": "llama.cpp",
        "old_pin": OLD,
        "new_pin": NEW,
        "target_spec": "v2",
        "moved_upstreams": ["llama.cpp", "ggml"],
        "commits": [{"sha": f"{i:012x}" + "0" * 28, "subject": f"commit {i}"} for i in range(3)],
        "patches": [
            PatchRecord("llama.cpp", "0001-a.patch", "clean"),
            PatchRecord("llama.cpp", "0002-b.patch", "conflict", "x | y", ["src/a.c:3-9"]),
        ],
        "gates": [GateRecord("llama.cpp", "gate", "replay", False, 1.26, "FAIL case 3\nsee log", "log.txt")],
        "next_steps": ["fix it"],
    }
    return SyncReport(**{**fields, **changes})


def test_sync_markdown_has_every_section_and_escapes_cells() -> None:
    text = report.sync_markdown(to_json(sync_report()))
    lines = text.splitlines()
    assert lines[0] == "## pin-sync llama.cpp: ❌ a gate failed, nothing written"
    assert f"- old pin: `{OLD[:12]}`" in lines and f"- new pin: `{NEW[:12]}` (target: `v2`)" in lines
    assert "- upstreams moved together: llama.cpp, ggml" in lines
    assert "- upstream commits in between: 3" in lines
    assert f"- `{2:012x}` `commit 2`" in lines  # a subject is upstream text: a code span
    assert "| llama.cpp | 0002-b.patch | conflict | x \\| y; markers at src/a.c:3-9 |" in lines
    assert "| llama.cpp | 0001-a.patch | clean | – |" in lines
    assert "| llama.cpp | replay | gate | **FAIL** | 1.3 s | FAIL case 3 see log |" in lines
    assert lines[-2:] == ["", "- fix it"] and text.endswith("\n")


def test_sync_markdown_without_history_and_with_many_commits() -> None:
    unknown = report.sync_markdown(to_json(sync_report(commits=None, commits_note="shallow mirror", patches=[])))
    assert "- upstream commits in between: not available (shallow mirror)" in unknown
    assert "### Patches" not in unknown
    many = [{"sha": f"{i:012x}" + "0" * 28, "subject": str(i)} for i in range(report.MAX_COMMITS_SHOWN + 7)]
    text = report.sync_markdown(to_json(sync_report(commits=many, state="synced", files_changed=["matrix.yaml"])))
    assert text.startswith("## pin-sync llama.cpp: ✅ pin moved")
    assert "- … and 7 older" in text and f"`{0:012x}`" not in text and f"`{56:012x}`" in text
    assert "### Files changed\n\n- `matrix.yaml`" in text


def test_canary_markdown_from_a_real_report() -> None:
    canary = CanaryReport(
        "llama.cpp",
        OLD,
        NEW,
        "main",
        12,
        series=[
            CanarySeries(
                "llama.cpp",
                [
                    CanaryPatch("0001-a.patch", "applied"),
                    CanaryPatch(
                        "0002-b.patch",
                        "context-drift",
                        "src/a.c hunk #1",
                        "merged-3way",
                        "mechanical",
                        {"sha": "3" * 40, "subject": "Rename | things"},
                    ),
                ],
            ),
            CanarySeries("empty"),
        ],
        compiles=[
            CompileRecord("cpu", "llama.cpp", None, "failed", "cmake: exit 2", [{"name": "cmake", "duration_s": 3.04}])
        ],
        work_dir="/tmp/w",
    )
    payload = to_json(canary)
    assert payload["red"] is True
    lines = report.canary_markdown(payload).splitlines()
    assert lines[0] == "## canary llama.cpp: ❌ red"
    assert "- upstream commits since the pin: 12" in lines
    assert "### series llama.cpp: fails strictly; a pin-sync would be mechanical" in lines
    assert (
        # `#1` in prose would link issue 1: a zero-width joiner after `#` keeps it text
        "| 0002-b.patch | context-drift: src/a.c hunk #\u200d1 | merged-3way | mechanical | "
        "`333333333333` `Rename \\| things` |" in lines
    )
    assert "### series empty: applies strictly" in lines and "(no patches)" in lines
    assert "| cpu | llama.cpp | as declared | **FAIL** | cmake: exit 2; cmake 3.0 s | – |" in lines
    assert lines[-1] == "Logs: `/tmp/w`"


def test_write_json_is_sorted_and_atomic(tmp_path: Path) -> None:
    target = tmp_path / "out" / "r.json"
    target.parent.mkdir()
    named.write_json(target, {"b": 1, "a": {"d": 2, "c": 3}})
    assert target.read_text() == '{\n  "a": {\n    "c": 3,\n    "d": 2\n  },\n  "b": 1\n}\n'
    assert [p.name for p in target.parent.iterdir()] == ["r.json"]  # no temporary left behind
    assert json.loads(target.read_text())["a"]["c"] == 3


def test_step_summary_is_appended_only_when_github_names_a_file(tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    assert named.append_step_summary("# one\n", {}) is None
    assert named.append_step_summary("# one\n", {named.STEP_SUMMARY_ENV: str(summary)}) == summary
    named.append_step_summary("# two\n", {named.STEP_SUMMARY_ENV: str(summary)})
    assert summary.read_text() == "earlier step\n# one\n# two\n"


def test_a_report_file_that_is_a_fifo_is_written_into_not_replaced(tmp_path: Path) -> None:
    """`--json-file /dev/null` or a FIFO: the report goes into it; the atomic replace that a
    regular file gets would leave a regular file in its place (/dev/null, run as root)."""
    fifo = tmp_path / "reader"
    os.mkfifo(fifo)
    received: list[str] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text()))
    reader.start()
    named.write_json(fifo, {"ok": True})
    reader.join(timeout=10)
    assert received == ['{\n  "ok": true\n}\n']
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    regular = tmp_path / "report.json"
    named.write_json(regular, {"ok": False})
    assert json.loads(regular.read_text()) == {"ok": False}
