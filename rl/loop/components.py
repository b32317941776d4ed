"""Building the real parts a run drives, from its config: model, tokenizer, samplers, router, trainer.

Owns `Components` (what the loop needs, so a test can hand it test doubles instead) and
`build_components(cfg, model=...)`: the fleet (with the CPU scale-down applied by the fleet's own
`build_samplers`), one `EmbeddedSampler` per replica, the `Router`, the `EmbeddedTrainer`, and the
BF16 evaluation sampler. Also `call_with_supported` (pass a function only the keyword arguments
it declares: the builders' signatures belong to their owners) and `pin_threads` (CPU affinity of
named threads, so samplers and trainer sit on separate cores as they sit on separate GPUs at
scale). It does not run the loop.
"""

from __future__ import annotations

import inspect
import os
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from .config import RunConfig

EVAL_GROUP = "eval-bf16"


def call_with_supported(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call `fn` with the positional args and only those keyword args its signature accepts."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return fn(*args, **kwargs)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return fn(*args, **kwargs)
    return fn(*args, **{k: v for k, v in kwargs.items() if k in params})


def pin_threads(name_prefixes: tuple[str, ...], cores: set[int]) -> list[str]:
    """Pin live threads whose name starts with one of the prefixes to `cores`; returns their names.

    Linux only (`os.sched_setaffinity` on a thread's native id); elsewhere it pins nothing.
    """
    if not hasattr(os, "sched_setaffinity"):
        return []
    pinned = []
    for thread in threading.enumerate():
        if thread.name.startswith(name_prefixes) and thread.native_id is not None:
            try:
                os.sched_setaffinity(thread.native_id, cores)
                pinned.append(thread.name)
            except OSError:
                pass
    return pinned


@dataclass
class Components:
    tokenizer: Any
    trainer: Any  # patchgym.rl.trainer.base.Trainer
    fleet: Any  # the fleet as loaded (file capacities: routing shares and prices)
    samplers: Mapping[str, list[Any]]  # group -> replicas (Sampler protocol)
    router: Any  # .generate(session_id, prompt_ids, params, *, min_version=None), .end_session, .stats()
    eval_sampler_factory: Callable[[], tuple[Any, Any]] | None = None  # -> (router over one BF16 group, [samplers])
    extra: dict[str, Any] = field(default_factory=dict)

    def all_samplers(self) -> list[Any]:
        return [s for replicas in self.samplers.values() for s in replicas]


def scaled_fleet(cfg: RunConfig):
    """The run's fleet: the file's groups (or the configured subset)."""
    from patchgym.rl.fleet.load import load_fleet

    fleet = load_fleet(cfg.fleet.name)
    if cfg.fleet.groups:
        names = {g.name for g in fleet.groups}
        unknown = sorted(set(cfg.fleet.groups) - names)
        if unknown:
            raise ValueError(f"fleet.groups: {', '.join(unknown)} not in fleet {fleet.name!r} (groups: {', '.join(sorted(names))})")
        fleet = fleet.model_copy(update={"groups": [g for g in fleet.groups if g.name in cfg.fleet.groups]})
    return fleet


def trainer_kwargs(cfg: RunConfig) -> dict[str, Any]:
    o, l = cfg.optimizer, cfg.loss
    return dict(
        loss=l.kind, loss_kwargs={"low": l.mis_low, "high": l.mis_high, "cap": l.tis_cap, "level": l.level},
        lr=o.lr, weight_decay=o.weight_decay, betas=tuple(o.betas), grad_clip=o.grad_clip,
        micro_batch_tokens=o.micro_batch_tokens, temperature=cfg.sampling.temperature, seed=cfg.seed,
        sft_lr=cfg.warmup.lr, autocast_bf16=o.autocast_bf16,
    )


def build_trainer(cfg: RunConfig, model: Any) -> Any:
    from patchgym.rl.trainer.embedded import EmbeddedTrainer

    return call_with_supported(EmbeddedTrainer, model, **trainer_kwargs(cfg))


def eval_group(sessions: int):
    from patchgym.rl.fleet.model import Fleet, Group

    group = Group(name=EVAL_GROUP, accelerator="trainer", weights="bf16", activations="bf16", kv_cache="bf16",
                  replicas=1, sessions_per_replica=sessions)
    return Fleet(name="eval", description="evaluation: one BF16 group", groups=[group])


def build_eval_sampler(model: Any, sessions: int, *, seed: int = 0, tokenizer: Any = None) -> tuple[Any, list[Any]]:
    """A router over one BF16 sampler (evaluation is always sampled in BF16, whatever the fleet)."""
    from patchgym.rl.fleet.router import Router
    from patchgym.rl.sampler.embedded import EmbeddedSampler

    fleet = eval_group(sessions)
    sampler = EmbeddedSampler(model, fleet.groups[0], tokenizer=tokenizer)
    return Router({EVAL_GROUP: [sampler]}, fleet, seed=seed), [sampler]


def build_components(cfg: RunConfig, *, model: Any = None, tokenizer: Any = None) -> Components:
    from patchgym.rl.fleet.router import Router
    from patchgym.rl.models import load_model, load_tokenizer

    tokenizer = tokenizer or load_tokenizer(cfg.model.spec)
    model = model if model is not None else load_model(cfg.model.spec)
    fleet = scaled_fleet(cfg)
    from patchgym.rl.fleet.build import build_samplers
    samplers = build_samplers(
        fleet, model, tokenizer=tokenizer, replicas=cfg.fleet.replicas, sessions_per_replica=cfg.fleet.sessions_per_replica,
        share_engines=cfg.fleet.share_engines,
    )
    router = call_with_supported(Router, samplers, fleet, seed=cfg.seed)
    trainer = build_trainer(cfg, model)
    return Components(
        tokenizer=tokenizer, trainer=trainer, fleet=fleet, samplers={k: list(v) for k, v in samplers.items()}, router=router,
        eval_sampler_factory=lambda: build_eval_sampler(trainer.model, cfg.eval.sessions, seed=cfg.seed, tokenizer=tokenizer),
    )
