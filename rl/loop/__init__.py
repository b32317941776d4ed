"""patchgym.rl.loop (see the modules' docstrings)."""
