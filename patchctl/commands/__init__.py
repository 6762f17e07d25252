"""One module per command: its Click function, thin over one domain module. No module here
imports another (tests/patchctl/test_layout.py checks it); shared wiring lives in `patchctl.app`."""
