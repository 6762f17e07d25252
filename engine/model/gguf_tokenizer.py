"""Tokenizers built from a GGUF file's vocabulary metadata, behaving as llama.cpp's llama-vocab does.

Supported `tokenizer.ggml.model` values: `llama` (SentencePiece-style merging by token score, with
byte fallback) and `gpt2` (byte-level BPE by merge rank, with the pre-tokenizer named by
`tokenizer.ggml.pre`). Only the vocabulary is read, so vocabulary-only GGUF files work.

llama.cpp's rules carried over (they decide the exact ids, so they are kept even where odd):
- special tokens (control, user-defined, unknown types) are cut out of the text first, longest first;
  without `parse_special` only the user-defined ones are;
- `llama` escapes spaces as U+2581 and, with `add_space_prefix`, prepends one space to every text
  fragment that follows a special token or starts the text;
- `gpt2` splits with the pre-tokenizer's regexes one after another (each splits the pieces the previous
  one left, keeping the unmatched text between matches), maps bytes to GPT-2's printable characters,
  then merges by rank; `ignore_merges` pre-tokenizers (llama3) take a whole piece that is a token as is;
- decoding drops control tokens unless asked, strips the leading space the prefix added, and for some
  pre-tokenizers applies the "clean spaces" rules (" ," -> ",", " 's" -> "'s" ...).
"""

from __future__ import annotations

import heapq
import mmap
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntFlag
from pathlib import Path

import numpy as np
import regex

SUPPORTED_MODELS = ("llama", "gpt2")
SPACE_ESCAPE = "\u2581"  # SentencePiece's visible space


class TokenizerError(ValueError):
    """The file has no usable tokenizer, or the input cannot be tokenized/detokenized."""


class TokenAttr(IntFlag):
    """llama.cpp's token attributes, derived from the GGUF token types."""

    UNDEFINED = 0
    UNKNOWN = 1 << 0
    UNUSED = 1 << 1
    NORMAL = 1 << 2
    CONTROL = 1 << 3
    USER_DEFINED = 1 << 4
    BYTE = 1 << 5
    LSTRIP = 1 << 7
    RSTRIP = 1 << 8


# GGUF token types (gguf.TokenType) -> attributes
_ATTR_FROM_TYPE = {
    1: TokenAttr.NORMAL,
    2: TokenAttr.UNKNOWN,
    3: TokenAttr.CONTROL,
    4: TokenAttr.USER_DEFINED,
    5: TokenAttr.UNUSED,
    6: TokenAttr.BYTE,
}

# Pre-tokenizer regexes (the Hugging Face tokenizer.json patterns llama.cpp uses, case-insensitive
# contractions spelled out as llama.cpp does).
_GPT2 = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"""
_CONTRACTIONS = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
_LLAMA3 = _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
_QWEN2 = _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
_QWEN35 = (
    _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


@dataclass(frozen=True)
class PreTokenizer:
    regexes: tuple[str, ...]
    ignore_merges: bool = False
    clean_spaces: bool = True
    add_bos: bool | None = None  # None: the vocabulary type's default


# `tokenizer.ggml.pre` names -> llama.cpp's pre-tokenizer settings (the subset implemented here).
PRE_TOKENIZERS: dict[str, PreTokenizer] = {
    "default": PreTokenizer((r"[\p{P}\$\+<=>\^~\|]+", _GPT2, r"\p{N}+", r"[0-9][0-9][0-9]")),
    **dict.fromkeys(
        ("llama3", "llama-v3", "llama-bpe", "falcon3", "pixtral", "dbrx", "smaug-bpe"),
        PreTokenizer((_LLAMA3,), ignore_merges=True, add_bos=True),
    ),
    **dict.fromkeys(("gpt-2", "phi-2", "mpt", "olmo", "jais"), PreTokenizer((_GPT2,))),
    **dict.fromkeys(("starcoder", "refact"), PreTokenizer((r"\p{N}", _GPT2))),
    "command-r": PreTokenizer((r"\p{N}", _GPT2), clean_spaces=False),
    **dict.fromkeys(("qwen2", "deepseek-r1-qwen"), PreTokenizer((_QWEN2,), clean_spaces=False)),
    "qwen35": PreTokenizer((_QWEN35,), clean_spaces=False),
    "stablelm2": PreTokenizer((_QWEN2,)),
    "deepseek-coder": PreTokenizer(
        (r"[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+", r"\p{N}"),
        clean_spaces=False,
    ),
    "falcon": PreTokenizer((r"[\p{P}\$\+<=>\^~\|`]+", _GPT2, "[0-9][0-9][0-9]")),
}


def _gpt2_byte_chars() -> list[str]:
    """GPT-2's reversible byte -> printable character table: printable Latin-1 bytes stand for
    themselves, the others are shifted to code points 256 and up in byte order."""
    keep = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    chars: list[str] = []
    shifted = 0
    for byte in range(256):
        if byte in keep:
            chars.append(chr(byte))
        else:
            chars.append(chr(256 + shifted))
            shifted += 1
    return chars


BYTE_TO_CHAR = _gpt2_byte_chars()
CHAR_TO_BYTE = {ch: b for b, ch in enumerate(BYTE_TO_CHAR)}


@dataclass(frozen=True)
class Vocabulary:
    """What a GGUF file says about its tokenizer."""

    model: str
    pre: str
    tokens: list[str]
    scores: list[float]
    token_types: list[int]
    merges: list[str]
    bos_id: int | None
    eos_id: int | None
    add_bos: bool | None
    add_eos: bool | None
    add_space_prefix: bool | None
    general_name: str = ""
    role_ids: dict[str, int] = field(default_factory=dict)  # "fim_pre", "eot"...: ids the metadata names


def _decode_text(raw: bytes) -> str:
    # surrogateescape keeps token texts that are not valid UTF-8 (lone bytes) distinct and reversible
    return raw.decode("utf-8", errors="surrogateescape")


def read_metadata(path: str | os.PathLike[str]) -> dict[str, object]:
    """The key/value metadata of the GGUF file at PATH; tensors are neither read nor mapped.

    gguf-py's GGUFReader makes a numpy view per array element, which takes ~40 s for a
    128k-token vocabulary, so the metadata section is parsed here with gguf-py's constants."""
    from gguf.constants import GGUF_MAGIC, GGUFValueType

    path = Path(path)
    try:
        with open(path, "rb") as file:
            # mapped, not read: a model file with its weights can be many GB and only the start is needed
            data = memoryview(mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) if path.stat().st_size else b"")
    except FileNotFoundError:
        raise TokenizerError(f"{path}: no such file") from None
    except (OSError, ValueError) as exc:
        raise TokenizerError(f"{path}: cannot read ({exc.strerror if isinstance(exc, OSError) else exc})") from None
    numeric = {
        GGUFValueType.UINT8: "<u1",
        GGUFValueType.INT8: "<i1",
        GGUFValueType.UINT16: "<u2",
        GGUFValueType.INT16: "<i2",
        GGUFValueType.UINT32: "<u4",
        GGUFValueType.INT32: "<i4",
        GGUFValueType.FLOAT32: "<f4",
        GGUFValueType.BOOL: "<u1",
        GGUFValueType.UINT64: "<u8",
        GGUFValueType.INT64: "<i8",
        GGUFValueType.FLOAT64: "<f8",
    }
    offset = 0

    def take(n: int) -> memoryview:
        nonlocal offset
        if offset + n > len(data):
            raise TokenizerError(f"{path}: truncated GGUF file")
        chunk = data[offset : offset + n]
        offset += n
        return chunk

    def u32() -> int:
        return int.from_bytes(take(4), "little")

    def u64() -> int:
        return int.from_bytes(take(8), "little")

    def string() -> str:
        return _decode_text(bytes(take(u64())))

    def value_type() -> GGUFValueType:
        code = u32()
        try:
            return GGUFValueType(code)
        except ValueError:
            raise TokenizerError(f"{path}: unknown GGUF value type {code}") from None

    def value(kind: GGUFValueType) -> object:
        if kind == GGUFValueType.STRING:
            return string()
        if kind == GGUFValueType.ARRAY:
            item_kind, count = value_type(), u64()
            if item_kind == GGUFValueType.ARRAY:  # llama.cpp refuses them; a deep nest would recurse per level
                raise TokenizerError(f"{path}: metadata key {key} holds an array of arrays (nested arrays are refused)")
            if item_kind in numeric:
                dtype = np.dtype(numeric[item_kind])
                items = np.frombuffer(take(count * dtype.itemsize), dtype=dtype).tolist()
                return [bool(v) for v in items] if item_kind == GGUFValueType.BOOL else items
            return [value(item_kind) for _ in range(count)]
        dtype = np.dtype(numeric[kind])
        item = np.frombuffer(take(dtype.itemsize), dtype=dtype)[0].item()
        return bool(item) if kind == GGUFValueType.BOOL else item

    if len(data) < 4 or int.from_bytes(data[:4], "little") != GGUF_MAGIC:
        raise TokenizerError(f"{path}: not a GGUF file (bad magic)")
    take(4)
    version = u32()
    if version not in (2, 3):
        raise TokenizerError(f"{path}: unsupported GGUF version {version} (big-endian files are not supported)")
    u64()  # tensor count
    metadata: dict[str, object] = {}
    key = ""
    for _ in range(u64()):
        at = offset
        key = string()
        if key in metadata:  # the loader and llama.cpp refuse the file; taking either value would be a guess
            raise TokenizerError(f"{path}: metadata key {key!r} appears twice (again at byte {at}); refused")
        metadata[key] = value(value_type())
    return metadata


def read_vocabulary(path: str | os.PathLike[str]) -> Vocabulary:
    """The tokenizer metadata of the GGUF file at PATH."""
    metadata = read_metadata(path)

    def scalar(key: str) -> object | None:
        found = metadata.get(key)
        if isinstance(found, list):
            raise TokenizerError(f"{path}: {key} should be a single value, not an array")
        return found

    def array(key: str, kind: type | tuple[type, ...] = str) -> list | None:
        found = metadata.get(key)
        if found is None:
            return None
        if not isinstance(found, list) or not all(isinstance(item, kind) for item in found):
            raise TokenizerError(f"{path}: {key} is not an array of the expected type")
        return found

    model = scalar("tokenizer.ggml.model")
    if model is None:
        raise TokenizerError(f"{path}: no tokenizer in this GGUF file (tokenizer.ggml.model is missing)")
    tokens = array("tokenizer.ggml.tokens")
    if not tokens:
        raise TokenizerError(f"{path}: tokenizer.ggml.tokens is missing or empty")

    def optional_bool(key: str) -> bool | None:
        value = scalar(key)
        return None if value is None else bool(value)

    def optional_id(key: str) -> int | None:
        value = scalar(key)
        if value is not None and not isinstance(value, int):
            raise TokenizerError(f"{path}: {key} is not an integer")
        return value if value is not None and 0 <= value < len(tokens) else None  # llama.cpp ignores bad ids

    return Vocabulary(
        model=str(model),
        pre=str(scalar("tokenizer.ggml.pre") or ""),
        tokens=tokens,
        scores=array("tokenizer.ggml.scores", (int, float)) or [0.0] * len(tokens),
        token_types=array("tokenizer.ggml.token_type", int) or [1] * len(tokens),
        merges=array("tokenizer.ggml.merges") or [],
        bos_id=optional_id("tokenizer.ggml.bos_token_id"),
        eos_id=optional_id("tokenizer.ggml.eos_token_id"),
        add_bos=optional_bool("tokenizer.ggml.add_bos_token"),
        add_eos=optional_bool("tokenizer.ggml.add_eos_token"),
        add_space_prefix=optional_bool("tokenizer.ggml.add_space_prefix"),
        general_name=str(scalar("general.name") or ""),
        role_ids={
            role: token_id
            for role, keys in ROLE_KEYS.items()
            if (token_id := next((i for k in keys if (i := optional_id(k)) is not None), None)) is not None
        },
    )


@dataclass
class GGUFTokenizer:
    """Common part: vocabulary, special-token splitting, decoding. Subclasses split raw text."""

    tokens: list[str]
    attrs: list[TokenAttr]
    bos_id: int | None
    eos_id: int | None
    add_bos: bool
    add_eos: bool
    add_space_prefix: bool
    clean_spaces: bool
    eog_ids: frozenset[int] = frozenset()  # end-of-generation tokens (EOS, EOT, <|im_end|>...)
    _index: dict[str, int] = field(init=False, repr=False)
    _specials: list[int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._index = {}
        for i, text in enumerate(self.tokens):
            self._index[text] = i  # later duplicates win, as in llama.cpp's token_to_id
        self.refresh_specials()

    def refresh_specials(self) -> None:
        """Rebuild the list of tokens cut out of text before tokenizing (after attributes change)."""
        special = TokenAttr.CONTROL | TokenAttr.USER_DEFINED | TokenAttr.UNKNOWN
        self._specials = sorted(
            (i for i, a in enumerate(self.attrs) if a & special),
            key=lambda i: (-len(self.tokens[i].encode("utf-8", "surrogateescape")), i),
        )

    @property
    def vocab_size(self) -> int:
        return len(self.tokens)

    # encoding

    def encode(self, text: str, add_special: bool = True, parse_special: bool = False) -> list[int]:
        """Token ids for TEXT. ADD_SPECIAL adds BOS/EOS as the file's metadata says; PARSE_SPECIAL
        lets control tokens written in the text (e.g. "<|eot_id|>") become their ids."""
        fragments = self._split_special(text, parse_special)
        out: list[int] = []
        if add_special and self.add_bos:
            if self.bos_id is None:
                raise TokenizerError("the vocabulary asks for a BOS token but has none")
            out.append(self.bos_id)
        self._encode_fragments(fragments, out)
        if add_special and self.add_eos:
            if self.eos_id is None:
                raise TokenizerError("the vocabulary asks for an EOS token but has none")
            out.append(self.eos_id)
        return out

    def _encode_fragments(self, fragments: list[str | int], out: list[int]) -> None:
        raise NotImplementedError

    def _split_special(self, text: str, parse_special: bool) -> list[str | int]:
        """TEXT as raw-text pieces and special token ids, longest special tokens matched first."""
        fragments: list[str | int] = [text] if text else []
        for token_id in self._specials:
            attr = self.attrs[token_id]
            if not parse_special and attr & (TokenAttr.CONTROL | TokenAttr.UNKNOWN):
                continue
            needle = self.tokens[token_id]
            split: list[str | int] = []
            for fragment in fragments:
                if isinstance(fragment, int) or needle not in fragment:
                    split.append(fragment)
                    continue
                pieces = fragment.split(needle)
                for n, piece in enumerate(pieces):
                    if n > 0 and attr & TokenAttr.RSTRIP:
                        piece = piece.lstrip(" \t\n\v\f\r")
                    if n < len(pieces) - 1 and attr & TokenAttr.LSTRIP:
                        piece = piece.rstrip(" \t\n\v\f\r")
                    if piece:
                        split.append(piece)
                    if n < len(pieces) - 1:
                        split.append(token_id)
            fragments = split
        return fragments

    # decoding

    def token_to_piece(self, token_id: int, special: bool = False) -> bytes:
        """The bytes TOKEN_ID stands for; control/unknown tokens are empty unless SPECIAL."""
        if not 0 <= token_id < len(self.tokens):
            raise TokenizerError(f"token id {token_id} is out of range (vocabulary size {len(self.tokens)})")
        attr = self.attrs[token_id]
        text = self.tokens[token_id]
        if attr & (TokenAttr.CONTROL | TokenAttr.UNKNOWN):
            return text.encode("utf-8", "surrogateescape") if special else b""
        if attr & TokenAttr.USER_DEFINED:
            return text.encode("utf-8", "surrogateescape")
        if attr & TokenAttr.NORMAL:
            return self._normal_piece(text)
        if attr & TokenAttr.BYTE:
            return bytes([int(text[3:5], 16)])
        return b""

    def _normal_piece(self, text: str) -> bytes:
        raise NotImplementedError

    def decode(self, ids: Sequence[int], remove_special: bool = False, unparse_special: bool = False) -> str:
        """Text for IDS, as llama.cpp's llama_detokenize: REMOVE_SPECIAL drops a leading BOS and a
        trailing EOS the metadata adds; UNPARSE_SPECIAL renders control tokens as their text."""
        ids = list(ids)
        remove_space = self.add_space_prefix
        if remove_special and self.add_bos and ids and ids[0] == self.bos_id:
            remove_space = False
            ids = ids[1:]
        if remove_special and self.add_eos and ids and ids[-1] == self.eos_id:
            ids = ids[:-1]
        data = bytearray()
        for token_id in ids:
            piece = self.token_to_piece(token_id, unparse_special)
            if remove_space and piece.startswith(b" "):
                piece = piece[1:]
            remove_space = False  # only the first token's space came from the prefix, even if it is hidden
            data += piece
        out = bytes(data)
        if self.clean_spaces:
            out = _clean_spaces(out)
        return out.decode("utf-8", errors="replace")


def _clean_spaces(text: bytes) -> bytes:
    """llama.cpp's clean-up of tokenizer spaces: " ?" " !" " ." " ," lose the space, " ' " becomes
    "'", and " 's" " 'm" " 're" " 've" lose the space (" 't" " 'd" " 'll" keep it)."""
    text = re.sub(rb" (?=[?!.,])", b"", text)
    text = text.replace(b" ' ", b"'")
    return re.sub(rb" (?='(?:[sm]|re|ve))", b"", text)


@dataclass
class SentencePieceTokenizer(GGUFTokenizer):
    """`tokenizer.ggml.model = llama`: merge adjacent pieces by highest token score."""

    scores: list[float] = field(default_factory=list)

    def _encode_fragments(self, fragments: list[str | int], out: list[int]) -> None:
        after_special = True  # the text's start counts as following a special token
        for fragment in fragments:
            if isinstance(fragment, int):
                out.append(fragment)
                after_special = True
                continue
            text = (" " + fragment) if self.add_space_prefix and after_special else fragment
            self._encode_text(text.replace(" ", SPACE_ESCAPE), out)
            after_special = False

    def _encode_text(self, text: str, out: list[int]) -> None:
        # a doubly linked list of symbols, each a span of whole characters
        starts = list(range(len(text)))
        lengths = [1] * len(text)
        prev = list(range(-1, len(text) - 1))
        nxt = [*range(1, len(text)), -1]
        queue: list[tuple[float, int, int, int]] = []  # (-score, left, right, length)
        rev_merge: dict[str, tuple[int, int]] = {}

        def try_bigram(left: int, right: int) -> None:
            if left < 0 or right < 0:
                return
            piece = text[starts[left] : starts[left] + lengths[left] + lengths[right]]
            token_id = self._index.get(piece)
            if token_id is None:
                return
            heapq.heappush(queue, (-self.scores[token_id], left, right, len(piece)))
            rev_merge[piece] = (left, right)

        for i in range(1, len(text)):
            try_bigram(i - 1, i)
        while queue:
            _, left, right, length = heapq.heappop(queue)
            if lengths[left] == 0 or lengths[right] == 0 or lengths[left] + lengths[right] != length:
                continue  # one side was merged away since this pair was queued
            lengths[left] += lengths[right]
            lengths[right] = 0
            nxt[left] = nxt[right]
            if nxt[right] >= 0:
                prev[nxt[right]] = left
            try_bigram(prev[left], left)
            try_bigram(left, nxt[left])

        def resegment(symbol: int) -> None:
            piece = text[starts[symbol] : starts[symbol] + lengths[symbol]]
            token_id = self._index.get(piece)
            if token_id is not None:
                out.append(token_id)
                return
            pair = rev_merge.get(piece)
            if pair is None:
                out.extend(self._byte_token(b) for b in piece.encode("utf-8", "surrogateescape"))
                return
            resegment(pair[0])
            resegment(pair[1])

        symbol = 0 if text else -1
        while symbol != -1:
            resegment(symbol)
            symbol = nxt[symbol]

    def _byte_token(self, byte: int) -> int:
        token_id = self._index.get(f"<0x{byte:02X}>")
        if token_id is None:
            token_id = self._index.get(_decode_text(bytes([byte])))
        if token_id is None:
            raise TokenizerError(f"the vocabulary has no token for byte 0x{byte:02X}")
        return token_id

    def _normal_piece(self, text: str) -> bytes:
        return text.replace(SPACE_ESCAPE, " ").encode("utf-8", "surrogateescape")


@dataclass
class BPETokenizer(GGUFTokenizer):
    """`tokenizer.ggml.model = gpt2`: byte-level BPE after a regex pre-tokenizer."""

    merges: list[str] = field(default_factory=list)
    pre_tokenizer: PreTokenizer = field(default_factory=lambda: PRE_TOKENIZERS["default"])
    _ranks: dict[tuple[str, str], int] = field(init=False, repr=False)
    _regexes: list[regex.Pattern[str]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        self._ranks = {}
        for rank, merge in enumerate(self.merges):
            cut = merge.find(" ", 1)  # the first piece may itself be a space
            pair = (merge[:cut], merge[cut + 1 :]) if cut >= 0 else ("", "")
            self._ranks.setdefault(pair, rank)
        self._regexes = [regex.compile(r) for r in self.pre_tokenizer.regexes]

    def _encode_fragments(self, fragments: list[str | int], out: list[int]) -> None:
        for fragment in fragments:
            if isinstance(fragment, int):
                out.append(fragment)
            else:
                for word in self._pre_tokenize(fragment):
                    self._encode_word("".join(BYTE_TO_CHAR[b] for b in word.encode("utf-8", "surrogateescape")), out)

    def _pre_tokenize(self, text: str) -> list[str]:
        pieces = [text]
        for pattern in self._regexes:
            split: list[str] = []
            for piece in pieces:
                end = 0
                for match in pattern.finditer(piece):
                    if match.start() > end:
                        split.append(piece[end : match.start()])
                    if match.end() > match.start():
                        split.append(match.group())
                    end = match.end()
                if end < len(piece):
                    split.append(piece[end:])
            pieces = split
        return pieces

    def _encode_word(self, word: str, out: list[int]) -> None:
        if self.pre_tokenizer.ignore_merges and word in self._index:
            out.append(self._index[word])
            return
        symbols = list(word)
        prev = list(range(-1, len(word) - 1))
        nxt = [*range(1, len(word)), -1]
        queue: list[tuple[int, int, int, str]] = []  # (rank, left, right, merged text)

        def add_bigram(left: int, right: int) -> None:
            if left < 0 or right < 0:
                return
            rank = self._ranks.get((symbols[left], symbols[right]))
            if rank is not None:
                heapq.heappush(queue, (rank, left, right, symbols[left] + symbols[right]))

        for i in range(1, len(word)):
            add_bigram(i - 1, i)
        while queue:
            _, left, right, merged = heapq.heappop(queue)
            if not symbols[left] or not symbols[right] or symbols[left] + symbols[right] != merged:
                continue  # outdated: one side changed since this pair was queued
            symbols[left] = merged
            symbols[right] = ""
            nxt[left] = nxt[right]
            if nxt[right] >= 0:
                prev[nxt[right]] = left
            add_bigram(prev[left], left)
            add_bigram(left, nxt[left])

        for symbol in symbols:
            if not symbol:
                continue
            token_id = self._index.get(symbol)
            if token_id is not None:
                out.append(token_id)
                continue
            # no such token: llama.cpp falls back to single-byte tokens of the encoded text,
            # silently dropping bytes that have none
            for byte in symbol.encode("utf-8"):
                byte_token = self._index.get(_decode_text(bytes([byte])))
                if byte_token is not None:
                    out.append(byte_token)

    def _normal_piece(self, text: str) -> bytes:
        data = bytearray()
        for ch in text:
            byte = CHAR_TO_BYTE.get(ch)
            if byte is None:  # not a byte-level character: llama.cpp writes a marker
                marker = "[UNK_BYTE_0x" + ch.encode("utf-8", "surrogateescape").hex() + text + "]"
                data += marker.encode("utf-8", "surrogateescape")
            else:
                data.append(byte)
        return bytes(data)


ROLE_KEYS = {
    "eot": ("tokenizer.ggml.eot_token_id",),
    "eom": ("tokenizer.ggml.eom_token_id",),
    "fim_pre": ("tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.prefix_token_id"),
    "fim_suf": ("tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.suffix_token_id"),
    "fim_mid": ("tokenizer.ggml.fim_mid_token_id", "tokenizer.ggml.middle_token_id"),
    "fim_pad": ("tokenizer.ggml.fim_pad_token_id",),
    "fim_rep": ("tokenizer.ggml.fim_rep_token_id",),
    "fim_sep": ("tokenizer.ggml.fim_sep_token_id",),
}

# Token texts llama.cpp recognises when the metadata does not name the role; such tokens become
# control tokens even where the GGUF types them normal (which changes how text containing them splits).
_ROLE_TEXTS = {
    "eom": ("<|eom_id|>",),
    "fim_pre": (
        "<|fim_prefix|>",
        "<fim-prefix>",
        "<fim_prefix>",
        "<｜fim▁begin｜>",
        "<PRE>",
        "▁<PRE>",
        "<|code_prefix|>",
        "<|prefix|>",
    ),
    "fim_suf": (
        "<|fim_suffix|>",
        "<fim-suffix>",
        "<fim_suffix>",
        "<｜fim▁hole｜>",
        "<SUF>",
        "▁<SUF>",
        "<|code_suffix|>",
        "<|suffix|>",
    ),
    "fim_mid": (
        "<|fim_middle|>",
        "<fim-middle>",
        "<fim_middle>",
        "<｜fim▁end｜>",
        "<MID>",
        "▁<MID>",
        "<|code_middle|>",
        "<|middle|>",
    ),
    "fim_pad": ("<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"),
    "fim_rep": ("<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"),
    "fim_sep": ("<|file_sep|>",),
}
# End-of-generation texts: always control tokens, and generation stops at them.
_EOG_TEXTS = (
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",
)
_PLAIN_USER_TEXTS = ("<|channel|>", "<|message|>", "<|start|>", "<|constrain|>")  # harmony: user-defined


def _apply_text_roles(tokenizer: GGUFTokenizer, vocab: Vocabulary) -> None:
    """llama.cpp's detection of special tokens by their text (GGUF files do not always type them).
    Where a vocabulary holds several texts for one unnamed role llama.cpp takes one in hash-map order;
    here the lowest id is taken."""
    index, attrs = tokenizer._index, tokenizer.attrs
    found = dict(vocab.role_ids)
    for role, texts in _ROLE_TEXTS.items():
        if role not in found:
            ids = sorted(index[t] for t in texts if t in index)
            if ids:
                found[role] = ids[0]
                attrs[ids[0]] |= TokenAttr.CONTROL
    eog = {found[r] for r in ("fim_pad", "fim_rep", "fim_sep", "eot", "eom") if r in found}
    for text in _EOG_TEXTS:
        if text in index:
            eog.add(index[text])
            attrs[index[text]] |= TokenAttr.CONTROL
    for text in _PLAIN_USER_TEXTS:
        if text in index:
            attrs[index[text]] = TokenAttr.USER_DEFINED
    if tokenizer.eos_id is not None:
        eog.add(tokenizer.eos_id)
    tokenizer.eog_ids = frozenset(eog)
    tokenizer.refresh_specials()


def tokenizer_from_vocabulary(vocab: Vocabulary) -> GGUFTokenizer:
    """The tokenizer VOCAB describes; TokenizerError for models and pre-tokenizers not implemented."""
    attrs = [_ATTR_FROM_TYPE.get(t, TokenAttr.UNDEFINED) for t in vocab.token_types[: len(vocab.tokens)]]
    if len(attrs) < len(vocab.tokens) or len(vocab.scores) < len(vocab.tokens):
        raise TokenizerError("tokenizer.ggml.token_type or tokenizer.ggml.scores is shorter than the token list")
    tokens = [text or f"[EMPTY_{i}]" for i, text in enumerate(vocab.tokens)]  # llama.cpp's name for empty ones
    if vocab.model == "llama":
        tokenizer: GGUFTokenizer = SentencePieceTokenizer(
            tokens=tokens,
            attrs=attrs,
            bos_id=1 if vocab.bos_id is None else vocab.bos_id,
            eos_id=2 if vocab.eos_id is None else vocab.eos_id,
            add_bos=True if vocab.add_bos is None else vocab.add_bos,
            add_eos=bool(vocab.add_eos),
            add_space_prefix=True if vocab.add_space_prefix is None else vocab.add_space_prefix,
            clean_spaces=False,
            scores=[float(s) for s in vocab.scores],
        )
    elif vocab.model == "gpt2":
        pre_name = vocab.pre or "default"
        pre = PRE_TOKENIZERS.get(pre_name)
        if pre is None:
            raise TokenizerError(
                f"pre-tokenizer {pre_name!r} is not supported; supported: {', '.join(sorted(PRE_TOKENIZERS))}"
            )
        if not vocab.merges:
            raise TokenizerError("gpt2 tokenizer without tokenizer.ggml.merges")
        default_add_bos = bool(pre.add_bos)
        tokenizer = BPETokenizer(
            tokens=tokens,
            attrs=attrs,
            bos_id=11 if vocab.bos_id is None else vocab.bos_id,
            eos_id=11 if vocab.eos_id is None else vocab.eos_id,
            add_bos=default_add_bos if vocab.add_bos is None else vocab.add_bos,
            add_eos=bool(vocab.add_eos),
            add_space_prefix=False,  # llama.cpp ignores the key for BPE vocabularies
            clean_spaces=pre.clean_spaces,
            merges=vocab.merges,
            pre_tokenizer=pre,
        )
    else:
        raise TokenizerError(
            f"tokenizer model {vocab.model!r} is not supported; supported: {', '.join(SUPPORTED_MODELS)}"
        )
    _apply_text_roles(tokenizer, vocab)
    _apply_name_attributes(tokenizer, vocab.general_name)
    return tokenizer


def _apply_name_attributes(tokenizer: GGUFTokenizer, general_name: str) -> None:
    """Per-model token attributes llama.cpp sets by model name (they are not in GGUF files):
    Phi-3's special tokens swallow the whitespace after them."""
    name = general_name.lower()
    if "phi-3" in name or "phi3" in name:
        for token_id in tokenizer._specials:
            tokenizer.attrs[token_id] |= TokenAttr.RSTRIP
        for text, strip in (("</s>", True), ("<unk>", False), ("<s>", False), ("<|endoftext|>", False)):
            token_id = tokenizer._index.get(text)
            if token_id is not None:
                attr = tokenizer.attrs[token_id]
                tokenizer.attrs[token_id] = attr | TokenAttr.RSTRIP if strip else attr & ~TokenAttr.RSTRIP


def load_tokenizer(path: str | os.PathLike[str]) -> GGUFTokenizer:
    """The tokenizer of the GGUF file at PATH (vocabulary-only files work)."""
    return tokenizer_from_vocabulary(read_vocabulary(path))
