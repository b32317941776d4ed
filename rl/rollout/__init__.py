"""patchgym.rl.rollout (see the modules' docstrings)."""
