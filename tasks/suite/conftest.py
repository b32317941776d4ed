"""Keeps pytest out of the bundled libraries: their tests run only inside the built task repos.

`libraries/<name>/tree/tests/` hold the libraries' own test suites; collecting them from this tree
(e.g. `pytest tasks/`) would import the libraries from the wrong place and mix suites that share
file names. The root configuration already limits collection to `tests/`; this guards every other
invocation.
"""

collect_ignore_glob = ["*"]
