"""patchgym.rl.trainer (see the modules' docstrings)."""
