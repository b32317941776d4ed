import pytest

from iniconf import Config, MissingOption, MissingSection, loads

TEXT = """
[server]
port = 8080
debug = off
ratio = 0.75
hosts = a.example, b.example
"""


def test_missing_section():
    with pytest.raises(MissingSection):
        loads(TEXT).get("nope", "port")


def test_missing_option():
    with pytest.raises(MissingOption):
        loads(TEXT).get("server", "nope")


def test_get_fallback():
    assert loads(TEXT).get("server", "nope", fallback="x") == "x"


def test_typed_getters():
    config = loads(TEXT)
    assert config.getint("server", "port") == 8080
    assert config.getbool("server", "debug") is False
    assert config.getfloat("server", "ratio") == 0.75
    assert config.getlist("server", "hosts") == ["a.example", "b.example"]


def test_typed_getters_still_raise_without_fallback():
    with pytest.raises(MissingOption):
        loads(TEXT).getint("server", "workers")


def test_typed_getters_use_fallback():
    config = loads(TEXT)
    assert config.getint("server", "workers", fallback=4) == 4
    assert config.getbool("server", "verbose", fallback=True) is True
    assert config.getfloat("server", "scale", fallback=1) == 1.0
    assert config.getlist("server", "aliases", fallback=[]) == []


def test_typed_getter_fallback_is_not_used_when_present():
    assert loads(TEXT).getint("server", "port", fallback=1) == 8080


def test_set_and_remove():
    config = Config()
    config.add_section("s")
    config.set("s", "Key", "v")
    assert config.get("s", "key") == "v"
    config.remove("s", "KEY")
    assert config.options("s") == []


def test_equality():
    assert loads(TEXT) == loads(TEXT)
    assert loads(TEXT) != loads("[server]\n")
