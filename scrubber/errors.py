"""The one exception the scrubber raises for input a caller can fix (bad paths, SHAs, patches)."""


class ScrubError(Exception):
    """A scrub or check could not run: the message names what was wrong (a path, a SHA, a patch)."""
