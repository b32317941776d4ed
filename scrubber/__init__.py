"""patchgym.scrubber: repositories in which nothing after a base commit exists, and the proof.

`scrub` builds such a repository from a source repository or bundle; `check` inspects any
repository, channel by channel and object by object, and lists what leaked. This is the bottom
layer: it imports nothing else of patchgym. See docs/design.md.
"""

from patchgym.scrubber.check import CheckResult, Leak, check
from patchgym.scrubber.errors import ScrubError
from patchgym.scrubber.scrub import ScrubResult, scrub

__all__ = ["CheckResult", "Leak", "ScrubError", "ScrubResult", "check", "scrub"]
