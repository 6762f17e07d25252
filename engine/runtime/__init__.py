"""Continuous batching: the scheduler, the model runner, sampling and `LLMEngine` tying them together."""
