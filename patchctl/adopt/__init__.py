"""`patchctl init`: adopting an existing patch layout, one module per kind of layout.

The names `init`'s options and messages use are here, not in `layout`, so that `patchctl init
--help` imports none of the layouts' reading."""

LAYOUTS = ("makefile-sync", "quilt", "git-dir", "electron", "openwrt", "conda-forge", "gclient")
CONFIG_NAME = "matrix.yaml"
PRE_COMMIT_NAME = ".pre-commit-config.yaml"
