"""patchgym.scrubber (see docs/design.md)."""
