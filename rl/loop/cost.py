"""Sampler cost of an update, in list-price dollars, from the fleet file's prices.

Two figures per group and in total (trainer and idle time are excluded, as the reference run did):

* busy cost: the group's busy replica-seconds x GPUs per replica x $ per GPU-hour / 3600. On the
  CPU emulation the busy seconds are CPU seconds, so this is only comparable between runs here.
* turn cost (rl-fleet.md's definition): turns served x the group's $ per turn, where $ per turn =
  list GPU price / turns per GPU-hour, and turns per GPU-hour is what a replica sized as in the
  fleet file serves: sessions per replica x ~90 tok/s per request / ~77 tokens per turn x 3600,
  over its GPUs (sessions per engine were chosen so per-request decode speed is about 90 tok/s
  everywhere; a turn is about 77 output tokens on average). It uses the fleet file's capacity
  before any CPU scale-down, so a tiny run reports what its turns would cost on the real fleet.

It does not measure anything itself: the loop passes per-group busy seconds and turn counts.
"""

from __future__ import annotations

from typing import Mapping

from patchgym.rl.fleet.model import Fleet, Group

DECODE_TOK_S = 90.0  # per-request decode speed the reference fleet was sized for
TOKENS_PER_TURN = 77.0  # mean output tokens of an agent turn in the reference run


def turns_per_gpu_hour(group: Group, *, decode_tok_s: float = DECODE_TOK_S, tokens_per_turn: float = TOKENS_PER_TURN) -> float:
    per_replica = group.sessions_per_replica * decode_tok_s / tokens_per_turn * 3600.0
    return per_replica / group.gpus_per_replica


def price_per_turn(group: Group, **kwargs: float) -> float:
    """List $ per agent turn on this group."""
    return group.price_per_gpu_hour / turns_per_gpu_hour(group, **kwargs)


def busy_cost(group: Group, busy_s: float) -> float:
    """$ of `busy_s` replica-seconds of this group."""
    if busy_s < 0:
        raise ValueError(f"busy seconds must be >= 0, got {busy_s}")
    return busy_s / 3600.0 * group.gpus_per_replica * group.price_per_gpu_hour


def update_cost(fleet: Fleet, busy_s: Mapping[str, float], turns: Mapping[str, int]) -> dict[str, float]:
    """Per group and in total: `cost/busy_usd[/<g>]`, `cost/turn_usd[/<g>]`, `cost/usd_per_turn`.

    Groups missing from `busy_s`/`turns` count as 0 (they served nothing in this update); a name
    that is not in the fleet is an error (it would be priced at nothing).
    """
    names = {g.name for g in fleet.groups}
    unknown = sorted((set(busy_s) | set(turns)) - names)
    if unknown:
        raise ValueError(f"groups not in fleet {fleet.name!r}: {', '.join(unknown)}")
    out: dict[str, float] = {}
    total_busy = total_turn = 0.0
    total_turns = 0
    for group in fleet.groups:
        b = busy_cost(group, float(busy_s.get(group.name, 0.0)))
        n = int(turns.get(group.name, 0))
        t = n * price_per_turn(group)
        out[f"cost/busy_usd/{group.name}"] = b
        out[f"cost/turn_usd/{group.name}"] = t
        total_busy += b
        total_turn += t
        total_turns += n
    out["cost/busy_usd"] = total_busy
    out["cost/turn_usd"] = total_turn
    out["cost/usd_per_turn"] = total_turn / total_turns if total_turns else float("nan")
    return out
