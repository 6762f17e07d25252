"""What patchctl keeps about its own work, in the git directory where no checkout can plant it:
the journal that writes several files together or not at all, the project lock, a stopped
pin-sync's state, tree swaps that survive a kill, and the recovery that runs before anything
reads a repository."""
