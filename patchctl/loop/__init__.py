"""The upkeep loop: moving a pin forward behind gates (`sync`, pin-sync), the weekly canary on
the upstream tip, carrying patches across a pin move, the gates and their build runners,
vendored copies, and the health of each series (`patchctl status`)."""
