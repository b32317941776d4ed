"""Which sandbox the grading tests run in: the real `local` backend when it is available here, else
none, and the tests that grade are skipped with the reason. (A bubblewrap stand-in used to take
over; it had fallen behind the backend's layout, and every grading through it was `infra_error`.)"""

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
    return local_factory_or_reason()
