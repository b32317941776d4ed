"""One decode engine for several sampler groups with the same formats; each group keeps its own face.

Owns `GroupReplica` (the `Sampler` a router sees for one group's replica) and `shared_replicas`
(build the engines and their faces for a list of groups).

Why: a group's decode step streams its own copy of the weights, and on a CPU that is the whole
cost of a step at small batch. mixed-6 has 8 groups but 3 weight encodings (nvfp4_4over6, fp8
W8A8, bf16); 8 engines at batch 1 gave 14.6 tok/s here, 3 engines serving the same 8 sessions
38.3 tok/s (8 requests of 128 tokens on 300-token prompts, one torch thread). What stays per group:
each request runs under its group's kernel variant (attention splits, accumulation dtype) row by
row in the shared batch (`emulation.AttentionContext`), its tokens are labelled with its group,
its capacity is its own (`sessions_per_replica`, and a queue of the same size), its busy time is
the time a request of it was in the engine and its compute time that of the steps that held a row
of it (`embedded.py` says why both), and its sessions' prefix caches are
its own (session ids are prefixed with the group's name, so no group reads keys another group's
kernels computed). What is shared: the weights (one encoding, one version for all members) and
the decode thread, as if the groups' pools took turns on one device. Not covered here: the
router (`patchgym.rl.fleet.router`), the engine itself (`embedded.py`).
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Mapping, Sequence

from patchgym.rl.sampler.embedded import EmbeddedSampler
from patchgym.rl.sampler.types import Generation, SamplerHealth, SamplingParams


class _Once:
    """Apply each weight version to an engine once, however many of its faces are asked to."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.done: dict[int, tuple[threading.Event, list[BaseException]]] = {}

    async def run(self, version: int, apply: Any) -> None:
        with self.lock:
            entry = self.done.get(version)
            owner = entry is None
            if owner:
                entry = (threading.Event(), [])
                self.done[version] = entry
                for old in [v for v in self.done if v < version - 4]:
                    del self.done[old]
        event, errors = entry
        if owner:
            try:
                await apply()
            except BaseException as exc:
                errors.append(exc)
                with self.lock:
                    self.done.pop(version, None)  # a later call may try again
                raise
            finally:
                event.set()
        else:
            await asyncio.to_thread(event.wait)
            if errors:
                raise errors[0]


class GroupReplica:
    """The replica of one group, served by an engine it may share with other groups."""

    def __init__(self, engine: EmbeddedSampler, group: str) -> None:
        engine._member(group)
        self.engine = engine
        self.group = group
        self.replica = engine.replica
        self.group_config = engine.groups[group]
        if not hasattr(engine, "_once"):
            engine._once = _Once()  # type: ignore[attr-defined]
            engine._faces = 0  # type: ignore[attr-defined]
        engine._faces += 1  # type: ignore[attr-defined]
        self._closed = False

    def _sid(self, session_id: str | None) -> str | None:
        return None if session_id is None else f"{self.group}|{session_id}"

    async def generate(self, prompt_ids: list[int], params: SamplingParams, *, session_id: str | None = None,
                       min_version: int | None = None) -> Generation:
        return await self.engine.generate(prompt_ids, params, session_id=self._sid(session_id), min_version=min_version, group=self.group)

    def generate_sync(self, prompt_ids: list[int], params: SamplingParams, *, session_id: str | None = None,
                      min_version: int | None = None, timeout: float | None = None) -> Generation:
        return self.engine.generate_sync(prompt_ids, params, session_id=self._sid(session_id), min_version=min_version,
                                         timeout=timeout, group=self.group)

    def health(self) -> SamplerHealth:
        return self.engine.health(group=self.group)

    @property
    def version(self) -> int:
        return self.engine.version

    @property
    def encoding_key(self) -> tuple:
        return self.engine.encoding_key

    @property
    def quantized_names(self) -> set[str]:
        return self.engine.quantized_names

    @property
    def model(self) -> Any:
        return self.engine.model

    def encode_weights(self, state_dict_or_path: Mapping[str, Any] | str, version: int) -> dict[str, Any]:
        return self.engine.encode_weights(state_dict_or_path, version)

    async def update_weights(self, state_dict_or_path: Mapping[str, Any] | str, version: int) -> None:
        await self.engine._once.run(int(version), lambda: self.engine.update_weights(state_dict_or_path, version))  # type: ignore[attr-defined]

    async def update_weights_encoded(self, encoded: Mapping[str, Any], version: int) -> None:
        await self.engine._once.run(int(version), lambda: self.engine.update_weights_encoded(encoded, version))  # type: ignore[attr-defined]

    def update_weights_sync(self, state_dict_or_path: Mapping[str, Any] | str, version: int) -> None:
        asyncio.run(self.update_weights(state_dict_or_path, version))

    def logits(self, token_ids: list[int], **kwargs: Any) -> Any:
        return self.engine.logits(token_ids, group=self.group, **kwargs)

    def close(self) -> None:
        """The engine stops when the last of its faces is closed."""
        if self._closed:
            return
        self._closed = True
        self.engine._faces -= 1  # type: ignore[attr-defined]
        if self.engine._faces <= 0:  # type: ignore[attr-defined]
            self.engine.close()


def sharing_key(group: Any) -> tuple[str, str, str]:
    """Groups with equal keys can share an engine: the same weights, activations and KV formats."""
    return (group.weights, group.activations, group.kv_cache)


def shared_replicas(groups: Sequence[Any], model: Any, *, tokenizer: Any = None, version: int = 0,
                    **engine_kwargs: Any) -> dict[str, list[GroupReplica]]:
    """{group: [replica, ...]}: replica i of every group with the same `sharing_key` is one engine
    (so groups with more replicas than others get engines of their own for the extra ones)."""
    by_key: dict[tuple, list[Any]] = {}
    for g in groups:
        by_key.setdefault(sharing_key(g), []).append(g)
    out: dict[str, list[GroupReplica]] = {g.name: [] for g in groups}
    for members in by_key.values():
        for i in range(max(g.replicas for g in members)):
            here = [g for g in members if g.replicas > i]
            engine = EmbeddedSampler(model, here[0], tokenizer=tokenizer, replica=str(i), version=version, members=here[1:],
                                     **engine_kwargs)
            for g in here:
                out[g.name].append(GroupReplica(engine, g.name))
    return out
