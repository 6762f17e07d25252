"""Load and write llama GGUF files for `engine.model.llama`, validating everything first.

Loading checks, in order, each failure one `GGUFError` line naming the cause:
the file exists and starts with the GGUF magic; its version is one gguf-py reads; the
architecture is llama and the hyperparameters are present; every tensor's data lies
inside the file (a write cut short leaves the header intact but the data short);
every tensor the config needs is there with the right shape.

`write_gguf` produces such a file through `gguf.GGUFWriter` (temp file + rename), which
the tests, `python -m engine generate --model` and `python -m engine export-gguf` use. The
weights are written exactly as the engine holds them, with no q/k permutation: the engine
rotates adjacent pairs (2i, 2i + 1), which is ggml's "normal" RoPE that llama.cpp applies to
llama models; llama.cpp's converter permutes Hugging Face q/k rows into that layout, and the
engine's weights are in it already. With a tokenizer vocabulary the file is one llama.cpp loads.
"""

from __future__ import annotations

import os
import struct
import tempfile
from pathlib import Path

import gguf
import numpy as np
import torch
from gguf.quants import dequantize as gguf_dequantize

from engine.model.gguf_tokenizer import ROLE_KEYS, Vocabulary
from engine.model.llama import LlamaConfig, LlamaModel

GGUF_MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
ARCH = "llama"


class GGUFError(ValueError):
    """A GGUF file that cannot be used; the message names the file and the cause."""


class _CheckedReader(gguf.GGUFReader):
    """GGUFReader that checks the tensor layout before building views of it: data inside the
    file (the stock reader fails there with a bare numpy reshape error), aligned, and laid out
    in order without overlap, as llama.cpp requires."""

    def _build_tensors(self, start_offs: int, fields: list) -> None:  # type: ignore[override]
        file_size = len(self.data)
        expected = 0  # tensors follow each other in order, each padded to the alignment (llama.cpp's rule)
        for field in fields:
            _, name_data, _, dims, raw_dtype, offset_tensor = field.parts
            name = bytes(name_data).decode("utf-8", errors="replace")
            try:
                qtype = gguf.GGMLQuantizationType(int(raw_dtype[0]))
            except ValueError:
                raise GGUFError(f"tensor {name} has unknown ggml type {int(raw_dtype[0])}") from None
            block_size, type_size = gguf.GGML_QUANT_SIZES[qtype]
            n_bytes = int(np.prod(dims)) * type_size // block_size
            offset = int(offset_tensor[0])
            if offset % self.alignment:
                raise GGUFError(
                    f"tensor {name} data offset {offset} is not a multiple of the alignment {self.alignment}"
                )
            if offset != expected:
                # Overlapping or out-of-order data: weights read from another tensor's bytes. llama.cpp refuses it.
                raise GGUFError(
                    f"tensor {name} data offset {offset}, expected {expected} (tensors overlap or leave gaps)"
                )
            expected += -(-n_bytes // self.alignment) * self.alignment
            start = int(start_offs + offset)
            if start + n_bytes > file_size:
                raise GGUFError(
                    f"tensor {name} needs bytes {start}..{start + n_bytes} but the file ends at {file_size}: "
                    "the file is truncated (an interrupted write?)"
                )
        super()._build_tensors(start_offs, fields)


_INTEGER_TYPES = frozenset(
    {
        gguf.GGUFValueType.UINT8,
        gguf.GGUFValueType.INT8,
        gguf.GGUFValueType.UINT16,
        gguf.GGUFValueType.INT16,
        gguf.GGUFValueType.UINT32,
        gguf.GGUFValueType.INT32,
        gguf.GGUFValueType.UINT64,
        gguf.GGUFValueType.INT64,
    }
)
_FLOAT_TYPES = frozenset({gguf.GGUFValueType.FLOAT32, gguf.GGUFValueType.FLOAT64})


def _scalar(
    reader: gguf.GGUFReader, key: str, required: bool = True, types: frozenset[gguf.GGUFValueType] | None = None
) -> float | int | str | None:
    """The value of KEY, checked against TYPES (as llama.cpp does: 2.0 is not a layer count)."""
    field = reader.get_field(key)
    if field is None:
        if required:
            raise GGUFError(f"missing metadata key {key}")
        return None
    if types is not None and (len(field.types) != 1 or field.types[0] not in types):
        found = "/".join(t.name for t in field.types) or "nothing"
        expected = "an integer" if types is _INTEGER_TYPES else "a float"
        raise GGUFError(f"metadata key {key} holds {found}, expected {expected}")
    return field.contents()


def _int(reader: gguf.GGUFReader, key: str, required: bool = True) -> int | None:
    value = _scalar(reader, key, required, _INTEGER_TYPES)
    return None if value is None else int(value)


def _float(reader: gguf.GGUFReader, key: str, required: bool = True) -> float | None:
    value = _scalar(reader, key, required, _FLOAT_TYPES)
    return None if value is None else float(value)


def read_config(reader: gguf.GGUFReader) -> LlamaConfig:
    arch = _scalar(reader, "general.architecture")
    if arch != ARCH:
        raise GGUFError(f"architecture {arch!r} is not supported; only {ARCH!r}")
    n_heads = _int(reader, f"{ARCH}.attention.head_count")
    hidden = _int(reader, f"{ARCH}.embedding_length")
    head_dim = _int(reader, f"{ARCH}.attention.key_length", required=False)
    embd = next((t for t in reader.tensors if t.name == "token_embd.weight"), None)
    vocab = _int(reader, f"{ARCH}.vocab_size", required=False)
    if vocab is None:
        if embd is None:
            raise GGUFError("missing tensor token_embd.weight")
        vocab = int(embd.shape[1])
    try:
        config = LlamaConfig(
            vocab_size=int(vocab),
            hidden_size=hidden,
            intermediate_size=_int(reader, f"{ARCH}.feed_forward_length"),
            num_layers=_int(reader, f"{ARCH}.block_count"),
            num_heads=n_heads,
            num_kv_heads=_int(reader, f"{ARCH}.attention.head_count_kv", required=False) or n_heads,
            head_dim=head_dim if head_dim is not None else hidden // n_heads,
            rope_theta=_float(reader, f"{ARCH}.rope.freq_base", required=False) or 10000.0,
            rms_eps=_float(reader, f"{ARCH}.attention.layer_norm_rms_epsilon"),
            max_position=_int(reader, f"{ARCH}.context_length"),
        )
    except ValueError as exc:
        raise GGUFError(f"invalid hyperparameters: {exc}") from None
    # Keys this llama would silently ignore, though they change the function the file describes.
    for key in (f"{ARCH}.attention.value_length", f"{ARCH}.rope.dimension_count"):
        value = _int(reader, key, required=False)
        if value is not None and value != config.head_dim:
            raise GGUFError(f"{key} is {value}; only {config.head_dim} (the head size) is supported")
    return config


def load_gguf(path: str | os.PathLike[str]) -> LlamaModel:
    """A validated llama model from a GGUF file; raises GGUFError naming what is wrong."""
    path = Path(path)
    try:
        return _load(path)
    except GGUFError as exc:
        raise GGUFError(f"{path}: {exc}") from None


def _load(path: Path) -> LlamaModel:
    if not path.is_file():
        raise GGUFError("no such file")
    with path.open("rb") as fh:
        head = fh.read(8)
    if head[:4] != GGUF_MAGIC:
        raise GGUFError(f"not a GGUF file (starts with {head[:4]!r}, expected {GGUF_MAGIC!r})")
    if len(head) < 8:
        raise GGUFError(f"truncated GGUF header: the file is {len(head)} bytes")
    version = struct.unpack("<I", head[4:8])[0]
    if version not in SUPPORTED_VERSIONS:
        raise GGUFError(
            f"GGUF version {version} is not supported (supported: {', '.join(map(str, SUPPORTED_VERSIONS))})"
        )
    try:
        reader = _CheckedReader(path, "r")
    except GGUFError:
        raise
    except (ValueError, IndexError, KeyError, UnicodeDecodeError, OverflowError) as exc:
        raise GGUFError(f"damaged GGUF metadata (truncated header?): {exc}") from None
    try:
        return _model(reader)
    except UnicodeDecodeError as exc:
        raise GGUFError(f"a metadata string is not UTF-8 ({exc.reason} at byte {exc.start})") from None


def _model(reader: gguf.GGUFReader) -> LlamaModel:
    config = read_config(reader)
    tensors = {t.name: t for t in reader.tensors}
    if config.num_layers > len(tensors):  # before listing the tensors it needs: 2**31 layers is a hostile count
        raise GGUFError(f"{ARCH}.block_count is {config.num_layers} but the file holds only {len(tensors)} tensors")
    shapes = config.tensor_shapes()
    unused = sorted(set(tensors) - set(shapes))
    if unused:
        # A tensor this llama does not use (rope scaling factors, biases, another architecture's
        # weights) means the file describes a different function than the one we would compute.
        listed = ", ".join(unused[:3]) + (f" and {len(unused) - 3} more" if len(unused) > 3 else "")
        raise GGUFError(f"tensor(s) this llama model does not use: {listed}")
    weights: dict[str, torch.Tensor] = {}
    for name, shape in shapes.items():
        tensor = tensors.get(name)
        if tensor is None:
            raise GGUFError(f"missing tensor {name}")
        file_shape = tuple(int(d) for d in reversed(tensor.shape.tolist()))
        if file_shape != shape:
            raise GGUFError(f"tensor {name} has shape {file_shape}, the config needs {shape}")
        values = gguf_dequantize(np.asarray(tensor.data), tensor.tensor_type)
        weights[name] = torch.from_numpy(np.array(values, dtype=np.float32).reshape(shape))
    tokens_field = reader.get_field("tokenizer.ggml.tokens")
    tokens = tuple(tokens_field.contents()) if tokens_field is not None else None
    if tokens is not None and len(tokens) != config.vocab_size:
        raise GGUFError(f"tokenizer has {len(tokens)} tokens, the model {config.vocab_size}")
    return LlamaModel(config, weights, tokens)


WEIGHT_TYPES = ("f32", "f16")
UNKNOWN_TOKEN_TYPE = 2  # gguf.TokenType.UNKNOWN


def write_gguf(
    path: str | os.PathLike[str],
    model: LlamaModel,
    vocabulary: Vocabulary | None = None,
    weight_type: str = "f32",
) -> None:
    """Write `model` as a llama GGUF file, atomically.

    Without `vocabulary` the model's own token list is written as the `engine-chars`
    vocabulary (the engine reads it; llama.cpp does not). `weight_type` f16 stores the
    matrices as float16 (norm vectors stay float32, as llama.cpp's converter does).
    """
    path = Path(path)
    c = model.config
    if weight_type not in WEIGHT_TYPES:
        raise ValueError(f"weight type {weight_type!r} is not one of {', '.join(WEIGHT_TYPES)}")
    if vocabulary is not None and len(vocabulary.tokens) != c.vocab_size:
        raise ValueError(f"the vocabulary has {len(vocabulary.tokens)} tokens, the model {c.vocab_size}")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        writer = gguf.GGUFWriter(tmp, ARCH)
        writer.add_name(vocabulary.general_name if vocabulary and vocabulary.general_name else "engine tiny llama")
        writer.add_file_type(gguf.LlamaFileType.ALL_F32 if weight_type == "f32" else gguf.LlamaFileType.MOSTLY_F16)
        writer.add_block_count(c.num_layers)
        writer.add_context_length(c.max_position)
        writer.add_embedding_length(c.hidden_size)
        writer.add_feed_forward_length(c.intermediate_size)
        writer.add_head_count(c.num_heads)
        writer.add_head_count_kv(c.num_kv_heads)
        writer.add_key_length(c.head_dim)
        writer.add_value_length(c.head_dim)
        writer.add_rope_dimension_count(c.head_dim)
        writer.add_rope_freq_base(c.rope_theta)
        writer.add_layer_norm_rms_eps(c.rms_eps)
        writer.add_vocab_size(c.vocab_size)
        if vocabulary is not None:
            _write_vocabulary(writer, vocabulary)
        elif model.tokens is not None:
            writer.add_tokenizer_model("engine-chars")
            writer.add_token_list(list(model.tokens))
        for name in c.tensor_shapes():
            values = model.weights[name].detach().cpu().numpy().astype(np.float32)
            writer.add_tensor(name, values.astype(np.float16) if weight_type == "f16" and values.ndim == 2 else values)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _write_vocabulary(writer: gguf.GGUFWriter, vocabulary: Vocabulary) -> None:
    writer.add_tokenizer_model(vocabulary.model)
    if vocabulary.pre:
        writer.add_tokenizer_pre(vocabulary.pre)
    writer.add_token_list(list(vocabulary.tokens))
    writer.add_token_scores([float(score) for score in vocabulary.scores])
    writer.add_token_types([int(kind) for kind in vocabulary.token_types])
    if vocabulary.merges:
        writer.add_token_merges(list(vocabulary.merges))
    if vocabulary.bos_id is not None:
        writer.add_bos_token_id(vocabulary.bos_id)
    if vocabulary.eos_id is not None:
        writer.add_eos_token_id(vocabulary.eos_id)
    unknown = next((i for i, kind in enumerate(vocabulary.token_types) if kind == UNKNOWN_TOKEN_TYPE), None)
    if unknown is not None:
        writer.add_unk_token_id(unknown)
    if vocabulary.add_bos is not None:
        writer.add_add_bos_token(vocabulary.add_bos)
    if vocabulary.add_eos is not None:
        writer.add_add_eos_token(vocabulary.add_eos)
    if vocabulary.add_space_prefix is not None:
        writer.add_bool("tokenizer.ggml.add_space_prefix", vocabulary.add_space_prefix)
    for role, token_id in sorted(vocabulary.role_ids.items()):
        writer.add_uint32(ROLE_KEYS[role][0], token_id)
