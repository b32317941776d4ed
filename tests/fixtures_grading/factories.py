"""Which sandbox the grading tests run in: the real `local` backend when it is available here,
else the bubblewrap stand-in (tests/fixtures_grading/devsandbox.py). Tests that need the local
backend's memory and process limits ask for `local_factory` and are skipped without it."""

from __future__ import annotations

import shutil

from patchgym.harness.sandbox.base import SandboxFactory


def local_factory_or_reason() -> tuple[SandboxFactory | None, str]:
    if not shutil.which("bwrap"):
        return None, "bubblewrap is not installed"
    try:
        from patchgym.harness.sandbox.base import get_factory

        return get_factory("local"), ""
    except Exception as exc:  # the backend module is absent or cannot start here
        return None, f"the local sandbox backend is not available: {exc}"


def any_factory_or_reason() -> tuple[SandboxFactory | None, str]:
    factory, reason = local_factory_or_reason()
    if factory is not None:
        return factory, ""
    if not shutil.which("bwrap"):
        return None, reason
    from tests.fixtures_grading.devsandbox import DevSandboxFactory

    return DevSandboxFactory(), ""
