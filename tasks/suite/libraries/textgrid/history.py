"""textgrid's history: 12 commits on main (one merged fix branch), four tasks."""

from patchgym.tasks.suite.history import Commit, Edit, Library, NewTests, TaskSpec

README_TABLE = """| style      | looks like                               |
|------------|------------------------------------------|
| `plain`    | columns separated by two spaces          |
| `grid`     | `+---+` borders around every cell        |
| `markdown` | a GitHub pipe table, `|` escaped in cells |

"""

COMMITS = [
    Commit(
        "skeleton",
        "Start textgrid: cell padding, truncation and display width",
        add=["pyproject.toml", "README.md", ".gitignore", "textgrid/__init__.py", "textgrid/width.py", "textgrid/cells.py",
             "tests/test_width.py", "tests/test_cells.py"],
    ),
    Commit(
        "render",
        "Render tables in plain, grid and markdown styles",
        add=["textgrid/columns.py", "textgrid/render.py", "tests/test_columns.py", "tests/test_render.py"],
        edit={"textgrid/__init__.py": [Edit("", "from textgrid.render import STYLES, render\n")]},
        tag="v0.1.0",
    ),
    Commit(
        "readme-example",
        "README: an example",
        edit={
            "README.md": [
                Edit(
                    "Render rows as a plain-text table.\n\n",
                    "Render rows as a plain-text table.\n\n```python\n"
                    '>>> from textgrid import render\n>>> print(render([["apples", 1.5], ["kiwis", 12]], headers=["fruit", "kg"]))\n'
                    "fruit      kg\n------  -----\napples   1.50\nkiwis   12\n```\n\n",
                )
            ]
        },
        author="contributor",
    ),
    Commit(
        "fix-truncate",
        "truncate: leave room for the ellipsis",
        edit={
            "textgrid/cells.py": [Edit("    keep = width + display_width(ellipsis)\n", "    keep = width - display_width(ellipsis)\n")],
            "tests/test_cells.py": [NewTests("test_truncate_fits_the_width", "test_truncate_wide_characters")],
        },
    ),
    Commit(
        "release-0.2",
        "Release 0.2.0 with a changelog",
        add=["CHANGELOG.md"],
        edit={"pyproject.toml": [Edit('version = "0.1.0"', 'version = "0.2.0"')]},
        tag="v0.2.0",
        tag_message="textgrid 0.2.0",
    ),
    Commit(
        "fix-markdown-rule",
        "markdown: mark numeric (decimal) columns as right-aligned in the rule",
        edit={
            "textgrid/render.py": [
                Edit(
                    "zip(widths, alignments)) + \"|\")",
                    "zip(widths, pad_as)) + \"|\")",
                )
            ],
            "tests/test_render.py": [Edit('        "|:-------|:------|\\n"\n', '        "|:-------|------:|\\n"\n')],
        },
        author="contributor",
        merge=True,
    ),
    Commit(
        "readme-styles",
        "README: the styles",
        edit={"README.md": [Edit("```\n\nRun the tests", "```\n\n" + README_TABLE + "Run the tests")]},
    ),
    Commit(
        "fix-wide-characters",
        "Pad and size columns by display width, not by len()",
        edit={
            "textgrid/cells.py": [Edit("    gap = max(width - len(text), 0)\n", "    gap = max(width - display_width(text), 0)\n")],
            "textgrid/columns.py": [
                Edit(
                    "from typing import List, Optional, Sequence\n\n\n",
                    "from typing import List, Optional, Sequence\n\nfrom textgrid.width import display_width\n\n\n",
                ),
                Edit(
                    "            widths[index] = max(widths[index], len(cell))\n",
                    "            widths[index] = max(widths[index], display_width(cell))\n",
                ),
            ],
            "tests/test_cells.py": [NewTests("test_pad_counts_wide_characters")],
            "tests/test_columns.py": [NewTests("test_widths_count_wide_characters")],
            "tests/test_render.py": [NewTests("test_wide_characters_align")],
        },
        author="contributor",
    ),
    Commit(
        "release-0.3",
        "Release 0.3.0",
        edit={
            "pyproject.toml": [Edit('version = "0.2.0"', 'version = "0.3.0"')],
            "CHANGELOG.md": [
                Edit(
                    "# Changelog\n\n",
                    "# Changelog\n\n## 0.3.0\n- Wide characters (CJK, emoji) take two cells when padding and sizing columns.\n\n",
                )
            ],
            "README.md": [
                Edit(
                    "\nRun the tests",
                    "\nNumeric columns are right-aligned on the decimal point; wide (CJK) characters count as two cells.\n\n"
                    "Run the tests",
                )
            ],
        },
        tag="v0.3.0",
        tag_message="textgrid 0.3.0: wide characters",
    ),
    Commit(
        "fix-ragged-tables",
        "Render empty tables and rows of different lengths",
        add=["tests/test_edge_cases.py"],
        edit={
            "textgrid/columns.py": [
                Edit(
                    "    return len(headers) if headers else len(rows[0])\n",
                    "    table = ([list(headers)] if headers else []) + [list(row) for row in rows]\n"
                    "    return max((len(row) for row in table), default=0)\n",
                )
            ],
            "textgrid/render.py": [
                Edit(
                    "    count = column_count(body, head)\n",
                    "    count = column_count(body, head)\n"
                    '    body = [row + [""] * (count - len(row)) for row in body]\n'
                    "    if head:\n"
                    '        head = head + [""] * (count - len(head))\n',
                ),
                Edit('    return "\\n".join(lines)\n', '    return "\\n".join(lines) if count else ""\n'),
            ],
        },
    ),
    Commit(
        "release-0.4",
        "Release 0.4.0",
        edit={
            "pyproject.toml": [Edit('version = "0.3.0"', 'version = "0.4.0"')],
            "CHANGELOG.md": [
                Edit("# Changelog\n\n", "# Changelog\n\n## 0.4.0\n- Tables without rows, and rows of different lengths, render.\n\n")
            ],
        },
        tag="v0.4.0",
        tag_message="textgrid 0.4.0",
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
        slug="truncate-too-long",
        fix="fix-truncate",
        difficulty="easy",
        tags=["single-line", "wrong-operator", "new-test"],
        fail_to_pass=["tests/test_cells.py::test_truncate_fits_the_width", "tests/test_cells.py::test_truncate_wide_characters"],
        problem_statement="""\
truncate() returns text longer than the width

`truncate` in `textgrid/cells.py` is supposed to cut text to at most `width` cells, ellipsis
included, but the result is longer than `width`:

```python
>>> from textgrid.cells import truncate
>>> truncate("abcdefgh", 5)
'abcdef…'
```

Expected `'abcd…'` (5 characters: four letters and the ellipsis). With `ellipsis="..."`,
`truncate("abcdefgh", 3, ellipsis="...")` should give `'...'`.
""",
    ),
    TaskSpec(
        slug="markdown-numeric-rule",
        fix="fix-markdown-rule",
        difficulty="medium",
        tags=["single-line", "changed-test"],
        fail_to_pass=["tests/test_render.py::test_markdown_style"],
        problem_statement="""\
Markdown tables: number columns are marked left-aligned

With `style="markdown"`, numeric columns are padded to the right in the text, but the rule line
marks them as left-aligned, so GitHub renders them flush left:

```python
>>> print(render([["apples", 1.5], ["kiwis", 12]], headers=["fruit", "kg"], style="markdown"))
| fruit  |    kg |
|:-------|:------|
| apples |  1.50 |
| kiwis  | 12    |
```

The second line should be `|:-------|------:|`. An explicit `align=["right"]` already gives `--:`;
only the automatically detected number columns are wrong. The existing test expects the wrong
rule.
""",
    ),
    TaskSpec(
        slug="wide-characters",
        fix="fix-wide-characters",
        difficulty="hard",
        tags=["multi-file", "unicode", "new-test"],
        fail_to_pass=[
            "tests/test_cells.py::test_pad_counts_wide_characters",
            "tests/test_columns.py::test_widths_count_wide_characters",
            "tests/test_render.py::test_wide_characters_align",
        ],
        problem_statement="""\
Tables with Chinese/Japanese text are misaligned

```python
>>> print(render([["東京", 1], ["Paris", 22]], headers=["city", "n"], style="grid"))
+-------+----+
| city  |  n |
+=======+====+
| 東京    |  1 |
| Paris | 22 |
+-------+----+
```

Wide characters take two cells in a terminal, but columns are sized and padded as if they took
one, so the borders do not line up. `textgrid.width.display_width` already knows the right
width (`display_width("東京") == 4`); `pad("東京", 6)` should give `'東京  '` and column widths
should count `東京` as 4.
""",
    ),
    TaskSpec(
        slug="ragged-and-empty-tables",
        fix="fix-ragged-tables",
        difficulty="medium",
        tags=["edge-case", "multi-file", "new-test-file"],
        fail_to_pass=[
            "tests/test_edge_cases.py::test_no_rows_and_no_headers_is_empty",
            "tests/test_edge_cases.py::test_rows_longer_than_the_first_row",
            "tests/test_edge_cases.py::test_short_rows_are_padded_in_grids",
            "tests/test_edge_cases.py::test_headers_shorter_than_rows",
        ],
        problem_statement="""\
render() crashes on empty tables and on rows of different lengths

```python
>>> render([])
IndexError: list index out of range
>>> render([["a"], ["b", "c"]])
IndexError: list index out of range
>>> render([["1", "x", "y"]], headers=["n"])
IndexError: list index out of range
>>> print(render([["a", "b"], ["c"]], style="grid"))
+---+---+
| a | b |
| c |
+---+---+
```

Expected: an empty table renders as `""`; the number of columns is that of the longest row (or
the headers, if longer), and missing cells are blank, so the last example ends in `| c |   |`
and `render([["a"], ["b", "c"]])` gives `"a\\nb  c"`. A table with headers and no rows already
works and must keep working.
""",
    ),
]

LIBRARY = Library(
    name="textgrid",
    owner="patchgym-suite",
    commits=COMMITS,
    tasks=TASKS,
    first_date=1709251200,  # 2024-03-01
)
