import pytest

from textgrid.cells import pad, to_text, truncate


def test_to_text():
    assert to_text(None) == ""
    assert to_text(3) == "3"
    assert to_text(2.5) == "2.50"
    assert to_text(2.5, ".1f") == "2.5"


def test_pad_left_right_center():
    assert pad("ab", 5) == "ab   "
    assert pad("ab", 5, "right") == "   ab"
    assert pad("ab", 6, "center") == "  ab  "


def test_pad_never_cuts():
    assert pad("abcdef", 3) == "abcdef"


def test_pad_rejects_unknown_alignment():
    with pytest.raises(ValueError, match="unknown alignment"):
        pad("x", 3, "middle")


def test_pad_counts_wide_characters():
    assert pad("東京", 6) == "東京  "
    assert pad("東京", 6, "right") == "  東京"


def test_truncate_short_text_is_unchanged():
    assert truncate("abc", 5) == "abc"
    assert truncate("abcde", 5) == "abcde"


def test_truncate_fits_the_width():
    assert truncate("abcdefgh", 5) == "abcd…"
    assert truncate("abcdefgh", 3, ellipsis="...") == "..."


def test_truncate_wide_characters():
    assert truncate("東京都庁", 5) == "東京…"
