"""patchgym.tests (see docs/design.md)."""
