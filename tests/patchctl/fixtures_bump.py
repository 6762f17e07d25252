"""A small replay of a real vendor bump: Ollama's llama.cpp series across an upstream move.

Modelled on Ollama's bumps of llama.cpp (issue 32), in a local git upstream:

* upstream moves `examples/llava/clip.cpp` to `tools/mtmd/clip.cpp`, with small edits (one in
  the context of the series' clip patch): the patch must follow the rename, as `git am -3` does;
* the series' vocab patch was cut against the old pin plus a cherry-picked upstream commit,
  so its `index` line names a preimage blob upstream never had; upstream then edits the
  patch's context (strict apply fails, 3-way needs that blob);
* the series adds GGML_OP_UNPAD and increments GGML_OP_COUNT in two `static_assert`s; upstream
  adds GGML_OP_ROLL elsewhere in the same tables and increments the same lines: the same edit
  for another reason (the right count holds both operators).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass

from patchctl import git

from .conftest import Project, Repo

OPS = ["NONE", "DUP", "ADD", "SUB", "MUL", "DIV", "SQR", "SQRT", "LOG", "SUM", "MEAN", "ARGMAX", "CONCAT"]
OPS += ["NORM", "RMS_NORM", "GROUP_NORM", "MUL_MAT", "SCALE", "CPY", "CONT", "RESHAPE", "VIEW", "PERMUTE"]
OPS += ["TRANSPOSE", "GET_ROWS", "DIAG", "SOFT_MAX", "ROPE", "CLAMP", "CONV_1D", "POOL_1D", "UPSCALE", "PAD"]
OPS += ["ARANGE", "TIMESTEP_EMBEDDING", "ARGSORT", "LEAKY_RELU", "FLASH_ATTN_EXT"]


def ggml_h(ops: list[str]) -> str:
    body = "".join(f"        GGML_OP_{op},\n" for op in ops)
    return f"#pragma once\n\n    enum ggml_op {{\n{body}\n        GGML_OP_COUNT,\n    }};\n"


def ggml_c(ops: list[str], count: int) -> str:
    names = "".join(f'    "{op}",\n' for op in ops)
    symbols = "".join(f'    "{op.lower()}(x)",\n' for op in ops)
    return (
        '#include "ggml.h"\n\n'
        f"static const char * GGML_OP_NAME[GGML_OP_COUNT] = {{\n{names}}};\n\n"
        f'static_assert(GGML_OP_COUNT == {count}, "GGML_OP_COUNT != {count}");\n\n'
        f"static const char * GGML_OP_SYMBOL[GGML_OP_COUNT] = {{\n{symbols}}};\n\n"
        f'static_assert(GGML_OP_COUNT == {count}, "GGML_OP_COUNT != {count}");\n\n'
        "const char * ggml_op_name(enum ggml_op op) {\n    return GGML_OP_NAME[op];\n}\n"
    )


def clip_cpp(include: str = '"clip.h"', last_helper: str = "x + 15", unicode: bool = False) -> str:
    lines = [f"#include {include}", "#include <string>", "#include <vector>", ""]
    lines += [f"static int clip_helper_{i}(int x) {{ return x + {i}; }}" for i in range(1, 15)]
    lines += [f"static int clip_helper_15(int x) {{ return {last_helper}; }}"]
    lines += ["", "struct clip_ctx * clip_model_load(const char * fname) {"]
    if unicode:
        lines += ["    std::wstring wname = utf8_to_wide(fname);", "    return load_model_w(wname.c_str());"]
    else:
        lines += ["    std::string name(fname);", "    return load_model(name);"]
    lines += ["}", ""]
    lines += [f"static int clip_tail_{i}(int x) {{ return x * {i}; }}" for i in range(1, 16)]
    return "\n".join(lines) + "\n"


def vocab_cpp(changes: dict[int, str] | None = None) -> str:
    lines = [f"    vocab_step({i});" for i in range(1, 61)]
    for number, text in (changes or {}).items():
        lines[number - 1] = text
    return "void llama_vocab_load() {\n" + "\n".join(lines) + "\n}\n"


@dataclass
class Bump:
    pin: str
    target: str
    rename_commit: str
    roll_commit: str
    vocab_preimage: str  # the blob the vocab patch's index line names: upstream never had it


def unpad(ops: list[str]) -> list[str]:
    return ops[: ops.index("PAD") + 1] + ["UNPAD"] + ops[ops.index("PAD") + 1 :]


def roll(ops: list[str]) -> list[str]:
    return ops[: ops.index("CONCAT") + 1] + ["ROLL"] + ops[ops.index("CONCAT") + 1 :]


def build_bump(upstream: Repo, project: Project) -> Bump:
    """Fill UPSTREAM with the old pin and the bump's commits, and PROJECT with the series."""
    pin = upstream.commit(
        {
            "examples/llava/clip.cpp": clip_cpp(),
            "ggml/include/ggml.h": ggml_h(OPS),
            "ggml/src/ggml.c": ggml_c(OPS, len(OPS)),
            "src/llama-vocab.cpp": vocab_cpp(),
        },
        "llama.cpp at the old pin",
    )
    clip = cut_patch(
        upstream,
        pin,
        [{"examples/llava/clip.cpp": clip_cpp(unicode=True)}],
        "clip: use unicode paths on windows",
    )
    with_unpad = unpad(OPS)
    unpad_patch = cut_patch(
        upstream,
        pin,
        [{"ggml/include/ggml.h": ggml_h(with_unpad), "ggml/src/ggml.c": ggml_c(with_unpad, len(with_unpad))}],
        "add unpad operator",
    )
    # Upstream's history between the pins.
    upstream.commit({"src/llama-vocab.cpp": vocab_cpp({45: "    vocab_step_upstream(45);"})}, "vocab: tidy step 45")
    cherry = {5: "    vocab_step_fixed(5);"}
    upstream.commit(
        {"src/llama-vocab.cpp": vocab_cpp({45: "    vocab_step_upstream(45);", **cherry})}, "vocab: fix step 5"
    )
    # The series' vocab patch was cut on the old pin plus that one fix: a tree upstream never had.
    vocab = cut_patch(
        upstream,
        pin,
        [
            {"src/llama-vocab.cpp": vocab_cpp(cherry)},
            {"src/llama-vocab.cpp": vocab_cpp({**cherry, 28: "    vocab_x(28);"})},
        ],
        "vocab: patch step 28",
    )
    vocab_preimage = git.run(["hash-object", "--stdin"], upstream.path, input=vocab_cpp(cherry)).stdout.strip()
    upstream.commit(
        {"src/llama-vocab.cpp": vocab_cpp({45: "    vocab_step_upstream(45);", **cherry, 30: "    vocab_y(30);"})},
        "vocab: rework step 30",
    )
    # Upstream moves the directory and edits the moved file a little (the include, a line of the clip patch's context).
    (upstream.path / "tools").mkdir()
    git.run(["mv", "examples/llava", "tools/mtmd"], upstream.path)
    rename_commit = upstream.commit(
        {"tools/mtmd/clip.cpp": clip_cpp(include='"mtmd/clip.h"', last_helper="x + 15 + 0")},
        "mtmd: move llava to tools/mtmd",
    )
    with_roll = roll(OPS)
    roll_commit = upstream.commit(
        {"ggml/include/ggml.h": ggml_h(with_roll), "ggml/src/ggml.c": ggml_c(with_roll, len(with_roll))},
        "ggml: add ggml_roll",
    )
    project.add_patch("0001-clip-unicode.patch", clip)
    project.add_patch("0002-vocab-patch-step-28.patch", vocab)
    project.add_patch("0003-add-unpad-operator.patch", unpad_patch)
    project.write_config(pin)
    return Bump(pin, upstream.head, rename_commit, roll_commit, vocab_preimage)


def cut_patch(upstream: Repo, base: str, steps: list[dict[str, str]], subject: str) -> str:
    """A format-patch of the last of STEPS, committed in a scratch clone on BASE after the
    others (a cherry-pick the series' tree held)."""
    scratch = upstream.path.parent / f"cut-{abs(hash((base, subject)))}"
    shutil.rmtree(scratch, ignore_errors=True)
    git.run(["clone", "-q", str(upstream.path), str(scratch)], upstream.path.parent)
    try:
        repo = Repo(scratch)
        git.run(["checkout", "-q", "--detach", base], scratch)
        for number, files in enumerate(steps, 1):
            repo.write(files)
            git.commit_all(scratch, subject if number == len(steps) else f"cherry-pick {number}")
        return git.run(
            ["format-patch", "-1", "--stdout", "--zero-commit", "--no-signature", "--full-index", "HEAD"], scratch
        ).stdout
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
