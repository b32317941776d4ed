"""Computing the next version: major, minor, patch and prerelease bumps."""

from __future__ import annotations

from dataclasses import replace
from typing import Union

from semverlite.version import Version, coerce


def _next(version: Version, **changes: object) -> Version:
    # Build metadata describes one build, never the next release: always drop it.
    return replace(version, build=(), **changes)


def bump_major(version: Union[str, Version]) -> Version:
    v = coerce(version)
    return _next(v, major=v.major + 1, minor=0, patch=0, prerelease=())


def bump_minor(version: Union[str, Version]) -> Version:
    v = coerce(version)
    return _next(v, minor=v.minor + 1, patch=0, prerelease=())


def bump_patch(version: Union[str, Version]) -> Version:
    """1.2.3 -> 1.2.4; a prerelease 1.2.3-rc.1 -> 1.2.3, the release it was leading up to."""
    v = coerce(version)
    if v.prerelease:
        return _next(v, prerelease=())
    return _next(v, patch=v.patch + 1)


def bump_prerelease(version: Union[str, Version], label: str = "rc") -> Version:
    """1.2.3 -> 1.2.4-rc.1; 1.2.4-rc.1 -> 1.2.4-rc.2; 1.2.4-beta -> 1.2.4-beta.1."""
    v = coerce(version)
    if not v.prerelease:
        return _next(v, patch=v.patch + 1, prerelease=(label, "1"))
    *head, last = v.prerelease
    if last.isdigit():
        return _next(v, prerelease=(*head, str(int(last) + 1)))
    return _next(v, prerelease=(*v.prerelease, "1"))


def finalize(version: Union[str, Version]) -> Version:
    """The release of a version: 1.2.3-rc.1+b7 -> 1.2.3."""
    v = coerce(version)
    return _next(v, prerelease=())
