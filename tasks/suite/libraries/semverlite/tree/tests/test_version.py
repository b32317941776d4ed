import pytest

from semverlite import InvalidVersion, Version, parse


def test_parse_plain_version():
    v = parse("1.2.3")
    assert (v.major, v.minor, v.patch) == (1, 2, 3)
    assert v.prerelease == ()
    assert v.build == ()


def test_parse_prerelease_and_build():
    v = parse("v2.0.0-rc.1+build.7")
    assert v.prerelease == ("rc", "1")
    assert v.build == ("build", "7")
    assert v.is_prerelease


def test_str_round_trips():
    for text in ["0.0.1", "1.2.3-alpha.1", "1.2.3+exp.sha.5114f85", "10.20.30-rc.1+b2"]:
        assert str(parse(text)) == text


def test_invalid_versions_are_rejected():
    for text in ["1.2", "01.2.3", "1.2.3-", "a.b.c", "1.2.3+"]:
        with pytest.raises(InvalidVersion):
            parse(text)


def test_release_ordering():
    assert parse("1.0.0") < parse("2.0.0") < parse("2.1.0") < parse("2.1.1")


def test_prerelease_sorts_before_release():
    assert parse("1.0.0-alpha") < parse("1.0.0")


def test_alphanumeric_identifiers_compare_lexically():
    assert parse("1.0.0-alpha") < parse("1.0.0-beta")
    assert parse("1.0.0-beta") < parse("1.0.0-rc")


def test_shorter_prerelease_sorts_first():
    assert parse("1.0.0-alpha") < parse("1.0.0-alpha.1")
    assert parse("1.0.0-alpha.beta") < parse("1.0.0-alpha.beta.1")


def test_numeric_identifier_sorts_before_alphanumeric():
    assert parse("1.0.0-alpha.1") < parse("1.0.0-alpha.beta")
    assert parse("1.0.0-1") < parse("1.0.0-alpha")


def test_numeric_identifiers_compare_as_numbers():
    assert parse("1.0.0-alpha.2") < parse("1.0.0-alpha.10")
    assert parse("1.0.0-rc.9") < parse("1.0.0-rc.11")


def test_semver_spec_example_order():
    ordered = [
        "1.0.0-alpha",
        "1.0.0-alpha.1",
        "1.0.0-alpha.beta",
        "1.0.0-beta",
        "1.0.0-beta.2",
        "1.0.0-beta.11",
        "1.0.0-rc.1",
        "1.0.0",
    ]
    shuffled = [ordered[i] for i in (5, 0, 7, 3, 1, 6, 2, 4)]
    assert [str(v) for v in sorted(parse(t) for t in shuffled)] == ordered


def test_build_metadata_ignored_in_precedence():
    assert parse("1.0.0+build.1") == parse("1.0.0+build.2")
    assert not parse("1.0.0+build.1") < parse("1.0.0+build.2")
    assert len({parse("1.0.0+a"), parse("1.0.0+b"), parse("1.0.0")}) == 1


def test_versions_are_hashable():
    assert {parse("1.0.0"): "x"}[parse("1.0.0")] == "x"
