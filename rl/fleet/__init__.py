"""patchgym.rl.fleet (see the modules' docstrings)."""
