"""patchgym.tasks (see docs/design.md)."""
