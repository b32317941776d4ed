"""patchgym.rl (see docs/design.md)."""
