"""patchgym.rl.sampler (see the modules' docstrings)."""
