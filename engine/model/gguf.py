"""Load and write llama GGUF files for `engine.model.llama`, validating everything first.

Loading checks, in order, each failure one `GGUFError` line naming the cause:
the file exists and starts with the GGUF magic; its version is one gguf-py reads; no
metadata key and no tensor name comes twice (llama.cpp refuses both: which one would win is
a guess); no metadata array holds arrays or more items than the file has bytes for; every tensor's data
lies inside the file (a write cut short leaves the header intact but the data short); the
architecture is llama and the hyperparameters are present, of their type, finite and in the
ranges real models have (`engine.model.llama.INT_LIMITS`, the RoPE base and RMS epsilon
bounds; RoPE unscaled); every tensor the config needs is there with the right shape and
holds finite values.

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
from engine.model.llama import HyperparameterError, LlamaConfig, LlamaModel

GGUF_MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
ARCH = "llama"


class GGUFError(ValueError):
    """A GGUF file that cannot be used; the message names the file and the cause."""


# The least bytes one array item takes, by item type: an array whose count cannot fit in the rest of
# the file is refused before the stock reader walks it (past the end it reads empty views of 0 bytes,
# and a count of 2**40 then loops for ever).
_MIN_ITEM_BYTES = {
    **{t: np.dtype(d).itemsize for t, d in gguf.GGUFReader.gguf_scalar_to_np.items()},
    gguf.GGUFValueType.STRING: 8,  # the length
    gguf.GGUFValueType.ARRAY: 12,  # item type and count
}


class _CheckedReader(gguf.GGUFReader):
    """GGUFReader that checks what the stock reader trusts: arrays hold no arrays (llama.cpp
    refuses nested arrays; the stock reader recurses once per level, so a deep nest is a
    RecursionError) and fit in the file; the tensor layout is checked before views are built
    of it: data inside the file (the stock reader fails there with a bare numpy reshape error),
    aligned, and laid out in order without overlap, as llama.cpp requires. A metadata key or a
    tensor name that comes twice is refused by name (the stock reader's KeyError said only
    "damaged metadata")."""

    def _push_field(self, field: gguf.ReaderField, skip_sum: bool = False) -> int:  # type: ignore[override]
        if field.name in self.fields:
            raise GGUFError(
                f"metadata key {field.name!r} appears twice (at bytes {self.fields[field.name].offset} and "
                f"{field.offset}); llama.cpp refuses such a file"
            )
        return super()._push_field(field, skip_sum)

    def _get_field_parts(self, orig_offs: int, raw_type: int) -> tuple:  # type: ignore[override]
        if raw_type == gguf.GGUFValueType.ARRAY and orig_offs + 12 <= len(self.data):
            item_type = int(self._get(orig_offs, np.uint32)[0])
            count = int(self._get(orig_offs + 4, np.uint64)[0])
            if item_type == gguf.GGUFValueType.ARRAY:
                raise GGUFError(
                    f"the metadata value at byte {orig_offs} is an array of arrays (nested arrays are refused)"
                )
            min_bytes = _MIN_ITEM_BYTES.get(item_type)
            if min_bytes is not None and count * min_bytes > len(self.data) - orig_offs - 12:
                raise GGUFError(
                    f"the metadata array at byte {orig_offs} claims {count} items; the file cannot hold them"
                )
        return super()._get_field_parts(orig_offs, raw_type)

    def _build_tensors(self, start_offs: int, fields: list) -> None:  # type: ignore[override]
        file_size = len(self.data)
        expected = 0  # tensors follow each other in order, each padded to the alignment (llama.cpp's rule)
        names: set[str] = set()
        for field in fields:
            _, name_data, _, dims, raw_dtype, offset_tensor = field.parts
            name = bytes(name_data).decode("utf-8", errors="replace")
            if name in names:
                raise GGUFError(f"tensor {name} appears twice; llama.cpp refuses such a file")
            names.add(name)
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
_STRING_TYPES = frozenset({gguf.GGUFValueType.STRING})
_TYPE_WORDS = {_INTEGER_TYPES: "an integer", _FLOAT_TYPES: "a float", _STRING_TYPES: "a string"}


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
        raise GGUFError(f"metadata key {key} holds {found}, expected {_TYPE_WORDS[types]}")
    return field.contents()


def _int(reader: gguf.GGUFReader, key: str, required: bool = True) -> int | None:
    value = _scalar(reader, key, required, _INTEGER_TYPES)
    return None if value is None else int(value)


def _float(reader: gguf.GGUFReader, key: str, required: bool = True) -> float | None:
    value = _scalar(reader, key, required, _FLOAT_TYPES)
    return None if value is None else float(value)


# The GGUF key each LlamaConfig field is read from, so that a value out of range is named as the file names it.
_FIELD_KEYS = {
    "vocab_size": f"{ARCH}.vocab_size",
    "hidden_size": f"{ARCH}.embedding_length",
    "intermediate_size": f"{ARCH}.feed_forward_length",
    "num_layers": f"{ARCH}.block_count",
    "num_heads": f"{ARCH}.attention.head_count",
    "num_kv_heads": f"{ARCH}.attention.head_count_kv",
    "head_dim": f"{ARCH}.attention.key_length",
    "rope_theta": f"{ARCH}.rope.freq_base",
    "rms_eps": f"{ARCH}.attention.layer_norm_rms_epsilon",
    "max_position": f"{ARCH}.context_length",
}
DEFAULT_ROPE_THETA = 10000.0  # llama.cpp's value when the file names none
# RoPE scaling as llama.cpp reads it: a factor of 0 or 1 (and type none or linear) leaves RoPE unscaled,
# the only RoPE this llama computes; any other value would be silently ignored.
_ROPE_SCALING_TYPE = f"{ARCH}.rope.scaling.type"
_ROPE_SCALING_FACTORS = (f"{ARCH}.rope.scaling.factor", f"{ARCH}.rope.scale_linear")


def read_config(reader: gguf.GGUFReader) -> LlamaConfig:
    """The hyperparameters, each of the type and in the range every real llama model has; GGUFError
    naming the key otherwise."""
    arch = _scalar(reader, "general.architecture")
    if arch != ARCH:
        raise GGUFError(f"architecture {arch!r} is not supported; only {ARCH!r}")
    sources = dict(_FIELD_KEYS)  # where each value came from, for the messages
    n_heads = _int(reader, f"{ARCH}.attention.head_count")
    hidden = _int(reader, f"{ARCH}.embedding_length")
    assert n_heads is not None and hidden is not None  # required keys
    head_dim = _int(reader, f"{ARCH}.attention.key_length", required=False)
    if head_dim is None:
        sources["head_dim"] = f"the head size ({ARCH}.embedding_length / {ARCH}.attention.head_count)"
        if n_heads >= 1 and hidden % n_heads:
            raise GGUFError(
                f"{ARCH}.embedding_length {hidden} is not a multiple of {ARCH}.attention.head_count {n_heads},"
                f" and {ARCH}.attention.key_length does not give the head size"
            )
        head_dim = hidden // n_heads if n_heads >= 1 else 0  # a head count < 1 is named by the range check
    vocab = _int(reader, f"{ARCH}.vocab_size", required=False)
    if vocab is None:
        embd = next((t for t in reader.tensors if t.name == "token_embd.weight"), None)
        if embd is None:
            raise GGUFError("missing tensor token_embd.weight")
        if len(embd.shape) != 2:
            raise GGUFError(f"tensor token_embd.weight has {len(embd.shape)} dimensions, the config needs 2")
        vocab = int(embd.shape[1])
        sources["vocab_size"] = "the vocabulary size (token_embd.weight's rows)"
    n_kv_heads = _int(reader, f"{ARCH}.attention.head_count_kv", required=False)
    rope_theta = _float(reader, f"{ARCH}.rope.freq_base", required=False)
    try:
        config = LlamaConfig(
            vocab_size=vocab,
            hidden_size=hidden,
            intermediate_size=_int(reader, f"{ARCH}.feed_forward_length"),
            num_layers=_int(reader, f"{ARCH}.block_count"),
            num_heads=n_heads,
            num_kv_heads=n_heads if n_kv_heads is None else n_kv_heads,
            head_dim=head_dim,
            rope_theta=DEFAULT_ROPE_THETA if rope_theta is None else rope_theta,
            rms_eps=_float(reader, f"{ARCH}.attention.layer_norm_rms_epsilon"),
            max_position=_int(reader, f"{ARCH}.context_length"),
        )
    except HyperparameterError as exc:
        raise GGUFError(f"{sources[exc.field]} is {exc.value}; it must be {exc.requirement}") from None
    # Keys this llama would silently ignore, though they change the function the file describes.
    for key in (f"{ARCH}.attention.value_length", f"{ARCH}.rope.dimension_count"):
        value = _int(reader, key, required=False)
        if value is not None and value != config.head_dim:
            raise GGUFError(f"{key} is {value}; only {config.head_dim} (the head size) is supported")
    _check_unscaled_rope(reader)
    return config


def _check_unscaled_rope(reader: gguf.GGUFReader) -> None:
    scaling = _scalar(reader, _ROPE_SCALING_TYPE, required=False, types=_STRING_TYPES)
    if scaling is not None and scaling not in ("none", "linear"):
        raise GGUFError(f"{_ROPE_SCALING_TYPE} is {scaling!r}; only unscaled RoPE is supported")
    for key in _ROPE_SCALING_FACTORS:
        factor = _float(reader, key, required=False)
        if factor is not None and factor not in (0.0, 1.0):  # NaN is neither
            raise GGUFError(f"{key} is {factor}; only unscaled RoPE is supported (a factor of 0 or 1)")


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
        try:
            values = np.array(gguf_dequantize(np.asarray(tensor.data), tensor.tensor_type), dtype=np.float32)
        except NotImplementedError:  # a ggml type gguf-py has no dequantizer for (Q8_1, some IQ types)
            raise GGUFError(f"tensor {name} is {tensor.tensor_type.name}, a type this loader cannot read") from None
        if not np.isfinite(values).all():  # llama.cpp's --check-tensors refuses these too
            raise GGUFError(f"tensor {name} holds non-finite values (NaN or inf)")
        weights[name] = torch.from_numpy(values.reshape(shape))
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
