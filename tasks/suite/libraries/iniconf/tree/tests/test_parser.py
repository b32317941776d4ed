import pytest

from iniconf import ParseError, loads

SAMPLE = """
# deployment settings
[DEFAULT]
timeout = 30

[server]
host = example.org
Port = 8080

[client]
retries = 3
"""


def test_sections_in_order():
    assert loads(SAMPLE).sections() == ["server", "client"]


def test_values():
    config = loads(SAMPLE)
    assert config.get("server", "host") == "example.org"
    assert config.get("client", "retries") == "3"


def test_option_names_are_case_insensitive():
    config = loads(SAMPLE)
    assert config.get("server", "port") == "8080"
    assert config.get("server", "PORT") == "8080"


def test_defaults_fill_every_section():
    config = loads(SAMPLE)
    assert config.get("server", "timeout") == "30"
    assert config.options("client") == ["retries", "timeout"]


def test_option_before_section_is_an_error():
    with pytest.raises(ParseError, match="line 1"):
        loads("orphan = 1\n[s]\n")


def test_duplicate_section_is_an_error_when_strict():
    with pytest.raises(ParseError, match="appears twice"):
        loads("[a]\nx = 1\n[a]\ny = 2\n")


def test_duplicate_option_last_wins_when_not_strict():
    config = loads("[a]\nx = 1\nX = 2\n", strict=False)
    assert config.get("a", "x") == "2"


def test_lexer_errors_become_parse_errors():
    with pytest.raises(ParseError, match="line 1"):
        loads("[broken\n")
