"""One module per command: the domain function behind each CLI command."""
