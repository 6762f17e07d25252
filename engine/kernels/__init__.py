"""Triton kernels of the paged engine, one per file, each beside its plain-torch reference.

- `store_kv`: new K/V rows into the cache through a slot mapping, quantizing on the way.
- `paged_decode`: one query token per sequence over its paged KV, split-KV over fixed
  segments (GQA-grouped programs, then an in-order merge).
- `paged_prefill`: causal attention of new tokens over paged KV, cached prefix included
  (tiled `tl.dot`s with a stated input precision).
- `kv_codec`: in-kernel encoding and decoding of the cache formats of `engine.kv.formats`.
- `compile_targets`: compiles every kernel for NVIDIA sm_80/sm_90 without a GPU (CI does).

On a machine without a GPU, set TRITON_INTERPRET=1 before triton is imported.
"""
