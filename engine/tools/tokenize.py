"""`python -m engine tokenize --model FILE.gguf TEXT`: token ids of TEXT with the file's tokenizer,
printed as a JSON list, as llama.cpp's `llama-tokenize --ids` prints them (same defaults: BOS as the
file's metadata says, control tokens in the text parsed, escapes such as `\\n` processed).
`--detokenize` goes the other way: TEXT is token ids (a JSON list, or separated by spaces or commas).

Exit codes: 0 done; 2 bad arguments, an unreadable or unsupported GGUF file, or ids out of range
(one `engine tokenize: error: ...` line on stderr).
"""

from __future__ import annotations

import argparse
import json
import re
import sys

from engine.model import gguf_tokenizer
from engine.tools.common import EXIT_BAD_INPUT, EXIT_OK, ArgumentParser, parse_args

PROG = "engine tokenize"
_ESCAPES = {"n": b"\n", "r": b"\r", "t": b"\t", "'": b"'", '"': b'"', "\\": b"\\"}


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(prog="python -m engine tokenize", description="Tokenize text with a GGUF vocabulary.")
    p.add_argument("text", metavar="TEXT", help="text to tokenize (with --detokenize: token ids)")
    p.add_argument("--model", "-m", required=True, metavar="GGUF", help="a GGUF file (vocabulary-only files work)")
    p.add_argument("--detokenize", action="store_true", help="TEXT is token ids; print their text")
    p.add_argument("--no-bos", action="store_true", help="never add BOS/EOS, even if the file asks for them")
    p.add_argument("--no-escape", action="store_true", help="take TEXT literally (no \\n, \\t, \\xHH ... escapes)")
    p.add_argument("--no-parse-special", action="store_true", help="control tokens in TEXT stay plain text")
    p.add_argument(
        "--no-special", action="store_true", help="with --detokenize: control tokens (BOS, EOS...) print nothing"
    )
    return p


def process_escapes(text: str) -> str:
    """llama.cpp's escape processing (common's string_process_escapes): \\n \\r \\t \\' \\" \\\\ and \\xHH
    (one byte, two hex digits); any other backslash pair is kept as written."""
    raw = text.encode("utf-8", "surrogateescape")
    out = bytearray()
    i = 0
    while i < len(raw):
        if raw[i : i + 1] == b"\\" and i + 1 < len(raw):
            code = chr(raw[i + 1])
            if code in _ESCAPES:
                out += _ESCAPES[code]
                i += 2
                continue
            if code == "x" and re.fullmatch(rb"[0-9A-Fa-f]{2}", raw[i + 2 : i + 4]) and i + 3 < len(raw):
                out.append(int(raw[i + 2 : i + 4], 16))
                i += 4
                continue
            out += raw[i : i + 2]
            i += 2
            continue
        out.append(raw[i])
        i += 1
    return out.decode("utf-8", "surrogateescape")


def parse_ids(text: str) -> list[int]:
    """Token ids written as a JSON list or separated by spaces and/or commas."""
    stripped = text.strip()
    if stripped.startswith("["):
        try:
            values = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise ValueError(f"token ids: not a JSON list ({exc.msg})") from None
        if not isinstance(values, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            raise ValueError("token ids: the JSON list must hold integers only")
        return values
    words = [w for w in re.split(r"[\s,]+", stripped) if w]
    bad = next((w for w in words if not re.fullmatch(r"-?\d+", w)), None)
    if bad is not None:
        raise ValueError(f"token ids: {bad!r} is not an integer")
    return [int(w) for w in words]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(build_parser(), argv)
    if isinstance(args, int):
        return args
    try:
        tokenizer = gguf_tokenizer.load_tokenizer(args.model)
        if args.detokenize:
            text = tokenizer.decode(parse_ids(args.text), unparse_special=not args.no_special)
            sys.stdout.write(text + "\n")
        else:
            text = args.text if args.no_escape else process_escapes(args.text)
            add_special = tokenizer.add_bos and not args.no_bos  # llama-tokenize ties EOS to BOS too
            ids = tokenizer.encode(text, add_special=add_special, parse_special=not args.no_parse_special)
            print(json.dumps(ids))
    except (gguf_tokenizer.TokenizerError, ValueError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return EXIT_OK
