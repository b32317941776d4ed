"""Reward integrity: the grader's own modules in the sandbox cannot be shadowed by the patch.

The reporters, their signed stream (`patchgym_signed_stream`) and helpers (`patchgym_canaries`, `patchgym_audit_hook`,
`patchgym_compiled_tests`) and the signed unittest runner live in a fresh folder on `PYTHONPATH`,
but `python -m pytest` / `python -m patchgym_unittest_reporter` put the working directory (the
repository root) first on `sys.path`. A module of the same name at the root of the patch would be
imported instead: a stub helper switches round 3 off before any of it runs (and runs the patch's
code while the reporter's `_claim` frame, with the HMAC object, is on the stack), and a stub
unittest runner reads the key from stdin and signs whatever it likes. Such files are removed
(`removed_shadowing_module:<path>`), like a root `pytest.py`.
"""

from __future__ import annotations

import textwrap

import pytest

from patchgym.harness.grader import grade_patch
from patchgym.harness.neutralize import SHADOW_EXTRA
from patchgym.harness.results import HELPERS, PLUGIN_CORE, PLUGIN_MODULE, SIGNED_STREAM, UNITTEST_MODULE
from tests.fixtures_grading.calc_task import build_prepared, build_unittest_prepared, diff_of
from tests.test_integrity_round3 import SWAP_IN_A_THREAD, on_first_add

from tests.fixtures_grading.factories import any_factory_or_reason  # noqa: E402  (after the round-3 helpers)

FACTORY, NO_FACTORY = any_factory_or_reason()


def test_every_module_the_grader_puts_on_the_path_is_protected_from_shadowing():
    for name in [PLUGIN_MODULE, PLUGIN_CORE, UNITTEST_MODULE, SIGNED_STREAM[0], *(module for module, _ in HELPERS)]:
        assert name in SHADOW_EXTRA, name


def test_both_reporters_compare_the_globals_of_every_grader_module_in_the_sandbox():
    """Each reporter keeps its own list (the sandbox modules cannot share a constant before the stream
    is claimed); a helper added to `HELPERS` and not to both lists would go unwatched under one runner
    (rt36's x02p was such a gap under unittest)."""
    from patchgym.harness import pytest_reporter, unittest_reporter

    expected = {SIGNED_STREAM[0], *(module for module, _ in HELPERS)}
    assert set(pytest_reporter._GRADER_MODULES) == expected
    assert set(unittest_reporter._GRADER_MODULES) == expected


@pytest.fixture(scope="module")
def task(tmp_path_factory: pytest.TempPathFactory):
    return build_prepared(tmp_path_factory.mktemp("shadow"))


@pytest.fixture(scope="module")
def unittest_task(tmp_path_factory: pytest.TempPathFactory):
    return build_unittest_prepared(tmp_path_factory.mktemp("shadow-unittest"), "calc-ut-shadow")


def grade(task, files):
    prepared, _ = task
    return grade_patch(prepared, diff_of(prepared.repo_dir, files), factory=FACTORY, deadline_s=120)


@pytest.mark.skipif(FACTORY is None, reason=NO_FACTORY or "no sandbox")
def test_stub_helpers_at_the_root_do_not_switch_round_3_off(task):
    # Without canaries, the audit hook and the own compilation, swapping the code of every test
    # function in a thread would pass everything.
    stubs = {f"{module}.py": "raise ImportError('switched off')\n" for module, _ in HELPERS}
    verdict = grade(task, {**stubs, **on_first_add(SWAP_IN_A_THREAD)})
    assert verdict.reward == 0.0 and verdict.status == "tampered", verdict.model_dump_json(indent=1)
    for module, _ in HELPERS:
        assert f"removed_shadowing_module:{module}.py" in verdict.flags, verdict.flags


FORGED_UNITTEST_RUNNER = textwrap.dedent('''\
    import hashlib, hmac, json, os, sys

    config = json.loads(sys.stdin.read())
    key, nonce = bytes.fromhex(config["key"]), config["nonce"]
    seq = [0]


    def emit(kind, **fields):
        payload = json.dumps({"seq": seq[0], "kind": kind, **fields}, sort_keys=True)
        mac = hmac.new(key, f"{nonce}\\n{seq[0]}\\n{payload}".encode(), hashlib.sha256).hexdigest()
        with open(config["results"], "a") as out:
            out.write(f"{payload}\\t{mac}\\n")
        seq[0] += 1


    emit("start", pid=os.getpid())
    for test_id in sys.argv[1:]:
        *module, cls, name = test_id.split(".")
        sys.stderr.write(f"{name} ({'.'.join(module)}.{cls}.{name}) ... ok\\n")
        emit("test", id=test_id, status="PASSED")
    sys.stderr.write("\\n----------------------------------------------------------------------\\n")
    sys.stderr.write(f"Ran {len(sys.argv) - 1} tests in 0.001s\\n\\nOK\\n")
    emit("end", exitstatus=0, testsrun=len(sys.argv) - 1)
    ''')


@pytest.mark.skipif(FACTORY is None, reason=NO_FACTORY or "no sandbox")
def test_forged_unittest_runner_at_the_root_is_removed(unittest_task):
    verdict = grade(unittest_task, {f"{UNITTEST_MODULE}.py": FORGED_UNITTEST_RUNNER})
    assert verdict.reward == 0.0, verdict.model_dump_json(indent=1)
    assert f"removed_shadowing_module:{UNITTEST_MODULE}.py" in verdict.flags, verdict.flags
