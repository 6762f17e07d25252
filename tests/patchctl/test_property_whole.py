"""A property test of the whole (issue 31, item 8): random downstream repositories with random
hostile additions (links into `.git`, out of the repository, chains and loops; FIFOs; devices
when run as root; planted journals, pin-sync states, locks and trees; hostile names; links,
FIFOs and hard links at log paths; a state directory another user owns, as root; issue 44's
racing swaps of the directories patchctl uses), every command run on each. Whatever is added,
nothing outside the paths patchctl manages changes (the outside directory, the upstream, `.git`
less `.git/patchctl`, the rest of the work tree), and every run ends within the bound in a
verdict or one `patchctl: error:` line, exit 0-3, never a traceback. See
tests/patchctl/hostile_tree.py for the generators and the judge.

The default run is small and derandomized (the same examples on every run, so CI is
deterministic): PATCHCTL_PROPERTY_EXAMPLES=N runs N examples (random ones, a new draw each
run, unless PATCHCTL_PROPERTY_SEED fixes it); PATCHCTL_PROPERTY_SECONDS sets the bound per
command (default 20 s: most take well under 2 s on one core).
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, example, given, seed, settings
from hypothesis import strategies as st

from .hostile_tree import (
    GIT_CONFIG_PLACES,
    Addition,
    Hung,
    Outcome,
    Template,
    additions,
    apply_addition,
    build_template,
    differences,
    git_config_additions,
    midway_additions,
    new_example,
    outside_state,
    problems_of,
    run_every_command,
    time_bound,
)

EXAMPLES = int(os.environ.get("PATCHCTL_PROPERTY_EXAMPLES") or 0)
SECONDS = float(os.environ.get("PATCHCTL_PROPERTY_SECONDS") or 20)
DEFAULT_EXAMPLES = 30
AS_ROOT = os.geteuid() == 0  # character devices can be made (below the example's directory only)


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache for every example: the upstream's mirror is cloned once, not per example."""
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory, shared_cache: Path) -> Template:
    with pytest.MonkeyPatch.context() as patch:  # (the autouse per-test settings come after a module fixture)
        patch.setenv("PATCHCTL_CACHE", str(shared_cache))
        patch.setenv("PATCHCTL_QUIET", "1")
        patch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))
        patch.delenv("PATCHCTL_UPSTREAM_URL", raising=False)
        patch.delenv("GITHUB_ACTIONS", raising=False)
        return build_template(tmp_path_factory.mktemp("template"))


@pytest.fixture(scope="module")
def examples_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("examples")


_counter = itertools.count()
_settings = settings(
    max_examples=EXAMPLES or DEFAULT_EXAMPLES,
    deadline=None,
    derandomize=not EXAMPLES,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
    # No shrinking: an example is a handful of additions, printed whole; shrinking one re-runs
    # every command per step (minutes).
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
)


def _seeded(test):
    value = os.environ.get("PATCHCTL_PROPERTY_SEED")
    return seed(int(value))(test) if value else test


@_seeded
@_settings
@given(
    st.lists(additions(devices=AS_ROOT), min_size=1, max_size=6),
    st.lists(additions(devices=AS_ROOT, blocking=True), max_size=1) | st.just([]) | st.just([]),
    st.lists(midway_additions(), max_size=2),
    st.lists(git_config_additions(), max_size=2, unique=True),
    st.sampled_from([False, False, False, True]),  # racing swaps in one example of four
)
# Every place hostile git config can be planted, at once, whatever the draw (issue 44, item 7).
@example([], [], [], [Addition("git-config", None, place) for place in GIT_CONFIG_PLACES], False)
def test_no_hostile_repository_moves_anything_outside_the_managed_paths(
    template: Template,
    examples_dir: Path,
    shared_cache: Path,
    monkeypatch: pytest.MonkeyPatch,
    hostile,
    blocking,
    midway,
    configs,
    racing,
) -> None:
    monkeypatch.setenv("PATCHCTL_CACHE", str(shared_cache))
    monkeypatch.setenv("PATCHCTL_LOCK_TIMEOUT", "2")  # a planted lock is waited on this long at most
    example = new_example(template, examples_dir / f"example-{next(_counter)}")
    for addition in [*hostile, *blocking, *configs]:
        apply_addition(example, addition)
    problems, outcomes = run_every_command(example, template.upstream, SECONDS, midway, racing)
    if os.environ.get("PATCHCTL_PROPERTY_VERBOSE"):  # with -s: what each example made and what each command said
        print("\n".join(["made: " + "; ".join(example.made), *(o.summary() for o in outcomes)]))
    assert not problems, "\n".join(
        ["made: " + "; ".join(example.made) + ("; racing swaps" if racing else ""), *problems]
        + ["exit codes: " + str([(o.args, o.exit_code) for o in outcomes])]
    )


def test_the_judge_sees_a_change_outside_a_bad_ending_and_a_hang(template: Template, examples_dir: Path) -> None:
    """The property's checks can fail: a write outside or into `.git` is seen (one inside the
    managed paths or `.git/patchctl` is not), and so are a traceback, an undocumented exit code,
    a missing or second error line, a slow run, and a hang (cut off at its bound)."""
    example = new_example(template, examples_dir / "judge")
    before = outside_state(example, template.upstream)
    (example.outside / "victim.txt").write_text("changed\n")
    (example.project / ".git" / "hooks" / "pre-commit").write_text("#!/bin/sh\n")
    (example.project / "src-local" / "own.c").unlink()
    (example.project / "patches" / "main" / "0009-new.patch").write_text("managed: patchctl may write it\n")
    (example.project / ".git" / "patchctl").mkdir(exist_ok=True)
    (example.project / ".git" / "patchctl" / "journal.json").write_text("{}")
    found = differences(before, outside_state(example, template.upstream))
    assert [line.split(":")[0] for line in found] == [
        "outside/victim.txt",
        "project/.git/hooks/pre-commit",
        "project/src-local/own.c",
    ], found

    def judged(code: int | None, stdout: str, stderr: str, seconds: float = 0.1) -> list[str]:
        return problems_of(Outcome(("lint",), code, f"{stdout}\n--- stderr ---\n{stderr}", seconds), 20)

    assert judged(1, "a finding", "patchctl: error: 1 finding(s)\n") == []
    assert judged(0, "lint: no findings", "") == []
    assert "exit 4" in judged(4, "", "patchctl: error: x\n")[0]
    assert "0 error line(s)" in judged(2, "", "something went wrong\n")[0]
    assert "2 error line(s)" in judged(3, "", "patchctl: error: one\npatchctl: error: two\n")[0]
    assert "traceback" in judged(2, "", "Traceback (most recent call last):\npatchctl: error: x\n")[0]
    assert "took 25.0 s" in judged(0, "ok", "", 25)[0]
    fifo = example.base / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(Hung), time_bound(0.5):
        fifo.read_bytes()  # no writer: blocks until the bound
