"""Paged attention over the KV store, and llama.cpp's flash-attention policy that picks its path."""
