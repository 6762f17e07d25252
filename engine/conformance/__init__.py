"""The conformance vectors: scripted block-manager scenarios, their replay into traces, and the
checked-in vector files (`vectors/`, format in vectors/FORMAT.md) that the C++ port must match."""
