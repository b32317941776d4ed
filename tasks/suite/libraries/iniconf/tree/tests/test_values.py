import pytest

from iniconf.values import to_bool, to_float, to_int, to_list


def test_to_int():
    assert to_int(" 42 ") == 42
    assert to_int("-7") == -7


def test_to_int_rejects_words():
    with pytest.raises(ValueError, match="not an integer"):
        to_int("forty")


def test_to_float():
    assert to_float("2.5") == 2.5


def test_to_bool_words():
    for word in ["yes", "True", "on", "1"]:
        assert to_bool(word) is True
    for word in ["no", "FALSE", "off", "0"]:
        assert to_bool(word) is False


def test_to_bool_rejects_other_words():
    with pytest.raises(ValueError, match="not a boolean"):
        to_bool("maybe")


def test_to_list_splits_on_commas():
    assert to_list("a,b,c") == ["a", "b", "c"]


def test_to_list_strips_items():
    assert to_list("a, b,  c ") == ["a", "b", "c"]


def test_to_list_skips_empty_items():
    assert to_list("a,,b,") == ["a", "b"]


def test_to_list_multiline():
    assert to_list("one\ntwo,three") == ["one", "two", "three"]


def test_converters_accept_typed_values():
    assert to_int(5) == 5
    assert to_float(2) == 2.0
    assert to_bool(False) is False
    assert to_list(["x", "y"]) == ["x", "y"]
