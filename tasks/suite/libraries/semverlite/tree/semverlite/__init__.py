"""semverlite: semantic versions, bumping and ranges."""

from semverlite.version import InvalidVersion, Version, parse
from semverlite.bump import bump_major, bump_minor, bump_patch, bump_prerelease, finalize
from semverlite.ranges import InvalidRange, max_satisfying, min_satisfying, satisfies
