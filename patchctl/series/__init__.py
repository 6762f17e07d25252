"""A patch series: its directory and files read as untrusted input, each patch parsed once,
applied strictly or 3-way, regenerated deterministically in the series' own style, and linted."""
