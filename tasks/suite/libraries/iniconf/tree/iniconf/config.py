"""The Config object: sections of options, defaults, typed getters and interpolated reads."""

from __future__ import annotations

from typing import Any, Dict, List

from iniconf.interpolate import expand
from iniconf.values import to_bool, to_float, to_int, to_list

_MISSING: Any = object()


class MissingSection(KeyError):
    pass


class MissingOption(KeyError):
    pass


class Config:
    def __init__(self, default_section: str = "DEFAULT") -> None:
        self.default_section = default_section
        self._data: Dict[str, Dict[str, str]] = {}

    # structure
    def sections(self) -> List[str]:
        return [name for name in self._data if name != self.default_section]

    def has_section(self, section: str) -> bool:
        return section in self._data

    def add_section(self, section: str) -> None:
        self._data.setdefault(section, {})

    def defaults(self) -> Dict[str, str]:
        return dict(self._data.get(self.default_section, {}))

    def has_own_option(self, section: str, option: str) -> bool:
        return option.lower() in self._data.get(section, {})

    def options(self, section: str) -> List[str]:
        own = self._section(section)
        return list(own) + [name for name in self.defaults() if name not in own]

    def items(self, section: str) -> Dict[str, str]:
        return {name: self.get(section, name) for name in self.options(section)}

    def set(self, section: str, option: str, value: str) -> None:
        self._section(section)[option.lower()] = value

    def remove(self, section: str, option: str) -> None:
        self._section(section).pop(option.lower(), None)

    # reading
    def raw(self, section: str, option: str) -> str:
        """The value as written (no interpolation); [DEFAULT] fills in what a section lacks."""
        key = option.lower()
        own = self._section(section)
        if key in own:
            return own[key]
        defaults = self._data.get(self.default_section, {})
        if key in defaults:
            return defaults[key]
        raise MissingOption(f"no option {option!r} in section [{section}]")

    def get(self, section: str, option: str, fallback: Any = _MISSING) -> Any:
        try:
            value = self.raw(section, option)
        except MissingOption:
            if fallback is _MISSING:
                raise
            return fallback
        return expand(value, self, section)

    def getint(self, section: str, option: str, fallback: Any = _MISSING) -> int:
        return to_int(self.get(section, option, fallback))

    def getfloat(self, section: str, option: str, fallback: Any = _MISSING) -> float:
        return to_float(self.get(section, option, fallback))

    def getbool(self, section: str, option: str, fallback: Any = _MISSING) -> bool:
        return to_bool(self.get(section, option, fallback))

    def getlist(self, section: str, option: str, fallback: Any = _MISSING) -> List[str]:
        return to_list(self.get(section, option, fallback))

    def to_dict(self) -> Dict[str, Dict[str, str]]:
        return {name: dict(options) for name, options in self._data.items()}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Config) and self.to_dict() == other.to_dict()

    def _section(self, section: str) -> Dict[str, str]:
        if section not in self._data:
            raise MissingSection(f"no section [{section}]")
        return self._data[section]
