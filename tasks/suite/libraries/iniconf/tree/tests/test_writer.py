from iniconf import dumps, loads


def test_dump_sections_and_options():
    config = loads("[a]\nx = 1\n[b]\ny = two\n")
    assert dumps(config) == "[a]\nx = 1\n\n[b]\ny = two\n"


def test_default_section_comes_first():
    config = loads("[a]\nx = 1\n[DEFAULT]\nz = 0\n")
    assert dumps(config).startswith("[DEFAULT]\nz = 0\n")


def test_multiline_values_are_indented():
    config = loads("[a]\nitems = one\n  two\n")
    assert dumps(config) == "[a]\nitems = one\n    two\n"


def test_values_with_spaces_at_the_ends_are_quoted():
    config = loads('[a]\npad = "  x  "\n')
    assert dumps(config) == '[a]\npad = "  x  "\n'


def test_round_trip():
    text = '[DEFAULT]\nroot = /srv\n[app]\nname = demo\nnote = "keep ; this"\nlist = a,\n  b\n'
    config = loads(text)
    assert loads(dumps(config)) == config
