"""`patchctl init`: adopting an existing patch layout, one module per kind of layout."""
