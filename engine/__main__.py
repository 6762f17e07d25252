"""`python -m engine COMMAND`: the reference engine's command line.

Each command lives in its own module with a `main(argv) -> int`; modules are imported
only when their command runs, so the pure-Python commands never pay for torch.
"""

from __future__ import annotations

import importlib
import os
import sys

COMMANDS: dict[str, tuple[str, str]] = {
    "preflight": ("engine.tools.preflight", "say which torch the engine has; warn on a GPU build without a GPU"),
    "vectors": ("engine.tools.vectors", "write the block manager's conformance vectors"),
    "capacity": ("engine.tools.capacity", "paged vs reserved KV capacity and prefix-sharing memory"),
    "generate": ("engine.tools.generate", "generate text with the embedded tiny model"),
    "bench": ("engine.tools.bench", "decode throughput, block-manager and speculative decoding benchmarks"),
    "gate0": ("engine.tools.gate0", "Gate 0: paged KV must match the contiguous reference"),
    "export-gguf": (
        "engine.tools.export_gguf",
        "write the tiny model (or a GGUF model) as a llama GGUF file",
    ),
    "model-gate": ("engine.tools.model_gate", "the tiny model in llama.cpp: paged == stock, engine == llama.cpp"),
    "tokenize": ("engine.tools.tokenize", "token ids of a text (or text of ids) with a GGUF file's tokenizer"),
}


def _usage() -> str:
    width = max(map(len, COMMANDS))
    lines = ["usage: python -m engine COMMAND [ARGS...]", "", "commands:"]
    lines += [f"  {name:<{width}}  {summary}" for name, (_, summary) in COMMANDS.items()]
    lines += ["", "Run `python -m engine COMMAND --help` for a command's options."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"engine: unknown command {name!r}; choose from {', '.join(COMMANDS)}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[name][0])
    try:
        code = int(module.main(rest) or 0)
        sys.stdout.flush()  # output still buffered meets a closed pipe here, not at exit
        return code
    except BrokenPipeError:
        # The reader went away (`... | head`): not an error of ours; keep Python's exit-time flush quiet.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print(f"engine {name}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
