"""patchgym.env (see docs/design.md)."""
