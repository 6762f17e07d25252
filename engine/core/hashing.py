"""Block hashes for prefix caching, in an encoding a C++ port reproduces byte for byte.

A block's hash is SHA-256 over this byte string (version 1 of the encoding):

    parent     32 bytes   the parent block's digest; NONE_HASH for a request's first block
    n_tokens   u32 LE     number of token ids that follow (always the block size)
    tokens     i32 LE     each token id, in order
    n_extra    u32 LE     number of extra keys that follow (0, 1 or 2)
    extra keys            each one: u8 tag, u32 LE byte length, that many UTF-8 bytes;
                          tag 1 = adapter name (every block), then tag 2 = cache salt
                          (a request's first block only)

NONE_HASH is SHA-256 of the ASCII seed string NONE_HASH_SEED. Unlike vLLM, which draws its
seed at random unless PYTHONHASHSEED is set, the seed is fixed so that hashes are stable
across processes and languages. Only full blocks are hashed.

engine/conformance/vectors/FORMAT.md restates this encoding for the C++ port.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.core.request import Request

BlockHash = bytes
"""A 32-byte SHA-256 digest."""

BLOCK_HASH_ENCODING_VERSION = 1
NONE_HASH_SEED = "patchctl-engine block hash v1"
NONE_HASH: BlockHash = hashlib.sha256(NONE_HASH_SEED.encode("ascii")).digest()

EXTRA_KEY_ADAPTER = 1
EXTRA_KEY_CACHE_SALT = 2

_INT32_MIN = -(2**31)
_INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class BlockExtraKeys:
    """What besides the tokens makes two blocks different: the adapter and the cache salt."""

    adapter_name: str | None = None
    cache_salt: str | None = None

    def encode(self) -> bytes:
        keys: list[tuple[int, bytes]] = []
        if self.adapter_name is not None:
            keys.append((EXTRA_KEY_ADAPTER, self.adapter_name.encode("utf-8")))
        if self.cache_salt is not None:
            keys.append((EXTRA_KEY_CACHE_SALT, self.cache_salt.encode("utf-8")))
        parts = [struct.pack("<I", len(keys))]
        for tag, payload in keys:
            parts.append(struct.pack("<BI", tag, len(payload)))
            parts.append(payload)
        return b"".join(parts)


NO_EXTRA_KEYS = BlockExtraKeys()
_NO_EXTRA_KEYS_BYTES = NO_EXTRA_KEYS.encode()


def encode_block(
    parent_block_hash: BlockHash | None,
    token_ids: Sequence[int],
    extra_keys: BlockExtraKeys | None = None,
) -> bytes:
    """The exact bytes that `hash_block_tokens` digests (see the module docstring)."""
    parent = NONE_HASH if parent_block_hash is None else parent_block_hash
    if len(parent) != 32:
        raise ValueError(f"parent block hash must be 32 bytes, got {len(parent)}")
    count = len(token_ids)
    try:
        tokens = struct.pack(f"<I{count}i", count, *token_ids)
    except struct.error:
        bad = next(t for t in token_ids if not (_INT32_MIN <= t <= _INT32_MAX))
        raise ValueError(f"token id {bad} does not fit in int32") from None
    extra = _NO_EXTRA_KEYS_BYTES if extra_keys is None else extra_keys.encode()
    return parent + tokens + extra


def hash_block_tokens(
    parent_block_hash: BlockHash | None,
    token_ids: Sequence[int],
    extra_keys: BlockExtraKeys | None = None,
) -> BlockHash:
    """SHA-256 of one full block chained to its parent's digest."""
    return hashlib.sha256(encode_block(parent_block_hash, token_ids, extra_keys)).digest()


def block_extra_keys(request: Request, block_index: int) -> BlockExtraKeys | None:
    """The extra keys of a request's block: the salt marks only the first block, so two
    salted requests still differ everywhere (the chain carries it), while the adapter
    marks every block."""
    salt = request.cache_salt if block_index == 0 else None
    if request.adapter_name is None and salt is None:
        return None
    return BlockExtraKeys(adapter_name=request.adapter_name, cache_salt=salt)


def hash_request_tokens(block_size: int, request: Request) -> list[BlockHash]:
    """Hashes of every full block of the request's tokens, from scratch."""
    return _hash_blocks_from(block_size, request, 0, None)


def get_request_block_hasher(block_size: int) -> Callable[[Request], list[BlockHash]]:
    """A hasher for `Request(block_hasher=...)`: returns the hashes of the full blocks the
    request has not hashed yet, so appending tokens costs only the new blocks."""
    if block_size <= 0:
        raise ValueError(f"block_size must be positive, got {block_size}")

    def hash_new_full_blocks(request: Request) -> list[BlockHash]:
        start = len(request.block_hashes)
        parent = request.block_hashes[-1] if start else None
        return _hash_blocks_from(block_size, request, start, parent)

    return hash_new_full_blocks


def _hash_blocks_from(block_size: int, request: Request, first_block: int, parent: BlockHash | None) -> list[BlockHash]:
    tokens = request.all_token_ids
    hashes: list[BlockHash] = []
    for index in range(first_block, len(tokens) // block_size):
        start = index * block_size
        parent = hash_block_tokens(parent, tokens[start : start + block_size], block_extra_keys(request, index))
        hashes.append(parent)
    return hashes
