import pytest

from iniconf.lexer import LexError, tokenize


def kinds(text):
    return [line.kind for line in tokenize(text)]


def test_kinds_of_lines():
    text = "# top\n[server]\nhost = example.org\n\n; note\n"
    assert kinds(text) == ["comment", "section", "option", "blank", "comment"]


def test_option_name_and_value_are_stripped():
    (line,) = tokenize("  name   =   some value  ")
    assert (line.name, line.value) == ("name", "some value")


def test_colon_separator():
    (line,) = tokenize("path: /usr/local")
    assert (line.name, line.value) == ("path", "/usr/local")


def test_first_separator_wins():
    (line,) = tokenize("url = http://example.org:80/")
    assert (line.name, line.value) == ("url", "http://example.org:80/")


def test_continuation_lines_join_with_newlines():
    lines = tokenize("[s]\nitems = one\n  two\n  three\n")
    assert lines[1].value == "one\ntwo\nthree"


def test_quoted_value_is_unquoted():
    (line,) = tokenize('greeting = "  hello  "')
    assert line.value == "  hello  "


def test_semicolon_inside_quotes_is_kept():
    (line,) = tokenize('password = "se;cret"')
    assert line.value == "se;cret"


def test_hash_inside_url_is_kept():
    (line,) = tokenize("url = http://example.org/#anchor")
    assert line.value == "http://example.org/#anchor"


def test_value_may_start_with_hash():
    (line,) = tokenize("color = #ff8800")
    assert line.value == "#ff8800"


def test_inline_comment_is_stripped():
    (line,) = tokenize("port = 8080 ; the public port")
    assert line.value == "8080"
    (line,) = tokenize("debug = yes    # for now")
    assert line.value == "yes"


def test_inline_comment_after_quoted_value():
    (line,) = tokenize('password = "se;cret"  ; rotate monthly')
    assert line.value == "se;cret"


def test_unclosed_section_header():
    with pytest.raises(LexError, match="line 2"):
        tokenize("[ok]\n[broken\n")


def test_line_without_separator():
    with pytest.raises(LexError, match="expected 'name = value'"):
        tokenize("[s]\njust words\n")
