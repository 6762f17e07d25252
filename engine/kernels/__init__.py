"""Triton kernels of the paged engine, one per file, each beside its plain-torch reference.

- `store_kv`: new K/V rows into the cache through a slot mapping, quantizing on the way.
- `paged_decode`: one query token per sequence over its paged KV (GQA-grouped programs).
- `paged_prefill`: causal attention of new tokens over paged KV, cached prefix included.
- `kv_codec`: in-kernel encoding and decoding of the cache formats of `engine.kv.formats`.

On a machine without a GPU, set TRITON_INTERPRET=1 before triton is imported.
"""
