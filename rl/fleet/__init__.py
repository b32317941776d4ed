"""patchgym.rl.fleet: sampler fleets (groups of replicas at number formats), routing and checks.

Modules: `model` (the schema: Fleet, Group, KernelVariant), `load` (TOML fleet files, bundled
fleets, FleetError), `build` (one EmbeddedSampler per replica; CPU-scale overrides), `router`
(sessions -> groups by weighted rendezvous -> replicas, failures, stats), `check` (`fleet check`:
each group's mismatch against the trainer's weights), `cli` (`patchgym fleet list|show|check`).
Importing this package (and `fleet list|show`) does not import torch; the router, the builder and
the check do (through the sampler package).
"""

from typing import Any

from .load import FleetError, bundled_fleets, load_fleet, parse_fleet
from .model import Fleet, Group, KernelVariant

# Imported on first use: the router and the builder import the sampler package, which imports
# torch (~2 s), and `patchgym fleet list|show` need neither.
_LAZY = {"Router": "router", "NoReplicaAvailable": "router", "build_samplers": "build", "scaled_fleet": "build"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Fleet",
    "FleetError",
    "Group",
    "KernelVariant",
    "NoReplicaAvailable",
    "Router",
    "build_samplers",
    "bundled_fleets",
    "load_fleet",
    "parse_fleet",
    "scaled_fleet",
]
