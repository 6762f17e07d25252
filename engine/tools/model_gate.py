"""`python -m engine model-gate`: the tiny model decoded inside llama.cpp with the series applied.

Run by `patchctl gate` in the applied tree (`--tree`, default: the working directory). Writes the
tiny model with the llama-spm vocabulary as a GGUF file, builds libllama and the series' driver
`test-paged-decode` in the persistent build cache (engine/llamacpp/build.py; it says on stderr
that it is compiling, how far it has come and where its log is), decodes every case
of engine/llamacpp/model_gate.py with LLAMA_KV_PAGED off and on, and prints one
`PASS|FAIL <check>/<case>: ...` line per check: paged == stock token streams (md5), the engine's
tokenizer == llama.cpp's on the prompts, the engine's greedy tokens == llama.cpp's with logits
within the documented tolerance. Build time and the logit figures go to stderr.

Exit codes: 0 every check passed; 1 a check failed; 2 bad arguments;
3 the build or the driver could not run (one `FAIL build: ...` or `FAIL driver: ...` line).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from engine.tools.common import EXIT_FAILED, EXIT_OK, ArgumentParser, parse_args

EXIT_ENVIRONMENT = 3
PROG = "engine model-gate"


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(prog="python -m engine model-gate", description=__doc__.splitlines()[0])
    p.add_argument("--tree", type=Path, default=Path("."), help="the applied llama.cpp tree (default: .)")
    p.add_argument("--out", type=Path, default=None, help="scratch directory (default: $PATCHCTL_OUT/model-gate)")
    p.add_argument(
        "--upstream-rev", default=None, help="the upstream commit, for the build key (default: $PATCHCTL_UPSTREAM_REV)"
    )
    p.add_argument("--jobs", type=int, default=2, help="parallel compile jobs (2)")
    p.add_argument("--timeout", type=int, default=600, help="seconds per driver run (600)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parse_args(build_parser(), argv)
    if isinstance(args, int):
        return args
    from engine.llamacpp.build import BuildError, build_targets
    from engine.llamacpp.model_gate import CASES, DRIVER, DriverError, compare_engine, compare_paged, run_driver
    from engine.llamacpp.model_gate import write_cases as write_case_file
    from engine.model.gguf import write_gguf
    from engine.model.gguf_vocab import llama_spm_vocabulary, tiny_model_for

    tree = args.tree.resolve()
    out = (args.out or Path(os.environ.get("PATCHCTL_OUT") or ".") / "model-gate").resolve()
    out.mkdir(parents=True, exist_ok=True)
    rev = args.upstream_rev or os.environ.get("PATCHCTL_UPSTREAM_REV") or ""

    vocabulary = llama_spm_vocabulary()
    model_path = out / "tiny-llama-spm.gguf"
    write_gguf(model_path, tiny_model_for(vocabulary), vocabulary)
    cases_file = out / "cases.tsv"
    write_case_file(cases_file, CASES)

    try:
        # The build's lines go to stderr, the gate's log: `patchctl gate` shows its last one while it runs.
        built = build_targets(tree, ["llama", DRIVER], rev, jobs=args.jobs, progress=_to_stderr)
    except BuildError as exc:
        print(f"FAIL build: {exc}")
        return EXIT_ENVIRONMENT
    how = "configured and built" if built.configured else "incremental"
    print(f"{PROG}: build {how} in {built.seconds:.1f} s ({built.build_dir})", file=sys.stderr)
    driver = built.build_dir / "bin" / DRIVER
    try:
        stock = run_driver(driver, model_path, cases_file, out / "logits-stock", paged=False, timeout=args.timeout)
        paged = run_driver(driver, model_path, cases_file, out / "logits-paged", paged=True, timeout=args.timeout)
    except DriverError as exc:
        print(f"FAIL driver: {exc}")
        return EXIT_ENVIRONMENT
    results = compare_paged(CASES, stock, paged)
    engine = compare_engine(model_path, CASES, stock)
    results += engine.results
    for result in results:
        print(f"{'PASS' if result.ok else 'FAIL'} {result.name}: {result.detail}")
    print(
        f"{PROG}: engine vs llama.cpp: max |logit diff| {engine.max_logit_diff:.3g};"
        f" smallest top-2 logit margin in llama.cpp {engine.min_top2_margin:.3g}",
        file=sys.stderr,
    )
    return EXIT_OK if all(r.ok for r in results) else EXIT_FAILED


def _to_stderr(line: str) -> None:
    print(f"{PROG}: {line}", file=sys.stderr, flush=True)
