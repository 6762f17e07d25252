"""The checked-in conformance vectors: regenerated they must not drift, the two twins must say
the same thing, and the command must run without torch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.conformance.files import CHECKED_IN_DIR, build_vector_files, compare_vector_dir
from engine.tools import vectors

REPO = Path(__file__).resolve().parents[2]


def test_regenerated_vectors_match_the_checked_in_ones(tmp_path: Path) -> None:
    assert vectors.main(["--out", str(tmp_path)]) == 0
    generated = sorted(path.name for path in tmp_path.iterdir())
    checked_in = sorted(path.name for path in CHECKED_IN_DIR.iterdir() if path.suffix in (".json", ".txt"))
    assert generated == checked_in
    for name in generated:
        assert (tmp_path / name).read_bytes() == (CHECKED_IN_DIR / name).read_bytes(), f"{name} drifted"
    assert vectors.main(["--check", str(CHECKED_IN_DIR)]) == 0


def test_check_reports_each_kind_of_drift(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = build_vector_files()
    vectors.main(["--out", str(tmp_path)])
    victim = tmp_path / "eviction_order.append.txt"
    victim.write_text(victim.read_text().replace("state num_free 4", "state num_free 5", 1))
    (tmp_path / "full_prompt_hit.append.json").unlink()
    (tmp_path / "stray.txt").write_text("x\n")
    (tmp_path / "notes.md").write_text("ignored\n")
    assert compare_vector_dir(tmp_path, files) != []
    capsys.readouterr()
    assert vectors.main(["--check", str(tmp_path)]) == vectors.EXIT_DRIFT
    out = capsys.readouterr().out
    assert "drift: eviction_order.append.txt: differs" in out
    assert "drift: full_prompt_hit.append.json: missing" in out
    assert "drift: stray.txt: unexpected" in out
    assert "notes.md" not in out


def test_bad_usage_gives_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert vectors.main([]) == vectors.EXIT_USAGE
    assert vectors.main(["--check", str(tmp_path / "absent")]) == vectors.EXIT_USAGE
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert vectors.main(["--out", str(blocker / "sub")]) == vectors.EXIT_USAGE
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all(line.startswith("engine vectors: ") for line in err)


def test_every_vector_covers_both_free_orders_and_they_differ_somewhere() -> None:
    names = {path.stem for path in CHECKED_IN_DIR.glob("*.txt")}
    scenarios = {name.rsplit(".", 1)[0] for name in names}
    assert names == {f"{s}.{order}" for s in scenarios for order in ("prepend-unhashed", "append")}
    differing = [
        s
        for s in scenarios
        if _body(CHECKED_IN_DIR / f"{s}.append.txt") != _body(CHECKED_IN_DIR / f"{s}.prepend-unhashed.txt")
    ]
    assert len(differing) >= len(scenarios) // 2


def _body(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if not line.startswith(("name ", "config "))]


@pytest.mark.parametrize("path", sorted(CHECKED_IN_DIR.glob("*.json")), ids=lambda path: path.stem)
def test_text_twin_says_what_the_json_says(path: Path) -> None:
    data = json.loads(path.read_text())
    lines = path.with_suffix(".txt").read_text().splitlines()
    assert lines[0] == f"{data['format']} {data['version']}"
    config = data["config"]
    assert (
        lines[2] == f"config {config['num_blocks']} {config['block_size']}"
        f" {int(config['enable_caching'])} {config['free_order']}"
    )
    assert lines[3] == f"none_hash {data['hash']['none_hash']}"
    assert lines[4] == f"steps {len(data['steps'])}" and lines[-1] == "end"
    blocks = "\n".join(lines[5:-1]).split("\nstep ")
    assert len(blocks) == len(data["steps"])
    for block, step in zip(blocks, data["steps"]):
        head, *fields = block.removeprefix("step ").split("\n")
        assert head.split()[:2] == [str(step["step"]), step["op"]]
        results = {f.split()[1]: f.split()[2:] for f in fields if f.startswith("result ")}
        state = {f.split()[1]: f.split()[2:] for f in fields if f.startswith("state ")}
        assert list(results) == list(step["result"])
        assert list(state) == ["num_free", "free_queue", "ref_cnt", "block_hash", "cached", "requests", "stats"]
        assert state["num_free"] == [str(step["state"]["num_free"])]
        assert state["free_queue"][1:] == [str(i) for i in step["state"]["free_queue"]]
        assert state["ref_cnt"][1:] == [str(i) for i in step["state"]["ref_cnt"]]
        assert state["block_hash"][1:] == [h or "-" for h in step["state"]["block_hash"]]
        assert state["cached"][1:] == [f"{h}={','.join(map(str, ids))}" for h, ids in step["state"]["cached"]]
        for name, value in step["result"].items():
            if isinstance(value, list):
                assert results[name] == [str(len(value)), *map(str, value)]
            else:
                assert results[name] == [str(value)]


def test_vectors_command_runs_without_torch(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "from engine.__main__ import main\n"
        f"rc = main(['vectors', '--out', {str(tmp_path)!r}])\n"
        "assert 'torch' not in [m for m, v in sys.modules.items() if v is not None]\n"
        "sys.exit(rc)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert len(list(tmp_path.glob("*.txt"))) == len(list(CHECKED_IN_DIR.glob("*.txt")))
