"""The canary names every failing file and hunk, reports cascades as "blocked by" the patch
they depend on (not as upstream breaks), and leaves no temporary directory behind."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from .conftest import Project, Repo, make_patch, numbered


def lines(n: int, prefix: str, changes: dict[int, str]) -> str:
    return "".join(f"{changes.get(i, f'{prefix} {i}')}\n" for i in range(1, n + 1))


def test_every_failing_hunk_cascades_and_no_leaked_temp_dir(
    project: Project, upstream: Repo, cli, tmp_path: Path, monkeypatch
) -> None:
    pin = upstream.head
    creates = make_patch(
        upstream,
        pin,
        {"src/main.c": lines(40, "main", {20: "MAIN 20 patched"}), "src/extra.c": numbered(12, "extra")},
        "Patch main and add extra",
    )
    project.add_patch("0003-Patch-main-and-add-extra.patch", creates)
    # A change to the file 0003 creates (it does not exist at the pin, so it is written by hand).
    body = "".join(f" extra {i}\n" if i != 6 else "-extra 6\n+EXTRA 6\n" for i in range(3, 10))
    project.add_patch(
        "0005-Tune-extra.patch",
        "From: Dev <dev@example.org>\nSubject: [PATCH] Tune extra\n\nExtra needs it.\n---\n"
        "diff --git a/src/extra.c b/src/extra.c\n--- a/src/extra.c\n+++ b/src/extra.c\n@@ -3,7 +3,7 @@\n" + body,
    )
    two_hunks = make_patch(
        upstream,
        pin,
        {
            "src/util.c": lines(30, "util", {5: "UTIL 5", 25: "UTIL 25"}),
            "include/util.h": lines(10, "decl", {6: "DECL 6"}),
        },
        "Tune util",
    )
    project.add_patch("0007-Tune-util.patch", two_hunks)
    assert cli("-C", project.path, "apply").exit_code == 0  # the series is sound at the pin

    upstream.commit({"src/main.c": lines(40, "main", {20: "main 20 rewritten upstream"})}, "Upstream rewrites line 20")
    upstream.commit(
        {
            "src/util.c": lines(30, "util", {3: "util three", 27: "util twenty-seven"}),
            "include/util.h": lines(10, "decl", {8: "decl eight"}),
        },
        "Upstream rewrites util context",
    )
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    out = tmp_path / "canary.json"
    result = cli("-C", project.path, "canary", "--json-file", out)
    assert result.exit_code == 1, result.output
    patches = {p["patch"]: p for p in json.loads(out.read_text())["series"][0]["patches"]}

    first = patches["0003-Patch-main-and-add-extra.patch"]
    assert first["verdict"] == "conflict" and first["trial"].startswith("3-way conflict in src/main.c")
    assert first["breaking_commit"]["subject"] == "Upstream rewrites line 20"

    cascade = patches["0005-Tune-extra.patch"]
    assert cascade["verdict"] == "blocked" and cascade["blocked_by"] == "0003-Patch-main-and-add-extra.patch"
    assert cascade["trial"] == "blocked by 0003-Patch-main-and-add-extra.patch"
    assert "breaking_commit" not in cascade or cascade["breaking_commit"] is None
    assert "blocked by 0003-Patch-main-and-add-extra.patch" in cascade["bisect_note"]

    drift = patches["0007-Tune-util.patch"]["strict_detail"]
    assert "src/util.c hunk #1 (@@ -2,7 +2,7 @@)" in drift and "src/util.c hunk #2 (@@ -22,7 +22,7 @@)" in drift
    assert "include/util.h hunk #1" in drift
    assert "blocked by 0003" in result.stdout
    assert list((tmp_path / "tmp").iterdir()) == []  # no patchctl-canary-* left behind
    assert "Logs:" not in result.stdout  # nothing was logged, so no logs line pointing at a removed directory
