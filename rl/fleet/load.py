"""Loading fleet files: a bundled fleet by name or a TOML file by path, with errors a user can act on.

Owns `load_fleet`, `parse_fleet`, `bundled_fleets` and `FleetError`. Every problem in a file is
reported as one line that names the file, the group (by name and index) and the field, e.g.

    fleets/x.toml: group 'h100-fp8' (groups[2]): weights: 'fp7' is not one of bf16, fp16, ...

and a TOML syntax error names the line and column. All of them are raised as `FleetError`, a
`click.ClickException` (so any command prints it without a traceback) that is also a `ValueError`.
The schema itself is `model.py`; what a fleet is used for (samplers, routing) is elsewhere.
"""

from __future__ import annotations

import os
import re
import tomllib
import typing
from pathlib import Path
from typing import Any

import click
from pydantic import BaseModel, ValidationError

from .model import Fleet, Group, KernelVariant

BUNDLED_DIR = Path(__file__).resolve().parent / "bundled"


class FleetError(click.ClickException, ValueError):
    """A fleet that cannot be loaded; the message says which file, group and field, and why."""


def bundled_fleets() -> dict[str, Path]:
    """Bundled fleet name -> its TOML file, sorted by name."""
    return {path.stem: path for path in sorted(BUNDLED_DIR.glob("*.toml"))}


def load_fleet(spec: str | os.PathLike[str] | Fleet) -> Fleet:
    """A fleet from a bundled name (`mixed-6`), a TOML file path, or a `Fleet` (returned as is)."""
    if isinstance(spec, Fleet):
        return spec
    text = os.fspath(spec)
    bundled = bundled_fleets()
    path = Path(text).expanduser()
    looks_like_path = os.sep in text or text.endswith(".toml") or path.exists()
    if not looks_like_path:
        if text in bundled:
            return _load_file(bundled[text], shown=f"bundled fleet {text} ({bundled[text]})")
        raise FleetError(
            f"no bundled fleet named {text!r} (bundled: {', '.join(bundled) or 'none'}) and no file {text!r}"
        )
    if path.is_dir():
        raise FleetError(f"{text}: is a directory, not a fleet file (a .toml file with [[groups]] tables)")
    if not path.exists():
        raise FleetError(f"{text}: no such fleet file")
    return _load_file(path, shown=text)


def _load_file(path: Path, *, shown: str) -> Fleet:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise FleetError(f"{shown}: cannot read: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FleetError(f"{shown}: not UTF-8 text (byte {exc.start})") from None
    return parse_fleet(text, source=shown, default_name=path.stem)


_TOML_POSITION = re.compile(r"\s*\(at line (\d+), column (\d+)\)\s*$")


def parse_fleet(text: str, *, source: str = "<fleet>", default_name: str = "fleet") -> Fleet:
    """A fleet from TOML text; `source` names it in errors, `default_name` is used without `name =`."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        match = _TOML_POSITION.search(message)
        if match:
            line, column = match.groups()
            message = message[: match.start()]
            raise FleetError(f"{source}: line {line}, column {column}: invalid TOML: {message}") from None
        if message.endswith("(at end of document)"):
            line = text.count("\n") + (0 if text.endswith("\n") else 1)
            message = message.removesuffix("(at end of document)").rstrip()
            raise FleetError(f"{source}: line {line} (end of the file): invalid TOML: {message}") from None
        raise FleetError(f"{source}: invalid TOML: {message}") from None
    return fleet_from_dict(data, source=source, default_name=default_name)


def fleet_from_dict(data: dict[str, Any], *, source: str = "<fleet>", default_name: str = "fleet") -> Fleet:
    """A fleet from already-parsed data (a TOML document's top-level table)."""
    data = dict(data)
    data.setdefault("name", default_name)
    groups = data.get("groups")
    if groups is None:
        raise FleetError(f"{source}: no groups: add one [[groups]] table per sampler group")
    if not isinstance(groups, list) or not all(isinstance(g, dict) for g in groups):
        raise FleetError(f"{source}: groups: must be an array of tables, written [[groups]]")
    try:
        return Fleet.model_validate(data)
    except ValidationError as exc:
        lines = [_describe(error, groups, source) for error in exc.errors()]
        raise FleetError("\n".join(dict.fromkeys(lines))) from None


def _describe(error: dict[str, Any], groups: list[dict[str, Any]], source: str) -> str:
    """One line for one pydantic error: file, group (name and index), field, what is wrong."""
    loc = list(error.get("loc", ()))
    where = source
    model: type[BaseModel] = Fleet
    if len(loc) >= 2 and loc[0] == "groups" and isinstance(loc[1], int):
        index = loc[1]
        name = groups[index].get("name") if index < len(groups) else None
        where += f": group {name!r} (groups[{index}])" if isinstance(name, str) else f": groups[{index}]"
        loc = loc[2:]
        model = Group
    if loc and loc[0] == "kernel" and model is Group:
        model = KernelVariant
        field_path = ["kernel", *map(str, loc[1:])]
    else:
        field_path = [str(part) for part in loc]
    field = ".".join(field_path)
    message = _message(error, model, field_path[-1] if field_path else "")
    return f"{where}: {field}: {message}" if field else f"{where}: {message}"


def _message(error: dict[str, Any], model: type[BaseModel], field: str) -> str:
    kind = error.get("type", "")
    value = error.get("input")
    ctx = error.get("ctx") or {}
    known = model.model_fields
    if kind == "extra_forbidden":
        return f"unknown field (known fields: {', '.join(known)})"
    if kind == "missing":
        return "required field is missing"
    if kind == "literal_error" and field in known:
        options = _literal_options(known[field].annotation)
        if options:
            return f"{value!r} is not one of {', '.join(options)}"
    if kind == "string_pattern_mismatch" and field == "name":
        return f"{value!r}: use letters, digits, '_', '.' and '-', starting with a letter or digit"
    if kind == "string_too_long" and "max_length" in ctx:
        return f"{value!r} is longer than {ctx['max_length']} characters"
    if kind in {"greater_than_equal", "less_than_equal", "greater_than", "less_than"}:
        bound = {"greater_than_equal": ">=", "less_than_equal": "<=", "greater_than": ">", "less_than": "<"}[kind]
        limit = next(iter(ctx.values()), "?")
        return f"{value!r} must be {bound} {limit}"
    message = str(error.get("msg", "invalid value"))
    message = message.removeprefix("Value error, ")
    if kind.endswith("_type") or kind.endswith("_parsing"):
        return f"{value!r}: {message[0].lower() + message[1:]}" if message else f"{value!r} is invalid"
    return message


def _literal_options(annotation: Any) -> list[str]:
    if typing.get_origin(annotation) is typing.Literal:
        return [str(option) for option in typing.get_args(annotation)]
    return []
