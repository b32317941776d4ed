from semverlite import bump_major, bump_minor, bump_patch, bump_prerelease, finalize


def test_bump_patch():
    assert str(bump_patch("1.2.3")) == "1.2.4"


def test_bump_patch_of_prerelease_is_its_release():
    assert str(bump_patch("1.2.3-rc.2")) == "1.2.3"


def test_bump_minor_resets_patch():
    assert str(bump_minor("1.4.7")) == "1.5.0"


def test_bump_minor_drops_prerelease():
    assert str(bump_minor("1.4.7-beta")) == "1.5.0"


def test_bump_major():
    assert str(bump_major("1.0.0")) == "2.0.0"


def test_bump_major_resets_minor_and_patch():
    assert str(bump_major("1.4.2")) == "2.0.0"
    assert str(bump_major("0.9.12")) == "1.0.0"


def test_bump_prerelease_starts_a_new_patch():
    assert str(bump_prerelease("1.2.3")) == "1.2.4-rc.1"
    assert str(bump_prerelease("1.2.3", label="beta")) == "1.2.4-beta.1"


def test_bump_prerelease_increments_the_counter():
    assert str(bump_prerelease("1.2.4-rc.1")) == "1.2.4-rc.2"
    assert str(bump_prerelease("1.2.4-rc.9")) == "1.2.4-rc.10"


def test_bump_prerelease_appends_a_counter():
    assert str(bump_prerelease("1.2.4-beta")) == "1.2.4-beta.1"


def test_finalize():
    assert str(finalize("3.1.0-rc.4")) == "3.1.0"


def test_bumps_drop_build_metadata():
    assert str(bump_patch("1.2.3+ci.7")) == "1.2.4"
    assert str(bump_minor("1.2.3+ci.7")) == "1.3.0"
    assert str(finalize("1.2.3-rc.1+ci.7")) == "1.2.3"
