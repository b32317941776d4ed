"""Fixtures shared by the test modules: the real prepared task and local factory of the sandbox
tests, a bystander sandbox that must survive whatever a test does to another one, and the real
SmolLM2-135M-Instruct tokenizer and model of the rollout, sampler and emulation tests (imported on
first use, so tests without them never import torch).

The builders behind them (`make_prepared`, `local_available`, `host_traces`) live in
tests/test_sandbox_support.py, where bench/sandbox imports them too; the toy task of the env tests
is `patchgym.env.testing.make_toy_task` / `prepare_toy_task`. Each fixture is module-scoped as it
was where it came from (one prepared task and one factory per test module).
"""

from __future__ import annotations

import pytest

from patchgym.tasks.prepared import PreparedTask

from .test_sandbox_support import host_traces, local_available, make_prepared


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> PreparedTask:
    return make_prepared(tmp_path_factory.mktemp("task"))


@pytest.fixture(scope="module")
def local_factory(tmp_path_factory: pytest.TempPathFactory):
    reason = local_available()
    if reason:
        pytest.skip(reason)
    from patchgym.harness.sandbox.local import LocalSandboxFactory

    factory = LocalSandboxFactory(state_root=tmp_path_factory.mktemp("sandbox-state"))
    yield factory
    factory.close_all()


@pytest.fixture()
def bystander(local_factory, prepared):
    """A second sandbox that must keep working whatever the first one does."""
    box = local_factory.open(prepared)
    yield box
    assert box.run("echo still-here").output == "still-here\n"
    box.close()
    assert host_traces(local_factory, box.name) == []


@pytest.fixture(scope="module")
def tokenizer():
    from patchgym.rl.models import load_tokenizer

    return load_tokenizer()


@pytest.fixture(scope="session")
def torch_device() -> str:
    """Where the model tests that take a device run: $PATCHGYM_TEST_DEVICE, default cpu
    (bench/gpu/run.sh runs them again with cuda)."""
    import os

    return os.environ.get("PATCHGYM_TEST_DEVICE", "cpu")


@pytest.fixture(scope="module")
def model():
    from patchgym.rl.models import load_model

    return load_model()


@pytest.fixture
def copies_and_forks_alone(monkeypatch):
    """The equality probe off (`results.EQUALITY_PROBE`) for tests of the contradiction copies and
    the forks: their lying values are ones the probe stops first, and what they test is the
    mechanism behind it, there for the lies the probe cannot see (a memo of the first expectation,
    an `__eq__` that is not the patch's own)."""
    from patchgym.harness import results

    monkeypatch.setattr(results, "EQUALITY_PROBE", False)
