"""semverlite's history: 15 commits on main (one merged fix branch), four tasks."""

from patchgym.tasks.suite.history import Commit, Edit, Library, NewTests, TaskSpec

README_USAGE = '''```python
>>> from semverlite import Version, bump_minor, satisfies
>>> Version.parse("1.4.0-rc.2") < Version.parse("1.4.0")
True
>>> str(bump_minor("1.4.7"))
'1.5.0'
>>> satisfies("1.6.2", "^1.4.0")
True
```

Ranges understand comparators (`>=1.2.0 <2.0.0`), caret (`^1.2.3`), tilde (`~1.2.3`),
x-ranges (`1.2.x`, `*`) and alternatives joined with `||`.

'''

COMMITS = [
    Commit(
        "skeleton",
        "Start semverlite: parse, print and compare semantic versions",
        add=["pyproject.toml", "README.md", ".gitignore", "semverlite/__init__.py", "semverlite/version.py", "tests/test_version.py"],
    ),
    Commit(
        "bump",
        "Add bump helpers (major, minor, patch, prerelease, finalize)",
        add=["semverlite/bump.py", "tests/test_bump.py"],
        edit={
            "semverlite/__init__.py": [
                Edit("", "from semverlite.bump import bump_major, bump_minor, bump_patch, bump_prerelease, finalize\n")
            ]
        },
        tag="v0.1.0",
    ),
    Commit(
        "ranges",
        "Add version ranges: comparators, caret, tilde, x-ranges and ||",
        add=["semverlite/ranges.py", "tests/test_ranges.py"],
        edit={
            "semverlite/__init__.py": [
                Edit("", "from semverlite.ranges import InvalidRange, max_satisfying, satisfies\n")
            ]
        },
        author="contributor",
    ),
    Commit(
        "release-0.2",
        "Release 0.2.0",
        add=["CHANGELOG.md"],
        edit={"pyproject.toml": [Edit('version = "0.1.0"', 'version = "0.2.0"')]},
        tag="v0.2.0",
        tag_message="semverlite 0.2.0: version ranges",
    ),
    Commit(
        "readme-ranges",
        "README: show the API and the range syntax",
        edit={"README.md": [Edit("(https://semver.org, 2.0.0).\n\n", "(https://semver.org, 2.0.0).\n\n" + README_USAGE)]},
    ),
    Commit(
        "fix-bump-major",
        "bump_major: reset the minor version too",
        edit={
            "semverlite/bump.py": [
                Edit(
                    "return _next(v, major=v.major + 1, minor=v.minor, patch=0, prerelease=())",
                    "return _next(v, major=v.major + 1, minor=0, patch=0, prerelease=())",
                )
            ],
            "tests/test_bump.py": [NewTests("test_bump_major_resets_minor_and_patch")],
        },
        author="contributor",
    ),
    Commit(
        "ranges-spacing",
        "ranges: accept a space between an operator and its version",
        edit={
            "semverlite/ranges.py": [
                Edit(
                    "        tokens = alternative.split()\n",
                    '        # "> = 1.2" style spacing: glue an operator to the term that follows it.\n'
                    '        tokens = re.sub(r"(>=|<=|>|<|=|\\^|~)\\s+", r"\\1", alternative.strip()).split()\n',
                )
            ],
            "tests/test_ranges.py": [NewTests("test_operator_spacing_is_tolerated")],
        },
    ),
    Commit(
        "fix-prerelease-numbers",
        "Compare numeric prerelease identifiers as numbers",
        edit={
            "semverlite/version.py": [
                Edit(
                    "def _identifier_key(identifier: str) -> str:\n    return identifier\n",
                    "def _identifier_key(identifier: str) -> Tuple[int, int, str]:\n"
                    "    # Numeric identifiers compare as numbers and sort before alphanumeric ones.\n"
                    "    if identifier.isdigit():\n"
                    '        return (0, int(identifier), "")\n'
                    "    return (1, 0, identifier)\n",
                )
            ],
            "tests/test_version.py": [NewTests("test_numeric_identifiers_compare_as_numbers", "test_semver_spec_example_order")],
        },
        author="contributor",
        merge=True,
    ),
    Commit(
        "readme-precedence",
        "README: say that versions sort by precedence",
        edit={
            "README.md": [
                Edit(
                    "x-ranges (`1.2.x`, `*`) and alternatives joined with `||`.\n\n",
                    "x-ranges (`1.2.x`, `*`) and alternatives joined with `||`.\n\n"
                    "Versions compare by semver precedence: `1.0.0-rc.2 < 1.0.0-rc.10 < 1.0.0`.\n\n",
                )
            ]
        },
    ),
    Commit(
        "fix-caret-zero",
        "Caret ranges on 0.x versions fix the left-most non-zero part",
        edit={
            "semverlite/ranges.py": [
                Edit(
                    "def _caret_upper(major: int, minor: int, patch: int) -> Version:\n"
                    "    # ^1.2.3 := <2.0.0: everything up to the next major version.\n"
                    "    return Version(major + 1, 0, 0)\n",
                    "def _caret_upper(major: int, minor: int, patch: int) -> Version:\n"
                    "    # ^1.2.3 := <2.0.0, ^0.2.3 := <0.3.0, ^0.0.3 := <0.0.4: the left-most non-zero part is fixed.\n"
                    "    if major > 0:\n"
                    "        return Version(major + 1, 0, 0)\n"
                    "    if minor > 0:\n"
                    "        return Version(0, minor + 1, 0)\n"
                    "    return Version(0, 0, patch + 1)\n",
                )
            ],
            "tests/test_ranges.py": [NewTests("test_caret_zero_major_fixes_minor", "test_caret_zero_minor_fixes_patch")],
        },
    ),
    Commit(
        "release-0.3",
        "Release 0.3.0",
        edit={
            "pyproject.toml": [Edit('version = "0.2.0"', 'version = "0.3.0"')],
            "CHANGELOG.md": [
                Edit(
                    "# Changelog\n\n",
                    "# Changelog\n\n## 0.3.0\n- Prerelease identifiers compare numerically when they are numbers.\n"
                    "- Caret ranges on 0.x versions follow npm's rules.\n\n",
                )
            ],
        },
        tag="v0.3.0",
        tag_message="semverlite 0.3.0",
    ),
    Commit(
        "fix-build-metadata",
        "Ignore build metadata in precedence, and drop it when bumping",
        edit={
            "semverlite/version.py": [
                Edit(
                    "return (self.major, self.minor, self.patch, pre, self.build)",
                    "return (self.major, self.minor, self.patch, pre)",
                )
            ],
            "semverlite/bump.py": [
                Edit(
                    "    return replace(version, **changes)\n",
                    "    # Build metadata describes one build, never the next release: always drop it.\n"
                    "    return replace(version, build=(), **changes)\n",
                )
            ],
            "tests/test_version.py": [NewTests("test_build_metadata_ignored_in_precedence")],
            "tests/test_bump.py": [NewTests("test_bumps_drop_build_metadata")],
            "tests/test_ranges.py": [NewTests("test_exact_match_ignores_build_metadata")],
        },
        author="contributor",
    ),
    Commit(
        "min-satisfying",
        "Add min_satisfying",
        edit={
            "semverlite/ranges.py": [
                Edit(
                    "",
                    "\n\ndef min_satisfying(versions: Iterable[Union[str, Version]], range_text: str) -> Optional[Version]:\n"
                    '    """The lowest of `versions` inside the range, or None."""\n'
                    "    matching = [coerce(v) for v in versions if satisfies(v, range_text)]\n"
                    "    return min(matching) if matching else None\n",
                )
            ],
            "semverlite/__init__.py": [Edit("max_satisfying, satisfies", "max_satisfying, min_satisfying, satisfies")],
            "tests/test_ranges.py": [
                Edit("max_satisfying, satisfies", "max_satisfying, min_satisfying, satisfies"),
                Edit(
                    "def test_max_satisfying():\n"
                    '    versions = ["1.0.0", "1.4.2", "1.10.0", "2.0.0"]\n'
                    '    assert str(max_satisfying(versions, "^1.0.0")) == "1.10.0"\n',
                    "def test_max_and_min_satisfying():\n"
                    '    versions = ["1.0.0", "1.4.2", "1.10.0", "2.0.0"]\n'
                    '    assert str(max_satisfying(versions, "^1.0.0")) == "1.10.0"\n'
                    '    assert str(min_satisfying(versions, ">1.0.0")) == "1.4.2"\n',
                ),
            ],
        },
    ),
    Commit(
        "release-0.4",
        "Release 0.4.0",
        edit={
            "pyproject.toml": [Edit('version = "0.3.0"', 'version = "0.4.0"')],
            "CHANGELOG.md": [
                Edit(
                    "# Changelog\n\n",
                    "# Changelog\n\n## 0.4.0\n- `min_satisfying` joins `max_satisfying`.\n"
                    "- Build metadata no longer takes part in precedence.\n\n",
                )
            ],
        },
        tag="v0.4.0",
        tag_message="semverlite 0.4.0",
    ),
    Commit(
        "readme-tests",
        "README: how to run the tests",
        edit={"README.md": [Edit("Run the tests.\n", "Run the tests with `python -m pytest`.\n")]},
        author="contributor",
    ),
]

TASKS = [
    TaskSpec(
        slug="bump-major-keeps-minor",
        fix="fix-bump-major",
        difficulty="easy",
        tags=["single-line", "wrong-constant", "new-test"],
        fail_to_pass=["tests/test_bump.py::test_bump_major_resets_minor_and_patch"],
        problem_statement="""\
bump_major() keeps the old minor version

`bump_major` in `semverlite/bump.py` does not reset the minor number:

```python
>>> from semverlite import bump_major
>>> str(bump_major("1.4.2"))
'2.4.0'
```

Expected `'2.0.0'`: a major bump resets both minor and patch to 0 (semver.org, item 8).
`bump_major("1.0.0")` looks right only because its minor is already 0.
""",
    ),
    TaskSpec(
        slug="prerelease-numeric-order",
        fix="fix-prerelease-numbers",
        difficulty="medium",
        tags=["pass-to-pass", "new-test", "spec-compliance"],
        fail_to_pass=[
            "tests/test_version.py::test_numeric_identifiers_compare_as_numbers",
            "tests/test_version.py::test_semver_spec_example_order",
        ],
        problem_statement="""\
rc.10 sorts before rc.2

We publish release candidates up to `rc.11` and `max()` over our versions picks the wrong one:

```python
>>> from semverlite import parse
>>> parse("1.0.0-rc.10") < parse("1.0.0-rc.2")
True
>>> str(max(map(parse, ["1.0.0-rc.2", "1.0.0-rc.10"])))
'1.0.0-rc.2'
```

Per semver.org section 11, identifiers consisting of only digits are compared numerically, so
`1.0.0-beta.2 < 1.0.0-beta.11` and `1.0.0-rc.9 < 1.0.0-rc.11`. The rest of the precedence rules
(alphanumeric identifiers compare lexically, a numeric identifier has lower precedence than an
alphanumeric one, a shorter prefix sorts first, a release sorts after its prereleases) must keep
working.
""",
    ),
    TaskSpec(
        slug="caret-zero-major",
        fix="fix-caret-zero",
        difficulty="medium",
        tags=["edge-case", "new-test"],
        fail_to_pass=[
            "tests/test_ranges.py::test_caret_zero_major_fixes_minor",
            "tests/test_ranges.py::test_caret_zero_minor_fixes_patch",
        ],
        problem_statement="""\
^0.2.3 accepts 0.9.0

A dependency pinned as `^0.2.3` got upgraded to 0.9.0, which broke us:

```python
>>> from semverlite import satisfies
>>> satisfies("0.9.0", "^0.2.3")
True
>>> satisfies("0.0.4", "^0.0.3")
True
```

Caret ranges should allow changes that do not modify the left-most non-zero part (the npm rule):
`^0.2.3` means `>=0.2.3 <0.3.0` and `^0.0.3` means `>=0.0.3 <0.0.4`. `^1.2.3` (`<2.0.0`) is fine.
""",
    ),
    TaskSpec(
        slug="build-metadata-precedence",
        fix="fix-build-metadata",
        difficulty="hard",
        tags=["multi-file", "new-test", "spec-compliance"],
        fail_to_pass=[
            "tests/test_version.py::test_build_metadata_ignored_in_precedence",
            "tests/test_bump.py::test_bumps_drop_build_metadata",
            "tests/test_ranges.py::test_exact_match_ignores_build_metadata",
        ],
        problem_statement="""\
Build metadata changes precedence (and survives bumps)

Our CI appends `+ci.<n>` to versions. Two problems:

1. Versions that differ only in build metadata are not equal, and sort by the build:
   ```python
   >>> parse("1.0.0+build.1") == parse("1.0.0+build.2")
   False
   >>> satisfies("1.0.0+build.9", "=1.0.0")
   False
   ```
   semver.org (item 10) says build metadata MUST be ignored when determining precedence, so these
   should be equal, hash alike, and satisfy an exact range.
2. Bumping keeps the old build: `str(bump_patch("1.2.3+ci.7"))` gives `'1.2.4+ci.7'`, expected
   `'1.2.4'` (same for `bump_minor` and `finalize`).
""",
    ),
]

LIBRARY = Library(
    name="semverlite",
    owner="patchgym-suite",
    commits=COMMITS,
    tasks=TASKS,
    first_date=1704096000,  # 2024-01-01
)
