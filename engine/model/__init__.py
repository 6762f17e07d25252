"""The tiny llama model: its weights and forward pass, GGUF loading, the tokenizer and the
contiguous-KV reference that paged attention is checked against."""
