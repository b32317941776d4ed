import pytest

from textgrid import render
from textgrid.width import display_width

ROWS = [["apples", 1.5], ["kiwis", 12]]


def test_plain_style():
    assert render(ROWS, headers=["fruit", "kg"]) == (
        "fruit      kg\n"
        "------  -----\n"
        "apples   1.50\n"
        "kiwis   12"
    )


def test_plain_without_headers():
    assert render([["a", "b"], ["cc", "d"]]) == "a   b\ncc  d"


def test_grid_style():
    assert render(ROWS, headers=["fruit", "kg"], style="grid") == (
        "+--------+-------+\n"
        "| fruit  |    kg |\n"
        "+========+=======+\n"
        "| apples |  1.50 |\n"
        "| kiwis  | 12    |\n"
        "+--------+-------+"
    )


def test_markdown_style():
    assert render(ROWS, headers=["fruit", "kg"], style="markdown") == (
        "| fruit  |    kg |\n"
        "|:-------|------:|\n"
        "| apples |  1.50 |\n"
        "| kiwis  | 12    |"
    )


def test_markdown_explicit_alignments():
    text = render([["a", "b", "c"]], headers=["x", "y", "z"], style="markdown", align=["left", "center", "right"])
    assert text.splitlines()[1] == "|:--|:-:|--:|"


def test_markdown_escapes_pipes():
    assert "a\\|b" in render([["a|b"]], style="markdown")


def test_max_width_truncates_cells():
    assert render([["abcdefgh", "x"]], max_width=4) == "abc…  x"


def test_unknown_style():
    with pytest.raises(ValueError, match="unknown style"):
        render(ROWS, style="fancy")


def test_float_format():
    assert render([[1.23456]], float_format=".3f") == "1.235"


def test_wide_characters_align():
    text = render([["東京", 1], ["Paris", 22]], headers=["city", "n"], style="grid")
    assert len({display_width(line) for line in text.splitlines()}) == 1
    assert "| 東京  |  1 |" in text
