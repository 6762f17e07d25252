"""patchctl: keep a vendored patch series alive on top of a fast-moving upstream."""

__version__ = "0.1.0"
