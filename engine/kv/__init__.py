"""The KV cache's memory: ggml block formats and the cache format object (`formats`), the paged
store (`storage`) and the mapping from positions to slots (`slot_mapping`)."""
