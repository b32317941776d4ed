"""Writing a Config back to INI text that `loads` reads into an equal Config."""

from __future__ import annotations

from iniconf.config import Config
from iniconf.lexer import COMMENT_PREFIXES, QUOTES


def _format_value(value: str) -> str:
    lines = value.split("\n")
    first = lines[0]
    needs_quotes = (
        first != first.strip()
        or any(f" {prefix}" in first or f"\t{prefix}" in first for prefix in COMMENT_PREFIXES)
        or (first[:1] in QUOTES and first[-1:] == first[:1])
    )
    if needs_quotes:
        quote = "'" if '"' in first else '"'
        first = f"{quote}{first}{quote}"
    return "\n".join([first] + [f"    {line}" for line in lines[1:]])


def dumps(config: Config) -> str:
    chunks = []
    names = ([config.default_section] if config.defaults() else []) + config.sections()
    for name in names:
        body = "".join(f"{option} = {_format_value(value)}\n" for option, value in config.to_dict()[name].items())
        chunks.append(f"[{name}]\n{body}")
    return "\n".join(chunks)
