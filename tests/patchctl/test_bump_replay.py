"""A replay of a real vendor bump (fixtures_bump: Ollama's llama.cpp series across upstream's
`tools/mtmd` move), end to end on a local git upstream: pin-sync follows the rename, rebuilds
the preimage a foreign index line names, and stops (exit 1, never 0) where upstream made the
series' counter edit for another reason; the canary says the same."""

from __future__ import annotations

import json
import re
from pathlib import Path

from patchctl import git

from .conftest import Project, Repo
from .fixtures_bump import OPS, build_bump

RENAME = "examples/llava/clip.cpp → tools/mtmd/clip.cpp"


def sync(cli, project: Project, *args: str) -> tuple[object, dict]:
    out = project.path.parent / "sync.json"
    out.unlink(missing_ok=True)
    result = cli("-C", project.path, "pin-sync", *args, "--json-file", out)
    assert "Traceback" not in result.output, result.output
    return result, json.loads(out.read_text())


def counts(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"static_assert\(GGML_OP_COUNT == (\d+)", text)]


def test_a_real_bump_replayed_end_to_end(project: Project, upstream: Repo, cli, replayed_exports: list[dict]) -> None:
    bump = build_bump(upstream, project)
    vocab = (project.series_dir / "0002-vocab-patch-step-28.patch").read_text()
    assert f"index {bump.vocab_preimage}.." in vocab
    assert not git.run(["cat-file", "-e", bump.vocab_preimage], upstream.path, check=False).ok  # a foreign index
    before = project.snapshot()

    result, payload = sync(cli, project, "up", "--latest")
    assert result.exit_code == 1, result.output
    assert payload["state"] == "needs-look"
    clip, vocab_record, unpad = payload["patches"]
    # 1. The rename is followed, as `git am -3` does, and said so in the report and the range-diff.
    assert clip["classification"] == "merged 3-way", clip
    assert clip["detail"] == f"followed the rename {RENAME}"
    assert clip["renames"] == [RENAME]
    assert payload["range_diff_note"].startswith("at the end")  # the range-diff comes once, when the sync ends
    # 2. The foreign index line's preimage is rebuilt from the old pin: merged, not "context drift".
    assert vocab_record["classification"] == "merged 3-way", vocab_record
    assert "src/llama-vocab.cpp): rebuilt from the old pin" in vocab_record["detail"]
    assert "drift" not in vocab_record["detail"]
    # 3. Both sides incremented the counter: a stop that names upstream's commit, exit 1.
    assert unpad["classification"] == "needs a look: upstream made the same edit for another reason"
    assert f'upstream commit {bump.roll_commit[:12]} "ggml: add ggml_roll" made the same edit' in unpad["detail"]
    assert unpad["detail"].startswith("ggml/src/ggml.c hunks #2, #4: upstream commit")
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(
        "patchctl: error: pin-sync of up stops at a patch that needs a look: main/0003-add-unpad-operator.patch: "
        "needs a look: upstream made the same edit for another reason (ggml/src/ggml.c hunks #2, #4: "
    ), line
    assert "stopped: a patch needs a look" in result.stdout
    assert any("make the patch's edit again on top of upstream's" in step for step in payload["next_steps"])
    assert project.snapshot() == before  # nothing written

    # The merge is staged in the sync tree with upstream's count: one operator short.
    tree = project.path / ".patchctl" / "sync" / "up" / "main"
    ggml_c = (tree / "ggml/src/ggml.c").read_text()
    assert '"ROLL"' in ggml_c and '"UNPAD"' in ggml_c and counts(ggml_c) == [len(OPS) + 1] * 2
    assert (tree / "tools/mtmd/clip.cpp").read_text().count("utf8_to_wide") == 1
    assert "vocab_x(28)" in (tree / "src/llama-vocab.cpp").read_text()

    # The maintainer counts both operators and goes on.
    (tree / "ggml/src/ggml.c").write_text(ggml_c.replace(f"== {len(OPS) + 1}", f"== {len(OPS) + 2}"))
    git.run(["add", "ggml/src/ggml.c"], tree)
    resumed, payload = sync(cli, project, "--continue")
    assert resumed.exit_code == 0, resumed.output
    assert [p["classification"] for p in payload["patches"]] == ["merged 3-way", "merged 3-way", "resolved by hand"]
    assert payload["range_diffs"]["main"].startswith(f"0001-clip-unicode.patch: followed the rename {RENAME}\n")
    assert "tools/mtmd/clip.cpp" in payload["range_diffs"]["main"]
    assert f"pin: {bump.target}" in (project.path / "matrix.yaml").read_text()
    clip_patch = (project.series_dir / "0001-clip-unicode.patch").read_text()
    assert "diff --git a/tools/mtmd/clip.cpp b/tools/mtmd/clip.cpp" in clip_patch and "examples/llava" not in clip_patch
    # 4. Rewritten patches keep the series' style: a diffstat, as every file of the series has.
    for name in project.patch_names():
        assert re.search(r"^ \d+ files? changed, ", (project.series_dir / name).read_text(), re.MULTILINE), name
    assert bump.vocab_preimage not in (project.series_dir / "0002-vocab-patch-step-28.patch").read_text()
    # Export wrote the three anew from what the replay knew (none applies strictly), formatting each once.
    [replayed] = replayed_exports
    assert [applies for _, applies in replayed.values()] == [False, False, False]
    assert cli("-C", project.path, "apply").exit_code == 0
    applied = project.path / ".patchctl" / "trees" / "main"
    assert counts((applied / "ggml/src/ggml.c").read_text()) == [len(OPS) + 2] * 2
    assert "GGML_OP_UNPAD" in (applied / "ggml/include/ggml.h").read_text()
    assert cli("-C", project.path, "export", "main", "--check").exit_code == 0


def test_the_canary_says_what_a_pin_sync_would_do(project: Project, upstream: Repo, cli, tmp_path: Path) -> None:
    build_bump(upstream, project)
    out = tmp_path / "canary.json"
    result = cli("-C", project.path, "canary", "--no-bisect", "--json-file", out)
    assert result.exit_code == 1 and "Traceback" not in result.output
    clip, vocab, unpad = json.loads(out.read_text())["series"][0]["patches"]
    assert clip["verdict"] == "mechanical" and clip["trial"].endswith(f"; followed the rename {RENAME}"), clip
    assert vocab["verdict"] == "mechanical" and "rebuilt from the old pin" in vocab["trial"], vocab
    assert unpad["verdict"] == "needs a look", unpad
    assert unpad["trial"].startswith("needs a look: upstream made the same edit for another reason: ggml/src/ggml.c")


def test_a_counter_both_sides_increment_never_exits_zero(project: Project, upstream: Repo, cli) -> None:
    build_bump(upstream, project)
    for name in ("0001-clip-unicode.patch", "0002-vocab-patch-step-28.patch"):
        (project.series_dir / name).unlink()
    before = project.snapshot()
    result, payload = sync(cli, project, "up", "--latest", "--dry-run")
    assert result.exit_code == 1, result.output
    assert payload["state"] == "needs-look" and payload["warnings"] == []
    assert [p["classification"] for p in payload["patches"]] == [
        "needs a look: upstream made the same edit for another reason"
    ]
    result, payload = sync(cli, project, "up", "--latest")
    assert result.exit_code == 1 and payload["state"] == "needs-look"
    aborted = cli("-C", project.path, "pin-sync", "--abort")
    assert aborted.exit_code == 0 and project.snapshot() == before


def test_a_rebuilt_preimage_that_still_stops_says_why_not_a_lacking_blob(project: Project, upstream: Repo, cli) -> None:
    """Seen in Ollama's bump c68f367ef: a patch with a foreign index line whose other file upstream
    split with no rename git can detect. The stop is the retry's (after the preimage was rebuilt):
    a missing file, not the "context drift ... lacks the necessary blob" of the first try."""
    from .fixtures_bump import cut_patch, vocab_cpp

    metal = "".join(f"kernel_{i}();\n" for i in range(40))
    pin = upstream.commit({"ggml/include/ggml-backend.h": vocab_cpp(), "ggml/src/ggml-metal.m": metal}, "old pin")
    cherry = {5: "    vocab_step_fixed(5);"}
    tidy = {45: "    vocab_step_upstream(45);"}  # upstream's fix came with more: the series' preimage is foreign
    upstream.commit({"ggml/include/ggml-backend.h": vocab_cpp({**tidy, **cherry})}, "backend: fix step 5")
    patch = cut_patch(
        upstream,
        pin,
        [
            {"ggml/include/ggml-backend.h": vocab_cpp(cherry)},
            {
                "ggml/include/ggml-backend.h": vocab_cpp({**cherry, 28: "    vocab_x(28);"}),
                "ggml/src/ggml-metal.m": metal.replace("kernel_3();", "kernel_3_fast();"),
            },
        ],
        "vocab and metal: patch",
    )
    upstream.commit(
        {"ggml/include/ggml-backend.h": vocab_cpp({**tidy, **cherry, 30: "    vocab_y(30);"})}, "backend: rework 30"
    )
    upstream.git("rm", "-q", "ggml/src/ggml-metal.m")
    upstream.commit({"ggml/src/ggml-metal-ops.cpp": "ops();\n", "ggml/src/ggml-metal-device.m": "device();\n"}, "split")
    project.add_patch("0001-vocab-and-metal-patch.patch", patch)
    project.write_config(pin)

    result, payload = sync(cli, project, "up", "--latest")
    assert result.exit_code == 1, result.output
    [record] = payload["patches"]
    assert record["classification"].startswith("needs a hand: file-missing"), record
    assert "ggml/src/ggml-metal.m" in record["detail"]
    # git apply -3 reads the files in order: the header's preimage first (rebuilt from the old pin on
    # the retry), then the missing file, which is why it stops.
    assert "lacks the necessary blob" not in record["detail"], record["detail"]
    assert "3-way merge not possible: ggml/src/ggml-metal.m: does not exist in index" in record["detail"]


def test_a_file_upstream_deleted_stops_on_the_first_try(project: Project, upstream: Repo, cli, monkeypatch) -> None:
    """Seen in Ollama's bump 1a19df1f3: a patch changes a file upstream deleted (no rename leads to
    it) and drifts in another, whose index line names a preimage other than the old pin's. No
    mended patch (its index lines rebuilt) can apply there, so it is not tried again: the stop is
    the first try's, and the patch is applied once."""
    from patchctl.loop import carry
    from patchctl.series import applier

    from .fixtures_bump import cut_patch, vocab_cpp

    cache = "".join(f"cache_{i}();\n" for i in range(40))
    pin = upstream.commit({"src/llama-context.cpp": vocab_cpp(), "src/llama-kv-cache.cpp": cache}, "old pin")
    cherry = {5: "    context_fixed(5);"}  # a fix the series' tree held before upstream took it
    patch = cut_patch(
        upstream,
        pin,
        [
            {"src/llama-context.cpp": vocab_cpp(cherry)},
            {
                "src/llama-context.cpp": vocab_cpp({**cherry, 20: "    defrag(20);"}),
                "src/llama-kv-cache.cpp": cache.replace("cache_3();", "cache_3_full();"),
            },
        ],
        "kv cache: defragment fully",
    )
    # The patch's index line names a blob the upstream has (so nothing is foreign), not the old pin's.
    upstream.commit({"src/llama-context.cpp": vocab_cpp(cherry)}, "context: fix 5")
    upstream.commit({"src/llama-context.cpp": vocab_cpp({**cherry, 21: "    memory(21);"})}, "context: memory")
    upstream.git("rm", "-q", "src/llama-kv-cache.cpp")
    upstream.commit({"src/llama-memory.cpp": "memory();\n"}, "kv cache: replaced by memory")
    project.add_patch("0001-kv-cache-defragment-fully.patch", patch)
    project.write_config(pin)
    tries: list[str] = []
    real = applier.apply_in_worktree

    def counted(tree, patch, **kwargs):
        tries.append(patch.name)
        return real(tree, patch, **kwargs)

    monkeypatch.setattr(carry, "apply_in_worktree", counted)

    result, payload = sync(cli, project, "up", "--latest")
    assert result.exit_code == 1, result.output
    [record] = payload["patches"]
    assert record["classification"] == "needs a hand: file-missing", record
    assert "3-way merge not possible: src/llama-kv-cache.cpp: does not exist in index" in record["detail"]
    assert "context drift in src/llama-context.cpp" in record["detail"]
    assert tries == ["0001-kv-cache-defragment-fully.patch"]


def test_a_preimage_rebuilt_from_the_seed_is_the_one_applying_the_series_again_gives(
    project: Project, upstream: Repo
) -> None:
    """pin-sync reads a rebuilt preimage from the commits its seed made on the old pin; the canary,
    which has none, applies the series before the patch again: both must name the same blobs."""
    from patchctl.loop.carry import PinMove
    from patchctl.series.applier import seed_three_way_objects
    from patchctl.series.patchset import PatchFile

    bump = build_bump(upstream, project)
    patches = [PatchFile(p, p.read_bytes()) for p in sorted(project.series_dir.glob("*.patch"))]
    head = seed_three_way_objects(upstream.path, bump.pin, patches)
    seeded = PinMove(upstream.path, bump.pin, bump.target, patches, old_head=head)
    applied = PinMove(upstream.path, bump.pin, bump.target, patches)
    rebuilt = [seeded.rebuilt_index(p) for p in patches]
    assert len(seeded._old_side()) == len(patches)  # the seed's reading, not the fallback
    assert [r.data if r else None for r in rebuilt] == [
        r.data if r else None for r in (applied.rebuilt_index(p) for p in patches)
    ]
    assert f"index {bump.vocab_preimage}" not in rebuilt[1].text  # the foreign id is replaced
