"""One module per `python -m engine` command, the engine's benchmarks, and what the commands share (`common`)."""
