from textgrid.columns import align_decimals, column_widths, guess_alignments, is_number


def test_column_widths_include_headers():
    assert column_widths([["a", "bbb"], ["cc", "d"]], ["head", "h"]) == [4, 3]


def test_widths_count_wide_characters():
    assert column_widths([["東京", "x"]]) == [4, 1]


def test_is_number():
    assert is_number("12")
    assert is_number("-3.5")
    assert is_number("1,234.5")
    assert not is_number("n/a")


def test_guess_alignments():
    rows = [["apples", "1.5", ""], ["kiwis", "12", "x"]]
    assert guess_alignments(rows, 3) == ["left", "decimal", "left"]


def test_align_decimals():
    assert align_decimals(["1.5", "12", "-0.25"]) == [" 1.5 ", "12   ", "-0.25"]
