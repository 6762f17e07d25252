"""The upstream repositories: the cache of mirrors and worktrees (`store`), and upstreams built
from llama-cpp-python sdists on PyPI (`sdist`)."""
