import pytest

from iniconf import InterpolationError, loads


def test_same_section_reference():
    config = loads("[s]\nhost = example.org\nurl = http://${host}/\n")
    assert config.get("s", "url") == "http://example.org/"


def test_other_section_reference():
    config = loads("[paths]\nroot = /srv\n[app]\nlogs = ${paths:root}/logs\n")
    assert config.get("app", "logs") == "/srv/logs"


def test_nested_references():
    config = loads("[s]\na = 1\nb = ${a}${a}\nc = ${b}-${b}\n")
    assert config.get("s", "c") == "11-11"


def test_reference_to_default():
    config = loads("[DEFAULT]\nroot = /srv\n[app]\ndata = ${root}/data\n")
    assert config.get("app", "data") == "/srv/data"


def test_escaped_dollar():
    config = loads("[s]\nprice = $$5\n")
    assert config.get("s", "price") == "$5"


def test_escaped_reference_stays_literal():
    config = loads("[s]\nname = world\ntemplate = hello $${name}\n")
    assert config.get("s", "template") == "hello ${name}"


def test_escaped_dollar_next_to_reference():
    config = loads("[s]\namount = 12\ntotal = $$${amount}\n")
    assert config.get("s", "total") == "$12"


def test_missing_reference():
    with pytest.raises(InterpolationError, match="nothing"):
        loads("[s]\nx = ${nothing}\n").get("s", "x")


def test_cycle_is_reported():
    with pytest.raises(InterpolationError, match="cycle"):
        loads("[s]\na = ${b}\nb = ${a}\n").get("s", "a")


def test_raw_skips_interpolation():
    config = loads("[s]\nx = ${y}\ny = 1\n")
    assert config.raw("s", "x") == "${y}"
