# The two quick-start commands of the README, and a few more. Each target sets up what it needs.
.PHONY: setup demo validate lint test test-slow

setup:
	bash .ci/setup

# The main job on embedded defaults: the bundled RL run on this CPU machine (SmolLM2-135M-Instruct,
# the six-class mixed fleet emulated in one process, the real environment service on loopback, a
# cached supervised warm-up, sc_mis updates with top-p replay, an evaluation, plots, a checkpoint).
demo: setup
	.venv/bin/patchgym train --preset cpu-tiny --out runs/cpu-tiny

# Prepare the 16 bundled tasks and validate them with the real grader (gold resolves, the empty
# patch does not, twice each so flaky tests show up).
validate: setup
	.venv/bin/patchgym tasks validate bundled --repeat 2

lint: setup
	.venv/bin/ruff check .

# The default test run (about 10 minutes on 2 cores: 608 s in an idle CI at stop 57); `make test-slow`
# adds the heavier checks (about 16 minutes: 955 s at stop 56).
test: setup
	.venv/bin/python -m pytest -m "not slow" -q

test-slow: setup
	.venv/bin/python -m pytest -m slow -q
