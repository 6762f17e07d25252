"""Running the engine's models inside a real llama.cpp tree: a cached build and the model gate."""
