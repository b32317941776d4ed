"""patchgym.harness (see docs/design.md)."""
