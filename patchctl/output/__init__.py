"""What patchctl says: text from outside escaped for where it goes, results as JSON, findings,
progress lines and the Markdown reports of pin-sync and the canary. Domain modules return
these; only the command line prints them."""
