"""Sandboxes: one interface (base.py), backends local (bubblewrap), docker, modal; and the table
that turns a backend's name into its factory (`BACKENDS`, `get_factory`).

The table names each factory as "module:attribute" and imports it only when asked (the way
`patchgym.cli.main.COMMANDS` names the subcommands), so this package imports no backend and no
backend's import of base.py closes a cycle: base.py defines the interface and imports nothing of
the backends. `get_factory` is also importable from base.py, where callers have long found it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the type only: importing base here at run time is not needed
    from patchgym.harness.sandbox.base import SandboxFactory

# backend name -> "module:attribute" of its SandboxFactory subclass
BACKENDS: dict[str, str] = {
    "local": "patchgym.harness.sandbox.local:LocalSandboxFactory",
    "docker": "patchgym.harness.sandbox.docker_backend:DockerSandboxFactory",
    "modal": "patchgym.harness.sandbox.modal_backend:ModalSandboxFactory",
}


def factory_class(backend: str) -> type["SandboxFactory"]:
    """The factory class of a backend name (ValueError naming the choices for an unknown one)."""
    target = BACKENDS.get(backend) if isinstance(backend, str) else None
    if target is None:
        names = list(BACKENDS)
        raise ValueError(f"unknown sandbox backend {backend!r}: choose {', '.join(names[:-1])} or {names[-1]}")
    module_name, attribute = target.split(":")
    return getattr(importlib.import_module(module_name), attribute)


def get_factory(backend: str = "local", **options: Any) -> "SandboxFactory":
    """The sandbox factory for a backend name: `local` (bubblewrap, default), `docker`, `modal`."""
    return factory_class(backend)(**options)
