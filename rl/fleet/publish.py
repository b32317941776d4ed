"""Publishing a new weight version to every sampler replica, encoding each weight format once.

Owns `publish_weights(samplers, weights, version, executor=None)`. A replica that can take weights
already in its format (`EmbeddedSampler`: `encoding_key` and `update_weights_encoded`) is grouped
with the others of the same key, the weights are encoded once per key (off the event loop: in
`executor` when given, else a default worker thread) and the same encoded tensors go to every
replica of it (each copies them into its own parameters); any other sampler (SGLang) gets
`update_weights(weights, version)` as it is.

The loop passes the trainer's own executor: encoding is the trainer's work (at scale the trainer
publishes the views), so it runs where the trainer runs and not on the samplers' cores. Why,
measured (bench/loop, samplers pinned to core 0, trainer to core 1): with encoding in default
worker threads on both cores, a publish took 17.6 s in the asynchronous loop against 5.4 s in the
synchronous one, the difference being decode steps it competed with.

Why: mixed-6 holds 8 groups but only 3 weight encodings (bf16, fp8 W8A8, nvfp4_4over6); encoding
per replica made the cpu-tiny run's publish take 38 s an update (8 encodes, two of them nvfp4 at
~15 s each, side by side on 2 cores). Not covered here: weight views on disk (`patchgym.rl.views`).
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Executor
from typing import Any, Iterable, Mapping


async def publish_weights(
    samplers: Iterable[Any], weights: Mapping[str, Any], version: int, *, executor: Executor | None = None
) -> dict[str, int]:
    """Send `weights` as `version` to every sampler; returns {"encodings": n, "replicas": m}."""
    shared: dict[Any, list[Any]] = {}
    plain: list[Any] = []
    for s in samplers:
        key = getattr(s, "encoding_key", None)
        if key is not None and hasattr(s, "update_weights_encoded") and hasattr(s, "encode_weights"):
            shared.setdefault(key, []).append(s)
        else:
            plain.append(s)

    async def one_encoding(replicas: list[Any]) -> None:
        loop = asyncio.get_running_loop()
        encoded = await loop.run_in_executor(executor, replicas[0].encode_weights, weights, version)
        await asyncio.gather(*(r.update_weights_encoded(encoded, version) for r in replicas))

    await asyncio.gather(*(one_encoding(rs) for rs in shared.values()), *(s.update_weights(weights, version) for s in plain))
    return {"encodings": len(shared), "replicas": sum(len(v) for v in shared.values()) + len(plain)}
