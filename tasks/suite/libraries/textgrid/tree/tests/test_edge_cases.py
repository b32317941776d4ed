from textgrid import render
from textgrid.width import display_width


def test_no_rows_and_no_headers_is_empty():
    assert render([]) == ""


def test_headers_only():
    assert render([], headers=["a", "b"]) == "a  b\n-  -"


def test_rows_longer_than_the_first_row():
    assert render([["a"], ["b", "c"]]) == "a\nb  c"


def test_short_rows_are_padded_in_grids():
    text = render([["a", "b"], ["c"]], style="grid")
    assert len({display_width(line) for line in text.splitlines()}) == 1
    assert "| c |   |" in text


def test_headers_shorter_than_rows():
    assert render([["1", "x", "y"]], headers=["n"]) == "n\n-  -  -\n1  x  y"


def test_single_cell():
    assert render([["x"]]) == "x"


def test_headers_only_grid():
    assert render([], headers=["a", "b"], style="grid") == "+---+---+\n| a | b |\n+===+===+\n+---+---+"


def test_blank_cells_in_a_number_column():
    assert render([["1"], [""], ["22"]]) == " 1\n\n22"
