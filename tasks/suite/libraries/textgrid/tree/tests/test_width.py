from textgrid.width import char_width, display_width


def test_ascii_is_one_cell_per_character():
    assert display_width("hello") == 5


def test_wide_characters_take_two_cells():
    assert char_width("東") == 2
    assert display_width("東京") == 4


def test_combining_marks_take_no_cells():
    assert display_width("e\u0301") == 1


def test_empty_text():
    assert display_width("") == 0
