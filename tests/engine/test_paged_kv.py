"""Paged KV storage: slots, writes through a slot mapping, reads by block table, driven by the
real block manager's block tables."""

from __future__ import annotations

import pytest
import torch

from engine.core import KVCacheManager
from engine.kv.formats import get_format
from engine.kv.slot_mapping import block_tables_tensor, slot_mapping_for
from engine.kv.storage import KVCacheStorage


def test_slot_is_block_id_times_block_size_plus_offset() -> None:
    assert slot_mapping_for([7, 2], 0, 8, 4).tolist() == [28, 29, 30, 31, 8, 9, 10, 11]
    assert slot_mapping_for([7, 2], 5, 2, 4).tolist() == [9, 10]
    assert slot_mapping_for([7, 2], 3, 0, 4).tolist() == []
    with pytest.raises(ValueError, match="need 3 blocks"):
        slot_mapping_for([7, 2], 6, 3, 4)


def test_tensors_have_the_documented_layout() -> None:
    cache = KVCacheStorage(2, 5, 4, 3, 8, "f16", "f16")
    assert len(cache.k) == len(cache.v) == 2
    assert cache.k[1].shape == (5, 4, 3, 8) and cache.v[0].dtype == torch.float16
    assert cache.bytes_per_block() == 2 * 2 * 4 * 3 * 8 * 2


def test_sequences_written_step_by_step_read_back_intact() -> None:
    """Two sequences share a cached prefix; prefill then decode, each token written once."""
    block_size, heads, dim, layers = 4, 2, 3, 2
    manager = KVCacheManager(12, block_size)
    cache = KVCacheStorage(layers, 12, block_size, heads, dim, "f32", "f32")
    generator = torch.Generator().manual_seed(0)
    reference: dict[str, list[torch.Tensor]] = {}
    prompts = {"a": list(range(10)), "b": list(range(8)) + [50, 51, 52]}
    for name, prompt in prompts.items():
        request = manager.make_request(name, prompt)
        hit, hit_tokens = manager.get_computed_blocks(request)
        assert manager.allocate_slots(request, len(prompt) - hit_tokens, hit_tokens, hit) is not None
        table = manager.get_block_ids(name)[0]
        # The hit prefix was written by the first sequence; only the rest is new.
        kv = torch.randn(layers, 2, len(prompt), heads, dim, generator=generator)
        if hit_tokens:
            kv[:, :, :hit_tokens] = torch.stack(reference["a"], dim=0)[:, :, :hit_tokens]
        slots = slot_mapping_for(table, hit_tokens, len(prompt) - hit_tokens, block_size)
        for layer in range(layers):
            cache.write(layer, slots, kv[layer, 0, hit_tokens:], kv[layer, 1, hit_tokens:])
        reference[name] = [kv[layer] for layer in range(layers)]
        request.num_computed_tokens = len(prompt)

        for step in range(3):
            request.append_output_token_ids(100 + step)
            assert manager.allocate_slots(request, 1) is not None
            table = manager.get_block_ids(name)[0]
            position = request.num_tokens - 1
            new = torch.randn(layers, 2, 1, heads, dim, generator=generator)
            for layer in range(layers):
                cache.write(layer, slot_mapping_for(table, position, 1, block_size), new[layer, 0], new[layer, 1])
                reference[name][layer] = torch.cat([reference[name][layer], new[layer]], dim=1)
            request.num_computed_tokens += 1

    assert manager.get_block_ids("a")[0][:2] == manager.get_block_ids("b")[0][:2]
    for name in prompts:
        table = manager.get_block_ids(name)[0]
        for layer in range(layers):
            k, v = cache.gather(layer, table, reference[name][layer].shape[1])
            assert torch.equal(k, reference[name][layer][0])
            assert torch.equal(v, reference[name][layer][1])


def test_padding_slots_are_skipped_and_bad_input_is_refused() -> None:
    cache = KVCacheStorage(1, 3, 2, 1, 1, "f32", "f32")
    k = torch.tensor([[[1.0]], [[2.0]], [[3.0]]])
    cache.write(0, torch.tensor([2, -1, 5]), k, -k)
    assert cache.k[0].flatten().tolist() == [0, 0, 1, 0, 0, 3]
    assert cache.v[0].flatten().tolist() == [0, 0, -1, 0, 0, -3]
    with pytest.raises(ValueError, match="slot out of range"):
        cache.write(0, torch.tensor([6, 0, 0]), k, k)
    with pytest.raises(ValueError, match="must have shape"):
        cache.write(0, torch.tensor([0, 1]), k, k)
    with pytest.raises(ValueError, match="layer 1 out of range"):
        cache.gather(1, [1], 2)
    with pytest.raises(ValueError, match="block id out of range"):
        cache.gather(0, [3], 2)
    with pytest.raises(ValueError, match="must be positive"):
        KVCacheStorage(1, 0, 2, 1, 1, "f32", "f32")


def test_ggml_formats_are_encoded_on_write_and_decoded_on_gather() -> None:
    """K in q8_0 and V in f16, as llama.cpp allows: each side round-trips through its own format."""
    cache = KVCacheStorage(1, 4, 2, 2, 32, "q8_0", "f16")
    assert cache.k[0].dtype == torch.uint8 and cache.k[0].shape == (4, 2, 2, 34)
    assert cache.v[0].dtype == torch.float16 and cache.v[0].shape == (4, 2, 2, 32)
    k, v = torch.randn(2, 3, 2, 32, generator=torch.Generator().manual_seed(1))
    cache.write(0, slot_mapping_for([3, 1], 0, 3, 2), k, v)
    got_k, got_v = cache.gather(0, [3, 1], 3)
    q8_0 = get_format("q8_0")
    assert torch.equal(got_k, q8_0.dequantize(q8_0.quantize(k), k.shape))
    assert not torch.equal(got_k, k)
    assert torch.equal(got_v, v.to(torch.float16))
    assert cache.bytes_per_block() == 2 * 2 * (34 + 32 * 2)


def test_block_tables_pad_with_the_null_block() -> None:
    table = block_tables_tensor([[3, 4, 5], [7], []])
    assert table.dtype == torch.int32
    assert table.tolist() == [[3, 4, 5], [7, 0, 0], [0, 0, 0]]
