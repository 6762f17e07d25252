"""The embedded tiny model's tokenizer: one token per printable ASCII character.

Token 0 is BOS and token 1 is EOS; characters outside the vocabulary encode as '?'.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

BOS_ID = 0
EOS_ID = 1
CHAR_VOCAB: tuple[str, ...] = ("<s>", "</s>", "\n", *(chr(c) for c in range(32, 127)))


class Tokenizer(Protocol):
    """What the engine needs of a tokenizer: this module's CharTokenizer, or a GGUF file's own
    (`engine.model.gguf_tokenizer.load_tokenizer`)."""

    eos_id: int | None

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...


@dataclass
class CharTokenizer:
    tokens: tuple[str, ...] = CHAR_VOCAB
    bos_id: int = BOS_ID
    eos_id: int = EOS_ID
    _index: dict[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._index = {tok: i for i, tok in enumerate(self.tokens) if i not in (self.bos_id, self.eos_id)}

    @property
    def vocab_size(self) -> int:
        return len(self.tokens)

    def encode(self, text: str, add_bos: bool = True) -> list[int]:
        unknown = self._index.get("?")
        ids = [self._index.get(ch, unknown) for ch in text]
        if None in ids:
            bad = next(ch for ch, i in zip(text, ids) if i is None)
            raise ValueError(f"character {bad!r} is not in the model's vocabulary (pass token ids instead)")
        return [self.bos_id, *ids] if add_bos else ids  # type: ignore[list-item]

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(self.tokens[i] for i in ids if i not in (self.bos_id, self.eos_id) and 0 <= i < len(self.tokens))
