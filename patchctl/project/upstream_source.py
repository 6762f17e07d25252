"""Which url an upstream is followed at: its embedded `url:` (default) or its `ci:` block. Its own
module so that the CLI's option can name the choices without importing the config loader."""

UPSTREAM_SOURCE_ENV = "PATCHCTL_UPSTREAM_SOURCE"
UPSTREAM_SOURCES = ("default", "ci")
