"""Semantic versions: parsing, printing and precedence (semver.org 2.0.0, section 11)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import total_ordering
from typing import Tuple, Union

_VERSION = re.compile(
    r"^v?(?P<major>0|[1-9]\d*)\.(?P<minor>0|[1-9]\d*)\.(?P<patch>0|[1-9]\d*)"
    r"(?:-(?P<pre>[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?"
    r"(?:\+(?P<build>[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$"
)


class InvalidVersion(ValueError):
    """The text is not a semantic version."""


def _identifier_key(identifier: str) -> Tuple[int, int, str]:
    # Numeric identifiers compare as numbers and sort before alphanumeric ones.
    if identifier.isdigit():
        return (0, int(identifier), "")
    return (1, 0, identifier)


@total_ordering
@dataclass(frozen=True, eq=False)
class Version:
    major: int
    minor: int
    patch: int
    prerelease: Tuple[str, ...] = ()
    build: Tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str) -> "Version":
        match = _VERSION.match(text.strip())
        if match is None:
            raise InvalidVersion(f"not a semantic version: {text!r}")
        pre = match.group("pre")
        build = match.group("build")
        return cls(
            int(match.group("major")),
            int(match.group("minor")),
            int(match.group("patch")),
            tuple(pre.split(".")) if pre else (),
            tuple(build.split(".")) if build else (),
        )

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.prerelease:
            text += "-" + ".".join(self.prerelease)
        if self.build:
            text += "+" + ".".join(self.build)
        return text

    @property
    def is_prerelease(self) -> bool:
        return bool(self.prerelease)

    @property
    def release(self) -> Tuple[int, int, int]:
        return (self.major, self.minor, self.patch)

    def precedence_key(self) -> tuple:
        """What ordering looks at. A release sorts after every prerelease of the same numbers."""
        if self.prerelease:
            pre: tuple = (0, tuple(_identifier_key(part) for part in self.prerelease))
        else:
            pre = (1,)
        return (self.major, self.minor, self.patch, pre)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self.precedence_key() == other.precedence_key()

    def __lt__(self, other: "Version") -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self.precedence_key() < other.precedence_key()

    def __hash__(self) -> int:
        return hash(self.precedence_key())


def parse(text: str) -> Version:
    """Parse `text` ("1.2.3", "v1.2.3-rc.1+build.5") into a Version."""
    return Version.parse(text)


def coerce(value: Union[str, Version]) -> Version:
    """A Version from a Version or a string."""
    return value if isinstance(value, Version) else Version.parse(value)
