"""matrix.yaml: the upstreams and series it declares, validated on load with the place of every
value, and the value languages it holds (URLs and branch names, globs, rsync filter rules, the
gate environment). The build-matrix sections of the same file belong to `patchctl.matrix`."""
