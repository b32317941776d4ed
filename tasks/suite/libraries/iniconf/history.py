"""iniconf's history: 14 commits on main (one merged fix branch), four tasks, one injected bug."""

from patchgym.tasks.suite.history import Added, Commit, Edit, Library, NewTests, TaskSpec

# The $$ escape, right (before the refactor and after the fix) and wrong (the refactor at base).
PATTERN_RIGHT = '_REFERENCE = re.compile(r"\\$(?:(\\$)|\\{([^{}]*)\\})")\n'
PATTERN_WRONG = '_REFERENCE = re.compile(r"\\$\\{([^{}]*)\\}")\n'
SUBSTITUTE_RIGHT = (
    '    def substitute(match: "re.Match[str]") -> str:\n'
    "        if match.group(1):\n"
    '            return "$"\n'
    "        reference = match.group(2).strip()\n"
)
SUBSTITUTE_WRONG = (
    '    value = value.replace("$$", "$")\n'
    "\n"
    '    def substitute(match: "re.Match[str]") -> str:\n'
    "        reference = match.group(1).strip()\n"
)

README_USAGE = '''```python
>>> from iniconf import loads
>>> config = loads("""
... [server]
... host = example.org
... port = 8080       ; the public port
... url = http://${host}:${port}/
... """)
>>> config.getint("server", "port")
8080
>>> config.get("server", "url")
'http://example.org:8080/'
```

- Sections in `[brackets]`; options as `name = value` or `name: value`; option names are
  case-insensitive.
- Whole-line comments start with `#` or `;`; an inline comment starts with ` ;` or ` #`
  (whitespace first) outside quotes.
- Indented lines continue the previous value.
- `${option}` and `${section:option}` interpolate; `$$` is a literal `$`.
'''

GETTERS = ["int", "float", "bool", "list"]

COMMITS = [
    Commit(
        "skeleton",
        "Start iniconf: lexer, parser and Config",
        add=[
            "pyproject.toml", "README.md", ".gitignore", "iniconf/__init__.py", "iniconf/lexer.py", "iniconf/parser.py",
            "iniconf/config.py", "tests/test_lexer.py", "tests/test_parser.py", "tests/test_config.py",
        ],
    ),
    Commit(
        "values",
        "Typed getters: getint, getfloat, getbool, getlist",
        add=["iniconf/values.py", "tests/test_values.py"],
        edit={
            "iniconf/config.py": [
                Edit("", "from iniconf.values import to_bool, to_float, to_int, to_list\n"),
                Added(*[f"Config.get{kind}" for kind in GETTERS]),
            ],
            "tests/test_config.py": [NewTests("test_typed_getters", "test_typed_getters_still_raise_without_fallback")],
        },
        tag="v0.1.0",
    ),
    Commit(
        "changelog",
        "Keep a changelog",
        add=["CHANGELOG.md"],
        author="contributor",
    ),
    Commit(
        "fix-to-list",
        "to_list: strip whitespace around items",
        edit={
            "iniconf/values.py": [
                Edit(
                    "    return [part for part in parts if part.strip()]\n",
                    "    return [part.strip() for part in parts if part.strip()]\n",
                )
            ],
            "tests/test_values.py": [NewTests("test_to_list_strips_items")],
        },
        author="contributor",
    ),
    Commit(
        "writer",
        "Add dumps(): write a Config back as INI text",
        add=["iniconf/writer.py", "tests/test_writer.py"],
        edit={
            "iniconf/__init__.py": [Edit("", "from iniconf.writer import dumps\n")],
            "pyproject.toml": [Edit('version = "0.1.0"', 'version = "0.2.0"')],
            "CHANGELOG.md": [Edit("# Changelog\n\n", "# Changelog\n\n## 0.2.0\n- `dumps` writes a Config back to INI text.\n\n")],
        },
        tag="v0.2.0",
        tag_message="iniconf 0.2.0: a writer",
    ),
    Commit(
        "interpolate",
        "Interpolate ${option} and ${section:option}; $$ escapes a dollar",
        add=["iniconf/interpolate.py", "tests/test_interpolate.py"],
        edit={
            "iniconf/config.py": [
                Edit("", "from iniconf.interpolate import expand\n"),
                Edit("        return value\n\n    def getint", "        return expand(value, self, section)\n\n    def getint"),
            ],
            "iniconf/__init__.py": [Edit("", "from iniconf.interpolate import InterpolationError\n")],
        },
    ),
    Commit(
        "interpolate-refactor",
        "interpolate: one simpler pattern for references, unescape $$ up front",
        edit={"iniconf/interpolate.py": [Edit(PATTERN_RIGHT, PATTERN_WRONG), Edit(SUBSTITUTE_RIGHT, SUBSTITUTE_WRONG)]},
        author="contributor",
    ),
    Commit(
        "fix-escaped-reference",
        "interpolate: $${name} is a literal ${name} again",
        edit={
            "iniconf/interpolate.py": [Edit(PATTERN_WRONG, PATTERN_RIGHT), Edit(SUBSTITUTE_WRONG, SUBSTITUTE_RIGHT)],
            "tests/test_interpolate.py": [NewTests("test_escaped_reference_stays_literal", "test_escaped_dollar_next_to_reference")],
        },
    ),
    Commit(
        "release-0.3",
        "Release 0.3.0",
        edit={
            "pyproject.toml": [Edit('version = "0.2.0"', 'version = "0.3.0"')],
            "CHANGELOG.md": [
                Edit("# Changelog\n\n", "# Changelog\n\n## 0.3.0\n- Interpolation: `${option}`, `${section:option}` and `$$`.\n\n")
            ],
        },
        tag="v0.3.0",
        tag_message="iniconf 0.3.0: interpolation",
    ),
    Commit(
        "fix-inline-comments",
        "lexer: strip inline comments from values",
        edit={
            "iniconf/lexer.py": [
                Added("strip_inline_comment"),
                Edit(
                    "value = unquote(stripped[split_at + 1 :].strip())",
                    "value = unquote(strip_inline_comment(stripped[split_at + 1 :].strip()))",
                ),
            ],
            "tests/test_lexer.py": [NewTests("test_inline_comment_is_stripped", "test_inline_comment_after_quoted_value")],
        },
        author="contributor",
        merge=True,
    ),
    Commit(
        "readme-usage",
        "README: usage and syntax",
        edit={"README.md": [Edit("A small INI reader and writer.\n\n", "A small INI reader and writer.\n\n" + README_USAGE + "\n")]},
    ),
    Commit(
        "fix-typed-fallback",
        "Typed getters honour fallback; converters accept typed values",
        edit={
            "iniconf/config.py": [
                Edit(f"return to_{kind}(self.get(section, option))", f"return to_{kind}(self.get(section, option, fallback))")
                for kind in GETTERS
            ],
            "iniconf/values.py": [
                Edit(
                    "def to_int(value: Any) -> int:\n    try:",
                    "def to_int(value: Any) -> int:\n"
                    "    if isinstance(value, int) and not isinstance(value, bool):\n        return value\n    try:",
                ),
                Edit(
                    "def to_float(value: Any) -> float:\n    try:",
                    "def to_float(value: Any) -> float:\n"
                    "    if isinstance(value, (int, float)) and not isinstance(value, bool):\n        return float(value)\n    try:",
                ),
                Edit(
                    "def to_bool(value: Any) -> bool:\n    word",
                    "def to_bool(value: Any) -> bool:\n    if isinstance(value, bool):\n        return value\n    word",
                ),
                Edit(
                    "    parts = [part for line",
                    "    if isinstance(value, (list, tuple)):\n        return list(value)\n    parts = [part for line",
                ),
            ],
            "tests/test_config.py": [NewTests("test_typed_getters_use_fallback", "test_typed_getter_fallback_is_not_used_when_present")],
            "tests/test_values.py": [NewTests("test_converters_accept_typed_values")],
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
                    "# Changelog\n\n## 0.4.0\n- Typed getters honour `fallback`.\n"
                    "- Inline comments (` ; note`) are stripped from values.\n\n",
                )
            ],
        },
        tag="v0.4.0",
        tag_message="iniconf 0.4.0",
    ),
    Commit(
        "readme-defaults",
        "README: document [DEFAULT]",
        edit={
            "README.md": [
                Edit(
                    "`$$` is a literal `$`.\n",
                    "`$$` is a literal `$`.\n- Options of `[DEFAULT]` are visible in every section.\n",
                )
            ]
        },
        author="contributor",
    ),
]

TASKS = [
    TaskSpec(
        slug="to-list-strip",
        fix="fix-to-list",
        difficulty="easy",
        tags=["single-line", "new-test"],
        fail_to_pass=["tests/test_values.py::test_to_list_strips_items"],
        problem_statement="""\
to_list() keeps the spaces around items

`to_list` in `iniconf/values.py` returns items with their surrounding whitespace:

```python
>>> from iniconf.values import to_list
>>> to_list("a, b,  c ")
['a', ' b', '  c ']
```

Expected `['a', 'b', 'c']`. `Config.getlist()` has the same problem, so `hosts = a, b` gives
`['a', ' b']`.
""",
    ),
    TaskSpec(
        slug="escaped-reference",
        fix="fix-escaped-reference",
        difficulty="medium",
        tags=["injected-bug", "regression", "new-test"],
        fail_to_pass=["tests/test_interpolate.py::test_escaped_reference_stays_literal"],
        problem_statement="""\
`$${name}` is interpolated instead of staying literal

The README says `$$` is a literal `$`. It works for `price = $$5` (gives `$5`), but not when the
escaped dollar is followed by a brace:

```python
>>> from iniconf import loads
>>> config = loads("[s]\\nname = world\\ntemplate = hello $${name}\\n")
>>> config.get("s", "template")
'hello world'
```

Expected `'hello ${name}'`: we pass these templates on to another tool that does its own
substitution. This used to work; it broke recently.
""",
    ),
    TaskSpec(
        slug="inline-comments",
        fix="fix-inline-comments",
        difficulty="medium",
        tags=["pass-to-pass", "edge-case", "new-test"],
        fail_to_pass=[
            "tests/test_lexer.py::test_inline_comment_is_stripped",
            "tests/test_lexer.py::test_inline_comment_after_quoted_value",
        ],
        problem_statement="""\
Inline comments end up in values

```ini
[server]
port = 8080 ; the public port
debug = yes    # for now
password = "se;cret"  ; rotate monthly
```

`config.get("server", "port")` returns `'8080 ; the public port'` (so `getint` fails),
`debug` is `'yes    # for now'` and `password` is `'"se;cret"  ; rotate monthly'` with the quotes
still on. Expected `'8080'`, `'yes'` and `'se;cret'`.

Careful: only a `;` or `#` that follows whitespace starts a comment, and never inside quotes:
`url = http://example.org/#anchor`, `color = #ff8800` and `password = "se;cret"` must keep their
values as they are today.
""",
    ),
    TaskSpec(
        slug="typed-getter-fallback",
        fix="fix-typed-fallback",
        difficulty="hard",
        tags=["multi-file", "pass-to-pass", "new-test"],
        fail_to_pass=[
            "tests/test_config.py::test_typed_getters_use_fallback",
            "tests/test_values.py::test_converters_accept_typed_values",
        ],
        problem_statement="""\
getint(..., fallback=4) raises MissingOption

The typed getters accept a `fallback` argument but ignore it:

```python
>>> config = loads("[server]\\nport = 8080\\n")
>>> config.getint("server", "workers", fallback=4)
iniconf.config.MissingOption: "no option 'workers' in section [server]"
```

Expected `4`. Same for `getfloat`, `getbool` and `getlist` (`getbool(..., fallback=True)` should
give `True`, `getlist(..., fallback=[])` should give `[]`). Without a fallback they must still
raise `MissingOption`, and a present option must win over the fallback. The converters in
`iniconf/values.py` (`to_int`, `to_float`, `to_bool`, `to_list`) should accept values that already
have the right type (e.g. `to_int(5) == 5`) as well as strings.
""",
    ),
]

LIBRARY = Library(
    name="iniconf",
    owner="patchgym-suite",
    commits=COMMITS,
    tasks=TASKS,
    first_date=1706745600,  # 2024-02-01
)
