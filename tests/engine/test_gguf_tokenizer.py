"""GGUF tokenizers against llama.cpp.

Three tiers:
- always: small vocabulary-only GGUF files written here with gguf-py (hand-checked ids, errors, CLI);
- realupstream: llama.cpp's own tokenizer test vectors (models/ggml-vocab-*.gguf with .inp/.out, used as
  tests/test-tokenizer-0.cpp uses them), taken from the llama-cpp-python sdist patchctl's store caches;
- slow: llama.cpp's `llama-tokenize`, built once from that sdist into the cache, against ours on
  arbitrary text.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

import gguf
import pytest
from filelock import FileLock

from engine.__main__ import main as engine_main
from engine.model import gguf_tokenizer
from engine.tools import tokenize as tokenize_tool

SDIST_PACKAGE = "llama-cpp-python"
SDIST_VERSION = "0.3.30"
MODELS_DIR = f"llama_cpp_python-{SDIST_VERSION}/vendor/llama.cpp/models"
LLAMA_CPP_DIR = f"llama_cpp_python-{SDIST_VERSION}/vendor/llama.cpp"

# every vocabulary with test vectors whose tokenizer is implemented, and the class expected for it
VECTOR_VOCABS = {
    "llama-spm": "SentencePieceTokenizer",
    "phi-3": "SentencePieceTokenizer",
    "llama-bpe": "BPETokenizer",
    "qwen2": "BPETokenizer",
    "qwen35": "BPETokenizer",
    "gpt-2": "BPETokenizer",
    "mpt": "BPETokenizer",
    "starcoder": "BPETokenizer",
    "refact": "BPETokenizer",
    "falcon": "BPETokenizer",
    "deepseek-coder": "BPETokenizer",
    "command-r": "BPETokenizer",
}


def run_engine(*args: str | Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = engine_main([str(a) for a in args])
    return code, out.getvalue(), err.getvalue()


# --- tier 1: vocabularies written here ---------------------------------------------------------

SPM_PIECES = [("▁", -5.0), ("h", -6.0), ("i", -6.0), ("▁h", -2.0), ("▁hi", -1.0), ("<|user|>", 0.0)]
SPM_BASE = 3 + 256  # <unk> <s> </s>, then <0x00>..<0xFF>


def write_vocab(path: Path, model: str = "llama", *, pre: str | None = None, add_bos: bool | None = None) -> Path:
    """A vocabulary-only GGUF: control tokens, the 256 byte tokens, a few pieces and one user token."""
    tokens = ["<unk>", "<s>", "</s>", *(f"<0x{b:02X}>" for b in range(256)), *(p for p, _ in SPM_PIECES)]
    scores = [0.0, 0.0, 0.0, *([0.0] * 256), *(s for _, s in SPM_PIECES)]
    types = [
        gguf.TokenType.UNKNOWN,
        gguf.TokenType.CONTROL,
        gguf.TokenType.CONTROL,
        *([gguf.TokenType.BYTE] * 256),
        *([gguf.TokenType.NORMAL] * (len(SPM_PIECES) - 1)),
        gguf.TokenType.USER_DEFINED,
    ]
    writer = gguf.GGUFWriter(str(path), arch="llama")
    writer.add_tokenizer_model(model)
    if pre is not None:
        writer.add_tokenizer_pre(pre)
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    if add_bos is not None:
        writer.add_add_bos_token(add_bos)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    return path


@pytest.fixture
def spm_vocab(tmp_path: Path) -> Path:
    return write_vocab(tmp_path / "spm.gguf")


def test_spm_merges_by_score_and_falls_back_to_bytes(spm_vocab: Path) -> None:
    tok = gguf_tokenizer.load_tokenizer(spm_vocab)
    hi = SPM_BASE + 4
    h = SPM_BASE + 3
    # " hi hi": the space prefix and escaping give ▁hi▁hi; ▁h merges first (best score), then ▁hi
    assert tok.encode("hi hi") == [1, hi, hi]
    assert tok.encode("hi hi", add_special=False) == [hi, hi]
    # é has no piece: its two UTF-8 bytes become byte tokens
    assert tok.encode("hé", add_special=False) == [h, 3 + 0xC3, 3 + 0xA9]
    assert tok.decode([h, 3 + 0xC3, 3 + 0xA9]) == "hé"  # the prefix space is stripped again
    assert tok.decode([1, hi, hi]) == " hi hi"  # as llama.cpp: a hidden BOS takes the space strip
    assert tok.decode([1, hi, hi], unparse_special=True) == "<s> hi hi"
    assert tok.decode([1, hi, hi], remove_special=True) == " hi hi"


def test_special_tokens_are_parsed_only_when_asked(spm_vocab: Path) -> None:
    tok = gguf_tokenizer.load_tokenizer(spm_vocab)
    hi = SPM_BASE + 4
    end = SPM_BASE + 5
    # user-defined tokens are always cut out; the text after one gets the space prefix again
    assert tok.encode("hi<|user|>hi", add_special=False) == [hi, end, hi]
    # control tokens only with parse_special; otherwise "<s>" is plain text (here: bytes)
    assert tok.encode("<s>hi", add_special=False, parse_special=True) == [1, hi]
    byte = [3 + b for b in b"<s>"]
    assert tok.encode("<s>hi", add_special=False) == [SPM_BASE, *byte, SPM_BASE + 1, SPM_BASE + 2]


def test_unknown_tokenizer_model_is_one_clear_error(tmp_path: Path) -> None:
    module = gguf_tokenizer
    path = write_vocab(tmp_path / "t5.gguf", model="t5")
    with pytest.raises(module.TokenizerError, match=r"tokenizer model 't5' is not supported; supported: llama, gpt2"):
        module.load_tokenizer(path)
    code, out, err = run_engine("tokenize", "--model", path, "hi")
    assert (code, out) == (2, "")
    assert err.strip().splitlines() == [
        "engine tokenize: error: tokenizer model 't5' is not supported; supported: llama, gpt2"
    ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such file"),
        (b"", "not a GGUF file (bad magic)"),
        (b"GGUF\x03\x00\x00\x00" + b"\x00" * 8 + b"\x05\x00", "truncated GGUF file"),
        (b"PK\x03\x04 a zip, not a model", "not a GGUF file (bad magic)"),
    ],
)
def test_bad_files_are_one_line_and_exit_2(tmp_path: Path, content: bytes | None, message: str) -> None:
    path = tmp_path / "model.gguf"
    if content is not None:
        path.write_bytes(content)
    code, out, err = run_engine("tokenize", "--model", path, "hello")
    assert (code, out) == (2, "")
    assert len(err.strip().splitlines()) == 1 and message in err and "Traceback" not in err


def test_gguf_without_tokenizer(tmp_path: Path) -> None:
    path = tmp_path / "bare.gguf"
    writer = gguf.GGUFWriter(str(path), arch="llama")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    code, _, err = run_engine("tokenize", "--model", path, "hello")
    assert code == 2 and "tokenizer.ggml.model is missing" in err


def test_wrongly_typed_metadata_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "ints.gguf"
    writer = gguf.GGUFWriter(str(path), arch="llama")
    writer.add_tokenizer_model("llama")
    writer.add_array("tokenizer.ggml.tokens", [1, 2, 3])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    code, _, err = run_engine("tokenize", "--model", path, "hello")
    assert code == 2 and err.strip().endswith("tokenizer.ggml.tokens is not an array of the expected type")


def test_cli_round_trip_and_id_formats(spm_vocab: Path) -> None:
    code, out, _ = run_engine("tokenize", "--model", spm_vocab, "hi hi")
    assert code == 0
    ids = json.loads(out)
    assert ids == [1, SPM_BASE + 4, SPM_BASE + 4]
    for written in (out.strip(), " ".join(map(str, ids)), ",".join(map(str, ids)), "1, 263  263"):
        code, text, err = run_engine("tokenize", "--model", spm_vocab, "--detokenize", "--no-special", written)
        assert (code, text, err) == (0, " hi hi\n", "")
    code, text, _ = run_engine("tokenize", "--model", spm_vocab, "--detokenize", out)
    assert text == "<s> hi hi\n"
    code, out, _ = run_engine("tokenize", "--model", spm_vocab, "--no-bos", "hi hi")
    code, text, _ = run_engine("tokenize", "--model", spm_vocab, "--detokenize", out)
    assert (code, text) == (0, "hi hi\n")


def test_cli_processes_escapes_like_llama_tokenize(spm_vocab: Path) -> None:
    newline, tab = 3 + 0x0A, 3 + 0x09
    code, out, _ = run_engine("tokenize", "--model", spm_vocab, "--no-bos", r"h\n\t\x41\q")
    assert code == 0
    assert json.loads(out) == [SPM_BASE + 3, newline, tab, 3 + 0x41, 3 + ord("\\"), 3 + ord("q")]
    code, out, _ = run_engine("tokenize", "--model", spm_vocab, "--no-bos", "--no-escape", r"h\n")
    assert json.loads(out) == [SPM_BASE + 3, 3 + ord("\\"), 3 + ord("n")]


@pytest.mark.parametrize(
    ("ids", "message"),
    [("1 x", "'x' is not an integer"), ("[1, 2", "not a JSON list"), ('["a"]', "integers only"), ("9999", "range")],
)
def test_cli_bad_ids(spm_vocab: Path, ids: str, message: str) -> None:
    code, out, err = run_engine("tokenize", "--model", spm_vocab, "--detokenize", ids)
    assert (code, out) == (2, "")
    assert len(err.strip().splitlines()) == 1 and message in err


def test_cli_usage_errors_exit_2(spm_vocab: Path) -> None:
    assert run_engine("tokenize", "hello")[0] == 2  # --model is required
    assert run_engine("tokenize", "--model", spm_vocab)[0] == 2  # TEXT is required


# --- tier 2: llama.cpp's own test vectors ------------------------------------------------------


def real_cache_dir() -> Path:
    """The realupstream tier's shared cache (as tests/patchctl/conftest.py): sdists download once."""
    return Path(os.environ.get("PATCHCTL_TEST_CACHE") or Path.home() / ".cache" / "patchctl")


@contextlib.contextmanager
def real_cache() -> Iterator[Path]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PATCHCTL_CACHE", str(real_cache_dir()))
        yield real_cache_dir()


def llama_cpp_sdist() -> Path:
    from patchctl.upstream import sdist

    with real_cache():
        return sdist.fetch_sdist(SDIST_PACKAGE, SDIST_VERSION)  # sha256-checked on download


@pytest.fixture(scope="session")
def vocab_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """llama.cpp's vocabulary files and vectors, extracted from the sdist (never committed)."""
    dest = tmp_path_factory.mktemp("vocab")
    with tarfile.open(llama_cpp_sdist()) as archive:
        for member in archive.getmembers():
            name = member.name.rsplit("/", 1)[-1]
            if member.isfile() and member.name.startswith(MODELS_DIR + "/ggml-vocab-"):
                (dest / name).write_bytes(archive.extractfile(member).read())  # type: ignore[union-attr]
    return dest


def read_vectors(vocab: Path) -> list[tuple[str, list[int]]]:
    """(text, ids) pairs as test-tokenizer-0 reads them: inputs separated by __ggml_vocab_test__ lines."""
    inputs = vocab.with_name(vocab.name + ".inp").read_bytes().decode("utf-8", "surrogateescape")
    texts = inputs.split("\n__ggml_vocab_test__\n")
    if texts and texts[-1] == "":
        texts.pop()
    lines = vocab.with_name(vocab.name + ".out").read_text().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    assert len(texts) == len(lines), f"{vocab.name}: {len(texts)} inputs but {len(lines)} outputs"
    return [(text, [int(v) for v in line.split()]) for text, line in zip(texts, lines)]


@pytest.mark.realupstream
@pytest.mark.parametrize("name", sorted(VECTOR_VOCABS))
def test_llama_cpp_vectors(vocab_dir: Path, name: str) -> None:
    tok = gguf_tokenizer.load_tokenizer(vocab_dir / f"ggml-vocab-{name}.gguf")
    assert type(tok).__name__ == VECTOR_VOCABS[name]
    vectors = read_vectors(vocab_dir / f"ggml-vocab-{name}.gguf")
    assert len(vectors) >= 40
    failures = [
        (text, got, want)
        for text, want in vectors
        if (got := tok.encode(text, add_special=False, parse_special=False)) != want
    ]
    assert not failures, f"{len(failures)}/{len(vectors)} vectors differ, first: {failures[0]!r}"


@pytest.mark.realupstream
@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("bert-bge", "tokenizer model 'bert' is not supported; supported: llama, gpt2"),
        ("deepseek-llm", "pre-tokenizer 'deepseek-llm' is not supported"),
    ],
)
def test_unsupported_real_vocabularies(vocab_dir: Path, name: str, message: str) -> None:
    code, out, err = run_engine("tokenize", "--model", vocab_dir / f"ggml-vocab-{name}.gguf", "hello")
    assert (code, out) == (2, "")
    assert message in err and len(err.strip().splitlines()) == 1


@pytest.mark.realupstream
@pytest.mark.parametrize(
    ("name", "text", "want"),
    [
        # BOS from the metadata, control tokens parsed, escapes processed (llama-tokenize's defaults)
        ("llama-spm", r"Hello world\n", [1, 15043, 3186, 13]),
        ("llama-bpe", "Hello world<|eot_id|>", [128000, 9906, 1917, 128009]),
    ],
)
def test_cli_on_real_vocabularies(vocab_dir: Path, name: str, text: str, want: list[int]) -> None:
    vocab = vocab_dir / f"ggml-vocab-{name}.gguf"
    code, out, _ = run_engine("tokenize", "--model", vocab, text)
    assert (code, json.loads(out)) == (0, want)
    code, back, _ = run_engine("tokenize", "--model", vocab, "--detokenize", out)
    assert code == 0
    assert back.replace("<s> ", "").replace("<|begin_of_text|>", "") == text.replace("\\n", "\n") + "\n"


# --- tier 3: against llama.cpp's llama-tokenize --------------------------------------------------

COMPARE_VOCABS = ("llama-spm", "llama-bpe", "qwen2")
COMPARE_TEXTS = [
    "Hello world",
    " leading space",
    "trailing space ",
    "   three leading spaces and  two   inner",
    "tabs\tand\t\ttabs",
    "new\nlines\n\n\nand\r\nCRLF",
    " \n \t\n\t x",
    "digits 1 12 123 1234 12345 1234567890 3.14159 -42 1e10",
    "mixed CASE Words ALLCAPS camelCaseIdentifier snake_case_name",
    "I'm you're they've we'd she'll it's DON'T Can'T",
    "def f(x):\n    return {'a': [1, 2, 3]}  # comment\n",
    "if (a && b || !c) { x += y << 2; } else { z = a ? b : c; }",
    '<html><body class="x">&amp; &lt;tag&gt;</body></html>',
    "héllo wörld ça va? naïve café Ångström",
    "Привет мир! Ελληνικά κείμενο",
    "中文文本测试，包括标点符号。日本語のテキスト、カタカナ",
    "한국어 텍스트 테스트",
    "العربية نص עברית",
    "emoji 😀🎉👍🏽 family 👨‍👩‍👧 flags 🇫🇷🇯🇵",
    "ℌ𝔢𝔩𝔩𝔬 math ∑∫√∞ ≠ ≤ ≥ symbols ©®™ €£¥",
    "zero\u200bwidth and\u00a0nbsp and\u3000ideographic space",
    "combining e\u0301 a\u0308 and precomposed é ä",
    "   ",
    "\n",
    "a",
    "!!!??? ... ---- ==== ____ ****",
    "https://example.com/path?query=1&b=2#frag user@example.org",
    "<s>literal bos</s> <|begin_of_text|> <|im_start|>user<|im_end|> <|eot_id|>",
    "The quick brown fox jumps over the lazy dog. " * 3,
    "\\n stays escaped? no: escapes are processed",
]


def llama_tokenize_binary() -> Path:
    """llama.cpp's llama-tokenize from the sdist, built once into the cache keyed by the sdist version."""
    target = real_cache_dir() / "llama-tokenize" / SDIST_VERSION
    binary = target / "llama-tokenize"
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock", timeout=3600):
        if binary.exists():
            return binary
        sdist_path = llama_cpp_sdist()
        with tempfile.TemporaryDirectory(prefix="llama-tokenize-") as scratch:
            work = Path(scratch)
            with tarfile.open(sdist_path) as archive:
                members = [m for m in archive.getmembers() if m.name.startswith(LLAMA_CPP_DIR + "/")]
                safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}  # Python >= 3.11.4
                archive.extractall(work, members=members, **safe)
            source, build = work / LLAMA_CPP_DIR, work / "build"
            configure = ["cmake", "-S", source, "-B", build, "-DCMAKE_BUILD_TYPE=Release"]
            configure += ["-DLLAMA_BUILD_TESTS=OFF", "-DGGML_NATIVE=OFF", "-DLLAMA_CURL=OFF"]
            configure += ["-DLLAMA_BUILD_SERVER=OFF", "-DLLAMA_OPENSSL=OFF"]
            subprocess.run([str(a) for a in configure], check=True, capture_output=True)
            subprocess.run(
                ["cmake", "--build", str(build), "--target", "llama-tokenize", "-j2"], check=True, capture_output=True
            )
            # the binary and the shared libraries it loads, moved into place in one rename
            staged = Path(tempfile.mkdtemp(prefix=".staged-", dir=target.parent))
            for built in (build / "bin").iterdir():
                if built.name == "llama-tokenize" or ".so" in built.name:
                    shutil.copy2(built, staged / built.name, follow_symlinks=False)
            staged.rename(target)
    return binary


def llama_tokenize(binary: Path, vocab: Path, text: str) -> list[int]:
    env = {**os.environ, "LD_LIBRARY_PATH": str(binary.parent)}
    command = [str(binary), "-m", str(vocab), "--ids", "--log-disable", "-p", text]
    done = subprocess.run(command, check=True, capture_output=True, env=env)
    return json.loads(done.stdout.decode().strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.realupstream
@pytest.mark.parametrize("name", COMPARE_VOCABS)
def test_against_llama_tokenize(vocab_dir: Path, name: str) -> None:
    binary = llama_tokenize_binary()
    vocab = vocab_dir / f"ggml-vocab-{name}.gguf"
    tok = gguf_tokenizer.load_tokenizer(vocab)
    mismatches = []
    for text in COMPARE_TEXTS:
        want = llama_tokenize(binary, vocab, text)
        # llama-tokenize's defaults: escapes processed, BOS as the metadata says, control tokens parsed
        got = tok.encode(tokenize_tool.process_escapes(text), add_special=tok.add_bos, parse_special=True)
        if got != want:
            mismatches.append((text, got, want))
    # and the command line once (each run loads the vocabulary again)
    code, out, err = run_engine("tokenize", "--model", vocab, COMPARE_TEXTS[-3])
    assert (code, json.loads(out)) == (0, llama_tokenize(binary, vocab, COMPARE_TEXTS[-3])), err
    print(f"{name}: {len(COMPARE_TEXTS) - len(mismatches)}/{len(COMPARE_TEXTS)} texts identical", file=sys.stderr)
    assert not mismatches, f"{len(mismatches)} texts differ, first: {mismatches[0]!r}"


def test_the_engine_speaks_the_model_files_own_tokenizer(spm_vocab: Path, tmp_path: Path) -> None:
    from dataclasses import replace

    from engine.model.gguf import write_gguf
    from engine.model.llama import TINY_CONFIG, LlamaModel, random_weights
    from engine.runtime.llm_engine import LLMEngine
    from engine.runtime.sampling import SamplingParams
    from engine.tools.generate import file_tokenizer

    tok = file_tokenizer(str(spm_vocab))
    assert isinstance(tok, gguf_tokenizer.SentencePieceTokenizer)
    tiny = tmp_path / "tiny.gguf"
    write_gguf(tiny, LlamaModel.tiny())
    assert file_tokenizer(str(tiny)) is None  # the embedded character vocabulary stays the engine's own

    config = replace(TINY_CONFIG, vocab_size=tok.vocab_size)
    engine = LLMEngine(LlamaModel(config, random_weights(config)), tokenizer=tok)
    [out] = engine.generate(["hi hi"], SamplingParams(max_tokens=4, ignore_eos=True))
    assert out.prompt_token_ids == tok.encode("hi hi") == [1, SPM_BASE + 4, SPM_BASE + 4]
    assert len(out.token_ids) == 4 and out.text == tok.decode(out.token_ids)
