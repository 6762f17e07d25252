"""Causal prefill attention over paged KV, cached prefix included, on tensor cores.

A batch holds several sequences' new tokens back to back: sequence i owns query rows
`query_start[i] .. query_start[i + 1] - 1`, and its KV cache already holds `seq_lens[i]`
tokens, the new ones last (store them with `store_kv` first). So new token j of sequence
i sits at position `seq_lens[i] - q_len_i + j` and attends to positions 0 .. itself: the
cached prefix (a prefix-cache hit, or earlier chunks of a chunked prefill) and the new
tokens before it.

One program handles BLOCK_M query rows of one sequence for one query head (GQA: the KV head
`head // group`); it walks the block table in fixed tiles of TILE positions, in position
order, dequantizing each tile's K and V rows to float32 in registers, with the online
softmax of `paged_decode`, stopping after the tile that holds its last row's position.
Both products are tiled `tl.dot`s: S = Q K^T over [BLOCK_M, HEAD_DIM] x [HEAD_DIM, TILE] and
P V over [BLOCK_M, TILE] x [TILE, HEAD_DIM] (BLOCK_M, TILE and HEAD_DIM are at least 16).

Precision contract (the `precision` argument, Triton's `input_precision` of both dots; all
operands are float32, every cache format being dequantized to float32 first):

- "ieee" (the default): float32 multiply-adds, no tensor cores. Within 1e-5 of float64
  attention over the same dequantized cache (the tests' bound; the interpreter gives ~5e-7).
- "tf32x3": tensor cores, each operand split into two tf32 parts and three MMAs summed;
  expected near float32 accuracy (not measured here: no GPU was available).
- "tf32": tensor cores, operands rounded to tf32 (10-bit mantissa): relative errors of
  ~1e-3, which is the size of the GPU error of issue 14. Triton's default for a float32
  `tl.dot` is tf32, and its compiler also turns `tl.sum(a[:, :, None] * b[None, :, :], 1)`
  into a `tt.dot` with that default (it did for the old P V product), so the precision is
  always stated here, never left to the default.

The interpreter computes every dot in float32 whatever the precision. The torch reference
(`paged_prefill_attention_reference`) keeps the same tiles and update order; outputs agree
within the tolerance above, not bit for bit (the dot's summation order is the backend's).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from engine.kernels.kv_codec import format_code, load_rows, row_width
from engine.kernels.paged_decode import gather_rows
from engine.kv.formats import KVCacheFormat, get_format

PREFILL_BLOCK_M = 16
PREFILL_TILE = 16
PRECISIONS = ("ieee", "tf32x3", "tf32")


@triton.jit
def _paged_prefill_kernel(
    q_ptr,
    k_cache_ptr,
    v_cache_ptr,
    block_tables_ptr,
    query_start_ptr,
    seq_lens_ptr,
    out_ptr,
    scale,
    stride_q_token,
    stride_q_head,
    stride_table_seq,
    stride_out_token,
    stride_out_head,
    N_KV_HEADS: tl.constexpr,
    GROUP: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
    BLOCK_M: tl.constexpr,
    TILE: tl.constexpr,
    K_ROW: tl.constexpr,
    V_ROW: tl.constexpr,
    K_FORMAT: tl.constexpr,
    V_FORMAT: tl.constexpr,
    PRECISION: tl.constexpr,
):
    seq = tl.program_id(0)
    head = tl.program_id(1)
    row_tile = tl.program_id(2)
    kv_head = head // GROUP
    q_start = tl.load(query_start_ptr + seq)
    q_len = tl.load(query_start_ptr + seq + 1) - q_start
    seq_len = tl.load(seq_lens_ptr + seq)
    first_pos = seq_len - q_len  # position of the first new token

    rows = row_tile * BLOCK_M + tl.arange(0, BLOCK_M)
    row_valid = rows < q_len
    q_pos = first_pos + rows
    dim = tl.arange(0, HEAD_DIM)
    q = tl.load(
        q_ptr + (q_start + rows)[:, None] * stride_q_token + head * stride_q_head + dim[None, :],
        mask=row_valid[:, None],
        other=0.0,
    ).to(tl.float32)  # [BLOCK_M, HEAD_DIM]

    m = tl.full([BLOCK_M], float("-inf"), tl.float32)
    row_sum = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    # rows past q_len (the tail of the last row tile) do no work: end at 0 for an empty tile
    last_pos = tl.minimum(first_pos + row_tile * BLOCK_M + BLOCK_M, seq_len)
    end = tl.where(row_tile * BLOCK_M < q_len, last_pos, 0)
    for tile_start in range(0, end, TILE):
        pos = tile_start + tl.arange(0, TILE)
        valid = pos < seq_len
        block_id = tl.load(block_tables_ptr + seq * stride_table_seq + pos // BLOCK_SIZE, mask=valid, other=0)
        slot = block_id.to(tl.int64) * BLOCK_SIZE + pos % BLOCK_SIZE
        k = load_rows(k_cache_ptr, (slot * N_KV_HEADS + kv_head) * K_ROW, valid, HEAD_DIM, K_FORMAT)
        s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * scale  # [BLOCK_M, TILE]
        causal = valid[None, :] & (pos[None, :] <= q_pos[:, None])
        s = tl.where(causal, s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, axis=1))
        # the first tile always holds position 0, so m_new is finite for every live row
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp(m - m_safe)
        p = tl.exp(s - m_safe[:, None])
        row_sum = row_sum * alpha + tl.sum(p, axis=1)
        v = load_rows(v_cache_ptr, (slot * N_KV_HEADS + kv_head) * V_ROW, valid, HEAD_DIM, V_FORMAT)
        acc = tl.dot(p, v, acc * alpha[:, None], input_precision=PRECISION)
        m = m_new
    out = acc / tl.where(row_sum == 0.0, 1.0, row_sum)[:, None]
    tl.store(
        out_ptr + (q_start + rows)[:, None] * stride_out_token + head * stride_out_head + dim[None, :],
        out.to(out_ptr.dtype.element_ty),
        mask=row_valid[:, None],
    )


def _check(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    query_start: torch.Tensor,
    seq_lens: torch.Tensor,
    k_type: KVCacheFormat | str,
    v_type: KVCacheFormat | str,
) -> tuple[int, int, int, int]:
    _, n_heads, head_dim = q.shape
    n_kv_heads = k_cache.shape[2]
    num_seqs = seq_lens.shape[0]
    if n_heads % n_kv_heads:
        raise ValueError(f"{n_heads} query heads do not split into groups over {n_kv_heads} KV heads")
    for name, cache, qtype in (("k_cache", k_cache, k_type), ("v_cache", v_cache, v_type)):
        if cache.dim() != 4 or cache.shape[2] != n_kv_heads or cache.shape[3] != row_width(qtype, head_dim):
            raise ValueError(
                f"{name} of shape {tuple(cache.shape)} does not hold"
                f" {get_format(qtype).name} rows of {n_kv_heads} x {head_dim}"
            )
    if query_start.shape != (num_seqs + 1,) or block_tables.shape[0] != num_seqs:
        raise ValueError(f"query_start needs {num_seqs + 1} entries and block_tables {num_seqs} rows")
    return num_seqs, n_heads, n_kv_heads, head_dim


def paged_prefill_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    query_start: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float,
    k_type: KVCacheFormat | str = "f32",
    v_type: KVCacheFormat | str = "f32",
    max_query_len: int | None = None,
    block_m: int = PREFILL_BLOCK_M,
    tile: int = PREFILL_TILE,
    precision: str = "ieee",
) -> torch.Tensor:
    """Triton: causal attention for `q` `[total_new_tokens, n_heads, head_dim]`; `precision` as
    the module docstring states (block_m, tile and head_dim: powers of two, at least 16)."""
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; choose from {', '.join(PRECISIONS)}")
    if min(block_m, tile, q.shape[-1]) < 16:
        raise ValueError(
            f"tl.dot needs block_m, tile and head_dim of at least 16, got {block_m}, {tile}, {q.shape[-1]}"
        )
    num_seqs, n_heads, n_kv_heads, head_dim = _check(
        q, k_cache, v_cache, block_tables, query_start, seq_lens, k_type, v_type
    )
    q = q.contiguous()
    out = torch.empty_like(q)
    if num_seqs == 0 or q.shape[0] == 0:
        return out
    if max_query_len is None:
        max_query_len = int((query_start[1:] - query_start[:-1]).max())
    grid = (num_seqs, n_heads, triton.cdiv(max_query_len, block_m))
    _paged_prefill_kernel[grid](
        q,
        k_cache,
        v_cache,
        block_tables,
        query_start,
        seq_lens,
        out,
        scale,
        q.stride(0),
        q.stride(1),
        block_tables.stride(0),
        out.stride(0),
        out.stride(1),
        N_KV_HEADS=n_kv_heads,
        GROUP=n_heads // n_kv_heads,
        HEAD_DIM=head_dim,
        BLOCK_SIZE=k_cache.shape[1],
        BLOCK_M=block_m,
        TILE=tile,
        K_ROW=k_cache.shape[3],
        V_ROW=v_cache.shape[3],
        K_FORMAT=format_code(k_type),
        V_FORMAT=format_code(v_type),
        PRECISION=precision,
    )
    return out


def paged_prefill_attention_reference(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    query_start: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float,
    k_type: KVCacheFormat | str = "f32",
    v_type: KVCacheFormat | str = "f32",
    max_query_len: int | None = None,
    block_m: int = PREFILL_BLOCK_M,
    tile: int = PREFILL_TILE,
) -> torch.Tensor:
    """Plain torch, one sequence at a time, the same tiles in the same order."""
    num_seqs, n_heads, n_kv_heads, head_dim = _check(
        q, k_cache, v_cache, block_tables, query_start, seq_lens, k_type, v_type
    )
    group = n_heads // n_kv_heads
    block_size = k_cache.shape[1]
    out = torch.empty_like(q)
    starts = query_start.tolist()
    for seq, seq_len in enumerate(seq_lens.tolist()):
        q_len = starts[seq + 1] - starts[seq]
        if q_len == 0:
            continue
        qs = q[starts[seq] : starts[seq + 1]].to(torch.float32).transpose(0, 1)  # [heads, q_len, dim]
        q_pos = torch.arange(seq_len - q_len, seq_len, device=q.device)
        table = block_tables[seq].to(torch.int64)
        m = torch.full((n_heads, q_len), float("-inf"), device=q.device)
        row_sum = torch.zeros((n_heads, q_len), device=q.device)
        acc = torch.zeros((n_heads, q_len, head_dim), device=q.device)
        for tile_start in range(0, seq_len, tile):
            pos = torch.arange(tile_start, min(tile_start + tile, seq_len), device=q.device)
            slots = table[pos // block_size] * block_size + pos % block_size
            k = gather_rows(k_cache, k_type, slots, head_dim).repeat_interleave(group, dim=1).transpose(0, 1)
            v = gather_rows(v_cache, v_type, slots, head_dim).repeat_interleave(group, dim=1).transpose(0, 1)
            s = (qs[:, :, None, :] * k[:, None, :, :]).sum(-1) * scale  # [heads, q_len, tile]
            s = s.masked_fill(pos[None, None, :] > q_pos[None, :, None], float("-inf"))
            m_new = torch.maximum(m, s.amax(-1))
            alpha = torch.exp(m - m_new)  # m_new is finite: tile 0 holds position 0
            p = torch.exp(s - m_new[..., None])
            row_sum = row_sum * alpha + p.sum(-1)
            acc = acc * alpha[..., None] + (p[..., None] * v[:, None, :, :]).sum(-2)
            m = m_new
        out[starts[seq] : starts[seq + 1]] = (acc / row_sum[..., None]).transpose(0, 1).to(q.dtype)
    return out
