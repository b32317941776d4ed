# The two quick-start commands of the README, and a few more. Each target sets up what it needs.
.PHONY: setup demo test test-slow

setup:
	bash .ci/setup

# The main job on embedded defaults: prepare the bundled task suite and validate it with the real
# grader (gold resolves, empty patch does not, twice each so flaky tests show up).
demo: setup
	.venv/bin/patchgym tasks validate bundled --repeat 2

# The default test run (a few minutes); `make test-slow` adds the heavier checks.
test: setup
	.venv/bin/python -m pytest -m "not slow" -q

test-slow: setup
	.venv/bin/python -m pytest -m slow -q
