import pytest

from semverlite import InvalidRange, max_satisfying, min_satisfying, satisfies


def test_exact_version():
    assert satisfies("1.2.3", "1.2.3")
    assert satisfies("1.2.3", "=1.2.3")
    assert not satisfies("1.2.4", "1.2.3")


def test_comparator_set():
    assert satisfies("1.5.0", ">=1.2.0 <2.0.0")
    assert not satisfies("2.0.0", ">=1.2.0 <2.0.0")
    assert not satisfies("1.1.9", ">=1.2.0 <2.0.0")


def test_operator_spacing_is_tolerated():
    assert satisfies("1.5.0", ">= 1.2.0 < 2.0.0")


def test_alternatives():
    assert satisfies("3.1.0", "^1.0.0 || ^3.0.0")
    assert not satisfies("2.1.0", "^1.0.0 || ^3.0.0")


def test_caret_on_major_version():
    assert satisfies("1.9.9", "^1.2.3")
    assert not satisfies("2.0.0", "^1.2.3")
    assert not satisfies("1.2.2", "^1.2.3")


def test_caret_with_missing_parts():
    assert satisfies("1.9.0", "^1")
    assert satisfies("0.2.9", "^0.2")
    assert not satisfies("0.3.0", "^0.2")


def test_caret_zero_major_fixes_minor():
    assert satisfies("0.2.5", "^0.2.3")
    assert not satisfies("0.3.0", "^0.2.3")
    assert not satisfies("0.9.0", "^0.2.3")


def test_caret_zero_minor_fixes_patch():
    assert satisfies("0.0.3", "^0.0.3")
    assert not satisfies("0.0.4", "^0.0.3")


def test_tilde():
    assert satisfies("1.2.9", "~1.2.3")
    assert not satisfies("1.3.0", "~1.2.3")
    assert satisfies("1.7.0", "~1")


def test_x_ranges():
    assert satisfies("1.2.7", "1.2.x")
    assert not satisfies("1.3.0", "1.2.x")
    assert satisfies("1.9.0", "1.x")
    assert satisfies("7.0.0", "*")
    assert satisfies("1.2.0", "1.2")


def test_x_range_comparators():
    assert satisfies("2.0.0", ">1.x")
    assert not satisfies("1.9.0", ">1.x")
    assert satisfies("1.1.9", "<1.2.x")


def test_empty_range_matches_everything():
    assert satisfies("0.0.1", "")


def test_invalid_range():
    with pytest.raises(InvalidRange):
        satisfies("1.0.0", ">=banana")


def test_max_and_min_satisfying():
    versions = ["1.0.0", "1.4.2", "1.10.0", "2.0.0"]
    assert str(max_satisfying(versions, "^1.0.0")) == "1.10.0"
    assert str(min_satisfying(versions, ">1.0.0")) == "1.4.2"
    assert max_satisfying(versions, ">=3") is None


def test_exact_match_ignores_build_metadata():
    assert satisfies("1.0.0+build.9", "=1.0.0")
    assert satisfies("1.0.0", "1.0.0+build.1")
